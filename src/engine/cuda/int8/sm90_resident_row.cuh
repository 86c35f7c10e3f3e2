// A leaf of CUTLASS's sm90 epilogue visitor tree for conv_int8_sm90.cu: a row vector (one value per
// output channel: the layer's scale or its bias) broadcast over the tile's pixels, staged in shared
// memory once per CTA for the whole row rather than once per tile. A persistent kernel's CTA runs
// tile after tile with one epilogue object, so the first tile's epilogue loads the row (all of its
// kMaxN slots: the values, then the default) and synchronises the epilogue's threads, and every
// later tile only reads it: no global load to wait for and no barrier per tile. Nothing writes the
// row after that first barrier, so later tiles read it without one. sm_90a only.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"

namespace yolocu::engine::sm90 {

template <class CtaTileShapeMNK, class Element, int kMaxN>
struct ResidentRowBroadcast {
  static constexpr int kTileN = cute::size<1>(CtaTileShapeMNK{});
  // a tile reads kTileN slots from n * kTileN: rows of up to kMaxN values stay inside the buffer
  static_assert(kMaxN % kTileN == 0, "kMaxN must be a multiple of the tile's width");

  struct SharedStorage {
    cute::array_aligned<Element, kMaxN> smem;
  };
  struct Arguments {                   // as CUTLASS's row broadcast takes them
    Element const* ptr_row = nullptr;  // N values; nullptr: every value is null_default
    Element null_default = Element(0);
  };
  struct Params {
    Element const* ptr_row = nullptr;
    Element null_default = Element(0);
    int n = 0;  // the row's length: the problem's N
  };

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const& problem_shape,
                                                  Arguments const& args, void*) {
    return {args.ptr_row, args.null_default, static_cast<int>(cute::get<1>(problem_shape))};
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const&) {
    return static_cast<int>(cute::get<1>(problem_shape)) <= kMaxN;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*,
                                              cudaStream_t, cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  CUTLASS_HOST_DEVICE ResidentRowBroadcast() {}
  CUTLASS_HOST_DEVICE ResidentRowBroadcast(Params const& p, SharedStorage const& s)
      : params(p), smem(const_cast<Element*>(s.smem.data())) {}

  Params params;
  Element* smem = nullptr;
  bool staged = false;  // this CTA's shared copy holds the row (the same in all its threads)

  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_zero() const { return false; }

  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(
      cutlass::epilogue::fusion::ProducerLoadArgs<Args...> const&) {
    return cutlass::epilogue::fusion::EmptyProducerLoadCallbacks{};
  }

  template <class SmemTensor, class RegTensor>
  struct ConsumerStoreCallbacks : cutlass::epilogue::fusion::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(SmemTensor s, RegTensor r, Params const& p, Element* row,
                                          bool load, int thread, int threads)
        : tSR_sRow(s),
          tSR_rRow(r),
          params(p),
          smem_row(row),
          load_row(load),
          thread_idx(thread),
          thread_count(threads) {}

    SmemTensor
        tSR_sRow;  // (CPY, CPY_M, CPY_N, EPI_M, EPI_N): this thread's view of the tile's slots
    RegTensor tSR_rRow;  // (CPY, CPY_M, CPY_N): the current epilogue part's values
    Params const& params;
    Element* smem_row;
    bool load_row;  // this CTA's first tile
    int thread_idx, thread_count;

    CUTLASS_DEVICE void begin() {
      if (!load_row) return;
      for (int i = thread_idx; i < kMaxN; i += thread_count)
        smem_row[i] =
            params.ptr_row != nullptr && i < params.n ? params.ptr_row[i] : params.null_default;
    }
    CUTLASS_DEVICE bool begin_sync_needed() const { return load_row; }

    // The epilogue walks its parts M first: each column of parts reads its values once (the
    // broadcast modes, of stride 0, filtered out of both sides).
    CUTLASS_DEVICE void begin_loop(int epi_m, int epi_n) {
      if (epi_m != 0) return;
      cute::Tensor src = cute::filter_zeros(tSR_sRow(cute::_, cute::_, cute::_, epi_m, epi_n));
      cute::Tensor dst = cute::filter_zeros(tSR_rRow);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < cute::size(dst); ++i) dst(i) = src(i);
    }

    template <class ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<Element, FragmentSize> visit(
        cutlass::Array<ElementAccumulator, FragmentSize> const&, int epi_v, int, int) {
      cutlass::Array<Element, FragmentSize> frg;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) frg[i] = tSR_rRow(epi_v * FragmentSize + i);
      return frg;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(
      cutlass::epilogue::fusion::ConsumerStoreArgs<Args...> const& args) {
    using namespace cute;
    const int n = static_cast<int>(get<1>(args.tile_coord_mnkl));
    // the tile's kTileN slots of the row, the same for each of its rows (stride 0 down M)
    Tensor sRow = make_tensor(make_smem_ptr(smem + n * kTileN),
                              make_layout(make_shape(size<0>(CtaTileShapeMNK{}), Int<kTileN>{}),
                                          make_stride(_0{}, _1{})));
    Tensor tSR_sRow = cutlass::epilogue::fusion::sm90_partition_for_epilogue<ReferenceSrc>(
        sRow, args.epi_tile, args.tiled_copy, args.thread_idx);
    Tensor tSR_rRow = make_tensor_like<Element>(take<0, 3>(tSR_sRow));
    const bool load = !staged;
    staged = true;
    return ConsumerStoreCallbacks<decltype(tSR_sRow), decltype(tSR_rRow)>(
        tSR_sRow, tSR_rRow, params, smem, load, args.thread_idx,
        static_cast<int>(size(args.tiled_copy)));
  }
};

}  // namespace yolocu::engine::sm90
