// Box drawing (own 5x7 bitmap font) and the libjpeg-based JPEG encoder.
#include "yolocu/annotate.hpp"

#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>

#include "core/check.hpp"
#include "yolocu/atomic_file.hpp"

namespace yolocu {
namespace {

// 5x7 glyphs, one byte per row, bit 4 = leftmost column.
struct Glyph {
  char c;
  uint8_t rows[7];
};
constexpr Glyph kFont[] = {
    {'A', {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}}, {'B', {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E}},
    {'C', {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}}, {'D', {0x1E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1E}},
    {'E', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}}, {'F', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}},
    {'G', {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}}, {'H', {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}},
    {'I', {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}}, {'J', {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}},
    {'K', {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}}, {'L', {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}},
    {'M', {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}}, {'N', {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}},
    {'O', {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'P', {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}},
    {'Q', {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}}, {'R', {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}},
    {'S', {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}}, {'T', {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},
    {'U', {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'V', {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}},
    {'W', {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}}, {'X', {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}},
    {'Y', {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04}}, {'Z', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}},
    {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
    {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
    {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
    {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}}, {'-', {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}},
    {'_', {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F}}, {' ', {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}},
    {':', {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}}, {'?', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04}},
};

const Glyph& glyph(char c) {
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  for (const Glyph& g : kFont)
    if (g.c == c) return g;
  return kFont[sizeof(kFont) / sizeof(kFont[0]) - 1];
}

struct Bgr {
  uint8_t b, g, r;
};

// A fixed, well-spread colour per class: hue stepped by the golden angle, full saturation.
Bgr class_colour(int class_id) {
  const double h = std::fmod(static_cast<double>(class_id < 0 ? -class_id : class_id) * 137.508, 360.0) / 60.0;
  const double x = 1.0 - std::fabs(std::fmod(h, 2.0) - 1.0);
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(h)) {
    case 0: r = 1, g = x; break;
    case 1: r = x, g = 1; break;
    case 2: g = 1, b = x; break;
    case 3: g = x, b = 1; break;
    case 4: r = x, b = 1; break;
    default: r = 1, b = x; break;
  }
  auto u8 = [](double v) { return static_cast<uint8_t>(std::lround(40 + v * 215)); };
  return {u8(b), u8(g), u8(r)};
}

void fill(Image& im, int x0, int y0, int x1, int y1, Bgr c) {  // [x0, x1) x [y0, y1), clipped
  x0 = std::max(x0, 0), y0 = std::max(y0, 0);
  x1 = std::min(x1, im.width()), y1 = std::min(y1, im.height());
  for (int y = y0; y < y1; ++y) {
    uint8_t* p = im.row(y) + static_cast<size_t>(x0) * 3;
    for (int x = x0; x < x1; ++x, p += 3) p[0] = c.b, p[1] = c.g, p[2] = c.r;
  }
}

void draw_text(Image& im, int x, int y, int scale, const std::string& s, Bgr c) {
  for (char ch : s) {
    const Glyph& g = glyph(ch);
    for (int r = 0; r < 7; ++r)
      for (int k = 0; k < 5; ++k)
        if (g.rows[r] & (0x10 >> k)) fill(im, x + k * scale, y + r * scale, x + (k + 1) * scale, y + (r + 1) * scale, c);
    x += 6 * scale;
  }
}

// libjpeg error handler: longjmp back to encode_raw (no C++ objects live across the jump).
struct JpegError {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};
void jpeg_on_error(j_common_ptr cinfo) {
  std::longjmp(reinterpret_cast<JpegError*>(cinfo->err)->jump, 1);
}

// C-style core: returns false on a libjpeg error; *out is malloc'd by libjpeg (caller frees).
bool encode_raw(const ImageView& im, int quality, unsigned char** out, unsigned long* size) {
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

}  // namespace

namespace {

int line_width(const Image& im) {
  return std::max(static_cast<int>(std::lround((im.width() + im.height()) / 2.0 * 0.003)), 2);
}

// A label on a filled box at (x, y) (top-left), in the built-in font at `scale`.
void label_box(Image& im, int x, int y, int scale, const std::string& label, Bgr c) {
  const int tw = static_cast<int>(label.size()) * 6 * scale + 2 * scale, th = 9 * scale;
  fill(im, x, y, x + tw, y + th, c);
  draw_text(im, x + scale, y + scale, scale, label, {255, 255, 255});
}

void draw_box(Image& im, const Detection& d, const std::string& label, Bgr c) {
  const int lw = line_width(im);
  const int scale = std::max(lw / 2 + 1, 1);
  const int x1 = static_cast<int>(std::lround(d.x1)), y1 = static_cast<int>(std::lround(d.y1));
  const int x2 = static_cast<int>(std::lround(d.x2)), y2 = static_cast<int>(std::lround(d.y2));
  fill(im, x1, y1, x2, y1 + lw, c);
  fill(im, x1, y2 - lw, x2, y2, c);
  fill(im, x1, y1, x1 + lw, y2, c);
  fill(im, x2 - lw, y1, x2, y2, c);
  // label above the box when it fits, else inside it
  const int th = 9 * scale;
  label_box(im, x1, y1 - th >= 0 ? y1 - th : y1, scale, label, c);
}

std::string confidence_label(const std::vector<std::string>& names, const Detection& d) {
  char conf[16];
  std::snprintf(conf, sizeof conf, " %.2f", static_cast<double>(d.confidence));
  return class_name(names, d.class_id) + conf;
}

}  // namespace

void draw_detections(Image& im, const Detections& dets, const std::vector<std::string>& names) {
  if (im.empty()) return;
  for (const Detection& d : dets) draw_box(im, d, confidence_label(names, d), class_colour(d.class_id));
}

void draw_tracked(Image& im, const Detections& dets, const std::vector<int64_t>& track_ids,
                  const std::vector<std::string>& names) {
  YOLOCU_CHECK(track_ids.size() == dets.size(), kInvalidArgument, "draw_tracked: ", track_ids.size(), " ids for ",
               dets.size(), " detections");
  if (im.empty()) return;
  for (size_t i = 0; i < dets.size(); ++i)
    draw_box(im, dets[i], "id:" + std::to_string(track_ids[i]) + " " + confidence_label(names, dets[i]),
             class_colour(static_cast<int>(track_ids[i] % 100000)));
}

void draw_polyline(Image& im, const std::vector<std::pair<float, float>>& points, bool closed, int colour_key,
                   int thickness) {
  if (im.empty() || points.size() < 2) return;
  const int lw = thickness > 0 ? thickness : line_width(im);
  const Bgr c = class_colour(colour_key);
  const size_t segments = closed ? points.size() : points.size() - 1;
  for (size_t i = 0; i < segments; ++i) {
    const auto [ax, ay] = points[i];
    const auto [bx, by] = points[(i + 1) % points.size()];
    if (!std::isfinite(ax) || !std::isfinite(ay) || !std::isfinite(bx) || !std::isfinite(by)) continue;
    // square brush stepped along the segment, one pixel at a time (clipped to a sane length)
    const double len = std::min(std::hypot(static_cast<double>(bx - ax), static_cast<double>(by - ay)), 1e5);
    const int steps = std::max(static_cast<int>(std::ceil(len)), 1);
    for (int k = 0; k <= steps; ++k) {
      const double t = static_cast<double>(k) / steps;
      const int x = static_cast<int>(std::lround(ax + t * (bx - ax))), y = static_cast<int>(std::lround(ay + t * (by - ay)));
      fill(im, x - lw / 2, y - lw / 2, x - lw / 2 + lw, y - lw / 2 + lw, c);
    }
  }
}

void draw_label(Image& im, int x, int y, const std::string& text, int colour_key) {
  if (im.empty()) return;
  label_box(im, x, y, std::max(line_width(im) / 2 + 1, 1), text, class_colour(colour_key));
}

int label_height(const Image& im) { return 9 * std::max(line_width(im) / 2 + 1, 1); }

std::string encode_jpeg(const ImageView& im, int quality) {
  YOLOCU_CHECK(im.data && im.width > 0 && im.height > 0 && im.pitch_bytes >= static_cast<size_t>(im.width) * 3,
               kInvalidArgument, "encode_jpeg: invalid image view ", im.width, "x", im.height);
  YOLOCU_CHECK(im.width <= 65500 && im.height <= 65500, kInvalidArgument, "encode_jpeg: ", im.width, "x",
               im.height, " exceeds the JPEG size limit 65500");
  YOLOCU_CHECK(quality >= 1 && quality <= 100, kInvalidArgument, "encode_jpeg: quality must be 1..100, got ",
               quality);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const bool ok = encode_raw(im, quality, &buf, &size);
  std::string out;
  if (ok && buf) out.assign(reinterpret_cast<const char*>(buf), size);
  std::free(buf);
  YOLOCU_CHECK(ok, kInternal, "encode_jpeg: libjpeg failed");
  return out;
}

void write_jpeg(const std::string& path, const ImageView& im, int quality) {
  write_file_atomic(path, encode_jpeg(im, quality));
}

}  // namespace yolocu
