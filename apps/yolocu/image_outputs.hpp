// What yolocu detect writes per image: YOLO txt labels, annotated images, crops (into the run
// folder), per-stage .npy dumps, the --verbose line.
#pragma once

#include <string>
#include <vector>

#include "yolocu/detection.hpp"
#include "yolocu/image.hpp"
#include "yolocu/pipeline.hpp"

namespace yolocu::cli {

// YOLO txt lines as detect.py / ultralytics write them for --save-txt: boxes rounded to whole
// pixels (half to even), 'class cx cy w h' normalised by the image size, '%g', reversed order.
std::string yolo_txt(const ImageResult& r, bool with_conf);

// The pixels ultralytics' save_one_box(xyxy, im, gain=1.02, pad=10, square=False, BGR=True) crops:
// the box's width and height times 1.02 plus 10 around its centre (float32), truncated to whole
// pixels, clipped to the image. x0 <= x1 <= width, y0 <= y1 <= height.
struct CropRect {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};
CropRect save_one_box_rect(const Detection& d, int width, int height);

class ImageOutputs {
 public:
  bool verbose = false, save_txt = false, save_conf = false, save_img = false, save_crop = false;
  std::string run_dir, dump_dir;  // run_dir: --save-txt / image / --save-crop outputs
  const std::vector<std::string>* names = nullptr;

  // One image's outputs (its detections, or nothing when it failed); `stem`: its output names' stem,
  // unique in the run (unique_stems). Stops at the first write that fails, throwing yolocu::Error
  // (kIo naming the file and the system's reason).
  void write(const ImageResult& r, const ImageView& image, const DetectionTrace* trace, size_t slot,
             const std::string& stem);
  size_t labels_written() const { return labels_; }

 private:
  void write_crops(const ImageResult& r, const ImageView& image, const std::string& stem) const;
  size_t labels_ = 0;
};

}  // namespace yolocu::cli
