// JPEG (libjpeg-turbo) and PNG (libpng) decoding to 8-bit BGR, matching OpenCV 4.6 cv::imread
// with IMREAD_COLOR: the same library calls and conversions, EXIF orientation for JPEG. WebP and
// TIFF: image_decode_webp.cpp, image_decode_tiff.cpp; BMP: src/video/bmp_decode.cpp (FFmpeg).
//
// Both libraries report errors through a callback that must not return: ours longjmp back to a
// small C-style function (no C++ objects with destructors live between setjmp and longjmp), which
// returns false; the C++ caller then throws yolocu::Error. Nothing is printed.
#include <algorithm>
#include <climits>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

// clang-format off
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>
// clang-format on

#include "core/check.hpp"
#include "core/file_util.hpp"
#include "preprocess/image_decode_formats.hpp"
#include "preprocess/image_decode_plan.hpp"
#include "yolocu/image.hpp"

namespace yolocu {

Image::Image(int width, int height) {
  YOLOCU_CHECK(width >= 0 && height >= 0, kInvalidArgument, "Image: negative size ", width, "x",
               height);
  const size_t n = static_cast<size_t>(width) * 3 * static_cast<size_t>(height);
  data_.reset(new uint8_t[n > 0 ? n : 1]);
  width_ = width;
  height_ = height;
}

namespace {

using detail::fail;

constexpr size_t kMaxMessage = 256;
// libpng: the largest ancillary chunk it may allocate (its own default), how many unknown or text
// chunks it keeps. (Its IHDR limit of 1,000,000 pixels a side stays; DecodeLimits is checked after.)
constexpr int64_t kMaxPngChunkBytes = 8'000'000;
constexpr png_uint_32 kMaxPngChunks = 1000;

void check_limits(int w, int h, const DecodeLimits& limits, const std::string& name) {
  detail::check_decode_limits(w, h, limits, name);
}

// ---- EXIF orientation ---------------------------------------------------------------------------
// OpenCV reads the first APP1 segment of a JPEG (whatever it holds), skips 6 bytes ("Exif\0\0")
// and parses IFD0 of the TIFF structure that follows; tag 0x0112 is the orientation (1..8).
int exif_orientation(const uint8_t* d, size_t n) {
  if (n < 8) return 1;
  bool little;
  if (d[0] == 'I' && d[1] == 'I') {
    little = true;
  } else if (d[0] == 'M' && d[1] == 'M') {
    little = false;
  } else {
    return 1;
  }
  auto u16 = [&](size_t o) -> uint32_t {
    return little ? uint32_t(d[o]) | uint32_t(d[o + 1]) << 8 : uint32_t(d[o]) << 8 | d[o + 1];
  };
  auto u32 = [&](size_t o) -> uint32_t {
    return little ? u16(o) | u16(o + 2) << 16 : u16(o) << 16 | u16(o + 2);
  };
  if (u16(2) != 0x2A) return 1;
  const size_t ifd = u32(4);
  if (ifd > n || n - ifd < 2) return 1;
  const size_t count = u16(ifd);
  for (size_t i = 0; i < count; ++i) {
    const size_t e = ifd + 2 + 12 * i;
    if (e > n || n - e < 12) break;
    if (u16(e) == 0x0112) return static_cast<int>(u16(e + 8));
  }
  return 1;
}

bool orientation_transposes(int o) { return o >= 5 && o <= 8; }

// cv::imread's ApplyExifOrientation: 2 flip x, 3 flip both, 4 flip y, 5 transpose, 6 transpose +
// flip x, 7 transpose + flip both, 8 transpose + flip y; anything else leaves the image as is.
Image apply_orientation(Image img, int o) {
  if (o < 2 || o > 8) return img;
  const bool transpose = orientation_transposes(o);
  const bool flip_x = o == 2 || o == 3 || o == 6 || o == 7;
  const bool flip_y = o == 3 || o == 4 || o == 7 || o == 8;
  const int ow = transpose ? img.height() : img.width();
  const int oh = transpose ? img.width() : img.height();
  Image out(ow, oh);
  for (int y = 0; y < oh; ++y) {
    uint8_t* d = out.row(y);
    const int ty = flip_y ? oh - 1 - y : y;
    for (int x = 0; x < ow; ++x) {
      const int tx = flip_x ? ow - 1 - x : x;
      const int sx = transpose ? ty : tx, sy = transpose ? tx : ty;
      const uint8_t* s = img.row(sy) + 3 * static_cast<size_t>(sx);
      d[3 * x] = s[0];
      d[3 * x + 1] = s[1];
      d[3 * x + 2] = s[2];
    }
  }
  return out;
}

// ---- JPEG ----------------------------------------------------------------------------------------
struct JpegErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  int scan_limit;       // DecodeLimits::max_scans (0: none); zeroed by JpegDecoder's memset
  bool scans_exceeded;  // the progress monitor stopped the decode
};

void jpeg_on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings (level -1) are tolerated like OpenCV does, except the data ending early: libjpeg would
// pad the image with grey, we report the file as truncated.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level < 0) {
    if (cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_on_error(cinfo);
    cinfo->err->num_warnings++;
  }
}

