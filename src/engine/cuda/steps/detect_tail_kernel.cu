// The kernel of the DetectTail step (steps/detect_tail.cpp): the Detect head's tail, every level in
// one launch.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/kernel_util.cuh"
#include "engine/detect_tail.hpp"

namespace yolocu::cuda_kernels {

namespace {

using kutil::check_count;
using kutil::kThreads;
using kutil::to_f;

// Fused Detect tail, all levels in one launch (engine/detect_tail.hpp, "the kernel's tiles"): block =
// one tile of `tile` consecutive pixels of one image of one level (blocks of level l follow those of
// level l - 1). The tile's source channels are one contiguous run: 16-byte loads into shared memory
// (all loads in flight before any store); then, anchor by anchor, its merged rows, which are also
// contiguous, with consecutive threads on consecutive floats. It replaced a block per pixel row with
// a thread per channel, whose stores were strided by `no`.
template <typename T>
__global__ void __launch_bounds__(256) detect_tail_kernel(TailLevels t, float* __restrict__ out, int64_t rows, int tile) {
  extern __shared__ uint4 tail_smem[];
  T* sm = reinterpret_cast<T*>(tail_smem);
  // The block's level, copied with constant indices (a runtime index into the kernel's parameters
  // would put them in local memory, read again by every element).
  engine::tail::Level L;
  const void* level_src = nullptr;
  int begin = 0;
#pragma unroll
  for (int i = 0; i < kMaxTailLevels; ++i)
    if (i < t.count && static_cast<int>(blockIdx.x) >= t.block_begin[i]) {
      L = t.level[i];
      level_src = t.src[i];
      begin = t.block_begin[i];
    }
  const engine::tail::Tile tl = engine::tail::tile_of(L, static_cast<int>(blockIdx.x) - begin, tile);
  const int pitch = static_cast<int>(engine::tail::source_pitch(L));
  const T* __restrict__ src = static_cast<const T*>(level_src) + engine::tail::tile_source_offset(L, tl);
  const int values = tl.count * pitch;
  if ((reinterpret_cast<uintptr_t>(src) & 15) == 0 && (values * sizeof(T)) % 16 == 0) {
    const uint4* __restrict__ s4 = reinterpret_cast<const uint4*>(src);
    const int n4 = static_cast<int>(values * sizeof(T) / 16);
    for (int i = threadIdx.x; i < n4; i += blockDim.x) tail_smem[i] = __ldg(s4 + i);
  } else {
    for (int i = threadIdx.x; i < values; i += blockDim.x) sm[i] = src[i];
  }
  __syncthreads();
  // Each anchor's run: a thread walks it block-stride without dividing per element (the element's
  // arithmetic, not the bytes, bounds this kernel: a division per element made it slower than the
  // kernel it replaced).
  const int no = static_cast<int>(L.no), run = tl.count * no, cells = static_cast<int>(L.ny * L.nx);
  for (int a = 0; a < static_cast<int>(L.na); ++a) {
    float* __restrict__ o = out + engine::tail::run_output_index(L, rows, tl, a);
    const int cell0 = a * cells + tl.p0;
    engine::tail::RunWalk wk(threadIdx.x, blockDim.x, no);
    for (int j = threadIdx.x; j < run; j += blockDim.x, wk.next())
      o[j] = engine::tail::element(L, cell0 + wk.q, wk.k, to_f(sm[wk.local(pitch, a)]));
  }
}
}  // namespace

void detect_tail(const TailLevels& levels, bool half, float* out, int64_t rows, int batch, cudaStream_t stream) {
  YOLOCU_CHECK(levels.count >= 1 && levels.count <= kMaxTailLevels, kInternal, "detect_tail: ", levels.count, " levels");
  const int elem = half ? 2 : 4;
  TailLevels t = levels;
  // One tile size for the launch: the one the widest source allows (every level fits it).
  int64_t max_pitch = 1;
  for (int l = 0; l < t.count; ++l) max_pitch = std::max(max_pitch, engine::tail::source_pitch(t.level[l]));
  const int tile = engine::tail::tile_pixels_for(max_pitch, elem);
  const size_t smem = static_cast<size_t>(tile) * static_cast<size_t>(max_pitch) * static_cast<size_t>(elem);
  YOLOCU_CHECK(smem <= (48u << 10), kUnsupported, "Detect head with ", max_pitch,
               " channels per pixel: the fused tail holds at most ", (48 << 10) / elem, " (fuse_detect_tail = false)");
  int64_t blocks = 0;
  for (int l = 0; l < t.count; ++l) {
    const engine::tail::Level& L = t.level[l];
    t.block_begin[l] = static_cast<int>(blocks);
    blocks += int64_t{batch} * engine::tail::tiles_per_image(L, tile);
    check_count(int64_t{batch} * L.ny * L.nx * engine::tail::source_pitch(L), "detect_tail");
    check_count(int64_t{batch} * rows * L.no, "detect_tail output");
    check_count(L.na * tile * L.no, "detect_tail tile");
    check_count(L.na * L.ny * L.nx * 2 * engine::tail::kTables, "detect_tail tables");
  }
  t.block_begin[t.count] = static_cast<int>(blocks);
  check_count(blocks, "detect_tail blocks");
  const unsigned grid = static_cast<unsigned>(blocks);
  if (half)
    detect_tail_kernel<__half><<<grid, kThreads, smem, stream>>>(t, out, rows, tile);
  else
    detect_tail_kernel<float><<<grid, kThreads, smem, stream>>>(t, out, rows, tile);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

}  // namespace yolocu::cuda_kernels
