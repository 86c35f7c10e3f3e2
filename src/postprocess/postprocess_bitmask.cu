// The bitmask NMS path's mask kernel: for every crowded image (BitmaskParams::takes), the IoU
// bitmask of all candidate pairs and the canonical rank of every candidate, in slot order, from
// the keys and NMS boxes the decode stored. The sweep (postprocess_bitmask.cuh, run by
// nms_kernel) then needs no sort. Compiled with -fmad=false.
#include <cub/block/block_scan.cuh>

#include "core/cuda_check.hpp"
#include "postprocess/postprocess_device.cuh"

namespace yolocu::postprocess_detail {

namespace {

// Grid-stride over the tiles of all crowded images: an image of n candidates has
// ceil(n / 256)^2 tiles of 256 rows x 256 columns (slots). Block = 256 threads: the tile's column
// keys and boxes go to shared memory, thread t takes row i = 256 r + t and writes its 4 mask
// words (bit j of word w: candidate 64 w + j comes after i and IoU(i, j) > cut, the reference's
// expression through iou_exceeds) and adds the number of its columns with a smaller key to
// rank[i] (one atomicAdd per row and tile). No image is crowded: every block exits after one scan.
__global__ void __launch_bounds__(kMaskThreads)
    nms_mask_kernel(BitmaskParams bm, const int* __restrict__ counts, int batch) {
  using Scan = cub::BlockScan<int, kMaskThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int s_start[kMaxCudaBatch + 1];
  __shared__ Box s_box[kMaskTile];
  __shared__ uint64_t s_key[kMaskTile];
  const int t = threadIdx.x;
  int tiles = 0;
  if (t < batch) {
    const int n = min(counts[t], bm.capacity);
    const int per_side = (n + kMaskTile - 1) / kMaskTile;
    tiles = bm.takes(n) ? per_side * per_side : 0;
  }
  int start = 0, total = 0;
  Scan(scan_tmp).ExclusiveSum(tiles, start, total);
  if (t <= batch && t <= kMaxCudaBatch) s_start[t] = t < batch ? start : total;
  __syncthreads();
  for (int task = blockIdx.x; task < total; task += gridDim.x) {
    int img = 0;
    while (s_start[img + 1] <= task) ++img;
    const int n = min(counts[img], bm.capacity);
    const int per_side = (n + kMaskTile - 1) / kMaskTile, W = (n + 63) / 64;
    const int local = task - s_start[img], rt = local / per_side, ct = local - rt * per_side;
    const uint64_t* keys = bm.keys + static_cast<int64_t>(img) * bm.capacity;
    const Box* boxes = bm.boxes + static_cast<int64_t>(img) * bm.bitmask_cap;
    const int j0 = ct * kMaskTile, i = rt * kMaskTile + t;
    if (j0 + t < n) {
      s_box[t] = boxes[j0 + t];
      s_key[t] = keys[j0 + t];
    }
    __syncthreads();
    if (i < n) {
      const Box bi = boxes[i];
      const uint64_t ki = keys[i];
      uint64_t* row = bm.mask + static_cast<int64_t>(img) * bm.mask_stride() + static_cast<int64_t>(i) * W;
      const int cols = min(kMaskTile, n - j0);
      int before = 0;
      for (int q = 0; q * 64 < cols; ++q) {
        uint64_t bits = 0;
        const int end = min(64, cols - q * 64);
        for (int jj = 0; jj < end; ++jj) {
          const uint64_t kj = s_key[q * 64 + jj];
          if (kj < ki)
            ++before;
          else if (kj > ki && iou_exceeds(bi, s_box[q * 64 + jj], bm.cut))
            bits |= 1ull << jj;
        }
        row[j0 / 64 + q] = bits;
      }
      if (before) atomicAdd(bm.rank + static_cast<int64_t>(img) * bm.bitmask_cap + i, before);
    }
    __syncthreads();  // s_box / s_key reused by the next task
  }
}

}  // namespace

void launch_nms_mask(const BitmaskParams& bm, const int* counts, int batch, int blocks,
                     cudaStream_t stream) {
  nms_mask_kernel<<<blocks, kMaskThreads, 0, stream>>>(bm, counts, batch);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::postprocess_detail
