// CudaJpegDecoder: batched JPEG decoding with nvJPEG into device BGR images (host orchestration
// only; nvJPEG runs the kernels and the hardware decoder).
//
// Per call: (1) every image's header is read on the host with the CPU decoder's own libjpeg code
// (plan_gpu_decode: same errors, limits checked before allocating) and routed to nvJPEG or to the
// CPU decoder; the CPU decodes run first, so that a bad file throws before any GPU work is
// enqueued. (2) One device buffer holds all output images (grow-only); the CPU-decoded ones are
// uploaded into it. (3) The nvJPEG images go in one nvjpegDecodeBatched call (hardware backend, or
// the default backend on GPUs without one); on a hardware handle, what the hardware cannot do
// (progressive JPEGs) takes the decoupled default-backend decoder, one image at a time. An image
// nvJPEG refuses at any step is decoded by the CPU decoder instead (which reports the error when it
// has one), so the GPU path never rejects what the CPU path accepts. (4) With cpu_share, every k-th
// image of the nvJPEG list is decoded on a CPU thread of its own during the nvJPEG call instead,
// and uploaded on a side stream that the decode stream waits for.
#include "yolocu/image_decode_cuda.hpp"

#include <cuda_runtime.h>

#include <cmath>
#include <future>
#include <utility>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "core/device_budget.hpp"
#include "preprocess/image_decode_plan.hpp"

#ifdef YOLOCU_WITH_NVJPEG
#include <nvjpeg.h>

#include "preprocess/nvjpeg_allocators.hpp"
#endif

namespace yolocu {

bool nvjpeg_available() noexcept {
#ifdef YOLOCU_WITH_NVJPEG
  return true;
#else
  return false;
#endif
}

PinnedAllocationCounts nvjpeg_pinned_allocation_counts() noexcept {
#ifdef YOLOCU_WITH_NVJPEG
  return detail::PinnedCache::counts();
#else
  return {};
#endif
}

#ifdef YOLOCU_WITH_NVJPEG

namespace {

const char* nvjpeg_status_name(nvjpegStatus_t s) {
  switch (s) {
    case NVJPEG_STATUS_SUCCESS: return "NVJPEG_STATUS_SUCCESS";
    case NVJPEG_STATUS_NOT_INITIALIZED: return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG: return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM: return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
  }
  return "unknown nvJPEG status";
}

// Set-up calls: a failure throws kCuda naming the call (kOutOfMemory for the allocator).
#define YOLOCU_NVJPEG_CHECK(stmt)                                                                        \
  do {                                                                                                   \
    const nvjpegStatus_t s_ = (stmt);                                                                    \
    if (s_ != NVJPEG_STATUS_SUCCESS)                                                                     \
      ::yolocu::detail::fail(s_ == NVJPEG_STATUS_ALLOCATOR_FAILURE ? ::yolocu::ErrorCode::kOutOfMemory \
                                                                   : ::yolocu::ErrorCode::kCuda,       \
                             __FILE__, ":", __LINE__, ": ", #stmt, ": ", nvjpeg_status_name(s_));       \
  } while (0)

constexpr size_t kPitchAlign = 128;   // row pitch of the output images, bytes
constexpr size_t kOffsetAlign = 256;  // start of each image in the output buffer

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// The decoded-image buffer: grown for a larger call than ever before (and a quarter more, so that
// calls of slightly larger images do not each reallocate: cudaFree waits for the whole device),
// shrunk when a call needs under a quarter of a buffer over `shrink_above`. Every byte is charged
// to the budget before cudaMalloc and refunded on free.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }
  void set_budget(detail::DeviceBudget* budget, size_t shrink_above) {
    budget_ = budget;
    shrink_above_ = shrink_above;
  }
  void reserve(size_t bytes) {
    const bool shrink = size_ > shrink_above_ && bytes < size_ / 4;
    if (bytes <= size_ && !shrink) return;
    release();  // synchronises the device: no earlier call's work still writes the old buffer
    if (!shrink) bytes += bytes / 4;
    if (budget_ != nullptr) budget_->charge(bytes, "the nvJPEG decoder's output buffer for the decoded images");
    const cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      ptr_ = nullptr;
      if (budget_ != nullptr) budget_->refund(bytes);
      detail::fail(ErrorCode::kOutOfMemory, "CudaJpegDecoder: cannot allocate ", bytes,
                   " bytes of device memory for the decoded images: ", cudaGetErrorString(e));
    }
    size_ = bytes;
  }
  uint8_t* get() const { return static_cast<uint8_t*>(ptr_); }
  size_t size() const { return size_; }

