// A few lines per ONNX graph: the model builder of the fuzz seed generator (make_corpus.cpp) and
// of the tests that feed the loader and the engines hand-made, often hostile, models.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "yolocu/onnx.pb.h"
#include "yolocu/tensor.hpp"

namespace yolocu::fuzz {

namespace pb = ::yolocu_onnx;

struct Builder {
  pb::ModelProto m;
  pb::GraphProto* g;
  explicit Builder(int opset) {
    m.set_ir_version(7);
    m.set_producer_name("yolocu-fuzz-seed");
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    g = m.mutable_graph();
    g->set_name("seed");
  }
  // dims: >= 0 static, -1 "batch", -2 "height", -3 "width"
  void input(const std::string& name, std::vector<int64_t> dims, int elem = pb::TensorProto::FLOAT) {
    auto* v = g->add_input();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* sh = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = sh->add_dim();
      if (d >= 0) dim->set_dim_value(d);
      else dim->set_dim_param(d == -1 ? "batch" : d == -2 ? "height" : "width");
    }
  }
  void output(const std::string& name, int elem = pb::TensorProto::FLOAT) {
    auto* v = g->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  }
  void init_f(const std::string& name, std::vector<int64_t> dims, std::function<float(size_t)> f, bool fp16 = false) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(fp16 ? pb::TensorProto::FLOAT16 : pb::TensorProto::FLOAT);
    size_t n = 1;
    for (int64_t d : dims) t->add_dims(d), n *= static_cast<size_t>(d);
    std::string raw;
    for (size_t i = 0; i < n; ++i) {
      const float v = f(i);
      if (fp16) {
        const uint16_t h = yolocu::float_to_half(v);
        raw.append(reinterpret_cast<const char*>(&h), 2);
      } else {
        raw.append(reinterpret_cast<const char*>(&v), 4);
      }
    }
    t->set_raw_data(raw);
  }
  void init_i(const std::string& name, std::vector<int64_t> values, bool scalar = false) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(pb::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(values.size()));
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 8));
  }
  pb::NodeProto* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(g->node_size()));
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  static void ints(pb::NodeProto* n, const std::string& k, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(pb::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void i(pb::NodeProto* n, const std::string& k, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(pb::AttributeProto::INT);
    a->set_i(v);
  }
  static void f(pb::NodeProto* n, const std::string& k, float v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(pb::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void s(pb::NodeProto* n, const std::string& k, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(pb::AttributeProto::STRING);
    a->set_s(v);
  }
  // Conv (k x k, same padding) + SiLU as export.py writes it.
  std::string conv_silu(const std::string& x, const std::string& y, int64_t cin, int64_t cout, int64_t k, int64_t stride,
                        bool fp16 = false) {
    init_f(y + ".w", {cout, cin, k, k}, [](size_t j) { return 0.05f * static_cast<float>(static_cast<int>(j % 7) - 3); }, fp16);
    init_f(y + ".b", {cout}, [](size_t j) { return 0.01f * static_cast<float>(j); }, fp16);
    auto* c = node("Conv", {x, y + ".w", y + ".b"}, {y + ".c"});
    ints(c, "kernel_shape", {k, k});
    ints(c, "pads", {k / 2, k / 2, k / 2, k / 2});
    ints(c, "strides", {stride, stride});
    ints(c, "dilations", {1, 1});
    i(c, "group", 1);
    node("Sigmoid", {y + ".c"}, {y + ".s"});
    node("Mul", {y + ".c", y + ".s"}, {y});
    return y;
  }
  std::string bytes() const { return m.SerializeAsString(); }
};

}  // namespace yolocu::fuzz
