// CUDA greedy (or fast) NMS + back-projection in one launch: a block per image for the kept-box
// path, and extra blocks that compute and sweep the IoU bitmask of crowded images
// (postprocess_bitmask.cuh). Writes the results straight into the workspace's mapped pinned
// buffer and zeroes the per-image state it consumed. Semantics: nms_cpu / project_cpu in
// postprocess_cpu.cpp. Compiled with -fmad=false.
#include <cub/block/block_scan.cuh>

#include "core/cuda_check.hpp"
#include "postprocess/postprocess_bitmask.cuh"
#include "postprocess/postprocess_device.cuh"

namespace yolocu::postprocess_detail {

namespace {

struct NmsShared {
  uint64_t chunk_keys[kChunk];
  Box chunk_boxes[kChunk];
  int hist[kBins];  // block_select's histogram; a rank-sorted chunk's scratch (kRankSortMax keys)
  unsigned alive[2][kChunkWords];
  int count, digit, digit_below;
};
static_assert(sizeof(int) * kBins >= sizeof(uint64_t) * kRankSortMax, "rank-sort scratch");

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

// Sorts the m keys of sh.chunk_keys (slots >= m hold ~0): up to kRankSortMax keys by rank (thread
// t counts the keys below key t and writes it there: keys are unique; 2 barriers), more with a
// bitonic network (log2(size)^2 / 2 barriers).
__device__ __forceinline__ void sort_chunk(NmsShared& sh, int m) {
  const int t = threadIdx.x;
  if (m <= kRankSortMax) {
    uint64_t* sorted = reinterpret_cast<uint64_t*>(sh.hist);
    if (t < m) {
      const uint64_t key = sh.chunk_keys[t];
      int r = 0;
      for (int j = 0; j < m; ++j) r += sh.chunk_keys[j] < key;
      sorted[r] = key;
    }
    __syncthreads();
    if (t < m) sh.chunk_keys[t] = sorted[t];
    __syncthreads();
    return;
  }
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
}

// The kept-box path: candidates are taken in chunks of 1024 in canonical order (block radix
// select of the next 1024 keys when more remain, then sort_chunk); thread t owns candidate t of
// the chunk and recomputes its box from the input. Greedy: a candidate first tests the boxes kept
// in earlier chunks (shared memory), then the chunk is walked in order, each kept box suppressing
// the later ones it overlaps (one barrier per kept box). Fast: a candidate dies if any earlier one
// overlaps it. Stops at max_det. Returns the number kept (keys in kept_keys).
template <class Src, class Scan>
__device__ int kept_box_nms(const Src& src, const NmsParams& p, int img, int n,
                            const uint64_t* k_img, Box* seen, uint64_t* kept_keys, Box* kept_boxes,
                            NmsShared& sh, typename Scan::TempStorage& scan_tmp) {
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
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
    sort_chunk(sh, m);
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
        if (iou_exceeds(kept_boxes[i], box, p.cut)) alive = false;
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
        if (alive && t > next && iou_exceeds(sh.chunk_boxes[next], box, p.cut)) alive = false;
        bits = __ballot_sync(0xFFFFFFFFu, alive);
        if (lane == 0) sh.alive[buf ^ 1][warp] = bits;
        __syncthreads();
        buf ^= 1;
        cur = next;
      }
    } else {
      for (int i = 0; i < processed && alive; ++i)
        if (iou_exceeds(seen_img[i], box, p.cut)) alive = false;
      for (int i = 0; i < t && alive; ++i)
        if (iou_exceeds(sh.chunk_boxes[i], box, p.cut)) alive = false;
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
  return kept;
}

// Projection of the kept boxes of image img (thread k: kept box k, recomputed from the input)
// and its header, written to the mapped pinned result buffer.
template <class Src>
__device__ __forceinline__ void write_results(const Src& src, const NmsParams& p, int img, int kept,
                                              int count, const uint64_t* kept_keys,
                                              const ProjectBatch& geo, ResultHeader* header,
                                              DetRec* dets) {
  for (int k = threadIdx.x; k < kept; k += kNmsThreads) {
    const uint64_t key = kept_keys[k];
    const uint32_t index = key_index(key);
    const int row = static_cast<int>(index / static_cast<uint32_t>(src.nc));
    const int cls = static_cast<int>(index - static_cast<uint32_t>(row) * src.nc);
    const Box b = project_box(src.box(src.row(img, row)), geo.p[img]);
    dets[static_cast<int64_t>(img) * p.max_det + k] =
        DetRec{b.x1, b.y1, b.x2, b.y2, key_score(key), cls};
  }
  if (threadIdx.x == 0) header[img] = ResultHeader{kept, count};
}

// NMS + projection, one launch. Blocks 0 .. batch-1: block b takes image b through kept_box_nms
// unless the bitmask path takes its candidate count (BitmaskParams::takes), and zeroes its select
// state. Blocks batch .. (mask blocks, only when the plan has a bitmask path): grid-stride over the
// tiles of all crowded images (mask_tile); after each tile a ticket per image, and the block that
// finishes an image's last tile sweeps it (bitmask_sweep) and writes its results: no block ever
// waits for another. Every block first reads the candidate counts it needs, then takes a grid
// ticket (fence + atomic before it has written anything, so the fence waits for nothing; the
// ticket's value is used only at the end): the block that drew the last ticket zeroes the counts
// when it is done (every block has read its counts by then).
template <class Src>
__global__ void __launch_bounds__(kNmsThreads)
    nms_kernel(Src src, int batch, NmsParams p, BitmaskParams bm, SelectState st,
               const uint64_t* __restrict__ keys, Box* __restrict__ seen, ProjectBatch geo,
               ResultHeader* __restrict__ header, DetRec* __restrict__ dets) {
  using Scan = cub::BlockScan<int, kNmsThreads>;
  __shared__ union {
    NmsShared nms;
    MaskShared mask;
  } sh;
  __shared__ SweepShared sweep;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int s_counts[kMaxCudaBatch];
  __shared__ bool s_last_block;
  extern __shared__ uint64_t dyn[];
  uint64_t* kept_keys = dyn;                                        // [max_det]
  Box* kept_boxes = reinterpret_cast<Box*>(kept_keys + p.max_det);  // [max_det], greedy only
  const int t = threadIdx.x;
  const bool image_block = blockIdx.x < batch;
  if (image_block ? t == 0 : t < batch)
    s_counts[image_block ? blockIdx.x : t] = st.counts[image_block ? blockIdx.x : t];
  __syncthreads();  // the counts this block needs are read (bar.sync orders the loads)
  int ticket = 0;   // thread 0: this block's place among the blocks done reading the counts
  if (t == 0) {
    __threadfence();
    ticket = atomicAdd(st.grid_done, 1);  // its value is waited for only at the end
  }
  if (image_block) {
    const int img = blockIdx.x;
    const int count = s_counts[img];
    const int n = min(count, p.capacity);
    if (!(bm.bitmask_cap > 0 && bm.takes(n))) {
      const uint64_t* k_img = keys + static_cast<int64_t>(img) * p.capacity;
      const int kept = kept_box_nms<Src, Scan>(src, p, img, n, k_img, seen, kept_keys, kept_boxes,
                                               sh.nms, scan_tmp);
      write_results(src, p, img, kept, count, kept_keys, geo, header, dets);
    }
    if (st.hist != nullptr) {  // the decode and select kernels of this call are done with it
      if (t == 0) {
        st.emitted[img] = 0;
        st.below[img] = 0;
        st.prefix[img] = 0;
      }
      if (t < kSelectPasses) st.done[img * kSelectPasses + t] = 0;
      int* h = st.hist + static_cast<int64_t>(img) * kSelectPasses * kBins;
      for (int i = t; i < kSelectPasses * kBins; i += kNmsThreads) h[i] = 0;
    }
  } else {
    int tiles = 0;
    if (t < batch) {
      const int n = min(s_counts[t], p.capacity);
      tiles = bm.takes(n) ? mask_tiles(n) : 0;
    }
    int start = 0, total = 0;
    Scan(scan_tmp).ExclusiveSum(tiles, start, total);
    if (t <= batch) sh.mask.start[t] = t < batch ? start : total;
    __syncthreads();
    const int mask_blocks = static_cast<int>(gridDim.x) - batch;
    for (int task = static_cast<int>(blockIdx.x) - batch; task < total; task += mask_blocks) {
      int img = 0;
      while (sh.mask.start[img + 1] <= task) ++img;
      const int count = s_counts[img];
      const int n = min(count, p.capacity);
      mask_tile(bm, img, n, task - sh.mask.start[img], sh.mask);
      __threadfence();  // this tile's mask words and rank additions, before the ticket
      __syncthreads();
      if (t == 0) sh.mask.last = atomicAdd(st.tiles_done + img, 1) == mask_tiles(n) - 1;
      __syncthreads();
      if (sh.mask.last) {  // block-uniform: every tile of image img is done
        __threadfence();
        const int kept = bitmask_sweep(bm, img, n, p.max_det, kept_keys, sweep);
        write_results(src, p, img, kept, count, kept_keys, geo, header, dets);
        if (t == 0) st.tiles_done[img] = 0;
      }
      __syncthreads();  // sh.mask reused by the next task
    }
  }
  // The last block to have read its counts zeroes them for the next call (every block read its
  // counts before taking its ticket).
  if (t == 0) s_last_block = ticket == static_cast<int>(gridDim.x) - 1;
  __syncthreads();
  if (s_last_block) {
    for (int i = t; i < batch; i += kNmsThreads) st.counts[i] = 0;
    if (t == 0) *st.grid_done = 0;
  }
}

}  // namespace

