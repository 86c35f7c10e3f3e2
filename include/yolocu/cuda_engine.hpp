// yolocu/cuda_engine.hpp - runs a loaded model on one NVIDIA GPU (cuDNN + yolocu kernels), FP32 or
// FP16, without TensorRT. Only in CUDA builds (YOLOCU_WITH_CUDA).
//
// Build (constructor, ~0.5-2 s): shape inference and constant folding for {max_batch, 3, H, W},
// layouts (NHWC activations), Conv+bias+SiLU(+residual Add) fusion, weights converted and uploaded
// once, cuDNN algorithms chosen by timing, one activation arena planned by liveness, one shared
// cuDNN workspace. Every device allocation happens here.
//
// run() enqueues one forward pass on the caller's stream: no allocation, no synchronisation (after
// the first run of a batch size, which captures that size's CUDA graph). Outputs live in the
// engine's memory, are float32 row-major in the model's output shapes (batch = the run's batch),
// and stay valid until the next run on this engine.
//
// Threads: one CudaEngine is ONE execution context: do not call run()/run_host()/profile() on the
// same engine from several threads at once. Several engines (sharing one Model) may run
// concurrently on different streams. The only process-wide state is a mutex-protected cache of
// the chosen convolution algorithms (per device, shape and precision), so that every engine of a
// model computes bit-identical results and only the first build times the candidates.
#pragma once

#if defined(YOLOCU_WITH_CUDA)

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "yolocu/detector.hpp"
#include "yolocu/model.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu {

struct CudaEngineOptions {
  int device = 0;
  Precision precision = Precision::kFloat16;  // kFloat32: no TF32 (bit-comparable to the CPU engine)
  int max_batch = 1;
  int height = 0, width = 0;                  // 0 = the model's static size, else 640
  size_t workspace_limit = size_t{256} << 20; // cuDNN workspace considered when choosing algorithms
  bool cuda_graphs = true;                    // replay one captured graph per batch size
  // Run the Detect head's tail (reshape, transpose, sigmoid, grid/anchor arithmetic, concats) as
  // one kernel per level reading the head convolutions' NHWC output, instead of ~12 generic passes
  // per level. Off by default until it has run on a GPU: its math and indexing are tested on the
  // CPU (tests/engine/test_detect_tail.cpp), the kernel by test_cuda_engine on the next GPU run.
  bool fuse_detect_tail = false;
};

struct CudaEngineStats {
  double build_ms = 0;
  size_t activation_bytes = 0;  // arena with liveness reuse
  size_t naive_bytes = 0;       // one buffer per value
  size_t weight_bytes = 0;      // weights + biases + constants on the device
  size_t workspace_bytes = 0;   // shared cuDNN workspace
  int kernels_per_run = 0;      // launches per forward (conv + epilogue count as 2)
  int steps = 0;                // engine steps per forward
  int fused_convs = 0;          // convolutions with bias + SiLU fused into their epilogue
  int fused_residuals = 0;      // residual Adds fused into a conv epilogue
  int fused_tail_nodes = 0;     // Detect-tail nodes replaced by the fused tail kernels
  int convs = 0;
  double conv_flops_per_image = 0;  // 2 * MACs of all convolutions for one image
};

struct LayerTime {
  std::string name;  // node name (or "x -> nchw" for layout conversions)
  std::string kind;  // step kind: Conv, ConcatNhwc, Gather, ...
  double ms = 0;     // mean device time per run
};

class CudaEngine {
 public:
  // Throws yolocu::Error: kInvalidArgument (options), kUnsupported (ops, shapes), kCuda (no device,
  // CUDA/cuDNN failures), kOutOfMemory.
  CudaEngine(std::shared_ptr<const Model> model, const CudaEngineOptions& options);
  ~CudaEngine();
  CudaEngine(const CudaEngine&) = delete;
  CudaEngine& operator=(const CudaEngine&) = delete;

  // d_input: device memory, NCHW planar batch x C x H x W (C = the model's, 3), dtype float32 for
  // kFloat32 engines, float16 for kFloat16 engines; 1 <= batch <= max_batch. Enqueues on `stream`
  // (any stream of the engine's device, the legacy default stream included).
  void run(const void* d_input, int batch, cudaStream_t stream);

  int num_outputs() const;
  const void* output(int i) const;        // device pointer, valid until the next run
  DType output_dtype(int i) const;        // always kFloat32
  Shape output_shape(int i, int batch) const;
  std::string output_name(int i) const;
  Shape input_shape(int batch) const;     // {batch, C, H, W}
  DType input_dtype() const;              // kFloat32 or kFloat16 (the precision)

  // Convenience for tests and the CLI: host tensors in (float32; float16 also accepted), copied to
  // the device, run on the engine's own stream, synchronised, outputs copied back as float32.
  std::vector<Tensor> run_host(const std::vector<Tensor>& inputs);

  // Mean device time of each step over `iters` eager runs (events around every step, no graph).
  // Synchronises. Input: whatever the engine's input buffer holds (zeros, or the last run_host).
  std::vector<LayerTime> profile(int batch, int iters);

  CudaEngineStats stats() const;
  const CudaEngineOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace yolocu

#endif  // YOLOCU_WITH_CUDA
