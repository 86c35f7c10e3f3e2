// Reference implementations of the ONNX ops YOLO exports use (opsets 7-18), shared by constant
// folding, the CPU executor and the parity tests of the GPU engine.
//
// Each op has two halves: infer() derives output dtypes and shapes from input metadata (and from
// input values when they are known constants, e.g. Reshape's shape), compute() fills outputs whose
// shapes infer() fixed. Tensors are dense row-major (NCHW for images).
#pragma once

#include <string>
#include <vector>

#include "yolocu/model.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu::ops {

struct ValueMeta {
  DType dtype = DType::kFloat32;
  Shape shape;
  const Tensor* value = nullptr;  // non-null when the value is a known constant
  bool present = true;            // false for an omitted optional input ("")
};

struct OpDef {
  const char* op_type;
  void (*infer)(const Node& node, int64_t opset, const std::vector<ValueMeta>& in,
                std::vector<ValueMeta>& out);
  void (*compute)(const Node& node, int64_t opset, const std::vector<const Tensor*>& in,
                  const std::vector<Tensor*>& out);
  bool is_view;  // output is the input's bytes with a new shape (Reshape, Squeeze, ...)
};

// nullptr if the op type is not implemented.
const OpDef* find_op(const std::string& op_type);
std::vector<std::string> op_types();

// Numpy-style broadcast of two shapes; kInvalidArgument naming `what` if incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& what);

// Source index along every axis of each output position of a nearest Resize/Upsample
// (`in` are the node's inputs, constants for scales/sizes).
std::vector<std::vector<int64_t>> resize_source_indices(const Node& n, int64_t opset, const Shape& x,
                                                        const std::vector<const Tensor*>& in);

// Reads a constant integer tensor (int64/int32) as a vector.
std::vector<int64_t> to_int_vector(const Tensor& t);

}  // namespace yolocu::ops
