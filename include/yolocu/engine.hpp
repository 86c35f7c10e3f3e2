// yolocu/engine.hpp - runs a loaded model on the CPU (FP32, multithreaded).
//
// CpuEngine executes the IR of yolocu/model.hpp: shapes are inferred and constant subgraphs folded
// once per distinct set of input shapes ("prepare"), convolutions run on oneDNN with bias and SiLU
// fused, and activations live in one arena planned by liveness. Thread safety: run() may be called
// from several threads; calls on one engine are serialised (use one engine per thread, sharing the
// Model through the shared_ptr, for parallel CPU inference).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "yolocu/model.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu {

struct Int8Calibration;  // yolocu/int8.hpp

struct CpuEngineOptions {
  int num_threads = 0;  // 0: all cores (OpenMP default)
  // Run the tail of ultralytics' Detect head (reshape, transpose, sigmoid, grid/anchor arithmetic,
  // concatenations) as one step reading the head convolutions directly; the same float operations
  // in the same order. Off: node by node, as the graph says (for comparisons).
  bool fuse_detect_head = true;
  // Memory budget in bytes for one prepared input shape (0: default_max_memory()): every tensor the
  // model declares or folds, all folded constants together, and the activation arena must fit in
  // it. Checked from the inferred shapes before allocating; kOutOfMemory names what does not fit.
  uint64_t max_memory = 0;
  // Simulated INT8 (yolocu/int8.hpp, docs/int8.md): every convolution the calibration does not keep
  // in float reads its input quantised -> dequantised with the input tensor's scale and uses its
  // weights quantised -> dequantised per output channel; the arithmetic stays float. The
  // calibration must name every convolution of the model (kInvalidArgument at prepare naming the
  // first it lacks). null: FP32.
  std::shared_ptr<const Int8Calibration> int8;
};

// The default memory budget: the machine's physical memory (16 GiB where it cannot be read).
uint64_t default_max_memory();

struct EngineStats {
  int runtime_nodes = 0;  // nodes executed per run after folding and fusion
  int folded_nodes = 0;   // nodes evaluated once at prepare time
  int fused_nodes = 0;    // nodes merged into another step (SiLU into convolutions, Detect tails)
  size_t arena_bytes = 0;     // activation memory with liveness reuse
  size_t naive_bytes = 0;     // activation memory with one buffer per value
  size_t weight_bytes = 0;    // convolution weights in oneDNN's preferred layout
  double prepare_ms = 0;
};

class CpuEngine {
 public:
  explicit CpuEngine(std::shared_ptr<const Model> model, const CpuEngineOptions& options = {});
  ~CpuEngine();
  CpuEngine(const CpuEngine&) = delete;
  CpuEngine& operator=(const CpuEngine&) = delete;

  // Runs the model. Inputs in model order with the declared dtypes (fp16 models take and return
  // fp16 tensors); symbolic dims may take any size, static dims must match. Returns the outputs in
  // model order. Throws yolocu::Error (kInvalidArgument naming the input) on a mismatch.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  // run() that also hands intermediate tensors to `observe(index into names, tensor)` right after
  // the step that writes each one (a plain NCHW tensor, valid during the call only). `names` are
  // tensor names of the model the engine keeps in a buffer of its own: graph inputs, the outputs of
  // its steps (a convolution's fused SiLU / residual Add output, not the raw convolution it
  // absorbed). kInvalidArgument naming the first name the prepared plan does not hold.
  std::vector<Tensor> run_observed(const std::vector<Tensor>& inputs, const std::vector<std::string>& names,
                                   const std::function<void(size_t, const Tensor&)>& observe);

  // Builds the execution plan for these input shapes now instead of on the first run().
  void prepare(const std::vector<Shape>& input_shapes);

  // Statistics of the most recently prepared shapes.
  EngineStats stats() const;
  const Model& model() const;

 private:
  using Observer = std::function<void(size_t, const Tensor&)>;
  std::vector<Tensor> run_locked(const std::vector<Tensor>& inputs, const std::vector<std::string>* names,
                                 const Observer* observe);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace yolocu
