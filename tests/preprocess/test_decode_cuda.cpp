// CudaJpegDecoder (nvJPEG) against the CPU decoder (label gpu; skips without a device): pixels of
// the sample images, coco128 and every JPEG variant within the stated tolerance (nvJPEG's IDCT and
// chroma upsampling are not libjpeg-turbo's), the CPU fallbacks exact, and the CPU decoder's
// errors for bad input. Prints the measured differences: the numbers docs/preprocess.md quotes.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "preprocess/bomb_images.hpp"
#include "preprocess/jpeg_variants.hpp"
#include "preprocess/preprocess_test_util.hpp"
#include "test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"
#include "yolocu/image_decode_cuda.hpp"

namespace yolocu {
namespace {

// The tolerance of nvJPEG against libjpeg-turbo, per image: mean |difference| over all B, G, R
// values <= 3 levels, and at most 1% of the values off by more than 32 levels (chroma edges). A
// swapped channel order, a wrong pitch or a wrong upsampling factor breaks both by far.
constexpr double kMaxMeanDiff = 3.0;
constexpr double kMaxShareOver32 = 0.01;

struct PixelDiff {
  int max_abs = 0;
  double mean_abs = 0;
  double share_over_32 = 0;
};

Image download(const ImageView& d) {
  Image out(d.width, d.height);
  EXPECT_EQ(cudaMemcpy2D(out.data(), out.pitch_bytes(), d.data, d.pitch_bytes, out.pitch_bytes(),
                         static_cast<size_t>(d.height), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return out;
}

PixelDiff diff(const Image& a, const Image& b) {
  PixelDiff r;
  EXPECT_EQ(a.width(), b.width());
  EXPECT_EQ(a.height(), b.height());
  if (a.width() != b.width() || a.height() != b.height()) {
    r.max_abs = 255;
    r.mean_abs = r.share_over_32 = 255;
    return r;
  }
  double sum = 0;
  size_t over = 0;
  const size_t n = a.size_bytes();
  for (size_t i = 0; i < n; ++i) {
    const int d = std::abs(int(a.data()[i]) - int(b.data()[i]));
    r.max_abs = std::max(r.max_abs, d);
    sum += d;
    over += d > 32;
  }
  r.mean_abs = sum / static_cast<double>(n);
  r.share_over_32 = static_cast<double>(over) / static_cast<double>(n);
  return r;
}

bool exact(const Image& a, const Image& b) {
  return a.width() == b.width() && a.height() == b.height() && std::equal(a.data(), a.data() + a.size_bytes(), b.data());
}

std::vector<std::string> jpeg_files() {
  std::vector<std::string> files;
  for (const char* f : {"images/bus.jpg", "images/zidane.jpg"})
    if (!test::data_file(f).empty()) files.push_back(test::data_file(f));
  const std::string dir = test::data_file("coco128/images/train2017");
  std::vector<std::string> coco;
  if (!dir.empty())
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".jpg") coco.push_back(e.path().string());
  std::sort(coco.begin(), coco.end());
  files.insert(files.end(), coco.begin(), coco.end());
  return files;
}

class Stream {
 public:
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s_); }
  cudaStream_t get() const { return s_; }
  void sync() const { ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess); }

 private:
  cudaStream_t s_ = nullptr;
};

using test::code_of;

