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
// GPU decoding (docs/video.md): DecodeBackend::kCuda (NVDEC through FFmpeg's CUDA hwaccel; H.264
// and HEVC, 8-bit 4:2:0; CUDA builds) delivers VideoFrame{format = kNv12, location = kDevice} with
// the planes in VideoFrame::device, never copied to the host: give f.device_image() to
// Detector::detect_device(). NVDEC's pictures are the CPU decoder's bit for bit (H.264 / HEVC
// decoding is exact), and the GPU letterbox converts NV12 with swscale's arithmetic, so the
// detections equal the CPU path's. The CPU backend always delivers kBgr24 in host memory.
//
// Errors: yolocu::Error. open(): kIo (file missing, URL unreachable, camera absent, timeout), kParse
// (not a media file, no video stream), kUnsupported (no decoder for the codec, a build without
// FFmpeg, kCuda where NVDEC cannot be had: no CUDA in this build, a codec other than H.264 / HEVC,
// not 8-bit 4:2:0, no GPU or no NVDEC in its driver). read(): kIo when a stream fails or stops sending for read_timeout_s; a packet the
// decoder rejects (corrupt data) is skipped and counted in SourceStats, not thrown. Nothing is
// printed.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "yolocu/device_image.hpp"
#include "yolocu/image.hpp"

namespace yolocu {

// What a source string names (classify_source): a file, a network URL (rtsp, rtsps, rtmp, http,
// https, udp, tcp, srt), a V4L2 camera (/dev/videoN or a bare camera number "0"), or an image
// sequence (a folder of JPEG/PNG files, a glob pattern, or a printf pattern like "img_%05d.jpg").
enum class SourceKind { kFile, kNetwork, kCamera, kImageSequence };
const char* source_kind_name(SourceKind kind) noexcept;
SourceKind classify_source(const std::string& source);

// `text` with the credentials of every URL in it removed, for anything printed, logged, written or
// named after a source: "scheme://user:pass@host/..." -> "scheme://***@host/...", and the values of
// query parameters that carry secrets (password, passwd, pwd, pass, token, access_token, auth, key,
// apikey, api_key, secret, signature, sig) -> "***". Other text is returned unchanged. The library
// uses it in SourceInfo::source, every error message and FFmpeg's log lines; front ends apply it
// to the source strings they print or write themselves (JSONL, output file names).
std::string redact_source(const std::string& text);

// The decoder backend. kCpu: libavcodec software decoding + BGR conversion, host frames. kCuda:
// NVDEC, frames in device memory as NV12 (kUnsupported where it cannot be had, see above; if the
// GPU refuses a stream at its first picture, e.g. a profile NVDEC lacks, that source goes on
// decoding on the CPU and delivers host BGR frames, said in SourceStats::last_problem). kAuto: kCuda
// where it can be had, else kCpu (the reason in SourceInfo::decoder_note). A consumer of kCuda /
// kAuto frames checks VideoFrame::location.
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
  double read_ms = 0;  // host time FrameSource::read() took for this frame: demux, decode (with
                       // NVDEC, the surface's map), the BGR conversion, frames skipped by vid_stride,
                       // and for a live source the wait for its packets (a video run's timeline)
  int64_t received_ns = 0;  // std::chrono::steady_clock time (ns since its epoch) at which the
                       // demuxer read this frame's packet (matched by timestamp, else the last packet
                       // read before the frame came out; image sequences: when the image was read);
                       // the start of a live frame's latency

  // kNv12 + kDevice (the NVDEC backend): luma and interleaved U, V planes in the memory of GPU
  // cuda_device, valid while `owner` lives (it holds a reference to the decoder's mapped surface:
  // a source's decoder has VideoSourceOptions::max_frames_held such surfaces to spare; frames held
  // beyond that make it skip pictures). The pixels are written by work on `stream` (nullptr: the
  // legacy default stream, on which FFmpeg's NVDEC maps its pictures): order reads after it, as
  // detect_device() does with device_image().stream.
  struct DevicePlanes {
    const uint8_t* d_luma = nullptr;
    const uint8_t* d_chroma = nullptr;
    size_t pitch_bytes = 0;         // luma
    size_t chroma_pitch_bytes = 0;
    int width = 0, height = 0;
    int cuda_device = 0;
    YuvRange range = YuvRange::kLimited;
    CUstream_st* stream = nullptr;  // cudaStream_t
    std::shared_ptr<void> owner;
  } device;

