// A build without FFmpeg (YOLOCU_VIDEO=OFF or the libraries not found): video files, network
// streams, cameras and video output are refused with a message saying how to get them.
#include "core/check.hpp"
#include "video/source_impl.hpp"
#include "yolocu/video_writer.hpp"

namespace yolocu {
namespace {

constexpr const char* kHow =
    "this yolocu was built without FFmpeg (YOLOCU_VIDEO=OFF, or libavformat/libavcodec/libswscale not found; "
    "Debian: scripts/setup.sh installs them, then reconfigure)";

}  // namespace

namespace video {

std::unique_ptr<RawSource> open_ffmpeg_source(const std::string& source, SourceKind, const VideoSourceOptions&) {
  detail::fail(ErrorCode::kUnsupported, redact_source(source), ": video files, network streams and cameras: ", kHow);
}

}  // namespace video

std::unique_ptr<VideoWriter> VideoWriter::open(const std::string& path, int, int, double, const VideoWriterOptions&) {
  detail::fail(ErrorCode::kUnsupported, path, ": video output: ", kHow);
}

}  // namespace yolocu
