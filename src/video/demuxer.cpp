// Demuxer: libavformat input with deadlines and interruption.
#include "video/demuxer.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>

extern "C" {
#include <libavutil/time.h>
}

#include "core/check.hpp"

namespace yolocu::video {
namespace {

std::string seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", s);
  return b;
}

}  // namespace

int Demuxer::interrupt_callback(void* self) noexcept {
  const auto* d = static_cast<const Demuxer*>(self);
  return d->stopped() || d->timed_out() ? 1 : 0;
}

bool Demuxer::stopped() const noexcept {
  return interrupted_.load() || (options_.cancel && options_.cancel->load());
}

void Demuxer::arm(double s) noexcept {
  deadline_us_.store(s > 0 ? av_gettime_relative() + static_cast<int64_t>(s * 1e6) : 0);
}

bool Demuxer::timed_out() const noexcept {
  const int64_t d = deadline_us_.load();
  return d != 0 && av_gettime_relative() > d;
}

// Every URL FFmpeg opens for this input (the source itself, and what a playlist names) passes
// the source's InputPolicy first; FFmpeg's own io_open does the rest.
int Demuxer::io_open(AVFormatContext* s, AVIOContext** pb, const char* url, int flags, AVDictionary** options) {
  auto* d = static_cast<Demuxer*>(s->opaque);
  std::string why;
  if (d == nullptr || url == nullptr || !url_allowed(d->policy_, url, &why)) {
    if (d != nullptr && url != nullptr && d->refused_.empty()) d->refused_ = redact_source(url) + ": " + why;
    return AVERROR(EPERM);
  }
  return d->default_io_open_(s, pb, url, flags, options);
}

