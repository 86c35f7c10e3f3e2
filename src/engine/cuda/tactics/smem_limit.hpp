// A kernel function's dynamic shared-memory limit (cudaFuncAttributeMaxDynamicSharedMemorySize),
// raised on the current device for yolocu's own kernels that use more than the default 48 KiB.
#pragma once

#include <cstddef>

namespace yolocu::engine {

// Raises `kernel`'s limit on the current device to at least `bytes`; throws Error(kCuda) if CUDA
// refuses. The limit belongs to the kernel function, which problems of other sizes share: it only
// ever rises (setting it per problem lowered it under a layer prepared earlier, whose launch then
// failed with cudaErrorInvalidValue, seen with an engine restored from the tactic cache), once per
// (device, kernel): the attribute is per context. Thread-safe.
void raise_smem_limit(const void* kernel, size_t bytes);

}  // namespace yolocu::engine
