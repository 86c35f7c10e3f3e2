// FFmpeg plumbing shared by the video stage: RAII owners for every FFmpeg object, error strings,
// the one-time library set-up and the log capture. Included by .cpp files only (never by a public
// header), so FFmpeg's headers stay out of the API.
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/frame.h>
#include <libswscale/swscale.h>
}

#include <memory>
#include <string>

namespace yolocu::video {

struct FormatContextCloser { void operator()(AVFormatContext* p) const noexcept { avformat_close_input(&p); } };
struct CodecContextFree { void operator()(AVCodecContext* p) const noexcept { avcodec_free_context(&p); } };
struct FrameFree { void operator()(AVFrame* p) const noexcept { av_frame_free(&p); } };
struct PacketFree { void operator()(AVPacket* p) const noexcept { av_packet_free(&p); } };
struct SwsFree { void operator()(SwsContext* p) const noexcept { sws_freeContext(p); } };

using FormatContextPtr = std::unique_ptr<AVFormatContext, FormatContextCloser>;
using CodecContextPtr = std::unique_ptr<AVCodecContext, CodecContextFree>;
using FramePtr = std::unique_ptr<AVFrame, FrameFree>;
using PacketPtr = std::unique_ptr<AVPacket, PacketFree>;
using SwsPtr = std::unique_ptr<SwsContext, SwsFree>;

// av_frame_alloc / av_packet_alloc that throw kOutOfMemory instead of returning null.
FramePtr make_frame();
PacketPtr make_packet();

// "Invalid data found when processing input" for an AVERROR code.
std::string av_error_string(int err);

// Once per process: network init, libavdevice's input devices (when built with it), and a log
// callback that prints nothing (the library never prints) but keeps the last warning/error FFmpeg
// logged on this thread, for error messages. YOLOCU_FFMPEG_LOG=1 in the environment forwards
// FFmpeg's log to stderr instead (debugging).
void ensure_ffmpeg_initialised();

// The last FFmpeg warning or error logged on this thread since clear_last_ffmpeg_log() ("" if
// none), without the trailing newline.
std::string last_ffmpeg_log();
void clear_last_ffmpeg_log();

// " (FFmpeg: <last log line>)" when there is one, else "".
std::string ffmpeg_log_suffix();

}  // namespace yolocu::video
