// NVDEC through the Video Codec SDK's own API (libnvcuvid's parser and decoder): the CUDA decoder
// backend by default (YOLOCU_NVDEC_API=hwaccel: libavcodec's hwaccel, decoder_cuda.cpp, instead).
// FFmpeg stays the demuxer: packets go through libavcodec's h264_mp4toannexb /
// hevc_mp4toannexb bitstream filter into NVIDIA's parser, whose callbacks create the decoder, decode
// the pictures and queue them in display order; receive() maps the next one (an NV12 output surface
// cropped to the display area) and hands it out in place: the AVFrame's buffer unmaps it when its
// last reference goes, with no copy. A stream that changes its frame size gets a new decoder. The
// function tables come from the ffnvcodec headers' loader (libcuda and libnvcuvid opened at run
// time, as FFmpeg opens them).
#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <string>

// the loader's messages would go to stderr: the library never prints (errors carry them instead)
#define FFNV_LOG_FUNC(logctx, msg, ...) ((void)(logctx))
#define FFNV_DEBUG_LOG_FUNC(logctx, msg, ...) ((void)(logctx))
#include <ffnvcodec/dynlink_loader.h>

extern "C" {
#include <libavcodec/bsf.h>
}

#include "core/check.hpp"
#include "video/decoder.hpp"

