// yolocu/video_writer.hpp - annotated video out (yolocu detect --save), through libavcodec.
//
// H.264 through libx264 when this FFmpeg has it (CRF 23, preset "veryfast", yuv420p), else MPEG-4
// part 2 (q 3). The container follows the file name (.mp4, .mkv, .avi, .mov; FFmpeg's guess).
// Frames are 8-bit BGR host images of the size given at open(); odd sizes lose their last column
// or row (4:2:0 needs even sizes). Host only, one thread at a time.
//
// The container goes to a temporary file beside `path` (AtomicFile), renamed over `path` by close():
// until then, or after a failed write, the previous file at `path` stays.
//
// Errors: kUnsupported (a build without FFmpeg), kIo (the file cannot be written: the path and the
// system's reason, e.g. "No space left on device"), kInvalidArgument
// (bad size, fps, or a frame of another size), kInternal (an encoder call failed).
#pragma once

#include <memory>
#include <string>

#include "yolocu/image.hpp"

namespace yolocu {

struct VideoWriterOptions {
  // "" = the first that opens of: h264_nvenc (only with `gpu`), libx264, mpeg4; or an FFmpeg
  // encoder name (that one or an error).
  std::string encoder;
  bool gpu = false;  // the frames come from the GPU detector: try NVIDIA's hardware encoder first
  int crf = 23;      // quality: libx264's crf, NVENC's cq
};

class VideoWriter {
 public:
  // Opens `path` for frames of width x height at `fps` frames per second.
  static std::unique_ptr<VideoWriter> open(const std::string& path, int width, int height, double fps,
                                           const VideoWriterOptions& options = {});
  virtual ~VideoWriter() = default;  // closes (errors then are swallowed: call close() to see them)

  virtual void write(const ImageView& bgr) = 0;
  // Flushes the encoder and writes the trailer; idempotent.
  virtual void close() = 0;
  virtual const std::string& encoder_name() const noexcept = 0;
  // Why a preferred encoder (NVENC) was passed over ("" if none was): e.g. "cannot open the
  // h264_nvenc encoder: ... (Cannot load libnvidia-encode.so.1)".
  virtual const std::string& fallback_reason() const noexcept = 0;
  virtual int64_t frames_written() const noexcept = 0;
};

}  // namespace yolocu
