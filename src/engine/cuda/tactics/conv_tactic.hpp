// A tactic = one way to run one fused convolution layer (conv -> + bias -> SiLU -> + residual) at
// one batch size. Every family offers its candidates for a ConvProblem and can re-create one of
// them from its cache identity; the tuner (tuner.hpp) checks each candidate against the reference
// convolution, times it and keeps the fastest. Families:
//   cudnn_legacy.cpp  "cudnn:<ALGO>"            cudnnConvolutionForward + yolocu's epilogue kernel
//   cudnn_graph.cpp   "cudnn-graph:e<id>;..."   one cuDNN Graph API (cudnn-frontend) fused kernel
//   own_conv.cpp      "own:igemm-bm<rows>"      yolocu's tensor-core implicit GEMM for small layers
//   own_dwconv.cpp    "own:dw-q<cols>r<rows>[w]"  yolocu's depthwise (group == c == k) stencil kernel
//   thin_conv.cpp     "own:thin-tw<width>"      yolocu's 3x3 kernel for layers of 8 to 32 input channels
//   cutlass_conv.cu   "cutlass:tb<M>x<N>x<K>-s<stages>"  CUTLASS implicit GEMM, epilogue fused
//                     (TacticLimits::cutlass; off by default: it won no layer on the H100)
//   packed_input.cpp  "packin:<inner id>"       a layer with a pitched input or residual (a channel
//                     view, ConvProblem::xp / rp): copies them packed into the workspace, then runs
//                     the inner tactic (any family's) on ConvProblem::packed_inputs()
// Pitched inputs: cudnn_legacy, cudnn_graph and own:thin read them natively (cuDNN may refuse some algorithms
// or engines); every other family offers nothing for them (a new family must refuse them too, or
// read them with their pitch), and the packin wrapper always works.
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/tactics/conv_problem.hpp"