TEST(DecodeCuda, SampleImagesAndCoco128WithinTolerance) {
  YOLOCU_REQUIRE_GPU();
  const std::vector<std::string> files = jpeg_files();
  if (files.size() < 3) GTEST_SKIP() << "sample images / coco128 not found";
  std::vector<std::string> bytes;
  for (const auto& f : files) bytes.push_back(read_file_bytes(f));
  // Each backend (the hybrid one is what GPUs without a JPEG engine get) and each upsampling.
  for (const int variant : {0, 1, 2}) {
    const bool interpolated = variant != 1, hardware = variant != 2;
    CudaJpegDecoderOptions o;
    o.interpolated_upsampling = interpolated;
    o.use_hardware = hardware;
    CudaJpegDecoder dec(o);
    std::printf("[ nvjpeg ] backend %s (asked: %s), chroma upsampling %s (asked: %s)\n", dec.backend().c_str(),
                hardware ? "hardware" : "hybrid", dec.interpolated_upsampling() ? "interpolated" : "nearest",
                interpolated ? "interpolated" : "nearest");
    EXPECT_TRUE(dec.backend() == "hardware" || dec.backend() == "hybrid") << dec.backend();
    if (!hardware) {
      EXPECT_EQ(dec.backend(), "hybrid");
    }
    Stream stream;
    PixelDiff worst;
    std::string worst_file;
    double mean_sum = 0;
    for (size_t b = 0; b < files.size(); b += 32) {
      std::vector<EncodedImage> batch;
      for (size_t i = b; i < std::min(files.size(), b + 32); ++i) batch.push_back({bytes[i].data(), bytes[i].size(), files[i]});
      JpegDecodeCounts counts;
      const std::vector<ImageView> views = dec.decode(batch, stream.get(), &counts);
      stream.sync();
      EXPECT_EQ(counts.gpu(), static_cast<int64_t>(batch.size()))
          << "every sample JPEG should decode on the GPU; nvJPEG's last refusal: " << dec.last_refusal();
      for (size_t k = 0; k < batch.size(); ++k) {
        const Image cpu = decode_image(batch[k].data, batch[k].size);
        const PixelDiff d = diff(download(views[k]), cpu);
        mean_sum += d.mean_abs;
        if (d.mean_abs > worst.mean_abs) worst_file = batch[k].name;
        worst.max_abs = std::max(worst.max_abs, d.max_abs);
        worst.mean_abs = std::max(worst.mean_abs, d.mean_abs);
        worst.share_over_32 = std::max(worst.share_over_32, d.share_over_32);
        EXPECT_LE(d.mean_abs, kMaxMeanDiff) << batch[k].name;
        EXPECT_LE(d.share_over_32, kMaxShareOver32) << batch[k].name;
        if (batch[k].name.find("/images/") != std::string::npos)
          std::printf("[ nvjpeg ] %s: max |diff| %d, mean %.3f, share > 32: %.5f\n", batch[k].name.c_str(), d.max_abs,
                      d.mean_abs, d.share_over_32);
      }
    }
    const JpegDecodeCounts t = dec.totals();
    std::printf("[ nvjpeg ] %zu JPEGs (%lld hardware, %lld hybrid): max |diff| %d, mean |diff| %.3f (worst image %.3f: %s), "
                "worst share > 32 levels %.5f\n",
                files.size(), static_cast<long long>(t.gpu_hardware), static_cast<long long>(t.gpu_hybrid), worst.max_abs,
                mean_sum / static_cast<double>(files.size()), worst.mean_abs, worst_file.c_str(), worst.share_over_32);
  }
}

