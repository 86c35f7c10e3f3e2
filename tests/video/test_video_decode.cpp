// The CPU decode path against cv2.VideoCapture (frames byte for byte, every codec and container of
// the generated clips), frame selection (start, stride, limits), image sequences, source strings,
// and the video writer.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "video/decoder.hpp"
#include "video/video_test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/npy.hpp"
#include "yolocu/video.hpp"
#include "yolocu/video_streams.hpp"
#include "yolocu/video_writer.hpp"

namespace yolocu {
namespace {
namespace fs = std::filesystem;

class Clips : public ::testing::TestWithParam<std::string> {};

TEST_P(Clips, FramesAreByteIdenticalToCv2VideoCapture) {
  YOLOCU_REQUIRE_VIDEO(clip, GetParam());
  YOLOCU_REQUIRE_VIDEO(ref_path, "frames_" + GetParam() + ".npy");
  const Tensor ref = load_npy(ref_path);
  VideoSourceOptions o;
  o.backend = DecodeBackend::kCpu;
  auto src = FrameSource::open(clip, o);
  EXPECT_EQ(src->info().kind, SourceKind::kFile);
  EXPECT_EQ(src->info().width, ref.dim(2));
  EXPECT_EQ(src->info().height, ref.dim(1));
  EXPECT_NEAR(src->info().fps, 25.0, 1e-6);
  EXPECT_EQ(src->info().decoder.rfind("cpu: libavcodec", 0), 0u) << src->info().decoder;
  VideoFrame f;
  int64_t n = 0;
  double last_pts = -1;
  while (src->read(f)) {
    EXPECT_EQ(f.index, n);
    EXPECT_EQ(f.format, FrameFormat::kBgr24);
    EXPECT_EQ(f.location, MemoryLocation::kHost);
    ASSERT_TRUE(std::isfinite(f.pts)) << "frame " << n;
    EXPECT_GT(f.pts, last_pts) << "frame " << n;
    EXPECT_NEAR(f.pts, static_cast<double>(n) / 25.0, 1e-3) << "frame " << n;
    last_pts = f.pts;
    EXPECT_TRUE(test::same_pixels(ref, n, f));
    ++n;
  }
  EXPECT_EQ(n, ref.dim(0)) << GetParam() << ": frame count";
  EXPECT_EQ(src->stats().decoded, n);
  EXPECT_EQ(src->stats().corrupt, 0);
  EXPECT_FALSE(src->read(f)) << "read after the end";
}

INSTANTIATE_TEST_SUITE_P(Video, Clips,
                         ::testing::Values("clip_h264.mp4", "clip_mjpeg.avi", "clip_h265.mkv", "clip_vp9.webm",
                                           "clip_av1.mkv", "clip_mpeg4.mov", "clip_h264_360.mp4"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string s = p.param;
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

// A raw H.264 stream that changes its frame size mid-way (6 frames at 640x480, then 10 at 320x240):
// the CPU decoder follows it (frames of the new size, none lost or corrupt), the material the NVDEC
// decoders' size-change test compares against on the GPU.
TEST(VideoDecode, CpuDecoderFollowsAFrameSizeChange) {
  YOLOCU_REQUIRE_VIDEO(clip, "clip_size_change.h264");
  auto src = FrameSource::open(clip, VideoSourceOptions{});
  std::vector<std::pair<int, int>> sizes;
  VideoFrame f;
  while (src->read(f)) sizes.emplace_back(f.image.width(), f.image.height());
  ASSERT_EQ(sizes.size(), 16u) << src->stats().last_problem;
  EXPECT_EQ(src->stats().corrupt, 0) << src->stats().last_problem;
  for (size_t i = 0; i < sizes.size(); ++i)
    EXPECT_EQ(sizes[i], i < 6 ? std::make_pair(640, 480) : std::make_pair(320, 240)) << "frame " << i;
}

TEST(VideoSelect, StrideStartAndFramesPickTheFramesDetectPyPicks) {
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  YOLOCU_REQUIRE_VIDEO(ref_path, "frames_clip_h264.mp4.npy");
  const Tensor ref = load_npy(ref_path);
  VideoSourceOptions o;
  o.vid_stride = 4;  // detect.py: grab 4, keep the last: frames 3, 7, 11, ...
  std::vector<VideoFrame> got = test::read_all(clip, o);
  ASSERT_EQ(got.size(), 7u);  // 30 frames: 3 7 11 15 19 23 27
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].index, static_cast<int64_t>(4 * i + 3));
    EXPECT_TRUE(test::same_pixels(ref, got[i].index, got[i]));
  }
  o.start_frame = 10;
  o.max_frames = 3;
  got = test::read_all(clip, o);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].index, 13);
  EXPECT_EQ(got[2].index, 21);
  EXPECT_TRUE(test::same_pixels(ref, 21, got[2]));
  o = VideoSourceOptions();
  o.start_frame = 29;
  got = test::read_all(clip, o);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].index, 29);
  o.start_frame = 1000;
  EXPECT_TRUE(test::read_all(clip, o).empty());
  o = VideoSourceOptions();
  o.max_frames = 0;
  EXPECT_TRUE(test::read_all(clip, o).empty());
}

