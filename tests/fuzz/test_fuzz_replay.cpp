// The fuzz harnesses' inputs as regression tests: every seed of fuzz/corpus/<harness>/ and every
// input that once crashed a harness (fuzz/regressions/<harness>/, named after the bug it found)
// runs through the same harness body as under libFuzzer (fuzz/targets.hpp). A crash, a sanitizer
// report (the asan build) or an exception other than yolocu::Error fails the test.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "core/file_util.hpp"
#include "targets.hpp"
#include "test_util.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"
#include "yolocu/video.hpp"

namespace fs = std::filesystem;
using namespace yolocu;

namespace {

std::vector<fs::path> files_in(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

void replay(const std::string& harness, const std::string& dir, size_t min_files) {
  const auto target = fuzz::target(harness);
  ASSERT_NE(target, nullptr);
  const auto files = files_in(dir);
  EXPECT_GE(files.size(), min_files) << dir;
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    const std::string bytes = detail::read_file(f.string());
    EXPECT_NO_THROW(target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
}

const std::string kFuzzDir = std::string(YOLOCU_SOURCE_DIR) + "/fuzz";

}  // namespace

class FuzzReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzReplay, SeedCorpus) { replay(GetParam(), kFuzzDir + "/corpus/" + GetParam(), 5); }
TEST_P(FuzzReplay, Regressions) { replay(GetParam(), kFuzzDir + "/regressions/" + GetParam(), 0); }

INSTANTIATE_TEST_SUITE_P(Harnesses, FuzzReplay,
                         ::testing::Values("onnx", "image", "npy", "labels", "tactic_cache", "video", "source_list",
                                           "triton_request"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// The seed models are valid: each loads, plans and runs on the CPU engine (a seed that fails early
// would only fuzz the error path).
TEST(FuzzSeeds, ModelsLoadAndRun) {
  const auto files = files_in(kFuzzDir + "/corpus/onnx");
  ASSERT_GE(files.size(), 5u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    try {
      auto m = std::make_shared<Model>(load_onnx(f.string()));
      std::vector<Tensor> inputs;
      for (const auto& v : m->graph.inputs) {
        Shape s;
        for (size_t k = 0; k < v.dims.size(); ++k)
          s.push_back(v.dims[k].is_static() ? v.dims[k].value : (k >= 2 ? 32 : 1));
        inputs.emplace_back(v.dtype, s);
      }
      CpuEngine engine(m);
      const auto outs = engine.run(inputs);
      EXPECT_EQ(outs.size(), m->graph.outputs.size());
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// The video seeds are real videos: each gives its 3 frames through the path the harness takes (the
// bytes in a memfd, opened by its /proc path as a file source), so the fuzzer starts from decoding
// and not from the error path.
TEST(FuzzSeeds, VideosDecodeFromAMemoryFile) {
  if (!video_input_supported()) GTEST_SKIP() << "a build without FFmpeg";
  const auto files = files_in(kFuzzDir + "/corpus/video");
  ASSERT_GE(files.size(), 5u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    const std::string bytes = detail::read_file(f.string());
    const int fd = ::memfd_create("seed", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    try {
      const auto source = FrameSource::open("/proc/self/fd/" + std::to_string(fd));
      VideoFrame frame;
      int frames = 0;
      while (source->read(frame)) ++frames;
      EXPECT_EQ(frames, 3);
      EXPECT_EQ(frame.width(), 32);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
    ::close(fd);
  }
}
