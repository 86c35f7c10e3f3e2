// CPU reference of YOLO post-processing: ultralytics/yolov5 v7.0 non_max_suppression,
// scale_boxes, clip_boxes, and the ultralytics package's (8.x) for the anchor-free YOLOv8 / YOLO11
// output. See docs/postprocess.md and docs/semantics.md for what is matched and why.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/check.hpp"
#include "postprocess/postprocess_common.hpp"
#include "yolocu/postprocess.hpp"

namespace yolocu {

namespace {

// Rounds a float to the nearest float16 value (the arithmetic of an FP16 engine's output).
float round_half(float x) { return half_to_float(float_to_half(x)); }

float load_value(const void* data, DType dtype, int64_t i) {
  return dtype == DType::kFloat16 ? half_to_float(static_cast<const uint16_t*>(data)[i])
                                  : static_cast<const float*>(data)[i];
}

// The threshold as the reference compares it: a Python float against a float32 (or float16)
// tensor is first cast to the tensor's dtype.
float threshold_in_dtype(float t, DType dtype) { return dtype == DType::kFloat16 ? round_half(t) : t; }

bool class_allowed(const std::vector<int>& classes, int c) {
  return classes.empty() || std::find(classes.begin(), classes.end(), c) != classes.end();
}

// Appends the candidates of one decoded row (values v[0..4+nc], already in float) to `out`.
// Mirrors non_max_suppression: obj filter, score = obj * cls, xywh -> xyxy, best class or
// multi-label, class filter. `fp16` rounds every intermediate result to half, as torch does on a
// half tensor.
void emit_row(const float* v, int nc, int row, bool fp16, float conf, const PostprocessOptions& o,
              Candidates& out) {
  const float obj = v[4];
  if (!(obj > conf)) return;
  auto r = [fp16](float x) { return fp16 ? round_half(x) : x; };
  const Box box = xywh_to_xyxy(v[0], v[1], v[2], v[3], r);
  if (o.multi_label) {
    for (int c = 0; c < nc; ++c) {
      const float s = r(v[5 + c] * obj);
      if (s > conf && class_allowed(o.classes, c)) out.push_back({box, s, c, row});
    }
    return;
  }
  float best = r(v[5] * obj);
  int best_c = 0;
  bool nan = std::isnan(best);
  for (int c = 1; c < nc; ++c) {
    const float s = r(v[5 + c] * obj);
    nan = nan || std::isnan(s);
    if (s > best) {
      best = s;
      best_c = c;
    }
  }
  // torch.max propagates NaN: such a row's conf is NaN and fails `conf > conf_thres`.
  if (nan || !(best > conf) || !class_allowed(o.classes, best_c)) return;
  out.push_back({box, best, best_c, row});
}

// The same for a YOLOv8 / YOLO11 row (values v[0..3+nc]: cx, cy, w, h, class scores; no
// objectness), as the ultralytics package's non_max_suppression: the row is a candidate when its
// best class score is > conf (amax: a NaN score drops the row); score = class score.
void emit_row_v8(const float* v, int nc, int row, bool fp16, float conf, const PostprocessOptions& o,
                 Candidates& out) {
  auto r = [fp16](float x) { return fp16 ? round_half(x) : x; };
  const Box box = xywh_to_xyxy(v[0], v[1], v[2], v[3], r);
  if (o.multi_label && nc > 1) {  // multi_label &= nc > 1
    for (int c = 0; c < nc; ++c) {
      const float s = v[4 + c];
      if (s > conf && class_allowed(o.classes, c)) out.push_back({box, s, c, row});
    }
    return;
  }
  float best = v[4];
  int best_c = 0;
  for (int c = 1; c < nc; ++c) {
    if (v[4 + c] > best) {  // torch.max: the first index of the maximum
      best = v[4 + c];
      best_c = c;
    }
  }
  if (!(best > conf) || !class_allowed(o.classes, best_c)) return;
  out.push_back({box, best, best_c, row});
}

void sort_and_cap(Candidates& c, int max_nms, int64_t* overflow) {
  std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
    return canonical_before(a.score, a.row, a.class_id, b.score, b.row, b.class_id);
  });
  const int64_t excess = std::max<int64_t>(0, static_cast<int64_t>(c.size()) - max_nms);
  if (excess > 0) c.resize(static_cast<size_t>(max_nms));
  if (overflow) *overflow = excess;
}

