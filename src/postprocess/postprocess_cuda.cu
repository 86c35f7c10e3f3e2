// CUDA post-processing, host side: plan, workspace and the launch sequence of one call (the
// kernels live in postprocess_decode.cu and postprocess_nms.cu, the bitmask path's device code in
// postprocess_bitmask.cuh; shared device definitions in postprocess_device.cuh). Semantics:
// postprocess_cpu.cpp (the reference) and docs/postprocess.md.
//
// Launches per call (one stream, no allocation, no synchronisation, capturable in a CUDA graph):
//   decode_kernel   keys of every candidate into the image's slots (and their NMS boxes when the
//                   plan has a bitmask path). A launch of its own: every NMS decision needs the
//                   image's complete candidate set, i.e. a grid-wide dependency.
//   [6 x select_kernel + decode_kernel<emit>: only when an image can find more candidates than
//    slots (plan.select_passes, e.g. val settings): radix select of the capacity-th key, then
//    exactly the best; each pass needs the previous pass's histogram of the whole image]
//   nms_kernel      a block per image (kept-box path) + plan.bitmask blocks (IoU bitmask tiles of
//                   crowded images, swept by the block finishing the last tile), projection,
//                   results written straight into the mapped pinned buffer, state zeroed.
// So detect settings (no overflow possible) are 2 launches, down from 4 operations (memset of the
// state, decode, NMS, device-to-host copy of the results): the memset is gone because nms_kernel
// leaves the state zeroed (a call that threw half-way makes the next one enqueue it), the copy
// because nms_kernel writes the results through the mapped pinned pointer, and the bitmask path
// adds blocks to the NMS launch instead of kernels before it (no block ever waits for another).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "postprocess/postprocess_device.cuh"
#include "yolocu/postprocess_cuda.hpp"