// VideoFrame::received_ns: when the demuxer read the frame's own packet. The clip has B-frames
// (I B P ...: a P's packet comes before the B shown ahead of it), so in display order a B-frame was
// received after the P-frame that follows it; a source without packets (an image sequence) says
// when the image was read. Every time lies between the open and the read() that returned the frame.
TEST(VideoSelect, ReceivedTimesFollowEachFramesPacket) {
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  auto now = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
  const int64_t opened = now();
  auto src = FrameSource::open(clip, VideoSourceOptions{});
  std::vector<int64_t> received;
  VideoFrame f;
  while (src->read(f)) {
    EXPECT_GE(f.received_ns, opened) << "frame " << f.index;
    EXPECT_LE(f.received_ns, now()) << "frame " << f.index;
    received.push_back(f.received_ns);
  }
  ASSERT_EQ(received.size(), 30u);
  int later_than_next = 0;  // B-frames: received after the next frame in display order
  for (size_t i = 0; i + 1 < received.size(); ++i) later_than_next += received[i] > received[i + 1];
  EXPECT_GT(later_than_next, 0) << "every frame's time increased in display order: not matched to its own packet";
  YOLOCU_REQUIRE_VIDEO(seq, "seq");
  auto images = FrameSource::open(seq, VideoSourceOptions{});  // a folder of images
  ASSERT_TRUE(images->read(f));
  EXPECT_GE(f.received_ns, opened);
  EXPECT_LE(f.received_ns, now());
}

TEST(VideoSelect, InvalidOptionsAreRefusedBeforeOpening) {
  auto bad = [](auto edit) {
    VideoSourceOptions o;
    edit(o);
    try {
      FrameSource::open("does-not-matter.mp4", o);
    } catch (const Error& e) {
      return e.code() == ErrorCode::kInvalidArgument;
    }
    return false;
  };
  EXPECT_TRUE(bad([](VideoSourceOptions& o) { o.vid_stride = 0; }));
  EXPECT_TRUE(bad([](VideoSourceOptions& o) { o.start_frame = -1; }));
  EXPECT_TRUE(bad([](VideoSourceOptions& o) { o.max_frames = -2; }));
  EXPECT_TRUE(bad([](VideoSourceOptions& o) { o.read_timeout_s = 0; }));
  EXPECT_TRUE(bad([](VideoSourceOptions& o) { o.rtsp_transport = "http"; }));
}

// kCuda without a GPU (or in a build without CUDA): a clear kUnsupported naming NVDEC, through
// the default decoder, the Video Codec SDK's (YOLOCU_NVDEC_API=sdk; or, in a build without it, its
// own refusal) and libavcodec's hwaccel. On a GPU machine tests/video/test_video_cuda.cpp covers kCuda.
TEST(VideoSelect, GpuDecoderWithoutGpuIsRefusedClearly) {
  if (test::have_gpu()) GTEST_SKIP() << "a CUDA device is present: test_video_cuda covers kCuda";
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  VideoSourceOptions o;
  o.backend = DecodeBackend::kCuda;
  for (const char* api : {"", "sdk", "hwaccel"}) {
    test::ScopedEnv env("YOLOCU_NVDEC_API", api);
    try {
      FrameSource::open(clip, o);
      ADD_FAILURE() << "kCuda opened (YOLOCU_NVDEC_API=" << api << ")";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
      const std::string what = e.what();
      EXPECT_TRUE(what.find("no NVDEC") != std::string::npos || what.find("no Video Codec SDK decoder") != std::string::npos)
          << what;
    }
  }
}

