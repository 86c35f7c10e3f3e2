// yolocu/annotate.hpp - drawing detections into an image (the CLI's --save-img, --save and
// --save-frames, Python's Results.plot()) and writing images as JPEG or PNG. Host only,
// synchronous; only yolocu::Error is thrown.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "yolocu/detection.hpp"
#include "yolocu/image.hpp"

namespace yolocu {

struct AnnotateOptions {
  int line_width = 0;              // box line width in pixels; 0: ultralytics' Annotator default,
                                   // max(round((H + W + 3) / 2 * 0.003), 2) (sum of an HxWx3 shape)
  bool labels = true;              // draw a label per box
  bool conf = true;                // the label shows the confidence: "name 0.82" (else "name")
  std::vector<int64_t> track_ids;  // empty, or one per detection (< 0: none): "id:7 name 0.82"
  bool colour_by_id = false;       // colour tracked boxes by track id (else by class, ultralytics' default)
};

// Draws each detection as ultralytics' Results.plot() lays it out: the box (line `line_width`
// wide, centred on the box's edges, corners truncated to whole pixels), coloured by class from
// ultralytics' 20-colour palette, and a filled label above the box (inside it when there is no
// room above) in a built-in bitmap font (ASCII, upper and lower case; other characters drawn as
// '?'), its text dark on the palette's light colours, white on the others. A label that would
// leave the image is moved inside it (right edge, bottom edge); one wider than the image is drawn
// smaller until it fits. Class ids without a name are labelled "class<N>". In place.
// kInvalidArgument if track_ids is neither empty nor one per detection.
void draw_detections(Image& image, const Detections& detections, const std::vector<std::string>& class_names,
                     const AnnotateOptions& options = {});

// The palette colour of a class (ultralytics' Colors()(class_id, bgr=True)), as B, G, R.
void class_colour_bgr(int class_id, uint8_t bgr[3]);

// Tracked objects: draw_detections with these track ids and colour_by_id, labelled
// "id:<track id> name 0.82". kInvalidArgument unless track_ids has one id per detection.
void draw_tracked(Image& image, const Detections& detections, const std::vector<int64_t>& track_ids,
                  const std::vector<std::string>& class_names);
// A polyline through (x, y) pixel points, closed (a polygon) or not, in the palette colour of
// `colour_key`; draw_detections' default line width unless thickness > 0. Clipped.
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
// Encodes it as an 8-bit RGB PNG (libpng; lossless).
std::string encode_png(const ImageView& image);
// PNG bytes when `name` ends in .png, JPEG (quality 95) for .jpg / .jpeg, else kInvalidArgument.
std::string encode_image(const std::string& name, const ImageView& image);
// Writes the image as PNG when `path` ends in .png, else as JPEG (quality 95; the name must end in
// .jpg or .jpeg: kInvalidArgument otherwise). The file is written beside `path` and renamed over
// it once complete: a failed write leaves an earlier file as it was (kIo).
void write_image(const std::string& path, const ImageView& image);

}  // namespace yolocu
