// CUDA decode: candidate keys of every image into its slots, and the radix select that keeps
// exactly the `capacity` best-scored candidates of an image that finds more. Semantics: see
// postprocess_cpu.cpp (decode_cpu) and docs/postprocess.md. Compiled with -fmad=false.
#include <cub/block/block_scan.cuh>

#include "core/cuda_check.hpp"
#include "postprocess/postprocess_device.cuh"

namespace yolocu::postprocess_detail {

namespace {

// Decode: thread = one row of one image; grid (ceil(rows / 256), batch). Each thread counts its
// row's candidates, the block scans the counts and reserves its slots with ONE atomicAdd on the
// image's counter; keys go to slots < capacity, the rest is only counted (slot order is
// scheduling-dependent: the NMS sorts). With the bitmask path enabled, the NMS box of each slot
// < bitmask_cap is stored too (its mask kernel reads boxes, not the input). kEmit (overflowing
// images only): keep the keys <= the selected threshold key, exactly `capacity` of them, counted
// in `emitted`.
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
  if (threadIdx.x == 0)
    s_base = total > 0 ? atomicAdd((kEmit ? st.emitted : st.counts) + img, total) : 0;
  __syncthreads();
  if (mine == 0) return;
  int slot = s_base + before;
  uint64_t* out = keys + static_cast<int64_t>(img) * p.capacity;
  Box* out_boxes = p.boxes ? p.boxes + static_cast<int64_t>(img) * p.bitmask_cap : nullptr;
  const Box box = out_boxes && slot < p.bitmask_cap ? src.box(w) : Box{0.f, 0.f, 0.f, 0.f};
  for_each_candidate(src, w, p, [&](float s, int c) {
    const uint64_t key = make_key(s, base_index + c);
    if (kEmit && key > limit) return;
    if (slot < p.capacity) out[slot] = key;
    if (out_boxes && slot < p.bitmask_cap) out_boxes[slot] = nms_box(box, c, p.agnostic);
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

}  // namespace

template <class Src>
void launch_decode(const Src& src, int batch, const DecodeParams& p, const SelectState& st,
                   uint64_t* keys, bool select_passes, cudaStream_t stream) {
  const dim3 grid((src.rows + kDecodeThreads - 1) / kDecodeThreads, batch);
  decode_kernel<Src, false><<<grid, kDecodeThreads, 0, stream>>>(src, p, st, keys);
  YOLOCU_CUDA_CHECK_LAUNCH();
  if (!select_passes) return;
  for (int pass = 0; pass < kSelectPasses; ++pass) {
    select_kernel<Src><<<grid, kDecodeThreads, 0, stream>>>(src, p, st, pass);
    YOLOCU_CUDA_CHECK_LAUNCH();
  }
  decode_kernel<Src, true><<<grid, kDecodeThreads, 0, stream>>>(src, p, st, keys);
  YOLOCU_CUDA_CHECK_LAUNCH();
}

#define YOLOCU_INSTANTIATE_DECODE(S)                                                     \
  template void launch_decode<S>(const S&, int, const DecodeParams&, const SelectState&, \
                                 uint64_t*, bool, cudaStream_t);
YOLOCU_FOR_EACH_POSTPROCESS_SOURCE(YOLOCU_INSTANTIATE_DECODE)
#undef YOLOCU_INSTANTIATE_DECODE

}  // namespace yolocu::postprocess_detail