// Each backend decodes an image to the same pixels whatever batch it comes in and whatever else
// runs: two threads, each with its own decoder and stream (as two Triton instances), decode
// coco128 in batches of random sizes (1..32) again and again, every image compared exactly with its
// decode alone by a fresh decoder. A pinned buffer reused before nvJPEG's queued copy from it ran,
// or any other race between batches, shows as differing pixels.
TEST(DecodeCuda, SamePixelsInAnyBatchOnTwoThreads) {
  YOLOCU_REQUIRE_GPU();
  const std::vector<std::string> files = jpeg_files();
  if (files.size() < 32) GTEST_SKIP() << "coco128 not found";
  std::vector<std::string> bytes;
  for (const auto& f : files) bytes.push_back(read_file_bytes(f));
  for (const bool hardware : {true, false}) {
    CudaJpegDecoderOptions o;
    o.use_hardware = hardware;
    std::vector<Image> alone;
    {
      CudaJpegDecoder dec(o);
      Stream stream;
      for (size_t i = 0; i < files.size(); ++i) {
        const std::vector<ImageView> v = dec.decode({{bytes[i].data(), bytes[i].size(), files[i]}}, stream.get());
        stream.sync();
        alone.push_back(download(v[0]));
      }
    }
    std::atomic<int> differing{0}, off_gpu{0}, decoded{0};
    std::mutex names_mutex;
    std::vector<std::string> names;
    auto work = [&](unsigned seed) {
      CudaJpegDecoder dec(o);
      Stream stream;
      std::mt19937 rng(seed);
      size_t next = seed % files.size();
      for (int batch = 0; batch < 40; ++batch) {
        const int n = std::uniform_int_distribution<int>(1, 32)(rng);
        std::vector<EncodedImage> list;
        std::vector<size_t> index;
        for (int k = 0; k < n; ++k, next = (next + 1) % files.size()) {
          list.push_back({bytes[next].data(), bytes[next].size(), files[next]});
          index.push_back(next);
        }
        JpegDecodeCounts counts;
        const std::vector<ImageView> v = dec.decode(list, stream.get(), &counts);
        off_gpu += n - static_cast<int>(counts.gpu());
        stream.sync();
        for (int k = 0; k < n; ++k, ++decoded) {
          if (exact(download(v[k]), alone[index[k]])) continue;
          ++differing;
          std::lock_guard<std::mutex> lock(names_mutex);
          if (names.size() < 5) names.push_back(files[index[k]] + " (batch of " + std::to_string(n) + ")");
        }
      }
    };
    std::thread a(work, 1u), b(work, 2u);
    a.join();
    b.join();
    std::printf("[ nvjpeg ] %s: %d images in random batches on two threads, %d differ from their decode alone, "
                "%d off the GPU\n", hardware ? "hardware" : "hybrid", decoded.load(), differing.load(), off_gpu.load());
    EXPECT_EQ(differing.load(), 0) << (hardware ? "hardware" : "hybrid") << ", first: " << (names.empty() ? "" : names[0]);
    EXPECT_EQ(off_gpu.load(), 0);
  }
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
}

// power_of_two_lists: lists of random sizes (1..32) decode to the same pixels as on a decoder
// without it, with one nvjpegDecodeBatchedInitialize per power-of-two size (at most 6 up to 32)
// where the other initialises again at every change of size.
TEST(DecodeCuda, PowerOfTwoListsSamePixelsOneInitialisationPerSize) {
  YOLOCU_REQUIRE_GPU();
  const std::vector<std::string> files = jpeg_files();
  if (files.size() < 32) GTEST_SKIP() << "coco128 not found";
  std::vector<std::string> bytes;
  for (const auto& f : files) bytes.push_back(read_file_bytes(f));
  CudaJpegDecoderOptions o;
  CudaJpegDecoder plain(o);
  o.power_of_two_lists = true;
  CudaJpegDecoder pow2(o);
  Stream stream;
  std::mt19937 rng(3);
  size_t next = 0;
  int changes = 0, last = 0, differing = 0;
  for (int list = 0; list < 30; ++list) {
    const int n = std::uniform_int_distribution<int>(1, 32)(rng);
    std::vector<EncodedImage> images;
    for (int k = 0; k < n; ++k, next = (next + 1) % files.size())
      images.push_back({bytes[next].data(), bytes[next].size(), files[next]});
    JpegDecodeCounts c;
    const std::vector<ImageView> a = plain.decode(images, stream.get(), &c);
    stream.sync();
    // the images of the batched call (the hardware backend decodes progressive ones apart)
    const int m = static_cast<int>(plain.backend() == "hardware" ? c.gpu_hardware : c.gpu_hybrid);
    changes += m > 0 && m != last;
    if (m > 0) last = m;
    std::vector<Image> want;
    for (const ImageView& v : a) want.push_back(download(v));
    const std::vector<ImageView> b = pow2.decode(images, stream.get());
    stream.sync();
    for (int k = 0; k < n; ++k) differing += !exact(download(b[static_cast<size_t>(k)]), want[static_cast<size_t>(k)]);
  }
  std::printf("[ nvjpeg ] %s: 30 lists, initialisations %lld (one state) and %lld (power-of-two lists)\n",
              plain.backend().c_str(), static_cast<long long>(plain.totals().batched_inits),
              static_cast<long long>(pow2.totals().batched_inits));
  EXPECT_EQ(differing, 0);
  EXPECT_EQ(plain.totals().batched_inits, changes);
  EXPECT_LE(pow2.totals().batched_inits, 6);
  EXPECT_EQ(pow2.totals().gpu(), plain.totals().gpu());
}