// The NVDEC decoder switch: the Video Codec SDK's decoder by default where it is built, either one
// by name, and a clear kInvalidArgument naming the variable for anything else.
TEST(VideoSelect, NvdecApiSwitchNamesTheDecoder) {
  {
    test::ScopedEnv env("YOLOCU_NVDEC_API", "");
    EXPECT_EQ(video::nvdec_sdk_requested(), video::nvdec_sdk_built());
  }
  {
    test::ScopedEnv env("YOLOCU_NVDEC_API", "sdk");
    EXPECT_TRUE(video::nvdec_sdk_requested());
  }
  {
    test::ScopedEnv env("YOLOCU_NVDEC_API", "hwaccel");
    EXPECT_FALSE(video::nvdec_sdk_requested());
  }
  test::ScopedEnv env("YOLOCU_NVDEC_API", "cuvid");
  try {
    (void)video::nvdec_sdk_requested();
    ADD_FAILURE() << "YOLOCU_NVDEC_API=cuvid accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("YOLOCU_NVDEC_API must be sdk or hwaccel, got 'cuvid'"), std::string::npos) << e.what();
  }
}

// Codecs and pixel formats the NVDEC backend does not take: kCuda refuses by name, before any
// device is touched (so also here); kAuto decodes them on the CPU and says why.
TEST(VideoSelect, GpuDecoderRefusesOtherCodecsAndAutoFallsBack) {
  YOLOCU_REQUIRE_VIDEO(mjpeg, "clip_mjpeg.avi");
  VideoSourceOptions o;
  o.backend = DecodeBackend::kCuda;
  try {
    FrameSource::open(mjpeg, o);
    FAIL() << "kCuda opened an MJPEG clip";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("covers h264 and hevc; this stream is mjpeg"), std::string::npos) << e.what();
  }
  o.backend = DecodeBackend::kAuto;
  o.max_frames = 2;
  auto src = FrameSource::open(mjpeg, o);
  EXPECT_EQ(src->info().decoder.rfind("cpu: libavcodec", 0), 0u) << src->info().decoder;
  EXPECT_NE(src->info().decoder_note.find("decoding on the CPU"), std::string::npos) << src->info().decoder_note;
  VideoFrame f;
  ASSERT_TRUE(src->read(f));
  EXPECT_EQ(f.location, MemoryLocation::kHost);
  EXPECT_EQ(f.format, FrameFormat::kBgr24);
}

// kAuto without a GPU: the CPU decoder, frames identical to kCpu's, the reason noted once.
TEST(VideoSelect, AutoWithoutGpuDecodesOnTheCpu) {
  if (test::have_gpu()) GTEST_SKIP() << "a CUDA device is present: test_video_cuda covers kAuto there";
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  VideoSourceOptions o;
  o.max_frames = 4;
  o.backend = DecodeBackend::kCpu;
  const std::vector<VideoFrame> cpu = test::read_all(clip, o);
  o.backend = DecodeBackend::kAuto;
  auto src = FrameSource::open(clip, o);
  EXPECT_EQ(src->info().decoder.rfind("cpu: libavcodec", 0), 0u) << src->info().decoder;
  EXPECT_NE(src->info().decoder_note.find("no NVDEC"), std::string::npos) << src->info().decoder_note;
  const std::vector<VideoFrame> autos = test::read_all(clip, o);
  ASSERT_EQ(autos.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    ASSERT_EQ(autos[i].location, MemoryLocation::kHost);
    ASSERT_EQ(autos[i].image.size_bytes(), cpu[i].image.size_bytes());
    EXPECT_EQ(std::memcmp(autos[i].image.data(), cpu[i].image.data(), cpu[i].image.size_bytes()), 0) << "frame " << i;
  }
}

