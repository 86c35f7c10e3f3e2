// Legacy cuDNN tactics: cudnnConvolutionForward with one algorithm, then yolocu's epilogue kernel
// y = act(y + bias) (+ residual) in place (two launches when the layer has an epilogue). A pitched
// output (a channel slice of a copy-free Concat) is written by the epilogue from a packed
// convolution result at the end of the workspace. A pitched input (a channel view) is described to
// cuDNN by its strides (algorithms that refuse them drop out); a pitched residual is read by the
// epilogue with its pitch.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"

namespace yolocu::engine {
namespace {

template <typename T, void (*Destroy)(T)>
struct Deleter {
  void operator()(std::remove_pointer_t<T>* p) const noexcept { Destroy(p); }
};
void destroy_tensor(cudnnTensorDescriptor_t d) { cudnnDestroyTensorDescriptor(d); }
void destroy_filter(cudnnFilterDescriptor_t d) { cudnnDestroyFilterDescriptor(d); }
void destroy_conv(cudnnConvolutionDescriptor_t d) { cudnnDestroyConvolutionDescriptor(d); }
using TensorDesc = std::unique_ptr<cudnnTensorStruct, Deleter<cudnnTensorDescriptor_t, destroy_tensor>>;
using FilterDesc = std::unique_ptr<cudnnFilterStruct, Deleter<cudnnFilterDescriptor_t, destroy_filter>>;
using ConvDesc = std::unique_ptr<cudnnConvolutionStruct, Deleter<cudnnConvolutionDescriptor_t, destroy_conv>>;

struct AlgoName {
  cudnnConvolutionFwdAlgo_t algo;
  const char* name;
};
constexpr AlgoName kAlgos[] = {
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "IMPLICIT_GEMM"},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, "IMPLICIT_PRECOMP_GEMM"},
    {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "GEMM"},
    {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, "DIRECT"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT, "FFT"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, "FFT_TILING"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, "WINOGRAD"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, "WINOGRAD_NONFUSED"},
};

bool allowed(cudnnConvolutionFwdAlgo_t a, bool half) {
  if (a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING) return false;
  if (!half && (a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED))
    return false;
  return true;
}

