// How an INT8 GPU engine holds its tensors: from a plan and a calibration, which convolutions run
// on the INT8 kernels, and in which forms each value is held: float (fp16 on the GPU) and/or int8
// copies, one per scale its readers need. The choice reproduces the CPU engine's simulated INT8
// (docs/int8.md) exactly: every INT8 convolution reads its input quantised with the calibration's
// scale for that input tensor, and every float reader reads the float value.
//
// The forms come from the readers:
//   - an INT8 convolution needs an int8 copy of its input at its input scale; its fused residual
//     reads an int8 copy where the value has one, else the float value;
//   - every other reader (a float convolution, the Detect head, a model output) needs the float;
//   - a MaxPool, nearest Resize, Concat or Split needs of its inputs each form its output needs
//     (these commute with quantisation: int8 in, int8 out with the same scale, exactly), and runs
//     once per form.
// Then each form is made where it costs least: an INT8 convolution's step (Conv, its SiLU and
// residual Add, as the calibration's `output`) writes every form of its output from its
// accumulators; a float producer writes the float, and each int8 copy it needs is quantised from
// it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/plan.hpp"
#include "yolocu/int8.hpp"

namespace yolocu::engine {

// What the INT8 convolution kernels take (src/engine/cuda/int8/conv_int8_kernel.hpp's checks), and
// what the engine running them can do besides.
struct Int8KernelLimits {
  int input_channel_multiple = 16;
  int output_channel_multiple = 8;
  // Whether MaxPool, nearest Resize, Concat and Split run on int8 values (false: they read and
  // write float only, and an int8 copy of their output is quantised from it).
  bool commuting_ops = true;
  // With commuting_ops: whether node `node` (a MaxPool, nearest Resize, Concat or Split) runs on
  // int8 values, given the values the INT8 steps write (step_output[v] != 0); null: every one does.
  std::function<bool(int node, const std::vector<char>& step_output)> commutes;
  // An INT8 convolution's fused residual reads the value's int8 copy where it has one; false: always
  // the float value.
  bool int8_residuals = true;
  // Why the engine cannot run convolution node `node` in INT8 beyond the kernels' limits (empty:
  // it can); null: no other reason.
  std::function<std::string(int node)> refuse;
};

struct Int8ConvStep {
  int node = -1;               // the Conv's plan node
  int input = -1;              // its input value (read as the int8 copy at input_scale)
  float input_scale = 0.f;     // the calibration's scale for `input`
  int residual = -1;           // the fused residual Add's other input (-1: none)
  bool residual_int8 = false;  // read as the residual value's first int8 copy, else as float
  int output = -1;             // the step's output value (after the SiLU and the residual Add)
};

struct Int8Value {
  bool fp16 = false;               // held in float
  std::vector<float> int8_scales;  // int8 copies, one per scale (ascending)
};

struct Int8Quantize {
  int value = -1;     // a value a float producer writes ...
  float scale = 0.f;  // ... quantised to its int8 copy at this scale
};

struct Int8FloatConv {
  int node = -1;
  std::string why;  // "kept in float by the calibration", or what the kernels refuse
};

struct Int8Regions {
  std::vector<Int8ConvStep> convs;         // the INT8 convolutions, in plan order
  std::vector<Int8FloatConv> float_convs;  // the calibration's other convolutions, in plan order
  std::vector<Int8Value> values;           // one per plan value (nothing for a step's inner values)
  std::vector<Int8Quantize> quantize;      // ordered by value, then scale
  int int8_values() const;                 // values with an int8 copy
  int int8_copies() const;                 // int8 copies in all
};

// kInvalidArgument when a convolution of the calibration is not in the plan, or its tensors are
// not the plan's (a calibration of another model: check_int8_calibration refuses it earlier).
Int8Regions plan_int8_regions(const Plan& plan, const Int8Calibration& calibration,
                              const Int8KernelLimits& limits = {});

}  // namespace yolocu::engine
