// yolocu/image_decode_cuda.hpp - batched JPEG decoding on the GPU with nvJPEG (CUDA builds only:
// YOLOCU_WITH_CUDA; the decoder itself needs nvJPEG in the build, see nvjpeg_available()).
//
// One call decodes a list of encoded images into interleaved 8-bit BGR images in device memory
// owned by the decoder (one buffer per decoder, grown only when a call needs more), enqueued on
// the caller's stream; the views it returns feed Detector::detect_device() or
// make_letterbox_cuda_desc() directly.
//
// Backends: the hardware JPEG decoder (NVJPG engines of A100 / H100 and their kin) for baseline
// JPEGs when the GPU has one, else nvJPEG's default (hybrid: Huffman on the CPU, IDCT and colour
// conversion on the GPU) backend; progressive JPEGs always take the latter. backend() says which.
//
// Pixels: nvJPEG's IDCT and chroma upsampling are not libjpeg-turbo's, so the images differ from
// decode_image() (the exact, OpenCV-identical CPU decoder) by a few levels per pixel (the GPU run
// measures the maximum: docs/preprocess.md). Everything nvJPEG does not do like the CPU decoder is
// decoded by the CPU decoder instead and uploaded (counted in JpegDecodeCounts): PNG and other
// formats, JPEGs with an EXIF orientation other than 1 (the CPU decoder rotates them), CMYK /
// YCCK JPEGs, files that do not end with the EOI marker (cut short: the CPU decoder reports them),
// and any file nvJPEG refuses. Errors are the CPU decoder's: kParse for a corrupt or truncated
// header, for truncated data and for non-images, kOutOfMemory for an image over DecodeLimits
// (checked from the header, before anything is allocated), each naming EncodedImage::name.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "yolocu/image.hpp"

