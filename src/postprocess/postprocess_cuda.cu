// CUDA decode + greedy NMS + back-projection (merged output or raw heads). Semantics: see
// postprocess_cpu.cpp (the reference) and docs/postprocess.md. This file is compiled with
// -fmad=false so that every float expression rounds exactly as on the host.
//
// Pipeline per call (one stream, no allocation, no synchronisation):
//   memset(state) -> decode_kernel (keys of every candidate, best `capacity` slots per image)
//   [only when an image can produce more candidates than slots:
//    6 x select_kernel (radix select of the capacity-th key) -> decode_kernel<emit> (rewrite the
//    slots with exactly the keys <= that key)]
//   -> nms_kernel (canonical-order chunks, greedy against kept boxes, projection)
//   -> one device-to-host copy of headers + detections.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cub/block/block_scan.cuh>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "postprocess/postprocess_common.hpp"
#include "postprocess/postprocess_sources.cuh"
#include "yolocu/postprocess_cuda.hpp"


namespace yolocu {

namespace {

constexpr int kDecodeThreads = 256;
constexpr int kNmsThreads = 1024;  // one thread per candidate of a chunk
constexpr int kChunk = kNmsThreads;
constexpr int kChunkWords = kChunk / 32;
constexpr int kDigitBits = 11;
constexpr int kBins = 1 << kDigitBits;
constexpr int kSelectPasses = 6;  // 5 x 11 + 9 = 64 key bits
constexpr size_t kAlign = 256;

// Radix-select digit `pass` covers key bits [shift, shift + width), most significant first.
__host__ __device__ constexpr int pass_shift(int pass) { return pass < 5 ? 64 - 11 * (pass + 1) : 0; }
__host__ __device__ constexpr int pass_width(int pass) { return pass < 5 ? 11 : 9; }
__device__ __forceinline__ uint64_t pass_high_mask(int pass) {
  const int hi = pass_shift(pass) + pass_width(pass);
  return hi >= 64 ? 0ull : ~0ull << hi;
}

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
  ProjectParams p[kMaxCudaBatch];
};

// Sort key, ascending = canonical order: score descending (the bits of a positive float are
// monotonic; scores are > conf >= 0), then index = row * nc + class ascending.
__device__ __forceinline__ uint64_t make_key(float score, uint32_t index) {
  const uint32_t inverted = 0x7F800000u - __float_as_uint(score);
  return (static_cast<uint64_t>(inverted) << 32) | index;
}
__device__ __forceinline__ float key_score(uint64_t key) {
  return __uint_as_float(0x7F800000u - static_cast<uint32_t>(key >> 32));
}
__device__ __forceinline__ uint32_t key_index(uint64_t key) { return static_cast<uint32_t>(key); }

struct DecodeParams {
  float conf;  // already in the input's dtype
  bool multi_label;
  const int* classes;  // filter (device), n_classes == 0: all
  int n_classes;
  int capacity;
};

// Per-image state of one call, zeroed by one memset.
struct SelectState {
  int* counts;    // candidates found
  int* emitted;   // slots written by the emit pass
  int* done;      // [img][pass] block tickets
  int* below;     // candidates known to be before the current prefix
  uint64_t* prefix;  // key bits found so far; after the last pass: the capacity-th key
  int* hist;      // [img][pass][kBins]
};

// Calls f(score, class) for every candidate of row w, classes ascending: the rules of emit_row in
// postprocess_cpu.cpp (obj filter, obj * cls rounded to the dtype, best class with NaN
// propagation or multi-label, class filter).
template <class Src, class F>
__device__ __forceinline__ void for_each_candidate(const Src& src, const typename Src::Row& w,
                                                   const DecodeParams& p, F&& f) {
  const typename Src::RoundT r;
  auto allowed = [&](int c) {
    if (p.n_classes == 0) return true;
    for (int k = 0; k < p.n_classes; ++k)
      if (p.classes[k] == c) return true;
    return false;
  };
  if constexpr (Src::kAnchorFree) {
    // emit_row_v8 (postprocess_cpu.cpp): the best class score (NaN propagates) must pass conf;
    // then every class above conf (multi-label, nc > 1) or the first best class.
    float best = src.cls(w, 0);
    int best_c = 0;
    for (int c = 1; c < src.nc; ++c) {
      const float s = src.cls(w, c);
      if ((s > best || isnan(s)) && !isnan(best)) {
        best = s;
        best_c = c;
      }
    }
    if (!(best > p.conf)) return;
    if (p.multi_label && src.nc > 1) {
      for (int c = 0; c < src.nc; ++c) {
        const float s = src.cls(w, c);
        if (s > p.conf && allowed(c)) f(s, c);
      }
      return;
    }
    if (allowed(best_c)) f(best, best_c);
    return;
  }
  const float obj = src.obj(w);
  if (!(obj > p.conf)) return;
  if (p.multi_label) {
    for (int c = 0; c < src.nc; ++c) {
      const float s = r(src.cls(w, c) * obj);
      if (s > p.conf && allowed(c)) f(s, c);
    }
    return;
  }
  float best = r(src.cls(w, 0) * obj);
  int best_c = 0;
  bool nan = isnan(best);
  for (int c = 1; c < src.nc; ++c) {
    const float s = r(src.cls(w, c) * obj);
    nan = nan || isnan(s);
    if (s > best) {
      best = s;
      best_c = c;
    }
  }
  if (!nan && best > p.conf && allowed(best_c)) f(best, best_c);
}

// Decode: thread = one row of one image; grid (ceil(rows / 256), batch). Each thread counts its
// row's candidates, the block scans the counts and reserves its slots with ONE atomicAdd on the
// image's counter; keys go to slots < capacity, the rest is only counted (slot order is
// scheduling-dependent, the NMS kernel sorts). kEmit (overflowing images only): keep the keys
// <= the selected threshold key, exactly `capacity` of them, counted in `emitted`.
template <class Src, bool kEmit>
__global__ void __launch_bounds__(kDecodeThreads)
    decode_kernel(Src src, DecodeParams p, SelectState st, uint64_t* __restrict__ keys) {
  const int img = blockIdx.y;
  if (kEmit && st.counts[img] <= p.capacity) return;  // uniform per block
  const uint64_t limit = kEmit ? st.prefix[img] : ~0ull;
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const bool valid = row < src.rows;
  typename Src::Row w{};
  const uint32_t base_index = static_cast<uint32_t>(row) * static_cast<uint32_t>(src.nc);
  int mine = 0;
  if (valid) {
    w = src.row(img, row);
    for_each_candidate(src, w, p, [&](float s, int c) {
      if (!kEmit || make_key(s, base_index + c) <= limit) ++mine;
    });
  }
  using Scan = cub::BlockScan<int, kDecodeThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int s_base;
  int before = 0, total = 0;
  Scan(scan_tmp).ExclusiveSum(mine, before, total);
  if (threadIdx.x == 0) s_base = total > 0 ? atomicAdd((kEmit ? st.emitted : st.counts) + img, total) : 0;
  __syncthreads();
  if (mine == 0) return;
  int slot = s_base + before;
  uint64_t* out = keys + static_cast<int64_t>(img) * p.capacity;
  for_each_candidate(src, w, p, [&](float s, int c) {
    const uint64_t key = make_key(s, base_index + c);
    if (kEmit && key > limit) return;
    if (slot < p.capacity) out[slot] = key;
    ++slot;
  });
}

// Radix-select pass `pass` over the candidates of overflowing images: thread = one row, grid
// (ceil(rows / 256), batch). Keys whose bits above this digit equal the prefix found so far are
// counted per digit in a shared histogram, added to the image's global histogram; the image's
// last block (ticket counter) scans it (8 bins per thread) and extends the prefix with the digit
// that holds the capacity-th smallest key.
template <class Src>
__global__ void __launch_bounds__(kDecodeThreads)
    select_kernel(Src src, DecodeParams p, SelectState st, int pass) {
  constexpr int kPerThread = kBins / kDecodeThreads;
  const int img = blockIdx.y;
  if (st.counts[img] <= p.capacity) return;  // uniform per block
  __shared__ int hist[kBins];
  __shared__ bool s_last;
  using Scan = cub::BlockScan<int, kDecodeThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  for (int i = threadIdx.x; i < kBins; i += blockDim.x) hist[i] = 0;
  __syncthreads();
  const int shift = pass_shift(pass);
  const uint32_t digit_mask = (1u << pass_width(pass)) - 1u;
  const uint64_t high = pass_high_mask(pass), prefix = st.prefix[img];
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < src.rows) {
    const uint32_t base_index = static_cast<uint32_t>(row) * static_cast<uint32_t>(src.nc);
    for_each_candidate(src, src.row(img, row), p, [&](float s, int c) {
      const uint64_t key = make_key(s, base_index + c);
      if ((key & high) == prefix) atomicAdd(&hist[(key >> shift) & digit_mask], 1);
    });
  }
  __syncthreads();
  int* g = st.hist + (static_cast<int64_t>(img) * kSelectPasses + pass) * kBins;
  for (int i = threadIdx.x; i < kBins; i += blockDim.x)
    if (hist[i] != 0) atomicAdd(&g[i], hist[i]);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    s_last = atomicAdd(&st.done[img * kSelectPasses + pass], 1) == static_cast<int>(gridDim.x) - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  // 1-based rank of the capacity-th key among the keys matching the prefix. Every thread reads
  // `below` before the barrier and only one thread writes it after: reading it after the scan
  // (as this kernel once did) let a warp scheduled late see the updated value, match a second
  // bin and overwrite the prefix with a smaller digit (seen under racecheck's scheduling).
  const int need = p.capacity - __ldcg(st.below + img);
  __syncthreads();
  int bins[kPerThread], sum = 0;
  for (int j = 0; j < kPerThread; ++j) {
    bins[j] = __ldcg(&g[threadIdx.x * kPerThread + j]);
    sum += bins[j];
  }
  int before = 0;
  Scan(scan_tmp).ExclusiveSum(sum, before);
  if (before < need && need <= before + sum) {
    for (int j = 0; j < kPerThread; ++j) {
      if (need <= before + bins[j]) {
        st.prefix[img] = prefix | (static_cast<uint64_t>(threadIdx.x * kPerThread + j) << shift);
        st.below[img] += before;
        break;
      }
      before += bins[j];
    }
  }
}