// cpu_share: every 4th image of a call (0.25) is decoded on CPU threads while nvJPEG decodes the
// rest. The shared ones are decode_image()'s pixels exactly, the others nvJPEG's exactly as a
// decoder without a share gives them; the counts say which; a corrupt JPEG in the CPU's share gets
// the CPU decoder's error and the decoder stays usable; out-of-range shares are refused.
TEST(DecodeCuda, CpuShareDecodesEveryKthOnTheCpuExactly) {
  YOLOCU_REQUIRE_GPU();
  const std::vector<std::string> files = jpeg_files();
  if (files.size() < 34) GTEST_SKIP() << "sample images / coco128 not found";
  std::vector<std::string> bytes;
  for (size_t i = 0; i < 34; ++i) bytes.push_back(read_file_bytes(files[i]));
  std::vector<EncodedImage> batch;
  for (size_t i = 0; i < bytes.size(); ++i) batch.push_back({bytes[i].data(), bytes[i].size(), files[i]});
  CudaJpegDecoder plain;
  CudaJpegDecoderOptions o;
  o.cpu_share = 0.25f;
  CudaJpegDecoder shared(o);
  Stream stream;
  JpegDecodeCounts pc, sc;
  const std::vector<ImageView> pv = plain.decode(batch, stream.get(), &pc);
  stream.sync();
  std::vector<Image> plain_out;
  for (const ImageView& v : pv) plain_out.push_back(download(v));
  const std::vector<ImageView> sv = shared.decode(batch, stream.get(), &sc);
  stream.sync();
  // The images nvJPEG batches (the hardware backend decodes progressive ones apart, one by one):
  // every 4th of them is the CPU's.
  const int64_t batched = shared.backend() == "hardware" ? pc.gpu_hardware : pc.gpu_hybrid;
  EXPECT_EQ(pc.cpu_shared, 0);
  EXPECT_EQ(sc.cpu_shared, batched / 4) << batched << " images batched by nvJPEG";
  EXPECT_GE(sc.cpu_shared, 6);
  EXPECT_EQ(sc.gpu() + sc.cpu_shared, pc.gpu());
  // Which images were the CPU's shows only where the two decoders' pixels differ (on an H100,
  // 3 of the 8 shared coco128 images decoded to the same bytes on both): every image is one
  // of the two; at most cpu_shared carry pixels only the CPU gives, at least one does (the share
  // ran), and at least cpu_shared equal the CPU's.
  int64_t cpu_only = 0, cpu_equal = 0;
  std::vector<Image> shared_out;
  for (size_t k = 0; k < batch.size(); ++k) {
    shared_out.push_back(download(sv[k]));
    const Image& got = shared_out.back();
    const bool is_cpu = exact(got, decode_image(batch[k].data, batch[k].size)), is_plain = exact(got, plain_out[k]);
    EXPECT_TRUE(is_cpu || is_plain) << "image " << k << ": neither the CPU's pixels nor nvJPEG's";
    cpu_only += is_cpu && !is_plain;
    cpu_equal += is_cpu;
  }
  EXPECT_LE(cpu_only, sc.cpu_shared) << "more images with the CPU's own pixels than the CPU decoded";
  EXPECT_GE(cpu_only, 1) << "no image with the CPU's own pixels: the share did not run";
  EXPECT_GE(cpu_equal, sc.cpu_shared) << "fewer images with the CPU's pixels than the CPU decoded";
  // the same list is split the same way every time
  const std::vector<ImageView> sv2 = shared.decode(batch, stream.get());
  stream.sync();
  for (size_t k = 0; k < batch.size(); ++k) EXPECT_TRUE(exact(download(sv2[k]), shared_out[k])) << "image " << k;
  // A corrupt JPEG (cut in its entropy data) at a shared position: the CPU decoder's error.
  const std::vector<uint8_t> good = test::encode_jpeg(test::jpeg_test_pattern(96, 64));
  const std::vector<uint8_t> bad = test::cut(good, good.size() / 2);
  std::vector<EncodedImage> with_bad(batch.begin(), batch.begin() + 8);
  with_bad[3] = {bad.data(), bad.size(), "bad.jpg"};
  std::string want, got;
  EXPECT_EQ(code_of([&] { decode_image(bad.data(), bad.size(), {}, "bad.jpg"); }, &want), ErrorCode::kParse);
  EXPECT_EQ(code_of([&] { shared.decode(with_bad, stream.get()); }, &got), ErrorCode::kParse);
  EXPECT_EQ(got, want);
  stream.sync();
  JpegDecodeCounts ac;
  shared.decode(std::vector<EncodedImage>(batch.begin(), batch.begin() + 8), stream.get(), &ac);  // still usable
  stream.sync();
  EXPECT_EQ(ac.gpu() + ac.cpu(), 8);
  for (const float bad_share : {-0.1f, 0.95f}) {
    CudaJpegDecoderOptions b;
    b.cpu_share = bad_share;
    EXPECT_EQ(code_of([&] { CudaJpegDecoder d(b); }), ErrorCode::kInvalidArgument) << bad_share;
  }
}

