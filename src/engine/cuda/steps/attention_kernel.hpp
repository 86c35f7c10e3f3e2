// The launcher of the Attention step's kernel (steps/attention_kernel.cu), callable from host C++.
#pragma once

#include <cuda_runtime_api.h>

#include "engine/attention.hpp"

namespace yolocu::cuda_kernels {

// Chooses the kernel for the problem `g` (the tensor-core one for fp16 where
// attention_mma_supported, on the current device, unless `allow_tensor_cores` is false) and raises
// its shared-memory limit (once per device; build time). Returns true for the tensor-core kernel:
// attention()'s `tensor_cores`.
bool attention_prepare(const engine::attn::Geometry& g, bool half, bool allow_tensor_cores = true);

// Enqueues the attention of `batch` images on `stream` with the kernel attention_prepare chose
// (`tensor_cores`: its result): reads qkv (NHWC, fp16 or fp32 as the
// activations), writes x (NHWC [batch, N, out_pitch], channels h * hd + d) and, where v_image is
// not null, pe's input Reshape(v) (NHWC [batch, N, v_pitch]). One launch; no synchronisation.
void attention(const engine::attn::Geometry& g, bool half, bool tensor_cores, const void* qkv, void* x, void* v_image,
               int batch, cudaStream_t stream);

// The tensor-core kernel (steps/attention_mma.cu) that attention_prepare chooses for fp16
// activations where it applies: key and head dims multiples of 16, qkv channels a multiple of 8, at most 1,024
// tokens and the staged head within the shared memory of a block.
bool attention_mma_supported(const engine::attn::Geometry& g);
void attention_mma_prepare(const engine::attn::Geometry& g);
void attention_mma(const engine::attn::Geometry& g, const void* qkv, void* x, void* v_image, int batch, cudaStream_t stream);

}  // namespace yolocu::cuda_kernels