template <class Src>
void launch_nms(const Src& src, int batch, int mask_blocks, const NmsParams& p,
                const BitmaskParams& bm, const SelectState& st, const uint64_t* keys, Box* seen,
                const ProjectBatch& geo, ResultHeader* header, DetRec* dets, size_t shared_bytes,
                cudaStream_t stream) {
  nms_kernel<Src><<<batch + mask_blocks, kNmsThreads, shared_bytes, stream>>>(
      src, batch, p, bm, st, keys, seen, geo, header, dets);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

template <class Src>
void set_nms_shared_limit(size_t bytes) {
  YOLOCU_CUDA_CHECK(cudaFuncSetAttribute(
      nms_kernel<Src>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

#define YOLOCU_INSTANTIATE_NMS(S)                                                             \
  template void launch_nms<S>(const S&, int, int, const NmsParams&, const BitmaskParams&,     \
                              const SelectState&, const uint64_t*, Box*, const ProjectBatch&, \
                              ResultHeader*, DetRec*, size_t, cudaStream_t);                  \
  template void set_nms_shared_limit<S>(size_t);
YOLOCU_FOR_EACH_POSTPROCESS_SOURCE(YOLOCU_INSTANTIATE_NMS)
#undef YOLOCU_INSTANTIATE_NMS

}  // namespace yolocu::postprocess_detail
