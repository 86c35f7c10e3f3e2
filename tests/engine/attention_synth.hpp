// Small synthetic C2PSA attention blocks for the fused-attention tests: an input [B, C, H, W], the
// qkv 1x1 convolution, then the attention exactly as ultralytics' Attention exports it (the node
// list of the yolo11n export: Reshape, Split, Mul by the scale, Transpose, MatMul, Softmax,
// Transpose, MatMul, Reshape; v reshaped for pe), pe (3x3 depthwise) added, the proj 1x1
// convolution as the output. Options alter one thing each, to check the matcher refuses it.
#pragma once

#include <cmath>
#include <memory>
#include <string>

#include "engine/v8_synth.hpp"  // synth_detail: attributes, int64 constants, weights

namespace yolocu::test {

struct SynthAttention {
  int64_t channels = 32;  // C: the input's and the output's channels
  int64_t heads = 2, key_dim = 8, head_dim = 16;
  int64_t h = 5, w = 7;    // N = h * w tokens
  bool scale_after = false;  // the Mul on q^T k (the module's form) instead of on q (the export's)
  float scale = 0;           // 0: key_dim ** -0.5
  int64_t softmax_axis = -1;
  bool swap_scores = false;  // MatMul(k, q^T) instead of MatMul(q^T, k) (needs kd == N to be valid)
  bool pe = true;            // v also reshaped for pe (a 3x3 depthwise convolution added to x)
  uint32_t seed = 11;
};

inline std::shared_ptr<Model> synth_attention(const SynthAttention& o) {
  using namespace synth_detail;
  Model m;
  m.ir_version = 8;
  m.opset = 17;
  ValueInfo in;
  in.name = "images";
  in.has_shape = true;
  in.dims = {Dim{-1, "batch"}, Dim{o.channels, ""}, Dim{o.h, ""}, Dim{o.w, ""}};
  m.graph.inputs = {in};
  auto& inits = m.graph.initializers;
  auto add = [&](const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
                 std::map<std::string, Attribute> attrs = {}) {
    Node n;
    n.name = "/attn/" + outs[0];
    n.op_type = op;
    n.inputs = std::move(ins);
    n.outputs = std::move(outs);
    n.attributes = std::move(attrs);
    m.graph.nodes.push_back(std::move(n));
  };
  const int64_t per_head = 2 * o.key_dim + o.head_dim, qkv_c = o.heads * per_head, c = o.heads * o.head_dim;
  const int64_t n = o.h * o.w;
  uint32_t seed = o.seed;
  inits["qkv.w"] = weights({qkv_c, o.channels, 1, 1}, seed++, 0.5f);
  inits["qkv.b"] = weights({qkv_c}, seed++, 0.5f);
  add("Conv", {"images", "qkv.w", "qkv.b"}, {"qkv"}, {{"kernel_shape", ints_attr({1, 1})}});
  inits["heads.shape"] = int64s({-1, o.heads, per_head, n});  // the export's constant has the batch
  add("Reshape", {"qkv", "heads.shape"}, {"qkv.r"});
  inits["split"] = int64s({o.key_dim, o.key_dim, o.head_dim});
  add("Split", {"qkv.r", "split"}, {"q", "k", "v"}, {{"axis", int_attr(2)}});
  Tensor scale(DType::kFloat32, {});
  scale.data_as<float>()[0] = o.scale != 0 ? o.scale : static_cast<float>(std::pow(static_cast<double>(o.key_dim), -0.5));
  inits["scale"] = scale;
  const std::map<std::string, Attribute> swap = {{"perm", ints_attr({0, 1, 3, 2})}};
  if (o.scale_after) {
    add("Transpose", {"q"}, {"qt"}, swap);
  } else {
    add("Mul", {"q", "scale"}, {"qs"});
    add("Transpose", {"qs"}, {"qt"}, swap);
  }
  add("MatMul", o.swap_scores ? std::vector<std::string>{"k", "qt"} : std::vector<std::string>{"qt", "k"}, {"s"});
  if (o.scale_after) add("Mul", {"s", "scale"}, {"ss"});
  add("Softmax", {o.scale_after ? "ss" : "s"}, {"p"}, {{"axis", int_attr(o.softmax_axis)}});
  add("Transpose", {"p"}, {"pt"}, swap);
  add("MatMul", {"v", "pt"}, {"y"});
  inits["image.shape"] = int64s({-1, c, o.h, o.w});
  add("Reshape", {"y", "image.shape"}, {"x"});
  std::string sum = "x";
  if (o.pe) {
    add("Reshape", {"v", "image.shape"}, {"v.image"});
    inits["pe.w"] = weights({c, 1, 3, 3}, seed++, 0.5f);
    inits["pe.b"] = weights({c}, seed++, 0.5f);
    add("Conv", {"v.image", "pe.w", "pe.b"}, {"pe"},
        {{"kernel_shape", ints_attr({3, 3})}, {"pads", ints_attr({1, 1, 1, 1})}, {"group", int_attr(c)}});
    add("Add", {"x", "pe"}, {"x.pe"});
    sum = "x.pe";
  }
  inits["proj.w"] = weights({o.channels, c, 1, 1}, seed++, 0.5f);
  inits["proj.b"] = weights({o.channels}, seed++, 0.5f);
  add("Conv", {sum, "proj.w", "proj.b"}, {"output0"}, {{"kernel_shape", ints_attr({1, 1})}});
  ValueInfo out;
  out.name = "output0";
  m.graph.outputs = {out};
  return std::make_shared<Model>(std::move(m));
}

}  // namespace yolocu::test
