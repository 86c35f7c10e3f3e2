// FrameSource: options checked once, the input opened by kind, then start_frame / vid_stride /
// max_frames applied over the RawSource (pixels are converted only for the frames kept).
#include <chrono>
#include <cmath>

#include "core/check.hpp"
#include "video/source_impl.hpp"

namespace yolocu {
namespace {

void check_options(const VideoSourceOptions& o) {
  YOLOCU_CHECK(o.vid_stride >= 1, kInvalidArgument, "vid_stride must be >= 1, got ", o.vid_stride);
  YOLOCU_CHECK(o.start_frame >= 0, kInvalidArgument, "start_frame must be >= 0, got ", o.start_frame);
  YOLOCU_CHECK(o.max_frames >= -1, kInvalidArgument, "max_frames must be >= 0 or -1 (all), got ", o.max_frames);
  YOLOCU_CHECK(o.open_timeout_s > 0 && o.read_timeout_s > 0 && std::isfinite(o.open_timeout_s) &&
                   std::isfinite(o.read_timeout_s),
               kInvalidArgument, "timeouts must be positive seconds");
  YOLOCU_CHECK(o.decoder_threads >= 0 && o.decoder_threads <= 64, kInvalidArgument,
               "decoder_threads must be in [0, 64], got ", o.decoder_threads);
  YOLOCU_CHECK(o.rtsp_transport == "tcp" || o.rtsp_transport == "udp", kInvalidArgument,
               "rtsp_transport must be tcp or udp, got '", o.rtsp_transport, "'");
  YOLOCU_CHECK(o.max_frames_held >= 0 && o.max_frames_held <= 16, kInvalidArgument,
               "max_frames_held must be in [0, 16], got ", o.max_frames_held);
  YOLOCU_CHECK(o.cuda_device >= 0, kInvalidArgument, "cuda_device must be >= 0, got ", o.cuda_device);
  YOLOCU_CHECK(o.backend == DecodeBackend::kAuto || o.backend == DecodeBackend::kCpu || o.backend == DecodeBackend::kCuda,
               kInvalidArgument, "unknown decode backend");
  YOLOCU_CHECK(o.sequence_fps >= 0 && std::isfinite(o.sequence_fps), kInvalidArgument, "sequence_fps must be >= 0");
}

class SelectingSource final : public FrameSource {
 public:
  SelectingSource(std::unique_ptr<video::RawSource> raw, const VideoSourceOptions& o) : raw_(std::move(raw)), o_(o) {}

  bool read(VideoFrame& frame) override {
    if (o_.max_frames >= 0 && delivered_ >= o_.max_frames) return false;
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      // ultralytics' stride: of every vid_stride frames the last one (frames N-1, 2N-1, ... from start)
      const int64_t i = next_index_;
      const bool keep = i >= o_.start_frame && (i - o_.start_frame + 1) % o_.vid_stride == 0;
      frame.received_ns = 0;
      if (!raw_->next(frame, keep)) return false;
      ++next_index_;
      if (keep) {
        ++delivered_;
        if (frame.received_ns == 0) frame.received_ns = video::steady_now_ns();  // no packets (image sequences): when read
        frame.read_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        return true;
      }
    }
  }

  const SourceInfo& info() const noexcept override { return raw_->info(); }
  SourceStats stats() const override {
    SourceStats s = raw_->stats();
    s.delivered = delivered_;
    return s;
  }
  void interrupt() noexcept override { raw_->interrupt(); }

 private:
  std::unique_ptr<video::RawSource> raw_;
  VideoSourceOptions o_;
  int64_t next_index_ = 0;
  int64_t delivered_ = 0;
};

}  // namespace

std::unique_ptr<FrameSource> FrameSource::open(const std::string& source, const VideoSourceOptions& options) {
  check_options(options);
  YOLOCU_CHECK(!source.empty(), kInvalidArgument, "empty source");
  const SourceKind kind = classify_source(source);
  std::unique_ptr<video::RawSource> raw = kind == SourceKind::kImageSequence
                                              ? video::open_image_sequence(source, options)
                                              : video::open_ffmpeg_source(source, kind, options);
  return std::make_unique<SelectingSource>(std::move(raw), options);
}

bool video_input_supported() noexcept {
#ifdef YOLOCU_WITH_VIDEO
  return true;
#else
  return false;
#endif
}

bool camera_input_supported() noexcept {
#ifdef YOLOCU_WITH_AVDEVICE
  return true;
#else
  return false;
#endif
}

}  // namespace yolocu