void jpeg_silent(j_common_ptr) {}

// The error manager and the progress monitor of one decompressor: libjpeg calls the monitor once
// per iMCU row while it reads a progressive file's scans, so a file of many scans stops at the
// first row of the scan over the limit.
struct JpegProgress {
  jpeg_progress_mgr pub;
  JpegErrorManager* err;
};

void jpeg_on_progress(j_common_ptr cinfo) {
  auto* p = reinterpret_cast<JpegProgress*>(cinfo->progress);
  const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (p->err->scan_limit > 0 && d->input_scan_number > p->err->scan_limit) {
    p->err->scans_exceeded = true;
    std::snprintf(p->err->message, sizeof p->err->message, "more than %d scans", p->err->scan_limit);
    std::longjmp(p->err->jump, 1);
  }
}

// libjpeg's answers when max_memory_to_use is too small for its buffers (no backing store here).
bool jpeg_memory_refusal(int msg_code) {
  return msg_code == JERR_NO_BACKING_STORE || msg_code == JERR_OUT_OF_MEMORY || msg_code == JERR_TFILE_CREATE;
}

struct JpegDecoder {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  JpegProgress progress;
  long memory_limit = 0;  // max_memory_to_use, set once the decompressor exists
  bool created = false;

  explicit JpegDecoder(const DecodeLimits& limits = {}) {
    std::memset(&cinfo, 0, sizeof cinfo);
    std::memset(&err, 0, sizeof err);
    std::memset(&progress, 0, sizeof progress);
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = jpeg_on_error;
    err.pub.emit_message = jpeg_on_message;
    err.pub.output_message = jpeg_silent;
    err.scan_limit = limits.max_scans;
    progress.pub.progress_monitor = jpeg_on_progress;
    progress.err = &err;
    memory_limit = static_cast<long>(std::min<int64_t>(limits.max_decoder_memory, LONG_MAX));
  }
  ~JpegDecoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;
};

bool jpeg_read_header_c(JpegDecoder& j, const uint8_t* data, size_t size) {
  if (setjmp(j.err.jump)) return false;
  jpeg_create_decompress(&j.cinfo);
  j.created = true;
  j.cinfo.mem->max_memory_to_use = j.memory_limit;
  j.cinfo.progress = &j.progress.pub;  // after jpeg_create_decompress, which zeroes the struct
  jpeg_mem_src(&j.cinfo, data, static_cast<unsigned long>(size));
  jpeg_save_markers(&j.cinfo, JPEG_APP0 + 1, 0xffff);
  jpeg_read_header(&j.cinfo, TRUE);
  if (j.cinfo.num_components == 4) {
    j.cinfo.out_color_space = JCS_CMYK;
    j.cinfo.out_color_components = 4;
  } else {
    j.cinfo.out_color_space = JCS_EXT_BGR;
    j.cinfo.out_color_components = 3;
  }
  jpeg_calc_output_dimensions(&j.cinfo);
  return true;
}