namespace yolocu {

using namespace postprocess_detail;

namespace {

constexpr size_t kAlign = 256;

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct CudaFreeHost {
  void operator()(void* p) const { cudaFreeHost(p); }
};

size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Byte offsets of the sub-buffers of the one device allocation. [0, state_bytes) must be zero
// between calls (counts, select state, bitmask ranks).
struct Layout {
  size_t counts = 0, grid_done = 0, emitted = 0, done = 0, below = 0, prefix = 0, hist = 0;
  size_t tiles_done = 0, rank = 0, state_bytes = 0;
  size_t keys = 0, seen = 0, classes = 0, boxes = 0, mask = 0, order = 0, total = 0;
  size_t result_bytes = 0;  // the pinned buffer: headers, then max_det records per image
};

struct Take {
  size_t at = 0;
  size_t operator()(size_t bytes) {
    const size_t off = at;
    at = align_up(at + std::max<size_t>(bytes, 1));
    return off;
  }
};

// Device bytes of the bitmask path for `b` images of `n` slots (mask, boxes, order, ranks, and
// a tile counter per image).
size_t bitmask_bytes(size_t b, size_t n) {
  if (n == 0) return 0;
  const size_t words = (n + 63) / 64;
  return align_up(b * n * words * sizeof(uint64_t)) + align_up(b * n * sizeof(Box)) +
         2 * align_up(b * n * sizeof(int)) + align_up(b * sizeof(int));
}

Layout make_layout(const PostprocessCudaPlan& plan, const PostprocessOptions& o) {
  const size_t b = static_cast<size_t>(plan.max_batch), cap = static_cast<size_t>(plan.capacity);
  const size_t bm = static_cast<size_t>(plan.bitmask_capacity);
  Layout l;
  Take take;
  l.counts = take(b * sizeof(int));
  l.grid_done = take(sizeof(int));
  if (plan.select_passes) {
    l.emitted = take(b * sizeof(int));
    l.done = take(b * kSelectPasses * sizeof(int));
    l.below = take(b * sizeof(int));
    l.prefix = take(b * sizeof(uint64_t));
    l.hist = take(b * kSelectPasses * kBins * sizeof(int));
  }
  if (bm > 0) {
    l.tiles_done = take(b * sizeof(int));
    l.rank = take(b * bm * sizeof(int));
  }
  l.state_bytes = take.at;
  l.keys = take(b * cap * sizeof(uint64_t));
  if (o.nms == NmsMode::kFast) l.seen = take(b * cap * sizeof(Box));
  l.classes = take(std::max<size_t>(o.classes.size(), 1) * sizeof(int));
  if (bm > 0) {
    l.boxes = take(b * bm * sizeof(Box));
    l.mask = take(b * bm * ((bm + 63) / 64) * sizeof(uint64_t));
    l.order = take(b * bm * sizeof(int));
  }
  l.total = take.at;
  l.result_bytes = b * sizeof(ResultHeader) + b * static_cast<size_t>(o.max_det) * sizeof(DetRec);
  return l;
}

}  // namespace

PostprocessCudaPlan plan_postprocess_cuda(int64_t max_batch, int64_t rows, int num_classes,
                                          const PostprocessOptions& o, int64_t candidate_capacity,
                                          const CudaNmsConfig& nms) {
  validate_options(o);
  YOLOCU_CHECK(max_batch >= 1 && max_batch <= kMaxCudaBatch, kInvalidArgument,
               "postprocess_cuda: batch must be in [1, ", kMaxCudaBatch, "], got ", max_batch);
  YOLOCU_CHECK(rows >= 1 && num_classes >= 1, kInvalidArgument, "postprocess_cuda: rows ", rows,
               ", classes ", num_classes, " (both must be >= 1)");
  YOLOCU_CHECK(rows * num_classes < (int64_t{1} << 31), kInvalidArgument,
               "postprocess_cuda: rows x classes must be < 2^31, got ", rows, " x ", num_classes);
  YOLOCU_CHECK(o.max_det <= kMaxCudaMaxDet, kInvalidArgument, "postprocess_cuda: max_det must be <= ",
               kMaxCudaMaxDet, ", got ", o.max_det);
  YOLOCU_CHECK(candidate_capacity >= 0, kInvalidArgument,
               "postprocess_cuda: candidate_capacity must be >= 0, got ", candidate_capacity);
  YOLOCU_CHECK(nms.path == CudaNmsPath::kAuto || nms.path == CudaNmsPath::kKeptBoxes ||
                   nms.path == CudaNmsPath::kBitmask,
               kInvalidArgument, "postprocess_cuda: unknown NMS path ", static_cast<int>(nms.path));
  YOLOCU_CHECK(!(nms.path == CudaNmsPath::kBitmask && o.nms == NmsMode::kFast), kInvalidArgument,
               "postprocess_cuda: the bitmask NMS path is greedy only (options.nms is kFast)");
  PostprocessCudaPlan p;
  p.max_batch = max_batch;
  p.rows = rows;
  p.num_classes = num_classes;
  int64_t per_row = 1;
  if (o.multi_label) {
    per_row = num_classes;
    if (!o.classes.empty()) {
      std::vector<int> ids;
      for (int c : o.classes)
        if (c < num_classes) ids.push_back(c);
      std::sort(ids.begin(), ids.end());
      per_row = std::unique(ids.begin(), ids.end()) - ids.begin();
    }
  }
  p.max_candidates = rows * per_row;
  int64_t cap = candidate_capacity > 0 ? std::min<int64_t>(candidate_capacity, o.max_nms) : o.max_nms;
  p.select_passes = p.max_candidates > cap;
  cap = std::max<int64_t>(1, std::min(cap, p.max_candidates));
  YOLOCU_CHECK(cap * max_batch < (int64_t{1} << 31), kInvalidArgument,
               "postprocess_cuda: candidate slots ", cap, " x batch ", max_batch, " too large");
  p.capacity = cap;
  // Bitmask path: the most slots per image whose mask, boxes, ranks and order fit the budget.
  p.nms_path = nms.path;
  if (nms.path != CudaNmsPath::kKeptBoxes && o.nms == NmsMode::kGreedy) {
    const size_t b = static_cast<size_t>(max_batch);
    int64_t n = std::min<int64_t>(cap, kMaxNmsBitmaskCandidates);
    if (bitmask_bytes(b, static_cast<size_t>(n)) > nms.bitmask_bytes) {
      n = n / 64 * 64;
      while (n > 0 && bitmask_bytes(b, static_cast<size_t>(n)) > nms.bitmask_bytes) n -= 64;
    }
    const bool forced = nms.path == CudaNmsPath::kBitmask;
    YOLOCU_CHECK(!forced || n > 0, kInvalidArgument, "postprocess_cuda: bitmask_bytes ",
                 nms.bitmask_bytes, " hold no bitmask of 64 candidates at batch ", max_batch, " (",
                 bitmask_bytes(b, 64), " bytes needed)");
    if (forced || n > kNmsBitmaskAutoMin) {
      p.bitmask_capacity = n;
      p.bitmask_min_candidates = forced ? 1 : kNmsBitmaskAutoMin + 1;
      p.bitmask_bytes = bitmask_bytes(b, static_cast<size_t>(n));
    }
  }
  const Layout l = make_layout(p, o);
  p.device_bytes = l.total;
  p.pinned_bytes = l.result_bytes;
  p.nms_shared_bytes = static_cast<size_t>(o.max_det) * (sizeof(uint64_t) + sizeof(Box));
  return p;
}

struct PostprocessWorkspace::Impl {
  PostprocessCudaPlan plan;
  Layout layout;
  PostprocessOptions options;
  float cut = 0;
  int64_t last_batch = 0;
  int mask_blocks = 0;       // nms_kernel's blocks for the bitmask path
  bool needs_reset = false;  // a call threw half-way: the state may not be zero
  std::unique_ptr<void, CudaFree> d_mem;
  std::unique_ptr<void, CudaFreeHost> h_result;
  void* d_result = nullptr;  // device address of h_result (mapped)
  uint8_t* base() const { return static_cast<uint8_t*>(d_mem.get()); }
  SelectState state() const {
    SelectState s{};
    s.counts = reinterpret_cast<int*>(base() + layout.counts);
    s.grid_done = reinterpret_cast<int*>(base() + layout.grid_done);
    if (plan.bitmask_capacity > 0)
      s.tiles_done = reinterpret_cast<int*>(base() + layout.tiles_done);
    if (plan.select_passes) {
      s.emitted = reinterpret_cast<int*>(base() + layout.emitted);
      s.done = reinterpret_cast<int*>(base() + layout.done);
      s.below = reinterpret_cast<int*>(base() + layout.below);
      s.prefix = reinterpret_cast<uint64_t*>(base() + layout.prefix);
      s.hist = reinterpret_cast<int*>(base() + layout.hist);
    }
    return s;
  }
};

PostprocessWorkspace::PostprocessWorkspace(int64_t max_batch, int64_t rows, int num_classes,
                                           const PostprocessOptions& options,
                                           int64_t candidate_capacity, const CudaNmsConfig& nms)
    : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  w.plan = plan_postprocess_cuda(max_batch, rows, num_classes, options, candidate_capacity, nms);
  w.layout = make_layout(w.plan, options);
  w.options = options;
  w.cut = nms_iou_cut(options.iou_threshold);
  void* d = nullptr;
  YOLOCU_CUDA_CHECK(cudaMalloc(&d, w.layout.total));
  w.d_mem.reset(d);
  YOLOCU_CUDA_CHECK(cudaMemset(d, 0, w.layout.total));  // the state starts at zero
  if (!options.classes.empty())
    YOLOCU_CUDA_CHECK(cudaMemcpy(w.base() + w.layout.classes, options.classes.data(),
                                 options.classes.size() * sizeof(int), cudaMemcpyHostToDevice));
  void* h = nullptr;
  YOLOCU_CUDA_CHECK(cudaHostAlloc(&h, w.layout.result_bytes, cudaHostAllocMapped));
  w.h_result.reset(h);
  std::memset(h, 0, w.layout.result_bytes);  // results of an unused image read as empty
  YOLOCU_CUDA_CHECK(cudaHostGetDevicePointer(&w.d_result, h, 0));
  if (w.plan.bitmask_capacity > 0) {
    int device = 0, sms = 0;
    YOLOCU_CUDA_CHECK(cudaGetDevice(&device));
    YOLOCU_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    // Half the SMs (a 1024-thread block fills an SM's registers): the image blocks of the same
    // launch find free SMs; at most the tiles there can be.
    const int64_t tiles = ((w.plan.bitmask_capacity + kMaskRows - 1) / kMaskRows) *
                          ((w.plan.bitmask_capacity + kMaskCols - 1) / kMaskCols);
    w.mask_blocks =
        static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(sms / 2, max_batch * tiles)));
  }
  // the attribute is per kernel, shared by all workspaces: always the largest any plan can use
  const size_t smem = static_cast<size_t>(kMaxCudaMaxDet) * (sizeof(uint64_t) + sizeof(Box));
