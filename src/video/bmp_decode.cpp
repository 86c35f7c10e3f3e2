// BMP images through FFmpeg's bmp decoder (libavcodec) and libswscale to 8-bit BGR
// (preprocess/image_decode_formats.hpp): the header's size checked against DecodeLimits first.
#include <cstring>
#include <string>
#include <vector>

#include "core/check.hpp"
#include "preprocess/image_decode_formats.hpp"
#include "video/ffmpeg_util.hpp"

extern "C" {
#include <libavutil/pixdesc.h>
}

namespace yolocu::detail {

void check_decode_limits(int w, int h, const DecodeLimits& limits, const std::string& name);

namespace {

int32_t le32(const uint8_t* p) {
  return static_cast<int32_t>(uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
}

}  // namespace

Image decode_bmp(const uint8_t* data, size_t size, const DecodeLimits& limits, const std::string& name) {
  using namespace video;
  // BITMAPFILEHEADER (14 bytes), then the info header: its size, width, height (< 0: top-down)
  YOLOCU_CHECK(size >= 26, kParse, name, ": BMP: truncated header");
  const int32_t info = le32(data + 14);
  YOLOCU_CHECK(info >= 40, kUnsupported, name, ": BMP: OS/2 headers (", info, " bytes) are not supported");
  const int64_t w = le32(data + 18), h_raw = le32(data + 22);
  const int64_t h = h_raw < 0 ? -h_raw : h_raw;
  YOLOCU_CHECK(w > 0 && h > 0 && w <= 0x7fffffff && h <= 0x7fffffff, kParse, name, ": BMP: invalid image size ", w,
               "x", h_raw);
  check_decode_limits(static_cast<int>(w), static_cast<int>(h), limits, name);
  ensure_ffmpeg_initialised();
  clear_last_ffmpeg_log();
  const AVCodec* codec = avcodec_find_decoder(AV_CODEC_ID_BMP);
  YOLOCU_CHECK(codec != nullptr, kUnsupported, name, ": BMP: this FFmpeg has no bmp decoder");
  CodecContextPtr ctx(avcodec_alloc_context3(codec));
  YOLOCU_CHECK(ctx != nullptr, kOutOfMemory, name, ": BMP: cannot allocate the decoder");
  YOLOCU_CHECK(avcodec_open2(ctx.get(), codec, nullptr) == 0, kInternal, name, ": BMP: cannot open the decoder");
  std::vector<uint8_t> padded(size + AV_INPUT_BUFFER_PADDING_SIZE, 0);  // libavcodec reads past the end
  std::memcpy(padded.data(), data, size);
  PacketPtr pkt(av_packet_alloc());
  FramePtr frame(av_frame_alloc());
  YOLOCU_CHECK(pkt && frame, kOutOfMemory, name, ": BMP: cannot allocate a packet");
  pkt->data = padded.data();
  pkt->size = static_cast<int>(size);
  int err = avcodec_send_packet(ctx.get(), pkt.get());
  if (err >= 0) err = avcodec_receive_frame(ctx.get(), frame.get());
  YOLOCU_CHECK(err >= 0, kParse, name, ": BMP: corrupt or truncated data (", av_error_string(err), ")",
               ffmpeg_log_suffix());
  YOLOCU_CHECK(frame->width == w && frame->height == h, kParse, name, ": BMP: decoded ", frame->width, "x",
               frame->height, ", header says ", w, "x", h);
  Image im(frame->width, frame->height);
  SwsPtr sws(sws_getContext(frame->width, frame->height, static_cast<AVPixelFormat>(frame->format), frame->width,
                            frame->height, AV_PIX_FMT_BGR24, SWS_POINT, nullptr, nullptr, nullptr));
  YOLOCU_CHECK(sws != nullptr, kUnsupported, name, ": BMP: pixel format ",
               av_get_pix_fmt_name(static_cast<AVPixelFormat>(frame->format)), " cannot be converted to BGR");
  uint8_t* dst[4] = {im.data(), nullptr, nullptr, nullptr};
  const int dst_stride[4] = {static_cast<int>(im.pitch_bytes()), 0, 0, 0};
  sws_scale(sws.get(), frame->data, frame->linesize, 0, frame->height, dst, dst_stride);
  return im;
}

}  // namespace yolocu::detail