// Decodes every scanline into dst (BGR rows of `pitch` bytes). With cmyk_row, rows are read as
// CMYK into that buffer and converted like OpenCV's icvCvt_CMYK2BGR (c' = k - (255 - c) * k / 256).
bool jpeg_read_pixels_c(JpegDecoder& j, uint8_t* dst, size_t pitch, uint8_t* cmyk_row) {
  if (setjmp(j.err.jump)) return false;
  jpeg_start_decompress(&j.cinfo);
  while (j.cinfo.output_scanline < j.cinfo.output_height) {
    uint8_t* out = dst + pitch * j.cinfo.output_scanline;
    JSAMPROW row = cmyk_row != nullptr ? cmyk_row : out;
    if (jpeg_read_scanlines(&j.cinfo, &row, 1) != 1) ERREXIT(&j.cinfo, JERR_INPUT_EMPTY);
    if (cmyk_row != nullptr) {
      for (JDIMENSION x = 0; x < j.cinfo.output_width; ++x) {
        const int c = cmyk_row[4 * x], m = cmyk_row[4 * x + 1], y = cmyk_row[4 * x + 2],
                  k = cmyk_row[4 * x + 3];
        out[3 * x] = static_cast<uint8_t>(k - ((255 - y) * k >> 8));
        out[3 * x + 1] = static_cast<uint8_t>(k - ((255 - m) * k >> 8));
        out[3 * x + 2] = static_cast<uint8_t>(k - ((255 - c) * k >> 8));
      }
    }
  }
  jpeg_finish_decompress(&j.cinfo);
  return true;
}

// The orientation of the first APP1 segment libjpeg saved (OpenCV reads that one, whatever it holds).
int saved_orientation(const JpegDecoder& j) {
  for (jpeg_saved_marker_ptr m = j.cinfo.marker_list; m != nullptr; m = m->next) {
    if (m->marker == JPEG_APP0 + 1) {
      return m->data_length > 6 ? exif_orientation(m->data + 6, m->data_length - 6) : 1;
    }
  }
  return 1;
}

// kOutOfMemory naming the limit when the decode stopped at one, else kParse with libjpeg's message.
[[noreturn]] void jpeg_fail(const JpegDecoder& j, const DecodeLimits& limits, const std::string& name) {
  if (j.err.scans_exceeded) detail::check_scan_limit(limits.max_scans + 1, limits, name);
  if (jpeg_memory_refusal(j.err.pub.msg_code)) {
    fail(ErrorCode::kOutOfMemory, name, ": JPEG: decoding needs more working memory than the decode limit (",
         "DecodeLimits max_decoder_memory ", limits.max_decoder_memory, " bytes): ", j.err.message);
  }
  fail(ErrorCode::kParse, name, ": JPEG: ", j.err.message);
}

// The pixels as coded; the decompressor (and a progressive file's coefficient buffer) is gone
// before the caller rotates, so the two never coexist with the rotated copy.
Image decode_jpeg_pixels(const uint8_t* data, size_t size, const DecodeLimits& limits, const std::string& name,
                         int* orientation) {
  JpegDecoder j(limits);
  if (!jpeg_read_header_c(j, data, size)) jpeg_fail(j, limits, name);
  *orientation = saved_orientation(j);
  const int w = static_cast<int>(j.cinfo.output_width), h = static_cast<int>(j.cinfo.output_height);
  YOLOCU_CHECK(j.cinfo.output_width <= 0x7fffffffu && j.cinfo.output_height <= 0x7fffffffu, kParse,
               name, ": JPEG: invalid image size");
  if (orientation_transposes(*orientation)) {
    check_limits(h, w, limits, name);
  } else {
    check_limits(w, h, limits, name);
  }
  // A progressive file's scans are counted from its markers before any is decoded (as the GPU
  // route's plan does): a scan bomb is refused up front, whatever a later scan holds.
  if (j.cinfo.progressive_mode) detail::check_scan_limit(detail::count_jpeg_scans(data, size), limits, name);
  Image img(w, h);
  std::vector<uint8_t> cmyk;
  if (j.cinfo.out_color_space == JCS_CMYK) cmyk.resize(static_cast<size_t>(w) * 4);
  if (!jpeg_read_pixels_c(j, img.data(), img.pitch_bytes(), cmyk.empty() ? nullptr : cmyk.data())) {
    jpeg_fail(j, limits, name);
  }
  return img;
}

