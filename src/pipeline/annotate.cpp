// Box and label drawing (yolocu/annotate.hpp): ultralytics' Annotator layout (line width, palette,
// label placement, text colour) with the bitmap font of bitmap_font.cpp.
#include "yolocu/annotate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/check.hpp"
#include "pipeline/bitmap_font.hpp"

namespace yolocu {
namespace {

struct Bgr {
  uint8_t b, g, r;
  bool operator==(const Bgr& o) const { return b == o.b && g == o.g && r == o.r; }
};

// ultralytics.utils.plotting.Colors: the 20 hex colours (RGB), taken in class order modulo 20.
constexpr uint32_t kPalette[20] = {0x042AFF, 0x0BDBEB, 0xF3F3F3, 0x00DFB7, 0x111F68, 0xFF6FDD, 0xFF444F,
                                   0xCCED00, 0x00F344, 0xBD00FF, 0x00B4FF, 0xDD00BA, 0x00FFFF, 0x26C000,
                                   0x01FFB3, 0x7D24FF, 0x7B0068, 0xFF1B6C, 0xFC6D2F, 0xA2FF0B};

Bgr palette_colour(int class_id) {
  const int n = static_cast<int>(sizeof(kPalette) / sizeof(kPalette[0]));
  const uint32_t rgb = kPalette[((class_id % n) + n) % n];
  return {static_cast<uint8_t>(rgb & 0xFF), static_cast<uint8_t>((rgb >> 8) & 0xFF), static_cast<uint8_t>(rgb >> 16)};
}

// Annotator.get_txt_color: the palette's light colours (its dark_colors set, BGR) take dark text
// (104, 31, 17); every other colour white.
Bgr text_colour(Bgr box) {
  constexpr Bgr kLight[] = {{235, 219, 11}, {243, 243, 243}, {183, 223, 0}, {221, 111, 255}, {0, 237, 204},
                            {68, 243, 0},   {255, 255, 0},   {179, 255, 1}, {11, 255, 162}};
  for (const Bgr& c : kLight)
    if (c == box) return {104, 31, 17};
  return {255, 255, 255};
}

void fill(Image& im, int x0, int y0, int x1, int y1, Bgr c) {  // [x0, x1) x [y0, y1), clipped
  x0 = std::max(x0, 0), y0 = std::max(y0, 0);
  x1 = std::min(x1, im.width()), y1 = std::min(y1, im.height());
  for (int y = y0; y < y1; ++y) {
    uint8_t* p = im.row(y) + static_cast<size_t>(x0) * 3;
    for (int x = x0; x < x1; ++x, p += 3) p[0] = c.b, p[1] = c.g, p[2] = c.r;
  }
}

// A label's text: glyphs of kGlyphWidth columns plus one blank column, `scale` pixels a dot.
void draw_text(Image& im, int x, int y, int scale, const std::string& s, Bgr c) {
  for (char ch : s) {
    const uint8_t* rows = detail::glyph_rows(ch);
    for (int r = 0; r < detail::kGlyphRows; ++r)
      for (int k = 0; k < detail::kGlyphWidth; ++k)
        if (rows[r] & (0x10 >> k)) fill(im, x + k * scale, y + r * scale, x + (k + 1) * scale, y + (r + 1) * scale, c);
    x += (detail::kGlyphWidth + 1) * scale;
  }
}

// The label box around text at `scale`: one dot of margin on each side.
int label_width(const std::string& s, int scale) {
  return (static_cast<int>(s.size()) * (detail::kGlyphWidth + 1) + 1) * scale;
}
int label_box_height(int scale) { return (detail::kGlyphRows + 2) * scale; }

// ultralytics' cv2 path of Annotator.box_label: above the box when there is room (y1 >= height),
// else inside it from its top; moved left when it would pass the right edge. Here also kept off the
// left and bottom edges, and drawn smaller when it is wider than the image.
void place_label(Image& im, int x1, int y1, int line_width, const std::string& text, Bgr box) {
  int scale = std::max(line_width, 1);
  while (scale > 1 && label_width(text, scale) > im.width()) --scale;
  const int w = label_width(text, scale), h = label_box_height(scale);
  const bool outside = y1 >= h;
  int x = std::max(std::min(x1, im.width() - w), 0);
  int y = outside ? y1 - h : y1;
  y = std::max(std::min(y, im.height() - h), 0);
  fill(im, x, y, x + w, y + h, box);
  draw_text(im, x + scale, y + scale, scale, text, text_colour(box));
}

std::string label_text(const Detection& d, const std::vector<std::string>& names, const AnnotateOptions& o,
                       size_t i) {
  std::string s;
  if (!o.track_ids.empty() && o.track_ids[i] >= 0) s = "id:" + std::to_string(o.track_ids[i]) + " ";
  s += class_name(names, d.class_id);
  if (o.conf) {
    char conf[32];
    std::snprintf(conf, sizeof conf, " %.2f", static_cast<double>(d.confidence));
    s += conf;
  }
  return s;
}

// The box's colour: its class's, or with colour_by_id its track id's.
Bgr colour_of(const Detection& d, const AnnotateOptions& o, size_t i) {
  if (o.colour_by_id && !o.track_ids.empty() && o.track_ids[i] >= 0)
    return palette_colour(static_cast<int>(o.track_ids[i] % 100000));
  return palette_colour(d.class_id);
}

int default_line_width(const Image& im) {
  // Python's round(): half to even, as std::nearbyint in the default rounding mode
  const double mean_side = (static_cast<double>(im.width()) + im.height() + 3) / 2 * 0.003;
  return std::max(static_cast<int>(std::nearbyint(mean_side)), 2);
}

}  // namespace

void class_colour_bgr(int class_id, uint8_t bgr[3]) {
  const Bgr c = palette_colour(class_id);
  bgr[0] = c.b, bgr[1] = c.g, bgr[2] = c.r;
}

void draw_detections(Image& im, const Detections& dets, const std::vector<std::string>& names,
                     const AnnotateOptions& o) {
  YOLOCU_CHECK(o.track_ids.empty() || o.track_ids.size() == dets.size(), kInvalidArgument, "draw_detections: ",
               o.track_ids.size(), " track ids for ", dets.size(), " detections");
  YOLOCU_CHECK(o.line_width >= 0, kInvalidArgument, "draw_detections: line width ", o.line_width, " < 0");
  if (im.empty()) return;
  const int lw = o.line_width > 0 ? o.line_width : default_line_width(im);
  const int lo = lw / 2;  // the line covers [edge - lo, edge - lo + lw)
  for (size_t i = 0; i < dets.size(); ++i) {
    const Detection& d = dets[i];
    const Bgr c = colour_of(d, o, i);
    // int() of ultralytics' box_label: truncation (boxes are clipped to the image, never negative)
    const int x1 = static_cast<int>(d.x1), y1 = static_cast<int>(d.y1);
    const int x2 = static_cast<int>(d.x2), y2 = static_cast<int>(d.y2);
    fill(im, x1 - lo, y1 - lo, x2 - lo + lw, y1 - lo + lw, c);
    fill(im, x1 - lo, y2 - lo, x2 - lo + lw, y2 - lo + lw, c);
    fill(im, x1 - lo, y1 - lo, x1 - lo + lw, y2 - lo + lw, c);
    fill(im, x2 - lo, y1 - lo, x2 - lo + lw, y2 - lo + lw, c);
  }
  if (!o.labels) return;
  for (size_t i = 0; i < dets.size(); ++i) {  // labels over every box
    const Detection& d = dets[i];
    place_label(im, static_cast<int>(d.x1), static_cast<int>(d.y1), lw, label_text(d, names, o, i),
                colour_of(d, o, i));
  }
}

void draw_tracked(Image& im, const Detections& dets, const std::vector<int64_t>& track_ids,
                  const std::vector<std::string>& names) {
  YOLOCU_CHECK(track_ids.size() == dets.size(), kInvalidArgument, "draw_tracked: ", track_ids.size(), " ids for ",
               dets.size(), " detections");
  AnnotateOptions o;
  o.track_ids = track_ids;
  o.colour_by_id = true;
  draw_detections(im, dets, names, o);
}

void draw_polyline(Image& im, const std::vector<std::pair<float, float>>& points, bool closed, int colour_key,
                   int thickness) {
  if (im.empty() || points.size() < 2) return;
  const int lw = thickness > 0 ? thickness : default_line_width(im);
  const Bgr c = palette_colour(colour_key);
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
  const int scale = default_line_width(im);
  const Bgr c = palette_colour(colour_key);
  fill(im, x, y, x + label_width(text, scale), y + label_box_height(scale), c);
  draw_text(im, x + scale, y + scale, scale, text, text_colour(c));
}

int label_height(const Image& im) { return label_box_height(default_line_width(im)); }

}  // namespace yolocu