void check_geometry(const LetterboxGeometry& g) {
  YOLOCU_CHECK(g.src_w > 0 && g.src_h > 0 && g.gain > 0 && std::isfinite(g.gain), kInvalidArgument,
               "postprocess: invalid letterbox geometry (source ", g.src_w, "x", g.src_h,
               ", gain ", g.gain, ")");
}

}  // namespace

void validate_options(const PostprocessOptions& o) {
  YOLOCU_CHECK(o.conf_threshold >= 0.f && o.conf_threshold <= 1.f, kInvalidArgument,
               "PostprocessOptions.conf_threshold must be in [0, 1], got ", o.conf_threshold);
  YOLOCU_CHECK(o.iou_threshold >= 0.f && o.iou_threshold <= 1.f, kInvalidArgument,
               "PostprocessOptions.iou_threshold must be in [0, 1], got ", o.iou_threshold);
  YOLOCU_CHECK(o.max_det >= 1, kInvalidArgument, "PostprocessOptions.max_det must be >= 1, got ",
               o.max_det);
  YOLOCU_CHECK(o.max_nms >= 1, kInvalidArgument, "PostprocessOptions.max_nms must be >= 1, got ",
               o.max_nms);
  for (int c : o.classes)
    YOLOCU_CHECK(c >= 0, kInvalidArgument, "PostprocessOptions.classes: negative class id ", c);
  YOLOCU_CHECK(o.nms == NmsMode::kGreedy || o.nms == NmsMode::kFast, kInvalidArgument,
               "PostprocessOptions.nms: unknown mode ", static_cast<int>(o.nms));
}

PostprocessOptions detect_options() {
  PostprocessOptions o;
  o.max_det = 1000;
  return o;
}

PostprocessOptions val_options() {
  PostprocessOptions o;
  o.conf_threshold = 0.001f;
  o.iou_threshold = 0.6f;
  o.multi_label = true;
  o.max_det = 300;
  return o;
}

PostprocessOptions detect_options(OutputLayout layout) {
  if (layout != OutputLayout::kYolov8) return detect_options();
  PostprocessOptions o;  // ultralytics/cfg/default.yaml: conf 0.25 (predict), iou 0.7, max_det 300
  o.conf_threshold = 0.25f;
  o.iou_threshold = 0.7f;
  o.max_det = 300;
  return o;
}

PostprocessOptions val_options(OutputLayout layout) {
  if (layout != OutputLayout::kYolov8) return val_options();
  PostprocessOptions o;  // DetectionValidator: conf 0.001, iou 0.7, multi_label=True, max_det 300
  o.conf_threshold = 0.001f;
  o.iou_threshold = 0.7f;
  o.multi_label = true;
  o.max_det = 300;
  o.clip_boxes = false;  // 8.4's val matches the boxes in the letterboxed image, unclipped
  return o;
}

float nms_iou_cut(float iou_threshold) {
  // The decimal the caller wrote: the shortest %g form that reads back as the same float.
  double t = iou_threshold;
  char buf[32];
  for (int p = 1; p <= 9; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, static_cast<double>(iou_threshold));
    if (std::strtof(buf, nullptr) == iou_threshold) {
      t = std::strtod(buf, nullptr);
      break;
    }
  }
  // Largest float <= t: for a float v, v > t  <=>  v > that float.
  float f = static_cast<float>(t);
  if (static_cast<double>(f) > t) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}