Image decode_jpeg(const uint8_t* data, size_t size, const DecodeLimits& limits, const std::string& name) {
  int orientation = 1;
  Image img = decode_jpeg_pixels(data, size, limits, name, &orientation);
  return apply_orientation(std::move(img), orientation);
}

// ---- PNG -----------------------------------------------------------------------------------------
struct PngSource {
  const uint8_t* data;
  size_t size;
  size_t pos;
  char message[kMaxMessage];
};

void png_on_error(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof src->message, "%s", msg != nullptr ? msg : "error");
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}

void png_read_memory(png_structp png, png_bytep out, size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) png_error(png, "unexpected end of data (truncated file)");
  std::memcpy(out, src->data + src->pos, n);
  src->pos += n;
}

struct PngDecoder {
  png_structp png = nullptr;
  png_infop info = nullptr;
  png_infop end = nullptr;
  ~PngDecoder() {
    if (png != nullptr) png_destroy_read_struct(&png, info ? &info : nullptr, end ? &end : nullptr);
  }
};

bool png_read_header_c(PngDecoder& p, PngSource* src) {
  if (setjmp(png_jmpbuf(p.png))) return false;
  png_set_read_fn(p.png, src, png_read_memory);
  png_read_info(p.png, p.info);
  return true;
}

// The transformations OpenCV 4.6 requests for an 8-bit 3-channel result: strip 16 -> 8 bits (high
// byte), drop alpha (no blending), palette -> RGB, expand 1/2/4-bit grey, grey -> RGB, RGB -> BGR.
bool png_read_pixels_c(PngDecoder& p, png_bytep* rows, size_t row_bytes) {
  if (setjmp(png_jmpbuf(p.png))) return false;
  const int depth = png_get_bit_depth(p.png, p.info);
  const int color = png_get_color_type(p.png, p.info);
  if (depth == 16) png_set_strip_16(p.png);
  png_set_strip_alpha(p.png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(p.png);
  if ((color & PNG_COLOR_MASK_COLOR) == 0 && depth < 8) png_set_expand_gray_1_2_4_to_8(p.png);
  if ((color & PNG_COLOR_MASK_COLOR) != 0) {
    png_set_bgr(p.png);
  } else {
    png_set_gray_to_rgb(p.png);
  }
  png_set_interlace_handling(p.png);
  png_read_update_info(p.png, p.info);
  if (png_get_rowbytes(p.png, p.info) != row_bytes) png_error(p.png, "unexpected row size");
  png_read_image(p.png, rows);
  png_read_end(p.png, p.end);
  return true;
}

Image decode_png(const uint8_t* data, size_t size, const DecodeLimits& limits,
                 const std::string& name) {
  PngSource src{data, size, 0, {}};
  PngDecoder p;
  p.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
  YOLOCU_CHECK(p.png != nullptr, kOutOfMemory, name, ": PNG: cannot create the decoder");
  p.info = png_create_info_struct(p.png);
  p.end = png_create_info_struct(p.png);
  YOLOCU_CHECK(p.info != nullptr && p.end != nullptr, kOutOfMemory, name,
               ": PNG: cannot create the decoder");
  // libpng's own caps: ancillary chunks (iCCP, zTXt, sPLT: decompressed into memory) and how many
  // of them are kept; the image itself is checked against DecodeLimits right after the header.
  png_set_chunk_malloc_max(p.png, static_cast<png_alloc_size_t>(
                                      std::min<int64_t>(limits.max_decoder_memory, kMaxPngChunkBytes)));
  png_set_chunk_cache_max(p.png, kMaxPngChunks);
  if (!png_read_header_c(p, &src)) fail(ErrorCode::kParse, name, ": PNG: ", src.message);
  const png_uint_32 w = png_get_image_width(p.png, p.info), h = png_get_image_height(p.png, p.info);
  YOLOCU_CHECK(w <= 0x7fffffffu && h <= 0x7fffffffu, kParse, name, ": PNG: invalid image size");
  check_limits(static_cast<int>(w), static_cast<int>(h), limits, name);
  Image img(static_cast<int>(w), static_cast<int>(h));
  std::vector<png_bytep> rows(h);
  for (png_uint_32 y = 0; y < h; ++y) rows[y] = img.row(static_cast<int>(y));
  if (!png_read_pixels_c(p, rows.data(), img.pitch_bytes())) {
    fail(ErrorCode::kParse, name, ": PNG: ", src.message);
  }
  return img;
}

}  // namespace

