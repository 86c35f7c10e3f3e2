// yolocu/annotate.hpp - drawing detections into an image and writing it as JPEG (the CLI's
// --save-img). Host only, synchronous; only yolocu::Error is thrown.
#pragma once

#include <string>
#include <vector>

#include "yolocu/detection.hpp"
#include "yolocu/image.hpp"

namespace yolocu {

// Draws each detection's box (line width from the image size) and a "name 0.82" label (built-in
// 5x7 bitmap font, ASCII; other characters drawn as '?') into `image`, in place. Colours depend on
// the class only. Boxes are clipped to the image; class ids without a name are labelled "class<N>".
void draw_detections(Image& image, const Detections& detections, const std::vector<std::string>& class_names);

// Encodes an 8-bit BGR image (host view, any pitch) as a baseline JPEG (libjpeg, 4:2:0 chroma).
// quality in [1, 100]. kInvalidArgument on a bad view or quality, kInternal if libjpeg fails.
std::string encode_jpeg(const ImageView& image, int quality = 95);
// The same, written to `path` (kIo if it cannot be written).
void write_jpeg(const std::string& path, const ImageView& image, int quality = 95);

}  // namespace yolocu
