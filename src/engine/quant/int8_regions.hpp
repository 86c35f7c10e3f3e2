// Where an INT8 GPU engine holds its tensors in int8: from a plan and a calibration, which
// convolutions run on the INT8 kernels, which values live in int8 (and with which scale), and
// which float values are quantised for INT8 readers. The choice reproduces what the CPU engine's
// simulated INT8 computes (docs/int8.md): every INT8 convolution reads its input quantised with
// the calibration's scale for that input tensor; convolutions the calibration keeps in float (and
// those the kernels cannot run) read float values.
//
// A value is held in int8 when
//   - its producer can write int8: an INT8 convolution's step (Conv, its SiLU and residual Add, as
//     the calibration's `output`), or a MaxPool, a nearest Resize, a Concat or a Split whose inputs
//     are all held in int8 with that scale (these commute with quantisation: int8 in, int8 out,
//     exact);
//   - each of its readers reads int8: an INT8 convolution (as its input, quantised with this
//     scale, or as its fused residual), or such an op held in int8 (a Split: all its parts);
//   - one scale serves every reader (a value two convolutions read with different scales, or a
//     model output, stays float).
// Every other input of an INT8 convolution is quantised once per (value, scale) before it.
#pragma once

#include <string>
#include <vector>

#include "engine/plan.hpp"
#include "yolocu/int8.hpp"

namespace yolocu::engine {

// What the INT8 convolution kernels take (src/engine/cuda/int8/conv_int8_kernel.hpp's checks).
struct Int8KernelLimits {
  int input_channel_multiple = 16;
  int output_channel_multiple = 8;
};

struct Int8ConvStep {
  int node = -1;            // the Conv's plan node
  int input = -1;           // its input value
  float input_scale = 0.f;  // the scale its int8 input holds (the calibration's for `input`)
  int residual = -1;        // the fused residual Add's other input (-1: none)
  int output = -1;          // the step's output value (after the SiLU and the residual Add)
  bool int8_output = false;  // the step writes int8 (values[output].scale), else fp16
};

struct Int8Value {
  bool int8 = false;
  float scale = 0.f;  // when int8
};

struct Int8Quantize {
  int value = -1;  // a float value ...
  float scale = 0.f;  // ... quantised with this scale for the INT8 convolutions that read it
};

struct Int8FloatConv {
  int node = -1;
  std::string why;  // "kept in float by the calibration", or what the kernels refuse
};

struct Int8Regions {
  std::vector<Int8ConvStep> convs;        // the INT8 convolutions, in plan order
  std::vector<Int8FloatConv> float_convs;  // the calibration's other convolutions, in plan order
  std::vector<Int8Value> values;          // one per plan value
  std::vector<Int8Quantize> quantize;     // in plan order of the values
  int int8_values() const;
};

// kInvalidArgument when a convolution of the calibration is not in the plan, or its tensors are
// not the plan's (a calibration of another model: check_int8_calibration refuses it earlier).
Int8Regions plan_int8_regions(const Plan& plan, const Int8Calibration& calibration,
                              const Int8KernelLimits& limits = {});

}  // namespace yolocu::engine