namespace detail {

bool is_jpeg(const uint8_t* d, size_t n) { return n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF; }

bool is_png(const uint8_t* d, size_t n) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  return n >= 8 && std::memcmp(d, kSignature, 8) == 0;
}

void check_decode_limits(int w, int h, const DecodeLimits& limits, const std::string& name) {
  YOLOCU_CHECK(w > 0 && h > 0, kParse, name, ": invalid image size ", w, "x", h);
  YOLOCU_CHECK(w <= limits.max_width && h <= limits.max_height &&
                   int64_t{w} * h <= limits.max_pixels,
               kOutOfMemory, name, ": image of ", w, "x", h,
               " pixels exceeds the decode limit (DecodeLimits max_width ", limits.max_width,
               ", max_height ", limits.max_height, ", max_pixels ", limits.max_pixels, ")");
}

void check_scan_limit(int scans, const DecodeLimits& limits, const std::string& name) {
  YOLOCU_CHECK(scans <= limits.max_scans, kOutOfMemory, name, ": JPEG: progressive image of more than ",
               limits.max_scans, " scans exceeds the decode limit (DecodeLimits max_scans ", limits.max_scans, ")");
}

int count_jpeg_scans(const uint8_t* d, size_t n) {
  int scans = 0;
  size_t i = 2;  // after SOI
  while (i + 1 < n) {
    if (d[i] != 0xFF) {
      ++i;
      continue;
    }
    const uint8_t m = d[i + 1];
    if (m == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    i += 2;
    if (m == 0xD9) break;                                              // EOI
    if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD8)) continue;  // stuffing, TEM, RSTn, SOI
    if (i + 1 >= n) break;
    const size_t len = size_t{d[i]} << 8 | d[i + 1];
    if (len < 2) break;
    i += len;
    if (m != 0xDA) continue;
    ++scans;  // the entropy-coded data runs to the next marker other than RSTn or a stuffed 0
    while (i + 1 < n && !(d[i] == 0xFF && d[i + 1] != 0x00 && !(d[i + 1] >= 0xD0 && d[i + 1] <= 0xD7))) ++i;
  }
  return scans;
}

JpegHeader read_jpeg_header(const uint8_t* data, size_t size, const std::string& name) {
  JpegDecoder j;
  if (!jpeg_read_header_c(j, data, size)) fail(ErrorCode::kParse, name, ": JPEG: ", j.err.message);
  YOLOCU_CHECK(j.cinfo.output_width <= 0x7fffffffu && j.cinfo.output_height <= 0x7fffffffu, kParse,
               name, ": JPEG: invalid image size");
  JpegHeader h;
  h.width = static_cast<int>(j.cinfo.output_width);
  h.height = static_cast<int>(j.cinfo.output_height);
  h.components = j.cinfo.num_components;
  h.orientation = saved_orientation(j);
  h.progressive = j.cinfo.progressive_mode != 0;
  return h;
}

bool jpeg_ends_with_eoi(const uint8_t* d, size_t n) { return n >= 4 && d[n - 2] == 0xFF && d[n - 1] == 0xD9; }

