// frame_to_host_bgr: a VideoFrame as host BGR (device NV12 frames copied back and converted with the
// CPU reference of the GPU letterbox's conversion).
#include <cstring>
#include <vector>

#include "core/check.hpp"
#include "yolocu/video.hpp"

#ifdef YOLOCU_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda_check.hpp"
#endif

namespace yolocu {

Image frame_to_host_bgr(const VideoFrame& f) {
  if (f.location == MemoryLocation::kHost) {
    Image out(f.image.width(), f.image.height());
    if (!out.empty()) std::memcpy(out.data(), f.image.data(), f.image.size_bytes());
    return out;
  }
  const VideoFrame::DevicePlanes& d = f.device;
  YOLOCU_CHECK(f.format == FrameFormat::kNv12 && d.d_luma && d.d_chroma && d.width > 0 && d.height > 0,
               kInvalidArgument, "frame_to_host_bgr: a device frame without NV12 planes");
#ifdef YOLOCU_WITH_CUDA
  const size_t w = static_cast<size_t>(d.width), cw = 2 * static_cast<size_t>((d.width + 1) / 2);
  const size_t ch = static_cast<size_t>((d.height + 1) / 2);
  std::vector<uint8_t> luma(w * static_cast<size_t>(d.height)), chroma(cw * ch);
  int previous = 0;
  YOLOCU_CUDA_CHECK(cudaGetDevice(&previous));
  YOLOCU_CUDA_CHECK(cudaSetDevice(d.cuda_device));
  // the decoder's work first (its stream), then synchronous copies
  YOLOCU_CUDA_CHECK(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(d.stream)));
  YOLOCU_CUDA_CHECK(cudaMemcpy2D(luma.data(), w, d.d_luma, d.pitch_bytes, w, static_cast<size_t>(d.height),
                                 cudaMemcpyDeviceToHost));
  YOLOCU_CUDA_CHECK(cudaMemcpy2D(chroma.data(), cw, d.d_chroma, d.chroma_pitch_bytes ? d.chroma_pitch_bytes : d.pitch_bytes,
                                 cw, ch, cudaMemcpyDeviceToHost));
  YOLOCU_CUDA_CHECK(cudaSetDevice(previous));
  return nv12_to_bgr(luma.data(), w, chroma.data(), cw, d.width, d.height, d.range);
#else
  detail::fail(ErrorCode::kUnsupported, "frame_to_host_bgr: a device frame in a build without CUDA");
#endif
}

}  // namespace yolocu
