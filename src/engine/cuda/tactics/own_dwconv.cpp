// The "own:dw" tactic family: yolocu's depthwise convolution (own_dwconv_kernel.cu) for layers whose
// groups are their channels (group == c == k), fp16 or fp32, epilogue fused; one candidate per tile
// shape. Ids: "own:dw-q<cols>r<rows>[w]" (DwTile: output columns per thread, rows per block, "w": the
// register window of 3x3 stride-1 layers).
#include <string>

#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/own_dwconv_kernel.hpp"

namespace yolocu::engine {
namespace {

// 8 rows of single pixels (most threads, short rows), 8 rows of pairs, 4 rows of quadruples (fewer
// weight loads per output, longer rows); 4 rows of adjacent quadruples with a register window
// (3x3 stride 1: each input vector loaded and converted once per filter row, not three times)
constexpr DwTile kTiles[] = {{1, 8, false}, {2, 8, false}, {4, 4, false}, {4, 4, true}};

DwConvArgs args_of(const ConvProblem& pb) {
  DwConvArgs a;
  a.n = pb.n;
  a.c = pb.c;
  a.h = pb.h;
  a.w_ = pb.w;
  a.r = pb.r;
  a.s = pb.s;
  a.p = pb.p;
  a.q = pb.q;
  a.y_pitch = pb.y_pitch();
  a.pad_h = pb.pad_h;
  a.pad_w = pb.pad_w;
  a.str_h = pb.str_h;
  a.str_w = pb.str_w;
  a.dil_h = pb.dil_h;
  a.dil_w = pb.dil_w;
  a.half = pb.half;
  a.silu = pb.silu;
  return a;
}

std::string id_of(const DwTile& t) {
  return "own:dw-q" + std::to_string(t.cols) + "r" + std::to_string(t.rows) + (t.window ? "w" : "");
}

class DwTactic final : public ConvTactic {
 public:
  DwTactic(const ConvProblem& pb, const DwTile& t) : pb_(pb), tile_(t), id_(id_of(t)) {
    name_ = "yolocu depthwise " + std::to_string(pb.r) + "x" + std::to_string(pb.s) + " s" +
            std::to_string(pb.str_h) + " q" + std::to_string(t.cols) + "r" + std::to_string(t.rows) +
            (t.window ? " window" : "");
  }
  const std::string& id() const override { return id_; }
  const std::string& name() const override { return name_; }
  size_t workspace() const override { return 0; }
  int kernels() const override { return 1; }
  void run(cudnnHandle_t, const ConvBuffers& b, cudaStream_t s) const override {
    DwConvArgs a = args_of(pb_);
    a.x = b.x;
    a.w = b.w;
    a.bias = pb_.bias ? b.bias : nullptr;
    a.residual = pb_.residual ? b.residual : nullptr;
    a.y = b.y;
    dwconv_run(a, tile_, s);
  }

 private:
  ConvProblem pb_;
  DwTile tile_;
  std::string id_, name_;
};

}  // namespace

bool own_dwconv_shape_ok(const ConvProblem& pb) {
  // packed x and residual only (a channel view runs through the packin wrapper)
  return pb.group == pb.c && pb.k == pb.c && pb.inputs_packed() && dwconv_unsupported(args_of(pb)).empty();
}

std::vector<TacticPtr> own_dwconv_candidates(const ConvProblem& pb, const TacticLimits& lim) {
  std::vector<TacticPtr> out;
  if (!lim.own_depthwise || !own_dwconv_shape_ok(pb)) return out;
  for (const DwTile& t : kTiles)
    if (!t.window || dwconv_window_ok(args_of(pb))) out.push_back(std::make_unique<DwTactic>(pb, t));
  return out;
}

TacticPtr make_own_dwconv(const ConvProblem& pb, const std::string& id, const TacticLimits& lim) {
  if (!lim.own_depthwise || !own_dwconv_shape_ok(pb)) return nullptr;
  for (const DwTile& t : kTiles)
    if (id == id_of(t)) {
      if (t.window && !dwconv_window_ok(args_of(pb))) return nullptr;
      return std::make_unique<DwTactic>(pb, t);
    }
  return nullptr;
}

}  // namespace yolocu::engine
