// VideoWriter: BGR frames -> yuv420p (swscale) -> NVENC, libx264 or MPEG-4 (libavcodec) -> a
// container (libavformat, chosen from the file name).
#include "yolocu/video_writer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include <libavutil/opt.h>
}

#include "core/check.hpp"
#include "yolocu/atomic_file.hpp"
#include "video/ffmpeg_util.hpp"

namespace yolocu {
namespace {

using video::av_error_string;

// The muxer writes through our own AVIOContext (FfmpegWriter::open_output), freed here.
struct OutputCloser {
  void operator()(AVFormatContext* oc) const noexcept {
    if (!oc) return;
    if (oc->pb) {
      av_freep(&oc->pb->buffer);
      avio_context_free(&oc->pb);
    }
    avformat_free_context(oc);
  }
};

class FfmpegWriter final : public VideoWriter {
 public:
  FfmpegWriter(const std::string& path, int width, int height, double fps, const VideoWriterOptions& o) : path_(path) {
    YOLOCU_CHECK(width >= 2 && height >= 2, kInvalidArgument, path, ": video size ", width, "x", height, " too small");
    YOLOCU_CHECK(fps > 0 && std::isfinite(fps) && fps <= 1000, kInvalidArgument, path, ": fps must be in (0, 1000]");
    video::ensure_ffmpeg_initialised();
    in_w_ = width;
    in_h_ = height;
    const int w = width & ~1, h = height & ~1;  // 4:2:0
    AVFormatContext* oc = nullptr;
    int err = avformat_alloc_output_context2(&oc, nullptr, nullptr, path.c_str());
    if (err < 0 || !oc) err = avformat_alloc_output_context2(&oc, nullptr, "mp4", path.c_str());
    YOLOCU_CHECK(err >= 0 && oc, kInvalidArgument, path, ": no container for this file name: ", av_error_string(err));
    oc_.reset(oc);

    // The encoders to try, in order: the one asked for; else NVENC when the frames come from the
    // GPU detector (o.gpu), then libx264, then MPEG-4. NVENC that does not open (no NVIDIA encoder
    // library, no GPU) gives way to the next, and the reason is kept (fallback_reason()).
    std::vector<const AVCodec*> candidates;
    if (!o.encoder.empty()) {
      const AVCodec* c = avcodec_find_encoder_by_name(o.encoder.c_str());
      YOLOCU_CHECK(c, kUnsupported, path, ": no encoder '", o.encoder, "' in this FFmpeg");
      candidates.push_back(c);
    } else {
      if (o.gpu) {
        if (const AVCodec* c = avcodec_find_encoder_by_name("h264_nvenc")) candidates.push_back(c);
        else fallback_reason_ = "this FFmpeg has no h264_nvenc encoder";
      }
      if (const AVCodec* c = avcodec_find_encoder_by_name("libx264")) candidates.push_back(c);
      if (const AVCodec* c = avcodec_find_encoder(AV_CODEC_ID_MPEG4)) candidates.push_back(c);
      YOLOCU_CHECK(!candidates.empty(), kUnsupported, path, ": this FFmpeg has neither libx264 nor an MPEG-4 encoder");
    }
    stream_ = avformat_new_stream(oc, nullptr);
    YOLOCU_CHECK(stream_, kOutOfMemory, "avformat_new_stream failed");
    const AVRational rate = av_d2q(fps, 100000);
    for (size_t k = 0; k < candidates.size(); ++k) {
      const AVCodec* codec = candidates[k];
      encoder_name_ = codec->name;
      ctx_.reset(avcodec_alloc_context3(codec));
      YOLOCU_CHECK(ctx_, kOutOfMemory, "avcodec_alloc_context3 failed");
      ctx_->width = w;
      ctx_->height = h;
      ctx_->pix_fmt = AV_PIX_FMT_YUV420P;
      ctx_->time_base = av_inv_q(rate);
      ctx_->framerate = rate;
      ctx_->gop_size = 250;
      if (oc->oformat->flags & AVFMT_GLOBALHEADER) ctx_->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
      AVDictionary* opts = nullptr;
      if (encoder_name_ == "libx264") {
        av_dict_set(&opts, "preset", "veryfast", 0);
        av_dict_set_int(&opts, "crf", o.crf, 0);
      } else if (encoder_name_ == "h264_nvenc") {
        av_dict_set(&opts, "preset", "p4", 0);  // NVENC's middle preset
        av_dict_set(&opts, "rc", "vbr", 0);
        av_dict_set_int(&opts, "cq", o.crf, 0);  // constant quality on the same scale as crf
      } else if (codec->id == AV_CODEC_ID_MPEG4) {
        ctx_->flags |= AV_CODEC_FLAG_QSCALE;
        ctx_->global_quality = FF_QP2LAMBDA * 3;
      }
      video::clear_last_ffmpeg_log();
      err = avcodec_open2(ctx_.get(), codec, &opts);
      av_dict_free(&opts);
      if (err >= 0) break;
      const std::string why = std::string("cannot open the ") + encoder_name_ + " encoder: " + av_error_string(err) +
                              video::ffmpeg_log_suffix();
      YOLOCU_CHECK(k + 1 < candidates.size() && encoder_name_ == "h264_nvenc", kInternal, path, ": ", why);
      fallback_reason_ = why;
    }
    YOLOCU_CHECK(avcodec_parameters_from_context(stream_->codecpar, ctx_.get()) >= 0, kInternal,
                 "avcodec_parameters_from_context failed");
    stream_->time_base = ctx_->time_base;
    if (!(oc->oformat->flags & AVFMT_NOFILE)) open_output();
    err = avformat_write_header(oc, nullptr);
    check_io(err >= 0, "cannot write the header", err);
    header_written_ = true;
    sws_.reset(sws_getContext(w, h, AV_PIX_FMT_BGR24, w, h, AV_PIX_FMT_YUV420P, SWS_BICUBIC, nullptr, nullptr, nullptr));
    YOLOCU_CHECK(sws_, kInternal, "sws_getContext bgr24 -> yuv420p failed");
    yuv_ = video::make_frame();
    yuv_->format = AV_PIX_FMT_YUV420P;
    yuv_->width = w;
    yuv_->height = h;
    YOLOCU_CHECK(av_frame_get_buffer(yuv_.get(), 32) == 0, kOutOfMemory, "cannot allocate a frame");
    packet_ = video::make_packet();
  }

