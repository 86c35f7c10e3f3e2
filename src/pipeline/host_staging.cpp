// Host images into pinned staging and onto the device (host_staging.hpp).
#include "pipeline/host_staging.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/cuda_check.hpp"

namespace yolocu::detail {
namespace {

constexpr size_t kBandBytes = size_t{64} << 10;  // a band of rows: one core's piece of the copy

struct Band {
  int image, y0, y1;
  size_t begin, end;  // bytes of the staging layout
};

// Bands of about kBandBytes in staging order (image by image, top to bottom).
std::vector<Band> bands_of(const ImageView* images, int n, const std::vector<size_t>& offset) {
  std::vector<Band> bands;
  for (int i = 0; i < n; ++i) {
    const size_t row = static_cast<size_t>(images[i].width) * 3;
    const int rows = static_cast<int>(std::max<size_t>(1, kBandBytes / std::max<size_t>(1, row)));
    for (int y = 0; y < images[i].height; y += rows) {
      const int y1 = std::min(images[i].height, y + rows);
      const size_t base = offset[static_cast<size_t>(i)];
      bands.push_back({i, y, y1, base + row * static_cast<size_t>(y), base + row * static_cast<size_t>(y1)});
    }
  }
  return bands;
}

void copy_band(const ImageView& im, const Band& b, uint8_t* staging) {
  const size_t row = static_cast<size_t>(im.width) * 3;
  uint8_t* out = staging + b.begin;
  if (im.pitch_bytes == row) {
    std::memcpy(out, im.data + row * static_cast<size_t>(b.y0), b.end - b.begin);
  } else {
    for (int y = b.y0; y < b.y1; ++y)
      std::memcpy(out + row * static_cast<size_t>(y - b.y0), im.data + im.pitch_bytes * static_cast<size_t>(y), row);
  }
}

// YOLOCU_UPLOAD_CHUNKS=0 (a measurement switch, as YOLOCU_NVJPEG_BACKEND): one upload after the whole copy.
bool chunked_uploads() {
  static const bool on = [] {
    const char* v = std::getenv("YOLOCU_UPLOAD_CHUNKS");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

}  // namespace

std::vector<size_t> staged_offsets(const ImageView* images, int n) {
  std::vector<size_t> offset(static_cast<size_t>(std::max(0, n)) + 1, 0);
  for (int i = 0; i < n; ++i)
    offset[static_cast<size_t>(i) + 1] =
        offset[static_cast<size_t>(i)] + static_cast<size_t>(images[i].width) * images[i].height * 3;
  return offset;
}

size_t upload_chunk_bytes(size_t total) { return std::clamp(total / 8, size_t{512} << 10, size_t{8} << 20); }

void stage_images(const ImageView* images, int n, const std::vector<size_t>& offset, uint8_t* staging, uint8_t* device,
                  cudaStream_t stream) {
  const std::vector<Band> bands = bands_of(images, n, offset);
  const size_t total = offset.back();
  // Chunks of whole bands: chunk_of[band]; each chunk's bands still to copy in left[chunk]. No
  // device (or no chunked uploads): nothing to enqueue until every band is copied.
  const bool upload = device != nullptr;
  const bool chunked = upload && chunked_uploads();
  std::vector<int> chunk_of(bands.size(), 0);
  std::vector<std::pair<size_t, size_t>> chunk_bytes;  // [begin, end) of each chunk
  if (!bands.empty()) {
    const size_t chunk = chunked ? upload_chunk_bytes(total) : total;
    size_t begin = bands[0].begin;
    for (size_t k = 0; k < bands.size(); ++k) {
      chunk_of[k] = static_cast<int>(chunk_bytes.size());  // the chunk being filled
      if (bands[k].end - begin >= chunk || k + 1 == bands.size()) {
        chunk_bytes.push_back({begin, bands[k].end});
        begin = bands[k].end;  // the layout is contiguous: the next band starts there
      }
    }
  }
  std::vector<std::atomic<int>> left(chunk_bytes.size());
  for (auto& l : left) l.store(0, std::memory_order_relaxed);
  for (int c : chunk_of) left[static_cast<size_t>(c)].fetch_add(1, std::memory_order_relaxed);
  int device_index = 0;
  if (upload) YOLOCU_CUDA_CHECK(cudaGetDevice(&device_index));
  std::atomic<int> first_error{cudaSuccess};
  // The thread that copies a chunk's last band enqueues its upload at once (no barrier between
  // chunks: the transfer of the first chunks runs while the cores copy the rest); the stream orders
  // the chunks' copies before whatever the caller enqueues after this returns.
  const auto enqueue = [&](int c) {
    const auto [b0, b1] = chunk_bytes[static_cast<size_t>(c)];
    cudaError_t e = cudaSetDevice(device_index);  // an OpenMP thread's current device may be another
    if (e == cudaSuccess) e = cudaMemcpyAsync(device + b0, staging + b0, b1 - b0, cudaMemcpyHostToDevice, stream);
    int expected = cudaSuccess;
    if (e != cudaSuccess) first_error.compare_exchange_strong(expected, static_cast<int>(e));
  };
  // (a batch of 32 full-HD frames is ~200 MB: one thread would take longer than the whole GPU pipeline)
#pragma omp parallel for schedule(dynamic, 1) if (total > (size_t{1} << 20))
  for (int64_t k = 0; k < static_cast<int64_t>(bands.size()); ++k) {
    const Band& b = bands[static_cast<size_t>(k)];
    copy_band(images[b.image], b, staging);
    const int c = chunk_of[static_cast<size_t>(k)];
    if (upload && left[static_cast<size_t>(c)].fetch_sub(1, std::memory_order_acq_rel) == 1) enqueue(c);
  }
  YOLOCU_CUDA_CHECK(static_cast<cudaError_t>(first_error.load()));
}

}  // namespace yolocu::detail