// StreamSet says once per source why kAuto decodes on the CPU.
TEST(VideoSelect, StreamSetSaysWhyAutoDecodesOnTheCpu) {
  if (test::have_gpu()) GTEST_SKIP() << "a CUDA device is present: NVDEC may be used";
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  StreamOptions so;
  so.source.backend = DecodeBackend::kAuto;
  so.source.max_frames = 3;
  StreamSet set({clip}, so);
  std::vector<VideoFrame> batch;
  size_t frames = 0;
  while (set.next_batch(batch, 2)) frames += batch.size();
  EXPECT_EQ(frames, 3u);
  size_t notes = 0;
  for (const std::string& m : set.take_messages()) notes += m.find("decoding on the CPU") != std::string::npos;
  EXPECT_EQ(notes, 1u);
}

TEST(VideoSelect, DeviceOptionsAreChecked) {
  VideoSourceOptions o;
  o.max_frames_held = 17;
  EXPECT_THROW(FrameSource::open("does-not-matter.mp4", o), Error);
  o.max_frames_held = 4;
  o.cuda_device = -1;
  EXPECT_THROW(FrameSource::open("does-not-matter.mp4", o), Error);
}

TEST(ImageSequence, FolderGlobAndPatternDecodeLikeImread) {
  YOLOCU_REQUIRE_DATA(any, "coco128/images/train2017/000000000009.jpg");
  const std::string dir = fs::path(any).parent_path().string();
  VideoSourceOptions o;
  o.max_frames = 3;
  o.sequence_fps = 10;
  const std::vector<VideoFrame> folder = test::read_all(dir, o);
  ASSERT_EQ(folder.size(), 3u);
  const Image first = decode_image_file(any);
  ASSERT_EQ(folder[0].width(), first.width());
  EXPECT_EQ(0, std::memcmp(folder[0].image.data(), first.data(), first.size_bytes()));
  EXPECT_DOUBLE_EQ(folder[2].pts, 0.2);
  EXPECT_EQ(classify_source(dir), SourceKind::kImageSequence);

  const std::vector<VideoFrame> globbed = test::read_all(dir + "/0000000000*.jpg", o);
  ASSERT_EQ(globbed.size(), 3u);
  EXPECT_EQ(0, std::memcmp(globbed[0].image.data(), first.data(), first.size_bytes()));

  // a printf pattern over links 1.jpg .. 4.jpg (numbers from 1), stride 2: frames 1 and 3
  const std::string seq = test::scratch_dir("video_seq");
  for (int i = 1; i <= 4; ++i) {
    const fs::path link = fs::path(seq) / (std::to_string(i) + ".jpg");
    fs::remove(link);
    fs::create_symlink(any, link);
  }
  VideoSourceOptions s;
  s.vid_stride = 2;
  const std::vector<VideoFrame> pattern = test::read_all(seq + "/%d.jpg", s);
  ASSERT_EQ(pattern.size(), 2u);
  EXPECT_EQ(pattern[0].index, 1);
  EXPECT_EQ(pattern[1].index, 3);
  EXPECT_TRUE(std::isnan(pattern[0].pts));
}

TEST(SourceStrings, KindsAndLists) {
  EXPECT_EQ(classify_source("rtsp://cam/stream"), SourceKind::kNetwork);
  EXPECT_EQ(classify_source("HTTP://x/y.mp4"), SourceKind::kNetwork);
  EXPECT_EQ(classify_source("file:///tmp/a.mp4"), SourceKind::kFile);
  EXPECT_EQ(classify_source("/dev/video0"), SourceKind::kCamera);
  EXPECT_EQ(classify_source("0"), SourceKind::kCamera);
  EXPECT_EQ(classify_source("clip.mkv"), SourceKind::kFile);
  EXPECT_EQ(classify_source("frames/img_%05d.png"), SourceKind::kImageSequence);
  EXPECT_EQ(classify_source("frames/*.jpg"), SourceKind::kImageSequence);
  EXPECT_EQ(classify_source("bus.JPG"), SourceKind::kImageSequence);
  const std::string list = test::scratch_dir("video_lists") + "/streams.txt";
  test::write_bytes(list, "# cameras\n  a.mp4  \n\nrtsp://x/1\r\n# end\n");
  EXPECT_TRUE(is_source_list(list));
  EXPECT_EQ(read_source_list(list), (std::vector<std::string>{"a.mp4", "rtsp://x/1"}));
  test::write_bytes(list, "# nothing\n\n");
  EXPECT_THROW(read_source_list(list), Error);
  EXPECT_FALSE(is_source_list("missing.txt"));
}

