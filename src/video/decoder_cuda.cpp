// The NVDEC decoder backend: libavcodec's own H.264 / HEVC decoders with FFmpeg's CUDA hwaccel. The
// codec context gets an AV_HWDEVICE_TYPE_CUDA device on the detector's GPU wrapping the CUDA
// runtime's primary context (so that yolocu's kernels can read the pictures; FFmpeg's own
// AV_CUDA_USE_PRIMARY_CONTEXT refuses a primary context the runtime already made active with other
// scheduling flags, which the detector has always done by then) and a get_format that picks
// AV_PIX_FMT_CUDA: pictures come out as NV12 surfaces in device memory, and convert() hands them on
// as VideoFrame{kNv12, kDevice} holding a reference to the AVFrame (no copy). Parsing, reference
// handling and error concealment stay libavcodec's, so the pictures are the CPU decoder's.
// Built when the library has CUDA and FFmpeg (decoder_cuda_off.cpp otherwise).
#include <dlfcn.h>

#include <algorithm>

#include <cuda_runtime_api.h>

extern "C" {
#include <libavutil/hwcontext.h>
#include <libavutil/hwcontext_cuda.h>  // AVCUDADeviceContext (includes the driver API's cuda.h; no libcuda link)
#include <libavutil/pixdesc.h>
}

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "video/bgr_convert_cpu.hpp"
#include "video/decoder.hpp"