#define YOLOCU_SET_LIMIT(S) set_nms_shared_limit<S>(smem);
  YOLOCU_FOR_EACH_POSTPROCESS_SOURCE(YOLOCU_SET_LIMIT)
#undef YOLOCU_SET_LIMIT
}

PostprocessWorkspace::~PostprocessWorkspace() = default;

const PostprocessCudaPlan& PostprocessWorkspace::plan() const { return impl_->plan; }

size_t PostprocessWorkspace::device_bytes() const { return impl_->plan.device_bytes; }

std::vector<Detections> PostprocessWorkspace::results() const {
  const Impl& w = *impl_;
  const auto* hdr = static_cast<const ResultHeader*>(w.h_result.get());
  const auto* dets = reinterpret_cast<const DetRec*>(hdr + w.plan.max_batch);
  std::vector<Detections> all(static_cast<size_t>(w.last_batch));
  for (int64_t b = 0; b < w.last_batch; ++b) {
    Detections& out = all[static_cast<size_t>(b)];
    out.reserve(static_cast<size_t>(hdr[b].num_detections));
    for (int k = 0; k < hdr[b].num_detections; ++k) {
      const DetRec& d = dets[b * w.options.max_det + k];
      out.push_back({d.x1, d.y1, d.x2, d.y2, d.confidence, d.class_id});
    }
  }
  return all;
}

