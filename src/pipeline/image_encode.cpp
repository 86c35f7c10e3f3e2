// Image encoders for annotated output: JPEG through libjpeg(-turbo), PNG through libpng, and the
// file writer that picks one from the file name and replaces the file only once it is complete.
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

// after <cstdio>: jpeglib.h needs size_t and FILE declared
#include <jpeglib.h>
#include <png.h>

#include "core/check.hpp"
#include "yolocu/atomic_file.hpp"
#include "yolocu/annotate.hpp"

namespace yolocu {
namespace {

void check_view(const char* what, const ImageView& im) {
  YOLOCU_CHECK(im.data && im.width > 0 && im.height > 0 && im.pitch_bytes >= static_cast<size_t>(im.width) * 3,
               kInvalidArgument, what, ": invalid image view ", im.width, "x", im.height);
}

// libjpeg error handler: longjmp back to jpeg_encode_c (no C++ objects live across the jump).
struct JpegError {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};
void jpeg_on_error(j_common_ptr cinfo) { std::longjmp(reinterpret_cast<JpegError*>(cinfo->err)->jump, 1); }

// C-style core: returns false on a libjpeg error; *out is malloc'd by libjpeg (caller frees).
bool jpeg_encode_c(const ImageView& im, int quality, unsigned char** out, unsigned long* size) {
  jpeg_compress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = jpeg_on_error;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, out, size);
  cinfo.image_width = static_cast<JDIMENSION>(im.width);
  cinfo.image_height = static_cast<JDIMENSION>(im.height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_EXT_BGR;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(im.data + static_cast<size_t>(cinfo.next_scanline) * im.pitch_bytes);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

// libpng: errors longjmp back to png_encode_c; the bytes are appended to a std::string through
// the write callback (a C++ object the jump does not skip: it lives in the caller).
void png_on_error(png_structp png, png_const_charp) { png_longjmp(png, 1); }
void png_on_warning(png_structp, png_const_charp) {}
void png_write_memory(png_structp png, png_bytep data, size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), n);
}
void png_flush_memory(png_structp) {}

bool png_encode_c(png_structp png, png_infop info, const ImageView& im, std::string* out) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, out, png_write_memory, png_flush_memory);
  png_set_IHDR(png, info, static_cast<png_uint_32>(im.width), static_cast<png_uint_32>(im.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_set_bgr(png);
  for (int y = 0; y < im.height; ++y)
    png_write_row(png, const_cast<png_bytep>(im.data + static_cast<size_t>(y) * im.pitch_bytes));
  png_write_end(png, nullptr);
  return true;
}

bool ends_with_ci(const std::string& s, const char* suffix) {
  const std::string x(suffix);
  if (s.size() < x.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    char c = s[s.size() - x.size() + i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != x[i]) return false;
  }
  return true;
}

}  // namespace

std::string encode_jpeg(const ImageView& im, int quality) {
  check_view("encode_jpeg", im);
  YOLOCU_CHECK(im.width <= 65500 && im.height <= 65500, kInvalidArgument, "encode_jpeg: ", im.width, "x",
               im.height, " exceeds the JPEG size limit 65500");
  YOLOCU_CHECK(quality >= 1 && quality <= 100, kInvalidArgument, "encode_jpeg: quality must be 1..100, got ",
               quality);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const bool ok = jpeg_encode_c(im, quality, &buf, &size);
  std::string out;
  if (ok && buf) out.assign(reinterpret_cast<const char*>(buf), size);
  std::free(buf);
  YOLOCU_CHECK(ok, kInternal, "encode_jpeg: libjpeg failed");
  return out;
}

std::string encode_png(const ImageView& im) {
  check_view("encode_png", im);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, png_on_error, png_on_warning);
  YOLOCU_CHECK(png != nullptr, kOutOfMemory, "encode_png: libpng could not start");
  png_infop info = png_create_info_struct(png);
  std::string out;
  const bool ok = info != nullptr && png_encode_c(png, info, im, &out);
  png_destroy_write_struct(&png, info ? &info : nullptr);
  YOLOCU_CHECK(ok, kInternal, "encode_png: libpng failed");
  return out;
}

std::string encode_image(const std::string& path, const ImageView& im) {
  if (ends_with_ci(path, ".png")) return encode_png(im);
  YOLOCU_CHECK(ends_with_ci(path, ".jpg") || ends_with_ci(path, ".jpeg"), kInvalidArgument, path,
               ": unknown image format (the name must end in .jpg, .jpeg or .png)");
  return encode_jpeg(im);
}

// Both through write_file_atomic: a temporary file beside the target, renamed over it; a failed
// write names the path and the system's reason and leaves the previous file as it was.
void write_image(const std::string& path, const ImageView& im) { write_file_atomic(path, encode_image(path, im)); }

void write_jpeg(const std::string& path, const ImageView& im, int quality) {
  write_file_atomic(path, encode_jpeg(im, quality));
}

}  // namespace yolocu
