// Backend choice for the video decoder, and the streams the CUDA backend takes.
#include "video/decoder.hpp"

#include <cstdlib>
#include <cstring>

extern "C" {
#include <libavutil/pixdesc.h>
}

#include "core/check.hpp"
#include "yolocu/error.hpp"

namespace yolocu::video {
namespace {

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

}  // namespace

bool nvdec_sdk_requested() {
  const char* v = std::getenv("YOLOCU_NVDEC_API");
  if (!v || !*v) return nvdec_sdk_built();
  if (std::strcmp(v, "sdk") == 0) return true;
  if (std::strcmp(v, "hwaccel") == 0) return false;
  detail::fail(ErrorCode::kInvalidArgument, "YOLOCU_NVDEC_API must be sdk or hwaccel, got '", v, "'");
}
bool nvdec_own_stream_requested() { return env_is("YOLOCU_NVDEC_STREAM", "own"); }

std::unique_ptr<Decoder> open_decoder(const AVStream& stream, const VideoSourceOptions& options,
                                      const std::string& source, std::string* note) {
  switch (options.backend) {
    case DecodeBackend::kCuda:
      check_nvdec_stream(*stream.codecpar, source);
      return open_cuda_decoder(stream, options, source);
    case DecodeBackend::kAuto:
      try {
        check_nvdec_stream(*stream.codecpar, source);
        return open_cuda_decoder(stream, options, source);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kUnsupported) throw;
        if (note) *note = std::string("decoding on the CPU: ") + e.what();
      }
      break;
    case DecodeBackend::kCpu:
      break;
  }
  return open_cpu_decoder(stream, options, source);
}

void check_nvdec_stream(const AVCodecParameters& par, const std::string& source) {
  YOLOCU_CHECK(par.codec_id == AV_CODEC_ID_H264 || par.codec_id == AV_CODEC_ID_HEVC, kUnsupported, source,
               ": NVDEC decoding in yolocu covers h264 and hevc; this stream is ", avcodec_get_name(par.codec_id));
  const auto fmt = static_cast<AVPixelFormat>(par.format);
  const char* name = av_get_pix_fmt_name(fmt);
  YOLOCU_CHECK(fmt == AV_PIX_FMT_NONE || fmt == AV_PIX_FMT_YUV420P || fmt == AV_PIX_FMT_YUVJ420P, kUnsupported,
               source, ": NVDEC decoding in yolocu covers 8-bit 4:2:0 video; this stream is ", name ? name : "?");
}
}  // namespace yolocu::video
