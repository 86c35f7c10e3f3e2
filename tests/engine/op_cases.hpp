// The single-op and small-graph cases of tests/python/make_op_cases.py as the engine tests read them
// (manifest.txt: "<case>_op<opset> n_inputs n_outputs"; per case model.onnx, in<k>.npy, out<k>.npy
// with ONNX Runtime's outputs), and the one-input form of a case that the GPU engine takes.
#pragma once

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/model_build.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu::test {

struct OpCase {
  std::string name;  // "<case>_op<opset>"
  std::string base;  // "<case>"
  int opset = 0;
  std::string dir;
  int n_in = 0, n_out = 0;

  std::shared_ptr<Model> model() const { return std::make_shared<Model>(load_onnx(dir + "/model.onnx")); }
  std::vector<Tensor> inputs() const {
    std::vector<Tensor> in;
    for (int i = 0; i < n_in; ++i) in.push_back(load_npy(dir + "/in" + std::to_string(i) + ".npy"));
    return in;
  }
  Tensor reference(int i) const { return load_npy(dir + "/out" + std::to_string(i) + ".npy"); }
};

// The cases listed in `dir`/manifest.txt, in file order (optionally only those of one opset).
inline std::vector<OpCase> read_op_cases(const std::string& dir, int opset = 0) {
  std::vector<OpCase> cases;
  std::ifstream manifest(dir + "/manifest.txt");
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream is(line);
    OpCase c;
    is >> c.name >> c.n_in >> c.n_out;
    if (c.name.empty()) continue;
    const size_t at = c.name.rfind("_op");
    c.base = c.name.substr(0, at);
    c.opset = std::stoi(c.name.substr(at + 3));
    c.dir = dir + "/" + c.name;
    if (opset == 0 || c.opset == opset) cases.push_back(std::move(c));
  }
  return cases;
}

// A case as CudaEngine takes it: one float32 input of rank 4. The case's first float32 input
// becomes that input (a rank-4 batch-1 one as it is; with `own_batch` a rank-4 one of any batch
// as it is, its batch axis declared dynamic, run at that batch; any other shape through a leading Reshape from [1, 1, 1, numel], a
// view on both engines); its other inputs become initializers holding the case's values. `model`
// is null when the case has no float32 input (its ops read int64 / bool values only, or nothing:
// they fold at plan time on both engines).
struct GpuForm {
  std::shared_ptr<const Model> model;
  Tensor input;
};

inline GpuForm gpu_form(const Model& original, const std::vector<Tensor>& inputs, bool own_batch = false) {
  Model m = original;
  int image = -1;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (image < 0 && inputs[i].dtype() == DType::kFloat32) image = static_cast<int>(i);
  GpuForm g;
  if (image < 0) return g;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (static_cast<int>(i) == image) continue;
    m.graph.initializers[m.graph.inputs[i].name] = inputs[i];
  }
  ValueInfo in = m.graph.inputs[static_cast<size_t>(image)];
  const Tensor& x = inputs[static_cast<size_t>(image)];
  if (x.rank() == 4 && (x.dim(0) == 1 || own_batch)) {
    g.input = x;
  } else {
    const std::string name = in.name + ":gpu_input", shape_name = in.name + ":gpu_shape";
    Tensor shape(DType::kInt64, {static_cast<int64_t>(x.rank())});
    for (size_t k = 0; k < x.rank(); ++k) shape.data_as<int64_t>()[k] = x.dim(k);
    m.graph.initializers[shape_name] = shape;
    Node reshape;
    reshape.name = "gpu_input_reshape";
    reshape.op_type = "Reshape";
    reshape.inputs = {name, shape_name};
    reshape.outputs = {in.name};
    m.graph.nodes.insert(m.graph.nodes.begin(), reshape);
    g.input = Tensor(DType::kFloat32, {1, 1, 1, x.numel()});
    std::memcpy(g.input.data(), x.data(), x.nbytes());
    in.name = name;
  }
  in.has_shape = true;
  in.dims.clear();
  for (int64_t d : g.input.shape()) in.dims.push_back(Dim{d, ""});
  // run at its own batch: a batch axis the engine may scale (it refuses a fixed batch above 1)
  if (g.input.dim(0) > 1) in.dims[0] = Dim{-1, "batch"};
  m.graph.inputs = {in};
  g.model = std::make_shared<const Model>(std::move(m));
  return g;
}

// ---- Edge shapes, built in C++: one node on a one-input model (opset 17), tie-free data ----

