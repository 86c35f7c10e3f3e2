// Edge cases of decode / NMS / projection on hand-built outputs whose results follow from the
// specification directly (reference-semantics.md §2-§4; for the YOLOv8 layout docs/semantics.md).
#include <gtest/gtest.h>

#include <limits>

#include "postprocess_test_util.hpp"
#include "yolocu/error.hpp"

using namespace yolocu;

namespace {

// One row: cx, cy, w, h, obj, cls...
struct Row {
  float cx, cy, w, h, obj;
  std::vector<float> cls;
};

Tensor make_output(const std::vector<Row>& rows, int nc) {
  Tensor t(DType::kFloat32, {1, static_cast<int64_t>(rows.size()), 5 + nc});
  float* p = t.data_as<float>();
  for (const Row& r : rows) {
    p[0] = r.cx, p[1] = r.cy, p[2] = r.w, p[3] = r.h, p[4] = r.obj;
    for (int c = 0; c < nc; ++c) p[5 + c] = r.cls.at(static_cast<size_t>(c));
    p += 5 + nc;
  }
  return t;
}

const LetterboxGeometry kSquare = letterbox_geometry(640, 640, 640, 640);  // identity mapping

TEST(Edge, EmptyInputAndNothingAboveThreshold) {
  const Tensor empty(DType::kFloat32, {1, 0, 85});
  EXPECT_TRUE(postprocess_cpu(empty, kSquare, PostprocessOptions{}).empty());
  const Tensor low = make_output({{100, 100, 20, 20, 0.25f, {1.f, 0.f, 0.f}}}, 3);
  EXPECT_TRUE(postprocess_cpu(low, kSquare, PostprocessOptions{}).empty());  // obj == conf: strict
  EXPECT_TRUE(nms_cpu({}, PostprocessOptions{}).empty());
}

TEST(Edge, OneBoxThreeClasses) {
  // nc = 3; score = obj * cls = 0.5 * 0.8 = 0.4 for class 2; box 90..110 x 80..120.
  const Tensor out = make_output({{100, 100, 20, 40, 0.5f, {0.1f, 0.2f, 0.8f}}}, 3);
  const Detections d = postprocess_cpu(out, kSquare, PostprocessOptions{});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].class_id, 2);
  EXPECT_FLOAT_EQ(d[0].confidence, 0.5f * 0.8f);
  EXPECT_FLOAT_EQ(d[0].x1, 90.f);
  EXPECT_FLOAT_EQ(d[0].y1, 80.f);
  EXPECT_FLOAT_EQ(d[0].x2, 110.f);
  EXPECT_FLOAT_EQ(d[0].y2, 120.f);
}

TEST(Edge, BestClassTieTakesFirstIndexAndMultiLabelOrder) {
  const Tensor out = make_output({{100, 100, 20, 20, 0.8f, {0.5f, 0.5f, 0.5f}}}, 3);
  Candidates c = decode_cpu(output_view(out), 0, PostprocessOptions{});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].class_id, 0);
  PostprocessOptions ml;
  ml.multi_label = true;
  c = decode_cpu(output_view(out), 0, ml);
  ASSERT_EQ(c.size(), 3u);  // equal scores: row, then class ascending
  for (int k = 0; k < 3; ++k) EXPECT_EQ(c[static_cast<size_t>(k)].class_id, k);
  // identical boxes of different classes survive class-aware NMS, not agnostic NMS
  EXPECT_EQ(nms_cpu(c, ml).size(), 3u);
  ml.agnostic = true;
  EXPECT_EQ(nms_cpu(c, ml), (std::vector<int>{0}));
}

TEST(Edge, CanonicalOrderOnScoreTies) {
  // Three disjoint boxes with equal scores: order by row, whatever the input order.
  const Tensor out = make_output({{500, 500, 10, 10, 0.6f, {1.f}},
                                  {100, 100, 10, 10, 0.9f, {1.f}},
                                  {300, 300, 10, 10, 0.6f, {1.f}},
                                  {200, 200, 10, 10, 0.6f, {1.f}}},
                                 1);
  const Candidates c = decode_cpu(output_view(out), 0, PostprocessOptions{});
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].row, 1);
  EXPECT_EQ(c[1].row, 0);
  EXPECT_EQ(c[2].row, 2);
  EXPECT_EQ(c[3].row, 3);
}