namespace yolocu {

namespace detail {
class DeviceBudget;  // src/core/device_budget.hpp
}

// True when this build has nvJPEG (CMake found it; see docs/preprocess.md). Without it the
// decoder's constructor throws kUnsupported.
bool nvjpeg_available() noexcept;

// The pinned host memory nvJPEG's allocators took from CUDA and gave back so far, over the process
// and every decoder (cudaHostAlloc / cudaFreeHost calls; freed blocks are otherwise cached and
// handed out again). Each call can hold the CUDA driver for milliseconds, and a cudaFreeHost waits
// for the whole device: counts that still grow under a steady load explain latency spikes (the
// Triton backend's slow-execution log prints them). Zeros without nvJPEG.
struct PinnedAllocationCounts {
  uint64_t allocations = 0, frees = 0;
};
PinnedAllocationCounts nvjpeg_pinned_allocation_counts() noexcept;

struct CudaJpegDecoderOptions {
  int device = 0;               // CUDA device the images are decoded on
  DecodeLimits limits;          // the largest image accepted (per image, as decode_image())
  bool use_hardware = true;     // false: the default (hybrid) backend even where hardware exists
  // Chroma upsampling of 4:2:0 / 4:2:2 JPEGs: interpolated (closer to libjpeg-turbo's "fancy"
  // upsampling, which decode_image() uses) where nvJPEG accepts the flag, else nearest.
  bool interpolated_upsampling = true;
  // Share of a call's nvJPEG-batched images (0 to 0.9) decoded on the CPU (decode_image(), exact)
  // at the same time as nvJPEG decodes the rest, on threads of their own, for pipelines where the
  // nvJPEG call is the limit and cores are idle (measured end to end it has not paid so far:
  // docs/performance.md section 10). Which ones: evenly spaced in the list (the same list is split the same way every
  // time). 0: none.
  float cpu_share = 0;
  // Device memory of the decoded-image buffer: charged to `device_budget` when set (the owner's,
  // e.g. a Detector context's max_device_memory budget; it must outlive the decoder), else to a
  // budget of the decoder's own of max_device_memory bytes (0: no limit). A call whose buffer would
  // go over it throws kOutOfMemory naming the budget before anything is allocated, and the decoder
  // stays usable for smaller images. nvJPEG's own working buffers are not counted.
  detail::DeviceBudget* device_budget = nullptr;
  uint64_t max_device_memory = 0;
  // A buffer larger than this is given back and allocated again at the size needed when a call
  // needs less than a quarter of it, so that one large image does not keep its memory for good.
  size_t shrink_above_bytes = size_t{64} << 20;
  // nvJPEG's batched decode runs on a state initialised for one list size: a call with another
  // number of images initialises it again (counted in JpegDecodeCounts::batched_inits). true: a
  // list goes as its binary decomposition (13 images: 8, then 4, then 1), each size on a state of
  // its own initialised once, so that lists of changing sizes (a server's dynamic batches)
  // initialise nothing after the first list of each size, at the price of up to log2(n) + 1 calls
  // for n images. Off by default until measured (the detector turns it on with
  // YOLOCU_NVJPEG_POW2_LISTS=1).
  bool power_of_two_lists = false;
};

// How the images of a decode() call (or all calls: totals()) were decoded.
struct JpegDecodeCounts {
  int64_t gpu_hardware = 0;     // nvJPEG, hardware decoder
  int64_t gpu_hybrid = 0;       // nvJPEG, default (hybrid) backend: no hardware, or progressive
  int64_t cpu_not_jpeg = 0;     // CPU fallback: PNG (or not an image: the error is the CPU's)
  int64_t cpu_orientation = 0;  // CPU fallback: EXIF orientation 2..8
  int64_t cpu_other = 0;        // CPU fallback: CMYK, no EOI marker at the end, refused by nvJPEG
  int64_t cpu_shared = 0;       // on the CPU beside nvJPEG by choice (CudaJpegDecoderOptions::cpu_share)
  int64_t batched_inits = 0;    // nvjpegDecodeBatchedInitialize calls (not images)
  int64_t gpu() const { return gpu_hardware + gpu_hybrid; }
  int64_t cpu() const { return cpu_not_jpeg + cpu_orientation + cpu_other + cpu_shared; }
};

class CudaJpegDecoder {
 public:
  // Creates the nvJPEG handle and states on options.device (no image buffer yet). kUnsupported
  // without nvJPEG in the build, kCuda when the device or nvJPEG cannot be initialised.
  explicit CudaJpegDecoder(const CudaJpegDecoderOptions& options = {});
  ~CudaJpegDecoder();
  CudaJpegDecoder(const CudaJpegDecoder&) = delete;
  CudaJpegDecoder& operator=(const CudaJpegDecoder&) = delete;

  // "hardware" (NVJPG engines for baseline JPEGs, hybrid for progressive ones) or "hybrid".
  const std::string& backend() const noexcept;
  // Whether nvJPEG accepted interpolated chroma upsampling (see CudaJpegDecoderOptions).
  bool interpolated_upsampling() const noexcept;
  // Why nvJPEG last refused an image (which then went to the CPU decoder): "name: nvJPEG call:
  // status"; empty if it never did.
  const std::string& last_refusal() const noexcept;

  // Decodes `images` (host memory: they must stay valid until `stream` has run the call's work)
  // into device BGR images on `stream`; returns one device view per image, in order (pitch >=
  // width * 3). The views point
  // into the decoder's buffer: valid, in `stream` order, until the next decode() call on this
  // decoder; the call does not wait for the GPU (except on the hybrid path's progressive JPEGs,
  // which synchronise `stream`), so work that reads the images belongs on `stream` or after a
  // synchronisation of it. Not thread-safe: one decoder per thread or per stream (the CUDA detector
  // keeps one per execution context). Errors as described above; after an error the stream may
  // hold some of the call's work, which writes only the decoder's own buffer. `counts` (optional)
  // receives how this call's images were decoded.
  std::vector<ImageView> decode(const std::vector<EncodedImage>& images, cudaStream_t stream,
                                JpegDecodeCounts* counts = nullptr);

  // All successful decode() calls so far.
  JpegDecodeCounts totals() const noexcept;
  // Device bytes held for decoded images (the buffer grows to the largest call's need).
  size_t device_bytes() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace yolocu
