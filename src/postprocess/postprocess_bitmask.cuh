// The bitmask NMS path (device code, included by postprocess_nms.cu, run by nms_kernel's extra
// blocks): the IoU bitmask and canonical ranks of a crowded image (mask_tile), then greedy NMS
// over them (bitmask_sweep) by the block that finished the image's last tile.
//
// Per image of n candidates, in slot order (slot = decode arrival order):
//   mask[i * W + w]  bit j - 64 w set iff candidate j comes after i in canonical order and
//                    IoU(box i, box j) > cut (W = ceil(n / 64));
//   rank[i]          canonical position of slot i (the number of keys smaller than its key).
// The sweep walks canonical positions in blocks of 64 and keeps `removed` (one bit per slot) in
// shared memory; a block costs 4 barriers, whatever the number of boxes it keeps. Mask words and
// ranks written by other blocks of the same launch are read with __ldcg (L2, never a stale L1).
#pragma once

#include "postprocess/postprocess_device.cuh"

namespace yolocu::postprocess_detail {

struct MaskShared {
  Box box[kMaskCols];
  uint64_t key[kMaskCols];
  int start[kMaxCudaBatch + 1];  // first task of each image; start[batch] = all tasks
  bool last;
};

// Tiles of an image of n candidates: ceil(n / kMaskRows) x ceil(n / kMaskCols).
__device__ __forceinline__ int mask_tiles(int n) {
  return ((n + kMaskRows - 1) / kMaskRows) * ((n + kMaskCols - 1) / kMaskCols);
}

// Tile `local` of image img: thread t takes row i = kMaskRows * r + t against kMaskCols columns
// (keys and boxes in shared memory), writes its kMaskCols / 64 mask words and adds the number of
// its columns with a smaller key to rank[i] (one atomicAdd per row and tile).
__device__ __forceinline__ void mask_tile(const BitmaskParams& bm, int img, int n, int local,
                                          MaskShared& sh) {
  const int t = threadIdx.x;
  const int col_tiles = (n + kMaskCols - 1) / kMaskCols, W = (n + 63) / 64;
  const int rt = local / col_tiles, ct = local - rt * col_tiles;
  const uint64_t* keys = bm.keys + static_cast<int64_t>(img) * bm.capacity;
  const Box* boxes = bm.boxes + static_cast<int64_t>(img) * bm.bitmask_cap;
  const int j0 = ct * kMaskCols, i = rt * kMaskRows + t;
  if (t < kMaskCols && j0 + t < n) {
    sh.box[t] = boxes[j0 + t];
    sh.key[t] = keys[j0 + t];
  }
  __syncthreads();
  if (i < n) {
    const Box bi = boxes[i];
    const uint64_t ki = keys[i];
    uint64_t* row =
        bm.mask + static_cast<int64_t>(img) * bm.mask_stride() + static_cast<int64_t>(i) * W;
    const int cols = min(kMaskCols, n - j0);
    int before = 0;
    for (int q = 0; q * 64 < cols; ++q) {
      uint64_t bits = 0;
      const int end = min(64, cols - q * 64);
      for (int jj = 0; jj < end; ++jj) {
        const uint64_t kj = sh.key[q * 64 + jj];
        if (kj < ki)
          ++before;
        else if (kj > ki && iou_exceeds(bi, sh.box[q * 64 + jj], bm.cut))
          bits |= 1ull << jj;
      }
      row[j0 / 64 + q] = bits;
    }
    if (before) atomicAdd(bm.rank + static_cast<int64_t>(img) * bm.bitmask_cap + i, before);
  }
}

struct SweepShared {
  uint64_t removed[kMaxBitmaskWords];  // bit per slot: suppressed by a kept box
  uint64_t diag[64];                   // within the block: bit c of row a = a suppresses c
  uint64_t kept_bits;                  // rows of the block kept
  int slot[64];                        // slot of canonical position base + a
  int kept_row[64];                    // kept rows of the block, ascending
};

// Greedy NMS of image `img` (n <= bitmask_cap candidates) with all kNmsThreads threads of the
// block; appends the kept keys, in canonical order, to kept_keys (max_det at most) and returns
// how many. Zeroes rank[0, n) for the next call. Thread mapping per block b of 64 positions:
//   1. threads 0-63 publish the slots of positions 64 b + a (order[], scattered from rank[]),
//      loaded during the previous block;
//   2. diagonal: warp w takes rows a = w and w + 32, lane l columns c = l and l + 32: bit c of
//      row a is mask bit (slot a, slot c) for c > a, two ballots per row (rows already removed
//      are skipped);
//   3. warp 0 resolves the block serially from the diagonal words in registers (a shuffle per
//      kept row that suppresses another of the block): a row not removed is kept, its diagonal
//      word removes later rows; stops at max_det;
//   4. every thread ORs words of the kept rows' mask rows into `removed` (shared atomicOr).
__device__ __forceinline__ int bitmask_sweep(const BitmaskParams& bm, int img, int n, int max_det,
                                             uint64_t* kept_keys, SweepShared& sh) {
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int W = (n + 63) / 64;
  const uint64_t* keys = bm.keys + static_cast<int64_t>(img) * bm.capacity;
  const uint64_t* mask = bm.mask + static_cast<int64_t>(img) * bm.mask_stride();
  int* rank = bm.rank + static_cast<int64_t>(img) * bm.bitmask_cap;
  int* order = bm.order + static_cast<int64_t>(img) * bm.bitmask_cap;
  for (int w = t; w < W; w += kNmsThreads) sh.removed[w] = 0;
  for (int i = t; i < n; i += kNmsThreads) {
    order[__ldcg(rank + i)] = i;
    rank[i] = 0;
  }
  __syncthreads();  // order[] (global) and removed[] visible to the block
  auto is_removed = [&](int s) { return (sh.removed[s >> 6] >> (s & 63)) & 1ull; };
  int kept = 0;
  int next_slot = t < 64 && t < n ? order[t] : -1;  // threads 0-63: the next block's slots
  for (int b = 0; b < W && kept < max_det; ++b) {
    const int base = b * 64, m = min(64, n - base);
    if (t < 64) {
      sh.slot[t] = next_slot;
      // prefetch for block b + 1: the load's latency hides behind this block's work
      next_slot = base + 64 + t < n ? order[base + 64 + t] : -1;
    }
    __syncthreads();
    for (int h = 0; h < 2; ++h) {
      const int a = warp + 32 * h;
      const bool row_alive = a < m && !is_removed(sh.slot[a]);  // uniform per warp
      if (!row_alive) {
        if (lane == 0) sh.diag[a] = 0;
        continue;
      }
      const uint64_t* row = mask + static_cast<int64_t>(sh.slot[a]) * W;
      bool b0 = false, b1 = false;
      const int c0 = lane, c1 = lane + 32;
      if (c0 > a && c0 < m) {
        const int s = sh.slot[c0];
        b0 = (__ldcg(row + (s >> 6)) >> (s & 63)) & 1ull;
      }
      if (c1 > a && c1 < m) {
        const int s = sh.slot[c1];
        b1 = (__ldcg(row + (s >> 6)) >> (s & 63)) & 1ull;
      }
      const unsigned lo = __ballot_sync(0xFFFFFFFFu, b0), hi = __ballot_sync(0xFFFFFFFFu, b1);
      if (lane == 0) sh.diag[a] = static_cast<uint64_t>(lo) | (static_cast<uint64_t>(hi) << 32);
    }
    __syncthreads();
    if (warp == 0) {
      const bool al0 = lane < m && !is_removed(sh.slot[lane]);
      const bool al1 = lane + 32 < m && !is_removed(sh.slot[lane + 32]);
      const uint64_t alive = static_cast<uint64_t>(__ballot_sync(0xFFFFFFFFu, al0)) |
                             (static_cast<uint64_t>(__ballot_sync(0xFFFFFFFFu, al1)) << 32);
      const uint64_t d0 = sh.diag[lane], d1 = sh.diag[lane + 32];
      const uint64_t suppressors =
          static_cast<uint64_t>(__ballot_sync(0xFFFFFFFFu, d0 != 0)) |
          (static_cast<uint64_t>(__ballot_sync(0xFFFFFFFFu, d1 != 0)) << 32);
      // alive and suppressors are identical in every lane, so is the sequence of rows visited
      const uint64_t kept_bits = resolve_bitmask_block(
          alive, suppressors,
          [&](int a) {
            const uint64_t lo = __shfl_sync(0xFFFFFFFFu, d0, a & 31),
                           hi = __shfl_sync(0xFFFFFFFFu, d1, a & 31);
            return a < 32 ? lo : hi;
          },
          max_det - kept);
      for (int h = 0; h < 2; ++h) {
        const int a = lane + 32 * h;
        if ((kept_bits >> a) & 1ull) {
          const int j = __popcll(kept_bits & ((1ull << a) - 1ull));
          kept_keys[kept + j] = keys[sh.slot[a]];
          sh.kept_row[j] = a;
        }
      }
      if (lane == 0) sh.kept_bits = kept_bits;
    }
    __syncthreads();
    const int nk = __popcll(sh.kept_bits);
    kept += nk;
    if (kept >= max_det || b + 1 >= W) break;  // uniform
    for (int idx = t; idx < nk * W; idx += kNmsThreads) {
      const int j = idx / W, w = idx - j * W;
      const uint64_t v = __ldcg(mask + static_cast<int64_t>(sh.slot[sh.kept_row[j]]) * W + w);
      if (v)
        atomicOr(reinterpret_cast<unsigned long long*>(&sh.removed[w]),
                 static_cast<unsigned long long>(v));
    }
    __syncthreads();
  }
  __syncthreads();  // kept_keys complete
  return kept;
}

}  // namespace yolocu::postprocess_detail