std::vector<int64_t> PostprocessWorkspace::candidates() const {
  const Impl& w = *impl_;
  const auto* hdr = static_cast<const ResultHeader*>(w.h_result.get());
  std::vector<int64_t> c;
  for (int64_t b = 0; b < w.last_batch; ++b) c.push_back(hdr[b].num_candidates);
  return c;
}

std::vector<int64_t> PostprocessWorkspace::overflow() const {
  std::vector<int64_t> o = candidates();
  for (int64_t& v : o) v = std::max<int64_t>(0, v - impl_->plan.capacity);
  return o;
}

namespace {

bool same_options(const PostprocessOptions& a, const PostprocessOptions& b) {
  return a.conf_threshold == b.conf_threshold && a.iou_threshold == b.iou_threshold &&
         a.max_det == b.max_det && a.max_nms == b.max_nms && a.agnostic == b.agnostic &&
         a.multi_label == b.multi_label && a.classes == b.classes && a.nms == b.nms &&
         a.clip_boxes == b.clip_boxes;
}

ProjectBatch project_batch(const std::vector<LetterboxGeometry>& geometries, BoxScaling scaling, bool clip) {
  ProjectBatch geo{};
  for (size_t i = 0; i < geometries.size(); ++i) {
    const LetterboxGeometry& g = geometries[i];
    YOLOCU_CHECK(g.src_w > 0 && g.src_h > 0 && g.gain > 0 && std::isfinite(g.gain),
                 kInvalidArgument, "postprocess_cuda: invalid geometry for image ", i, " (source ",
                 g.src_w, "x", g.src_h, ", gain ", g.gain, ")");
    geo.p[i] = project_params(g, scaling, clip);
  }
  return geo;
}

template <class Src>
void enqueue(const Src& src, int batch, DType dtype, const std::vector<LetterboxGeometry>& geometries,
             PostprocessWorkspace::Impl& w, cudaStream_t stream, BoxScaling scaling = BoxScaling::kContinuousPad) {
  const PostprocessOptions& o = w.options;
  const ProjectBatch geo = project_batch(geometries, scaling, o.clip_boxes);
  const PostprocessCudaPlan& plan = w.plan;
  DecodeParams dp{};
  dp.conf = dtype == DType::kFloat16 ? half_to_float(float_to_half(o.conf_threshold))
                                     : o.conf_threshold;
  dp.multi_label = o.multi_label;
  dp.agnostic = o.agnostic;
  dp.classes = reinterpret_cast<const int*>(w.base() + w.layout.classes);
  dp.n_classes = static_cast<int>(o.classes.size());
  dp.capacity = static_cast<int>(plan.capacity);
  dp.bitmask_cap = static_cast<int>(plan.bitmask_capacity);
  dp.boxes =
      plan.bitmask_capacity > 0 ? reinterpret_cast<Box*>(w.base() + w.layout.boxes) : nullptr;
  const SelectState st = w.state();
  auto* keys = reinterpret_cast<uint64_t*>(w.base() + w.layout.keys);
  BitmaskParams bm{};
  bm.keys = keys;
  bm.capacity = dp.capacity;
  bm.bitmask_cap = dp.bitmask_cap;
  bm.bitmask_min = static_cast<int>(plan.bitmask_min_candidates) - 1;  // takes n > bitmask_min
  bm.cut = w.cut;
  if (plan.bitmask_capacity > 0) {
    bm.boxes = dp.boxes;
    bm.mask = reinterpret_cast<uint64_t*>(w.base() + w.layout.mask);
    bm.rank = reinterpret_cast<int*>(w.base() + w.layout.rank);
    bm.order = reinterpret_cast<int*>(w.base() + w.layout.order);
  }
  NmsParams np{};
  np.capacity = dp.capacity;
  np.max_det = o.max_det;
  np.cut = w.cut;
  np.agnostic = o.agnostic;
  np.fast = o.nms == NmsMode::kFast;
  auto* seen = np.fast ? reinterpret_cast<Box*>(w.base() + w.layout.seen) : nullptr;
  auto* hdr = static_cast<ResultHeader*>(w.d_result);
  auto* dets = reinterpret_cast<DetRec*>(hdr + plan.max_batch);
  w.last_batch = batch;
  // A throw between two launches leaves counters of a decode whose NMS never ran: the next call
  // starts with a memset.
  const bool reset = w.needs_reset;
  w.needs_reset = true;  // until the last launch is enqueued
  if (reset) YOLOCU_CUDA_CHECK(cudaMemsetAsync(w.base(), 0, w.layout.state_bytes, stream));
  launch_decode(src, batch, dp, st, keys, plan.select_passes, stream);
  launch_nms(src, batch, w.mask_blocks, np, bm, st, keys, seen, geo, hdr, dets,
             plan.nms_shared_bytes, stream);
  w.needs_reset = false;
}

void check_call(const PostprocessOptions& o, const PostprocessWorkspace::Impl& w, int64_t batch,
                int64_t rows, int64_t nc, DType dtype, size_t n_geometries, const char* what) {
  validate_options(o);
  YOLOCU_CHECK(same_options(o, w.options), kInvalidArgument, what,
               ": options differ from the workspace's");
  YOLOCU_CHECK(batch >= 1 && batch <= w.plan.max_batch && rows == w.plan.rows &&
                   nc == w.plan.num_classes,
               kInvalidArgument, what, ": input ", batch, " x ", rows, " rows x ", nc,
               " classes does not fit the workspace (", w.plan.max_batch, " x ", w.plan.rows,
               " x ", w.plan.num_classes, ")");
  YOLOCU_CHECK(dtype == DType::kFloat32 || dtype == DType::kFloat16, kUnsupported, what,
               ": input must be float32 or float16");
  YOLOCU_CHECK(static_cast<int64_t>(n_geometries) == batch, kInvalidArgument, what, ": ",
               n_geometries, " geometries for batch ", batch);
}

}  // namespace