 private:
  void release() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    if (budget_ != nullptr && size_ > 0) budget_->refund(size_);
    ptr_ = nullptr;
    size_ = 0;
  }
  void* ptr_ = nullptr;
  size_t size_ = 0;
  detail::DeviceBudget* budget_ = nullptr;
  size_t shrink_above_ = SIZE_MAX;
};

}  // namespace

struct CudaJpegDecoder::Impl {
  CudaJpegDecoderOptions options;
  std::string backend;
  bool hardware = false;
  bool interpolated = false;  // NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION accepted
  cudaMemPool_t pool = nullptr;      // nvJPEG's device allocations (nvjpeg_allocators.hpp)
  detail::PinnedCache pinned_cache;  // nvJPEG's pinned host allocations
  nvjpegDevAllocatorV2_t dev_allocator{};
  nvjpegPinnedAllocatorV2_t pinned_allocator{};
  nvjpegHandle_t handle = nullptr;
  nvjpegJpegState_t batched_state = nullptr;  // nvjpegDecodeBatched
  int batched_size = -1;                      // the size it was initialised for (-1: re-initialise)
  // power_of_two_lists: index k, lists of 2^k images (null until the first such list)
  std::vector<nvjpegJpegState_t> pow2_states;
  std::vector<int> pow2_sizes;
  // the decoupled default-backend decoder (hardware handles: what the hardware cannot decode)
  nvjpegJpegDecoder_t decoder = nullptr;
  nvjpegJpegState_t decoupled_state = nullptr;
  nvjpegBufferPinned_t pinned[2] = {nullptr, nullptr};
  nvjpegBufferDevice_t device_buffer = nullptr;
  nvjpegJpegStream_t streams[2] = {nullptr, nullptr};
  nvjpegDecodeParams_t params = nullptr;
  std::unique_ptr<detail::DeviceBudget> own_budget;  // when options.device_budget is null
  DeviceBuffer out;  // after own_budget: refunds to it on destruction
  // cpu_share: the CPU-decoded share goes up on a stream of its own (a copy from pageable memory on
  // the decode stream would wait for nvJPEG's work), which the decode stream then waits for.
  cudaStream_t side = nullptr;
  cudaEvent_t side_done = nullptr;
  JpegDecodeCounts totals;
  std::string last_refusal;  // the last nvJPEG call that refused an image, and its status

  // True on success; else records the refusal (last_refusal) and returns false.
  bool ok(nvjpegStatus_t s, const char* call, const EncodedImage& im) {
    if (s == NVJPEG_STATUS_SUCCESS) return true;
    last_refusal = im.name + ": " + call + ": " + nvjpeg_status_name(s);
    return false;
  }

  // One nvjpegDecodeBatched call over m images on `state`, initialised for m first unless
  // `state_size` says it is; false (the state to be initialised again) when nvJPEG refuses.
  bool decode_list(nvjpegJpegState_t state, int& state_size, const unsigned char* const* data, const size_t* lengths,
                   nvjpegImage_t* dst, int m, const EncodedImage& first, cudaStream_t stream, JpegDecodeCounts& counts) {
    if (state_size != m) {
      ++counts.batched_inits;
      if (!ok(nvjpegDecodeBatchedInitialize(handle, state, m, 1, NVJPEG_OUTPUT_BGRI), "nvjpegDecodeBatchedInitialize",
              first)) {
        state_size = -1;
        return false;
      }
      state_size = m;
    }
    if (!ok(nvjpegDecodeBatched(handle, state, data, lengths, dst, stream), "nvjpegDecodeBatched (a list from)", first)) {
      state_size = -1;  // a failed list is reset by the next initialisation
      return false;
    }
    return true;
  }