struct NmsParams {
  int capacity, max_det;
  float cut;  // nms_iou_cut(iou_threshold): suppress when IoU > cut
  bool agnostic, fast;
};

struct NmsShared {
  uint64_t chunk_keys[kChunk];
  Box chunk_boxes[kChunk];
  int hist[kBins];
  unsigned alive[2][kChunkWords];
  int count, digit, digit_below;
};

// Index of the first set bit at or after `from` in a chunk bitset, or -1.
__device__ __forceinline__ int find_next(const unsigned* words, int from) {
  for (int i = from >> 5; i < kChunkWords; ++i) {
    unsigned bits = words[i];
    if (i == (from >> 5)) bits &= ~0u << (from & 31);
    if (bits) return i * 32 + __ffs(bits) - 1;
  }
  return -1;
}

// Block radix select: the need-th smallest (1-based) of the n keys that are > last (all when
// !have_last). Every thread of the block calls it; 6 passes over the keys.
template <class Scan>
__device__ uint64_t block_select(const uint64_t* keys, int n, bool have_last, uint64_t last,
                                 int need, NmsShared& sh, typename Scan::TempStorage& tmp) {
  const int t = threadIdx.x;
  uint64_t prefix = 0;
  for (int pass = 0; pass < kSelectPasses; ++pass) {
    const int shift = pass_shift(pass);
    const uint32_t digit_mask = (1u << pass_width(pass)) - 1u;
    const uint64_t high = pass_high_mask(pass);
    for (int i = t; i < kBins; i += kNmsThreads) sh.hist[i] = 0;
    __syncthreads();
    for (int i = t; i < n; i += kNmsThreads) {
      const uint64_t key = keys[i];
      if ((!have_last || key > last) && (key & high) == prefix)
        atomicAdd(&sh.hist[(key >> shift) & digit_mask], 1);
    }
    __syncthreads();
    const int a = sh.hist[2 * t], b = sh.hist[2 * t + 1];
    int before = 0;
    Scan(tmp).ExclusiveSum(a + b, before);
    if (before < need && need <= before + a + b) {
      const bool first = need <= before + a;
      sh.digit = first ? 2 * t : 2 * t + 1;
      sh.digit_below = first ? before : before + a;
    }
    __syncthreads();
    prefix |= static_cast<uint64_t>(sh.digit) << shift;
    need -= sh.digit_below;
    __syncthreads();
  }
  return prefix;
}

