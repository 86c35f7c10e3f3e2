// One convolution layer as the tactics see it (host-only, no CUDA): NHWC activations, KRSC weights,
// an optional fused epilogue y = act(conv(x) + bias) (+ residual). Its signature() names the layer
// in the tactic cache; two layers with the same signature and batch run the same tactic.
#pragma once

#include <string>

namespace yolocu::engine {

struct ConvProblem {
  int n = 1, c = 0, h = 0, w = 0;  // input, NHWC (c: channels as stored, padding included)
  int k = 0, r = 1, s = 1;         // output channels as stored (padding included), filter size
  int p = 0, q = 0;                // output height, width
  int pad_h = 0, pad_w = 0, str_h = 1, str_w = 1, dil_h = 1, dil_w = 1, group = 1;
  bool half = true;                // fp16 activations and weights (fp32 accumulation), else fp32
  bool bias = false, silu = false, residual = false;
  // Output pixel pitch in elements: 0 = k (packed); > k when y is a channel slice of a wider NHWC
  // buffer (a copy-free Concat's input). The residual stays packed [n, p, q, k].
  int yp = 0;

  int y_pitch() const { return yp > 0 ? yp : k; }
  bool y_packed() const { return y_pitch() == k; }
  ConvProblem packed() const {  // the same layer writing a packed output
    ConvProblem p = *this;
    p.yp = 0;
    return p;
  }

  // e.g. "fp16 x32x320x320 w64x3x3 p1x1 s2x2 d1x1 g1 +bias+silu" (no batch: the cache adds it),
  // " yp128" appended for a pitched output.
  std::string signature() const;
  double flops() const;           // 2 * MACs of the whole batch
  double min_bytes() const;       // x + w + y (+ residual) read or written once
};

}  // namespace yolocu::engine