void postprocess_cuda(const OutputView& out, const std::vector<LetterboxGeometry>& geometries,
                      const PostprocessOptions& o, PostprocessWorkspace& ws, cudaStream_t stream) {
  PostprocessWorkspace::Impl& w = *ws.impl_;
  YOLOCU_CHECK(out.data != nullptr, kInvalidArgument, "postprocess_cuda: null output data");
  YOLOCU_CHECK(out.layout == OutputLayout::kYolov5 || out.layout == OutputLayout::kYolov8, kInvalidArgument,
               "postprocess_cuda: unknown output layout ", static_cast<int>(out.layout));
  const bool v8 = out.layout == OutputLayout::kYolov8;
  check_call(o, w, out.batch, out.rows, out.num_classes(), out.dtype, geometries.size(), "postprocess_cuda");
  const int batch = static_cast<int>(out.batch);
  const int rows = static_cast<int>(out.rows), nc = out.num_classes();
  if (v8) {
    if (out.dtype == DType::kFloat16)
      enqueue(V8Source<__half, RoundHalf>{static_cast<const __half*>(out.data), rows, nc}, batch, out.dtype,
              geometries, w, stream, BoxScaling::kIntegerPad);
    else
      enqueue(V8Source<float, RoundNone>{static_cast<const float*>(out.data), rows, nc}, batch, out.dtype,
              geometries, w, stream, BoxScaling::kIntegerPad);
    return;
  }
  if (out.dtype == DType::kFloat16)
    enqueue(MergedSource<__half, RoundHalf>{static_cast<const __half*>(out.data), rows, nc}, batch,
            out.dtype, geometries, w, stream);
  else
    enqueue(MergedSource<float, RoundNone>{static_cast<const float*>(out.data), rows, nc}, batch,
            out.dtype, geometries, w, stream);
}

