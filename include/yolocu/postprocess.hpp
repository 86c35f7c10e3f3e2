// yolocu/postprocess.hpp - YOLO post-processing: decode, NMS, back-projection.
//
// Reproduces ultralytics/yolov5 v7.0 `non_max_suppression` + `scale_boxes` + `clip_boxes`, and
// the ultralytics package's (8.x: YOLOv8, YOLO11) for their anchor-free output (OutputLayout,
// BoxScaling; see docs/postprocess.md and docs/semantics.md). The CPU functions here are the
// reference; the CUDA versions
// (postprocess_cuda.hpp, when built with CUDA) take the same arguments plus a stream.
//
// Coordinate frames: candidates are x1, y1, x2, y2 in letterbox (network input) pixels;
// detections are in original-image pixels, clipped to [0, W] x [0, H].
// Canonical order: score descending, then row ascending, then class ascending. Every function
// that sorts uses it, so results never depend on the order work was done in.
// All functions are synchronous, allocate their results and only throw yolocu::Error.
#pragma once

#include <cstdint>
#include <vector>

#include "yolocu/detection.hpp"
#include "yolocu/geometry.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu {

enum class NmsMode {
  kGreedy,  // exact greedy NMS, as torchvision.ops.nms: drop a box overlapping a KEPT box
  kFast,    // "fast NMS": drop a box overlapping ANY higher-scored box (kept or not); over-suppresses
};

// Class offset of class-aware NMS (ultralytics max_wh): box + class_id * kClassOffset.
constexpr float kClassOffset = 7680.f;

struct PostprocessOptions {
  float conf_threshold = 0.25f;  // obj > conf and obj * cls > conf (strict), in [0, 1]
  float iou_threshold = 0.45f;   // suppress when IoU > iou (strict), in [0, 1]
  int max_det = 300;             // detections kept per image, >= 1
  int max_nms = 30000;           // candidates entering NMS per image (best-scored), >= 1
  bool agnostic = false;         // NMS across classes
  bool multi_label = false;      // one candidate per (box, class) with score > conf
  std::vector<int> classes;      // keep only these classes; empty = all
  NmsMode nms = NmsMode::kGreedy;
  bool clip_boxes = true;        // boxes clipped to the image (scale_boxes' clip_boxes); false keeps
                                 // them whole, as ultralytics 8.4's val matches them (val_options)
};

// Throws kInvalidArgument naming the offending field.
void validate_options(const PostprocessOptions& options);

// Options of ultralytics detect.py (conf 0.25, iou 0.45, max_det 1000) and val.py (conf 0.001,
// iou 0.6, multi-label, max_det 300).
PostprocessOptions detect_options();
PostprocessOptions val_options();

// The float threshold T such that, for every float IoU v, (v > T) == (double(v) > t) where t is
// the decimal value `iou_threshold` was written as (shortest round-trip decimal). This is the
// comparison torchvision's CPU nms makes (float IoU against a double threshold): 0.6f -> the float
// just below 0.6f, 0.45f -> 0.45f.
float nms_iou_cut(float iou_threshold);

// How a merged model output lays out its values.
enum class OutputLayout {
  kYolov5,  // [batch, rows, 5 + nc]: cx, cy, w, h, objectness, nc class scores per row
            // (ultralytics/yolov5); score = objectness * class score
  kYolov8,  // [batch, 4 + nc, anchors]: channel-major cx, cy, w, h, nc class scores, no
            // objectness (ultralytics 8.x Detect: YOLOv8, YOLO11); score = class score
};

// A dense view of the merged model output, float32 or float16, host memory for the CPU functions
// (device memory for the CUDA ones). Non-owning. `rows` are the candidate boxes (YOLOv8: the
// anchors), `channels` the values per box (5 + nc, or 4 + nc for kYolov8).
struct OutputView {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  int64_t batch = 1, rows = 0, channels = 0;
  OutputLayout layout = OutputLayout::kYolov5;
  int num_classes() const { return static_cast<int>(channels - (layout == OutputLayout::kYolov8 ? 4 : 5)); }
};
// kYolov5: accepts [rows, 5 + nc] or [batch, rows, 5 + nc]; kYolov8: [4 + nc, anchors] or
// [batch, 4 + nc, anchors]. float32 or float16; throws otherwise.
OutputView output_view(const Tensor& output, OutputLayout layout = OutputLayout::kYolov5);