namespace yolocu::video {
namespace {

struct BufferUnref {
  void operator()(AVBufferRef* p) const noexcept { av_buffer_unref(&p); }
};
using BufferPtr = std::unique_ptr<AVBufferRef, BufferUnref>;

// NVDEC pictures when the hwaccel is offered; otherwise (the hwaccel failed to initialise for this
// stream, e.g. a profile the GPU lacks) the software format, decoded on the CPU.
AVPixelFormat pick_format(AVCodecContext* ctx, const AVPixelFormat* formats) {
  for (const AVPixelFormat* f = formats; *f != AV_PIX_FMT_NONE; ++f)
    if (*f == AV_PIX_FMT_CUDA) return *f;
  ctx->opaque = reinterpret_cast<void*>(1);  // tells the decoder object that NVDEC refused the stream
  return avcodec_default_get_format(ctx, formats);
}

// The device's stream is destroyed with the device context (its free callback), after the last
// picture of the decoder's frame pool is gone.
void destroy_device_stream(AVHWDeviceContext* ctx) {
  auto* hw = static_cast<AVCUDADeviceContext*>(ctx->hwctx);
  if (hw->stream) (void)cudaStreamDestroy(reinterpret_cast<cudaStream_t>(hw->stream));
  hw->stream = nullptr;
}

// An AV_HWDEVICE_TYPE_CUDA device wrapping the CUDA runtime's primary context of `device` (made
// current on this thread). FFmpeg loads libcuda itself; yolocu reaches the one driver call it needs
// (cuCtxGetCurrent) through the runtime, so the library does not link libcuda.
BufferPtr runtime_cuda_device(int device, const std::string& source) {
  const cudaError_t e = cudaSetDevice(device);
  const cudaError_t f = e == cudaSuccess ? cudaFree(nullptr) : e;  // creates the primary context if needed
  if (f != cudaSuccess) {
    (void)cudaGetLastError();
    detail::fail(ErrorCode::kUnsupported, source, ": no NVDEC: CUDA device ", device, " is not usable (",
                 cudaGetErrorString(f), ")");
  }
  using GetCurrent = CUresult (*)(CUcontext*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CUcontext ctx = nullptr;
  if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || !fn || reinterpret_cast<GetCurrent>(fn)(&ctx) != CUDA_SUCCESS || !ctx) {
    (void)cudaGetLastError();
    detail::fail(ErrorCode::kUnsupported, source, ": no NVDEC: cannot get the CUDA context of device ", device);
  }
  BufferPtr ref(av_hwdevice_ctx_alloc(AV_HWDEVICE_TYPE_CUDA));
  YOLOCU_CHECK(ref, kUnsupported, source, ": no NVDEC: av_hwdevice_ctx_alloc(cuda) failed (FFmpeg without CUDA)");
  auto* hw = static_cast<AVCUDADeviceContext*>(reinterpret_cast<AVHWDeviceContext*>(ref->data)->hwctx);
  hw->cuda_ctx = ctx;    // not owned by FFmpeg: the runtime keeps the primary context
  hw->stream = nullptr;  // NVDEC maps pictures on this stream (DevicePlanes::stream): the legacy default one
  if (nvdec_own_stream_requested()) {  // (decoder.hpp) FFmpeg maps and copies on it
    cudaStream_t s = nullptr;
    YOLOCU_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    hw->stream = reinterpret_cast<CUstream>(s);
    reinterpret_cast<AVHWDeviceContext*>(ref->data)->free = destroy_device_stream;
  }
  clear_last_ffmpeg_log();
  const int err = av_hwdevice_ctx_init(ref.get());
  YOLOCU_CHECK(err >= 0, kUnsupported, source, ": no NVDEC: av_hwdevice_ctx_init(cuda, device ", device,
               ") failed: ", av_error_string(err), ffmpeg_log_suffix(), " (no NVIDIA driver, or no libcuda)");
  return ref;
}

class CudaDecoder final : public Decoder {
 public:
  CudaDecoder(const AVStream& stream, const VideoSourceOptions& options, const std::string& source)
      : cuda_device_(options.cuda_device) {
    const AVCodecParameters& par = *stream.codecpar;
    check_nvdec_stream(par, source);
    const AVCodec* codec = avcodec_find_decoder(par.codec_id);
    YOLOCU_CHECK(codec, kUnsupported, source, ": no decoder for its video codec '", avcodec_get_name(par.codec_id),
                 "' in this FFmpeg");
    bool has_cuda = false;
    for (int i = 0;; ++i) {
      const AVCodecHWConfig* hw = avcodec_get_hw_config(codec, i);
      if (!hw) break;
      if ((hw->methods & AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX) && hw->device_type == AV_HWDEVICE_TYPE_CUDA &&
          hw->pix_fmt == AV_PIX_FMT_CUDA)
        has_cuda = true;
    }
    YOLOCU_CHECK(has_cuda, kUnsupported, source, ": this FFmpeg's ", codec->name,
                 " decoder has no NVDEC hwaccel (FFmpeg built without --enable-nvdec)");
    // FFmpeg loads NVDEC's library only at the first picture: look for it now, to refuse clearly
    void* nvcuvid = dlopen("libnvcuvid.so.1", RTLD_LAZY | RTLD_LOCAL);
    YOLOCU_CHECK(nvcuvid, kUnsupported, source,
                 ": no NVDEC: libnvcuvid.so.1 (the NVIDIA driver's video decoder library) cannot be loaded");
    dlclose(nvcuvid);
    const std::string index = std::to_string(options.cuda_device);
    device_ = runtime_cuda_device(options.cuda_device, source);
    // FFmpeg maps NVDEC pictures on its device's stream
    stream_ = static_cast<const AVCUDADeviceContext*>(reinterpret_cast<const AVHWDeviceContext*>(device_->data)->hwctx)->stream;
    ctx_.reset(avcodec_alloc_context3(codec));
    YOLOCU_CHECK(ctx_, kOutOfMemory, "avcodec_alloc_context3 failed");
    YOLOCU_CHECK(avcodec_parameters_to_context(ctx_.get(), &par) >= 0, kInternal, source,
                 ": avcodec_parameters_to_context failed");
    ctx_->hw_device_ctx = av_buffer_ref(device_.get());
    YOLOCU_CHECK(ctx_->hw_device_ctx, kOutOfMemory, "av_buffer_ref failed");
    ctx_->get_format = pick_format;
    ctx_->opaque = nullptr;
    ctx_->thread_count = 1;  // NVDEC decodes; frame threads would only add surfaces and latency
    // NVDEC creates at most 32 decode surfaces reliably; the stream's references and FFmpeg's
    // margin (5) take the rest, hence at most 16 extra (VideoSourceOptions::max_frames_held)
    ctx_->extra_hw_frames = std::clamp(options.max_frames_held, 0, 16);
    ctx_->pkt_timebase = stream.time_base;
    ctx_->max_pixels = options.limits.max_pixels;  // a mid-stream size change over the limit: refused before allocating
    clear_last_ffmpeg_log();
    const int err = avcodec_open2(ctx_.get(), codec, nullptr);
    YOLOCU_CHECK(err >= 0, kUnsupported, source, ": cannot open the ", codec->name, " decoder with NVDEC: ",
                 av_error_string(err), ffmpeg_log_suffix());
    YOLOCU_CHECK(par.width > 0 && par.height > 0, kParse, source, ": the video stream has no frame size");
    YOLOCU_CHECK(par.width <= options.limits.max_width && par.height <= options.limits.max_height &&
                     int64_t{par.width} * par.height <= options.limits.max_pixels,
                 kOutOfMemory, source, ": frames of ", par.width, "x", par.height, " exceed the decode limits");
    width_ = par.width;
    height_ = par.height;
    description_ = std::string("cuda: NVDEC ") + codec->name + " (libavcodec hwaccel), nv12 on device " + index;
  }

