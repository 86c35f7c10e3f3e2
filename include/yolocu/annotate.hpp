// yolocu/annotate.hpp - drawing detections into an image and writing it as JPEG (the CLI's
// --save-img). Host only, synchronous; only yolocu::Error is thrown.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "yolocu/detection.hpp"
#include "yolocu/image.hpp"

namespace yolocu {

// Draws each detection's box (line width from the image size) and a "name 0.82" label (built-in
// 5x7 bitmap font, ASCII; other characters drawn as '?') into `image`, in place. Colours depend on
// the class only. Boxes are clipped to the image; class ids without a name are labelled "class<N>".
void draw_detections(Image& image, const Detections& detections, const std::vector<std::string>& class_names);

// Tracked objects: boxes as draw_detections, coloured by track id and labelled
// "id:<track id> name 0.82". kInvalidArgument unless track_ids has one id per detection.
void draw_tracked(Image& image, const Detections& detections, const std::vector<int64_t>& track_ids,
                  const std::vector<std::string>& class_names);
// A polyline through (x, y) pixel points, closed (a polygon) or not, in the colour draw_detections
// gives class `colour_key`; line width from the image size unless thickness > 0. Clipped.
void draw_polyline(Image& image, const std::vector<std::pair<float, float>>& points, bool closed, int colour_key,
                   int thickness = 0);
// `text` (built-in font) on a box filled with colour_key's colour, top-left corner at (x, y).
void draw_label(Image& image, int x, int y, const std::string& text, int colour_key);
// The height in pixels of a draw_label box on this image.
int label_height(const Image& image);

// Encodes an 8-bit BGR image (host view, any pitch) as a baseline JPEG (libjpeg, 4:2:0 chroma).
// quality in [1, 100]. kInvalidArgument on a bad view or quality, kInternal if libjpeg fails.
std::string encode_jpeg(const ImageView& image, int quality = 95);
// The same, written to `path` whole or not at all (AtomicFile: the previous file stays on a failure;
// kIo naming the path and the system's reason).
void write_jpeg(const std::string& path, const ImageView& image, int quality = 95);

}  // namespace yolocu
