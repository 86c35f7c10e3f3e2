// What the convolution steps share (conv.cpp defines it; conv_int8.cpp uses it too): the layer of a
// step from its node and weights, and the weights in the kernels' KRSC order.
#pragma once

#include <vector>

#include "engine/cuda/steps/step.hpp"

namespace yolocu::cuda_engine_internal {

// The layer's problem at max_batch from the step's node and weights (`w` OIHW float32): the input's
// channels and pitch (a channel view's), the output's channels and pitch (a Concat's slice), the
// residual's pitch. Throws kUnsupported / kInvalidArgument naming the node for what the engine does
// not run (asymmetric padding, a batch that is not dim 0, channels that do not match the weights).
ConvInfo make_conv_layer(const SetupContext& ctx, const engine::GpuStep& st, const Tensor& w);

// Weights OIHW -> KRSC, output channels padded to p.k with zeros. The space-to-depth stem (s2d; p
// becomes its 3x3 stride-1 problem on kStemChannels channels): W'[o, a, b, ch * 4 + dy * 2 + dx] =
// W[o, ch, 2a + dy, 2b + dx] (the sums of the 6x6 stride-2 convolution, regrouped).
std::vector<float> krsc_weights(const Tensor& w, bool s2d, int in_h, int in_w, engine::ConvProblem& p);

}  // namespace yolocu::cuda_engine_internal