TEST(Edge, ThresholdsZeroAndOne) {
  // Two overlapping boxes (IoU 1/3: [0,20] vs [10,30] in x, same y) and one touching box (IoU 0).
  const Tensor out = make_output({{10, 10, 20, 20, 0.9f, {1.f}},
                                  {20, 10, 20, 20, 0.8f, {1.f}},
                                  {40, 10, 20, 20, 0.7f, {1.f}},
                                  {40, 10, 20, 20, 0.0f, {1.f}}},
                                 1);
  PostprocessOptions o;
  o.conf_threshold = 0.f;  // obj > 0: the last row is out
  o.iou_threshold = 0.f;   // any positive overlap suppresses; touching (IoU 0) does not
  Detections d = postprocess_cpu(out, kSquare, o);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_FLOAT_EQ(d[0].confidence, 0.9f);
  EXPECT_FLOAT_EQ(d[1].confidence, 0.7f);
  o.iou_threshold = 1.f;  // nothing suppressed, not even identical boxes
  EXPECT_EQ(postprocess_cpu(out, kSquare, o).size(), 3u);
  o.conf_threshold = 1.f;  // obj <= 1: nothing passes
  EXPECT_TRUE(postprocess_cpu(out, kSquare, o).empty());
}

TEST(Edge, MaxDetMaxNmsAndClassFilter) {
  std::vector<Row> rows;
  for (int i = 0; i < 10; ++i)  // disjoint boxes, descending scores, classes 0,1,2,0,1,2,...
    rows.push_back({20.f + 50 * i, 20, 10, 10, 0.9f - 0.05f * i,
                    {i % 3 == 0 ? 1.f : 0.f, i % 3 == 1 ? 1.f : 0.f, i % 3 == 2 ? 1.f : 0.f}});
  const Tensor out = make_output(rows, 3);
  PostprocessOptions o;
  o.max_det = 1;
  Detections d = postprocess_cpu(out, kSquare, o);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FLOAT_EQ(d[0].confidence, 0.9f);
  o.max_det = 300;
  o.max_nms = 4;
  int64_t overflow = -1;
  EXPECT_EQ(decode_cpu(output_view(out), 0, o, &overflow).size(), 4u);
  EXPECT_EQ(overflow, 6);
  o.max_nms = 30000;
  o.classes = {2};
  d = postprocess_cpu(out, kSquare, o);
  ASSERT_EQ(d.size(), 3u);
  for (const Detection& x : d) EXPECT_EQ(x.class_id, 2);
  o.classes = {0, 1};
  EXPECT_EQ(postprocess_cpu(out, kSquare, o).size(), 7u);
}

TEST(Edge, ProjectionClampsToImage) {
  // 810x1080 (bus): gain 640/1080, pad_x 80 (continuous); a box beyond the image is clipped.
  const LetterboxGeometry g = letterbox_geometry(810, 1080, 640, 640);
  Candidates c = {{Box{60.f, -10.f, 600.f, 650.f}, 0.9f, 0, 0}};
  const Detections d = project_cpu(c, {0}, g);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].x1, 0.f);
  EXPECT_EQ(d[0].y1, 0.f);
  EXPECT_EQ(d[0].x2, 810.f);
  EXPECT_EQ(d[0].y2, 1080.f);
  c[0].box = Box{80.f, 0.f, 320.f, 320.f};  // left edge of the picture -> 0; 240 px -> 405
  const Detections e = project_cpu(c, {0}, g);
  EXPECT_FLOAT_EQ(e[0].x1, 0.f);
  EXPECT_FLOAT_EQ(e[0].x2, 405.f);
  EXPECT_FLOAT_EQ(e[0].y2, 540.f);
}

TEST(Edge, BatchedFormMatchesPerImage) {
  Tensor out(DType::kFloat32, {2, 2, 6});
  const float rows[] = {10, 10, 8, 8, 0.9f, 1, 12, 10, 8, 8, 0.8f, 1,  // image 0: overlapping
                        10, 10, 8, 8, 0.9f, 1, 50, 50, 8, 8, 0.8f, 1};  // image 1: disjoint
  std::copy(rows, rows + 24, out.data_as<float>());
  const auto all = postprocess_batch_cpu(output_view(out), {kSquare, kSquare}, PostprocessOptions{});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].size(), 1u);
  EXPECT_EQ(all[1].size(), 2u);
}

