// The CPU engine's activation layouts: oneDNN's blocked nChw{B}c (B = 16 with AVX-512, 8
// otherwise) for convolution chains, plain NCHW for everything else.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "yolocu/tensor.hpp"

namespace yolocu::engine::cpu {

// 16 with AVX-512, else 8; YOLOCU_CPU_BLOCK=8 (or 16) overrides it, read once per process (the
// test suite runs the engine tests again with 8: the layout of CPUs without AVX-512).
int block_size();

inline dnnl::memory::dims to_dims(const Shape& s) { return dnnl::memory::dims(s.begin(), s.end()); }

// A float32 activation of shape `s`: nChw{B}c (rank 4), or plain row-major (rank 1-6).
dnnl::memory::desc act_md(const Shape& s, bool blocked);

}  // namespace yolocu::engine::cpu
