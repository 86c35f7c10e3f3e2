#include "preprocess/preprocess_test_util.hpp"

#include <png.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace yolocu::test {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::vector<uint8_t> encode_png(int w, int h, int color_type, int bit_depth,
                                const std::vector<uint8_t>& pixels, const std::vector<uint8_t>& palette,
                                const std::vector<uint8_t>& trns, bool interlaced) {
  // (everything the error path sees is declared before setjmp)
  std::vector<uint8_t> out;
  std::vector<png_color> pal;
  std::vector<png_bytep> rows(static_cast<size_t>(h));
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw std::runtime_error("libpng failed encoding a PNG");
  }
  png_set_write_fn(
      png, &out,
      [](png_structp p, png_bytep data, png_size_t n) {
        auto* o = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(p));
        o->insert(o->end(), data, data + n);
      },
      [](png_structp) {});
  png_set_IHDR(png, info, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), bit_depth,
               color_type, interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) {
    for (size_t i = 0; i + 2 < palette.size(); i += 3) {
      pal.push_back(png_color{palette[i], palette[i + 1], palette[i + 2]});
    }
    png_set_PLTE(png, info, pal.data(), static_cast<int>(pal.size()));
  }
  if (!trns.empty()) {
    png_set_tRNS(png, info, trns.data(), static_cast<int>(trns.size()), nullptr);
  }
  png_write_info(png, info);
  const size_t row_bytes = pixels.size() / static_cast<size_t>(h);
  for (int y = 0; y < h; ++y) {
    rows[static_cast<size_t>(y)] = const_cast<png_bytep>(pixels.data() + row_bytes * static_cast<size_t>(y));
  }
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

void write_png(const std::string& path, int w, int h, int color_type, int bit_depth,
               const std::vector<uint8_t>& pixels, const std::vector<uint8_t>& palette,
               const std::vector<uint8_t>& trns, bool interlaced) {
  write_bytes(path, encode_png(w, h, color_type, bit_depth, pixels, palette, trns, interlaced));
}

std::vector<uint8_t> encode_png_bgr(const Image& bgr) {
  std::vector<uint8_t> rgb(bgr.size_bytes());
  for (size_t i = 0; i + 2 < rgb.size(); i += 3) {
    rgb[i] = bgr.data()[i + 2];
    rgb[i + 1] = bgr.data()[i + 1];
    rgb[i + 2] = bgr.data()[i];
  }
  return encode_png(bgr.width(), bgr.height(), PNG_COLOR_TYPE_RGB, 8, rgb);
}

std::vector<uint8_t> with_exif_orientation(const std::vector<uint8_t>& jpeg, int orientation,
                                           bool big_endian) {
  auto put16 = [&](std::vector<uint8_t>& v, unsigned x) {
    if (big_endian) {
      v.push_back(uint8_t(x >> 8));
      v.push_back(uint8_t(x));
    } else {
      v.push_back(uint8_t(x));
      v.push_back(uint8_t(x >> 8));
    }
  };
  auto put32 = [&](std::vector<uint8_t>& v, uint32_t x) {
    if (big_endian) {
      put16(v, x >> 16);
      put16(v, x & 0xffff);
    } else {
      put16(v, x & 0xffff);
      put16(v, x >> 16);
    }
  };
  std::vector<uint8_t> tiff;
  tiff.push_back(big_endian ? 'M' : 'I');
  tiff.push_back(big_endian ? 'M' : 'I');
  put16(tiff, 42);
  put32(tiff, 8);          // IFD0 offset
  put16(tiff, 1);          // one entry
  put16(tiff, 0x0112);     // Orientation
  put16(tiff, 3);          // SHORT
  put32(tiff, 1);          // count
  put16(tiff, static_cast<unsigned>(orientation));
  put16(tiff, 0);          // padding of the 4-byte value field
  put32(tiff, 0);          // no next IFD
  std::vector<uint8_t> app1 = {0xFF, 0xE1, 0, 0, 'E', 'x', 'i', 'f', 0, 0};
  app1.insert(app1.end(), tiff.begin(), tiff.end());
  const size_t len = app1.size() - 2;
  app1[2] = uint8_t(len >> 8);
  app1[3] = uint8_t(len);
  std::vector<uint8_t> out(jpeg.begin(), jpeg.begin() + 2);  // SOI
  out.insert(out.end(), app1.begin(), app1.end());
  out.insert(out.end(), jpeg.begin() + 2, jpeg.end());
  return out;
}

std::string compare_bytes(const uint8_t* expected, const uint8_t* actual, size_t n, int row_bytes) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; ++i) {
    if (expected[i] != actual[i]) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad == 0) return "";
  std::ostringstream os;
  os << bad << " of " << n << " bytes differ; first at byte " << first << " (row "
     << first / static_cast<size_t>(row_bytes) << ", column "
     << first % static_cast<size_t>(row_bytes) / 3 << ", channel " << first % 3
     << "): expected " << int(expected[first]) << ", got " << int(actual[first]);
  return os.str();
}

}  // namespace yolocu::test