std::vector<VideoFrame> first_frames(const std::string& clip, int n) {
  VideoSourceOptions o;
  o.max_frames = n;
  return test::read_all(clip, o);
}

TEST(VideoWriter, WritesAVideoThatReadsBack) {
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  const std::vector<VideoFrame> frames = first_frames(clip, 10);
  ASSERT_EQ(frames.size(), 10u);
  for (const std::string ext : {".mp4", ".avi"}) {
    const std::string out = test::scratch_dir("video_writer") + "/out" + ext;
    fs::remove(out);
    auto w = VideoWriter::open(out, 640, 480, 25);
    for (const VideoFrame& f : frames) w->write(f.view());
    EXPECT_THROW(w->write(ImageView{frames[0].image.data(), 320, 240, 960}), Error);  // wrong size
    w->close();
    EXPECT_EQ(w->frames_written(), 10);
    const std::vector<VideoFrame> back = test::read_all(out);
    ASSERT_EQ(back.size(), 10u) << out << " (" << w->encoder_name() << ")";
    double se = 0;
    const size_t n = frames[5].image.size_bytes();
    for (size_t i = 0; i < n; ++i) {
      const double d = double(back[5].image.data()[i]) - double(frames[5].image.data()[i]);
      se += d * d;
    }
    const double psnr = 10 * std::log10(255.0 * 255.0 / (se / static_cast<double>(n) + 1e-12));
    EXPECT_GT(psnr, 30) << out << " (" << w->encoder_name() << ")";
  }
}

// With frames from the GPU detector, NVENC (h264_nvenc) is tried first; where it does not open (no
// NVIDIA encoder library or GPU, as on CI) the writer falls back to libx264 / MPEG-4 and says why,
// and the video still reads back. Asking for h264_nvenc by name there is an error naming it.
TEST(VideoWriter, GpuPrefersNvencAndFallsBackSayingWhy) {
  YOLOCU_REQUIRE_VIDEO(clip, "clip_h264.mp4");
  const std::vector<VideoFrame> frames = first_frames(clip, 6);
  ASSERT_EQ(frames.size(), 6u);
  const std::string out = test::scratch_dir("video_writer_gpu") + "/out.mp4";
  fs::remove(out);
  VideoWriterOptions o;
  o.gpu = true;
  auto w = VideoWriter::open(out, 640, 480, 25, o);
  std::printf("[ writer ] gpu: encoder %s%s%s\n", w->encoder_name().c_str(), w->fallback_reason().empty() ? "" : "; ",
              w->fallback_reason().c_str());
  if (w->encoder_name() == "h264_nvenc") {
    EXPECT_TRUE(w->fallback_reason().empty()) << w->fallback_reason();
  } else {
    EXPECT_NE(w->fallback_reason().find("h264_nvenc"), std::string::npos) << w->fallback_reason();
    EXPECT_TRUE(w->encoder_name() == "libx264" || w->encoder_name() == "mpeg4") << w->encoder_name();
  }
  for (const VideoFrame& f : frames) w->write(f.view());
  w->close();
  EXPECT_EQ(test::read_all(out).size(), 6u);
  // the CPU detector's writer never tries NVENC
  const std::string out2 = test::scratch_dir("video_writer_gpu") + "/cpu.mp4";
  auto cpu = VideoWriter::open(out2, 640, 480, 25);
  EXPECT_NE(cpu->encoder_name(), "h264_nvenc");
  EXPECT_TRUE(cpu->fallback_reason().empty()) << cpu->fallback_reason();
  if (w->encoder_name() != "h264_nvenc") {
    VideoWriterOptions named;
    named.encoder = "h264_nvenc";
    std::string msg;
    try {
      VideoWriter::open(test::scratch_dir("video_writer_gpu") + "/named.mp4", 640, 480, 25, named);
      ADD_FAILURE() << "h264_nvenc opened here, though the gpu writer fell back";
    } catch (const Error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("h264_nvenc"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace yolocu