TEST(DecodeCuda, JpegVariantsOnTheGpuWithinToleranceFallbacksExact) {
  YOLOCU_REQUIRE_GPU();
  const Image bgr = test::jpeg_test_pattern(203, 117);  // odd sizes: partial MCUs
  const std::vector<uint8_t> png = test::encode_png_bgr(bgr);
  std::vector<uint8_t> trailing = test::encode_jpeg(bgr);
  trailing.insert(trailing.end(), {0x00, 0x00});
  struct Case {
    std::string name;
    std::vector<uint8_t> bytes;
    bool gpu;  // expected on nvJPEG; else the CPU decoder (exact)
  };
  const std::vector<Case> cases = {
      {"baseline 4:2:0", test::encode_jpeg(bgr), true},
      {"4:4:4", test::encode_jpeg_sampling(bgr, 1, 1), true},
      {"4:2:2", test::encode_jpeg_sampling(bgr, 2, 1), true},
      {"4:4:0", test::encode_jpeg_sampling(bgr, 1, 2), true},
      {"restart markers", test::encode_jpeg(bgr, false, 3), true},
      {"progressive", test::encode_jpeg(bgr, true), true},
      {"grey", test::encode_jpeg_grey(bgr), true},
      {"png", png, false},
      {"exif 6", test::with_exif_orientation(test::encode_jpeg(bgr), 6, false), false},
      {"exif 3", test::with_exif_orientation(test::encode_jpeg(bgr), 3, true), false},
      {"cmyk", test::cmyk_jpeg(61, 43), false},
      {"data after EOI", trailing, false},
  };
  CudaJpegDecoder dec;
  Stream stream;
  // one by one (the route of each is checked) and then all in one batch (mixed routes)
  std::vector<EncodedImage> all;
  for (const Case& c : cases) all.push_back({c.bytes.data(), c.bytes.size(), c.name});
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<ImageView> views;
    if (pass == 1) {
      JpegDecodeCounts counts;
      views = dec.decode(all, stream.get(), &counts);
      EXPECT_EQ(counts.cpu_not_jpeg, 1);
      EXPECT_EQ(counts.cpu_orientation, 2);
      EXPECT_EQ(counts.cpu_other, 2);
      EXPECT_EQ(counts.gpu(), 7);
      stream.sync();
    }
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      SCOPED_TRACE(c.name + (pass ? " (mixed batch)" : ""));
      ImageView v;
      if (pass == 0) {
        JpegDecodeCounts counts;
        v = dec.decode({all[i]}, stream.get(), &counts).at(0);
        stream.sync();
        EXPECT_EQ(counts.gpu(), c.gpu ? 1 : 0);
        EXPECT_EQ(counts.cpu(), c.gpu ? 0 : 1);
      } else {
        v = views[i];
      }
      const Image got = download(v), want = decode_image(c.bytes.data(), c.bytes.size());
      if (c.gpu) {
        const PixelDiff d = diff(got, want);
        std::printf("[ nvjpeg ] %-16s max |diff| %3d, mean %.3f, share > 32: %.5f\n", c.name.c_str(), d.max_abs,
                    d.mean_abs, d.share_over_32);
        EXPECT_LE(d.mean_abs, kMaxMeanDiff);
        EXPECT_LE(d.share_over_32, kMaxShareOver32);
      } else {
        EXPECT_TRUE(exact(got, want)) << "a CPU fallback must be decode_image() exactly";
      }
    }
  }
}

