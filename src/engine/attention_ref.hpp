// The fused C2PSA attention (engine::AttentionBlock) on the host, with the kernel's own math,
// block decomposition, shared-memory layout and warp reductions (engine/attention.hpp): the
// reference the CPU tests compare with the node-by-node graph.
#pragma once

#include <cstdint>

#include "engine/attention.hpp"

namespace yolocu::engine {

// qkv: NHWC float32 [batch, N, g.qkv_pitch]; writes x (NHWC [batch, N, g.out_pitch], channel
// h * hd + d) and, when v_image is not null, Reshape(v) (NHWC [batch, N, g.v_pitch]), block by
// block as the kernel's grid covers them, each warp's lanes one after the other. Channels beyond
// the heads' are neither read nor written. Returns the number of stores to x (each element once:
// batch * N * heads * hd when the decomposition is right).
int64_t attention_reference(const attn::Geometry& g, const float* qkv, int64_t batch, float* x, float* v_image);

}  // namespace yolocu::engine
