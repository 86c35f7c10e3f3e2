// CUDA decode + greedy NMS + back-projection of the merged YOLOv5 output. Semantics: see
// postprocess_cpu.cpp (the reference) and docs/postprocess.md. This file is compiled with
// -fmad=false so that every float expression rounds exactly as on the host.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "core/check.hpp"
#include "postprocess/postprocess_common.hpp"
#include "yolocu/postprocess_cuda.hpp"

#define YOLOCU_CUDA_CHECK(stmt)                                                                 \
  do {                                                                                          \
    const cudaError_t e_ = (stmt);                                                              \
    if (e_ != cudaSuccess)                                                                      \
      ::yolocu::detail::fail(::yolocu::ErrorCode::kCuda, __FILE__, ":", __LINE__, ": ", #stmt, \
                             ": ", cudaGetErrorString(e_));                                    \
  } while (0)

namespace yolocu {

namespace {

constexpr int kThreads = 256;
constexpr int kMaskBits = 64;      // boxes per NMS mask word
constexpr int kMaxBatchParams = 128;  // geometries passed by value to the projection kernel

struct CandidateRec {
  Box box;
  float score;
  int class_id;
  int row;
};

// What comes back to the host: per image {detections, candidates found}, then the detections.
struct ResultHeader {
  int num_detections;
  int num_candidates;
};
struct DetRec {
  float x1, y1, x2, y2, confidence;
  int class_id;
};

struct ProjectBatch {
  ProjectParams p[kMaxBatchParams];
};

struct RoundNone {
  __device__ float operator()(float x) const { return x; }
};
struct RoundHalf {
  __device__ float operator()(float x) const { return __half2float(__float2half_rn(x)); }
};

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __half* p, int64_t i) { return __half2float(p[i]); }

// Sort key: score descending (positive float bits are monotonic), then row * nc + class ascending.
__device__ __forceinline__ uint64_t make_key(float score, int row, int nc, int cls) {
  const uint32_t bits = __float_as_uint(score);
  return (static_cast<uint64_t>(0xFFFFFFFFu - bits) << 32) |
         static_cast<uint32_t>(static_cast<int64_t>(row) * nc + cls);
}

// Decode: one thread per (image, row); grid (ceil(rows / 256), batch). Each thread finds its
// row's 0..nc candidates; the warp prefix-sums its counts and lane 31 reserves the warp's slots
// with ONE atomicAdd on the image's counter (no per-candidate global atomics). Slots past the
// capacity are counted but not written.
template <typename T, typename Round>
__global__ void decode_kernel(const T* __restrict__ out, int rows, int channels, float conf,
                              bool multi_label, const int* __restrict__ classes, int num_classes_filter,
                              int capacity, int* __restrict__ counts, CandidateRec* __restrict__ cand,
                              uint64_t* __restrict__ keys, int* __restrict__ vals) {
  const int img = blockIdx.y;
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const int nc = channels - 5;
  const Round r;
  const T* p = out + (static_cast<int64_t>(img) * rows + row) * channels;
  float obj = 0.f;
  int n_mine = 0, best_c = 0;
  float best = 0.f;
  auto allowed = [&](int c) {
    if (num_classes_filter == 0) return true;
    for (int k = 0; k < num_classes_filter; ++k)
      if (classes[k] == c) return true;
    return false;
  };
  if (row < rows) {
    obj = load(p, 4);
    if (obj > conf) {
      if (multi_label) {
        for (int c = 0; c < nc; ++c) n_mine += (r(load(p, 5 + c) * obj) > conf && allowed(c));
      } else {
        best = r(load(p, 5) * obj);
        bool nan = isnan(best);
        for (int c = 1; c < nc; ++c) {
          const float s = r(load(p, 5 + c) * obj);
          nan = nan || isnan(s);
          if (s > best) best = s, best_c = c;
        }
        n_mine = (!nan && best > conf && allowed(best_c)) ? 1 : 0;
      }
    }
  }
  // warp-aggregated slot reservation
  const unsigned lane = threadIdx.x & 31u;
  int incl = n_mine;
  for (int d = 1; d < 32; d <<= 1) {
    const int v = __shfl_up_sync(0xFFFFFFFFu, incl, d);
    if (lane >= static_cast<unsigned>(d)) incl += v;
  }
  int base = 0;
  if (lane == 31 && incl > 0) base = atomicAdd(&counts[img], incl);
  base = __shfl_sync(0xFFFFFFFFu, base, 31);
  if (n_mine == 0) return;
  int slot = base + incl - n_mine;
  const Box box = xywh_to_xyxy(load(p, 0), load(p, 1), load(p, 2), load(p, 3), r);
  const int64_t img_base = static_cast<int64_t>(img) * capacity;
  auto emit = [&](float s, int c) {
    if (slot < capacity) {
      const int64_t at = img_base + slot;
      cand[at] = CandidateRec{box, s, c, row};
      keys[at] = make_key(s, row, nc, c);
      vals[at] = slot;
    }
    ++slot;
  };
  if (multi_label) {
    for (int c = 0; c < nc; ++c) {
      const float s = r(load(p, 5 + c) * obj);
      if (s > conf && allowed(c)) emit(s, c);
    }
  } else {
    emit(best, best_c);
  }
}

// Segment bounds for the sort: one thread per image.
__global__ void segments_kernel(const int* counts, int batch, int capacity, int* begin, int* end) {
  const int img = blockIdx.x * blockDim.x + threadIdx.x;
  if (img >= batch) return;
  begin[img] = img * capacity;
  end[img] = img * capacity + min(counts[img], capacity);
}

// Gather: one thread per (image, sorted position < n_img); writes the NMS box (class-offset) and
// the candidate index in canonical order. grid (ceil(max_nms / 256), batch).
__global__ void gather_kernel(const int* counts, int capacity, int max_nms, bool agnostic,
                              const CandidateRec* cand, const int* sorted_vals, Box* nms_boxes,
                              int* order) {
  const int img = blockIdx.y;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int n = min(min(counts[img], capacity), max_nms);
  if (i >= n) return;
  const int64_t src = static_cast<int64_t>(img) * capacity + sorted_vals[static_cast<int64_t>(img) * capacity + i];
  const CandidateRec& c = cand[src];
  nms_boxes[static_cast<int64_t>(img) * max_nms + i] = nms_box(c.box, c.class_id, agnostic);
  order[static_cast<int64_t>(img) * max_nms + i] = static_cast<int>(src);
}

// IoU bitmask: block (col_block, row_block, image) of 64 threads; thread t compares box
// row_block * 64 + t with the 64 boxes of col_block (staged in shared memory) and writes one
// 64-bit word whose bit k says "IoU with box col_block * 64 + k (a later box) > cut".
__global__ void mask_kernel(const int* counts, int capacity, int max_nms, int col_blocks,
                            const Box* nms_boxes, float cut, uint64_t* mask) {
  const int img = blockIdx.z, rb = blockIdx.y, cb = blockIdx.x;
  const int n = min(min(counts[img], capacity), max_nms);
  if (rb > cb || rb * kMaskBits >= n || cb * kMaskBits >= n) return;
  __shared__ Box cols[kMaskBits];
  const Box* b = nms_boxes + static_cast<int64_t>(img) * max_nms;
  const int j0 = cb * kMaskBits;
  const int ncols = min(kMaskBits, n - j0);
  if (static_cast<int>(threadIdx.x) < ncols) cols[threadIdx.x] = b[j0 + threadIdx.x];
  __syncthreads();
  const int i = rb * kMaskBits + threadIdx.x;
  if (i >= n) return;
  const Box bi = b[i];
  uint64_t bits = 0;
  for (int k = (rb == cb ? threadIdx.x + 1 : 0); k < ncols; ++k)
    if (box_iou(bi, cols[k]) > cut) bits |= uint64_t{1} << k;
  mask[(static_cast<int64_t>(img) * max_nms + i) * col_blocks + cb] = bits;
}

// Greedy reduction: one block per image. The block keeps the "removed" bitset in shared memory
// and walks boxes in canonical order; a kept box ORs its mask row into the bitset (threads split
// the words). Fast NMS: removed = OR of ALL rows (kept or not). Stops at max_det.
__global__ void reduce_kernel(const int* counts, int capacity, int max_nms, int col_blocks,
                              const uint64_t* mask, bool fast, int max_det, int* keep, int* nkeep) {
  extern __shared__ uint64_t removed[];
  const int img = blockIdx.x;
  const int n = min(min(counts[img], capacity), max_nms);
  const int words = (n + kMaskBits - 1) / kMaskBits;
  const uint64_t* m = mask + static_cast<int64_t>(img) * max_nms * col_blocks;
  for (int w = threadIdx.x; w < words; w += blockDim.x) {
    uint64_t acc = 0;
    if (fast)
      for (int i = 0; i < min(n, (w + 1) * kMaskBits); ++i)
        if (i / kMaskBits <= w) acc |= m[static_cast<int64_t>(i) * col_blocks + w];
    removed[w] = acc;
  }
  __syncthreads();
  int kept = 0;  // identical in every thread
  for (int i = 0; i < n; ++i) {
    // uniform across the block: removed[] only changes between the two barriers below
    if ((removed[i / kMaskBits] >> (i % kMaskBits)) & 1u) continue;
    if (kept >= max_det) break;
    if (threadIdx.x == 0) keep[static_cast<int64_t>(img) * max_det + kept] = i;
    ++kept;
    if (fast) continue;
    __syncthreads();  // everyone has read bit i before the words change
    for (int w = i / kMaskBits + threadIdx.x; w < words; w += blockDim.x)
      removed[w] |= m[static_cast<int64_t>(i) * col_blocks + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) nkeep[img] = kept;
}

// Projection: one thread per (image, kept position); grid (ceil(max_det / 256), batch).
__global__ void project_kernel(const int* counts, const int* keep, const int* nkeep, int max_det,
                               int max_nms, const int* order, const CandidateRec* cand,
                               ProjectBatch geo, ResultHeader* header, DetRec* dets) {
  const int img = blockIdx.y;
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k == 0) header[img] = ResultHeader{nkeep[img], counts[img]};
  if (k >= nkeep[img]) return;
  const int i = keep[static_cast<int64_t>(img) * max_det + k];
  const CandidateRec& c = cand[order[static_cast<int64_t>(img) * max_nms + i]];
  const Box b = project_box(c.box, geo.p[img]);
  dets[static_cast<int64_t>(img) * max_det + k] = DetRec{b.x1, b.y1, b.x2, b.y2, c.score, c.class_id};
}

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct CudaFreeHost {
  void operator()(void* p) const { cudaFreeHost(p); }
};

template <typename T>
T* device_alloc(std::unique_ptr<void, CudaFree>& owner, size_t count, size_t& total) {
  void* p = nullptr;
  const size_t bytes = std::max<size_t>(count * sizeof(T), 16);
  YOLOCU_CUDA_CHECK(cudaMalloc(&p, bytes));
  owner.reset(p);
  total += bytes;
  return static_cast<T*>(p);
}

}  // namespace

