// Robustness: malformed shapes, class-count mismatches and NaN/Inf values must give a clear
// yolocu::Error or a well-defined result, never a crash (also run under AddressSanitizer + UBSan).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "yolocu/error.hpp"
#include "yolocu/postprocess.hpp"

using namespace yolocu;

namespace {

const LetterboxGeometry kGeom = letterbox_geometry(640, 480, 640, 640);

template <typename F>
void expect_error(F f, ErrorCode code, const char* what) {
  try {
    f();
    ADD_FAILURE() << what << ": no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << what << ": " << e.what();
  }
}

TEST(Robustness, MalformedOutputShapes) {
  const PostprocessOptions o;
  expect_error([&] { postprocess_cpu(Tensor(), kGeom, o); }, ErrorCode::kInvalidArgument, "empty");
  expect_error([&] { postprocess_cpu(Tensor(DType::kFloat32, {25200}), kGeom, o); },
               ErrorCode::kInvalidArgument, "rank 1");
  expect_error([&] { postprocess_cpu(Tensor(DType::kFloat32, {1, 1, 10, 85}), kGeom, o); },
               ErrorCode::kInvalidArgument, "rank 4");
  expect_error([&] { postprocess_cpu(Tensor(DType::kFloat32, {1, 10, 5}), kGeom, o); },
               ErrorCode::kInvalidArgument, "no classes");
  expect_error([&] { postprocess_cpu(Tensor(DType::kInt32, {1, 10, 85}), kGeom, o); },
               ErrorCode::kUnsupported, "int32");
  expect_error([&] { postprocess_cpu(Tensor(DType::kFloat32, {2, 10, 85}), kGeom, o); },
               ErrorCode::kInvalidArgument, "batch 2 through the single-image form");
  const Tensor ok(DType::kFloat32, {2, 10, 85});
  expect_error([&] { decode_cpu(output_view(ok), 2, o); }, ErrorCode::kInvalidArgument, "image index");
  expect_error([&] { decode_cpu(output_view(ok), -1, o); }, ErrorCode::kInvalidArgument, "image -1");
  expect_error([&] { postprocess_batch_cpu(output_view(ok), {kGeom}, o); },
               ErrorCode::kInvalidArgument, "geometry count");
  OutputView null_view;
  null_view.rows = 5;
  null_view.channels = 85;
  expect_error([&] { decode_cpu(null_view, 0, o); }, ErrorCode::kInvalidArgument, "null data");
  expect_error([&] { postprocess_cpu(ok.reshaped({20, 85}), LetterboxGeometry{}, o); },
               ErrorCode::kInvalidArgument, "zero geometry");
}

TEST(Robustness, RawHeadShapeAndClassCountMismatch) {
  std::vector<Tensor> heads = {Tensor(DType::kFloat32, {1, 255, 8, 8}),
                               Tensor(DType::kFloat32, {1, 255, 4, 4}),
                               Tensor(DType::kFloat32, {1, 255, 2, 2})};
  EXPECT_EQ(raw_heads_view(heads, 80).rows(), 3 * (64 + 16 + 4));
  expect_error([&] { raw_heads_view(heads, 3); }, ErrorCode::kInvalidArgument, "nc mismatch");
  expect_error([&] { raw_heads_view(heads, 0); }, ErrorCode::kInvalidArgument, "nc 0");
  expect_error([&] { raw_heads_view({heads[0], heads[1]}, 80); }, ErrorCode::kInvalidArgument,
               "two levels");
  std::vector<Tensor> bad = heads;
  bad[1] = Tensor(DType::kFloat32, {2, 255, 4, 4});
  expect_error([&] { raw_heads_view(bad, 80); }, ErrorCode::kInvalidArgument, "batch mismatch");
  bad = heads;
  bad[2] = Tensor(DType::kFloat16, {1, 255, 2, 2});
  expect_error([&] { raw_heads_view(bad, 80); }, ErrorCode::kInvalidArgument, "mixed dtype");
  RawHeadsView v = raw_heads_view(heads, 80);
  v.levels[1].num_anchors = 9;
  expect_error([&] { decode_raw_heads_cpu(v, 0, PostprocessOptions{}); },
               ErrorCode::kInvalidArgument, "anchor count");
  v = raw_heads_view(heads, 80);
  v.num_levels = 7;
  expect_error([&] { decode_raw_heads_cpu(v, 0, PostprocessOptions{}); },
               ErrorCode::kInvalidArgument, "level count");
  // All-zero logits: sigmoid 0.5 everywhere, obj * cls = 0.25 is not > 0.25.
  EXPECT_TRUE(postprocess_raw_heads_cpu(raw_heads_view(heads, 80), 0, kGeom, PostprocessOptions{})
                  .empty());
}

TEST(Robustness, NanAndInfValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Tensor t(DType::kFloat32, {1, 6, 7});  // nc = 2
  const float rows[6][7] = {
      {100, 100, 20, 20, nan, 1, 1},    // NaN objectness: dropped
      {100, 100, 20, 20, 0.9f, nan, 1},  // NaN class score: torch.max gives NaN -> dropped
      {nan, 100, 20, 20, 0.9f, 1, 0},   // NaN box: kept, never suppresses nor is suppressed
      {100, 100, inf, 20, 0.8f, 1, 0},  // infinite width
      {100, 100, 20, 20, 0.7f, 1, 0},
      {100, 100, 20, 20, inf, 1, 0},    // obj inf: class 1 score inf * 0 = NaN -> dropped
  };
  std::copy(&rows[0][0], &rows[0][0] + 42, t.data_as<float>());
  PostprocessOptions o;
  const Candidates c = decode_cpu(output_view(t), 0, o);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].row, 2);
  EXPECT_EQ(c[1].row, 3);
  const Detections d = postprocess_cpu(t, kGeom, o);
  EXPECT_GE(d.size(), 2u);
  o.multi_label = true;
  EXPECT_EQ(decode_cpu(output_view(t), 0, o).size(), 5u);  // + row 1 class 1, row 5 class 0
  o.iou_threshold = NAN;
  expect_error([&] { postprocess_cpu(t, kGeom, o); }, ErrorCode::kInvalidArgument, "NaN iou");
}

TEST(Robustness, Float16Output) {
  Tensor t(DType::kFloat32, {1, 3, 6});
  const float rows[] = {100, 100, 20, 20, 0.9f, 1, 300, 300, 20, 20, 0.8f, 1,
                        300, 302, 20, 20, 0.7f, 1};
  std::copy(rows, rows + 18, t.data_as<float>());
  const Detections a = postprocess_cpu(t, kGeom, PostprocessOptions{});
  const Detections b = postprocess_cpu(cast_tensor(t, DType::kFloat16), kGeom, PostprocessOptions{});
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(a[i].y1, b[i].y1, 0.25);
}

}  // namespace
