// Hopper's INT8 kernels (sm_90a; built where CUTLASS 3.5+ with its tools/util headers is found),
// with the epilogue of conv_int8_kernel.hpp fused through CUTLASS's epilogue visitor tree: the same
// Int8ConvArgs, the same results bit for bit (int8_math.hpp's float math).
//   - 1x1 stride-1 layers (conv_int8_sm90.cu): the layer as CUTLASS's persistent sm90 GEMM (TMA
//     loads, warp-specialised wgmma, a tile scheduler handing each CTA tile after tile so that one
//     tile's epilogue overlaps the next one's loads). No residual.
//   - any filter, stride, padding and dilation TMA's im2col mode takes (conv_int8_sm90_im2col.hpp):
//     CUTLASS's sm90 im2col mainloop in yolocu's persistent kernel. An fp16 residual after SiLU.
// Both: c a multiple of 16; int8 output (k and the pitch multiples of 16) or fp16 (multiples of 8);
// bias optional, SiLU optional; no split-K. A second output (y2) after SiLU where one output is int8
// and the other fp16, in either order: the int8 one leaves through the epilogue's output, the fp16
// one through CUTLASS's auxiliary store (not with the resident rows). What they cost against the
// FP16 tactics: docs/int8.md.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "engine/cuda/int8/conv_int8_kernel.hpp"

namespace yolocu::engine {

// The kernels, by index: "int8-sm90:coop-<tile M>x<N>x<K>[-e<M>x<N>][-r]" (1x1: the CTA's tile; the
// part of it the epilogue runs at a time where not CUTLASS's choice; -r: the scale and bias rows
// staged once per CTA, sm90_resident_row.cuh, up to 1024 output channels), then
// "int8-sm90:im2col-<tile>[-e<M>x<N>]"; empty in a build without them.
const std::vector<std::string>& int8_sm90_kernels();
// Empty if kernel `kernel` runs this problem on the current device, else what it refuses.
std::string int8_sm90_unsupported(const Int8ConvArgs& a, int kernel);
// Enqueues the GEMM on `stream` (capturable; no synchronisation); throws yolocu::Error
// (kInvalidArgument) for an unsupported problem, Error(kCuda) when CUTLASS or the launch fails.
void int8_sm90_run(const Int8ConvArgs& a, int kernel, cudaStream_t stream);

}  // namespace yolocu::engine