TEST(DecodeCuda, BadInputsGiveTheCpuDecodersErrors) {
  YOLOCU_REQUIRE_GPU();
  const std::vector<uint8_t> good = test::encode_jpeg(test::jpeg_test_pattern(96, 64));
  // first in a batch before the bad one: small enough for every limit below (96x64 itself is not)
  const std::vector<uint8_t> tiny = test::encode_jpeg(test::jpeg_test_pattern(16, 16));
  CudaJpegDecoder dec;
  Stream stream;
  auto expect_cpu_error = [&](const std::vector<uint8_t>& b, const DecodeLimits& limits, ErrorCode code) {
    std::string want, got;
    EXPECT_EQ(code_of([&] { decode_image(b.data(), b.size(), limits, "bad.jpg"); }, &want), code);
    CudaJpegDecoderOptions o;
    o.limits = limits;
    CudaJpegDecoder limited(o);
    // alone, and second in a batch after a good image
    EXPECT_EQ(code_of([&] { limited.decode({{b.data(), b.size(), "bad.jpg"}}, stream.get()); }, &got), code);
    EXPECT_EQ(got, want);
    EXPECT_EQ(code_of([&] { limited.decode({{tiny.data(), tiny.size(), "tiny.jpg"}, {b.data(), b.size(), "bad.jpg"}},
                                           stream.get()); }, &got), code);
    EXPECT_EQ(got, want);
    stream.sync();
  };
  expect_cpu_error(test::cut(good, good.size() / 2), {}, ErrorCode::kParse);   // cut in the entropy data
  expect_cpu_error(test::cut(good, good.size() - 1), {}, ErrorCode::kParse);   // half the EOI marker
  expect_cpu_error(test::cut(good, 60), {}, ErrorCode::kParse);                // cut in the header
  expect_cpu_error({}, {}, ErrorCode::kParse);                                 // empty
  const std::vector<uint8_t> text = {'G', 'I', 'F', '8', '9', 'a'};
  expect_cpu_error(text, {}, ErrorCode::kUnsupported);                         // not JPEG / PNG
  DecodeLimits small;
  small.max_pixels = 96 * 64 - 1;
  expect_cpu_error(good, small, ErrorCode::kOutOfMemory);
  // the decoder is still usable after errors
  const std::vector<ImageView> v = dec.decode({{good.data(), good.size(), "good.jpg"}}, stream.get());
  stream.sync();
  const PixelDiff d = diff(download(v[0]), decode_image(good.data(), good.size()));
  EXPECT_LE(d.mean_abs, kMaxMeanDiff);
}

TEST(DecodeCuda, CorruptEntropyDataDecodesOrFailsCleanly) {
  YOLOCU_REQUIRE_GPU();
  // Bytes flipped inside the entropy-coded data (the file still ends with EOI): libjpeg decodes
  // with warnings; nvJPEG may decode something else or refuse (then the CPU decodes it). Either an
  // image of the header's size or the CPU decoder's kParse, never a crash or an out-of-bounds
  // write (compute-sanitizer memcheck runs this test).
  const std::vector<uint8_t> good = test::encode_jpeg(test::jpeg_test_pattern(160, 96));
  CudaJpegDecoder dec;
  Stream stream;
  for (int seed = 0; seed < 8; ++seed) {
    std::vector<uint8_t> b = good;
    std::mt19937 rng(static_cast<uint32_t>(seed) + 1);
    for (int k = 0; k < 12; ++k) b[b.size() / 2 + rng() % (b.size() / 3)] ^= 0x5A;
    b[b.size() - 2] = 0xFF;
    b[b.size() - 1] = 0xD9;
    try {
      const std::vector<ImageView> v = dec.decode({{b.data(), b.size(), "corrupt.jpg"}}, stream.get());
      stream.sync();
      EXPECT_EQ(v[0].width, 160);
      EXPECT_EQ(v[0].height, 96);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kParse) << e.what();
    }
  }
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(DecodeCuda, BufferGrowsAndImagesDoNotOverlap) {
  YOLOCU_REQUIRE_GPU();
  const std::vector<uint8_t> small = test::encode_jpeg(test::jpeg_test_pattern(33, 21));
  const std::vector<uint8_t> big = test::encode_jpeg(test::jpeg_test_pattern(640, 480));
  CudaJpegDecoder dec;
  Stream stream;
  dec.decode({{small.data(), small.size(), "small"}}, stream.get());
  stream.sync();
  const size_t first = dec.device_bytes();
  const std::vector<ImageView> v = dec.decode(
      {{big.data(), big.size(), "a"}, {small.data(), small.size(), "b"}, {big.data(), big.size(), "c"}}, stream.get());
  stream.sync();
  EXPECT_GT(dec.device_bytes(), first);
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_GE(v[i].pitch_bytes, static_cast<size_t>(v[i].width) * 3);
    for (size_t j = i + 1; j < v.size(); ++j)
      EXPECT_LE(v[i].data + v[i].pitch_bytes * static_cast<size_t>(v[i].height), v[j].data) << i << " overlaps " << j;
  }
  // the same bytes decode to the same pixels at every position of the batch
  EXPECT_TRUE(exact(download(v[0]), download(v[2])));
  EXPECT_TRUE(dec.decode({}, stream.get()).empty());
}

