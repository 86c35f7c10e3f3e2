// The "own" tactic family: yolocu's tensor-core implicit GEMM (own_conv_kernel.cu) for fp16 layers
// with a small reduction (r * s * c <= 320) and at most 64 output channels, epilogue fused; one
// candidate per block height (64 or 128 output pixels). Ids: "own:igemm-bm64", "own:igemm-bm128".
#include <string>

#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/own_conv_kernel.hpp"

namespace yolocu::engine {
namespace {

constexpr int kBlockRows[] = {64, 128};
constexpr size_t kMaxSmem = size_t{160} << 10;

OwnConvArgs args_of(const ConvProblem& pb) {
  OwnConvArgs a;
  a.n = pb.n;
  a.c = pb.c;
  a.h = pb.h;
  a.w_ = pb.w;
  a.k = pb.k;
  a.r = pb.r;
  a.s = pb.s;
  a.p = pb.p;
  a.q = pb.q;
  a.pad_h = pb.pad_h;
  a.pad_w = pb.pad_w;
  a.str_h = pb.str_h;
  a.str_w = pb.str_w;
  a.dil_h = pb.dil_h;
  a.dil_w = pb.dil_w;
  a.silu = pb.silu;
  a.y_pitch = pb.y_pitch();
  return a;
}

bool supported(const ConvProblem& pb, int bm) {
  if (!pb.half || pb.group != 1 || !pb.inputs_packed()) return false;  // packed x and residual only
  const OwnConvArgs a = args_of(pb);
  return own_conv_supports(a) && own_conv_smem(a, bm) <= kMaxSmem;
}

class OwnTactic final : public ConvTactic {
 public:
  OwnTactic(const ConvProblem& pb, int bm) : pb_(pb), bm_(bm) {
    id_ = "own:igemm-bm" + std::to_string(bm);
    name_ = "yolocu igemm " + std::to_string(bm) + "x" + std::to_string(pb.k);
    own_conv_prepare(args_of(pb), bm);
  }
  const std::string& id() const override { return id_; }
  const std::string& name() const override { return name_; }
  size_t workspace() const override { return 0; }
  int kernels() const override { return 1; }
  void run(cudnnHandle_t, const ConvBuffers& b, cudaStream_t s) const override {
    OwnConvArgs a = args_of(pb_);
    a.x = b.x;
    a.w = b.w;
    a.bias = pb_.bias ? b.bias : nullptr;
    a.residual = pb_.residual ? b.residual : nullptr;
    a.y = b.y;
    own_conv_run(a, bm_, s);
  }

 private:
  ConvProblem pb_;
  int bm_;
  std::string id_, name_;
};

}  // namespace

std::vector<TacticPtr> own_conv_candidates(const ConvProblem& pb) {
  std::vector<TacticPtr> out;
  for (int bm : kBlockRows)
    if (supported(pb, bm)) out.push_back(std::make_unique<OwnTactic>(pb, bm));
  return out;
}

TacticPtr make_own_conv(const ConvProblem& pb, const std::string& id) {
  for (int bm : kBlockRows)
    if (id == "own:igemm-bm" + std::to_string(bm)) return supported(pb, bm) ? std::make_unique<OwnTactic>(pb, bm) : nullptr;
  return nullptr;
}

}  // namespace yolocu::engine