// Distinct values (a shuffled ramp, scaled to about [-2, 2]): no two elements tie, so max pooling
// and every comparison have one answer.
inline Tensor tie_free(const Shape& s, uint32_t seed) {
  Tensor t(DType::kFloat32, s);
  std::vector<int64_t> order(static_cast<size_t>(t.numel()));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  const double step = 4.0 / static_cast<double>(std::max<int64_t>(1, t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data_as<float>()[i] = static_cast<float>(-2.0 + step * static_cast<double>(order[static_cast<size_t>(i)]));
  return t;
}

// An edge-shape case: one node reading the model's input x (rank 4, batch 1) and constants.
struct EdgeCase {
  std::string name;
  std::string op;
  Shape x;
  std::vector<std::pair<std::string, Tensor>> inits;  // the node's inputs after x
  std::map<std::string, Attribute> attrs;
  int outputs = 1;
};

inline std::shared_ptr<const Model> one_node_model(const EdgeCase& e) {
  Model m;
  m.ir_version = 7;
  m.opset = 17;
  ValueInfo in;
  in.name = "x";
  in.has_shape = true;
  for (int64_t d : e.x) in.dims.push_back(Dim{d, ""});
  m.graph.inputs = {in};
  Node n;
  n.name = e.name;
  n.op_type = e.op;
  n.inputs = {"x"};
  for (const auto& [name, t] : e.inits) {
    n.inputs.push_back(name);
    m.graph.initializers[name] = t;
  }
  n.attributes = e.attrs;
  for (int k = 0; k < e.outputs; ++k) {
    n.outputs.push_back("y" + std::to_string(k));
    ValueInfo out;
    out.name = n.outputs.back();
    m.graph.outputs.push_back(out);
  }
  m.graph.nodes = {n};
  return std::make_shared<const Model>(std::move(m));
}

inline Tensor ints(std::vector<int64_t> v) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data_as<int64_t>());
  return t;
}
inline Tensor floats(std::vector<float> v) {
  Tensor t(DType::kFloat32, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data_as<float>());
  return t;
}

inline std::vector<EdgeCase> edge_cases() {
  std::vector<EdgeCase> c;
  // opset 17: Split takes its sizes as an input, Resize its roi and scales
  auto conv = [&](const std::string& name, Shape x, int64_t cout, int64_t k, int64_t stride, int64_t group) {
    const int64_t pad = k / 2;
    c.push_back({name, "Conv", x,
                 {{"w", tie_free({cout, x[1] / group, k, k}, 7)}, {"b", tie_free({cout}, 8)}},
                 {{"kernel_shape", ints_attr({k, k})}, {"strides", ints_attr({stride, stride})},
                  {"pads", ints_attr({pad, pad, pad, pad})}, {"group", int_attr(group)}}});
  };
  conv("ConvPixel", {1, 5, 1, 1}, 7, 1, 1, 1);          // 1x1 map, channels no multiple of 8
  conv("ConvOddStride2", {1, 3, 7, 9}, 6, 3, 2, 1);     // odd sizes, stride 2, 3 input channels
  conv("ConvWide", {1, 24, 5, 3}, 40, 3, 1, 1);         // more outputs than inputs, narrow map
  conv("ConvDepthwise", {1, 16, 6, 6}, 16, 3, 1, 16);   // group = channels
  c.push_back({"MaxPoolPixel", "MaxPool", {1, 3, 1, 1}, {},
               {{"kernel_shape", ints_attr({5, 5})}, {"pads", ints_attr({2, 2, 2, 2})}}});
  c.push_back({"MaxPoolOdd", "MaxPool", {1, 9, 7, 5}, {},
               {{"kernel_shape", ints_attr({3, 3})}, {"strides", ints_attr({2, 2})}, {"pads", ints_attr({1, 1, 1, 1})}}});
  c.push_back({"ResizePixel", "Resize", {1, 3, 1, 1},
               {{"roi", floats({})}, {"scales", floats({1, 1, 2, 2})}},
               {{"mode", string_attr("nearest")}}});
  c.push_back({"ResizeOdd", "Resize", {1, 5, 3, 7},
               {{"roi", floats({})}, {"scales", floats({1, 1, 2, 2})}},
               {{"mode", string_attr("nearest")}, {"coordinate_transformation_mode", string_attr("asymmetric")},
                {"nearest_mode", string_attr("floor")}}});
  c.push_back({"ConcatSelf", "Concat", {1, 3, 2, 5}, {{"k", tie_free({1, 5, 2, 5}, 9)}}, {{"axis", int_attr(1)}}});
  c.push_back({"AddBroadcastChannel", "Add", {1, 3, 4, 5}, {{"k", tie_free({1, 3, 1, 1}, 10)}}, {}});
  c.push_back({"MulRowVector", "Mul", {1, 2, 3, 17}, {{"k", tie_free({17}, 11)}}, {}});
  c.push_back({"SigmoidOdd", "Sigmoid", {1, 1, 3, 7}, {}, {}});
  c.push_back({"SoftmaxSingle", "Softmax", {1, 1, 1, 9}, {}, {{"axis", int_attr(1)}}});  // one element per row
  c.push_back({"SoftmaxLast", "Softmax", {1, 4, 3, 17}, {}, {{"axis", int_attr(-1)}}});
  c.push_back({"TransposeAll", "Transpose", {1, 2, 3, 5}, {}, {{"perm", ints_attr({3, 1, 0, 2})}}});
  c.push_back({"SliceStep", "Slice", {1, 4, 6, 9},
               {{"st", ints({1, -1})}, {"en", ints({4, -10})}, {"ax", ints({1, 3})}, {"sp", ints({2, -3})}}, {}});
  c.push_back({"SplitUneven", "Split", {1, 10, 2, 3}, {{"s", ints({3, 7})}}, {{"axis", int_attr(1)}}, 2});
  c.push_back({"MatMulSquare", "MatMul", {1, 2, 7, 7}, {{"k", tie_free({1, 2, 7, 7}, 12)}}, {}});
  return c;
}

