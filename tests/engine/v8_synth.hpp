// Small synthetic YOLOv8-style heads for the fused-tail tests: an image input [N, 3, H, W], per
// level a 1x1 convolution of stride s for the box logits (4 * reg_max channels) and one for the
// class logits (nc channels), then the tail exactly as ultralytics' Detect exports it (the node
// list of the yolov8n / yolo11n exports: Reshape, Concat, DFL, Slice, the anchor arithmetic,
// Sigmoid, Concat), with the anchors and strides of ultralytics' make_anchors. Options alter one
// thing each, to check the matcher refuses it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_build.hpp"
#include "yolocu/model.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu::test {

struct SynthV8 {
  int64_t nc = 80, reg_max = 16;
  int64_t h = 64, w = 64;  // the input's size (any; levels get ceil(size / stride) cells)
  std::vector<int64_t> strides = {8, 16, 32};
  bool sigmoid = true;         // false: the class logits go to the output as they are
  bool split = false;          // lt / rb by one Split [2, 2] instead of two Slices
  bool concatenated = false;   // older exports: per level Concat(box, cls), one Split [64, nc]
  float anchor_offset = 0.5f;  // ultralytics: cell centres
  float dfl_bin3 = 3.f;        // the DFL projection's weight of bin 3 (0..15 in the real head)
  uint32_t seed = 1;
};

namespace synth_detail {

using test::int_attr;
using test::ints_attr;

inline Tensor int64s(const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data_as<int64_t>()[i] = v[i];
  return t;
}
// Uniform in [-a, a) from a fixed linear congruential generator.
inline Tensor weights(const Shape& s, uint32_t seed, float a) {
  Tensor t(DType::kFloat32, s);
  uint32_t v = seed;
  for (int64_t i = 0; i < t.numel(); ++i) {
    v = v * 1664525u + 1013904223u;
    t.data_as<float>()[i] = (static_cast<float>(v >> 8) / 16777216.f * 2.f - 1.f) * a;
  }
  return t;
}

}  // namespace synth_detail