Demuxer::Demuxer(const std::string& source, SourceKind kind, const VideoSourceOptions& options)
    : source_(redact_source(source)), kind_(kind), options_(options), policy_(input_policy(source, kind)) {
  ensure_ffmpeg_initialised();
  clear_last_ffmpeg_log();
  std::string url = source;
  const AVInputFormat* input_format = nullptr;
  AVDictionary* dict = nullptr;
  av_dict_set(&dict, "protocol_whitelist", policy_.protocols.c_str(), 0);
  if (!policy_.formats.empty()) av_dict_set(&dict, "format_whitelist", policy_.formats.c_str(), 0);
  if (kind == SourceKind::kNetwork) av_dict_set(&dict, "http_persistent", "0", 0);  // every segment through io_open
  if (kind == SourceKind::kCamera) {
    if (url.rfind("/dev/", 0) != 0) url = "/dev/video" + url;  // "0" -> /dev/video0
    input_format = av_find_input_format("video4linux2");
    YOLOCU_CHECK(input_format, kUnsupported, source_,
                 ": cameras need FFmpeg's libavdevice (V4L2), which this yolocu was built without "
                 "(Debian: libavdevice-dev, then reconfigure)");
  } else if (kind == SourceKind::kNetwork && url.rfind("rtsp", 0) == 0) {
    av_dict_set(&dict, "rtsp_transport", options.rtsp_transport.c_str(), 0);
    if (options.rtsp_listen) av_dict_set(&dict, "rtsp_flags", "listen", 0);
  }
  AVFormatContext* ic = avformat_alloc_context();
  YOLOCU_CHECK(ic, kOutOfMemory, "avformat_alloc_context failed");
  ic->interrupt_callback.callback = &Demuxer::interrupt_callback;
  ic->interrupt_callback.opaque = this;
  ic->opaque = this;
  default_io_open_ = ic->io_open;
  ic->io_open = &Demuxer::io_open;
  arm(kind == SourceKind::kFile ? 0 : options.open_timeout_s);
  int err = avformat_open_input(&ic, url.c_str(), input_format, &dict);  // frees ic on failure
  av_dict_free(&dict);
  if (err < 0) {
    if (stopped()) detail::fail(ErrorCode::kIo, source_, ": opening was interrupted");
    if (timed_out())
      detail::fail(ErrorCode::kIo, source_, ": no answer within ", seconds(options.open_timeout_s), " (unreachable?)");
    if (err == AVERROR(ENOENT))
      detail::fail(ErrorCode::kIo, source_, kind == SourceKind::kCamera ? ": no such camera device" : ": no such file");
    if (err == AVERROR(EINVAL) && last_ffmpeg_log().find("whitelist") != std::string::npos)
      detail::fail(ErrorCode::kParse, source_, ": not a video ", kind == SourceKind::kFile ? "file" : "stream",
                   " yolocu opens (FFmpeg found a format or protocol this source kind may not use; docs/reliability.md)",
                   ffmpeg_log_suffix());
    if (err == AVERROR_INVALIDDATA)
      detail::fail(ErrorCode::kParse, source_, ": not a video file FFmpeg can read (", av_error_string(err), ")",
                   refused_.empty() ? std::string() : "; refused to open " + refused_, ffmpeg_log_suffix());
    if (!refused_.empty()) detail::fail(ErrorCode::kIo, source_, ": refused to open ", refused_);
    detail::fail(ErrorCode::kIo, source_, ": cannot open: ", av_error_string(err), ffmpeg_log_suffix());
  }
  format_.reset(ic);
  err = avformat_find_stream_info(ic, nullptr);
  if (err < 0) {
    if (stopped() || timed_out()) detail::fail(ErrorCode::kIo, source_, ": no stream information within ",
                                                seconds(options.open_timeout_s));
    detail::fail(ErrorCode::kParse, source_, ": cannot read the stream parameters: ", av_error_string(err),
                 refused_.empty() ? std::string() : " (refused to open " + refused_ + ")", ffmpeg_log_suffix());
  }
  arm(0);
  std::string kinds;
  for (unsigned i = 0; i < ic->nb_streams; ++i) {
    const AVMediaType t = ic->streams[i]->codecpar->codec_type;
    if (t == AVMEDIA_TYPE_VIDEO && stream_index_ < 0) stream_index_ = static_cast<int>(i);
    const char* n = av_get_media_type_string(t);
    kinds += std::string(kinds.empty() ? "" : ", ") + (n ? n : "unknown");
  }
  YOLOCU_CHECK(stream_index_ >= 0, kParse, source_, ": no video stream (", ic->nb_streams, " streams",
               kinds.empty() ? std::string() : ": " + kinds, ")");
  for (unsigned i = 0; i < ic->nb_streams; ++i)
    if (static_cast<int>(i) != stream_index_) ic->streams[i]->discard = AVDISCARD_ALL;
}

Demuxer::Read Demuxer::read(AVPacket* packet) {
  const bool live = kind_ != SourceKind::kFile;  // files never wait; network sources and cameras may
  for (;;) {
    av_packet_unref(packet);
    if (stopped()) return Read::kStopped;
    arm(live ? options_.read_timeout_s : 0);
    clear_last_ffmpeg_log();
    const int err = av_read_frame(format_.get(), packet);
    arm(0);
    if (err == AVERROR(EAGAIN)) {  // a live device without a frame yet
      av_usleep(1000);
      continue;
    }
    if (err == AVERROR_EOF) return Read::kEnd;
    if (err < 0) {
      if (stopped()) return Read::kStopped;
      if (err == AVERROR_EXIT || timed_out())
        detail::fail(ErrorCode::kIo, source_, ": no data for ", seconds(options_.read_timeout_s), " after ", packets_,
                     " packets (the stream stopped sending)");
      detail::fail(ErrorCode::kIo, source_, ": read failed after ", packets_, " packets: ", av_error_string(err),
                   ffmpeg_log_suffix());
    }
    if (packet->stream_index != stream_index_) continue;
    ++packets_;
    return Read::kPacket;
  }
}

}  // namespace yolocu::video
