// yolocu/video.hpp - frames from video files, network streams, cameras and image sequences.
//
//   auto src = yolocu::FrameSource::open("clip.mp4");          // or rtsp://..., /dev/video0, frames/%05d.jpg
//   yolocu::VideoFrame f;
//   while (src->read(f)) boxes = det->detect(f.view());          // f.index, f.pts say which frame it was
//
// Decoding goes through FFmpeg's libraries (libavformat, libavcodec; Debian 12: FFmpeg 5.1). The CPU
// backend converts every decoded picture to 8-bit BGR with libswscale exactly as OpenCV's
// cv2.VideoCapture does (same coded-size context, SWS_BICUBIC, BT.601 defaults, 32-byte aligned
// rows): the frames are byte-identical to cv2.VideoCapture.read() of the same file, so detections
// match ultralytics' detect.py on video. Image sequences are decoded by decode_image_file() (the
// cv::imread twin), like ultralytics reads images.
//
// Where the GPU plugs in (docs/video.md): a DecodeBackend::kCuda decoder (NVDEC through FFmpeg's
// CUDA hwaccel) delivers VideoFrame{format = kNv12, location = kDevice} with the planes in
// VideoFrame::device; the CPU backend always delivers kBgr24 in host memory. This build has the
// CPU backend only: kCuda is refused with kUnsupported, kAuto means kCpu.
//
// Errors: yolocu::Error. open(): kIo (file missing, URL unreachable, camera absent, timeout), kParse
// (not a media file, no video stream), kUnsupported (no decoder for the codec, a build without
// FFmpeg, kCuda). read(): kIo when a stream fails or stops sending for read_timeout_s; a packet the
// decoder rejects (corrupt data) is skipped and counted in SourceStats, not thrown. Nothing is
// printed.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "yolocu/image.hpp"

namespace yolocu {

// What a source string names (classify_source): a file, a network URL (rtsp, rtsps, rtmp, http,
// https, udp, tcp, srt), a V4L2 camera (/dev/videoN or a bare camera number "0"), or an image
// sequence (a folder of JPEG/PNG files, a glob pattern, or a printf pattern like "img_%05d.jpg").
enum class SourceKind { kFile, kNetwork, kCamera, kImageSequence };
const char* source_kind_name(SourceKind kind) noexcept;
SourceKind classify_source(const std::string& source);

// The decoder backend. kCpu: libavcodec software decoding + BGR conversion (this build). kCuda:
// NVDEC, frames in device memory as NV12 (not built yet: kUnsupported). kAuto: kCuda where it is
// available, else kCpu.
enum class DecodeBackend { kAuto, kCpu, kCuda };
const char* decode_backend_name(DecodeBackend backend) noexcept;

enum class FrameFormat { kBgr24, kNv12 };
enum class MemoryLocation { kHost, kDevice };

// One decoded frame. Move-only; owns its pixels.
struct VideoFrame {
  int stream_id = 0;   // set by StreamSet (the line of the source list); 0 for a lone FrameSource
  int64_t index = 0;   // 0-based number of this frame in its source, counting every decoded frame
                       // (frames skipped by start_frame / vid_stride count too)
  double pts = std::numeric_limits<double>::quiet_NaN();  // presentation time, seconds from the
                       // stream's start time; NaN when the source has none (image sequences)
  FrameFormat format = FrameFormat::kBgr24;
  MemoryLocation location = MemoryLocation::kHost;
  Image image;         // kBgr24 + kHost: the picture (width x height x 3, contiguous)

  // kNv12 + kDevice (a GPU decoder backend, not built yet): luma and interleaved chroma planes in
  // device memory, valid while `owner` lives (it holds the decoder's surface).
  struct DevicePlanes {
    const uint8_t* d_luma = nullptr;
    const uint8_t* d_chroma = nullptr;
    size_t pitch_bytes = 0;
    int width = 0, height = 0;
    int cuda_device = 0;
    std::shared_ptr<void> owner;
  } device;

