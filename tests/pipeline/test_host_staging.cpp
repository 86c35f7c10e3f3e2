// Host images into pinned staging and onto the device (pipeline/host_staging.hpp), the CUDA
// detector's upload of host BGR images: the packed layout and its offsets, the chunk sizes, the
// copy of pitched images of odd sizes (one row, one column, rows wider than a band, several
// images; the streaming stores at any alignment) into the layout on the host, and with a GPU the chunked upload of a batch larger than
// several chunks, byte for byte against the images.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "pipeline/host_staging.hpp"
#include "test_util.hpp"

namespace yolocu::detail {
namespace {

// Images of the given sizes with `pad` bytes after each row, filled with a pattern of (image,
// row, byte); the pad bytes hold 0xEE, which the packed layout must never contain.
struct Images {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<ImageView> views;
  Images(const std::vector<std::pair<int, int>>& sizes, size_t pad) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto [w, h] = sizes[i];
      const size_t row = static_cast<size_t>(w) * 3, pitch = row + pad;
      std::vector<uint8_t> b(pitch * static_cast<size_t>(h), 0xEE);
      for (int y = 0; y < h; ++y)
        for (size_t x = 0; x < row; ++x) b[pitch * static_cast<size_t>(y) + x] = static_cast<uint8_t>((i * 31 + y * 7 + x) % 233);
      bytes.push_back(std::move(b));
    }
    for (size_t i = 0; i < sizes.size(); ++i)
      views.push_back({bytes[i].data(), sizes[i].first, sizes[i].second, static_cast<size_t>(sizes[i].first) * 3 + pad});
  }
  // The expected packed layout.
  std::vector<uint8_t> packed() const {
    std::vector<uint8_t> out;
    for (size_t i = 0; i < views.size(); ++i)
      for (int y = 0; y < views[i].height; ++y) {
        const uint8_t* r = views[i].data + views[i].pitch_bytes * static_cast<size_t>(y);
        out.insert(out.end(), r, r + static_cast<size_t>(views[i].width) * 3);
      }
    return out;
  }
};

TEST(HostStaging, OffsetsAndChunks) {
  const Images im({{5, 3}, {1, 1}, {810, 1080}}, 0);
  const std::vector<size_t> off = staged_offsets(im.views.data(), 3);
  ASSERT_EQ(off.size(), 4u);
  EXPECT_EQ(off[0], 0u);
  EXPECT_EQ(off[1], 45u);
  EXPECT_EQ(off[2], 48u);
  EXPECT_EQ(off[3], 48u + 810u * 1080u * 3u);
  EXPECT_EQ(staged_offsets(nullptr, 0), std::vector<size_t>{0});
  EXPECT_EQ(upload_chunk_bytes(1000), size_t{1} << 20);             // at least 1 MiB
  EXPECT_EQ(upload_chunk_bytes(size_t{12} << 20), size_t{3} << 20);  // a quarter
  EXPECT_EQ(upload_chunk_bytes(size_t{200} << 20), size_t{8} << 20); // at most 8 MiB
  // streaming stores for a batch of up to 32 MiB (one 2.6 MB frame, eight), not for 32 frames
  if (std::getenv("YOLOCU_UPLOAD_STREAMING_STORES") == nullptr) {
    EXPECT_TRUE(streaming_staging(off[3]));
    EXPECT_TRUE(streaming_staging(8 * off[3]));
    EXPECT_FALSE(streaming_staging(32 * off[3]));
  }
}

TEST(HostStaging, CopiesPitchedImagesIntoThePackedLayout) {
  // rows of 3 bytes, one pixel, rows of 30,000 bytes (wider than a band), a 2.6 MB frame; rows
  // with a pitch and without (one copy a band), the staging at an address 16-aligned and not (the
  // streaming stores' unaligned head and tail)
  for (size_t pad : {size_t{13}, size_t{0}}) {
    const Images im({{1, 9}, {7, 1}, {10000, 5}, {810, 1080}, {33, 17}}, pad);
    const int n = static_cast<int>(im.views.size());
    const std::vector<size_t> off = staged_offsets(im.views.data(), n);
    const std::vector<uint8_t> want = im.packed();
    ASSERT_EQ(want.size(), off.back());
    for (size_t shift : {size_t{0}, size_t{1}, size_t{7}}) {
      std::vector<uint8_t> buf(off.back() + 48, 0xAB);
      uint8_t* staging = buf.data() + (16 - reinterpret_cast<uintptr_t>(buf.data()) % 16) % 16 + shift;
      stage_images(im.views.data(), n, off, staging);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), staging)) << "pad " << pad << ", shift " << shift;
      for (uint8_t* p = buf.data(); p < staging; ++p) EXPECT_EQ(*p, 0xAB) << "written before the layout";
      for (uint8_t* p = staging + off.back(); p < buf.data() + buf.size(); ++p) EXPECT_EQ(*p, 0xAB) << "written past the layout";
    }
  }
}

TEST(HostStaging, ChunkedUploadEqualsTheImages) {
  YOLOCU_REQUIRE_GPU();
  // 8 frames of 810x1080 (21 MB: 4 chunks of 5.2 MB) and a small image last (a short final chunk)
  std::vector<std::pair<int, int>> sizes(8, {810, 1080});
  sizes.push_back({3, 2});
  const Images im(sizes, 5);
  const int n = static_cast<int>(im.views.size());
  const std::vector<size_t> off = staged_offsets(im.views.data(), n);
  void* pinned = nullptr;
  void* dev = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, off.back(), cudaHostAllocDefault), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dev, off.back()), cudaSuccess);
  ASSERT_EQ(cudaMemset(dev, 0, off.back()), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  stage_images(im.views.data(), n, off, static_cast<uint8_t*>(pinned), static_cast<uint8_t*>(dev), s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  std::vector<uint8_t> got(off.back());
  ASSERT_EQ(cudaMemcpy(got.data(), dev, off.back(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(got == im.packed());
  cudaStreamDestroy(s);
  cudaFree(dev);
  cudaFreeHost(pinned);
}

}  // namespace
}  // namespace yolocu::detail
