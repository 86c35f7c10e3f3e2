// The launcher of the Attention step's kernel (steps/attention_kernel.cu), callable from host C++.
#pragma once

#include <cuda_runtime_api.h>

#include "engine/attention.hpp"

namespace yolocu::cuda_kernels {

// Raises the kernel's shared-memory limit for the problem `g` (once per device; build time).
void attention_prepare(const engine::attn::Geometry& g, bool half);

// Enqueues the attention of `batch` images on `stream`: reads qkv (NHWC, fp16 or fp32 as the
// activations), writes x (NHWC [batch, N, out_pitch], channels h * hd + d) and, where v_image is
// not null, pe's input Reshape(v) (NHWC [batch, N, v_pitch]). One launch; no synchronisation.
void attention(const engine::attn::Geometry& g, bool half, const void* qkv, void* x, void* v_image, int batch,
               cudaStream_t stream);

}  // namespace yolocu::cuda_kernels