TEST(Edge, InvalidOptionsAreRejected) {
  const Tensor out = make_output({{100, 100, 20, 20, 0.9f, {1.f}}}, 1);
  auto expect_invalid = [&](PostprocessOptions o, const char* field) {
    try {
      postprocess_cpu(out, kSquare, o);
      ADD_FAILURE() << field << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << field;
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  PostprocessOptions o;
  o.conf_threshold = -0.1f;
  expect_invalid(o, "conf_threshold");
  o.conf_threshold = NAN;
  expect_invalid(o, "conf_threshold");
  o = {};
  o.iou_threshold = 1.5f;
  expect_invalid(o, "iou_threshold");
  o = {};
  o.max_det = 0;
  expect_invalid(o, "max_det");
  o = {};
  o.max_nms = 0;
  expect_invalid(o, "max_nms");
  o = {};
  o.classes = {-1};
  expect_invalid(o, "classes");
}

}  // namespace

namespace {

// ---- YOLOv8 / YOLO11 layout: [batch, 4 + nc, anchors], class scores only (docs/semantics.md,
// ultralytics 8.x non_max_suppression and scale_boxes).

// Channel-major output from per-anchor rows {cx, cy, w, h, cls...}.
Tensor make_v8_output(const std::vector<std::vector<float>>& anchors, int nc) {
  const int64_t a = static_cast<int64_t>(anchors.size());
  Tensor t(DType::kFloat32, {1, 4 + nc, a});
  for (int64_t i = 0; i < a; ++i)
    for (int k = 0; k < 4 + nc; ++k) t.data_as<float>()[k * a + i] = anchors[static_cast<size_t>(i)].at(static_cast<size_t>(k));
  return t;
}

TEST(EdgeV8, ClassScoresOnlyNanAndTies) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor out = make_v8_output({{100, 100, 20, 40, 0.3f, 0.6f},      // best class 1, 0.6
                                     {300, 300, 10, 10, nan, 0.9f},       // amax NaN: dropped
                                     {500, 500, 10, 10, 0.25f, 0.25f},    // == conf: strict, dropped
                                     {50, 500, 10, 10, 0.7f, 0.7f}},      // tie: first class
                                    2);
  const OutputView v = output_view(out, OutputLayout::kYolov8);
  EXPECT_EQ(v.rows, 4);
  EXPECT_EQ(v.num_classes(), 2);
  PostprocessOptions o;  // conf 0.25
  Candidates c = decode_cpu(v, 0, o);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].row, 3);
  EXPECT_EQ(c[0].class_id, 0);
  EXPECT_FLOAT_EQ(c[0].score, 0.7f);
  EXPECT_EQ(c[1].row, 0);
  EXPECT_EQ(c[1].class_id, 1);
  EXPECT_FLOAT_EQ(c[1].score, 0.6f);  // no objectness factor
  EXPECT_FLOAT_EQ(c[1].box.x1, 90.f);
  EXPECT_FLOAT_EQ(c[1].box.y2, 120.f);
  o.multi_label = true;  // one candidate per class > conf; the NaN anchor stays dropped
  c = decode_cpu(v, 0, o);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[3].row, 0);
  EXPECT_EQ(c[3].class_id, 0);
  EXPECT_FLOAT_EQ(c[3].score, 0.3f);
  o.classes = {1};
  c = decode_cpu(v, 0, o);
  ASSERT_EQ(c.size(), 2u);  // rows 3 and 0, class 1 each
  EXPECT_EQ(c[0].class_id, 1);
  EXPECT_EQ(c[1].class_id, 1);
}

TEST(EdgeV8, MultiLabelWithOneClassIsBestClass) {
  const Tensor out = make_v8_output({{100, 100, 20, 40, 0.6f}, {200, 100, 20, 40, 0.1f}}, 1);
  PostprocessOptions o;
  o.multi_label = true;
  const Candidates c = decode_cpu(output_view(out, OutputLayout::kYolov8), 0, o);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].row, 0);
}

