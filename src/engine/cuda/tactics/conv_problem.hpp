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
  // Pixel pitches in elements, 0 = packed: the output's (yp > k when y is a channel slice of a
  // wider NHWC buffer: a copy-free Concat's input), the input's (xp > c when x is a channel view of
  // a wider buffer: a C2f's Split output or a Concat input that a convolution also reads) and the
  // residual's (rp > k likewise; the residual has y's shape [n, p, q, k]).
  int yp = 0, xp = 0, rp = 0;

  int y_pitch() const { return yp > 0 ? yp : k; }
  int x_pitch() const { return xp > 0 ? xp : c; }
  int r_pitch() const { return rp > 0 ? rp : k; }
  bool y_packed() const { return y_pitch() == k; }
  // x and the residual packed (the tactic families that only read packed inputs need this).
  bool inputs_packed() const { return x_pitch() == c && r_pitch() == k; }
  ConvProblem packed() const {  // the same layer on packed buffers (the check's reference)
    ConvProblem p = *this;
    p.yp = p.xp = p.rp = 0;
    return p;
  }
  ConvProblem packed_inputs() const {  // packed x and residual, the output as pitched as before
    ConvProblem p = *this;
    p.xp = p.rp = 0;
    return p;
  }

  // e.g. "fp16 x32x320x320 w64x3x3 p1x1 s2x2 d1x1 g1 +bias+silu" (no batch: the cache adds it),
  // " yp128", " xp64", " rp64" appended for pitched buffers.
  std::string signature() const;
  double flops() const;           // 2 * MACs of the whole batch
  double min_bytes() const;       // x + w + y (+ residual) read or written once
};

}  // namespace yolocu::engine