  int width() const noexcept { return location == MemoryLocation::kHost ? image.width() : device.width; }
  int height() const noexcept { return location == MemoryLocation::kHost ? image.height() : device.height; }
  ImageView view() const noexcept { return image.view(); }  // the host BGR picture (kHost frames)
  // The kDevice planes as a DeviceImage for Detector::detect_device() (valid while this frame, or a
  // copy of `owner`, lives).
  DeviceImage device_image() const noexcept {
    DeviceImage d;
    d.format = PixelFormat::kNv12;
    d.data = device.d_luma;
    d.chroma = device.d_chroma;
    d.width = device.width;
    d.height = device.height;
    d.pitch_bytes = device.pitch_bytes;
    d.chroma_pitch_bytes = device.chroma_pitch_bytes;
    d.range = device.range;
    d.stream = device.stream;
    return d;
  }
};

// The frame as a host BGR image: kHost frames copied; kDevice frames copied back (synchronously)
// and converted with nv12_to_bgr(), i.e. the pixels the CPU decoder would have delivered. For
// --save of GPU-decoded frames (slow path). kUnsupported for kDevice frames in a build without CUDA.
Image frame_to_host_bgr(const VideoFrame& frame);

struct VideoSourceOptions {
  DecodeBackend backend = DecodeBackend::kCpu;  // host BGR frames unless device frames are asked for
  int cuda_device = 0;       // kCuda / kAuto: the GPU that decodes (the detector's)
  int max_frames_held = 4;   // kCuda: decoded frames the consumer may hold at once (surfaces added
                             // to NVDEC's pool, in [0, 16]: NVDEC has at most 32 and the stream's
                             // references need theirs; StreamSet sets min(2 * queue_depth + 2, 16))
  int vid_stride = 1;        // keep every N-th frame, as ultralytics' --vid-stride: frames N-1, 2N-1, ...
  int64_t start_frame = 0;   // frames before this index are decoded (not converted) and dropped
  int64_t max_frames = -1;   // deliver at most this many frames (after start and stride); -1: all
  double open_timeout_s = 10;  // network sources and cameras: opening may take this long
  double read_timeout_s = 10;  // ... and a read may wait this long for data before it fails (kIo)
  int decoder_threads = 0;   // libavcodec threads per decoder; 0: FFmpeg's choice (frame threads)
  std::string rtsp_transport = "tcp";  // rtsp:// over "tcp" or "udp"
  bool rtsp_listen = false;  // rtsp://HOST:PORT/PATH: wait there for a publisher (a camera or encoder
                             // pushing with ANNOUNCE / RECORD, e.g. `ffmpeg -f rtsp`) instead of
                             // connecting to a server (FFmpeg's rtsp_flags listen); open_timeout_s
                             // bounds the wait
  double sequence_fps = 0;   // image sequences: pts = index / fps when > 0 (else NaN)
  DecodeLimits limits;       // largest frame accepted (checked before allocating)
  // When set: once *cancel is true, a blocked open() or read() gives up soon (open() throws kIo,
  // read() returns false), like interrupt() but usable before open() has returned. Caller-owned;
  // must outlive the source.
  const std::atomic<bool>* cancel = nullptr;
};

// What open() found.
struct SourceInfo {
  std::string source;        // as given, credentials removed (redact_source)
  SourceKind kind = SourceKind::kFile;
  int width = 0, height = 0; // of the video stream (the first frame's for image sequences)
  double fps = 0;            // the stream's frame rate as FFmpeg guesses it; 0 when unknown
  int64_t frame_count = -1;  // frames in the source when the container says; -1 when unknown
  std::string codec;         // e.g. "h264", "mjpeg", "jpeg/png"
  std::string decoder;       // e.g. "cpu: libavcodec h264, swscale bgr24"
  std::string decoder_note;  // why kAuto decodes on the CPU ("" otherwise)
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