namespace yolocu::engine {

// Device pointers of one launch: x NHWC, w KRSC (activation dtype), bias float32 [k] (null if the
// problem has none), residual NHWC like y (null if none), y NHWC, each with its pixel pitch
// (ConvProblem::x_pitch, r_pitch, y_pitch); ws: workspace of ws_bytes.
struct ConvBuffers {
  const void* x = nullptr;
  const void* w = nullptr;
  const float* bias = nullptr;
  const void* bias_act = nullptr;  // the same bias in the activation dtype (fp16 engines; the cutlass family reads it)
  const void* residual = nullptr;
  void* y = nullptr;
  void* ws = nullptr;
  size_t ws_bytes = 0;
};

class ConvTactic {
 public:
  virtual ~ConvTactic() = default;
  virtual const std::string& id() const = 0;    // cache identity, re-creatable by make_tactic
  virtual const std::string& name() const = 0;  // for people (profiles, logs)
  virtual size_t workspace() const = 0;         // bytes needed in ConvBuffers::ws
  virtual int kernels() const = 0;              // launches per run
  // Enqueues the layer on `stream` (capturable in a CUDA graph); throws yolocu::Error(kCuda).
  virtual void run(cudnnHandle_t cudnn, const ConvBuffers& b, cudaStream_t stream) const = 0;
  // The compiled plan as bytes that make_tactic(..., plan) restores without compiling it again
  // (the tactic cache stores them); false if the family has nothing worth keeping (its tactics
  // build fast). Not thread-safe with other calls on tactics of the same problem.
  virtual bool serialize_plan(std::vector<uint8_t>* out) const {
    (void)out;
    return false;
  }
  // True if this object was restored from serialised plan bytes (not compiled now).
  virtual bool restored_from_plan() const { return false; }
  // True if building this tactic compiles its kernel at runtime (a cuDNN runtime-fusion engine):
  // building the same id for another batch size costs another compilation, where the other
  // families' kernels and cuDNN's precompiled engines build at once.
  virtual bool compiled_at_runtime() const { return false; }
};
using TacticPtr = std::unique_ptr<ConvTactic>;

// The workspace an engine keeps at least (whatever its tuned tactics need), so that a derived batch
// size's tactic of up to this much fits: TunedLayer::plain candidates are held to it.
constexpr size_t kDerivedWorkspaceFloor = size_t{16} << 20;

struct TacticLimits {
  size_t workspace = size_t{256} << 20;  // candidates needing more are left out
  int max_graph_plans = 7;              // cudnn-graph candidates per problem, in heuristic order
  bool cutlass = false;                 // offer the cutlass family's candidates (CudaEngineOptions::cutlass_tactics)
  bool own_depthwise = true;            // offer the own:dw family's (CudaEngineOptions::own_depthwise_tactics)
  bool own_thin = true;                 // offer the own:thin family's (CudaEngineOptions::own_thin_tactics)
};

// Legacy cuDNN: every algorithm cuDNN supports for the problem (FP16: tensor-op math, no FFT; FP32:
// FMA math only, no FFT / Winograd: parity with the CPU engine).
std::vector<TacticPtr> cudnn_legacy_candidates(cudnnHandle_t cudnn, const ConvProblem& pb, const TacticLimits& lim);
// The reference of the correctness check: implicit GEMM, no workspace, deterministic.
TacticPtr cudnn_legacy_reference(cudnnHandle_t cudnn, const ConvProblem& pb);

// cuDNN Graph API through cudnn-frontend: conv_fprop -> add bias -> swish -> add residual as one
// operation graph; each engine config of heuristics A and FALLBACK that builds is a candidate.
// FP32 leaves out tensor-core, reduced-precision, Winograd, FFT and non-deterministic configs.
// cudnn_graph_candidates = the first lim.max_graph_plans configs of cudnn_graph_configs that
// make_cudnn_graph builds, in list order. cudnn_graph_configs: the ids of the heuristics' list
// (one query, no plan built), in order, duplicates dropped; a listed config may still be refused
// by its build (numeric notes, workspace). Each config builds on its own graph object, so several
// threads may build configs of one problem at once (each with its own cuDNN handle).
std::vector<TacticPtr> cudnn_graph_candidates(cudnnHandle_t cudnn, const ConvProblem& pb, const TacticLimits& lim);
std::vector<std::string> cudnn_graph_configs(cudnnHandle_t cudnn, const ConvProblem& pb, const TacticLimits& lim);

// yolocu's own kernel (own_conv_kernel.hpp): fp16, groups 1, c % 8 == 0, k % 16 == 0, k <= 64,
// r * s * c <= 320 (the space-to-depth stem and other small early layers).
std::vector<TacticPtr> own_conv_candidates(const ConvProblem& pb);

// yolocu's depthwise kernel (own_dwconv_kernel.hpp): group == c == k, fp16 or fp32, r and s <= 9,
// any stride, padding and dilation, bias / SiLU / residual fused, packed or pitched output, packed
// input and residual; one candidate per tile shape. Nothing unless lim.own_depthwise.
std::vector<TacticPtr> own_dwconv_candidates(const ConvProblem& pb, const TacticLimits& lim);
bool own_dwconv_shape_ok(const ConvProblem& pb);

// yolocu's thin 3x3 kernel (thin_conv_kernel.hpp): fp16, groups 1, 3x3, dilation 1, stride 1 or 2,
// c in {8, 16, 32}, k in {8, 16, 32, 64}, pitched x / residual / y read natively; one candidate per
// tile width (those wider than twice the output width left out). Nothing unless lim.own_thin.
std::vector<TacticPtr> thin_conv_candidates(const ConvProblem& pb, const TacticLimits& lim);
bool thin_conv_shape_ok(const ConvProblem& pb);

// CUTLASS's implicit-GEMM fprop (cutlass_conv.cu): fp16, groups 1, a bias, no residual, c, k and the
// output pitch multiples of 8; one candidate per instantiated tile shape that CUTLASS can run the
// problem with. Nothing unless lim.cutlass, or in a build without CUTLASS (cutlass_conv_available).
std::vector<TacticPtr> cutlass_conv_candidates(const ConvProblem& pb, const TacticLimits& lim);
bool cutlass_conv_shape_ok(const ConvProblem& pb);
bool cutlass_conv_available();

// The "packin" wrapper (packed_input.cpp) of `inner`, a tactic of pb.packed_inputs(): null if pb's
// inputs are packed or the copies and inner's workspace exceed lim.workspace. packin_copy_bytes:
// the workspace its copies take (aligned). make_packin: from the id "packin:<inner id>", the inner
// tactic built (or restored from `plan`) for pb.packed_inputs() within what the copies leave of
// lim.workspace. restore_tactic: only a restore from serialised plan bytes (restore_cudnn_graph, or
// a packin wrapper around one), never a compilation; null if the plan does not restore.
TacticPtr wrap_packin(const ConvProblem& pb, std::shared_ptr<const ConvTactic> inner, const TacticLimits& lim);
size_t packin_copy_bytes(const ConvProblem& pb);
TacticPtr make_packin(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id, const TacticLimits& lim,
                      const std::vector<uint8_t>* plan = nullptr);
TacticPtr restore_tactic(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id, const TacticLimits& lim,
                         const std::vector<uint8_t>& plan);

// Re-creates a tactic from its id (any family); null if the id is unknown or no longer supported.
// `plan` (optional): bytes of serialize_plan() for this id; restored if they still load, else the
// tactic is built from its id.
TacticPtr make_tactic(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id, const TacticLimits& lim,
                      const std::vector<uint8_t>* plan = nullptr);
TacticPtr make_cudnn_legacy(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id, const TacticLimits& lim);
TacticPtr make_cudnn_graph(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id, const TacticLimits& lim,
                           const std::vector<uint8_t>* plan = nullptr);
// Only the restore of make_cudnn_graph: null if `plan` does not deserialise or does not fit
// (never compiles the kernel).
TacticPtr restore_cudnn_graph(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id,
                              const TacticLimits& lim, const std::vector<uint8_t>& plan);
TacticPtr make_own_conv(const ConvProblem& pb, const std::string& id);
TacticPtr make_own_dwconv(const ConvProblem& pb, const std::string& id, const TacticLimits& lim);
TacticPtr make_thin_conv(const ConvProblem& pb, const std::string& id, const TacticLimits& lim);
TacticPtr make_cutlass_conv(const ConvProblem& pb, const std::string& id, const TacticLimits& lim);

}  // namespace yolocu::engine