void postprocess_raw_heads_cuda(const RawHeadsView& heads,
                                const std::vector<LetterboxGeometry>& geometries,
                                const PostprocessOptions& o, PostprocessWorkspace& ws,
                                cudaStream_t stream) {
  PostprocessWorkspace::Impl& w = *ws.impl_;
  YOLOCU_CHECK(heads.num_levels >= 1 && heads.num_levels <= kMaxHeadLevels, kInvalidArgument,
               "postprocess_raw_heads_cuda: 1..", kMaxHeadLevels, " levels, got ",
               heads.num_levels);
  for (int l = 0; l < heads.num_levels; ++l) {
    const HeadLevel& h = heads.levels[l];
    YOLOCU_CHECK(h.data && h.ny > 0 && h.nx > 0 && h.num_anchors >= 1 &&
                     h.num_anchors <= kMaxAnchors && h.stride > 0,
                 kInvalidArgument, "postprocess_raw_heads_cuda: level ", l, " is malformed");
  }
  check_call(o, w, heads.batch, heads.rows(), heads.num_classes, heads.dtype, geometries.size(),
             "postprocess_raw_heads_cuda");
  auto fill = [&](auto& src) {
    int row = 0;
    for (int l = 0; l < heads.num_levels; ++l) {
      const HeadLevel& h = heads.levels[l];
      auto& L = src.lv[l];
      L.data = static_cast<decltype(L.data)>(h.data);
      L.ny = h.ny;
      L.nx = h.nx;
      L.na = h.num_anchors;
      L.row_begin = row;
      L.stride = h.stride;
      std::copy(h.anchors, h.anchors + 2 * kMaxAnchors, L.anchors);
      row += h.num_anchors * h.ny * h.nx;
    }
    src.num_levels = heads.num_levels;
    src.rows = row;
    src.nc = heads.num_classes;
  };
  const int batch = static_cast<int>(heads.batch);
  if (heads.dtype == DType::kFloat16) {
    HeadsSource<__half, RoundHalf> src{};
    fill(src);
    enqueue(src, batch, heads.dtype, geometries, w, stream);
  } else {
    HeadsSource<float, RoundNone> src{};
    fill(src);
    enqueue(src, batch, heads.dtype, geometries, w, stream);
  }
}

}  // namespace yolocu