inline std::shared_ptr<Model> synth_v8_head(const SynthV8& o) {
  using namespace synth_detail;
  Model m;
  m.ir_version = 8;
  m.opset = 17;
  ValueInfo in;
  in.name = "images";
  in.has_shape = true;
  in.dims = {Dim{-1, "batch"}, Dim{3, ""}, Dim{o.h, ""}, Dim{o.w, ""}};
  m.graph.inputs = {in};
  auto& inits = m.graph.initializers;
  auto add = [&](const std::string& op, std::vector<std::string> ins, const std::string& out,
                 std::map<std::string, Attribute> attrs = {}) {
    Node n;
    n.name = "/head/" + out;
    n.op_type = op;
    n.inputs = std::move(ins);
    n.outputs = {out};
    n.attributes = std::move(attrs);
    m.graph.nodes.push_back(std::move(n));
  };
  const int64_t box_c = 4 * o.reg_max;
  std::vector<std::string> boxes, classes, both;
  std::vector<float> ax, ay, st;
  uint32_t seed = o.seed;
  for (size_t l = 0; l < o.strides.size(); ++l) {
    const int64_t s = o.strides[l], ny = (o.h - 1) / s + 1, nx = (o.w - 1) / s + 1;
    const std::string L = std::to_string(l);
    for (int k = 0; k < 2; ++k) {
      const int64_t c = k == 0 ? box_c : o.nc;
      const std::string conv = (k == 0 ? "box" : "cls") + L;
      inits[conv + ".w"] = weights({c, 3, 1, 1}, seed++, k == 0 ? 3.f : 4.f);  // logits spread over a few units
      inits[conv + ".b"] = weights({c}, seed++, 2.f);
      add("Conv", {"images", conv + ".w", conv + ".b"}, conv,
          {{"kernel_shape", ints_attr({1, 1})}, {"strides", ints_attr({s, s})}, {"pads", ints_attr({0, 0, 0, 0})}});
      if (o.concatenated) continue;
      inits[conv + ".shape"] = int64s({0, c, -1});
      add("Reshape", {conv, conv + ".shape"}, conv + ".flat");
      (k == 0 ? boxes : classes).push_back(conv + ".flat");
    }
    if (o.concatenated) {
      add("Concat", {"box" + L, "cls" + L}, "level" + L, {{"axis", int_attr(1)}});
      inits["level" + L + ".shape"] = int64s({0, box_c + o.nc, -1});
      add("Reshape", {"level" + L, "level" + L + ".shape"}, "level" + L + ".flat");
      both.push_back("level" + L + ".flat");
    }
    for (int64_t y = 0; y < ny; ++y)
      for (int64_t x = 0; x < nx; ++x) {
        ax.push_back(static_cast<float>(x) + o.anchor_offset);
        ay.push_back(static_cast<float>(y) + o.anchor_offset);
        st.push_back(static_cast<float>(s));
      }
  }
  const int64_t a = static_cast<int64_t>(ax.size());
  if (o.concatenated) {
    add("Concat", both, "levels", {{"axis", int_attr(2)}});
    inits["box_cls"] = int64s({box_c, o.nc});
    Node n;
    n.name = "/head/split_box_cls";
    n.op_type = "Split";
    n.inputs = {"levels", "box_cls"};
    n.outputs = {"box", "cls"};
    n.attributes = {{"axis", int_attr(1)}};
    m.graph.nodes.push_back(std::move(n));
  } else {
    add("Concat", boxes, "box", {{"axis", int_attr(-1)}});
    add("Concat", classes, "cls", {{"axis", int_attr(-1)}});
  }
  inits["dfl.shape"] = int64s({0, 4, o.reg_max, -1});
  add("Reshape", {"box", "dfl.shape"}, "dfl.r");
  add("Transpose", {"dfl.r"}, "dfl.t", {{"perm", ints_attr({0, 2, 1, 3})}});
  add("Softmax", {"dfl.t"}, "dfl.p", {{"axis", int_attr(1)}});
  Tensor proj(DType::kFloat32, {1, o.reg_max, 1, 1});
  for (int64_t i = 0; i < o.reg_max; ++i) proj.data_as<float>()[i] = i == 3 ? o.dfl_bin3 : static_cast<float>(i);
  inits["dfl.w"] = proj;
  add("Conv", {"dfl.p", "dfl.w"}, "dfl.c", {{"kernel_shape", ints_attr({1, 1})}});
  inits["dist.shape"] = int64s({0, 4, -1});
  add("Reshape", {"dfl.c", "dist.shape"}, "dist");
  if (o.split) {
    inits["split"] = int64s({2, 2});
    Node n;
    n.name = "/head/split";
    n.op_type = "Split";
    n.inputs = {"dist", "split"};
    n.outputs = {"lt", "rb"};
    n.attributes = {{"axis", int_attr(1)}};
    m.graph.nodes.push_back(std::move(n));
  } else {
    inits["s0"] = int64s({0});
    inits["s2"] = int64s({2});
    inits["s4"] = int64s({4});
    inits["ax1"] = int64s({1});
    add("Slice", {"dist", "s0", "s2", "ax1"}, "lt");
    add("Slice", {"dist", "s2", "s4", "ax1"}, "rb");
  }
  Tensor anchors(DType::kFloat32, {1, 2, a}), strides(DType::kFloat32, {1, a});
  for (int64_t i = 0; i < a; ++i) {
    anchors.data_as<float>()[i] = ax[static_cast<size_t>(i)];
    anchors.data_as<float>()[a + i] = ay[static_cast<size_t>(i)];
    strides.data_as<float>()[i] = st[static_cast<size_t>(i)];
  }
  inits["anchors"] = anchors;
  inits["strides"] = strides;
  Tensor two(DType::kFloat32, {});
  two.data_as<float>()[0] = 2.f;
  inits["two"] = two;
  add("Sub", {"anchors", "lt"}, "x1y1");
  add("Add", {"anchors", "rb"}, "x2y2");
  add("Add", {"x1y1", "x2y2"}, "csum");
  add("Sub", {"x2y2", "x1y1"}, "wh");
  add("Div", {"csum", "two"}, "cxy");
  add("Concat", {"cxy", "wh"}, "xywh", {{"axis", int_attr(1)}});
  add("Mul", {"xywh", "strides"}, "dbox");
  if (o.sigmoid) add("Sigmoid", {"cls"}, "scores");
  add("Concat", {"dbox", o.sigmoid ? "scores" : "cls"}, "output0", {{"axis", int_attr(1)}});
  ValueInfo out;
  out.name = "output0";
  m.graph.outputs = {out};
  return std::make_shared<Model>(std::move(m));
}

}  // namespace yolocu::test
