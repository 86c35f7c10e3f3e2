// The decoder backend seam. A Decoder turns the video stream's packets into pictures (send /
// receive, libavcodec's model) and converts a picture into a VideoFrame. The CPU backend
// (decoder_cpu.cpp) decodes in software and converts to host BGR24 like cv2.VideoCapture
// (bgr_convert_cpu.cpp). The CUDA backend (decoder_cuda.cpp, CUDA builds) opens the codec with an
// AV_HWDEVICE_TYPE_CUDA device context, receives AV_PIX_FMT_CUDA pictures (NV12 surfaces in device
// memory) and convert()s them into VideoFrame{kNv12, kDevice} without a host copy. open_decoder()
// chooses between the two.
#pragma once

#include <memory>
#include <string>

#include "video/ffmpeg_util.hpp"
#include "yolocu/video.hpp"

namespace yolocu::video {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // "cpu: libavcodec h264, swscale bgr24"
  virtual const std::string& description() const noexcept = 0;
  // One packet of the stream, or nullptr once at the end (flush). 0 on success; a negative AVERROR
  // for a packet the decoder rejects (the caller counts it and goes on).
  virtual int send(const AVPacket* packet) = 0;
  // The next picture into `picture`: 0; AVERROR(EAGAIN) when it needs another packet; AVERROR_EOF
  // after the flush has drained; another negative AVERROR for a picture that failed (skipped).
  virtual int receive(AVFrame* picture) = 0;
  // Converts a picture from receive() into out.image / out.device, out.format, out.location. Other
  // fields of `out` are the caller's.
  virtual void convert(const AVFrame& picture, VideoFrame& out) = 0;
  // Once, after a receive(): why this decoder went over to the CPU (the CUDA backend when NVDEC
  // refused the stream at its first picture); "" otherwise and after the first call.
  virtual std::string fallback_note() { return {}; }
};

// The backend for `stream`: kCpu -> the CPU decoder; kCuda -> the CUDA decoder (kUnsupported with
// the reason when it cannot be had); kAuto -> the CUDA decoder when it can be had, else the CPU
// decoder with the reason in *note. Throws kUnsupported when FFmpeg has no decoder for the codec.
std::unique_ptr<Decoder> open_decoder(const AVStream& stream, const VideoSourceOptions& options,
                                      const std::string& source, std::string* note = nullptr);

std::unique_ptr<Decoder> open_cpu_decoder(const AVStream& stream, const VideoSourceOptions& options,
                                          const std::string& source);

// The CUDA backend (decoder_cuda.cpp; decoder_cuda_off.cpp refuses in builds without CUDA).
bool cuda_decoder_built() noexcept;
std::unique_ptr<Decoder> open_cuda_decoder(const AVStream& stream, const VideoSourceOptions& options,
                                           const std::string& source);

// The NVDEC decoder and its measurement switch (environment, as YOLOCU_NVJPEG_BACKEND is):
// nvdec_sdk_requested() is true for the Video Codec SDK decoder (the default where it is built;
// YOLOCU_NVDEC_API=sdk asks for it, YOLOCU_NVDEC_API=hwaccel for libavcodec's hwaccel instead;
// another value: kInvalidArgument). YOLOCU_NVDEC_STREAM=own gives either NVDEC decoder a
// non-blocking CUDA stream of its own to map pictures on, instead of the legacy default stream that
// every decoder of the process shares.
bool nvdec_sdk_requested();
bool nvdec_own_stream_requested();

// NVDEC through the Video Codec SDK's own parser and decoder (decoder_nvdec.cpp; decoder_nvdec_off.cpp
// refuses in builds without CUDA or the ffnvcodec headers): what open_cuda_decoder() opens unless
// YOLOCU_NVDEC_API=hwaccel.
bool nvdec_sdk_built() noexcept;
std::unique_ptr<Decoder> open_nvdec_sdk_decoder(const AVStream& stream, const VideoSourceOptions& options,
                                                const std::string& source);

// kUnsupported unless the stream is one the CUDA backend takes: H.264 or HEVC, 8-bit 4:2:0 (or a
// pixel format the container does not say).
void check_nvdec_stream(const AVCodecParameters& par, const std::string& source);

}  // namespace yolocu::video
