// Host images into pinned staging and onto the device (host_staging.hpp).
#include "pipeline/host_staging.hpp"

#include <cuda_runtime.h>

#include <algorithm>
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

size_t upload_chunk_bytes(size_t total) { return std::clamp(total / 4, size_t{1} << 20, size_t{8} << 20); }

void stage_images(const ImageView* images, int n, const std::vector<size_t>& offset, uint8_t* staging, uint8_t* device,
                  cudaStream_t stream) {
  const std::vector<Band> bands = bands_of(images, n, offset);
  const size_t total = offset.back();
  // chunks of whole bands: cut[c] .. cut[c + 1]; one chunk without a device or chunked uploads
  std::vector<size_t> cut{0};
  if (device != nullptr && chunked_uploads()) {
    const size_t chunk = upload_chunk_bytes(total);
    for (size_t k = 0; k < bands.size(); ++k)
      if (bands[k].end - bands[cut.back()].begin >= chunk && k + 1 < bands.size()) cut.push_back(k + 1);
  }
  cut.push_back(bands.size());
  cudaError_t err = cudaSuccess;
  // (a batch of 32 full-HD frames is ~200 MB: one thread would take longer than the whole GPU pipeline)
#pragma omp parallel if (total > (size_t{1} << 20))
  {
    for (size_t c = 0; c + 1 < cut.size(); ++c) {
#pragma omp for schedule(dynamic, 1)
      for (int64_t k = static_cast<int64_t>(cut[c]); k < static_cast<int64_t>(cut[c + 1]); ++k) {
        const Band& b = bands[static_cast<size_t>(k)];
        copy_band(images[b.image], b, staging);
      }
      // (the loop's barrier: the chunk is copied)
#pragma omp master
      if (device != nullptr && err == cudaSuccess && cut[c + 1] > cut[c]) {
        const size_t b0 = bands[cut[c]].begin, b1 = bands[cut[c + 1] - 1].end;
        err = cudaMemcpyAsync(device + b0, staging + b0, b1 - b0, cudaMemcpyHostToDevice, stream);
      }
    }
  }
  YOLOCU_CUDA_CHECK(err);
}

}  // namespace yolocu::detail
