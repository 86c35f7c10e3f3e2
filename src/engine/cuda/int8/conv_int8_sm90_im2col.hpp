// Hopper's INT8 convolution for any filter (3x3 stride 1 and 2 above all): CUTLASS's sm90 implicit-
// GEMM mainloop (TMA im2col loads of the NHWC input, warp-specialised wgmma) in yolocu's persistent
// kernel (sm90_persistent_conv.cuh), with the epilogue of conv_int8_sm90.cu fused
// (sm90_conv_epilogue.cuh), an fp16 residual read as the epilogue's source tensor. Same results bit
// for bit as the mma.sync kernel (conv_int8_kernel.hpp). Internal to conv_int8_sm90.cu, which lists
// these kernels after its 1x1 ones in int8_sm90_kernels().
// What it runs: c a multiple of 16; int8 output (k and the pitch multiples of 16) or fp16 (of 8);
// bias and SiLU optional; no residual or an fp16 one (packed, k channels); padding within what TMA's
// im2col mode takes; no split-K; a second output as conv_int8_sm90.hpp says (int8 first here).
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "engine/cuda/int8/conv_int8_kernel.hpp"

namespace yolocu::engine::sm90 {

// "int8-sm90:im2col-<tile M>x<N>x<K>[-e<M>x<N>]" (the CTA's tile; the epilogue's part of it).
const std::vector<std::string>& im2col_kernels();
// Empty if kernel `kernel` (an index into im2col_kernels()) runs this problem, else why not; the
// device check is the caller's.
std::string im2col_unsupported(const Int8ConvArgs& a, int kernel);
void im2col_run(const Int8ConvArgs& a, int kernel, cudaStream_t stream);

}  // namespace yolocu::engine::sm90
