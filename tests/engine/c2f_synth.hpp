// A small synthetic YOLOv8 C2f block for the channel-view tests, node for node as ultralytics
// exports it: images [N, 3, H, W] -> stem (3x3 conv, SiLU) -> cv1 (1x1 conv to 2c, SiLU) -> Split
// [c, c] -> n bottlenecks (two 3x3 convs with SiLU, the shortcut Add(x, cv2(cv1(x))) when
// `shortcut`) -> Concat(y0, y1, m0, ..., m(n-1)) -> cv2 (1x1 conv, SiLU) -> output. SiLU is
// Sigmoid + Mul, as the exports write it; weights from a fixed generator.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_build.hpp"
#include "engine/v8_synth.hpp"
#include "yolocu/model.hpp"

namespace yolocu::test {

struct SynthC2f {
  int64_t n = 1;            // bottlenecks
  bool shortcut = true;     // the bottlenecks' residual Add
  int64_t c_in = 32, c = 16, c_out = 32;  // stem channels, hidden channels (each half of cv1), output
  int64_t h = 40, w = 40;
  uint32_t seed = 7;
};

inline std::shared_ptr<Model> synth_c2f(const SynthC2f& o) {
  using synth_detail::int64s;
  using synth_detail::weights;
  Model m;
  m.ir_version = 8;
  m.opset = 17;
  ValueInfo in;
  in.name = "images";
  in.has_shape = true;
  in.dims = {Dim{-1, "batch"}, Dim{3, ""}, Dim{o.h, ""}, Dim{o.w, ""}};
  m.graph.inputs = {in};
  auto& inits = m.graph.initializers;
  uint32_t seed = o.seed;
  auto add = [&](const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
                 std::map<std::string, Attribute> attrs = {}) {
    Node nd;
    nd.name = "/c2f/" + outs[0];
    nd.op_type = op;
    nd.inputs = std::move(ins);
    nd.outputs = std::move(outs);
    nd.attributes = std::move(attrs);
    m.graph.nodes.push_back(std::move(nd));
  };
  // Conv k x k (stride 1, "same" padding) + SiLU; returns the SiLU's output.
  auto conv = [&](const std::string& name, const std::string& x, int64_t ci, int64_t co, int64_t k) {
    const float a = 1.5f / static_cast<float>(ci * k * k);
    inits[name + ".w"] = weights({co, ci, k, k}, seed++, std::sqrt(3.f * a));
    inits[name + ".b"] = weights({co}, seed++, 0.1f);
    const int64_t p = k / 2;
    add("Conv", {x, name + ".w", name + ".b"}, {name + "_conv"},
        {{"kernel_shape", ints_attr({k, k})}, {"pads", ints_attr({p, p, p, p})}, {"strides", ints_attr({1, 1})}});
    add("Sigmoid", {name + "_conv"}, {name + "_sig"});
    add("Mul", {name + "_conv", name + "_sig"}, {name});
    return name;
  };
  const std::string stem = conv("stem", "images", 3, o.c_in, 3);
  const std::string cv1 = conv("cv1", stem, o.c_in, 2 * o.c, 1);
  inits["split_sizes"] = int64s({o.c, o.c});
  add("Split", {cv1, "split_sizes"}, {"y0", "y1"}, {{"axis", int_attr(1)}});
  std::vector<std::string> cat = {"y0", "y1"};
  std::string x = "y1";
  for (int64_t i = 0; i < o.n; ++i) {
    const std::string b = "m" + std::to_string(i);
    const std::string a = conv(b + ".cv1", x, o.c, o.c, 3);
    std::string y = conv(b + ".cv2", a, o.c, o.c, 3);
    if (o.shortcut) {
      add("Add", {x, y}, {b + "_add"});
      y = b + "_add";
    }
    cat.push_back(y);
    x = y;
  }
  add("Concat", cat, {"cat"}, {{"axis", int_attr(1)}});
  const std::string out = conv("cv2", "cat", (2 + o.n) * o.c, o.c_out, 1);
  ValueInfo ov;
  ov.name = out;
  m.graph.outputs = {ov};
  return std::make_shared<Model>(std::move(m));
}

}  // namespace yolocu::test