// The cases of batch > 1 whose GPU form runs at their own batch (gpu_form's own_batch): their
// graphs scale with the batch (no constant holds it) and convolve the input, which the GPU engine
// refuses behind a batch-1 input (images folded into dim 0). Other batch-2 cases (reshapes and
// constants of batch 2) keep the folded form: their ops do not care.
inline bool runs_at_own_batch(const std::string& base) {
  return base == "Conv" || base == "ConvGroup" || base == "FuseConcatBatch2";
}

// The cases the GPU engine refuses by design, by case name (all opsets), with what its error says
// (a part of the message, which also names the node or value): "no float input" for a case without
// a GPU form; "setup" for one its planner takes and its build refuses (checked on a GPU only).
// Ops.GpuPlanRefusesExactlyTheListedCases checks the list against the planner; the GPU parity
// test expects kUnsupported from CudaEngine for each of them.
inline std::string gpu_refusal(const std::string& base) {
  static const std::map<std::string, std::string> kGpuRefusals = {
      // int64 / bool data or no input at all: folded at plan time on both engines (plan.cpp)
      {"Equal", "no float input"},
      {"GatherScalar", "no float input"},
      {"Range", "no float input"},
      {"RangeF", "no float input"},
      {"ConstantOfShape", "no float input"},
      {"Constant", "no float input"},
      // the GPU runs these only inside constant subgraphs (the dynamic export's grid), never on
      // runtime values
      {"Gather", "op 'Gather' is not supported by the GPU engine"},
      {"Expand", "op 'Expand' is not supported by the GPU engine"},
      {"Where", "op 'Where' is not supported by the GPU engine"},
      // float tensors only at run time; outputs computed on the device
      {"Cast", "has type int64 at run time"},
      {"Shape", "is a constant or an input"},
      // already quantised exports: their int8 / uint8 tensors run on the CPU engine only (the GPU
      // engine's INT8 path takes its scales from a calibration file, docs/int8.md)
      {"QuantizeLinear", "has type int8 at run time"},
      {"QuantizeLinearU8", "has type uint8 at run time"},
      {"QuantizeLinearAxis", "has type int8 at run time"},
      {"DequantizeLinear", "no float input"},
      {"DequantizeLinearU8", "no float input"},
      {"DequantizeLinearAxis", "no float input"},
      {"QdqConv", "has type int8 at run time"},
      // batched matrix products only (YOLO11's attention)
      {"MatMulVec", "1-D operands"},
      // a batch of 2 behind its form's batch-1 input (its second level is a constant of batch 2):
      // the head's convolution is refused ("images in dim 0"); FuseDetectHeadBatch1 runs
      {"FuseDetectHead", "setup"},
  };
  const auto it = kGpuRefusals.find(base);
  return it == kGpuRefusals.end() ? std::string() : it->second;
}

}  // namespace yolocu::test