OutputView output_view(const Tensor& output, OutputLayout layout) {
  YOLOCU_CHECK(!output.empty(), kInvalidArgument, "postprocess: empty output tensor");
  YOLOCU_CHECK(output.dtype() == DType::kFloat32 || output.dtype() == DType::kFloat16, kUnsupported,
               "postprocess: output must be float32 or float16, got ", dtype_name(output.dtype()));
  if (layout == OutputLayout::kYolov8) {
    YOLOCU_CHECK(output.rank() == 2 || output.rank() == 3, kInvalidArgument,
                 "postprocess: a YOLOv8 output must be [4+nc, anchors] or [batch, 4+nc, anchors], got ",
                 shape_str(output.shape()));
    OutputView v;
    v.data = output.data();
    v.dtype = output.dtype();
    v.layout = layout;
    v.batch = output.rank() == 3 ? output.dim(0) : 1;
    v.channels = output.dim(output.rank() - 2);
    v.rows = output.dim(output.rank() - 1);
    YOLOCU_CHECK(v.channels >= 5 && v.channels <= (1 << 20), kInvalidArgument,
                 "postprocess: a YOLOv8 output needs 4 + nc channels with nc >= 1, got shape ",
                 shape_str(output.shape()));
    YOLOCU_CHECK(v.rows <= std::numeric_limits<int>::max(), kInvalidArgument,
                 "postprocess: too many anchors: ", v.rows);
    return v;
  }
  YOLOCU_CHECK(layout == OutputLayout::kYolov5, kInvalidArgument, "postprocess: unknown output layout ",
               static_cast<int>(layout));
  YOLOCU_CHECK(output.rank() == 2 || output.rank() == 3, kInvalidArgument,
               "postprocess: output must be [rows, 5+nc] or [batch, rows, 5+nc], got ",
               shape_str(output.shape()));
  OutputView v;
  v.data = output.data();
  v.dtype = output.dtype();
  v.batch = output.rank() == 3 ? output.dim(0) : 1;
  v.rows = output.dim(output.rank() - 2);
  v.channels = output.dim(output.rank() - 1);
  YOLOCU_CHECK(v.channels >= 6 && v.channels <= (1 << 20), kInvalidArgument,
               "postprocess: output needs 5 + nc channels with nc >= 1, got shape ",
               shape_str(output.shape()));
  YOLOCU_CHECK(v.rows <= std::numeric_limits<int>::max(), kInvalidArgument,
               "postprocess: too many rows: ", v.rows);
  return v;
}

int64_t RawHeadsView::rows() const {
  int64_t n = 0;
  for (int l = 0; l < num_levels; ++l)
    n += static_cast<int64_t>(levels[l].num_anchors) * levels[l].ny * levels[l].nx;
  return n;
}

RawHeadsView raw_heads_view(const std::vector<Tensor>& heads, int num_classes) {
  static const float kAnchors[3][6] = {{10, 13, 16, 30, 33, 23},
                                       {30, 61, 62, 45, 59, 119},
                                       {116, 90, 156, 198, 373, 326}};
  static const float kStrides[3] = {8, 16, 32};
  YOLOCU_CHECK(heads.size() == 3, kInvalidArgument,
               "raw_heads_view: YOLOv5 has 3 head outputs, got ", heads.size());
  YOLOCU_CHECK(num_classes >= 1, kInvalidArgument, "raw_heads_view: num_classes must be >= 1, got ",
               num_classes);
  RawHeadsView v;
  v.num_classes = num_classes;
  v.num_levels = 3;
  v.dtype = heads[0].dtype();
  YOLOCU_CHECK(v.dtype == DType::kFloat32 || v.dtype == DType::kFloat16, kUnsupported,
               "raw_heads_view: heads must be float32 or float16, got ", dtype_name(v.dtype));
  for (int l = 0; l < 3; ++l) {
    const Tensor& t = heads[static_cast<size_t>(l)];
    YOLOCU_CHECK(t.dtype() == v.dtype, kInvalidArgument, "raw_heads_view: mixed dtypes");
    YOLOCU_CHECK(t.rank() == 4 && t.dim(1) == 3 * (5 + num_classes) && t.dim(2) > 0 && t.dim(3) > 0,
                 kInvalidArgument, "raw_heads_view: level ", l, " must be [batch, ",
                 3 * (5 + num_classes), ", ny, nx], got ", shape_str(t.shape()));
    YOLOCU_CHECK(t.dim(0) == heads[0].dim(0), kInvalidArgument, "raw_heads_view: batch mismatch");
    HeadLevel& h = v.levels[l];
    h.data = t.data();
    h.ny = static_cast<int>(t.dim(2));
    h.nx = static_cast<int>(t.dim(3));
    h.stride = kStrides[l];
    h.num_anchors = 3;
    std::copy(kAnchors[l], kAnchors[l] + 6, h.anchors);
  }
  v.batch = heads[0].dim(0);
  return v;
}

