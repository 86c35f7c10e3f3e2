// Host images into pinned staging and onto the device (host_staging.hpp).
#include "pipeline/host_staging.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/cuda_check.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

// A measurement switch, as YOLOCU_NVJPEG_BACKEND: on unless the variable is "0".
bool switch_on(const char* name) {
  const char* v = std::getenv(name);
  return !(v && std::string(v) == "0");
}

// YOLOCU_UPLOAD_CHUNKS=0: one upload after the whole copy.
bool chunked_uploads() {
  static const bool on = switch_on("YOLOCU_UPLOAD_CHUNKS");
  return on;
}

// YOLOCU_UPLOAD_STREAMING_STORES=0: the staging copy through the caches (plain memcpy).
bool streaming_stores() {
  static const bool on = switch_on("YOLOCU_UPLOAD_STREAMING_STORES");
  return on;
}

// memcpy whose stores bypass the caches (x86 non-temporal stores): the staging bytes go to memory,
// where the device's transfer reads them, instead of sitting dirty in the cores' caches, which
// every read of the transfer would then have to snoop. The caller fences (_mm_sfence) before the
// transfer is enqueued.
void copy_streaming(uint8_t* dst, const uint8_t* src, size_t n) {
#if defined(__SSE2__)
  const size_t head = std::min(n, (16 - reinterpret_cast<uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  for (; i + 16 <= n; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  std::memcpy(dst + i, src + i, n - i);
#else
  std::memcpy(dst, src, n);
#endif
}

void copy_cached(uint8_t* dst, const uint8_t* src, size_t n) { std::memcpy(dst, src, n); }

void copy_band(const ImageView& im, const Band& b, uint8_t* staging, bool streaming) {
  const size_t row = static_cast<size_t>(im.width) * 3;
  uint8_t* out = staging + b.begin;
  void (*const copy)(uint8_t*, const uint8_t*, size_t) = streaming ? copy_streaming : copy_cached;
  if (im.pitch_bytes == row) {
    copy(out, im.data + row * static_cast<size_t>(b.y0), b.end - b.begin);
  } else {
    for (int y = b.y0; y < b.y1; ++y)
      copy(out + row * static_cast<size_t>(y - b.y0), im.data + im.pitch_bytes * static_cast<size_t>(y), row);
  }
#if defined(__SSE2__)
  if (streaming) _mm_sfence();  // this core's streaming stores visible before the chunk's barrier
#endif
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

bool streaming_staging(size_t total) { return total <= (size_t{32} << 20) && streaming_stores(); }

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
  const bool streaming = streaming_staging(total);
  cudaError_t err = cudaSuccess;
  // (a batch of 32 full-HD frames is ~200 MB: one thread would take longer than the whole GPU pipeline)
#pragma omp parallel if (total > (size_t{1} << 20))
  {
    for (size_t c = 0; c + 1 < cut.size(); ++c) {
#pragma omp for schedule(dynamic, 1)
      for (int64_t k = static_cast<int64_t>(cut[c]); k < static_cast<int64_t>(cut[c + 1]); ++k) {
        const Band& b = bands[static_cast<size_t>(k)];
        copy_band(images[b.image], b, staging, streaming);
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
