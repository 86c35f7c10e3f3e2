// Letterbox parity: yolocu against OpenCV 4.6 (cv::resize INTER_LINEAR + cv::copyMakeBorder, the
// ultralytics letterbox written in the test) on random images, and against the ultralytics
// reference arrays (tests' .npz, made by Python + OpenCV 4.6) on bus.jpg and zidane.jpg.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "preprocess/cv_oracle.hpp"
#include "preprocess/preprocess_test_util.hpp"
#include "test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/letterbox.hpp"
#include "yolocu/npy.hpp"

namespace yolocu {
namespace {

using test::compare_bytes;
using test::cv_letterbox;
using test::view_of;

// The model input the oracle way: HWC BGR -> CHW RGB, float(v) / 255.f.
std::vector<float> oracle_input(const cv::Mat& lb) {
  const int h = lb.rows, w = lb.cols;
  std::vector<float> out(static_cast<size_t>(3) * h * w);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const cv::Vec3b p = lb.at<cv::Vec3b>(y, x);
      for (int c = 0; c < 3; ++c) {
        out[(static_cast<size_t>(c) * h + y) * w + x] = static_cast<float>(p[2 - c]) / 255.f;
      }
    }
  }
  return out;
}

// Checks letterbox_bgr against the OpenCV letterbox; returns "" or a description.
std::string check_against_opencv(const cv::Mat& img, int dst_w, int dst_h) {
  const test::CvLetterbox ref = cv_letterbox(img, dst_w, dst_h);
  std::vector<uint8_t> out(static_cast<size_t>(dst_w) * dst_h * 3, 0);
  const LetterboxGeometry g = letterbox_bgr(view_of(img), dst_w, dst_h, out.data());
  std::ostringstream where;
  where << img.cols << "x" << img.rows << " -> " << dst_w << "x" << dst_h << ": ";
  if (g.new_w != ref.new_w || g.new_h != ref.new_h || g.left != ref.left || g.top != ref.top) {
    return where.str() + "geometry differs";
  }
  if (ref.image.cols != dst_w || ref.image.rows != dst_h) return where.str() + "oracle size";
  const std::string d = compare_bytes(ref.image.data, out.data(), out.size(), dst_w * 3);
  return d.empty() ? d : where.str() + d;
}

cv::Mat random_image(std::mt19937& rng, int w, int h) {
  cv::Mat m(h, w, CV_8UC3);
  std::uniform_int_distribution<int> byte(0, 255);
  // Mix of noise and smooth content (noise alone hides rounding paths that need mid values).
  const bool smooth = rng() % 2 == 0;
  const int a = byte(rng), b = byte(rng) % 7 + 1;
  for (int y = 0; y < h; ++y) {
    uint8_t* p = m.ptr<uint8_t>(y);
    for (int x = 0; x < w * 3; ++x) {
      p[x] = smooth ? static_cast<uint8_t>((a + x * b + y * 3) & 255) : static_cast<uint8_t>(byte(rng));
    }
  }
  return m;
}

TEST(Letterbox, WorkedExamplesOfTheReferenceNotes) {
  const LetterboxGeometry a = letterbox_geometry(810, 1080, 640, 640);
  EXPECT_EQ(a.new_w, 480);
  EXPECT_EQ(a.new_h, 640);
  EXPECT_EQ(a.left, 80);
  EXPECT_EQ(a.top, 0);
  const LetterboxGeometry b = letterbox_geometry(500, 806, 640, 640);
  EXPECT_EQ(b.new_w, 397);
  EXPECT_EQ(b.new_h, 640);
  EXPECT_EQ(b.left, 121);
  EXPECT_NEAR(b.pad_x, 121.489, 1e-3);
}

TEST(Letterbox, RealImagesMatchUltralyticsReference) {
  for (const char* name : {"bus", "zidane"}) {
    SCOPED_TRACE(name);
    YOLOCU_REQUIRE_DATA(path, std::string("images/") + name + ".jpg");
    YOLOCU_REQUIRE_DATA(npz, std::string("reference/") + name + ".npz");
    const Image img = decode_image_file(path);
    const cv::Mat cv_img = cv::imread(path, cv::IMREAD_COLOR);
    ASSERT_EQ(test::compare_mats(cv_img, img), "");
    const auto ref = load_npz(npz);
    const Tensor& lb = ref.at("letterboxed_bgr");
    const Tensor& input = ref.at("input");
    ASSERT_EQ(lb.shape(), (Shape{640, 640, 3}));
    ASSERT_EQ(input.shape(), (Shape{1, 3, 640, 640}));

    std::vector<uint8_t> out(640 * 640 * 3);
    letterbox_bgr(img.view(), 640, 640, out.data());
    EXPECT_EQ(compare_bytes(lb.data_as<uint8_t>(), out.data(), out.size(), 640 * 3), "");

    std::vector<float> in(3 * 640 * 640);
    letterbox_to_input(img.view(), 640, 640, DType::kFloat32, in.data());
    EXPECT_EQ(std::memcmp(in.data(), input.data(), input.nbytes()), 0) << "float input differs";

    std::vector<uint16_t> half(3 * 640 * 640);
    letterbox_to_input(img.view(), 640, 640, DType::kFloat16, half.data());
    size_t bad = 0;
    for (size_t i = 0; i < half.size(); ++i) {
      const cv::float16_t h16(input.data_as<float>()[i]);
      bad += half[i] != h16.bits();
    }
    EXPECT_EQ(bad, 0u) << "float16 input differs from the reference cast to half";
  }
}

