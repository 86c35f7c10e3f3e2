// TIFF through libtiff, read from memory (TIFFClientOpenExt) with its messages captured, not
// printed; the first directory through the RGBA interface (TIFFReadRGBAImageOriented), alpha dropped.
#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "core/check.hpp"
#include "preprocess/image_decode_formats.hpp"

namespace yolocu::detail {

void check_decode_limits(int w, int h, const DecodeLimits& limits, const std::string& name);

namespace {

struct MemoryFile {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
  std::string error;  // libtiff's first error message
};

tmsize_t mem_read(thandle_t h, void* buf, tmsize_t n) {
  auto* f = static_cast<MemoryFile*>(h);
  const size_t k = std::min(static_cast<size_t>(std::max<tmsize_t>(n, 0)), f->size - f->pos);
  std::memcpy(buf, f->data + f->pos, k);
  f->pos += k;
  return static_cast<tmsize_t>(k);
}
tmsize_t mem_write(thandle_t, void*, tmsize_t) { return 0; }
toff_t mem_seek(thandle_t h, toff_t off, int whence) {
  auto* f = static_cast<MemoryFile*>(h);
  uint64_t base = whence == SEEK_CUR ? f->pos : whence == SEEK_END ? f->size : 0;
  const uint64_t to = base + off;
  if (to > f->size) return static_cast<toff_t>(-1);
  f->pos = static_cast<size_t>(to);
  return to;
}
int mem_close(thandle_t) { return 0; }
toff_t mem_size(thandle_t h) { return static_cast<MemoryFile*>(h)->size; }
int mem_map(thandle_t, void**, toff_t*) { return 0; }
void mem_unmap(thandle_t, void*, toff_t) {}

int on_error(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* f = static_cast<MemoryFile*>(user);
  if (f->error.empty()) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    f->error = std::string(module ? module : "libtiff") + ": " + buf;
  }
  return 1;  // handled: libtiff's global handler (stderr) is not called
}
int on_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

struct TiffCloser {
  void operator()(TIFF* t) const { TIFFClose(t); }
};

}  // namespace

bool is_tiff(const uint8_t* d, size_t n) {
  return n >= 4 && ((d[0] == 'I' && d[1] == 'I' && d[2] == 42 && d[3] == 0) ||
                    (d[0] == 'M' && d[1] == 'M' && d[2] == 0 && d[3] == 42));
}

Image decode_tiff(const uint8_t* data, size_t size, const DecodeLimits& limits, const std::string& name) {
  MemoryFile file{data, size, 0, {}};
  TIFFOpenOptions* opts = TIFFOpenOptionsAlloc();
  YOLOCU_CHECK(opts != nullptr, kOutOfMemory, name, ": TIFF: libtiff could not start");
  TIFFOpenOptionsSetErrorHandlerExtR(opts, on_error, &file);
  TIFFOpenOptionsSetWarningHandlerExtR(opts, on_warning, &file);
  TIFFOpenOptionsSetMaxSingleMemAlloc(opts, static_cast<tmsize_t>(limits.max_decoder_memory));
  std::unique_ptr<TIFF, TiffCloser> tif(TIFFClientOpenExt(name.c_str(), "rm", &file, mem_read, mem_write, mem_seek,
                                                          mem_close, mem_size, mem_map, mem_unmap, opts));
  TIFFOpenOptionsFree(opts);
  YOLOCU_CHECK(tif != nullptr, kParse, name, ": TIFF: ", file.error.empty() ? "cannot read the header" : file.error);
  uint32_t w = 0, h = 0;
  TIFFGetField(tif.get(), TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(tif.get(), TIFFTAG_IMAGELENGTH, &h);
  YOLOCU_CHECK(w > 0 && h > 0 && w <= 0x7fffffffu && h <= 0x7fffffffu, kParse, name, ": TIFF: invalid image size ",
               w, "x", h);
  check_decode_limits(static_cast<int>(w), static_cast<int>(h), limits, name);
  char why[1024] = {};
  YOLOCU_CHECK(TIFFRGBAImageOK(tif.get(), why), kUnsupported, name, ": TIFF: ", why);
  std::vector<uint32_t> rgba(static_cast<size_t>(w) * h);
  const int ok = TIFFReadRGBAImageOriented(tif.get(), w, h, rgba.data(), ORIENTATION_TOPLEFT, 0);
  YOLOCU_CHECK(ok == 1 && file.error.empty(), kParse, name, ": TIFF: ",
               file.error.empty() ? "corrupt or truncated data" : file.error);
  Image im(static_cast<int>(w), static_cast<int>(h));
  for (uint32_t y = 0; y < h; ++y) {
    uint8_t* dst = im.row(static_cast<int>(y));
    const uint32_t* src = rgba.data() + static_cast<size_t>(y) * w;
    for (uint32_t x = 0; x < w; ++x, dst += 3) {
      dst[0] = static_cast<uint8_t>(TIFFGetB(src[x]));
      dst[1] = static_cast<uint8_t>(TIFFGetG(src[x]));
      dst[2] = static_cast<uint8_t>(TIFFGetR(src[x]));
    }
  }
  return im;
}

}  // namespace yolocu::detail
