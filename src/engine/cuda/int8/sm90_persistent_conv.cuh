// A persistent kernel around CUTLASS's sm90 implicit-GEMM convolution collectives (the TMA im2col
// mainloop of cutlass/conv/collective, the TMA warp-specialised epilogue of cutlass/epilogue), for
// conv_int8_sm90_im2col.cu. CUTLASS 4.2 wires its sm90 convolution only into its non-persistent
// kernel (one CTA per output tile: each CTA sets up its pipelines, loads, multiplies over a short
// K loop and stores one tile, so on YOLO's layers its prologue and epilogue are most of its time);
// this kernel keeps one CTA per SM and hands it tile after tile, so the producer warp loads the
// next tile while the consumers run the epilogue of the last one.
//
// Roles (one CTA, no cluster): warp group 0 produces (warp 0: the mainloop's TMA loads; warp 2:
// the epilogue's source loads, where its fusion reads any), warp groups 1.. consume (the
// TiledMma's warp groups work on one tile together, then run its epilogue). Tiles are taken in
// static order: tile t = blockIdx.x + i * gridDim.x, its output-channel block t % tiles_n, so CTAs
// running at the same time share the same input pixels in L2.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.h"  // (before the conv collectives, which use it undeclared)
#include "cutlass/conv/collective/collective_builder.hpp"
#include "cutlass/conv/convolution.h"
#include "cutlass/conv/detail.hpp"
#include "cutlass/pipeline/sm90_pipeline.hpp"

namespace yolocu::engine::sm90 {

template <class Mainloop_, class Epilogue_>
struct PersistentConv {
  using Mainloop = Mainloop_;
  using Epilogue = Epilogue_;
  using TileShape = typename Mainloop::TileShape;
  using TiledMma = typename Mainloop::TiledMma;
  using ConvShape = typename Mainloop::ProblemShape;  // cutlass::conv::ConvProblemShape
  using ProblemMnkl = decltype(Mainloop::get_problem_shape_MNKL(ConvShape{}));
  using ArchTag = cutlass::arch::Sm90;
  static_assert(cute::size(typename Mainloop::DispatchPolicy::ClusterShape{}) == 1, "no clusters");

  static constexpr uint32_t kMmaThreads = cute::size(TiledMma{});
  static constexpr uint32_t kMmaWarpGroups = kMmaThreads / cutlass::NumThreadsPerWarpGroup;
  static constexpr uint32_t MaxThreadsPerBlock = kMmaThreads + cutlass::NumThreadsPerWarpGroup;
  static constexpr uint32_t MinBlocksPerMultiprocessor = 1;
  static constexpr uint32_t kLoadRegisters = 40, kMmaRegisters = kMmaWarpGroups > 1 ? 232 : 240;

  struct SharedStorage {
    struct Pipelines : cute::aligned_struct<16, cute::_1> {
      alignas(16) typename Mainloop::PipelineStorage mainloop;
      alignas(16) typename Epilogue::PipelineStorage epi_load;
    } pipelines;
    struct Tensors : cute::aligned_struct<128, cute::_1> {
      typename Epilogue::TensorStorage epilogue;
      typename Mainloop::TensorStorage mainloop;
    } tensors;
  };
  static constexpr int SharedStorageSize = sizeof(SharedStorage);

  struct Arguments {
    ConvShape problem_shape;
    typename Mainloop::Arguments mainloop;
    typename Epilogue::Arguments epilogue;
  };
  struct Params {
    ProblemMnkl problem_shape;
    typename Mainloop::Params mainloop;
    typename Epilogue::Params epilogue;
    int tiles_m, tiles_n;
  };

  // The epilogue's tensors are rank-3 [M, N, L] with M the n*p*q output pixels in order (a
  // row-major D whose rows may be pitched), so it takes the linearised shape where CUTLASS's conv
  // kernel gives it the conv-shaped one.
  static auto epilogue_shape(ConvShape const& s) {
    auto mnkl = Mainloop::get_problem_shape_MNKL(s);
    return cute::make_shape(int(cute::get<0>(mnkl)), int(cute::get<1>(mnkl)), int(cute::size(cute::get<2>(mnkl))), 1);
  }

  static bool can_implement(Arguments const& args) {
    return Mainloop::can_implement(args.problem_shape, args.mainloop) &&
           Epilogue::can_implement(epilogue_shape(args.problem_shape), args.epilogue);
  }

  static Params to_underlying_arguments(Arguments const& args) {
    auto mnkl = Mainloop::get_problem_shape_MNKL(args.problem_shape);
    const int m = int(cute::get<0>(mnkl)), n = int(cute::get<1>(mnkl));
    return {mnkl, Mainloop::to_underlying_arguments(args.problem_shape, args.mainloop, nullptr),
            Epilogue::to_underlying_arguments(epilogue_shape(args.problem_shape), args.epilogue, nullptr),
            (m + int(cute::size<0>(TileShape{})) - 1) / int(cute::size<0>(TileShape{})),
            (n + int(cute::size<1>(TileShape{})) - 1) / int(cute::size<1>(TileShape{}))};
  }

  CUTLASS_DEVICE void operator()(Params const& params, char* smem_buf) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using namespace cute;
    SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem_buf);
    const int thread_idx = int(threadIdx.x), lane_idx = cutlass::canonical_lane_idx();
    const int warp_idx = cutlass::canonical_warp_idx_sync();
    const int warp_in_group = warp_idx % cutlass::NumWarpsPerWarpGroup;
    const int group_thread_idx = thread_idx % cutlass::NumThreadsPerWarpGroup;
    const int mma_thread_idx = thread_idx - int(cutlass::NumThreadsPerWarpGroup);
    const bool producer = cutlass::canonical_warp_group_idx() == 0;
    const bool load_warp = producer && warp_in_group == 0, epi_load_warp = producer && warp_in_group == 2;

