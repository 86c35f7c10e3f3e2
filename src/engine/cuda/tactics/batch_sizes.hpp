// Which engine batch size serves a run of `batch` images, and where an untuned size's tactics come
// from (host-only, no CUDA; unit-tested without a GPU). CudaEngine uses it at run and warm-up time.
//
// Tuned sizes (CudaEngineOptions::tune_batches, default {1, max_batch}) have their tactics checked
// and timed at build. Every other size the engine runs is derived: it reuses the tactics of the
// tuned size nearest in ratio (no timing; its cuDNN plans are built for the new shape, which is what
// costs seconds per size on a cold tactic cache).
//
// With padding (CudaEngineOptions::pad_batches) the engine runs only its anchor sizes: the tuned
// sizes, the powers of two below max_batch and max_batch. A run of `batch` images runs the smallest
// anchor >= batch, the rows past `batch` holding whatever the engine's buffers held (their outputs
// are never read): about 2 log2(max_batch) sizes to derive and capture instead of max_batch, at the
// price of computing up to twice the images in a partial batch.
#pragma once

#include <vector>

namespace yolocu::engine {

// The anchors for max_batch >= 1 and the tuned sizes (each in 1..max_batch): ascending, distinct.
std::vector<int> batch_anchors(int max_batch, const std::vector<int>& tuned);

// The size a run of `batch` images executes: `batch` itself without padding (anchors empty), else
// the smallest anchor >= batch (batch past the largest anchor: the largest).
int run_batch(int batch, const std::vector<int>& anchors);

// The tuned size whose tactics an untuned `batch` takes: the nearest in ratio |log(t / batch)|, a tie
// going to the larger. `tuned` ascending, not empty.
int nearest_tuned(int batch, const std::vector<int>& tuned);

// The distinct sizes the engine must prepare to run every one of `batches` (run_batch of each, in
// ascending order), leaving out those in `ready`.
std::vector<int> sizes_to_prepare(const std::vector<int>& batches, const std::vector<int>& anchors,
                                  const std::vector<int>& ready);

}  // namespace yolocu::engine
