// Demuxer: opens one FFmpeg input (file, URL, V4L2 device) and reads the packets of its first video
// stream (the stream cv2.VideoCapture picks). FFmpeg opens only what the source's InputPolicy
// allows (protocol and format whitelists, every URL checked against the source's host); messages
// name the source with its credentials removed. Every blocking FFmpeg call is bounded by a deadline
// (open_timeout_s, read_timeout_s) and can be interrupted from another thread, through libavformat's
// interrupt callback.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "video/ffmpeg_util.hpp"
#include "video/input_policy.hpp"
#include "yolocu/video.hpp"

namespace yolocu::video {

class Demuxer {
 public:
  // Opens `source` and finds its video stream. Throws kIo (missing file, unreachable, timeout,
  // interrupted), kParse (not a media file, no video stream), kUnsupported (cameras without libavdevice).
  Demuxer(const std::string& source, SourceKind kind, const VideoSourceOptions& options);

  enum class Read { kPacket, kEnd, kStopped };
  // The next packet of the video stream into `packet` (unreferenced first). kEnd at the end of the
  // input, kStopped after interrupt() or cancel. Throws kIo when reading fails or no data comes
  // for read_timeout_s.
  Read read(AVPacket* packet);

  const AVStream& stream() const noexcept { return *format_->streams[stream_index_]; }
  const AVFormatContext& format() const noexcept { return *format_; }
  void interrupt() noexcept { interrupted_.store(true); }

 private:
  static int interrupt_callback(void* self) noexcept;
  static int io_open(AVFormatContext* s, AVIOContext** pb, const char* url, int flags, AVDictionary** options);
  bool stopped() const noexcept;
  void arm(double seconds) noexcept;
  bool timed_out() const noexcept;

  std::string source_;  // redacted (redact_source), for messages
  SourceKind kind_;
  VideoSourceOptions options_;
  InputPolicy policy_;
  int (*default_io_open_)(AVFormatContext*, AVIOContext**, const char*, int, AVDictionary**) = nullptr;
  std::string refused_;  // the first URL io_open refused, and why
  std::atomic<bool> interrupted_{false};
  std::atomic<int64_t> deadline_us_{0};  // av_gettime_relative() clock; 0 = none
  FormatContextPtr format_;
  int stream_index_ = -1;
  int64_t packets_ = 0;
};

}  // namespace yolocu::video