// Greedy NMS + projection: one block of 1024 threads per image. Candidates are taken in chunks of
// 1024 in canonical order (block radix select of the next 1024 keys when more remain, then a
// bitonic sort in shared memory); thread t owns candidate t of the chunk and recomputes its box
// from the input. Greedy: a candidate first tests the boxes kept in earlier chunks (shared
// memory), then the chunk is walked in order, each kept box suppressing the later ones it
// overlaps (one barrier per kept box). Fast: a candidate dies if any earlier one overlaps it.
// Stops at max_det; then thread k projects kept box k.
template <class Src>
__global__ void __launch_bounds__(kNmsThreads)
    nms_kernel(Src src, NmsParams p, const int* __restrict__ counts,
               const uint64_t* __restrict__ keys, Box* __restrict__ seen, ProjectBatch geo,
               ResultHeader* __restrict__ header, DetRec* __restrict__ dets) {
  using Scan = cub::BlockScan<int, kNmsThreads>;
  __shared__ NmsShared sh;
  __shared__ typename Scan::TempStorage scan_tmp;
  extern __shared__ uint64_t dyn[];
  uint64_t* kept_keys = dyn;                                      // [max_det]
  Box* kept_boxes = reinterpret_cast<Box*>(kept_keys + p.max_det);  // [max_det], greedy only
  const int img = blockIdx.x, t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int count = counts[img];
  const int n = min(count, p.capacity);
  const uint64_t* k_img = keys + static_cast<int64_t>(img) * p.capacity;
  Box* seen_img = p.fast ? seen + static_cast<int64_t>(img) * p.capacity : nullptr;
  int kept = 0, processed = 0;
  bool have_last = false;
  uint64_t last = 0;
  while (processed < n && kept < p.max_det) {
    const int remaining = n - processed;
    const int m = min(remaining, kChunk);
    const uint64_t hi = remaining > kChunk
                            ? block_select<Scan>(k_img, n, have_last, last, kChunk, sh, scan_tmp)
                            : ~0ull;
    // gather the chunk (keys in (last, hi]), pad, sort
    sh.chunk_keys[t] = ~0ull;
    if (t == 0) sh.count = 0;
    __syncthreads();
    for (int i = t; i < n; i += kNmsThreads) {
      const uint64_t key = k_img[i];
      if ((!have_last || key > last) && key <= hi) {
        const int slot = atomicAdd(&sh.count, 1);
        if (slot < kChunk) sh.chunk_keys[slot] = key;  // keys are unique: never more than kChunk
      }
    }
    __syncthreads();
    int size = 1;
    while (size < m) size <<= 1;
    for (int k = 2; k <= size; k <<= 1) {
      for (int j = k >> 1; j > 0; j >>= 1) {
        const int o = t ^ j;
        if (t < size && o > t) {
          const uint64_t a = sh.chunk_keys[t], b = sh.chunk_keys[o];
          if (((t & k) == 0) ? a > b : a < b) {
            sh.chunk_keys[t] = b;
            sh.chunk_keys[o] = a;
          }
        }
        __syncthreads();
      }
    }
    // candidate t of the chunk
    const uint64_t key = sh.chunk_keys[t];
    bool alive = t < m;
    Box box{0.f, 0.f, 0.f, 0.f};
    if (alive) {
      const uint32_t index = key_index(key);
      const int row = static_cast<int>(index / static_cast<uint32_t>(src.nc));
      const int cls = static_cast<int>(index - static_cast<uint32_t>(row) * src.nc);
      box = nms_box(src.box(src.row(img, row)), cls, p.agnostic);
      sh.chunk_boxes[t] = box;
    }
    __syncthreads();
    if (!p.fast) {
      for (int i = 0; i < kept && alive; ++i)
        if (box_iou(kept_boxes[i], box) > p.cut) alive = false;
      unsigned bits = __ballot_sync(0xFFFFFFFFu, alive);
      if (lane == 0) sh.alive[0][warp] = bits;
      __syncthreads();
      int buf = 0, cur = -1;
      while (kept < p.max_det) {  // kept, cur, buf: identical in every thread
        const int next = find_next(sh.alive[buf], cur + 1);
        if (next < 0) break;
        if (t == 0) {
          kept_keys[kept] = sh.chunk_keys[next];
          kept_boxes[kept] = sh.chunk_boxes[next];
        }
        ++kept;
        if (alive && t > next && box_iou(sh.chunk_boxes[next], box) > p.cut) alive = false;
        bits = __ballot_sync(0xFFFFFFFFu, alive);
        if (lane == 0) sh.alive[buf ^ 1][warp] = bits;
        __syncthreads();
        buf ^= 1;
        cur = next;
      }
    } else {
      for (int i = 0; i < processed && alive; ++i)
        if (box_iou(seen_img[i], box) > p.cut) alive = false;
      for (int i = 0; i < t && alive; ++i)
        if (box_iou(sh.chunk_boxes[i], box) > p.cut) alive = false;
      int before = 0, total = 0;
      Scan(scan_tmp).ExclusiveSum(alive ? 1 : 0, before, total);
      if (alive && kept + before < p.max_det) kept_keys[kept + before] = key;
      if (t < m) seen_img[processed + t] = box;
      kept = min(p.max_det, kept + total);
    }
    last = sh.chunk_keys[m - 1];
    have_last = true;
    processed += m;
    __syncthreads();
  }
  for (int k = t; k < kept; k += kNmsThreads) {
    const uint64_t key = kept_keys[k];
    const uint32_t index = key_index(key);
    const int row = static_cast<int>(index / static_cast<uint32_t>(src.nc));
    const int cls = static_cast<int>(index - static_cast<uint32_t>(row) * src.nc);
    const Box b = project_box(src.box(src.row(img, row)), geo.p[img]);
    dets[static_cast<int64_t>(img) * p.max_det + k] =
        DetRec{b.x1, b.y1, b.x2, b.y2, key_score(key), cls};
  }
  if (t == 0) header[img] = ResultHeader{kept, count};
}

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct CudaFreeHost {
  void operator()(void* p) const { cudaFreeHost(p); }
};

