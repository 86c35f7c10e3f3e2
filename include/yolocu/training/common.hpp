// yolocu/training/common.hpp - types shared by the training kernels (upsample, CIoU, multi-tensor).
//
// The training kernels work on raw pointers: host pointers for the *_cpu reference functions,
// device pointers (d_ prefix) for the *_cuda functions. Every *_cuda function enqueues its work
// on the given stream and returns without synchronising; it never allocates on the hot path.
#pragma once

#include <cstdint>

// Same declaration as in cuda_runtime_api.h, so this header needs no CUDA headers.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;  // NOLINT(modernize-use-using): must match CUDA's typedef

namespace yolocu::training {

// Floating element types of the training kernels. kFloat16 is IEEE binary16, kBFloat16 is bfloat16;
// both are stored as 16-bit words and accumulated in float.
enum class FloatType : int32_t { kFloat32, kFloat16, kBFloat16, kFloat64 };

const char* float_type_name(FloatType t) noexcept;
int float_type_size(FloatType t) noexcept;

// True when this build has the CUDA kernels (YOLOCU_CUDA=ON); the *_cuda functions throw
// ErrorCode::kUnsupported otherwise.
bool have_cuda_kernels() noexcept;

}  // namespace yolocu::training
