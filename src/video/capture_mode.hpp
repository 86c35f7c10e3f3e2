// The NVDEC decoders' threads and stream captures elsewhere in the process.
#pragma once

#include <cuda_runtime_api.h>

namespace yolocu::video {

// A thread's CUDA calls are refused (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) while another thread of
// the process captures a stream in global mode, which cuDNN does while it builds a runtime-compiled
// plan (a fast start's background build, CudaEngineOptions::derive_without_compiling, runs such
// builds while the sources decode): an NVDEC source would stop on its next picture. The decoders'
// threads take the relaxed capture interaction mode (cudaThreadExchangeStreamCaptureMode), once
// per thread, before their first cuvid or libavcodec call: their calls never touch a capturing
// stream, so they are safe to let through.
inline void relax_capture_mode() {
  thread_local const bool relaxed = [] {
    cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    return cudaThreadExchangeStreamCaptureMode(&m) == cudaSuccess;
  }();
  (void)relaxed;
}

}  // namespace yolocu::video