// The output buffer is charged to a device budget (max_device_memory or the owner's), refuses
// before allocating, stays usable, and is given back after one large image.
TEST(DecodeCuda, OutputBufferChargedToTheBudgetAndShrunk) {
  YOLOCU_REQUIRE_GPU();
  const std::vector<uint8_t> small = test::encode_jpeg(test::jpeg_test_pattern(64, 48));
  const std::vector<uint8_t> big = test::encode_jpeg(test::jpeg_test_pattern(1920, 1080));
  Stream stream;
  CudaJpegDecoderOptions o;
  o.max_device_memory = 1 << 20;  // the small image's slot fits, 1920x1080x3 does not
  o.shrink_above_bytes = 1 << 20;
  CudaJpegDecoder capped(o);
  std::string message;
  EXPECT_EQ(code_of([&] { capped.decode({{big.data(), big.size(), "big.jpg"}}, stream.get()); }, &message),
            ErrorCode::kOutOfMemory);
  EXPECT_NE(message.find("CudaJpegDecoderOptions::max_device_memory"), std::string::npos) << message;
  EXPECT_NE(message.find("nvJPEG decoder's output buffer"), std::string::npos) << message;
  EXPECT_NO_THROW(capped.decode({{small.data(), small.size(), "small.jpg"}}, stream.get()));
  stream.sync();

  o.max_device_memory = 0;
  CudaJpegDecoder dec(o);
  dec.decode({{big.data(), big.size(), "big.jpg"}}, stream.get());
  stream.sync();
  const size_t grown = dec.device_bytes();
  EXPECT_GE(grown, size_t{1920} * 3 * 1080);
  dec.decode({{small.data(), small.size(), "small.jpg"}}, stream.get());
  stream.sync();
  EXPECT_LT(dec.device_bytes(), grown / 4) << "the buffer was not given back after the large image";
}

// The GPU path refuses the same bombs as the CPU decoder, before nvJPEG sees them.
TEST(DecodeCuda, ScanAndPixelLimitsBeforeNvjpeg) {
  YOLOCU_REQUIRE_GPU();
  const std::vector<uint8_t> scans = test::progressive_scan_bomb(640, 480, 1, 200);
  const std::vector<uint8_t> huge = test::progressive_scan_bomb(16384, 16384, 1, 2);
  CudaJpegDecoder dec;
  Stream stream;
  std::string message;
  EXPECT_EQ(code_of([&] { dec.decode({{scans.data(), scans.size(), "scans.jpg"}}, stream.get()); }, &message),
            ErrorCode::kOutOfMemory);
  EXPECT_NE(message.find("scans.jpg: JPEG: progressive image of more than 100 scans"), std::string::npos) << message;
  EXPECT_EQ(code_of([&] { dec.decode({{huge.data(), huge.size(), "huge.jpg"}}, stream.get()); }, &message),
            ErrorCode::kOutOfMemory);
  EXPECT_NE(message.find("max_pixels"), std::string::npos) << message;
  EXPECT_EQ(dec.device_bytes(), 0u) << "nothing is allocated for a refused image";
}

}  // namespace
}  // namespace yolocu