Candidates decode_cpu(const OutputView& out, int64_t image, const PostprocessOptions& o,
                      int64_t* overflow) {
  validate_options(o);
  YOLOCU_CHECK(out.data || out.rows == 0, kInvalidArgument, "decode: null output data");
  YOLOCU_CHECK(out.layout == OutputLayout::kYolov5 || out.layout == OutputLayout::kYolov8, kInvalidArgument,
               "decode: unknown output layout ", static_cast<int>(out.layout));
  const bool v8 = out.layout == OutputLayout::kYolov8;
  YOLOCU_CHECK(out.channels >= (v8 ? 5 : 6), kInvalidArgument, "decode: channels must be ",
               v8 ? "4 + nc >= 5" : "5 + nc >= 6", ", got ", out.channels);
  YOLOCU_CHECK(out.dtype == DType::kFloat32 || out.dtype == DType::kFloat16, kUnsupported,
               "decode: output must be float32 or float16");
  YOLOCU_CHECK(image >= 0 && image < out.batch, kInvalidArgument, "decode: image ", image,
               " out of range for batch ", out.batch);
  YOLOCU_CHECK(out.rows >= 0 && out.rows <= std::numeric_limits<int>::max(), kInvalidArgument,
               "decode: row count out of range: ", out.rows);
  const bool fp16 = out.dtype == DType::kFloat16;
  const float conf = threshold_in_dtype(o.conf_threshold, out.dtype);
  const int nc = out.num_classes();
  std::vector<float> v(static_cast<size_t>(out.channels));
  Candidates c;
  const int64_t base = image * out.rows * out.channels;
  if (v8) {
    // Channel-major: the best class score of every anchor in one sweep over the contiguous
    // channels (amax(cls) > conf prefilter; NaN propagates and fails the test), then the rows
    // that pass are gathered.
    std::vector<float> best(static_cast<size_t>(out.rows), -std::numeric_limits<float>::infinity());
    for (int64_t k = 4; k < out.channels; ++k) {
      const int64_t at = base + k * out.rows;
      for (int64_t r = 0; r < out.rows; ++r) {
        const float s = load_value(out.data, out.dtype, at + r);
        float& b = best[static_cast<size_t>(r)];
        b = (s > b || std::isnan(s)) && !std::isnan(b) ? s : b;
      }
    }
    for (int64_t r = 0; r < out.rows; ++r) {
      if (!(best[static_cast<size_t>(r)] > conf)) continue;
      for (int64_t k = 0; k < out.channels; ++k)
        v[static_cast<size_t>(k)] = load_value(out.data, out.dtype, base + k * out.rows + r);
      emit_row_v8(v.data(), nc, static_cast<int>(r), fp16, conf, o, c);
    }
  } else {
    for (int64_t r = 0; r < out.rows; ++r) {
      const int64_t at = base + r * out.channels;
      // cheap objectness test before converting the whole row
      if (!(load_value(out.data, out.dtype, at + 4) > conf)) continue;
      for (int64_t k = 0; k < out.channels; ++k) v[static_cast<size_t>(k)] = load_value(out.data, out.dtype, at + k);
      emit_row(v.data(), nc, static_cast<int>(r), fp16, conf, o, c);
    }
  }
  sort_and_cap(c, o.max_nms, overflow);
  return c;
}