namespace yolocu::video {
namespace {

struct Api {
  CudaFunctions* cu = nullptr;
  CuvidFunctions* cuvid = nullptr;
  std::string error;  // why the tables could not be had
};

// Loaded once for the process and kept (as FFmpeg keeps its own).
const Api& api() {
  static const Api loaded = [] {
    Api a;
    if (cuda_load_functions(&a.cu, nullptr) != 0) {
      a.error = "libcuda.so.1 (the NVIDIA driver) cannot be loaded";
    } else if (cuvid_load_functions(&a.cuvid, nullptr) != 0) {
      a.error = "libnvcuvid.so.1 (the NVIDIA driver's video decoder library) cannot be loaded";
    } else if (a.cu->cuInit(0) != CUDA_SUCCESS) {
      a.error = "cuInit failed (no usable NVIDIA GPU)";
    }
    return a;
  }();
  return loaded;
}

std::string cu_error(CUresult r) {
  const char* name = nullptr;
  if (api().cu && api().cu->cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(static_cast<int>(r));
}

#define YOLOCU_CU_CHECK(call, what)                                                              \
  do {                                                                                           \
    const CUresult r_ = (call);                                                                  \
    YOLOCU_CHECK(r_ == CUDA_SUCCESS, kInternal, "NVDEC: ", what, " failed: ", cu_error(r_));    \
  } while (0)

// The context current on this thread for a scope (cuvid calls need it).
class ContextScope {
 public:
  explicit ContextScope(CUcontext ctx) { YOLOCU_CU_CHECK(api().cu->cuCtxPushCurrent(ctx), "cuCtxPushCurrent"); }
  ~ContextScope() {
    CUcontext popped = nullptr;
    (void)api().cu->cuCtxPopCurrent(&popped);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
};

// The GPU's primary context (the CUDA runtime's, which yolocu's kernels use) and the stream the
// pictures are mapped on; alive while a session or a picture of the decoder is.
struct Device {
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;  // nullptr: the legacy default stream
  ~Device() {
    if (stream) {
      ContextScope scope(ctx);
      (void)api().cu->cuStreamDestroy(stream);
    }
    if (ctx) (void)api().cu->cuDevicePrimaryCtxRelease(device);
  }
};

// The decoder of the stream's sequence; alive while its pictures are mapped.
struct Session {
  std::shared_ptr<Device> device;
  CUvideoctxlock lock = nullptr;
  CUvideodecoder decoder = nullptr;
  unsigned coded_width = 0, coded_height = 0;
  int left = 0, top = 0, width = 0, height = 0;  // the display area: the pictures' size
  int surfaces = 0;
  bool full_range = false;
  std::atomic<int> mapped{0};  // pictures mapped now (for the message when mapping fails)
  ~Session() {
    try {
      ContextScope scope(device->ctx);
      if (decoder) (void)api().cuvid->cuvidDestroyDecoder(decoder);
      if (lock) (void)api().cuvid->cuvidCtxLockDestroy(lock);
    } catch (...) {  // the context cannot be made current: the driver is gone, nothing to free
    }
  }
};

// A mapped picture: unmapped when the last AVFrame holding it lets go.
struct Mapping {
  std::shared_ptr<Session> session;
  unsigned long long ptr = 0;
  static void release(void*, uint8_t* data) {
    auto* m = reinterpret_cast<Mapping*>(data);
    try {
      ContextScope scope(m->session->device->ctx);
      (void)api().cuvid->cuvidUnmapVideoFrame(m->session->decoder, m->ptr);
    } catch (...) {
    }
    --m->session->mapped;
    delete m;
  }
};

struct BsfFree {
  void operator()(AVBSFContext* p) const noexcept { av_bsf_free(&p); }
};

// Decode surfaces beyond the stream's minimum: the pictures waiting in the display queue keep theirs
// (as FFmpeg's cuviddec keeps its queue below its surface count).
constexpr int kExtraDecodeSurfaces = 8;
constexpr int kMaxDecodeSurfaces = 32;  // what NVDEC creates reliably (as decoder_cuda.cpp notes for FFmpeg's pool)

class SdkDecoder final : public Decoder {
 public:
  SdkDecoder(const AVStream& stream, const VideoSourceOptions& options, const std::string& source)
      : source_(source), limits_(options.limits), cuda_device_(options.cuda_device),
        output_surfaces_(std::clamp(options.max_frames_held + 2, 2, 32)),
        live_(source.find("://") != std::string::npos) {
    const Api& a = api();
    YOLOCU_CHECK(a.error.empty(), kUnsupported, source, ": no NVDEC: ", a.error);
    const AVCodecParameters& par = *stream.codecpar;
    check_nvdec_stream(par, source);
    open_device();
    open_filter(stream);
    CUVIDPARSERPARAMS p{};
    p.CodecType = par.codec_id == AV_CODEC_ID_HEVC ? cudaVideoCodec_HEVC : cudaVideoCodec_H264;
    p.ulMaxNumDecodeSurfaces = 1;  // the sequence callback returns the real count
    p.ulMaxDisplayDelay = live_ ? 0 : 1;  // live: each picture leaves with its own packet
    p.pUserData = this;
    p.pfnSequenceCallback = on_sequence;
    p.pfnDecodePicture = on_decode;
    p.pfnDisplayPicture = on_display;
    {
      ContextScope scope(device_->ctx);
      YOLOCU_CU_CHECK(a.cuvid->cuvidCreateVideoParser(&parser_, &p), "cuvidCreateVideoParser");
    }
    // parameter sets that only the container carries (an RTSP stream's SDP) reach the parser first
    const AVCodecParameters* out = bsf_->par_out;
    if (out->extradata_size > 3 && out->extradata[0] == 0 && out->extradata[1] == 0) parse(out->extradata, out->extradata_size, nullptr);
    description_ = std::string("cuda: NVDEC ") + avcodec_get_name(par.codec_id) +
                   " (Video Codec SDK parser and decoder), nv12 on device " + std::to_string(cuda_device_);
  }

  ~SdkDecoder() override {
    if (parser_) {
      try {
        ContextScope scope(device_->ctx);
        (void)api().cuvid->cuvidDestroyVideoParser(parser_);
      } catch (...) {
      }
    }
  }

  const std::string& description() const noexcept override { return description_; }

  int send(const AVPacket* packet) override {
    decode_failed_ = false;
    if (packet) {
      PacketPtr ref = make_packet();
      if (av_packet_ref(ref.get(), packet) < 0) return AVERROR(ENOMEM);
      const int r = av_bsf_send_packet(bsf_.get(), ref.get());
      if (r < 0) return r;
    } else {
      (void)av_bsf_send_packet(bsf_.get(), nullptr);
    }
    PacketPtr out = make_packet();
    while (av_bsf_receive_packet(bsf_.get(), out.get()) == 0) {
      parse(out->data, out->size, out.get());
      av_packet_unref(out.get());
    }
    if (!packet) {
      parse(nullptr, 0, nullptr);
      eof_ = true;
    }
    return decode_failed_ ? AVERROR_INVALIDDATA : 0;
  }

  int receive(AVFrame* picture) override {
    if (queue_.empty()) return eof_ ? AVERROR_EOF : AVERROR(EAGAIN);
    const Displayed d = queue_.front();
    queue_.pop_front();
    const Session& s = *d.session;
    CUVIDPROCPARAMS vpp{};
    vpp.progressive_frame = d.info.progressive_frame;
    vpp.top_field_first = d.info.top_field_first;
    vpp.unpaired_field = d.info.repeat_first_field < 0;
    vpp.output_stream = s.device->stream;
    unsigned long long ptr = 0;
    unsigned int pitch = 0;
    CUresult r = CUDA_SUCCESS;
    {
      ContextScope scope(s.device->ctx);
      r = api().cuvid->cuvidMapVideoFrame(s.decoder, d.info.picture_index, &ptr, &pitch, &vpp);
    }
    // not a corrupt picture: the frames held (or the device) are the problem, so the source stops
    YOLOCU_CHECK(r == CUDA_SUCCESS, kInternal, source_, ": NVDEC could not map a picture (cuvidMapVideoFrame: ",
                 cu_error(r), ") with ", d.session->mapped.load(), " of ", output_surfaces_,
                 " output surfaces mapped (frames held by the consumer; VideoSourceOptions::max_frames_held)");
    ++d.session->mapped;
    auto* m = new Mapping{d.session, ptr};
    picture->buf[0] = av_buffer_create(reinterpret_cast<uint8_t*>(m), sizeof(Mapping), Mapping::release, nullptr, 0);
    if (!picture->buf[0]) {
      Mapping::release(nullptr, reinterpret_cast<uint8_t*>(m));
      return AVERROR(ENOMEM);
    }
    picture->format = AV_PIX_FMT_CUDA;
    picture->width = s.width;
    picture->height = s.height;
    picture->data[0] = reinterpret_cast<uint8_t*>(ptr);
    // NV12: the chroma rows follow the luma rows of the (even) surface height
    picture->data[1] = reinterpret_cast<uint8_t*>(ptr + static_cast<unsigned long long>(pitch) * ((s.height + 1) & ~1));
    picture->linesize[0] = picture->linesize[1] = static_cast<int>(pitch);
    picture->pts = picture->best_effort_timestamp = timestamps_ ? d.info.timestamp : AV_NOPTS_VALUE;
    picture->color_range = s.full_range ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG;
    return 0;
  }

  void convert(const AVFrame& picture, VideoFrame& out) override {
    FramePtr ref = make_frame();
    YOLOCU_CHECK(av_frame_ref(ref.get(), &picture) == 0, kOutOfMemory, "av_frame_ref failed");
    VideoFrame::DevicePlanes& d = out.device;
    d.d_luma = ref->data[0];
    d.d_chroma = ref->data[1];
    d.pitch_bytes = d.chroma_pitch_bytes = static_cast<size_t>(ref->linesize[0]);
    d.width = picture.width;
    d.height = picture.height;
    d.cuda_device = cuda_device_;
    d.range = picture.color_range == AVCOL_RANGE_JPEG ? YuvRange::kFull : YuvRange::kLimited;
    d.stream = device_->stream;
    d.owner = std::shared_ptr<AVFrame>(ref.release(), FrameFree{});
    out.image = Image();
    out.format = FrameFormat::kNv12;
    out.location = MemoryLocation::kDevice;
  }

 private:
  struct Displayed {
    std::shared_ptr<Session> session;
    CUVIDPARSERDISPINFO info;
  };

  void open_device() {
    const Api& a = api();
    device_ = std::make_shared<Device>();
    YOLOCU_CHECK(a.cu->cuDeviceGet(&device_->device, cuda_device_) == CUDA_SUCCESS, kUnsupported, source_,
                 ": no NVDEC: CUDA device ", cuda_device_, " is not there");
    CUcontext ctx = nullptr;
    YOLOCU_CU_CHECK(a.cu->cuDevicePrimaryCtxRetain(&ctx, device_->device), "cuDevicePrimaryCtxRetain");
    device_->ctx = ctx;
    if (nvdec_own_stream_requested()) {
      ContextScope scope(ctx);
      YOLOCU_CU_CHECK(a.cu->cuStreamCreate(&device_->stream, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
    }
  }

  // Annex B for the parser: the container's length-prefixed NAL units (MP4, Matroska) rewritten by
  // libavcodec's own filter, parameter sets inserted; Annex B input passes as it is.
  void open_filter(const AVStream& stream) {
    const char* name = stream.codecpar->codec_id == AV_CODEC_ID_HEVC ? "hevc_mp4toannexb" : "h264_mp4toannexb";
    const AVBitStreamFilter* f = av_bsf_get_by_name(name);
    YOLOCU_CHECK(f, kUnsupported, source_, ": this FFmpeg lacks the ", name, " bitstream filter");
    AVBSFContext* ctx = nullptr;
    YOLOCU_CHECK(av_bsf_alloc(f, &ctx) == 0, kOutOfMemory, "av_bsf_alloc failed");
    bsf_.reset(ctx);
    YOLOCU_CHECK(avcodec_parameters_copy(ctx->par_in, stream.codecpar) >= 0, kOutOfMemory, "avcodec_parameters_copy failed");
    ctx->time_base_in = stream.time_base;
    const int err = av_bsf_init(ctx);
    YOLOCU_CHECK(err >= 0, kParse, source_, ": ", name, ": ", av_error_string(err));
  }

  // One packet into the parser (nullptr: the end of the stream); its callbacks run inside. A fatal
  // problem of a callback (the stream over the limits, a decoder NVDEC cannot create) is thrown here.
  void parse(const uint8_t* data, int size, const AVPacket* pkt) {
    CUVIDSOURCEDATAPACKET p{};
    p.payload = data;
    p.payload_size = static_cast<tcu_ulong>(size);
    if (!data) {
      p.flags = CUVID_PKT_ENDOFSTREAM;
    } else if (pkt) {
      p.flags = CUVID_PKT_ENDOFPICTURE;  // a demuxed packet holds one whole picture
      const int64_t ts = pkt->pts != AV_NOPTS_VALUE ? pkt->pts : pkt->dts;
      if (ts != AV_NOPTS_VALUE) {
        p.flags |= CUVID_PKT_TIMESTAMP;
        p.timestamp = ts;
        timestamps_ = true;
      }
    }
    CUresult r = CUDA_SUCCESS;
    {
      ContextScope scope(device_->ctx);
      r = api().cuvid->cuvidParseVideoData(parser_, &p);
    }
    if (!fatal_.empty()) {
      const std::string msg = fatal_;
      fatal_.clear();
      detail::fail(fatal_code_, source_, ": ", msg);
    }
    if (r != CUDA_SUCCESS) decode_failed_ = true;
  }

  static int CUDAAPI on_sequence(void* self, CUVIDEOFORMAT* f) { return static_cast<SdkDecoder*>(self)->sequence(*f); }
  static int CUDAAPI on_decode(void* self, CUVIDPICPARAMS* p) { return static_cast<SdkDecoder*>(self)->decode(p); }
  static int CUDAAPI on_display(void* self, CUVIDPARSERDISPINFO* d) {  // (nothing may throw through the parser)
    auto* me = static_cast<SdkDecoder*>(self);
    try {
      if (d && me->session_) me->queue_.push_back({me->session_, *d});
      return 1;
    } catch (const std::exception& e) {
      me->fatal_ = e.what(), me->fatal_code_ = ErrorCode::kOutOfMemory;
      return 0;
    }
  }

  int sequence(const CUVIDEOFORMAT& f) {
    try {
      return sequence_or_throw(f);
    } catch (const Error& e) {
      fatal_ = e.what(), fatal_code_ = e.code();
    } catch (const std::exception& e) {
      fatal_ = e.what(), fatal_code_ = ErrorCode::kInternal;
    }
    return 0;  // the parser stops
  }

  int sequence_or_throw(const CUVIDEOFORMAT& f) {
    YOLOCU_CHECK(f.chroma_format == cudaVideoChromaFormat_420 && f.bit_depth_luma_minus8 == 0, kUnsupported,
                 "NVDEC decoding in yolocu covers 8-bit 4:2:0 video");
    const int left = f.display_area.left, top = f.display_area.top;
    const int w = f.display_area.right - left, h = f.display_area.bottom - top;
    const int64_t cw = f.coded_width, ch = f.coded_height;
    YOLOCU_CHECK(w > 0 && h > 0, kParse, "a sequence without a display area");
    YOLOCU_CHECK(cw <= limits_.max_width && ch <= limits_.max_height && cw * ch <= limits_.max_pixels, kOutOfMemory,
                 "frames of ", cw, "x", ch, " exceed the decode limits (DecodeLimits max_width ", limits_.max_width,
                 ", max_height ", limits_.max_height, ", max_pixels ", limits_.max_pixels, ")");
    if (session_ && session_->coded_width == f.coded_width && session_->coded_height == f.coded_height &&
        session_->left == left && session_->top == top && session_->width == w && session_->height == h)
      return session_->surfaces;  // the same sequence again (parameter sets repeated)
    // The first sequence, or a new frame size mid-way: a decoder of its own. The parser has displayed
    // the old sequence's pictures by now (a new sequence starts at an IDR picture, before which every
    // picture is output); those still queued or held keep the old decoder alive through their Session.
    auto s = std::make_shared<Session>();
    s->device = device_;
    s->coded_width = f.coded_width;
    s->coded_height = f.coded_height;
    s->left = left, s->top = top, s->width = w, s->height = h;
    s->surfaces = std::max<int>(f.min_num_decode_surfaces, std::min(f.min_num_decode_surfaces + kExtraDecodeSurfaces, kMaxDecodeSurfaces));
    s->full_range = f.video_signal_description.video_full_range_flag != 0;
    CUVIDDECODECREATEINFO ci{};
    ci.ulWidth = f.coded_width;
    ci.ulHeight = f.coded_height;
    ci.ulNumDecodeSurfaces = static_cast<tcu_ulong>(s->surfaces);
    ci.CodecType = f.codec;
    ci.ChromaFormat = f.chroma_format;
    ci.ulCreationFlags = cudaVideoCreate_PreferCUVID;
    ci.ulMaxWidth = f.coded_width;
    ci.ulMaxHeight = f.coded_height;
    ci.display_area = {static_cast<short>(left), static_cast<short>(top), static_cast<short>(f.display_area.right),
                       static_cast<short>(f.display_area.bottom)};
    ci.OutputFormat = cudaVideoSurfaceFormat_NV12;
    ci.DeinterlaceMode = cudaVideoDeinterlaceMode_Weave;  // fields woven, as libavcodec's frames are
    ci.ulTargetWidth = static_cast<tcu_ulong>(w);
    ci.ulTargetHeight = static_cast<tcu_ulong>(h);
    ci.ulNumOutputSurfaces = static_cast<tcu_ulong>(output_surfaces_);
    ContextScope scope(device_->ctx);
    YOLOCU_CU_CHECK(api().cuvid->cuvidCtxLockCreate(&s->lock, device_->ctx), "cuvidCtxLockCreate");
    ci.vidLock = s->lock;
    const CUresult r = api().cuvid->cuvidCreateDecoder(&s->decoder, &ci);
    YOLOCU_CHECK(r == CUDA_SUCCESS, kUnsupported, "NVDEC cannot decode this stream (", w, "x", h, ", ", s->surfaces,
                 " surfaces): cuvidCreateDecoder: ", cu_error(r));
    session_ = std::move(s);
    return session_->surfaces;
  }

  int decode(CUVIDPICPARAMS* p) {
    if (!session_) return 0;
    if (api().cuvid->cuvidDecodePicture(session_->decoder, p) != CUDA_SUCCESS) {
      decode_failed_ = true;
      return 0;
    }
    return 1;
  }

  std::string source_;
  DecodeLimits limits_;
  int cuda_device_ = 0;
  int output_surfaces_ = 2;
  bool live_ = false;
  std::shared_ptr<Device> device_;
  std::unique_ptr<AVBSFContext, BsfFree> bsf_;
  CUvideoparser parser_ = nullptr;
  std::shared_ptr<Session> session_;
  std::deque<Displayed> queue_;  // displayed by the parser, not yet handed out
  bool timestamps_ = false;      // a packet had a timestamp (else the pictures have none)
  bool eof_ = false;
  bool decode_failed_ = false;
  std::string fatal_;
  ErrorCode fatal_code_ = ErrorCode::kInternal;
  std::string description_;
};

}  // namespace

bool nvdec_sdk_built() noexcept { return true; }

std::unique_ptr<Decoder> open_nvdec_sdk_decoder(const AVStream& stream, const VideoSourceOptions& options,
                                                const std::string& source) {
  return std::make_unique<SdkDecoder>(stream, options, source);
}

}  // namespace yolocu::video