const char* decode_route_name(DecodeRoute route) noexcept {
  switch (route) {
    case DecodeRoute::kGpu: return "gpu";
    case DecodeRoute::kCpuNotJpeg: return "cpu: not a JPEG";
    case DecodeRoute::kCpuOrientation: return "cpu: EXIF orientation";
    case DecodeRoute::kCpuComponents: return "cpu: not 1 or 3 components";
    case DecodeRoute::kCpuTruncated: return "cpu: no EOI marker at the end";
  }
  return "unknown";
}

DecodePlan plan_gpu_decode(const void* data, size_t size, const DecodeLimits& limits, const std::string& name) {
  YOLOCU_CHECK(data != nullptr || size == 0, kInvalidArgument, name, ": data is null");
  YOLOCU_CHECK(size > 0, kParse, name, ": empty (0 bytes), not an image");
  const auto* d = static_cast<const uint8_t*>(data);
  DecodePlan plan;
  if (!is_jpeg(d, size)) {
    plan.route = DecodeRoute::kCpuNotJpeg;
    return plan;
  }
  const JpegHeader h = read_jpeg_header(d, size, name);
  const bool transposed = orientation_transposes(h.orientation);
  plan.width = transposed ? h.height : h.width;
  plan.height = transposed ? h.width : h.height;
  plan.progressive = h.progressive;
  check_decode_limits(plan.width, plan.height, limits, name);
  if (h.progressive) check_scan_limit(count_jpeg_scans(d, size), limits, name);
  if (h.orientation >= 2 && h.orientation <= 8) {
    plan.route = DecodeRoute::kCpuOrientation;
  } else if (h.components != 1 && h.components != 3) {
    plan.route = DecodeRoute::kCpuComponents;
  } else if (!jpeg_ends_with_eoi(d, size)) {
    plan.route = DecodeRoute::kCpuTruncated;
  }
  return plan;
}

}  // namespace detail

void validate_decode_limits(const DecodeLimits& l, const std::string& what) {
  YOLOCU_CHECK(l.max_width > 0 && l.max_height > 0 && l.max_pixels > 0 && l.max_scans > 0 && l.max_decoder_memory > 0,
               kInvalidArgument, what, ": decode limits must be > 0, got max_width ", l.max_width, ", max_height ",
               l.max_height, ", max_pixels ", l.max_pixels, ", max_scans ", l.max_scans, ", max_decoder_memory ",
               l.max_decoder_memory);
}

Image decode_image(const void* data, size_t size, const DecodeLimits& limits,
                   const std::string& name) {
  validate_decode_limits(limits, name);
  YOLOCU_CHECK(data != nullptr || size == 0, kInvalidArgument, name, ": data is null");
  YOLOCU_CHECK(size > 0, kParse, name, ": empty (0 bytes), not an image");
  const auto* d = static_cast<const uint8_t*>(data);
  if (detail::is_jpeg(d, size)) return detail::oom_as_error(name, [&] { return decode_jpeg(d, size, limits, name); });
  if (detail::is_png(d, size)) return detail::oom_as_error(name, [&] { return decode_png(d, size, limits, name); });
  if (detail::is_webp(d, size))
    return detail::oom_as_error(name, [&] { return detail::decode_webp(d, size, limits, name); });
  if (detail::is_tiff(d, size))
    return detail::oom_as_error(name, [&] { return detail::decode_tiff(d, size, limits, name); });
  if (detail::is_bmp(d, size))
    return detail::oom_as_error(name, [&] { return detail::decode_bmp(d, size, limits, name); });
  fail(ErrorCode::kUnsupported, name, ": not a JPEG, PNG, WebP, TIFF or BMP image (unrecognised leading bytes)");
}

std::string read_file_bytes(const std::string& path) { return detail::read_file(path); }

Image decode_image_file(const std::string& path, const DecodeLimits& limits) {
  const std::string bytes = detail::read_file(path);
  return decode_image(bytes.data(), bytes.size(), limits, path);
}

}  // namespace yolocu