Candidates decode_raw_heads_cpu(const RawHeadsView& heads, int64_t image,
                                const PostprocessOptions& o, int64_t* overflow) {
  validate_options(o);
  YOLOCU_CHECK(heads.num_classes >= 1, kInvalidArgument, "decode_raw_heads: num_classes must be >= 1");
  YOLOCU_CHECK(heads.num_levels >= 1 && heads.num_levels <= kMaxHeadLevels, kInvalidArgument,
               "decode_raw_heads: 1..", kMaxHeadLevels, " levels, got ", heads.num_levels);
  YOLOCU_CHECK(heads.dtype == DType::kFloat32 || heads.dtype == DType::kFloat16, kUnsupported,
               "decode_raw_heads: heads must be float32 or float16");
  YOLOCU_CHECK(image >= 0 && image < heads.batch, kInvalidArgument, "decode_raw_heads: image ",
               image, " out of range for batch ", heads.batch);
  YOLOCU_CHECK(heads.rows() <= std::numeric_limits<int>::max(), kInvalidArgument,
               "decode_raw_heads: too many rows: ", heads.rows());
  const bool fp16 = heads.dtype == DType::kFloat16;
  auto r = [fp16](float x) { return fp16 ? round_half(x) : x; };
  const float conf = threshold_in_dtype(o.conf_threshold, heads.dtype);
  const int nc = heads.num_classes, no = 5 + nc;
  std::vector<float> v(static_cast<size_t>(no));
  Candidates c;
  int64_t row = 0;
  for (int l = 0; l < heads.num_levels; ++l) {
    const HeadLevel& h = heads.levels[l];
    YOLOCU_CHECK(h.data && h.ny > 0 && h.nx > 0 && h.num_anchors >= 1 &&
                     h.num_anchors <= kMaxAnchors && h.stride > 0,
                 kInvalidArgument, "decode_raw_heads: level ", l, " is malformed");
    const int64_t plane = static_cast<int64_t>(h.ny) * h.nx;
    const int64_t base = image * h.num_anchors * no * plane;
    for (int a = 0; a < h.num_anchors; ++a) {
      for (int y = 0; y < h.ny; ++y) {
        for (int x = 0; x < h.nx; ++x, ++row) {
          const int64_t at = base + static_cast<int64_t>(a) * no * plane + static_cast<int64_t>(y) * h.nx + x;
          const float obj = r(sigmoid(load_value(h.data, heads.dtype, at + 4 * plane)));
          if (!(obj > conf)) continue;
          for (int k = 0; k < no; ++k)
            v[static_cast<size_t>(k)] = r(sigmoid(load_value(h.data, heads.dtype, at + k * plane)));
          head_to_xywh(v.data(), x, y, h.stride, h.anchors[2 * a], h.anchors[2 * a + 1], r);
          emit_row(v.data(), nc, static_cast<int>(row), fp16, conf, o, c);
        }
      }
    }
  }
  sort_and_cap(c, o.max_nms, overflow);
  return c;
}