  const std::string& description() const noexcept override { return description_; }
  int send(const AVPacket* packet) override { return avcodec_send_packet(ctx_.get(), packet); }
  int receive(AVFrame* picture) override { return avcodec_receive_frame(ctx_.get(), picture); }

  std::string fallback_note() override {
    if (ctx_->opaque == nullptr || noted_) return {};
    noted_ = true;
    return "NVDEC refused this stream at its first picture" + ffmpeg_log_suffix() + "; decoding it on the CPU";
  }

  void convert(const AVFrame& picture, VideoFrame& out) override {
    if (picture.format != AV_PIX_FMT_CUDA) {  // NVDEC refused the stream: software pictures
      converter_.convert_at_stream_size(picture, ctx_->coded_width, ctx_->coded_height, width_, height_, out.image);
      out.device = VideoFrame::DevicePlanes{};
      out.format = FrameFormat::kBgr24;
      out.location = MemoryLocation::kHost;
      return;
    }
    const auto* frames = picture.hw_frames_ctx ? reinterpret_cast<const AVHWFramesContext*>(picture.hw_frames_ctx->data)
                                               : nullptr;
    YOLOCU_CHECK(frames && frames->sw_format == AV_PIX_FMT_NV12, kUnsupported, "NVDEC delivered ",
                 frames ? av_get_pix_fmt_name(frames->sw_format) : "a picture without frames context",
                 " pictures; only 8-bit 4:2:0 (nv12) is supported");
    FramePtr ref = make_frame();
    YOLOCU_CHECK(av_frame_ref(ref.get(), &picture) == 0, kOutOfMemory, "av_frame_ref failed");
    VideoFrame::DevicePlanes& d = out.device;
    d.d_luma = ref->data[0];
    d.d_chroma = ref->data[1];
    d.pitch_bytes = static_cast<size_t>(ref->linesize[0]);
    d.chroma_pitch_bytes = static_cast<size_t>(ref->linesize[1]);
    d.width = picture.width;
    d.height = picture.height;
    d.cuda_device = cuda_device_;
    // as swscale decides it for cv2.VideoCapture: full range for yuvj streams (color_range JPEG)
    d.range = picture.color_range == AVCOL_RANGE_JPEG ? YuvRange::kFull : YuvRange::kLimited;
    d.stream = stream_;
    d.owner = std::shared_ptr<AVFrame>(ref.release(), FrameFree{});
    out.image = Image();
    out.format = FrameFormat::kNv12;
    out.location = MemoryLocation::kDevice;
  }

 private:
  BufferPtr device_;
  CUstream stream_ = nullptr;  // the device's (nullptr: the legacy default stream)
  CodecContextPtr ctx_;
  BgrConverter converter_;
  int cuda_device_ = 0;
  int width_ = 0, height_ = 0;
  bool noted_ = false;
  std::string description_;
};

}  // namespace

bool cuda_decoder_built() noexcept { return true; }

std::unique_ptr<Decoder> open_cuda_decoder(const AVStream& stream, const VideoSourceOptions& options,
                                           const std::string& source) {
  if (nvdec_sdk_requested()) return open_nvdec_sdk_decoder(stream, options, source);
  return std::make_unique<CudaDecoder>(stream, options, source);
}

}  // namespace yolocu::video
