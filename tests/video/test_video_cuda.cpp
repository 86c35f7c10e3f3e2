// The NVDEC decoder backend (label gpu; skips without a CUDA device):
//  - its pictures are the CPU decoder's bit for bit: the NV12 planes equal libavcodec's software
//    YUV 4:2:0 planes exactly (H.264 / HEVC decoding is exact), and the frames copied back
//    (frame_to_host_bgr) equal the CPU path's BGR frames (= cv2.VideoCapture's) byte for byte;
//  - detections from device frames (detect_device) equal those from the CPU-decoded frames;
//  - frames held by the consumer (max_frames_held) stay valid while decoding goes on;
//  - a frame size change mid-way is followed;
//  - all of it for both NVDEC decoders: the Video Codec SDK's own parser and decoder (the default
//    where built; YOLOCU_NVDEC_API=sdk) and libavcodec's hwaccel (YOLOCU_NVDEC_API=hwaccel), each
//    also mapping on a stream of its own (YOLOCU_NVDEC_STREAM=own).
// Clips: the make_refs.sh material (YOLOCU_VIDEO_DIR), and the 1080p benchmark clips that
// YOLOCU_VIDEO_BENCH_CLIP names, ':'-separated (scripts/gpu/video_bundle.sh carries all of them:
// H.264 and HEVC).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "video/decoder.hpp"
#include "video/demuxer.hpp"
#include "video/video_test_util.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/error.hpp"
#include "yolocu/video.hpp"