  ~FfmpegWriter() override {
    try {
      close();
    } catch (...) {  // destructors do not throw; close() reports errors to callers who want them
    }
  }

  void write(const ImageView& bgr) override {
    YOLOCU_CHECK(!closed_, kInvalidArgument, path_, ": write after close");
    YOLOCU_CHECK(bgr.data && bgr.width == in_w_ && bgr.height == in_h_ && bgr.pitch_bytes >= size_t(bgr.width) * 3,
                 kInvalidArgument, path_, ": frame of ", bgr.width, "x", bgr.height, ", the video is ", in_w_, "x",
                 in_h_);
    YOLOCU_CHECK(av_frame_make_writable(yuv_.get()) >= 0, kOutOfMemory, "av_frame_make_writable failed");
    const uint8_t* src[4] = {bgr.data, nullptr, nullptr, nullptr};
    const int stride[4] = {static_cast<int>(bgr.pitch_bytes), 0, 0, 0};
    sws_scale(sws_.get(), src, stride, 0, ctx_->height, yuv_->data, yuv_->linesize);
    yuv_->pts = frames_++;
    encode(yuv_.get());
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    if (!header_written_) return;
    encode(nullptr);
    const int err = av_write_trailer(oc_.get());
    check_io(err >= 0, "cannot write the trailer", err);
    if (oc_->pb) {
      avio_flush(oc_->pb);
      check_io(oc_->pb->error >= 0, "write failed", oc_->pb->error);
    }
    if (file_) file_->commit();  // the whole video, fsync'd, renamed over the target
  }

  const std::string& encoder_name() const noexcept override { return encoder_name_; }
  const std::string& fallback_reason() const noexcept override { return fallback_reason_; }
  int64_t frames_written() const noexcept override { return frames_; }

