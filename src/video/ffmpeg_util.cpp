// FFmpeg plumbing: RAII allocation, error strings, one-time set-up, log capture.
#include "video/ffmpeg_util.hpp"

#include "yolocu/video.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#ifdef YOLOCU_WITH_AVDEVICE
extern "C" {
#include <libavdevice/avdevice.h>
}
#endif

#include "core/check.hpp"

namespace yolocu::video {
namespace {

thread_local std::string t_last_log;

// Keeps the last warning or error line of this thread; prints nothing.
void capture_log(void* avcl, int level, const char* fmt, va_list args) {
  if (level > AV_LOG_WARNING) return;
  char line[1024];
  int print_prefix = 1;
  va_list copy;
  va_copy(copy, args);
  av_log_format_line2(avcl, level, fmt, copy, line, sizeof line, &print_prefix);
  va_end(copy);
  std::string s(line);
  // "[mov,mp4,m4a,3gp,3g2,mj2 @ 0x55d0c0a0] moov atom not found" -> "mov,mp4,m4a,3gp,3g2,mj2: moov atom not found"
  for (size_t at = s.find(" @ 0x"); at != std::string::npos && s[0] == '['; at = s.find(" @ 0x")) {
    const size_t close = s.find(']', at);
    if (close == std::string::npos) break;
    s = s.substr(1, at - 1) + ":" + s.substr(close + 1);
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (!s.empty()) t_last_log = s;
}

}  // namespace

FramePtr make_frame() {
  FramePtr f(av_frame_alloc());
  YOLOCU_CHECK(f, kOutOfMemory, "av_frame_alloc failed");
  return f;
}

PacketPtr make_packet() {
  PacketPtr p(av_packet_alloc());
  YOLOCU_CHECK(p, kOutOfMemory, "av_packet_alloc failed");
  return p;
}

std::string av_error_string(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
  if (av_strerror(err, buf, sizeof buf) < 0) std::snprintf(buf, sizeof buf, "FFmpeg error %d", err);
  return buf;
}

void ensure_ffmpeg_initialised() {
  static std::once_flag once;
  std::call_once(once, [] {
    avformat_network_init();
#ifdef YOLOCU_WITH_AVDEVICE
    avdevice_register_all();
#endif
    const char* env = std::getenv("YOLOCU_FFMPEG_LOG");
    if (!(env && std::strcmp(env, "1") == 0)) av_log_set_callback(capture_log);
  });
}

std::string last_ffmpeg_log() { return redact_source(t_last_log); }  // FFmpeg's lines may quote the URL
void clear_last_ffmpeg_log() { t_last_log.clear(); }

std::string ffmpeg_log_suffix() {
  return t_last_log.empty() ? std::string() : " (FFmpeg: " + redact_source(t_last_log) + ")";
}

}  // namespace yolocu::video
