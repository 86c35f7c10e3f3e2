// The "own:thin" tactic family: yolocu's thin 3x3 convolution (thin_conv_kernel.cu) for fp16 layers
// with 8, 16 or 32 input and 8 to 64 output channels, stride 1 or 2, epilogue fused; it reads
// pitched inputs, residuals and outputs (channel views) natively. One candidate per output tile
// width. Ids: "own:thin-tw<width>".
#include <string>

#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/thin_conv_kernel.hpp"

namespace yolocu::engine {
namespace {

ThinConvArgs args_of(const ConvProblem& pb) {
  ThinConvArgs a;
  a.n = pb.n;
  a.c = pb.c;
  a.h = pb.h;
  a.w_ = pb.w;
  a.k = pb.k;
  a.p = pb.p;
  a.q = pb.q;
  a.pad_h = pb.pad_h;
  a.pad_w = pb.pad_w;
  a.stride = pb.str_h;
  a.x_pitch = pb.x_pitch();
  a.y_pitch = pb.y_pitch();
  a.r_pitch = pb.r_pitch();
  a.silu = pb.silu;
  return a;
}

std::string id_of(int tw) { return "own:thin-tw" + std::to_string(tw); }

class ThinTactic final : public ConvTactic {
 public:
  ThinTactic(const ConvProblem& pb, int tw) : pb_(pb), tw_(tw), id_(id_of(tw)) {
    name_ = "yolocu thin 3x3 " + std::to_string(128 / tw) + "x" + std::to_string(tw) + " tiles";
    blocks_ = thin_conv_prepare(args_of(pb), tw);
  }
  const std::string& id() const override { return id_; }
  const std::string& name() const override { return name_; }
  size_t workspace() const override { return 0; }
  int kernels() const override { return 1; }
  void run(cudnnHandle_t, const ConvBuffers& b, cudaStream_t s) const override {
    ThinConvArgs a = args_of(pb_);
    a.x = b.x;
    a.w = b.w;
    a.bias = pb_.bias ? b.bias : nullptr;
    a.residual = pb_.residual ? b.residual : nullptr;
    a.y = b.y;
    thin_conv_run(a, tw_, blocks_, s);
  }

 private:
  ConvProblem pb_;
  int tw_, blocks_ = 1;
  std::string id_, name_;
};

}  // namespace

bool thin_conv_shape_ok(const ConvProblem& pb) {
  return pb.half && pb.group == 1 && pb.r == 3 && pb.s == 3 && pb.dil_h == 1 && pb.dil_w == 1 &&
         pb.str_h == pb.str_w && thin_conv_unsupported(args_of(pb)).empty();
}

std::vector<TacticPtr> thin_conv_candidates(const ConvProblem& pb, const TacticLimits& lim) {
  std::vector<TacticPtr> out;
  if (!lim.own_thin || !thin_conv_shape_ok(pb)) return out;
  for (int tw : kThinTileWidths)
    if (tw <= 2 * pb.q || tw == kThinTileWidths[0]) out.push_back(std::make_unique<ThinTactic>(pb, tw));
  return out;
}

TacticPtr make_thin_conv(const ConvProblem& pb, const std::string& id, const TacticLimits& lim) {
  if (!lim.own_thin || !thin_conv_shape_ok(pb)) return nullptr;
  for (int tw : kThinTileWidths)
    if (id == id_of(tw)) return std::make_unique<ThinTactic>(pb, tw);
  return nullptr;
}

}  // namespace yolocu::engine