struct PostprocessWorkspace::Impl {
  int64_t max_batch = 0, rows = 0;
  int nc = 0, capacity = 0, max_nms = 0, col_blocks = 0, max_det = 0;
  PostprocessOptions options;
  size_t bytes = 0, cub_bytes = 0, result_bytes = 0;
  int64_t last_batch = 0;
  std::unique_ptr<void, CudaFree> o_counts, o_cand, o_keys_in, o_keys_out, o_vals_in, o_vals_out,
      o_begin, o_end, o_boxes, o_order, o_mask, o_keep, o_nkeep, o_result, o_cub, o_classes;
  std::unique_ptr<void, CudaFreeHost> h_result;
  int *d_counts = nullptr, *d_vals_in = nullptr, *d_vals_out = nullptr, *d_begin = nullptr,
      *d_end = nullptr, *d_order = nullptr, *d_keep = nullptr, *d_nkeep = nullptr,
      *d_classes = nullptr;
  CandidateRec* d_cand = nullptr;
  uint64_t *d_keys_in = nullptr, *d_keys_out = nullptr, *d_mask = nullptr;
  Box* d_boxes = nullptr;
  uint8_t* d_result = nullptr;
  void* d_cub = nullptr;
};

PostprocessWorkspace::PostprocessWorkspace(int64_t max_batch, int64_t rows, int num_classes,
                                           const PostprocessOptions& options,
                                           int64_t candidate_capacity)
    : impl_(std::make_unique<Impl>()) {
  validate_options(options);
  YOLOCU_CHECK(max_batch >= 1 && max_batch <= kMaxBatchParams, kInvalidArgument,
               "PostprocessWorkspace: batch must be in [1, ", kMaxBatchParams, "], got ", max_batch);
  YOLOCU_CHECK(rows >= 1 && num_classes >= 1, kInvalidArgument, "PostprocessWorkspace: rows ", rows,
               ", classes ", num_classes);
  const int64_t exact = rows * (options.multi_label ? num_classes : 1);
  const int64_t cap = candidate_capacity > 0 ? std::min(candidate_capacity, exact) : exact;
  YOLOCU_CHECK(cap * max_batch < (int64_t{1} << 31) && rows * num_classes < (int64_t{1} << 32),
               kInvalidArgument, "PostprocessWorkspace: candidate buffer too large (", cap, " x ",
               max_batch, ")");
  Impl& w = *impl_;
  w.max_batch = max_batch;
  w.rows = rows;
  w.nc = num_classes;
  w.options = options;
  w.capacity = static_cast<int>(cap);
  w.max_nms = static_cast<int>(std::min<int64_t>(options.max_nms, cap));
  w.col_blocks = (w.max_nms + kMaskBits - 1) / kMaskBits;
  w.max_det = options.max_det;
  const size_t nb = static_cast<size_t>(max_batch), nslots = nb * static_cast<size_t>(cap);
  w.d_counts = device_alloc<int>(w.o_counts, nb, w.bytes);
  w.d_cand = device_alloc<CandidateRec>(w.o_cand, nslots, w.bytes);
  w.d_keys_in = device_alloc<uint64_t>(w.o_keys_in, nslots, w.bytes);
  w.d_keys_out = device_alloc<uint64_t>(w.o_keys_out, nslots, w.bytes);
  w.d_vals_in = device_alloc<int>(w.o_vals_in, nslots, w.bytes);
  w.d_vals_out = device_alloc<int>(w.o_vals_out, nslots, w.bytes);
  w.d_begin = device_alloc<int>(w.o_begin, nb, w.bytes);
  w.d_end = device_alloc<int>(w.o_end, nb, w.bytes);
  w.d_boxes = device_alloc<Box>(w.o_boxes, nb * w.max_nms, w.bytes);
  w.d_order = device_alloc<int>(w.o_order, nb * w.max_nms, w.bytes);
  w.d_mask = device_alloc<uint64_t>(w.o_mask, nb * w.max_nms * w.col_blocks, w.bytes);
  w.d_keep = device_alloc<int>(w.o_keep, nb * w.max_det, w.bytes);
  w.d_nkeep = device_alloc<int>(w.o_nkeep, nb, w.bytes);
  w.d_classes = device_alloc<int>(w.o_classes, std::max<size_t>(options.classes.size(), 1), w.bytes);
  if (!options.classes.empty())
    YOLOCU_CUDA_CHECK(cudaMemcpy(w.d_classes, options.classes.data(),
                                 options.classes.size() * sizeof(int), cudaMemcpyHostToDevice));
  w.result_bytes = nb * sizeof(ResultHeader) + nb * w.max_det * sizeof(DetRec);
  w.d_result = device_alloc<uint8_t>(w.o_result, w.result_bytes, w.bytes);
  void* h = nullptr;
  YOLOCU_CUDA_CHECK(cudaMallocHost(&h, w.result_bytes));
  w.h_result.reset(h);
  std::memset(h, 0, w.result_bytes);
  YOLOCU_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
      nullptr, w.cub_bytes, w.d_keys_in, w.d_keys_out, w.d_vals_in, w.d_vals_out,
      static_cast<int64_t>(nslots), static_cast<int64_t>(nb), w.d_begin, w.d_end, 0, 64));
  w.d_cub = device_alloc<uint8_t>(w.o_cub, w.cub_bytes, w.bytes);
}

