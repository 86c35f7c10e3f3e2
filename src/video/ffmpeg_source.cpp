// RawSource over FFmpeg: Demuxer -> Decoder, every decoded frame in order with its index and pts.
// Packets or pictures the decoder rejects (corrupt data) are skipped and counted; decoding goes on
// with the next packet, as FFmpeg's own tools do.
#include <cmath>
#include <deque>
#include <mutex>
#include <utility>

#include "core/check.hpp"
#include "video/decoder.hpp"
#include "video/demuxer.hpp"
#include "video/source_impl.hpp"

namespace yolocu::video {
namespace {

class FfmpegSource final : public RawSource {
 public:
  FfmpegSource(const std::string& source, SourceKind kind, const VideoSourceOptions& options)
      : demuxer_(source, kind, options), packet_(make_packet()), picture_(make_frame()), limits_(options.limits) {
    const AVStream& st = demuxer_.stream();
    info_.source = redact_source(source);
    decoder_ = open_decoder(st, options, info_.source, &info_.decoder_note);
    info_.kind = kind;
    info_.width = st.codecpar->width;
    info_.height = st.codecpar->height;
    const AVRational fr = av_guess_frame_rate(const_cast<AVFormatContext*>(&demuxer_.format()),
                                              const_cast<AVStream*>(&st), nullptr);
    info_.fps = fr.num > 0 && fr.den > 0 ? av_q2d(fr) : 0.0;
    info_.frame_count = st.nb_frames > 0 ? st.nb_frames : -1;
    info_.codec = avcodec_get_name(st.codecpar->codec_id);
    info_.decoder = decoder_->description();
    time_base_ = av_q2d(st.time_base);
    start_time_ = st.start_time;
  }

  bool next(VideoFrame& frame, bool pixels) override {
    for (int failures = 0;;) {
      const int r = decoder_->receive(picture_.get());
      if (r == 0) {
        check_frame_size();
        const std::string note = decoder_->fallback_note();
        if (!note.empty()) {
          std::lock_guard<std::mutex> lock(mu_);
          stats_.last_problem = note;
        }
        emit(frame, pixels);
        return true;
      }
      if (r == AVERROR_EOF) return false;
      if (r != AVERROR(EAGAIN)) {
        problem("a picture failed to decode: " + av_error_string(r));
        if (++failures > 1000) detail::fail(ErrorCode::kParse, info_.source, ": the decoder keeps failing: ", last_problem());
        if (flushed_) continue;  // draining: the next receive() moves on or ends
      }
      if (flushed_) return false;
      clear_last_ffmpeg_log();
      const Demuxer::Read got = demuxer_.read(packet_.get());
      if (got == Demuxer::Read::kStopped) return false;
      if (got == Demuxer::Read::kEnd) {
        flushed_ = true;
        if (info_.frame_count > 0 && packets_ < info_.frame_count) {  // the container promised more
          std::lock_guard<std::mutex> lock(mu_);
          ended_early_ = "the file ends early: " + std::to_string(packets_) + " of " +
                         std::to_string(info_.frame_count) + " frames' packets (truncated?)";
          stats_.last_problem = ended_early_;
        }
        decoder_->send(nullptr);
        continue;
      }
      ++packets_;
      note_packet_time();
      const int s = decoder_->send(packet_.get());
      if (s < 0 && s != AVERROR(EAGAIN))
        problem("a packet was rejected (" + av_error_string(s) + ")" + ffmpeg_log_suffix());
    }
  }

  const SourceInfo& info() const noexcept override { return info_; }

  SourceStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void interrupt() noexcept override { demuxer_.interrupt(); }

 private:
  // When each packet was read, by its timestamp, for VideoFrame::received_ns: the decoder hands out
  // pictures in display order, which differs from the packets' order when a stream has B-frames.
  void note_packet_time() {
    last_packet_ns_ = steady_now_ns();
    const int64_t ts = packet_->pts != AV_NOPTS_VALUE ? packet_->pts : packet_->dts;
    if (ts == AV_NOPTS_VALUE) return;
    packet_times_.emplace_back(ts, last_packet_ns_);
    if (packet_times_.size() > kPacketTimes) packet_times_.pop_front();
  }
  int64_t packet_time(int64_t ts) {
    for (auto it = packet_times_.begin(); ts != AV_NOPTS_VALUE && it != packet_times_.end(); ++it)
      if (it->first == ts) {
        const int64_t ns = it->second;
        packet_times_.erase(it);
        return ns;
      }
    return last_packet_ns_;
  }

  void emit(VideoFrame& frame, bool pixels) {
    const int64_t ts = picture_->best_effort_timestamp;
    frame.received_ns = packet_time(picture_->pts != AV_NOPTS_VALUE ? picture_->pts : ts);
    frame.pts = ts == AV_NOPTS_VALUE
                    ? std::nan("")
                    : static_cast<double>(ts - (start_time_ == AV_NOPTS_VALUE ? 0 : start_time_)) * time_base_;
    if (pixels) decoder_->convert(*picture_, frame);
    av_frame_unref(picture_.get());
    std::lock_guard<std::mutex> lock(mu_);
    frame.index = stats_.decoded++;
  }

  // A stream may change its frame size mid-way: every decoded picture is checked again (libavcodec's
  // max_pixels, set from the same limits, refuses the largest before allocating them).
  void check_frame_size() const {
    const int w = picture_->width, h = picture_->height;
    YOLOCU_CHECK(w <= limits_.max_width && h <= limits_.max_height && int64_t{w} * h <= limits_.max_pixels, kOutOfMemory,
                 info_.source, ": a frame of ", w, "x", h, " (the stream changed size mid-way) exceeds the decode limit ",
                 "(DecodeLimits max_width ", limits_.max_width, ", max_height ", limits_.max_height, ", max_pixels ",
                 limits_.max_pixels, ")");
  }

  void problem(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.corrupt;
    stats_.last_problem = what + " after frame " + std::to_string(stats_.decoded);
    if (!ended_early_.empty()) stats_.last_problem = ended_early_ + "; then " + stats_.last_problem;
  }

  std::string last_problem() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_.last_problem;
  }

  Demuxer demuxer_;
  std::unique_ptr<Decoder> decoder_;
  PacketPtr packet_;
  FramePtr picture_;
  DecodeLimits limits_;
  SourceInfo info_;
  double time_base_ = 0;
  int64_t start_time_ = AV_NOPTS_VALUE;
  bool flushed_ = false;
  int64_t packets_ = 0;
  static constexpr size_t kPacketTimes = 256;  // more than any decoder holds back
  std::deque<std::pair<int64_t, int64_t>> packet_times_;  // (timestamp, steady ns) of recent packets
  int64_t last_packet_ns_ = 0;
  std::string ended_early_;  // guarded by mu_
  mutable std::mutex mu_;
  SourceStats stats_;
};

}  // namespace

std::unique_ptr<RawSource> open_ffmpeg_source(const std::string& source, SourceKind kind,
                                              const VideoSourceOptions& options) {
  return std::make_unique<FfmpegSource>(source, kind, options);
}

}  // namespace yolocu::video
