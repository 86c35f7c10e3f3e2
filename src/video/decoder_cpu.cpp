// The CPU decoder backend: libavcodec software decoding, then BgrConverter (cv2.VideoCapture's
// conversion). The codec is found and opened as OpenCV's FFmpeg backend does it
// (avcodec_find_decoder of the stream's codec id, parameters copied from the stream).
#include <cstdio>

#include "core/check.hpp"
#include "video/bgr_convert_cpu.hpp"
#include "video/decoder.hpp"

namespace yolocu::video {
namespace {

std::string fourcc(uint32_t tag) {
  if (!tag) return "";
  char b[AV_FOURCC_MAX_STRING_SIZE] = {0};
  av_fourcc_make_string(b, tag);
  return std::string(", fourcc ") + b;
}

class CpuDecoder final : public Decoder {
 public:
  CpuDecoder(const AVStream& stream, const VideoSourceOptions& options, const std::string& source) {
    const AVCodecParameters& par = *stream.codecpar;
    const AVCodec* codec = avcodec_find_decoder(par.codec_id);
    YOLOCU_CHECK(codec, kUnsupported, source, ": no decoder for its video codec '", avcodec_get_name(par.codec_id), "'",
                 fourcc(par.codec_tag), " in this FFmpeg");
    ctx_.reset(avcodec_alloc_context3(codec));
    YOLOCU_CHECK(ctx_, kOutOfMemory, "avcodec_alloc_context3 failed");
    YOLOCU_CHECK(avcodec_parameters_to_context(ctx_.get(), &par) >= 0, kInternal, source,
                 ": avcodec_parameters_to_context failed");
    ctx_->thread_count = options.decoder_threads;
    ctx_->pkt_timebase = stream.time_base;
    ctx_->max_pixels = options.limits.max_pixels;  // a mid-stream size change over the limit: refused before allocating
    clear_last_ffmpeg_log();
    const int err = avcodec_open2(ctx_.get(), codec, nullptr);
    YOLOCU_CHECK(err >= 0, kUnsupported, source, ": cannot open the ", codec->name, " decoder: ", av_error_string(err),
                 ffmpeg_log_suffix());
    YOLOCU_CHECK(par.width > 0 && par.height > 0, kParse, source, ": the video stream has no frame size");
    YOLOCU_CHECK(par.width <= options.limits.max_width && par.height <= options.limits.max_height &&
                     int64_t{par.width} * par.height <= options.limits.max_pixels,
                 kOutOfMemory, source, ": frames of ", par.width, "x", par.height, " exceed the decode limits");
    width_ = par.width;
    height_ = par.height;
    description_ = std::string("cpu: libavcodec ") + codec->name + ", swscale bgr24";
  }

  const std::string& description() const noexcept override { return description_; }

  int send(const AVPacket* packet) override { return avcodec_send_packet(ctx_.get(), packet); }
  int receive(AVFrame* picture) override { return avcodec_receive_frame(ctx_.get(), picture); }

  void convert(const AVFrame& picture, VideoFrame& out) override {
    converter_.convert_at_stream_size(picture, ctx_->coded_width, ctx_->coded_height, width_, height_, out.image);
    out.format = FrameFormat::kBgr24;
    out.location = MemoryLocation::kHost;
  }

 private:
  CodecContextPtr ctx_;
  BgrConverter converter_;
  int width_ = 0, height_ = 0;
  std::string description_;
};

}  // namespace

std::unique_ptr<Decoder> open_cpu_decoder(const AVStream& stream, const VideoSourceOptions& options,
                                          const std::string& source) {
  return std::make_unique<CpuDecoder>(stream, options, source);
}

}  // namespace yolocu::video
