// The kernel of the V8Tail step (steps/v8_tail.cpp): YOLOv8 / YOLO11's Detect tail, every level in
// one launch (engine/v8_tail.hpp holds its math and tiling).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda_check.hpp"
#include "engine/cuda/kernel_util.cuh"
#include "engine/cuda/steps/v8_tail_kernel.hpp"

namespace yolocu::cuda_kernels {

namespace {

using engine::v8tail::kBins;
using kutil::check_count;
using kutil::kThreads;
using kutil::to_f;
namespace vt = engine::v8tail;

// The 16 DFL logits of one distance: two (fp16) or four (fp32) 16-byte loads where aligned.
template <typename T>
__device__ __forceinline__ void load_bins(const T* __restrict__ p, float* v) {
  constexpr int V = 16 / sizeof(T);
  if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) {
#pragma unroll
    for (int c = 0; c < kBins / V; ++c) {
      const kutil::Vec<T, V> w = *reinterpret_cast<const kutil::Vec<T, V>*>(p + c * V);
#pragma unroll
      for (int j = 0; j < V; ++j) v[c * V + j] = to_f(w.v[j]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kBins; ++i) v[i] = to_f(p[i]);
  }
}

// Block = one tile of `tile` (2^shift) consecutive pixels of one image of one level (the level's
// blocks follow the previous level's), in the three phases of engine/v8_tail.hpp: the class scores
// into shared memory (coalesced reads of the tile's contiguous source run) while 4 * tile threads
// turn one side's 16 logits of one pixel each into its distance; then the output rows, `count`
// consecutive floats each (coalesced stores).
template <typename T>
__global__ void __launch_bounds__(256) v8_tail_kernel(V8TailLevels t, float* __restrict__ out, int nc, int anchors,
                                                      int shift) {
  extern __shared__ float v8_smem[];
  float* scores = v8_smem;                                                  // [tile][class_stride]
  float* dist = v8_smem + (static_cast<int>(vt::class_stride(nc)) << shift);  // [4][tile]
  // The block's level, copied with constant indices (kernel parameters stay out of local memory).
  vt::Level L;
  const void *box_src = nullptr, *cls_src = nullptr;
  int begin = 0;
#pragma unroll
  for (int i = 0; i < vt::kMaxLevels; ++i)
    if (i < t.count && static_cast<int>(blockIdx.x) >= t.block_begin[i]) {
      L = t.level[i];
      box_src = t.box[i];
      cls_src = t.cls[i];
      begin = t.block_begin[i];
    }
  const vt::Tile tl = vt::tile_of(L, static_cast<int>(blockIdx.x) - begin, 1 << shift);
  const T* __restrict__ cls = static_cast<const T*>(cls_src) + vt::source_index(L, tl, L.cls_pitch, 0, 0);
  const T* __restrict__ box = static_cast<const T*>(box_src);
  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  vt::stage_scores(L, tl, nc, tid, threads, [&](int i) { return to_f(__ldg(cls + i)); }, scores);
  vt::stage_distances(
      tl, shift, tid, threads,
      [&](int q, int side, float* v) { load_bins(box + vt::source_index(L, tl, L.box_pitch, q, side * kBins), v); }, dist);
  __syncthreads();
  vt::write_outputs(L, tl, nc, anchors, shift, tid, threads, scores, dist, [&](int64_t o, float v) { out[o] = v; });
}

}  // namespace

void v8_tail(const V8TailLevels& levels, bool half, float* out, int64_t nc, int64_t anchors, int batch,
             cudaStream_t stream) {
  YOLOCU_CHECK(levels.count >= 1 && levels.count <= vt::kMaxLevels, kInternal, "v8_tail: ", levels.count, " levels");
  const int tile = vt::tile_pixels_for(nc);
  YOLOCU_CHECK(tile > 0, kUnsupported, "YOLOv8 Detect tail with ", nc, " classes: the fused tail holds fewer");
  const int shift = vt::tile_shift(tile);
  check_count(int64_t{batch} * (4 + nc) * anchors, "v8_tail output");
  V8TailLevels t = levels;
  int64_t blocks = 0;
  for (int l = 0; l < t.count; ++l) {
    const vt::Level& L = t.level[l];
    YOLOCU_CHECK(L.box_pitch >= 4 * kBins && L.cls_channel >= 0 && L.cls_pitch >= L.cls_channel + nc &&
                     L.anchor_begin + int64_t{L.ny} * L.nx <= anchors,
                 kInternal, "v8_tail: level ", l, " does not fit its sources or the output");
    t.block_begin[l] = static_cast<int>(blocks);
    blocks += int64_t{batch} * vt::tiles_per_image(L, tile);
    check_count(int64_t{batch} * L.ny * L.nx * L.box_pitch, "v8_tail box source");
    check_count(int64_t{batch} * L.ny * L.nx * L.cls_pitch, "v8_tail class source");
  }
  t.block_begin[t.count] = static_cast<int>(blocks);
  check_count(blocks, "v8_tail blocks");
  const size_t smem = (static_cast<size_t>(tile) * static_cast<size_t>(vt::class_stride(nc)) + 4u * tile) * sizeof(float);
  const unsigned grid = static_cast<unsigned>(blocks);
  if (half)
    v8_tail_kernel<__half><<<grid, kThreads, smem, stream>>>(t, out, static_cast<int>(nc), static_cast<int>(anchors), shift);
  else
    v8_tail_kernel<float><<<grid, kThreads, smem, stream>>>(t, out, static_cast<int>(nc), static_cast<int>(anchors), shift);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::cuda_kernels
