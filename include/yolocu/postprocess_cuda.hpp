// yolocu/postprocess_cuda.hpp - decode + greedy NMS + back-projection on the device (CUDA builds).
//
// Same semantics and results as the CPU reference in postprocess.hpp (canonical order, torchvision
// CPU threshold rule, class offset 7680, first max_nms candidates by canonical order): keep lists
// identical, boxes bit-identical (the kernels evaluate the same float expressions, without FMA
// contraction; the sigmoid of the raw-head path is the shared double-precision one).
//
// Candidates: a fixed number of slots per image (default max_nms, 30000), 8 bytes each (a 64-bit
// key: score descending, then row * nc + class ascending; boxes are recomputed from the input).
// When an image finds more candidates than slots, radix-select passes find the key of the
// capacity-th best candidate and keep exactly the best-scored ones (ties by index); the dropped
// count is reported by overflow().
//
// NMS, per image, by the number n of candidates it kept (both paths give the same keep list):
//  - kept-box path: one block takes the candidates in canonical order, 1024 at a time, and tests
//    each only against the boxes already kept (<= max_det, in shared memory), stopping at max_det.
//    Fast when few boxes are kept (a block barrier per kept box); all that fast NMS uses.
//  - bitmask path (greedy only): the IoU bitmask of all n x n candidate pairs (bit j of row i: j
//    after i in canonical order and IoU(i, j) > cut) computed by extra blocks of the NMS launch
//    (half the SMs), then the block finishing the image's last tile sweeps it 64 canonical
//    positions at a time (4 barriers per 64, whatever it keeps), stopping at max_det. Fast in
//    crowded scenes (thousands of candidates, many kept). Device memory
//    n * ceil(n / 64) * 8 + 24 n bytes per image, sized at plan time for `bitmask_capacity` slots
//    per image: the largest count (<= kMaxNmsBitmaskCandidates) whose bytes for max_batch images
//    fit CudaNmsConfig::bitmask_bytes (default 16 MiB: 11,456 candidates at batch 1, 1,920 at
//    batch 32). An image with more candidates takes the kept-box path.
//  CudaNmsPath::kAuto (default) takes the bitmask path for kNmsBitmaskAutoMin < n <=
//  bitmask_capacity; kKeptBoxes never (no bitmask memory); kBitmask for every 1 <= n <=
//  bitmask_capacity (tests, benchmarks).
//
// Ownership and streams: PostprocessWorkspace owns one device buffer and one pinned, mapped host
// buffer, both sized at construction for (max_batch, rows, num_classes, options, config).
// postprocess_cuda() and postprocess_raw_heads_cuda() only enqueue kernels on `stream`: decode
// (+ 7 select/emit launches when an image can overflow its slots) + NMS, which writes the results
// straight into the pinned buffer (no memset, no copy, no allocation, no synchronisation):
// capturable in a CUDA graph. Input pointers, options and geometries are kernel arguments, so a
// captured graph replays them as captured.
// Read the results with results() after synchronising that stream (or an event recorded after
// the call). A workspace serves one stream at a time; the per-image state is left zeroed by each
// call (a call that threw half-way makes the next one enqueue a memset first).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "yolocu/postprocess.hpp"