std::vector<int> nms_cpu(const Candidates& c, const PostprocessOptions& o) {
  validate_options(o);
  const size_t n = c.size();
  for (size_t i = 1; i < n; ++i)
    YOLOCU_CHECK(!canonical_before(c[i].score, c[i].row, c[i].class_id, c[i - 1].score,
                                   c[i - 1].row, c[i - 1].class_id),
                 kInvalidArgument, "nms: candidates are not in canonical order at ", i);
  const float cut = nms_iou_cut(o.iou_threshold);
  std::vector<Box> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = nms_box(c[i].box, c[i].class_id, o.agnostic);
  std::vector<int> keep;
  if (o.nms == NmsMode::kGreedy) {
    // Walk in canonical order; each kept box suppresses the later boxes it overlaps.
    std::vector<char> suppressed(n, 0);
    for (size_t i = 0; i < n && keep.size() < static_cast<size_t>(o.max_det); ++i) {
      if (suppressed[i]) continue;
      keep.push_back(static_cast<int>(i));
      for (size_t j = i + 1; j < n; ++j)
        if (!suppressed[j] && box_iou(b[i], b[j]) > cut) suppressed[j] = 1;
    }
  } else {
    // Fast NMS: box j survives iff no earlier box (kept or not) overlaps it.
    for (size_t j = 0; j < n && keep.size() < static_cast<size_t>(o.max_det); ++j) {
      bool dropped = false;
      for (size_t i = 0; i < j && !dropped; ++i) dropped = box_iou(b[i], b[j]) > cut;
      if (!dropped) keep.push_back(static_cast<int>(j));
    }
  }
  return keep;
}

Detections project_cpu(const Candidates& c, const std::vector<int>& keep,
                       const LetterboxGeometry& g, BoxScaling scaling, bool clip) {
  check_geometry(g);
  YOLOCU_CHECK(scaling == BoxScaling::kContinuousPad || scaling == BoxScaling::kIntegerPad, kInvalidArgument,
               "project: unknown box scaling ", static_cast<int>(scaling));
  const ProjectParams p = project_params(g, scaling, clip);
  Detections d;
  d.reserve(keep.size());
  for (int k : keep) {
    YOLOCU_CHECK(k >= 0 && static_cast<size_t>(k) < c.size(), kInvalidArgument, "project: index ",
                 k, " out of range");
    const Candidate& cd = c[static_cast<size_t>(k)];
    const Box b = project_box(cd.box, p);
    d.push_back({b.x1, b.y1, b.x2, b.y2, cd.score, cd.class_id});
  }
  return d;
}

Detections postprocess_cpu(const OutputView& output, int64_t image, const LetterboxGeometry& g,
                           const PostprocessOptions& o) {
  check_geometry(g);
  const Candidates c = decode_cpu(output, image, o);
  return project_cpu(c, nms_cpu(c, o), g, box_scaling(output.layout), o.clip_boxes);
}

Detections postprocess_cpu(const Tensor& output, const LetterboxGeometry& g,
                           const PostprocessOptions& o) {
  const OutputView v = output_view(output);
  YOLOCU_CHECK(v.batch == 1, kInvalidArgument,
               "postprocess_cpu: one image expected, use postprocess_batch_cpu for batch ", v.batch);
  return postprocess_cpu(v, 0, g, o);
}

std::vector<Detections> postprocess_batch_cpu(const OutputView& output,
                                              const std::vector<LetterboxGeometry>& geometries,
                                              const PostprocessOptions& o) {
  YOLOCU_CHECK(static_cast<int64_t>(geometries.size()) == output.batch, kInvalidArgument,
               "postprocess_batch_cpu: ", geometries.size(), " geometries for batch ", output.batch);
  std::vector<Detections> all;
  all.reserve(geometries.size());
  for (int64_t i = 0; i < output.batch; ++i)
    all.push_back(postprocess_cpu(output, i, geometries[static_cast<size_t>(i)], o));
  return all;
}

Detections postprocess_raw_heads_cpu(const RawHeadsView& heads, int64_t image,
                                     const LetterboxGeometry& g, const PostprocessOptions& o) {
  check_geometry(g);
  const Candidates c = decode_raw_heads_cpu(heads, image, o);
  return project_cpu(c, nms_cpu(c, o), g, BoxScaling::kContinuousPad, o.clip_boxes);
}

}  // namespace yolocu
