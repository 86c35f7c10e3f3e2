// The measured bomb set: small files built here (never committed) that declare huge images or
// cost many passes, each decoded with the default DecodeLimits in a child process whose peak RSS
// and CPU time come from wait4(). The default budget: no input of <= 1 MB makes the decoder use
// more than 512 MB or 2 s of CPU; a refusal is kOutOfMemory naming the image and the limit.
// Not run under ASan (its shadow memory would be measured). Prints one line per bomb.
#include <gtest/gtest.h>
#include <png.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "preprocess/bomb_images.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"

namespace yolocu {
namespace {

constexpr long kMaxRssKiB = 512 * 1024;
constexpr double kMaxCpuSeconds = 2.0;
constexpr size_t kMaxInputBytes = size_t{1} << 20;

struct Measured {
  std::string outcome;  // "ok WxH" or "error <code>: <message>"
  long max_rss_kib = 0;
  double cpu_s = 0;
};

long self_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// Decodes `bytes` in a forked child; its outcome comes back through a pipe.
Measured decode_in_child(const std::vector<uint8_t>& bytes, const std::string& name) {
  int fds[2];
  if (pipe(fds) != 0) return {"pipe failed", 0, 0};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    try {
      const Image img = decode_image(bytes.data(), bytes.size(), DecodeLimits{}, name);
      out = "ok " + std::to_string(img.width()) + "x" + std::to_string(img.height());
    } catch (const Error& e) {
      out = std::string("error ") + error_code_name(e.code()) + ": " + e.what();
    } catch (const std::exception& e) {
      out = std::string("exception: ") + e.what();
    }
    const ssize_t n = write(fds[1], out.data(), out.size());
    _exit(n == static_cast<ssize_t>(out.size()) ? 0 : 3);
  }
  close(fds[1]);
  Measured m;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) m.outcome.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  rusage u{};
  wait4(pid, &status, 0, &u);
  if (!WIFEXITED(status)) m.outcome = "child died: status " + std::to_string(status);
  m.max_rss_kib = u.ru_maxrss;
  m.cpu_s = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
            static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
  return m;
}

// Runs one bomb: within the budget, and refused naming `limit` (or decoded when limit is "").
void run_bomb(const std::string& name, const std::vector<uint8_t>& bytes, const std::string& limit) {
  ASSERT_LE(bytes.size(), kMaxInputBytes) << name;
  const Measured m = decode_in_child(bytes, name);
  std::printf("[ bomb ] %-44s %8zu bytes  peak RSS %6.1f MiB  CPU %5.2f s  (parent at fork %.1f MiB)  %s\n",
              name.c_str(), bytes.size(), m.max_rss_kib / 1024.0, m.cpu_s, self_rss_kib() / 1024.0,
              m.outcome.substr(0, 160).c_str());
  EXPECT_LE(m.max_rss_kib, kMaxRssKiB) << name;
  EXPECT_LE(m.cpu_s, kMaxCpuSeconds) << name;
  if (limit.empty()) {
    EXPECT_EQ(m.outcome.rfind("ok ", 0), 0u) << name << ": " << m.outcome;
  } else {
    EXPECT_EQ(m.outcome.rfind("error out of memory", 0), 0u) << name << ": " << m.outcome;
    EXPECT_NE(m.outcome.find(name), std::string::npos) << m.outcome;
    EXPECT_NE(m.outcome.find(limit), std::string::npos) << m.outcome;
  }
}

TEST(DecodeBombs, ProgressiveManyScansHugeDeclaredSize) {
  run_bomb("progressive-800-scans-16384x16384.jpg", test::progressive_scan_bomb(16384, 16384, 1, 800), "max_pixels");
}

TEST(DecodeBombs, ProgressiveManyScansAtThePixelLimit) {
  // 49 MP grey: within max_pixels, stopped by max_scans after 100 scans of the whole image
  run_bomb("progressive-800-scans-7000x7000-grey.jpg", test::progressive_scan_bomb(7000, 7000, 1, 800), "max_scans");
  run_bomb("progressive-20000-scans-7000x7000-grey.jpg", test::progressive_scan_bomb(7000, 7000, 1, 20000),
           "max_scans");
}

TEST(DecodeBombs, ProgressiveColourOverTheDecoderMemory) {
  // 3 components at 4:4:4: 6 bytes of coefficients per pixel, 294 MB > max_decoder_memory
  run_bomb("progressive-7000x7000-444.jpg", test::progressive_scan_bomb(7000, 7000, 3, 10), "max_decoder_memory");
}

TEST(DecodeBombs, LargestAcceptedImagesDecodeWithinBudget) {
  run_bomb("progressive-100-scans-7000x7000-grey.jpg", test::progressive_scan_bomb(7000, 7000, 1, 100), "");
  run_bomb("baseline-7000x7000.jpg", test::baseline_size_bomb(7000, 7000), "");
  run_bomb("png-1bit-7000x7000.png", test::zero_png(7000, 7000, PNG_COLOR_TYPE_GRAY, 1), "");
  run_bomb("png-16bit-rgba-7000x7000.png", test::zero_png(7000, 7000, PNG_COLOR_TYPE_RGB_ALPHA, 16), "");
}

TEST(DecodeBombs, HugeDeclaredSizes) {
  run_bomb("baseline-65000x65000.jpg", test::baseline_size_bomb(65000, 65000), "max_width");
  run_bomb("baseline-16000x16000.jpg", test::baseline_size_bomb(16000, 16000), "max_pixels");
  run_bomb("png-1bit-16384x16384.png", test::zero_png(16384, 16384, PNG_COLOR_TYPE_GRAY, 1), "max_pixels");
  run_bomb("png-header-16384x16384.png", test::png_header_only(16384, 16384), "max_pixels");
}

}  // namespace
}  // namespace yolocu