namespace yolocu {

// Largest batch of one call (geometries travel as kernel arguments) and largest max_det (the kept
// boxes of an image live in shared memory).
constexpr int kMaxCudaBatch = 128;
constexpr int kMaxCudaMaxDet = 4096;

// NMS paths (see above). bitmask_bytes: device-memory budget of the bitmask path for the whole
// workspace (all max_batch images).
enum class CudaNmsPath { kAuto, kKeptBoxes, kBitmask };
constexpr int64_t kMaxNmsBitmaskCandidates = 32768;  // per image (the sweep's shared bitset)
constexpr int kNmsBitmaskAutoMin = 512;  // kAuto: bitmask path above this many candidates
constexpr size_t kDefaultNmsBitmaskBytes = size_t{16} << 20;
struct CudaNmsConfig {
  CudaNmsPath path = CudaNmsPath::kAuto;
  size_t bitmask_bytes = kDefaultNmsBitmaskBytes;
};

// What a workspace allocates, computed on the host without touching the device.
struct PostprocessCudaPlan {
  int64_t max_batch = 0, rows = 0;
  int num_classes = 0;
  int64_t capacity = 0;         // candidate slots per image
  int64_t max_candidates = 0;   // most candidates one image can produce (rows, or rows x classes)
  bool select_passes = false;   // max_candidates > capacity: overflow possible, radix select enqueued
  size_t device_bytes = 0;      // the one device allocation
  size_t pinned_bytes = 0;      // the one pinned host allocation (results)
  size_t nms_shared_bytes = 0;  // dynamic shared memory of the NMS kernel (kept boxes)
  CudaNmsPath nms_path = CudaNmsPath::kAuto;  // as configured
  // Bitmask path: the most and fewest candidates of an image it takes (0, 0: no bitmask path;
  // kAuto: kNmsBitmaskAutoMin + 1 at least, kBitmask: 1), and its share of device_bytes (mask,
  // boxes, ranks and order of max_batch images).
  int64_t bitmask_capacity = 0;
  int64_t bitmask_min_candidates = 0;
  size_t bitmask_bytes = 0;
};

// candidate_capacity: slots per image; 0 = options.max_nms. Clamped to max_nms (the reference
// keeps the first max_nms) and to max_candidates (more slots can never be used). A capacity below
// max_nms saves memory but then keeps fewer candidates than the reference when one overflows.
// nms: which NMS path(s) and the bitmask path's memory budget (see above).
// Throws kInvalidArgument (options, batch outside [1, kMaxCudaBatch], max_det > kMaxCudaMaxDet,
// rows * num_classes >= 2^31, negative capacity, kBitmask with NmsMode::kFast or with a budget
// too small for 64 candidates per image).
PostprocessCudaPlan plan_postprocess_cuda(int64_t max_batch, int64_t rows, int num_classes,
                                          const PostprocessOptions& options,
                                          int64_t candidate_capacity = 0,
                                          const CudaNmsConfig& nms = CudaNmsConfig());

class PostprocessWorkspace {
 public:
  // See plan_postprocess_cuda for the arguments. Allocates (synchronously) and throws kCuda on
  // failure.
  PostprocessWorkspace(int64_t max_batch, int64_t rows, int num_classes,
                       const PostprocessOptions& options, int64_t candidate_capacity = 0,
                       const CudaNmsConfig& nms = CudaNmsConfig());
  ~PostprocessWorkspace();
  PostprocessWorkspace(const PostprocessWorkspace&) = delete;
  PostprocessWorkspace& operator=(const PostprocessWorkspace&) = delete;

  const PostprocessCudaPlan& plan() const;
  size_t device_bytes() const;
  // After the stream of the last call has been synchronised (one entry per image of that call):
  std::vector<Detections> results() const;
  // candidates found per image (before the slot limit) and candidates dropped by it
  std::vector<int64_t> candidates() const;
  std::vector<int64_t> overflow() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend void postprocess_cuda(const OutputView&, const std::vector<LetterboxGeometry>&,
                               const PostprocessOptions&, PostprocessWorkspace&, cudaStream_t);
  friend void postprocess_raw_heads_cuda(const RawHeadsView&, const std::vector<LetterboxGeometry>&,
                                         const PostprocessOptions&, PostprocessWorkspace&,
                                         cudaStream_t);
};

// d_output: merged output in DEVICE memory (batch x rows x (5 + nc), float32 or float16);
// one geometry per image; options must equal the workspace's. Stream last.
void postprocess_cuda(const OutputView& d_output, const std::vector<LetterboxGeometry>& geometries,
                      const PostprocessOptions& options, PostprocessWorkspace& workspace,
                      cudaStream_t stream);

// The same from the raw Detect-head convolution outputs in DEVICE memory (NCHW, as
// raw_heads_view describes them): sigmoid, grid and anchors fused into the decode, the merged
// batch x rows x (5 + nc) tensor is never formed. Workspace rows = d_heads.rows().
void postprocess_raw_heads_cuda(const RawHeadsView& d_heads,
                                const std::vector<LetterboxGeometry>& geometries,
                                const PostprocessOptions& options, PostprocessWorkspace& workspace,
                                cudaStream_t stream);

}  // namespace yolocu
