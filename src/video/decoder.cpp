// Backend choice for the video decoder (the one place a GPU decoder will be added).
#include "video/decoder.hpp"

#include "core/check.hpp"

namespace yolocu::video {

std::unique_ptr<Decoder> open_decoder(const AVStream& stream, const VideoSourceOptions& options,
                                      const std::string& source) {
  switch (options.backend) {
    case DecodeBackend::kCuda:
      // NVDEC through FFmpeg's CUDA hwaccel is the next step (docs/video.md, "GPU decoding").
      detail::fail(ErrorCode::kUnsupported, source,
                   ": GPU (NVDEC) decoding is not part of this build yet; use the CPU decoder (--decoder cpu or auto)");
    case DecodeBackend::kAuto:
    case DecodeBackend::kCpu:
      break;
  }
  return open_cpu_decoder(stream, options, source);
}

}  // namespace yolocu::video