PostprocessWorkspace::~PostprocessWorkspace() = default;

size_t PostprocessWorkspace::device_bytes() const { return impl_->bytes; }

std::vector<Detections> PostprocessWorkspace::results() const {
  const Impl& w = *impl_;
  const auto* hdr = static_cast<const ResultHeader*>(w.h_result.get());
  const auto* dets = reinterpret_cast<const DetRec*>(hdr + w.max_batch);
  std::vector<Detections> all(static_cast<size_t>(w.last_batch));
  for (int64_t b = 0; b < w.last_batch; ++b)
    for (int k = 0; k < hdr[b].num_detections; ++k) {
      const DetRec& d = dets[b * w.max_det + k];
      all[static_cast<size_t>(b)].push_back({d.x1, d.y1, d.x2, d.y2, d.confidence, d.class_id});
    }
  return all;
}

std::vector<int64_t> PostprocessWorkspace::overflow() const {
  const Impl& w = *impl_;
  const auto* hdr = static_cast<const ResultHeader*>(w.h_result.get());
  std::vector<int64_t> o;
  for (int64_t b = 0; b < w.last_batch; ++b)
    o.push_back(std::max<int64_t>(0, hdr[b].num_candidates - w.capacity));
  return o;
}

void postprocess_cuda(const OutputView& out, const std::vector<LetterboxGeometry>& geometries,
                      const PostprocessOptions& o, PostprocessWorkspace& ws, cudaStream_t stream) {
  validate_options(o);
  PostprocessWorkspace::Impl& w = *ws.impl_;
  const PostprocessOptions& wo = w.options;
  YOLOCU_CHECK(o.conf_threshold == wo.conf_threshold && o.iou_threshold == wo.iou_threshold &&
                   o.max_det == wo.max_det && o.max_nms == wo.max_nms && o.agnostic == wo.agnostic &&
                   o.multi_label == wo.multi_label && o.classes == wo.classes && o.nms == wo.nms,
               kInvalidArgument, "postprocess_cuda: options differ from the workspace's");
  YOLOCU_CHECK(out.data && out.batch >= 1 && out.batch <= w.max_batch && out.rows == w.rows &&
                   out.channels == 5 + w.nc,
               kInvalidArgument, "postprocess_cuda: output ", out.batch, "x", out.rows, "x",
               out.channels, " does not fit the workspace (", w.max_batch, "x", w.rows, "x",
               5 + w.nc, ")");
  YOLOCU_CHECK(out.dtype == DType::kFloat32 || out.dtype == DType::kFloat16, kUnsupported,
               "postprocess_cuda: output must be float32 or float16");
  YOLOCU_CHECK(static_cast<int64_t>(geometries.size()) == out.batch, kInvalidArgument,
               "postprocess_cuda: ", geometries.size(), " geometries for batch ", out.batch);
  ProjectBatch geo{};
  for (size_t i = 0; i < geometries.size(); ++i) {
    const LetterboxGeometry& g = geometries[i];
    YOLOCU_CHECK(g.src_w > 0 && g.src_h > 0 && g.gain > 0, kInvalidArgument,
                 "postprocess_cuda: invalid geometry for image ", i);
    geo.p[i] = project_params(g);
  }
  const int batch = static_cast<int>(out.batch), rows = static_cast<int>(out.rows);
  const bool fp16 = out.dtype == DType::kFloat16;
  const float conf = fp16 ? __half2float(__float2half_rn(o.conf_threshold)) : o.conf_threshold;
  const int nfilter = static_cast<int>(o.classes.size());
  w.last_batch = out.batch;

  YOLOCU_CUDA_CHECK(cudaMemsetAsync(w.d_counts, 0, sizeof(int) * batch, stream));
  const dim3 dgrid((rows + kThreads - 1) / kThreads, batch);
  if (fp16)
    decode_kernel<__half, RoundHalf><<<dgrid, kThreads, 0, stream>>>(
        static_cast<const __half*>(out.data), rows, static_cast<int>(out.channels), conf,
        o.multi_label, w.d_classes, nfilter, w.capacity, w.d_counts, w.d_cand, w.d_keys_in,
        w.d_vals_in);
  else
    decode_kernel<float, RoundNone><<<dgrid, kThreads, 0, stream>>>(
        static_cast<const float*>(out.data), rows, static_cast<int>(out.channels), conf,
        o.multi_label, w.d_classes, nfilter, w.capacity, w.d_counts, w.d_cand, w.d_keys_in,
        w.d_vals_in);
  YOLOCU_CUDA_CHECK(cudaGetLastError());
  segments_kernel<<<(batch + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      w.d_counts, batch, w.capacity, w.d_begin, w.d_end);
  YOLOCU_CUDA_CHECK(cudaGetLastError());
  size_t cub_bytes = w.cub_bytes;
  YOLOCU_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
      w.d_cub, cub_bytes, w.d_keys_in, w.d_keys_out, w.d_vals_in, w.d_vals_out,
      static_cast<int64_t>(batch) * w.capacity, static_cast<int64_t>(batch), w.d_begin, w.d_end, 0,
      64, stream));
  const dim3 ggrid((w.max_nms + kThreads - 1) / kThreads, batch);
  gather_kernel<<<ggrid, kThreads, 0, stream>>>(w.d_counts, w.capacity, w.max_nms, o.agnostic,
                                                w.d_cand, w.d_vals_out, w.d_boxes, w.d_order);
  YOLOCU_CUDA_CHECK(cudaGetLastError());
  const dim3 mgrid(w.col_blocks, w.col_blocks, batch);
  mask_kernel<<<mgrid, kMaskBits, 0, stream>>>(w.d_counts, w.capacity, w.max_nms, w.col_blocks,
                                               w.d_boxes, nms_iou_cut(o.iou_threshold), w.d_mask);
  YOLOCU_CUDA_CHECK(cudaGetLastError());
  const size_t smem = sizeof(uint64_t) * static_cast<size_t>(w.col_blocks);
  reduce_kernel<<<batch, kThreads, smem, stream>>>(w.d_counts, w.capacity, w.max_nms, w.col_blocks,
                                                   w.d_mask, o.nms == NmsMode::kFast, w.max_det,
                                                   w.d_keep, w.d_nkeep);
  YOLOCU_CUDA_CHECK(cudaGetLastError());
  auto* hdr = reinterpret_cast<ResultHeader*>(w.d_result);
  auto* dets = reinterpret_cast<DetRec*>(hdr + w.max_batch);
  const dim3 pgrid((w.max_det + kThreads - 1) / kThreads, batch);
  project_kernel<<<pgrid, kThreads, 0, stream>>>(w.d_counts, w.d_keep, w.d_nkeep, w.max_det,
                                                 w.max_nms, w.d_order, w.d_cand, geo, hdr, dets);
  YOLOCU_CUDA_CHECK(cudaGetLastError());
  YOLOCU_CUDA_CHECK(cudaMemcpyAsync(w.h_result.get(), w.d_result, w.result_bytes,
                                    cudaMemcpyDeviceToHost, stream));
}

}  // namespace yolocu