 private:
  void encode(AVFrame* frame) {
    int err = avcodec_send_frame(ctx_.get(), frame);
    YOLOCU_CHECK(err >= 0, kInternal, path_, ": encoding failed: ", av_error_string(err));
    for (;;) {
      err = avcodec_receive_packet(ctx_.get(), packet_.get());
      if (err == AVERROR(EAGAIN) || err == AVERROR_EOF) return;
      YOLOCU_CHECK(err >= 0, kInternal, path_, ": encoding failed: ", av_error_string(err));
      if (packet_->duration <= 0) packet_->duration = 1;  // one frame: else MP4's edit list hides the last one
      av_packet_rescale_ts(packet_.get(), ctx_->time_base, stream_->time_base);
      packet_->stream_index = stream_->index;
      err = av_interleaved_write_frame(oc_.get(), packet_.get());  // takes the packet's reference
      check_io(err >= 0, "write failed", err);
    }
  }

  // The container goes to an AtomicFile (a temporary file beside path_, renamed over it by close()),
  // through an AVIOContext over its descriptor: a failed write keeps its errno for the message.
  void open_output() {
    file_ = std::make_unique<AtomicFile>(path_);
    constexpr int kBufferBytes = 1 << 16;
    auto* buffer = static_cast<unsigned char*>(av_malloc(kBufferBytes));
    YOLOCU_CHECK(buffer, kOutOfMemory, "av_malloc failed");
    oc_->pb = avio_alloc_context(buffer, kBufferBytes, 1, this, nullptr, &FfmpegWriter::write_cb, &FfmpegWriter::seek_cb);
    if (!oc_->pb) av_free(buffer);
    YOLOCU_CHECK(oc_->pb, kOutOfMemory, "avio_alloc_context failed");
  }

  static int write_cb(void* opaque, uint8_t* buf, int size) {
    auto* self = static_cast<FfmpegWriter*>(opaque);
    const int fd = self->file_ ? self->file_->fd() : -1;
    int done = 0;
    while (done < size) {
      const ssize_t n = fd < 0 ? -1 : ::write(fd, buf + done, static_cast<size_t>(size - done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        self->write_errno_ = fd < 0 ? EBADF : n < 0 ? errno : ENOSPC;
        return AVERROR(self->write_errno_);
      }
      done += static_cast<int>(n);
    }
    return size;
  }

  static int64_t seek_cb(void* opaque, int64_t offset, int whence) {
    auto* self = static_cast<FfmpegWriter*>(opaque);
    const int fd = self->file_ ? self->file_->fd() : -1;
    if (fd < 0) return AVERROR(EBADF);
    if (whence & AVSEEK_SIZE) {
      struct stat st {};
      return ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : AVERROR(errno);
    }
    const off_t r = ::lseek(fd, static_cast<off_t>(offset), whence & ~AVSEEK_FORCE);
    return r < 0 ? AVERROR(errno) : static_cast<int64_t>(r);
  }

  // An FFmpeg call that failed: a failed write of ours names the system's reason (ENOSPC, EFBIG,
  // ...) and drops the temporary file; the writer is closed either way.
  void check_io(bool ok, const char* what, int err) {
    if (ok) return;
    closed_ = true;
    if (file_ && write_errno_) file_->fail(write_errno_);
    file_.reset();
    throw Error(ErrorCode::kIo, path_ + ": " + what + ": " + av_error_string(err));
  }

  std::string path_;
  std::unique_ptr<AtomicFile> file_;  // declared before oc_: the muxer goes first
  int write_errno_ = 0;
  std::unique_ptr<AVFormatContext, OutputCloser> oc_;
  AVStream* stream_ = nullptr;  // owned by oc_
  video::CodecContextPtr ctx_;
  video::SwsPtr sws_;
  video::FramePtr yuv_;
  video::PacketPtr packet_;
  std::string encoder_name_, fallback_reason_;
  int in_w_ = 0, in_h_ = 0;
  int64_t frames_ = 0;
  bool header_written_ = false, closed_ = false;
};

}  // namespace

std::unique_ptr<VideoWriter> VideoWriter::open(const std::string& path, int width, int height, double fps,
                                               const VideoWriterOptions& options) {
  return std::make_unique<FfmpegWriter>(path, width, height, fps, options);
}

}  // namespace yolocu