TEST(Letterbox, SpecialPathsMatchOpenCV) {
  std::mt19937 rng(7);
  // scale exactly 2 in both directions: OpenCV's 2x2 area path
  for (auto [w, h, dw, dh] : std::vector<std::array<int, 4>>{
           {1280, 720, 640, 640}, {1280, 1280, 640, 640}, {640, 360, 320, 320},
           {1281, 720, 640, 640}, {1280, 721, 640, 640},  // just off scale 2
           {640, 480, 640, 640}, {640, 640, 640, 640}, {300, 640, 640, 640},  // no resize
           {1, 1, 640, 640}, {2, 1, 64, 64}, {3, 5, 640, 384},  // tiny, heavy upscale
           {640, 100, 640, 640}, {1, 600, 640, 640},  // one side unchanged
           {4000, 3000, 640, 640}, {3000, 4000, 640, 384}, {810, 1080, 640, 640}}) {
    const cv::Mat img = random_image(rng, w, h);
    EXPECT_EQ(check_against_opencv(img, dw, dh), "");
  }
}

TEST(Letterbox, RandomSizesMatchOpenCV) {
  std::mt19937 rng(20240611);
  const auto t0 = std::chrono::steady_clock::now();
  std::uniform_real_distribution<double> logside(0.0, std::log(4000.0));
  const int kCases = 500;
  int failures = 0;
  for (int i = 0; i < kCases && failures < 5; ++i) {
    int w = static_cast<int>(std::exp(logside(rng)));
    int h = static_cast<int>(std::exp(logside(rng)));
    w = std::max(1, std::min(w, 4000));
    h = std::max(1, std::min(h, 3000));
    int dw, dh;
    switch (i % 4) {
      case 0: dw = dh = 640; break;
      case 1: dw = 32 * (1 + static_cast<int>(rng() % 40)); dh = 32 * (1 + static_cast<int>(rng() % 40)); break;
      case 2: dw = 1 + static_cast<int>(rng() % 1000); dh = 1 + static_cast<int>(rng() % 1000); break;
      default: dw = 320; dh = 192; break;
    }
    const LetterboxGeometry g = letterbox_geometry(w, h, dw, dh);
    if (g.new_w < 1 || g.new_h < 1) continue;  // OpenCV cannot resize to 0 pixels
    cv::Mat img = random_image(rng, w, h);
    if (i % 5 == 0) {  // a pitch larger than width * 3
      cv::Mat big(h, w + 3, CV_8UC3, cv::Scalar(1, 2, 3));
      img.copyTo(big(cv::Rect(1, 0, w, h)));
      img = big(cv::Rect(1, 0, w, h));
    }
    const std::string d = check_against_opencv(img, dw, dh);
    EXPECT_EQ(d, "");
    failures += !d.empty();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RecordProperty("seconds", std::to_string(s));
}

TEST(Letterbox, ModelInputMatchesOracleConversion) {
  std::mt19937 rng(3);
  for (auto [w, h, dw, dh] : std::vector<std::array<int, 4>>{
           {810, 1080, 640, 640}, {500, 806, 640, 384}, {97, 31, 320, 320}, {1280, 720, 640, 640}}) {
    const cv::Mat img = random_image(rng, w, h);
    const test::CvLetterbox ref = cv_letterbox(img, dw, dh);
    const std::vector<float> expect = oracle_input(ref.image);
    std::vector<float> f32(expect.size());
    letterbox_to_input(view_of(img), dw, dh, DType::kFloat32, f32.data());
    EXPECT_EQ(std::memcmp(f32.data(), expect.data(), expect.size() * sizeof(float)), 0)
        << w << "x" << h << " -> " << dw << "x" << dh;
    std::vector<uint16_t> f16(expect.size());
    letterbox_to_input(view_of(img), dw, dh, DType::kFloat16, f16.data());
    size_t bad = 0;
    for (size_t k = 0; k < expect.size(); ++k) bad += f16[k] != cv::float16_t(expect[k]).bits();
    EXPECT_EQ(bad, 0u) << w << "x" << h << " -> " << dw << "x" << dh;
  }
}

TEST(Letterbox, RejectsBadArguments) {
  cv::Mat img(10, 10, CV_8UC3, cv::Scalar::all(0));
  std::vector<uint8_t> out(64 * 64 * 3);
  auto code_of = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  ImageView v = view_of(img);
  EXPECT_EQ(code_of([&] { letterbox_bgr(ImageView{}, 64, 64, out.data()); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { letterbox_bgr(v, 0, 64, out.data()); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { letterbox_bgr(v, 64, 64, nullptr); }), ErrorCode::kInvalidArgument);
  ImageView narrow = v;
  narrow.pitch_bytes = 29;
  EXPECT_EQ(code_of([&] { letterbox_bgr(narrow, 64, 64, out.data()); }), ErrorCode::kInvalidArgument);
  cv::Mat thin(4000, 1, CV_8UC3, cv::Scalar::all(0));  // would resize to 0 x 64
  EXPECT_EQ(code_of([&] { letterbox_bgr(view_of(thin), 64, 64, out.data()); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { letterbox_to_input(v, 64, 64, DType::kInt32, out.data()); }),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace yolocu
