// The video stage's internal source interface: a RawSource yields every decoded frame of one
// input, in order; FrameSource (frame_source.cpp) applies start_frame / vid_stride / max_frames on
// top and asks for pixels only for the frames it keeps.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "yolocu/video.hpp"

namespace yolocu::video {

// Now on the clock of VideoFrame::received_ns: std::chrono::steady_clock, ns since its epoch.
inline int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class RawSource {
 public:
  virtual ~RawSource() = default;
  // The next decoded frame: index (0, 1, ...), pts, and, when `pixels`, the picture (format,
  // location, image). false at the end or after interrupt(). Throws like FrameSource::read().
  virtual bool next(VideoFrame& frame, bool pixels) = 0;
  virtual const SourceInfo& info() const noexcept = 0;
  virtual SourceStats stats() const = 0;  // decoded, corrupt, last_problem (delivered is FrameSource's)
  virtual void interrupt() noexcept = 0;
};

// FFmpeg inputs: files, network URLs, cameras (ffmpeg_source.cpp; video_off.cpp when not built).
std::unique_ptr<RawSource> open_ffmpeg_source(const std::string& source, SourceKind kind,
                                              const VideoSourceOptions& options);
// Folders, globs, printf patterns and single images, through decode_image_file (image_sequence_source.cpp).
std::unique_ptr<RawSource> open_image_sequence(const std::string& source, const VideoSourceOptions& options);

}  // namespace yolocu::video
