// Damaged and hostile inputs: a truncated file, corrupt packets mid-stream, an unsupported codec,
// not a video at all, a missing file, a stream that stops sending, an unreachable URL. Each gives a
// clear yolocu::Error (or skips the damage and says so) and never crashes; scripts/test.sh also runs
// these under AddressSanitizer + LeakSanitizer.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "video/video_test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/video.hpp"

namespace yolocu {
namespace {

// The error open() or reading to the end throws, or nullopt; `frames` gets the frames read.
struct Outcome {
  bool threw = false;
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  size_t frames = 0;
  SourceStats stats;
};

Outcome run(const std::string& source, VideoSourceOptions o = {}) {
  Outcome r;
  try {
    auto src = FrameSource::open(source, o);
    VideoFrame f;
    try {
      while (src->read(f)) ++r.frames;
    } catch (const Error& e) {
      r.threw = true, r.code = e.code(), r.message = e.what();
    }
    r.stats = src->stats();
  } catch (const Error& e) {
    r.threw = true, r.code = e.code(), r.message = e.what();
  }
  return r;
}

std::string scratch(const std::string& name) { return test::scratch_dir("video_robustness") + "/" + name; }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(VideoRobustness, MissingFileAndNotAVideo) {
  Outcome r = run(scratch("no-such-clip.mp4"));
  EXPECT_TRUE(r.threw);
  EXPECT_EQ(r.code, ErrorCode::kIo);
  EXPECT_TRUE(contains(r.message, "no-such-clip.mp4: no such file")) << r.message;

  test::write_bytes(scratch("text.mp4"), std::string(4096, 'x'));
  r = run(scratch("text.mp4"));
  EXPECT_TRUE(r.threw);
  EXPECT_EQ(r.code, ErrorCode::kParse) << r.message;
  EXPECT_TRUE(contains(r.message, "text.mp4")) << r.message;
}

TEST(VideoRobustness, TruncatedFileGivesItsFramesThenEnds) {
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");  // +faststart: the index comes first
  const std::string bytes = test::read_bytes(clip);
  test::write_bytes(scratch("truncated.mp4"), bytes.substr(0, bytes.size() / 2));
  Outcome r = run(scratch("truncated.mp4"));
  EXPECT_GT(r.frames, 3u) << r.message;
  EXPECT_LT(r.frames, 30u);
  if (r.threw) {
    EXPECT_TRUE(contains(r.message, "truncated.mp4")) << r.message;
  } else {
    EXPECT_TRUE(contains(r.stats.last_problem, "ends early")) << r.stats.last_problem;
  }

  // the index at the end (no +faststart), cut off: nothing to read, and the message says why
  YOLOCU_REQUIRE_VIDEO(mjpeg, "clip_mjpeg.avi");
  const std::string avi = test::read_bytes(mjpeg);
  test::write_bytes(scratch("truncated.avi"), avi.substr(0, avi.size() / 3));
  r = run(scratch("truncated.avi"));
  EXPECT_GT(r.frames, 3u) << r.message;
  EXPECT_LT(r.frames, 30u);

  test::write_bytes(scratch("header-only.mp4"), bytes.substr(0, 200));
  r = run(scratch("header-only.mp4"));
  EXPECT_TRUE(r.threw);
  EXPECT_TRUE(r.code == ErrorCode::kParse || r.code == ErrorCode::kIo) << r.message;
  EXPECT_TRUE(contains(r.message, "header-only.mp4")) << r.message;
}

TEST(VideoRobustness, CorruptPacketsAreSkippedAndCounted) {
  YOLOCU_REQUIRE_VIDEO(mjpeg, "clip_mjpeg.avi");
  std::string avi = test::read_bytes(mjpeg);
  // wipe the start (SOI, tables) of frames 10 and 20's JPEG data: their packets cannot decode
  int chunk = 0;
  size_t wiped = 0;
  for (size_t at = avi.find("00dc"); at != std::string::npos; at = avi.find("00dc", at + 8)) {
    if (avi.compare(at + 8, 2, "\xff\xd8") != 0) continue;  // a chunk header followed by JPEG data
    if (chunk == 10 || chunk == 20) {
      for (size_t i = 0; i < 600; ++i) avi[at + 8 + i] = '\0';
      ++wiped;
    }
    ++chunk;
  }
  ASSERT_EQ(chunk, 30);
  ASSERT_EQ(wiped, 2u);
  test::write_bytes(scratch("corrupt.avi"), avi);
  Outcome r = run(scratch("corrupt.avi"));
  EXPECT_FALSE(r.threw) << r.message;
  EXPECT_EQ(r.frames + static_cast<size_t>(r.stats.corrupt), 30u) << r.stats.last_problem;
  EXPECT_GE(r.stats.corrupt, 1);
  EXPECT_TRUE(contains(r.stats.last_problem, "rejected")) << r.stats.last_problem;

  // H.264: garbage in the middle of the media data; the decoder conceals or skips, never crashes
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  std::string mp4 = test::read_bytes(clip);
  for (size_t i = mp4.size() / 2; i < mp4.size() / 2 + 3000; i += 7) mp4[i] = static_cast<char>(i * 31);
  test::write_bytes(scratch("corrupt.mp4"), mp4);
  r = run(scratch("corrupt.mp4"));
  EXPECT_FALSE(r.threw) << r.message;
  EXPECT_GE(r.frames, 20u);
}

TEST(VideoRobustness, UnsupportedCodecIsNamed) {
  YOLOCU_REQUIRE_VIDEO(mjpeg, "clip_mjpeg.avi");
  std::string avi = test::read_bytes(mjpeg);
  size_t n = 0;  // the stream header's and the bitmap header's codec tag
  for (size_t at = avi.find("MJPG"); at != std::string::npos && at < 4096; at = avi.find("MJPG", at + 4), ++n)
    avi.replace(at, 4, "YQZ9");
  ASSERT_GE(n, 1u);
  test::write_bytes(scratch("unknown-codec.avi"), avi);
  Outcome r = run(scratch("unknown-codec.avi"));
  EXPECT_TRUE(r.threw);
  EXPECT_EQ(r.code, ErrorCode::kUnsupported) << r.message;
  EXPECT_TRUE(contains(r.message, "no decoder")) << r.message;
  EXPECT_TRUE(contains(r.message, "YQZ9")) << r.message;
}

TEST(VideoRobustness, StreamThatStopsSendingTimesOut) {
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  const std::string bytes = test::read_bytes(clip);
  test::LocalHttpServer server(bytes, static_cast<long>(bytes.size() / 2));
  VideoSourceOptions o;
  o.read_timeout_s = 1;
  const auto t0 = std::chrono::steady_clock::now();
  Outcome r = run(server.url(), o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r.threw);
  EXPECT_EQ(r.code, ErrorCode::kIo);
  EXPECT_TRUE(contains(r.message, "stopped sending")) << r.message;
  EXPECT_GT(r.frames, 0u);
  EXPECT_LT(s, 8.0);
}

TEST(VideoRobustness, HttpAndFileUrlsReadLikeTheFile) {
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  test::LocalHttpServer server(test::read_bytes(clip));
  auto src = FrameSource::open(server.url());
  EXPECT_EQ(src->info().kind, SourceKind::kNetwork);
  const std::vector<VideoFrame> file = test::read_all(clip);
  VideoFrame f;
  size_t n = 0;
  while (src->read(f)) {
    ASSERT_LT(n, file.size());
    EXPECT_EQ(0, std::memcmp(f.image.data(), file[n].image.data(), f.image.size_bytes())) << "frame " << n;
    ++n;
  }
  EXPECT_EQ(n, file.size());
  // and a file:// URL is the file
  const std::vector<VideoFrame> url = test::read_all("file://" + clip);
  ASSERT_EQ(url.size(), file.size());
  EXPECT_EQ(0, std::memcmp(url.back().image.data(), file.back().image.data(), file.back().image.size_bytes()));
}

TEST(VideoRobustness, UnreachableUrlFailsFast) {
  const std::string url = "http://127.0.0.1:" + std::to_string(test::closed_port()) + "/live.mp4";
  VideoSourceOptions o;
  o.open_timeout_s = 2;
  const auto t0 = std::chrono::steady_clock::now();
  Outcome r = run(url, o);
  EXPECT_TRUE(r.threw);
  EXPECT_EQ(r.code, ErrorCode::kIo);
  EXPECT_TRUE(contains(r.message, url)) << r.message;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  r = run("/dev/video99");
  EXPECT_TRUE(r.threw);
  EXPECT_TRUE(contains(r.message, "/dev/video99")) << r.message;
}

}  // namespace
}  // namespace yolocu