size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Byte offsets of the sub-buffers of the one device allocation.
struct Layout {
  size_t counts = 0, emitted = 0, done = 0, below = 0, prefix = 0, hist = 0, memset_bytes = 0;
  size_t keys = 0, seen = 0, classes = 0, result = 0, result_bytes = 0, total = 0;
};

Layout make_layout(const PostprocessCudaPlan& plan, const PostprocessOptions& o) {
  const size_t b = static_cast<size_t>(plan.max_batch), cap = static_cast<size_t>(plan.capacity);
  Layout l;
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t off = at;
    at = align_up(at + std::max<size_t>(bytes, 1));
    return off;
  };
  l.counts = take(b * sizeof(int));
  if (plan.select_passes) {
    l.emitted = take(b * sizeof(int));
    l.done = take(b * kSelectPasses * sizeof(int));
    l.below = take(b * sizeof(int));
    l.prefix = take(b * sizeof(uint64_t));
    l.hist = take(b * kSelectPasses * kBins * sizeof(int));
  }
  l.memset_bytes = at;
  l.keys = take(b * cap * sizeof(uint64_t));
  if (o.nms == NmsMode::kFast) l.seen = take(b * cap * sizeof(Box));
  l.classes = take(std::max<size_t>(o.classes.size(), 1) * sizeof(int));
  l.result_bytes = b * sizeof(ResultHeader) + b * static_cast<size_t>(o.max_det) * sizeof(DetRec);
  l.result = take(l.result_bytes);
  l.total = at;
  return l;
}