class LegacyTactic final : public ConvTactic {
 public:
  // Returns null if cuDNN does not support `algo` for the problem within the workspace limit.
  static TacticPtr create(cudnnHandle_t h, const ConvProblem& pb, cudnnConvolutionFwdAlgo_t algo, const char* algo_name,
                          size_t ws_limit) {
    auto t = std::unique_ptr<LegacyTactic>(new LegacyTactic(pb));
    const cudnnDataType_t dt = pb.half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t c = nullptr;
    YOLOCU_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    t->x_.reset(x);
    YOLOCU_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    t->y_.reset(y);
    YOLOCU_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    t->w_.reset(w);
    YOLOCU_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&c));
    t->conv_.reset(c);
    const int xp = pb.x_pitch();
    if (cudnnSetTensor4dDescriptorEx(x, dt, pb.n, pb.c, pb.h, pb.w, pb.h * pb.w * xp, 1, pb.w * xp, xp) !=
        CUDNN_STATUS_SUCCESS)
      return nullptr;
    YOLOCU_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, dt, pb.n, pb.k, pb.p, pb.q));
    YOLOCU_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, dt, CUDNN_TENSOR_NHWC, pb.k, pb.c / pb.group, pb.r, pb.s));
    YOLOCU_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(c, pb.pad_h, pb.pad_w, pb.str_h, pb.str_w, pb.dil_h, pb.dil_w,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    YOLOCU_CUDNN_CHECK(cudnnSetConvolutionGroupCount(c, pb.group));
    YOLOCU_CUDNN_CHECK(cudnnSetConvolutionMathType(c, pb.half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    int on = 0, oc = 0, oh = 0, ow = 0;
    YOLOCU_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(c, x, w, &on, &oc, &oh, &ow));
    YOLOCU_CHECK(on == pb.n && oc == pb.k && oh == pb.p && ow == pb.q, kInternal, "conv ", pb.signature(),
                 ": cuDNN output ", on, "x", oc, "x", oh, "x", ow, " differs from the plan's");
    size_t need = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(h, x, w, c, y, algo, &need) != CUDNN_STATUS_SUCCESS) return nullptr;
    t->algo_ = algo;
    t->conv_ws_ = need;
    if (!pb.y_packed()) {
      t->tmp_at_ = (need + 255) / 256 * 256;
      need = t->tmp_at_ + static_cast<size_t>(pb.n) * pb.p * pb.q * pb.k * (pb.half ? 2 : 4);
    }
    if (need > ws_limit) return nullptr;
    t->ws_ = need;
    t->id_ = std::string("cudnn:") + algo_name;
    t->name_ = std::string("cudnn ") + algo_name + (t->epilogue() ? " + epilogue" : "");
    return t;
  }

  const std::string& id() const override { return id_; }
  const std::string& name() const override { return name_; }
  size_t workspace() const override { return ws_; }
  int kernels() const override { return epilogue() ? 2 : 1; }

  void run(cudnnHandle_t h, const ConvBuffers& b, cudaStream_t s) const override {
    const float one = 1.f, zero = 0.f;
    YOLOCU_CUDNN_CHECK(cudnnSetStream(h, s));
    YOLOCU_CHECK(b.ws_bytes >= ws_ && (ws_ == 0 || b.ws), kInternal, "conv ", pb_.signature(), ": workspace of ",
                 b.ws_bytes, " bytes, needs ", ws_);
    void* conv_y = pb_.y_packed() ? b.y : static_cast<uint8_t*>(b.ws) + tmp_at_;
    YOLOCU_CUDNN_CHECK(cudnnConvolutionForward(h, &one, x_.get(), b.x, w_.get(), b.w, conv_.get(), algo_, b.ws,
                                               conv_ws_, &zero, y_.get(), conv_y));
    if (epilogue())
      cuda_kernels::bias_act_nhwc_to(conv_y, b.y, pb_.y_pitch(), pb_.bias ? b.bias : nullptr,
                                     pb_.residual ? b.residual : nullptr, pb_.r_pitch(), pb_.half,
                                     int64_t{pb_.n} * pb_.p * pb_.q, pb_.k, pb_.silu, s);
  }

 private:
  explicit LegacyTactic(const ConvProblem& pb) : pb_(pb) {}
  bool epilogue() const { return pb_.bias || pb_.silu || pb_.residual || !pb_.y_packed(); }
  ConvProblem pb_;
  TensorDesc x_, y_;
  FilterDesc w_;
  ConvDesc conv_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t ws_ = 0;       // all of it: the convolution's workspace, then the packed result if pitched
  size_t conv_ws_ = 0;  // cuDNN's part
  size_t tmp_at_ = 0;   // offset of the packed result (pitched outputs)
  std::string id_, name_;
};

}  // namespace

std::vector<TacticPtr> cudnn_legacy_candidates(cudnnHandle_t cudnn, const ConvProblem& pb, const TacticLimits& lim) {
  std::vector<TacticPtr> out;
  for (const AlgoName& a : kAlgos) {
    if (!allowed(a.algo, pb.half)) continue;
    if (TacticPtr t = LegacyTactic::create(cudnn, pb, a.algo, a.name, lim.workspace)) out.push_back(std::move(t));
  }
  return out;
}

TacticPtr cudnn_legacy_reference(cudnnHandle_t cudnn, const ConvProblem& pb) {
  TacticPtr t = LegacyTactic::create(cudnn, pb, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "IMPLICIT_GEMM", 0);
  YOLOCU_CHECK(t, kUnsupported, "conv ", pb.signature(), ": cuDNN's implicit GEMM does not support it");
  return t;
}

TacticPtr make_cudnn_legacy(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id, const TacticLimits& lim) {
  for (const AlgoName& a : kAlgos)
    if (id == std::string("cudnn:") + a.name)
      return allowed(a.algo, pb.half) ? LegacyTactic::create(cudnn, pb, a.algo, a.name, lim.workspace) : nullptr;
  return nullptr;
}

}  // namespace yolocu::engine
