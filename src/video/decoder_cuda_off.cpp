// The CUDA decoder backend's refusal in builds without CUDA (decoder_cuda.cpp otherwise).
#include "core/check.hpp"
#include "video/decoder.hpp"

namespace yolocu::video {

bool cuda_decoder_built() noexcept { return false; }

std::unique_ptr<Decoder> open_cuda_decoder(const AVStream& /*stream*/, const VideoSourceOptions& /*options*/,
                                           const std::string& source) {
  detail::fail(ErrorCode::kUnsupported, source,
               ": no NVDEC: this build of yolocu has no CUDA (configure with -DYOLOCU_CUDA=ON); use --decoder cpu");
}

}  // namespace yolocu::video