namespace yolocu {
namespace {

std::vector<std::string> clips() {
  std::vector<std::string> out;
  for (const char* c : {"clip_h264.mp4", "clip_h265.mkv", "clip_h264_360.mp4"}) {
    const std::string p = test::video_file(c);
    if (!p.empty()) out.push_back(p);
  }
  // the 1080p benchmark clips, ':'-separated (H.264 and HEVC on the GPU machine)
  const char* bench = std::getenv("YOLOCU_VIDEO_BENCH_CLIP");
  const std::string list = bench ? bench : "";
  for (size_t at = 0; at < list.size();) {
    const size_t end = std::min(list.find(':', at), list.size());
    if (end > at) out.push_back(list.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

#define YOLOCU_REQUIRE_CLIPS(var)                                                                  \
  const std::vector<std::string> var = clips();                                                    \
  if (var.empty()) {                                                                               \
    if (test::video_required()) FAIL() << "no video material in " << test::video_dir();           \
    GTEST_SKIP() << "no video material (scripts/video/make_refs.sh) in " << test::video_dir();    \
  }

// Raw pictures: the CPU decoder's yuv420p planes vs NVDEC's NV12 planes, every frame (of the decoder
// open_decoder() gives: the Video Codec SDK's, or libavcodec's hwaccel with YOLOCU_NVDEC_API=hwaccel).
void expect_planes_equal_cpu(const std::vector<std::string>& files, const std::string& description) {
  for (const std::string& clip : files) {
    VideoSourceOptions o;
    video::Demuxer dc(clip, SourceKind::kFile, o), dg(clip, SourceKind::kFile, o);
    auto cpu = video::open_cpu_decoder(dc.stream(), o, clip);
    o.backend = DecodeBackend::kCuda;
    auto gpu = video::open_decoder(dg.stream(), o, clip);
    ASSERT_EQ(gpu->description().rfind("cuda: NVDEC", 0), 0u) << gpu->description();
    ASSERT_NE(gpu->description().find(description), std::string::npos) << gpu->description();
    // every picture of a decoder, in order
    auto pictures = [](video::Demuxer& dm, video::Decoder& dec, int limit, auto&& on_picture) {
      video::PacketPtr pkt = video::make_packet();
      video::FramePtr pic = video::make_frame();
      int n = 0;
      bool flushed = false;
      while (n < limit) {
        const int r = dec.receive(pic.get());
        if (r == 0) {
          on_picture(*pic, n++);
          av_frame_unref(pic.get());
          continue;
        }
        if (r == AVERROR_EOF || flushed) break;
        if (dm.read(pkt.get()) == video::Demuxer::Read::kPacket) {
          dec.send(pkt.get());
        } else {
          dec.send(nullptr);
          flushed = true;
        }
      }
      return n;
    };
    std::vector<std::vector<uint8_t>> y_cpu, uv_cpu;
    int w = 0, h = 0;
    const int limit = 60;
    pictures(dc, *cpu, limit, [&](const AVFrame& f, int) {
      ASSERT_TRUE(f.format == AV_PIX_FMT_YUV420P || f.format == AV_PIX_FMT_YUVJ420P);
      w = f.width;
      h = f.height;
      std::vector<uint8_t> y(static_cast<size_t>(w) * h), uv(static_cast<size_t>(2 * ((w + 1) / 2)) * ((h + 1) / 2));
      for (int r = 0; r < h; ++r) std::memcpy(&y[static_cast<size_t>(r) * w], f.data[0] + r * f.linesize[0], static_cast<size_t>(w));
      const int cw = (w + 1) / 2;
      for (int r = 0; r < (h + 1) / 2; ++r)
        for (int x = 0; x < cw; ++x) {
          uv[static_cast<size_t>(r) * 2 * cw + 2 * x] = f.data[1][r * f.linesize[1] + x];
          uv[static_cast<size_t>(r) * 2 * cw + 2 * x + 1] = f.data[2][r * f.linesize[2] + x];
        }
      y_cpu.push_back(std::move(y));
      uv_cpu.push_back(std::move(uv));
    });
    const int got = pictures(dg, *gpu, limit, [&](const AVFrame& f, int k) {
      ASSERT_EQ(f.format, AV_PIX_FMT_CUDA) << clip;
      ASSERT_LT(static_cast<size_t>(k), y_cpu.size());
      ASSERT_EQ(f.width, w);
      ASSERT_EQ(f.height, h);
      const size_t cw2 = 2 * static_cast<size_t>((w + 1) / 2), ch = static_cast<size_t>((h + 1) / 2);
      std::vector<uint8_t> y(static_cast<size_t>(w) * h), uv(cw2 * ch);
      ASSERT_EQ(cudaMemcpy2D(y.data(), static_cast<size_t>(w), f.data[0], static_cast<size_t>(f.linesize[0]),
                             static_cast<size_t>(w), static_cast<size_t>(h), cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy2D(uv.data(), cw2, f.data[1], static_cast<size_t>(f.linesize[1]), cw2, ch,
                             cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(y, y_cpu[static_cast<size_t>(k)]) << clip << " frame " << k << ": luma differs";
      EXPECT_EQ(uv, uv_cpu[static_cast<size_t>(k)]) << clip << " frame " << k << ": chroma differs";
    });
    EXPECT_EQ(static_cast<size_t>(got), y_cpu.size()) << clip;
    std::printf("%s: %d pictures, NVDEC planes (%s) == libavcodec's\n", clip.c_str(), got, description.c_str());
  }
}

TEST(NvdecCuda, PlanesEqualTheCpuDecodersYuv) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_CLIPS(files);
  test::ScopedEnv api("YOLOCU_NVDEC_API", "hwaccel");
  expect_planes_equal_cpu(files, "libavcodec hwaccel");
}

#define YOLOCU_REQUIRE_SDK_DECODER()                                                                \
  if (!video::nvdec_sdk_built()) GTEST_SKIP() << "built without the Video Codec SDK decoder (ffnvcodec headers)"

// The Video Codec SDK's parser and decoder (YOLOCU_NVDEC_API=sdk): the same pictures, mapped in place.
TEST(NvdecCuda, SdkDecoderPlanesEqualTheCpuDecodersYuv) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_SDK_DECODER();
  YOLOCU_REQUIRE_CLIPS(files);
  test::ScopedEnv sdk("YOLOCU_NVDEC_API", "sdk");
  expect_planes_equal_cpu(files, "Video Codec SDK");
}

// Through FrameSource: device frames, copied back, equal the CPU path's BGR frames; frames held
// (max_frames_held of them) stay valid while the decoder goes on. own_stream: each decoder's
// pictures on a stream of its own (YOLOCU_NVDEC_STREAM=own), named by the frames. check_pts: off
// for raw H.264, whose timestamps each decoder guesses its own way.
void expect_frames_equal_cpu(const std::vector<std::string>& files, bool own_stream, const std::string& decoder,
                             bool check_pts = true) {
  for (const std::string& clip : files) {
    VideoSourceOptions o;
    o.max_frames = 16;
    o.backend = DecodeBackend::kCpu;
    const std::vector<VideoFrame> cpu = test::read_all(clip, o);
    o.backend = DecodeBackend::kCuda;
    o.max_frames_held = 16;
    auto src = FrameSource::open(clip, o);
    EXPECT_TRUE(src->info().decoder_note.empty()) << src->info().decoder_note;
    EXPECT_NE(src->info().decoder.find(decoder), std::string::npos) << src->info().decoder;
    std::vector<VideoFrame> held;  // all of them, held at once
    VideoFrame f;
    while (src->read(f)) {
      ASSERT_EQ(f.location, MemoryLocation::kDevice);
      ASSERT_EQ(f.format, FrameFormat::kNv12);
      held.push_back(std::move(f));
      f = VideoFrame();
    }
    ASSERT_EQ(held.size(), cpu.size()) << clip << ": " << src->stats().last_problem;
    EXPECT_EQ(src->stats().corrupt, 0) << src->stats().last_problem;
    for (size_t i = 0; i < held.size(); ++i) {
      EXPECT_EQ(held[i].index, cpu[i].index);
      if (check_pts) {
        EXPECT_EQ(held[i].pts, cpu[i].pts);
      }
      EXPECT_EQ(held[i].device.stream != nullptr, own_stream) << clip << " frame " << i;
      const Image back = frame_to_host_bgr(held[i]);
      ASSERT_EQ(back.width(), cpu[i].image.width()) << clip;
      ASSERT_EQ(back.height(), cpu[i].image.height()) << clip;
      EXPECT_EQ(std::memcmp(back.data(), cpu[i].image.data(), back.size_bytes()), 0) << clip << " frame " << i;
    }
  }
}

TEST(NvdecCuda, FramesEqualCpuFramesAndStayValidWhileHeld) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_CLIPS(files);
  test::ScopedEnv api("YOLOCU_NVDEC_API", "hwaccel");
  expect_frames_equal_cpu(files, /*own_stream=*/false, "libavcodec hwaccel");
}

TEST(NvdecCuda, FramesOnAStreamPerDecoderEqualCpuFrames) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_CLIPS(files);
  test::ScopedEnv api("YOLOCU_NVDEC_API", "hwaccel"), env("YOLOCU_NVDEC_STREAM", "own");
  expect_frames_equal_cpu(files, /*own_stream=*/true, "libavcodec hwaccel");
}

TEST(NvdecCuda, SdkDecoderFramesEqualCpuFramesAndStayValidWhileHeld) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_SDK_DECODER();
  YOLOCU_REQUIRE_CLIPS(files);
  test::ScopedEnv sdk("YOLOCU_NVDEC_API", "sdk");
  expect_frames_equal_cpu(files, /*own_stream=*/false, "Video Codec SDK");
}

TEST(NvdecCuda, SdkDecoderFramesOnAStreamOfItsOwnEqualCpuFrames) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_SDK_DECODER();
  YOLOCU_REQUIRE_CLIPS(files);
  test::ScopedEnv sdk("YOLOCU_NVDEC_API", "sdk"), own("YOLOCU_NVDEC_STREAM", "own");
  expect_frames_equal_cpu(files, /*own_stream=*/true, "Video Codec SDK");
}

// A stream whose frame size changes mid-way (clip_size_change.h264: 6 frames at 640x480, then 10
// at 320x240, B-frames before the change): both decoders follow it with the CPU decoder's frames
// (the SDK decoder with a second decoder for the new size).
TEST(NvdecCuda, BothDecodersFollowAFrameSizeChange) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_VIDEO(clip, "clip_size_change.h264");
  VideoSourceOptions o;
  const std::vector<VideoFrame> cpu = test::read_all(clip, o);
  ASSERT_EQ(cpu.size(), 16u);
  ASSERT_EQ(cpu.front().image.width(), 640);
  ASSERT_EQ(cpu.back().image.width(), 320);  // the clip does change size
  {
    test::ScopedEnv api("YOLOCU_NVDEC_API", "hwaccel");
    expect_frames_equal_cpu({clip}, /*own_stream=*/false, "libavcodec hwaccel", /*check_pts=*/false);
  }
  if (!video::nvdec_sdk_built()) GTEST_SKIP() << "built without the Video Codec SDK decoder (ffnvcodec headers)";
  test::ScopedEnv sdk("YOLOCU_NVDEC_API", "sdk");
  expect_frames_equal_cpu({clip}, /*own_stream=*/false, "Video Codec SDK", /*check_pts=*/false);
}

TEST(NvdecCuda, DetectionsEqualTheCpuDecodePath) {
  YOLOCU_REQUIRE_GPU();
  YOLOCU_REQUIRE_CLIPS(files);
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  for (Precision prec : {Precision::kFloat32, Precision::kFloat16}) {
    DetectorOptions d;
    d.device = Device::kCuda;
    d.precision = prec;
    d.max_batch = 4;
    auto det = Detector::create(model, d);
    for (const std::string& clip : files) {
      VideoSourceOptions o;
      o.max_frames = 16;  // all held at once: as many surfaces as NVDEC can spare
      o.backend = DecodeBackend::kCpu;
      const std::vector<VideoFrame> cpu = test::read_all(clip, o);
      o.backend = DecodeBackend::kAuto;  // on this machine: NVDEC
      o.max_frames_held = 16;
      const std::vector<VideoFrame> gpu = test::read_all(clip, o);
      ASSERT_EQ(gpu.size(), cpu.size());
      size_t boxes = 0;
      for (size_t i = 0; i < cpu.size(); i += 4) {
        std::vector<ImageView> views;
        std::vector<DeviceImage> dimgs;
        for (size_t k = i; k < std::min(cpu.size(), i + 4); ++k) {
          ASSERT_EQ(gpu[k].location, MemoryLocation::kDevice);
          views.push_back(cpu[k].view());
          dimgs.push_back(gpu[k].device_image());
        }
        const std::vector<Detections> a = det->detect(views), b = det->detect_device(dimgs);
        ASSERT_EQ(a.size(), b.size());
        for (size_t k = 0; k < a.size(); ++k) {
          ASSERT_EQ(a[k].size(), b[k].size()) << clip << " frame " << i + k;
          boxes += a[k].size();
          for (size_t j = 0; j < a[k].size(); ++j) {
            EXPECT_EQ(a[k][j].class_id, b[k][j].class_id);
            EXPECT_EQ(a[k][j].confidence, b[k][j].confidence);
            EXPECT_EQ(a[k][j].x1, b[k][j].x1);
            EXPECT_EQ(a[k][j].y1, b[k][j].y1);
            EXPECT_EQ(a[k][j].x2, b[k][j].x2);
            EXPECT_EQ(a[k][j].y2, b[k][j].y2);
          }
        }
      }
      std::printf("%s (%s): %zu frames, %zu detections, NVDEC path == CPU-decode path\n", clip.c_str(),
                  prec == Precision::kFloat32 ? "fp32" : "fp16", cpu.size(), boxes);
    }
  }
}

}  // namespace
}  // namespace yolocu
