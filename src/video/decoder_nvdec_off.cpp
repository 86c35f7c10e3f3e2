// The Video Codec SDK decoder's refusal in builds without CUDA or without the ffnvcodec headers
// (decoder_nvdec.cpp otherwise).
#include "core/check.hpp"
#include "video/decoder.hpp"

namespace yolocu::video {

bool nvdec_sdk_built() noexcept { return false; }

std::unique_ptr<Decoder> open_nvdec_sdk_decoder(const AVStream& /*stream*/, const VideoSourceOptions& /*options*/,
                                                const std::string& source) {
  detail::fail(ErrorCode::kUnsupported, source,
               ": no Video Codec SDK decoder in this build (it needs CUDA and the ffnvcodec headers, Debian's "
               "libffmpeg-nvenc-dev); set YOLOCU_NVDEC_API=hwaccel (or leave it unset) for libavcodec's NVDEC");
}

}  // namespace yolocu::video