    if (warp_idx == 0 && cute::elect_one_sync()) {
      Mainloop::prefetch_tma_descriptors(params.mainloop);
      Epilogue::prefetch_tma_descriptors(params.epilogue);
    }
    Epilogue collective_epilogue(params.epilogue, shared.tensors.epilogue);
    const bool epi_load_needed = collective_epilogue.is_producer_load_needed();

    using MainloopPipeline = typename Mainloop::MainloopPipeline;
    typename MainloopPipeline::Params mp;
    if (load_warp) mp.role = MainloopPipeline::ThreadCategory::Producer;
    if (!producer) mp.role = MainloopPipeline::ThreadCategory::Consumer;
    mp.is_leader = group_thread_idx == 0;
    mp.num_consumers = kMmaThreads;
    mp.transaction_bytes = params.mainloop.tma_transaction_bytes;
    MainloopPipeline mainloop_pipeline(shared.pipelines.mainloop, mp, Shape<_1, _1, _1>{});

    using EpiLoadPipeline = typename Epilogue::LoadPipeline;
    typename EpiLoadPipeline::Params ep;
    if (epi_load_warp) ep.role = EpiLoadPipeline::ThreadCategory::Producer;
    if (!producer) ep.role = EpiLoadPipeline::ThreadCategory::Consumer;
    ep.dst_blockid = cute::block_rank_in_cluster();
    ep.producer_arv_count = cutlass::NumThreadsPerWarp;
    ep.consumer_arv_count = kMmaThreads;
    if constexpr (Epilogue::RequiresTransactionBytes) ep.transaction_bytes = params.epilogue.tma_transaction_bytes;
    EpiLoadPipeline epi_load_pipeline(shared.pipelines.epi_load, ep);

    using EpiStorePipeline = typename Epilogue::StorePipeline;
    typename EpiStorePipeline::Params sp;
    sp.always_wait = true;
    EpiStorePipeline epi_store_pipeline(sp);

    typename Mainloop::PipelineState mainloop_consumer;
    typename Epilogue::LoadPipelineState epi_load_consumer;
    auto mainloop_producer = cutlass::make_producer_start_state<MainloopPipeline>();
    auto epi_load_producer = cutlass::make_producer_start_state<EpiLoadPipeline>();
    auto epi_store_producer = cutlass::make_producer_start_state<EpiStorePipeline>();

    auto problem_mnkl = append<4>(params.problem_shape, Int<1>{});
    auto blk_shape = TileShape{};
    TiledMma tiled_mma;
    Mainloop collective_mainloop;
    auto load_inputs = collective_mainloop.load_init(problem_mnkl, params.mainloop);
    Tensor gA_mk = get<0>(load_inputs);  // (BLK_M, BLK_K, m, k)
    Tensor gB_nk = get<1>(load_inputs);  // (BLK_N, BLK_K, n, k)
    const int k_tiles = int(size<3>(gA_mk));
    const int tiles = params.tiles_m * params.tiles_n;
    auto coord_of = [&](int t) {
      const int m = t / params.tiles_n, n = t - m * params.tiles_n;
      return make_coord(idx2crd(m, shape<2>(gA_mk)), idx2crd(n, shape<2>(gB_nk)), _, Int<0>{});
    };
    __syncthreads();  // the pipelines' barriers are initialised

    if (producer) {
      cutlass::arch::warpgroup_reg_dealloc<kLoadRegisters>();
      if (load_warp) {
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
          collective_mainloop.load(params.mainloop, mainloop_pipeline, mainloop_producer, load_inputs, coord_of(t),
                                   make_coord_iterator(shape<3>(gA_mk)), k_tiles, lane_idx, 0u, shared.tensors.mainloop);
          mainloop_producer.advance(k_tiles);
        }
        collective_mainloop.load_tail(mainloop_pipeline, mainloop_producer);
      } else if (epi_load_warp && epi_load_needed) {
        for (int t = blockIdx.x; t < tiles; t += gridDim.x)
          epi_load_producer = collective_epilogue.load(epi_load_pipeline, epi_load_producer, problem_mnkl, blk_shape,
                                                       coord_of(t), tiled_mma, lane_idx, shared.tensors.epilogue);
        collective_epilogue.load_tail(epi_load_pipeline, epi_load_producer);
      }
    } else {
      cutlass::arch::warpgroup_reg_alloc<kMmaRegisters>();
      bool stored = false;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        auto accumulators = partition_fragment_C(tiled_mma, take<0, 2>(blk_shape));
        collective_mainloop.mma(mainloop_pipeline, mainloop_consumer, accumulators, k_tiles, mma_thread_idx,
                                shared.tensors.mainloop, params.mainloop);
        collective_mainloop.mma_tail(mainloop_pipeline, mainloop_consumer, k_tiles);
        mainloop_consumer.advance(k_tiles);
        auto [load_next, store_next] = collective_epilogue.store(
            epi_load_pipeline, epi_load_consumer, epi_store_pipeline, epi_store_producer, problem_mnkl, blk_shape,
            coord_of(t), accumulators, tiled_mma, mma_thread_idx, shared.tensors.epilogue);
        epi_load_consumer = load_next;
        epi_store_producer = store_next;
        stored = true;
      }
      if (stored)
        collective_epilogue.store_tail(epi_load_pipeline, epi_load_consumer, epi_store_pipeline, epi_store_producer);
    }
#else
    (void)params, (void)smem_buf;
#endif
  }
};

}  // namespace yolocu::engine::sm90