// How boxes go back from letterbox to original pixels (after NMS), clipped to [0, W] x [0, H]:
enum class BoxScaling {
  kContinuousPad,  // yolov5 v7.0 scale_boxes: (x - (dst_w - W * gain) / 2) / gain
  kIntegerPad,     // ultralytics 8.x scale_boxes: (x - left) / (new_w / W), (y - top) / (new_h / H)
};
// The scaling of the ultralytics generation that writes `layout`.
constexpr BoxScaling box_scaling(OutputLayout layout) {
  return layout == OutputLayout::kYolov8 ? BoxScaling::kIntegerPad : BoxScaling::kContinuousPad;
}

// The defaults of the ultralytics generation that writes `layout`: kYolov5 as detect_options() and
// val_options(); kYolov8 as the ultralytics package's predict (conf 0.25, iou 0.7, max_det 300)
// and val (conf 0.001, iou 0.7, multi-label, max_det 300).
PostprocessOptions detect_options(OutputLayout layout);
PostprocessOptions val_options(OutputLayout layout);

// The raw Detect-head convolution outputs (before sigmoid), one per level:
// batch x (na * (5 + nc)) x ny x nx, channel = a * (5 + nc) + k, dense, all of one dtype.
constexpr int kMaxHeadLevels = 4;
constexpr int kMaxAnchors = 4;
struct HeadLevel {
  const void* data = nullptr;
  int ny = 0, nx = 0;
  float stride = 0;                  // input pixels per grid cell
  int num_anchors = 0;
  float anchors[kMaxAnchors * 2] = {};  // (w, h) per anchor, input pixels
};
struct RawHeadsView {
  DType dtype = DType::kFloat32;
  int64_t batch = 1;
  int num_classes = 0;
  int num_levels = 0;
  HeadLevel levels[kMaxHeadLevels];
  // Rows of the equivalent merged output: sum over levels of na * ny * nx.
  int64_t rows() const;
};
// YOLOv5 P3-P5 anchors (input pixels) and strides 8/16/32, for nc classes; ny/nx from the tensors
// (batch x na*(5+nc) x ny x nx each). Throws on shapes that do not fit.
RawHeadsView raw_heads_view(const std::vector<Tensor>& heads, int num_classes);

// One NMS candidate.
struct Candidate {
  Box box;          // x1, y1, x2, y2, letterbox pixels
  float score = 0;  // obj * cls
  int class_id = 0;
  int row = 0;      // row of the merged output it came from
};
using Candidates = std::vector<Candidate>;

// Decode of image `image` of the merged output: thresholds, best-class or multi-label, class
// filter, canonical sort, first max_nms. *overflow (if given) receives the number of candidates
// dropped by max_nms.
Candidates decode_cpu(const OutputView& output, int64_t image, const PostprocessOptions& options,
                      int64_t* overflow = nullptr);
// The same from the raw heads (sigmoid, grid and anchors fused); equal to decode_cpu of the
// merged output the exported graph computes, up to the float noise of the sigmoid.
Candidates decode_raw_heads_cpu(const RawHeadsView& heads, int64_t image,
                                const PostprocessOptions& options, int64_t* overflow = nullptr);

// NMS over candidates in canonical order (as decode returns them). Returns the indices into
// `candidates` of the kept boxes, in order, at most max_det. Uses options.iou_threshold,
// agnostic, max_det and nms.
std::vector<int> nms_cpu(const Candidates& candidates, const PostprocessOptions& options);

// Letterbox pixels -> original pixels (see BoxScaling), clipped to [0, W] x [0, H] unless `clip` is false.
Detections project_cpu(const Candidates& candidates, const std::vector<int>& keep,
                       const LetterboxGeometry& geometry,
                       BoxScaling scaling = BoxScaling::kContinuousPad, bool clip = true);

// decode + nms + project for one image / for every image of the batch (one geometry each); the
// projection is box_scaling(output.layout). The Tensor form reads a YOLOv5 layout.
Detections postprocess_cpu(const OutputView& output, int64_t image,
                           const LetterboxGeometry& geometry, const PostprocessOptions& options);
Detections postprocess_cpu(const Tensor& output, const LetterboxGeometry& geometry,
                           const PostprocessOptions& options);
std::vector<Detections> postprocess_batch_cpu(const OutputView& output,
                                              const std::vector<LetterboxGeometry>& geometries,
                                              const PostprocessOptions& options);
Detections postprocess_raw_heads_cpu(const RawHeadsView& heads, int64_t image,
                                     const LetterboxGeometry& geometry,
                                     const PostprocessOptions& options);

}  // namespace yolocu
