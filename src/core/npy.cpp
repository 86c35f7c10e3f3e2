#include "yolocu/npy.hpp"

#include <zlib.h>

#include <cstring>
#include <iterator>
#include <limits>

#include "core/check.hpp"
#include "yolocu/atomic_file.hpp"
#include "core/file_util.hpp"

namespace yolocu {
namespace {

using detail::fail;

struct DescrMap {
  const char* descr;
  DType dtype;
};
constexpr DescrMap kDescr[] = {{"<f4", DType::kFloat32}, {"<f2", DType::kFloat16}, {"<f8", DType::kFloat64},
                               {"<i8", DType::kInt64},   {"<i4", DType::kInt32},   {"|i1", DType::kInt8},
                               {"|u1", DType::kUInt8},   {"|b1", DType::kBool}};

const char* descr_of(DType t) {
  for (const auto& d : kDescr)
    if (d.dtype == t) return d.descr;
  return "?";
}

// Extracts the python-literal value following 'key': in the header dict.
std::string header_field(const std::string& header, const std::string& key, const std::string& what) {
  const std::string k = "'" + key + "'";
  const size_t p = header.find(k);
  YOLOCU_CHECK(p != std::string::npos, kParse, what, ": .npy header has no ", k);
  size_t q = header.find(':', p + k.size());
  YOLOCU_CHECK(q != std::string::npos, kParse, what, ": malformed .npy header");
  ++q;
  while (q < header.size() && header[q] == ' ') ++q;
  YOLOCU_CHECK(q < header.size(), kParse, what, ": malformed .npy header");
  size_t end;
  if (header[q] == '(') {
    end = header.find(')', q);
    YOLOCU_CHECK(end != std::string::npos, kParse, what, ": malformed shape in .npy header");
    ++end;
  } else if (header[q] == '\'') {
    end = header.find('\'', q + 1);
    YOLOCU_CHECK(end != std::string::npos, kParse, what, ": malformed .npy header");
    ++end;
  } else {
    end = header.find_first_of(",}", q);
    YOLOCU_CHECK(end != std::string::npos, kParse, what, ": malformed .npy header");
  }
  return header.substr(q, end - q);
}

}  // namespace

Tensor parse_npy(const void* data, size_t size, const std::string& what) {
  const auto* p = static_cast<const uint8_t*>(data);
  YOLOCU_CHECK(size >= 10 && std::memcmp(p, "\x93NUMPY", 6) == 0, kParse, what,
               ": not a .npy file (missing \\x93NUMPY magic)");
  const int major = p[6];
  size_t header_len, offset;
  if (major == 1) {
    header_len = p[8] | (p[9] << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    YOLOCU_CHECK(size >= 12, kParse, what, ": truncated .npy header");
    header_len = static_cast<size_t>(p[8]) | (static_cast<size_t>(p[9]) << 8) |
                 (static_cast<size_t>(p[10]) << 16) | (static_cast<size_t>(p[11]) << 24);
    offset = 12;
  } else {
    fail(ErrorCode::kUnsupported, what, ": .npy format version ", major, " is not supported");
  }
  YOLOCU_CHECK(header_len <= size - offset, kParse, what, ": truncated .npy header");
  const std::string header(reinterpret_cast<const char*>(p + offset), header_len);
  std::string descr = header_field(header, "descr", what);
  YOLOCU_CHECK(descr.size() >= 2, kParse, what, ": malformed descr");
  descr = descr.substr(1, descr.size() - 2);
  if (descr == "<u1" || descr == "<i1" || descr == "<b1") descr[0] = '|';
  DType dtype{};
  bool found = false;
  for (const auto& d : kDescr)
    if (descr == d.descr) {
      dtype = d.dtype;
      found = true;
    }
  YOLOCU_CHECK(found, kUnsupported, what, ": .npy dtype '", descr,
               "' is not supported (little-endian f2/f4/f8/i1/u1/i4/i8/b1 are)");
  const std::string order = header_field(header, "fortran_order", what);
  YOLOCU_CHECK(order == "False", kUnsupported, what, ": Fortran-ordered .npy arrays are not supported");
  const std::string shape_text = header_field(header, "shape", what);
  Shape shape;
  size_t i = 1;
  while (i < shape_text.size()) {
    while (i < shape_text.size() && (shape_text[i] == ' ' || shape_text[i] == ',')) ++i;
    if (i >= shape_text.size() || shape_text[i] == ')') break;
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(shape_text.substr(i), &used);
    } catch (const std::exception&) {
      fail(ErrorCode::kParse, what, ": malformed shape ", shape_text);
    }
    YOLOCU_CHECK(used > 0 && v >= 0, kParse, what, ": malformed shape ", shape_text);
    shape.push_back(v);
    i += used;
    while (i < shape_text.size() && shape_text[i] == 'L') ++i;
  }
  const size_t data_off = offset + header_len;
  const int64_t numel = shape_numel(shape);
  const size_t avail = size - data_off;
  YOLOCU_CHECK(numel >= 0 && static_cast<uint64_t>(numel) <= avail / dtype_size(dtype), kParse, what,
               ": .npy data truncated: shape ", shape_str(shape), " needs ",
               static_cast<uint64_t>(numel) * dtype_size(dtype), " bytes, file has ", avail);
  Tensor t(dtype, shape);
  if (t.nbytes()) std::memcpy(t.data(), p + data_off, t.nbytes());
  return t;
}

Tensor load_npy(const std::string& path) {
  const std::string bytes = detail::read_file(path);
  return parse_npy(bytes.data(), bytes.size(), path);
}

void save_npy(const std::string& path, const Tensor& t) {
  std::string header = "{'descr': '";
  header += descr_of(t.dtype());
  header += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.rank(); ++i) {
    header += std::to_string(t.dim(i));
    if (t.rank() == 1 || i + 1 < t.rank()) header += ",";
    if (i + 1 < t.rank()) header += " ";
  }
  header += "), }";
  // Pad with spaces so that magic + len + header + '\n' is a multiple of 64.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const uint16_t hl = static_cast<uint16_t>(header.size());
  const char len[2] = {static_cast<char>(hl & 0xff), static_cast<char>(hl >> 8)};
  AtomicFile f(path);
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(len, 2);
  f.write(header);
  f.write(t.data(), t.nbytes());
  f.commit();
}