  explicit Impl(const CudaJpegDecoderOptions& o) : options(o) {
    try {
      init(o);
    } catch (...) {
      release();  // a destructor does not run for a constructor that throws
      throw;
    }
  }
  ~Impl() { release(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void init(const CudaJpegDecoderOptions& o) {
    YOLOCU_CHECK(o.device >= 0, kInvalidArgument, "CudaJpegDecoder: device must be >= 0, got ", o.device);
    YOLOCU_CHECK(o.cpu_share >= 0.f && o.cpu_share <= 0.9f, kInvalidArgument,
                 "CudaJpegDecoder: cpu_share must be in [0, 0.9], got ", o.cpu_share);
    validate_decode_limits(o.limits, "CudaJpegDecoderOptions::limits");
    detail::DeviceBudget* budget = o.device_budget;
    if (budget == nullptr) {
      own_budget = std::make_unique<detail::DeviceBudget>(o.max_device_memory, "CudaJpegDecoderOptions::max_device_memory");
      budget = own_budget.get();
    }
    out.set_budget(budget, o.shrink_above_bytes);
    YOLOCU_CUDA_CHECK(cudaSetDevice(o.device));
    pool = detail::make_nvjpeg_device_pool(o.device);
    dev_allocator = detail::nvjpeg_device_allocator(pool);
    pinned_allocator = detail::nvjpeg_pinned_allocator(&pinned_cache);
    // The hardware backend when the GPU has one (else NVJPEG_STATUS_ARCH_MISMATCH), with
    // interpolated chroma upsampling when asked for and accepted, else nearest (nvJPEG's default).
    nvjpegStatus_t last = NVJPEG_STATUS_SUCCESS;
    auto create = [&](nvjpegBackend_t b, unsigned flags) {
      nvjpegHandle_t h = nullptr;  // kept only on success
      last = nvjpegCreateExV2(b, &dev_allocator, &pinned_allocator, flags, &h);
      if (last == NVJPEG_STATUS_SUCCESS) handle = h;
      return last == NVJPEG_STATUS_SUCCESS;
    };
    const unsigned interp = NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION;
    for (const nvjpegBackend_t b : {NVJPEG_BACKEND_HARDWARE, NVJPEG_BACKEND_DEFAULT}) {
      if (b == NVJPEG_BACKEND_HARDWARE && !o.use_hardware) continue;
      if (o.interpolated_upsampling && create(b, interp)) {
        interpolated = true;
      } else if (!create(b, NVJPEG_FLAGS_DEFAULT)) {
        if (b == NVJPEG_BACKEND_HARDWARE) continue;
        detail::fail(last == NVJPEG_STATUS_ALLOCATOR_FAILURE ? ErrorCode::kOutOfMemory : ErrorCode::kCuda,
                     "CudaJpegDecoder: nvjpegCreateEx (default backend) on CUDA device ", o.device, ": ",
                     nvjpeg_status_name(last));
      }
      hardware = b == NVJPEG_BACKEND_HARDWARE;
      backend = hardware ? "hardware" : "hybrid";
      break;
    }
    YOLOCU_NVJPEG_CHECK(nvjpegJpegStateCreate(handle, &batched_state));
    if (o.cpu_share > 0) {
      YOLOCU_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
      YOLOCU_CUDA_CHECK(cudaEventCreateWithFlags(&side_done, cudaEventDisableTiming));
    }
    for (auto& s : streams) YOLOCU_NVJPEG_CHECK(nvjpegJpegStreamCreate(handle, &s));
    if (hardware) {
      YOLOCU_NVJPEG_CHECK(nvjpegDecoderCreate(handle, NVJPEG_BACKEND_DEFAULT, &decoder));
      YOLOCU_NVJPEG_CHECK(nvjpegDecoderStateCreate(handle, decoder, &decoupled_state));
      for (auto& p : pinned) YOLOCU_NVJPEG_CHECK(nvjpegBufferPinnedCreate(handle, nullptr, &p));
      YOLOCU_NVJPEG_CHECK(nvjpegBufferDeviceCreate(handle, nullptr, &device_buffer));
      YOLOCU_NVJPEG_CHECK(nvjpegDecodeParamsCreate(handle, &params));
      YOLOCU_NVJPEG_CHECK(nvjpegDecodeParamsSetOutputFormat(params, NVJPEG_OUTPUT_BGRI));
      YOLOCU_NVJPEG_CHECK(nvjpegStateAttachDeviceBuffer(decoupled_state, device_buffer));
    }
  }

  void release() noexcept {
    // Destruction order: what refers to the handle first, the handle last. Errors are ignored.
    if (params) nvjpegDecodeParamsDestroy(params);
    for (auto s : streams)
      if (s) nvjpegJpegStreamDestroy(s);
    if (decoupled_state) nvjpegJpegStateDestroy(decoupled_state);
    for (auto p : pinned)
      if (p) nvjpegBufferPinnedDestroy(p);
    if (device_buffer) nvjpegBufferDeviceDestroy(device_buffer);
    if (decoder) nvjpegDecoderDestroy(decoder);
    if (batched_state) nvjpegJpegStateDestroy(batched_state);
    for (auto s : pow2_states)
      if (s) nvjpegJpegStateDestroy(s);
    pow2_states.clear();
    if (handle) nvjpegDestroy(handle);
    if (side) cudaStreamSynchronize(side);
    if (side_done) cudaEventDestroy(side_done);
    if (side) cudaStreamDestroy(side);
    side = nullptr, side_done = nullptr;
    if (pool) cudaMemPoolDestroy(pool);  // after the handle: its buffers go back first
    pool = nullptr;
    pinned_cache.clear();
    params = nullptr, decoupled_state = nullptr, device_buffer = nullptr, decoder = nullptr;
    batched_state = nullptr, handle = nullptr;
    streams[0] = streams[1] = nullptr;
    pinned[0] = pinned[1] = nullptr;
  }

  // Which nvJPEG path takes a planned-for-GPU image: 0 batched (hardware or default backend),
  // 1 decoupled (hardware handles: what the hardware cannot do), -1 refused (CPU fallback). The
  // frame size nvJPEG reads must be libjpeg's, or the output slot would not fit.
  int nvjpeg_path(const EncodedImage& im, const detail::DecodePlan& plan) {
    const auto* d = static_cast<const unsigned char*>(im.data);
    if (!ok(nvjpegJpegStreamParseHeader(handle, d, im.size, streams[0]), "nvjpegJpegStreamParseHeader", im)) return -1;
    unsigned int w = 0, h = 0, comps = 0;
    if (!ok(nvjpegJpegStreamGetFrameDimensions(streams[0], &w, &h), "nvjpegJpegStreamGetFrameDimensions", im) ||
        !ok(nvjpegJpegStreamGetComponentsNum(streams[0], &comps), "nvjpegJpegStreamGetComponentsNum", im))
      return -1;
    if (w != static_cast<unsigned>(plan.width) || h != static_cast<unsigned>(plan.height) || (comps != 1 && comps != 3)) {
      last_refusal = im.name + ": nvJPEG reads " + std::to_string(w) + "x" + std::to_string(h) + "x" +
                     std::to_string(comps) + ", libjpeg " + std::to_string(plan.width) + "x" + std::to_string(plan.height);
      return -1;
    }
    if (!hardware) return 0;
    int unsupported = 1;  // nvjpegDecodeBatchedSupported: 0 = the hardware decodes it
    if (!ok(nvjpegDecodeBatchedSupported(handle, streams[0], &unsupported), "nvjpegDecodeBatchedSupported", im)) return 1;
    return unsupported == 0 ? 0 : 1;
  }

  // The decoupled default-backend decode of one image into `dst` (torchvision's pattern: two
  // pinned buffers, the stream synchronised before the host-to-device phase). False: nvJPEG refused.
  bool decode_decoupled(const EncodedImage& im, nvjpegImage_t* dst, int k, cudaStream_t stream) {
    const int b = k & 1;
    const auto* d = static_cast<const unsigned char*>(im.data);
    if (!ok(nvjpegJpegStreamParse(handle, d, im.size, 0, 0, streams[b]), "nvjpegJpegStreamParse", im)) return false;
    if (!ok(nvjpegStateAttachPinnedBuffer(decoupled_state, pinned[b]), "nvjpegStateAttachPinnedBuffer", im)) return false;
    if (!ok(nvjpegDecodeJpegHost(handle, decoder, decoupled_state, params, streams[b]), "nvjpegDecodeJpegHost", im))
      return false;
    YOLOCU_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (!ok(nvjpegDecodeJpegTransferToDevice(handle, decoder, decoupled_state, streams[b], stream),
            "nvjpegDecodeJpegTransferToDevice", im))
      return false;
    return ok(nvjpegDecodeJpegDevice(handle, decoder, decoupled_state, dst, stream), "nvjpegDecodeJpegDevice", im);
  }

  // Waits for the images decoded on CPU threads (every job finishes before anything throws; the
  // first error is rethrown) and uploads them on the side stream, which `stream` then waits for.
  void finish_cpu_share(const std::vector<EncodedImage>& images, const std::vector<size_t>& shared,
                        std::vector<std::future<Image>>& shared_jobs, const std::vector<ImageView>& views,
                        cudaStream_t stream, JpegDecodeCounts& counts) {
    std::vector<Image> done(shared.size());
    std::exception_ptr first_error;
    for (size_t s_ = 0; s_ < shared.size(); ++s_) {  // every job finishes before anything throws
      try {
        done[s_] = shared_jobs[s_].get();
      } catch (...) {
        if (!first_error) first_error = std::current_exception();
      }
    }
    if (first_error) std::rethrow_exception(first_error);
    for (size_t s_ = 0; s_ < shared.size(); ++s_) {
      const size_t i = shared[s_];
      const Image& im = done[s_];
      YOLOCU_CHECK(im.width() == views[i].width && im.height() == views[i].height, kInternal, images[i].name,
                   ": the CPU decoder's size ", im.width(), "x", im.height(), " differs from the header's ",
                   views[i].width, "x", views[i].height);
      YOLOCU_CUDA_CHECK(cudaMemcpy2DAsync(const_cast<uint8_t*>(views[i].data), views[i].pitch_bytes, im.data(),
                                          im.pitch_bytes(), im.pitch_bytes(), static_cast<size_t>(im.height()),
                                          cudaMemcpyHostToDevice, side));
    }
    YOLOCU_CUDA_CHECK(cudaEventRecord(side_done, side));
    YOLOCU_CUDA_CHECK(cudaStreamWaitEvent(stream, side_done, 0));
    // `done` may go now: a copy from pageable memory returns once its bytes are staged
    counts.cpu_shared += static_cast<int64_t>(shared.size());
  }

  std::vector<ImageView> decode(const std::vector<EncodedImage>& images, cudaStream_t stream, JpegDecodeCounts* counts_out) {
    YOLOCU_CUDA_CHECK(cudaSetDevice(options.device));
    const size_t n = images.size();
    JpegDecodeCounts counts;
    std::vector<ImageView> views(n);
    if (n == 0) {
      if (counts_out) *counts_out = counts;
      return views;
    }
    // 1. Plans, nvJPEG's verdict, and the CPU decodes (errors surface here, before any GPU work).
    std::vector<int> path(n, -1);  // 0 batched, 1 decoupled, -1 CPU
    std::vector<Image> cpu(n);
    for (size_t i = 0; i < n; ++i) {
      const EncodedImage& im = images[i];
      const detail::DecodePlan plan = detail::plan_gpu_decode(im.data, im.size, options.limits, im.name);
      if (plan.route == detail::DecodeRoute::kGpu) path[i] = nvjpeg_path(im, plan);
      if (path[i] < 0) {
        cpu[i] = decode_image(im.data, im.size, options.limits, im.name);
        switch (plan.route) {
          case detail::DecodeRoute::kCpuNotJpeg: ++counts.cpu_not_jpeg; break;
          case detail::DecodeRoute::kCpuOrientation: ++counts.cpu_orientation; break;
          default: ++counts.cpu_other; break;
        }
        views[i].width = cpu[i].width();
        views[i].height = cpu[i].height();
      } else {
        views[i].width = plan.width;
        views[i].height = plan.height;
      }
    }
    // 2. The output buffer: one slot per image.
    std::vector<size_t> offset(n);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      views[i].pitch_bytes = align_up(static_cast<size_t>(views[i].width) * 3, kPitchAlign);
      offset[i] = total;
      total = align_up(total + views[i].pitch_bytes * static_cast<size_t>(views[i].height), kOffsetAlign);
    }
    out.reserve(total);
    for (size_t i = 0; i < n; ++i) views[i].data = out.get() + offset[i];
    // CPU-decoded images first: a copy from pageable memory waits for the stream's earlier work.
    auto upload = [&](size_t i) {
      const Image& im = cpu[i];
      YOLOCU_CUDA_CHECK(cudaMemcpy2DAsync(const_cast<uint8_t*>(views[i].data), views[i].pitch_bytes, im.data(),
                                          im.pitch_bytes(), im.pitch_bytes(), static_cast<size_t>(im.height()),
                                          cudaMemcpyHostToDevice, stream));
    };
    for (size_t i = 0; i < n; ++i)
      if (path[i] < 0) upload(i);
    auto destination = [&](size_t i) {
      nvjpegImage_t dst{};
      dst.channel[0] = const_cast<uint8_t*>(views[i].data);
      dst.pitch[0] = views[i].pitch_bytes;
      return dst;
    };
    // An image nvJPEG refused after its header passed: the CPU decoder decides (and uploads).
    auto fallback = [&](size_t i) {
      cpu[i] = decode_image(images[i].data, images[i].size, options.limits, images[i].name);
      YOLOCU_CHECK(cpu[i].width() == views[i].width && cpu[i].height() == views[i].height, kInternal,
                   images[i].name, ": the CPU decoder's size ", cpu[i].width(), "x", cpu[i].height(),
                   " differs from the header's ", views[i].width, "x", views[i].height);
      upload(i);
      ++counts.cpu_other;
    };
    // 3. One batched call; with cpu_share, every k-th of its images decoded on CPU threads meanwhile.
    std::vector<size_t> batch, shared;
    for (size_t i = 0; i < n; ++i) {
      if (path[i] != 0) continue;
      const double j = static_cast<double>(batch.size() + shared.size());
      if (std::floor((j + 1) * options.cpu_share) > std::floor(j * options.cpu_share)) {
        shared.push_back(i);
      } else {
        batch.push_back(i);
      }
    }
    std::vector<std::future<Image>> shared_jobs;
    for (size_t i : shared) {
      const EncodedImage* im = &images[i];
      const DecodeLimits limits = options.limits;
      shared_jobs.push_back(std::async(std::launch::async, [im, limits] {
        return decode_image(im->data, im->size, limits, im->name);
      }));
    }
    if (!batch.empty()) {
      std::vector<const unsigned char*> data;
      std::vector<size_t> lengths;
      std::vector<nvjpegImage_t> dst;
      for (size_t i : batch) {
        data.push_back(static_cast<const unsigned char*>(images[i].data));
        lengths.push_back(images[i].size);
        dst.push_back(destination(i));
      }
      const int m = static_cast<int>(batch.size());
      int done = 0;  // images of `batch` decoded by nvJPEG
      if (!options.power_of_two_lists) {
        if (decode_list(batched_state, batched_size, data.data(), lengths.data(), dst.data(), m, images[batch.front()],
                        stream, counts))
          done = m;
      } else {
        if (pow2_states.empty()) pow2_states.assign(31, nullptr), pow2_sizes.assign(31, -1);
        for (int k = 30; k >= 0; --k) {
          const int size = 1 << k;
          if ((m & size) == 0) continue;
          if (!pow2_states[static_cast<size_t>(k)])
            YOLOCU_NVJPEG_CHECK(nvjpegJpegStateCreate(handle, &pow2_states[static_cast<size_t>(k)]));
          const size_t at = static_cast<size_t>(done);
          if (!decode_list(pow2_states[static_cast<size_t>(k)], pow2_sizes[static_cast<size_t>(k)], data.data() + at,
                           lengths.data() + at, dst.data() + at, size, images[batch[at]], stream, counts))
            break;
          done += size;
        }
      }
      (hardware ? counts.gpu_hardware : counts.gpu_hybrid) += done;
      for (size_t j = static_cast<size_t>(done); j < batch.size(); ++j) fallback(batch[j]);
    }
    // 4. What the hardware cannot decode, one at a time.
    int k = 0;
    for (size_t i = 0; i < n; ++i) {
      if (path[i] != 1) continue;
      nvjpegImage_t dst = destination(i);
      if (decode_decoupled(images[i], &dst, k++, stream)) {
        ++counts.gpu_hybrid;
      } else {
        fallback(i);
      }
    }
    // 5. The CPU's share: waited for (an error is the CPU decoder's), uploaded on the side stream.
    if (!shared.empty()) finish_cpu_share(images, shared, shared_jobs, views, stream, counts);
    totals.gpu_hardware += counts.gpu_hardware;
    totals.gpu_hybrid += counts.gpu_hybrid;
    totals.cpu_not_jpeg += counts.cpu_not_jpeg;
    totals.cpu_orientation += counts.cpu_orientation;
    totals.cpu_other += counts.cpu_other;
    totals.cpu_shared += counts.cpu_shared;
    totals.batched_inits += counts.batched_inits;
    if (counts_out) *counts_out = counts;
    return views;
  }
};

CudaJpegDecoder::CudaJpegDecoder(const CudaJpegDecoderOptions& options)
    : impl_(detail::oom_as_error("CudaJpegDecoder", [&] { return std::make_unique<Impl>(options); })) {}

CudaJpegDecoder::~CudaJpegDecoder() = default;

const std::string& CudaJpegDecoder::backend() const noexcept { return impl_->backend; }

bool CudaJpegDecoder::interpolated_upsampling() const noexcept { return impl_->interpolated; }

std::vector<ImageView> CudaJpegDecoder::decode(const std::vector<EncodedImage>& images, cudaStream_t stream,
                                               JpegDecodeCounts* counts) {
  return detail::oom_as_error("CudaJpegDecoder", [&] { return impl_->decode(images, stream, counts); });
}

JpegDecodeCounts CudaJpegDecoder::totals() const noexcept { return impl_->totals; }

const std::string& CudaJpegDecoder::last_refusal() const noexcept { return impl_->last_refusal; }

size_t CudaJpegDecoder::device_bytes() const noexcept { return impl_->out.size(); }

#else  // no nvJPEG in this build

struct CudaJpegDecoder::Impl {
  std::string backend;
  JpegDecodeCounts totals;
};

CudaJpegDecoder::CudaJpegDecoder(const CudaJpegDecoderOptions& /*options*/) {
  detail::fail(ErrorCode::kUnsupported,
               "GPU JPEG decode: this build of yolocu has no nvJPEG (CMake did not find nvjpeg.h / libnvjpeg: "
               "scripts/nvjpeg.sh installs it, or set NVJPEG_ROOT; docs/preprocess.md)");
}

CudaJpegDecoder::~CudaJpegDecoder() = default;

const std::string& CudaJpegDecoder::backend() const noexcept { return impl_->backend; }

bool CudaJpegDecoder::interpolated_upsampling() const noexcept { return false; }

std::vector<ImageView> CudaJpegDecoder::decode(const std::vector<EncodedImage>& /*images*/, cudaStream_t /*stream*/,
                                               JpegDecodeCounts* /*counts*/) {
  detail::fail(ErrorCode::kUnsupported, "GPU JPEG decode: this build of yolocu has no nvJPEG");
}

JpegDecodeCounts CudaJpegDecoder::totals() const noexcept { return impl_->totals; }

const std::string& CudaJpegDecoder::last_refusal() const noexcept { return impl_->backend; }

size_t CudaJpegDecoder::device_bytes() const noexcept { return 0; }

#endif

}  // namespace yolocu