template <class Src>
void set_nms_smem(size_t bytes) {
  YOLOCU_CUDA_CHECK(cudaFuncSetAttribute(nms_kernel<Src>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bytes)));
}

}  // namespace

PostprocessCudaPlan plan_postprocess_cuda(int64_t max_batch, int64_t rows, int num_classes,
                                          const PostprocessOptions& o, int64_t candidate_capacity) {
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
  std::unique_ptr<void, CudaFree> d_mem;
  std::unique_ptr<void, CudaFreeHost> h_result;
  uint8_t* base() const { return static_cast<uint8_t*>(d_mem.get()); }
  SelectState state() const {
    SelectState s{};
    s.counts = reinterpret_cast<int*>(base() + layout.counts);
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
                                           int64_t candidate_capacity)
    : impl_(std::make_unique<Impl>()) {
  Impl& w = *impl_;
  w.plan = plan_postprocess_cuda(max_batch, rows, num_classes, options, candidate_capacity);
  w.layout = make_layout(w.plan, options);
  w.options = options;
  w.cut = nms_iou_cut(options.iou_threshold);
  void* d = nullptr;
  YOLOCU_CUDA_CHECK(cudaMalloc(&d, w.layout.total));
  w.d_mem.reset(d);
  YOLOCU_CUDA_CHECK(cudaMemset(d, 0, w.layout.total));  // results of an unused image read as empty
  if (!options.classes.empty())
    YOLOCU_CUDA_CHECK(cudaMemcpy(w.base() + w.layout.classes, options.classes.data(),
                                 options.classes.size() * sizeof(int), cudaMemcpyHostToDevice));
  void* h = nullptr;
  YOLOCU_CUDA_CHECK(cudaMallocHost(&h, w.layout.result_bytes));
  w.h_result.reset(h);
  std::memset(h, 0, w.layout.result_bytes);
  // the attribute is per kernel, shared by all workspaces: always the largest any plan can use
  const size_t smem = static_cast<size_t>(kMaxCudaMaxDet) * (sizeof(uint64_t) + sizeof(Box));
  set_nms_smem<MergedSource<float, RoundNone>>(smem);
  set_nms_smem<MergedSource<__half, RoundHalf>>(smem);
  set_nms_smem<HeadsSource<float, RoundNone>>(smem);
  set_nms_smem<HeadsSource<__half, RoundHalf>>(smem);
  set_nms_smem<V8Source<float, RoundNone>>(smem);
  set_nms_smem<V8Source<__half, RoundHalf>>(smem);
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
         a.multi_label == b.multi_label && a.classes == b.classes && a.nms == b.nms;
}

ProjectBatch project_batch(const std::vector<LetterboxGeometry>& geometries, BoxScaling scaling) {
  ProjectBatch geo{};
  for (size_t i = 0; i < geometries.size(); ++i) {
    const LetterboxGeometry& g = geometries[i];
    YOLOCU_CHECK(g.src_w > 0 && g.src_h > 0 && g.gain > 0 && std::isfinite(g.gain),
                 kInvalidArgument, "postprocess_cuda: invalid geometry for image ", i, " (source ",
                 g.src_w, "x", g.src_h, ", gain ", g.gain, ")");
    geo.p[i] = project_params(g, scaling);
  }
  return geo;
}

template <class Src>
void enqueue(const Src& src, int batch, DType dtype, const std::vector<LetterboxGeometry>& geometries,
             PostprocessWorkspace::Impl& w, cudaStream_t stream, BoxScaling scaling = BoxScaling::kContinuousPad) {
  const ProjectBatch geo = project_batch(geometries, scaling);
  const PostprocessOptions& o = w.options;
  DecodeParams dp{};
  dp.conf = dtype == DType::kFloat16 ? half_to_float(float_to_half(o.conf_threshold))
                                     : o.conf_threshold;
  dp.multi_label = o.multi_label;
  dp.classes = reinterpret_cast<const int*>(w.base() + w.layout.classes);
  dp.n_classes = static_cast<int>(o.classes.size());
  dp.capacity = static_cast<int>(w.plan.capacity);
  const SelectState st = w.state();
  auto* keys = reinterpret_cast<uint64_t*>(w.base() + w.layout.keys);
  w.last_batch = batch;

  YOLOCU_CUDA_CHECK(cudaMemsetAsync(w.base(), 0, w.layout.memset_bytes, stream));
  const dim3 grid((src.rows + kDecodeThreads - 1) / kDecodeThreads, batch);
  decode_kernel<Src, false><<<grid, kDecodeThreads, 0, stream>>>(src, dp, st, keys);
  YOLOCU_CUDA_CHECK(cudaGetLastError());
  if (w.plan.select_passes) {
    for (int pass = 0; pass < kSelectPasses; ++pass) {
      select_kernel<Src><<<grid, kDecodeThreads, 0, stream>>>(src, dp, st, pass);
      YOLOCU_CUDA_CHECK(cudaGetLastError());
    }
    decode_kernel<Src, true><<<grid, kDecodeThreads, 0, stream>>>(src, dp, st, keys);
    YOLOCU_CUDA_CHECK(cudaGetLastError());
  }
  NmsParams np{};
  np.capacity = dp.capacity;
  np.max_det = o.max_det;
  np.cut = w.cut;
  np.agnostic = o.agnostic;
  np.fast = o.nms == NmsMode::kFast;
  auto* seen = np.fast ? reinterpret_cast<Box*>(w.base() + w.layout.seen) : nullptr;
  auto* hdr = reinterpret_cast<ResultHeader*>(w.base() + w.layout.result);
  auto* dets = reinterpret_cast<DetRec*>(hdr + w.plan.max_batch);
  nms_kernel<Src><<<batch, kNmsThreads, w.plan.nms_shared_bytes, stream>>>(
      src, np, st.counts, keys, seen, geo, hdr, dets);
  YOLOCU_CUDA_CHECK(cudaGetLastError());
  // headers of all max_batch images + detections of the images of this call (contiguous prefix)
  const size_t bytes = static_cast<size_t>(w.plan.max_batch) * sizeof(ResultHeader) +
                       static_cast<size_t>(batch) * static_cast<size_t>(o.max_det) * sizeof(DetRec);
  YOLOCU_CUDA_CHECK(cudaMemcpyAsync(w.h_result.get(), hdr, bytes, cudaMemcpyDeviceToHost, stream));
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