namespace {
uint32_t rd32(const uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24); }
uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint64_t rd64(const uint8_t* p) { return rd32(p) | (static_cast<uint64_t>(rd32(p + 4)) << 32); }
}  // namespace

std::map<std::string, Tensor> load_npz(const std::string& path) {
  const std::string file = detail::read_file(path);
  return parse_npz(file.data(), file.size(), path);
}

// Every offset and size below comes from the file: each is compared with the bytes present by
// subtraction from n (never by adding to a value that may be near 2^64).
std::map<std::string, Tensor> parse_npz(const void* data, size_t size, const std::string& path) {
  const auto* b = static_cast<const uint8_t*>(data);
  const size_t n = size;
  YOLOCU_CHECK(n >= 22, kParse, path, ": not an .npz (zip) archive");
  // End of central directory: search backwards over the maximal comment length.
  size_t eocd = std::string::npos;
  for (size_t i = n - 22 + 1; i-- > 0 && n - i <= 22 + 65535;) {
    if (rd32(b + i) == 0x06054b50u) {
      eocd = i;
      break;
    }
  }
  YOLOCU_CHECK(eocd != std::string::npos, kParse, path, ": not an .npz (zip) archive");
  uint64_t entries = rd16(b + eocd + 10);
  uint64_t cd_off = rd32(b + eocd + 16);
  if (cd_off == 0xffffffffu || entries == 0xffffu) {  // zip64 end of central directory
    YOLOCU_CHECK(eocd >= 20 && rd32(b + eocd - 20) == 0x07064b50u, kParse, path, ": broken zip64 locator");
    const uint64_t z64 = rd64(b + eocd - 20 + 8);
    YOLOCU_CHECK(n >= 56 && z64 <= n - 56 && rd32(b + z64) == 0x06064b50u, kParse, path, ": broken zip64 directory");
    entries = rd64(b + z64 + 32);
    cd_off = rd64(b + z64 + 48);
  }
  std::map<std::string, Tensor> out;
  uint64_t pos = cd_off;
  for (uint64_t e = 0; e < entries; ++e) {
    YOLOCU_CHECK(pos <= n && n - pos >= 46 && rd32(b + pos) == 0x02014b50u, kParse, path,
                 ": corrupt zip central directory");
    const uint16_t method = rd16(b + pos + 10);
    uint64_t csize = rd32(b + pos + 20), usize = rd32(b + pos + 24);
    const uint16_t name_len = rd16(b + pos + 28), extra_len = rd16(b + pos + 30), comment_len = rd16(b + pos + 32);
    uint64_t local = rd32(b + pos + 42);
    YOLOCU_CHECK(uint64_t{46} + name_len + extra_len + comment_len <= n - pos, kParse, path, ": corrupt zip entry");
    std::string name(reinterpret_cast<const char*>(b + pos + 46), name_len);
    // zip64 extra field: present values replace the 0xffffffff placeholders, in this order.
    const uint8_t* ex = b + pos + 46 + name_len;
    for (size_t k = 0; k + 4 <= extra_len;) {
      const uint16_t id = rd16(ex + k), sz = rd16(ex + k + 2);
      if (k + 4 + sz > extra_len) break;
      if (id == 0x0001) {
        size_t q = k + 4;
        if (usize == 0xffffffffu && q + 8 <= k + 4 + sz) { usize = rd64(ex + q); q += 8; }
        if (csize == 0xffffffffu && q + 8 <= k + 4 + sz) { csize = rd64(ex + q); q += 8; }
        if (local == 0xffffffffu && q + 8 <= k + 4 + sz) { local = rd64(ex + q); q += 8; }
      }
      k += 4 + sz;
    }
    pos += 46 + name_len + extra_len + comment_len;
    YOLOCU_CHECK(n >= 30 && local <= n - 30 && rd32(b + local) == 0x04034b50u, kParse, path,
                 ": corrupt zip local header");
    const uint64_t data_off = local + 30 + rd16(b + local + 26) + rd16(b + local + 28);
    YOLOCU_CHECK(data_off <= n && csize <= n - data_off, kParse, path, ": zip entry '", name, "' is truncated");
    // deflate expands at most ~1032:1; a larger claim is a lie (or a bomb) - refuse it before allocating
    YOLOCU_CHECK(usize <= (uint64_t{1} << 36) && usize <= csize * 1032 + 1024, kParse, path, ": zip entry '", name,
                 "' claims ", usize, " bytes uncompressed from ", csize, " compressed");
    std::string raw;
    if (method == 0) {
      raw.assign(reinterpret_cast<const char*>(b + data_off), csize);
    } else if (method == 8) {
      raw.resize(usize);
      z_stream zs{};
      YOLOCU_CHECK(inflateInit2(&zs, -15) == Z_OK, kInternal, "zlib inflateInit2 failed");
      zs.next_in = const_cast<Bytef*>(b + data_off);
      YOLOCU_CHECK(csize <= UINT32_MAX && usize <= UINT32_MAX, kUnsupported, path, ": zip entry '", name,
                   "' is larger than 4 GiB");
      zs.avail_in = static_cast<uInt>(csize);
      zs.next_out = reinterpret_cast<Bytef*>(raw.data());
      zs.avail_out = static_cast<uInt>(usize);
      const int rc = inflate(&zs, Z_FINISH);
      const uint64_t produced = zs.total_out;
      inflateEnd(&zs);
      YOLOCU_CHECK(rc == Z_STREAM_END && produced == usize, kParse, path, ": cannot inflate zip entry '", name, "'");
    } else {
      fail(ErrorCode::kUnsupported, path, ": zip compression method ", method, " of entry '", name, "'");
    }
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    out[name] = parse_npy(raw.data(), raw.size(), path + ":" + name);
  }
  return out;
}

}  // namespace yolocu