TEST(EdgeV8, IntegerPadProjection) {
  // 810 x 1080 -> gain 640/1080, new 480 x 640, left pad 80 (both families); yolov5 maps back
  // with the continuous pad (640 - 810 * gain) / 2 = 80.0000..., ultralytics 8.x with the integer
  // pad 80 and gain_x = 480 / 810.
  const LetterboxGeometry g = letterbox_geometry(810, 1080, 640, 640);
  ASSERT_EQ(g.left, 80);
  ASSERT_EQ(g.new_w, 480);
  const Candidates c = {{Box{80.f, 0.f, 560.f, 640.f}, 0.9f, 0, 0}, {Box{320.f, 320.f, 330.f, 330.f}, 0.8f, 0, 1}};
  const Detections d = project_cpu(c, {0, 1}, g, BoxScaling::kIntegerPad);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_FLOAT_EQ(d[0].x1, 0.f);
  EXPECT_FLOAT_EQ(d[0].x2, 810.f);
  EXPECT_FLOAT_EQ(d[0].y2, 1080.f);
  const float gx = static_cast<float>(480.0 / 810.0), gy = static_cast<float>(640.0 / 1080.0);
  EXPECT_FLOAT_EQ(d[1].x1, (320.f - 80.f) / gx);
  EXPECT_FLOAT_EQ(d[1].y1, 320.f / gy);
  // a 500 x 806 image: new 397 x 640, pads 121 / 122; continuous pad 121.489 (yolov5)
  const LetterboxGeometry h = letterbox_geometry(500, 806, 640, 640);
  const Candidates c2 = {{Box{121.f, 0.f, 200.f, 10.f}, 0.9f, 0, 0}};
  EXPECT_FLOAT_EQ(project_cpu(c2, {0}, h, BoxScaling::kIntegerPad)[0].x1, 0.f);
  EXPECT_GT(project_cpu(c2, {0}, h, BoxScaling::kContinuousPad)[0].x1, -1.f);  // clipped at 0 as well
  EXPECT_FLOAT_EQ(project_cpu(c2, {0}, h, BoxScaling::kIntegerPad)[0].x2,
                  (200.f - 121.f) / static_cast<float>(397.0 / 500.0));
}

TEST(EdgeV8, ValLeavesBoxesUnclipped) {
  // ultralytics 8.4's val matches the boxes in the letterboxed image, unclipped: val_options(kYolov8)
  // maps them back whole; the other option sets clip.
  EXPECT_FALSE(val_options(OutputLayout::kYolov8).clip_boxes);
  EXPECT_TRUE(val_options().clip_boxes);
  EXPECT_TRUE(detect_options(OutputLayout::kYolov8).clip_boxes);
  const LetterboxGeometry g = letterbox_geometry(810, 1080, 640, 640);  // gain 640/1080, left pad 80
  const Candidates c = {{Box{60.f, -10.f, 600.f, 650.f}, 0.9f, 0, 0}};
  const Detections d = project_cpu(c, {0}, g, BoxScaling::kIntegerPad, /*clip=*/false);
  ASSERT_EQ(d.size(), 1u);
  const float gx = static_cast<float>(480.0 / 810.0), gy = static_cast<float>(640.0 / 1080.0);
  EXPECT_FLOAT_EQ(d[0].x1, (60.f - 80.f) / gx);
  EXPECT_FLOAT_EQ(d[0].y1, -10.f / gy);
  EXPECT_FLOAT_EQ(d[0].x2, (600.f - 80.f) / gx);
  EXPECT_FLOAT_EQ(d[0].y2, 650.f / gy);
  EXPECT_LT(d[0].x1, 0.f);
  EXPECT_GT(d[0].x2, 810.f);
  // and through postprocess_cpu with the val options: the same box, unclipped
  EXPECT_EQ(project_cpu(c, {0}, g, BoxScaling::kIntegerPad)[0].x1, 0.f);
}

TEST(EdgeV8, LayoutChecks) {
  EXPECT_THROW(output_view(Tensor(DType::kFloat32, {1, 4, 10}), OutputLayout::kYolov8), Error);  // no class
  EXPECT_THROW(output_view(Tensor(DType::kFloat32, {1, 2, 84, 10}), OutputLayout::kYolov8), Error);
  const OutputView v = output_view(Tensor(DType::kFloat32, {2, 84, 8400}), OutputLayout::kYolov8);
  EXPECT_EQ(v.batch, 2);
  EXPECT_EQ(v.channels, 84);
  EXPECT_EQ(v.rows, 8400);
  EXPECT_EQ(box_scaling(OutputLayout::kYolov8), BoxScaling::kIntegerPad);
  EXPECT_EQ(detect_options(OutputLayout::kYolov8).iou_threshold, 0.7f);
  EXPECT_EQ(detect_options(OutputLayout::kYolov8).max_det, 300);
  EXPECT_TRUE(val_options(OutputLayout::kYolov8).multi_label);
  EXPECT_EQ(val_options(OutputLayout::kYolov8).iou_threshold, 0.7f);
  EXPECT_EQ(detect_options(OutputLayout::kYolov5).iou_threshold, 0.45f);
}

}  // namespace
