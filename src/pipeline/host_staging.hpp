// Host images into pinned staging memory and onto the device (the CUDA detector's upload of host
// BGR images): packed one after another, copied by all cores in bands of rows, and, where the
// device buffer is known, uploaded in chunks as they are copied, so that the transfer of the first
// chunks runs while the host copies the rest.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "yolocu/image.hpp"

namespace yolocu::detail {

// Each image's offset in the packed staging layout (BGR, width * 3 bytes a row), the total last.
std::vector<size_t> staged_offsets(const ImageView* images, int n);

// The chunk size of stage_images for `total` bytes: a quarter, within 1 MiB .. 8 MiB.
size_t upload_chunk_bytes(size_t total);

// Whether stage_images copies `total` bytes with streaming stores (non-temporal, on x86: past the
// cores' caches into memory, where the transfer reads them, instead of leaving lines dirty in the
// caches that every read of the transfer snoops): for a batch of at most 32 MiB, the upload a
// latency waits on. A larger batch (32 full-HD frames) is copied through the caches, which the
// GPU machine's pipeline ran faster, with several contexts at once most of all.
// YOLOCU_UPLOAD_STREAMING_STORES=0 (a measurement switch): never.
bool streaming_staging(size_t total);

// Copies the n images into `staging` (at least offset.back() bytes) at `offset`. Without `device`,
// that is all; with it, each chunk of upload_chunk_bytes (whole bands of rows) is enqueued as a
// cudaMemcpyAsync to the same offset of `device` on `stream` once its bands are copied. Throws
// Error(kCuda) if an enqueue fails (after the copies that were started).
void stage_images(const ImageView* images, int n, const std::vector<size_t>& offset, uint8_t* staging,
                  uint8_t* device = nullptr, cudaStream_t stream = nullptr);

}  // namespace yolocu::detail