  int width() const noexcept { return location == MemoryLocation::kHost ? image.width() : device.width; }
  int height() const noexcept { return location == MemoryLocation::kHost ? image.height() : device.height; }
  ImageView view() const noexcept { return image.view(); }  // the host BGR picture
};

struct VideoSourceOptions {
  DecodeBackend backend = DecodeBackend::kAuto;
  int vid_stride = 1;        // keep every N-th frame, as ultralytics' --vid-stride: frames N-1, 2N-1, ...
  int64_t start_frame = 0;   // frames before this index are decoded (not converted) and dropped
  int64_t max_frames = -1;   // deliver at most this many frames (after start and stride); -1: all
  double open_timeout_s = 10;  // network sources and cameras: opening may take this long
  double read_timeout_s = 10;  // ... and a read may wait this long for data before it fails (kIo)
  int decoder_threads = 0;   // libavcodec threads per decoder; 0: FFmpeg's choice (frame threads)
  std::string rtsp_transport = "tcp";  // rtsp:// over "tcp" or "udp"
  double sequence_fps = 0;   // image sequences: pts = index / fps when > 0 (else NaN)
  DecodeLimits limits;       // largest frame accepted (checked before allocating)
  // When set: once *cancel is true, a blocked open() or read() gives up soon (open() throws kIo,
  // read() returns false), like interrupt() but usable before open() has returned. Caller-owned;
  // must outlive the source.
  const std::atomic<bool>* cancel = nullptr;
};

// What open() found.
struct SourceInfo {
  std::string source;        // as given
  SourceKind kind = SourceKind::kFile;
  int width = 0, height = 0; // of the video stream (the first frame's for image sequences)
  double fps = 0;            // the stream's frame rate as FFmpeg guesses it; 0 when unknown
  int64_t frame_count = -1;  // frames in the source when the container says; -1 when unknown
  std::string codec;         // e.g. "h264", "mjpeg", "jpeg/png"
  std::string decoder;       // e.g. "cpu: libavcodec h264, swscale bgr24"
};

// Counters of one source, since open().
struct SourceStats {
  int64_t decoded = 0;       // frames out of the decoder (before start / stride)
  int64_t delivered = 0;     // frames returned by read()
  int64_t corrupt = 0;       // packets or pictures the decoder rejected (skipped)
  std::string last_problem;  // the latest skipped problem, for messages ("" if none)
};

class FrameSource {
 public:
  // Opens `source` (see SourceKind). Thread-safe; the source itself is used by one thread at a time
  // (interrupt() excepted). Throws yolocu::Error as the header comment says.
  static std::unique_ptr<FrameSource> open(const std::string& source, const VideoSourceOptions& options = {});
  virtual ~FrameSource() = default;

  // The next frame after start_frame / vid_stride / max_frames, into `frame` (its buffers are
  // reused when the size matches). false at the end of the source or of max_frames, and after
  // interrupt(). Throws kIo when the source fails (network error, read_timeout_s without data).
  virtual bool read(VideoFrame& frame) = 0;

  virtual const SourceInfo& info() const noexcept = 0;
  virtual SourceStats stats() const = 0;

  // Makes a read() that blocks on I/O (another thread) return soon, and every later read() return
  // false. Thread-safe, non-blocking.
  virtual void interrupt() noexcept = 0;
};

// Whether this build reads video files, network streams (FFmpeg) and cameras (libavdevice).
// Image sequences are always read.
bool video_input_supported() noexcept;
bool camera_input_supported() noexcept;

// The sources of a list file (--source list.txt): one per line, blank lines and lines starting with
// '#' ignored, surrounding white space trimmed; relative file paths are kept as written. kIo when
// the file cannot be read, kParse when it names no source.
std::vector<std::string> read_source_list(const std::string& path);

// Whether `path` names a source list rather than a source: a regular file ending in .txt or .streams.
bool is_source_list(const std::string& path);

}  // namespace yolocu
