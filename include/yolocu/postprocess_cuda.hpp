// yolocu/postprocess_cuda.hpp - decode + greedy NMS + back-projection on the device (CUDA builds).
//
// Same semantics and results as the CPU reference in postprocess.hpp (canonical order, torchvision
// CPU threshold rule, class offset 7680): keep lists identical, boxes bit-identical for FP32 merged
// output (the kernels evaluate the same float expressions, without FMA contraction).
//
// Ownership and streams: PostprocessWorkspace owns every device buffer and one pinned host buffer,
// all sized at construction for (max_batch, rows, num_classes, options); postprocess_cuda() only
// enqueues work on `stream` (no allocation, no synchronisation: capturable in a CUDA graph) and
// ends with ONE device-to-host copy into the pinned buffer. Read the results with results() after
// synchronising that stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "yolocu/postprocess.hpp"

namespace yolocu {

class PostprocessWorkspace {
 public:
  // candidate_capacity: candidate slots per image; 0 = exact (rows, or rows * nc when
  // multi_label), which can never overflow. A smaller capacity saves memory; candidates beyond it
  // are dropped and counted in overflow() (which ones is then scheduling-dependent).
  PostprocessWorkspace(int64_t max_batch, int64_t rows, int num_classes,
                       const PostprocessOptions& options, int64_t candidate_capacity = 0);
  ~PostprocessWorkspace();
  PostprocessWorkspace(const PostprocessWorkspace&) = delete;
  PostprocessWorkspace& operator=(const PostprocessWorkspace&) = delete;

  size_t device_bytes() const;
  // After the stream of the last postprocess_cuda() call has been synchronised:
  std::vector<Detections> results() const;
  // candidates dropped for lack of slots, per image of the last call
  std::vector<int64_t> overflow() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  friend void postprocess_cuda(const OutputView&, const std::vector<LetterboxGeometry>&,
                               const PostprocessOptions&, PostprocessWorkspace&, cudaStream_t);
};

// d_output: merged output in DEVICE memory (batch x rows x (5 + nc), float32 or float16);
// one geometry per image; options must equal the workspace's (validated). Stream last.
void postprocess_cuda(const OutputView& d_output, const std::vector<LetterboxGeometry>& geometries,
                      const PostprocessOptions& options, PostprocessWorkspace& workspace,
                      cudaStream_t stream);

}  // namespace yolocu
