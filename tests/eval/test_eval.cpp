// mAP evaluator on hand-built cases whose values follow analytically from reference-semantics.md
// §6 (ultralytics val.py). Note the reference's quirk: the recall = 1 sentinel carries precision 0
// and the 101-point trapezoid ends at x = 1, so a perfect class scores 0.995, not 1.
#include <gtest/gtest.h>

#include <fstream>

#include "test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/eval.hpp"

using namespace yolocu;

namespace {

GroundTruth gt(int c, float x1, float y1, float x2, float y2) { return GroundTruth{c, x1, y1, x2, y2}; }
Detection det(int c, float conf, float x1, float y1, float x2, float y2) {
  return Detection{x1, y1, x2, y2, conf, c};
}

TEST(Eval, PerfectDetections) {
  MapEvaluator ev;
  ev.add_image({det(0, 0.9f, 0, 0, 10, 10), det(1, 0.8f, 20, 20, 40, 50)},
               {gt(0, 0, 0, 10, 10), gt(1, 20, 20, 40, 50)});
  ev.add_image({det(0, 0.7f, 5, 5, 50, 50)}, {gt(0, 5, 5, 50, 50)});
  const MapResult r = ev.compute();
  // Envelope 1 on [0, 1), 0 at recall 1: 0.99 * 1 + 0.01 * (1 + 0) / 2 = 0.995.
  EXPECT_NEAR(r.map50, 0.995, 1e-12);
  EXPECT_NEAR(r.map50_95, 0.995, 1e-12);
  EXPECT_NEAR(r.precision, 1.0, 1e-12);
  EXPECT_NEAR(r.recall, 1.0, 1e-12);
  ASSERT_EQ(r.per_class.size(), 2u);
  EXPECT_EQ(r.per_class[0].num_labels, 2);
  EXPECT_EQ(r.num_images, 2);
  EXPECT_EQ(r.num_labels, 3);
}

TEST(Eval, HalfRecallWithAFalsePositiveInBetween) {
  // One class, 2 labels. Detections by confidence: TP, FP, TP.
  // recall = [.5, .5, 1], precision = [1, .5, 2/3]; with sentinels mrec = [0, .5, .5, 1, 1],
  // envelope mpre = [1, 1, 2/3, 2/3, 0]. On the 101-point grid: 1 for x < .5, 2/3 on [.5, 1),
  // 0 at 1 (np.interp takes the last of equal xp). Trapezoid:
  // .49 * 1 + .01 * (1 + 2/3) / 2 + .49 * 2/3 + .01 * (2/3) / 2 = 0.828333...
  MapEvaluator ev;
  ev.add_image({det(0, 0.9f, 0, 0, 10, 10), det(0, 0.8f, 100, 100, 110, 110),
                det(0, 0.7f, 20, 0, 30, 10)},
               {gt(0, 0, 0, 10, 10), gt(0, 20, 0, 30, 10)});
  const MapResult r = ev.compute();
  const double expected = 0.49 + 0.01 * (1 + 2.0 / 3) / 2 + 0.49 * 2.0 / 3 + 0.01 * (2.0 / 3) / 2;
  EXPECT_NEAR(r.map50, expected, 1e-9);
  EXPECT_NEAR(r.map50_95, expected, 1e-9);
}

TEST(Eval, HalfRecall) {
  // 2 labels, one found: mrec = [0, .5, 1], mpre = [1, 1, 0]: 1 up to .5, then linear to 0:
  // AP = .5 + .5 * .5 = 0.75 (the grid contains .5, so the trapezoid is exact).
  MapEvaluator ev;
  ev.add_image({det(3, 0.6f, 0, 0, 10, 10)}, {gt(3, 0, 0, 10, 10), gt(3, 50, 50, 60, 60)});
  EXPECT_NEAR(ev.compute().map50, 0.75, 1e-9);
}

TEST(Eval, DuplicateDetectionIsAFalsePositive) {
  const Detections d = {det(0, 0.9f, 0, 0, 10, 10), det(0, 0.8f, 0, 0, 10, 10)};
  const std::vector<GroundTruth> l = {gt(0, 0, 0, 10, 10)};
  const auto m = MapEvaluator::match(d, l);
  for (int t = 0; t < kNumIouThresholds; ++t) {
    EXPECT_TRUE(m[0][static_cast<size_t>(t)]);
    EXPECT_FALSE(m[1][static_cast<size_t>(t)]);
  }
  MapEvaluator ev;
  ev.add_image(d, l);
  // recall [1, 1], precision [1, .5]: envelope 1 on [0, 1): AP 0.995; at the best F1 (conf above
  // 0.8, only the TP) P = R = 1.
  const MapResult r = ev.compute();
  EXPECT_NEAR(r.map50, 0.995, 1e-12);
}

TEST(Eval, BackgroundImageFalsePositives) {
  // A background image's detection (conf .95) ranks above the only TP (conf .5):
  // recall [0, 1], precision [0, .5]; mrec [0, 0, 1, 1], envelope [1, .5, .5, 0]; the grid sees
  // .5 from x = 0 (last of equal xp) to .99 and 0 at 1: AP = .99 * .5 + .01 * .5 / 2 = 0.4975.
  MapEvaluator ev;
  ev.add_image({det(0, 0.95f, 0, 0, 10, 10)}, {});
  ev.add_image({det(0, 0.5f, 0, 0, 10, 10)}, {gt(0, 0, 0, 10, 10)});
  EXPECT_NEAR(ev.compute().map50, 0.4975, 1e-12);
}

TEST(Eval, ClassWithoutPredictionsScoresZeroAndUnlabelledClassesAreIgnored) {
  MapEvaluator ev;
  ev.add_image({det(0, 0.9f, 0, 0, 10, 10), det(7, 0.99f, 0, 0, 10, 10)},
               {gt(0, 0, 0, 10, 10), gt(1, 30, 30, 40, 40)});
  const MapResult r = ev.compute();
  ASSERT_EQ(r.per_class.size(), 2u);  // classes 0 and 1 (labelled); class 7 ignored
  EXPECT_EQ(r.per_class[1].class_id, 1);
  EXPECT_EQ(r.per_class[1].ap50, 0.0);
  EXPECT_EQ(r.per_class[1].num_predictions, 0);
  EXPECT_NEAR(r.map50, 0.995 / 2, 1e-12);
  EXPECT_NEAR(r.recall, 0.5, 1e-12);
}

TEST(Eval, MatchingRuleOrdering) {
  // L1 = [0,100] (x, height 10). D0 (conf .9) has IoU .9 with L1 and .6 with L0; D1 (conf .8)
  // has IoU .95 with L1 and .53 with L0. val.py: sort pairs by IoU, keep each detection's best
  // pair (D1->L1, D0->L1), then each label's first pair in DETECTION order: L1 goes to D0.
  // So D0 is a TP and D1 an FP although L0 was free for D0 and D1 overlaps L1 better.
  const std::vector<GroundTruth> l = {gt(0, 10, 0, 160, 10), gt(0, 0, 0, 100, 10)};
  const Detections d = {det(0, 0.9f, 10, 0, 100, 10), det(0, 0.8f, 0, 0, 95, 10)};
  const auto m = MapEvaluator::match(d, l);
  EXPECT_TRUE(m[0][0]);
  EXPECT_FALSE(m[1][0]);
  // Class mismatch never matches; IoU >= threshold is inclusive (IoU 1 at 0.95).
  const auto n = MapEvaluator::match({det(1, 0.9f, 0, 0, 100, 10)}, {gt(0, 0, 0, 100, 10)});
  EXPECT_FALSE(n[0][0]);
  const auto e = MapEvaluator::match({det(0, 0.9f, 0, 0, 100, 10)}, {gt(0, 0, 0, 100, 10)});
  EXPECT_TRUE(e[0][kNumIouThresholds - 1]);
  // IoU 0.52 (.5 < .52 < .55): TP at 0.50 only.
  const auto f = MapEvaluator::match({det(0, 0.9f, 0, 0, 52, 10)}, {gt(0, 0, 0, 100, 10)});
  EXPECT_TRUE(f[0][0]);
  EXPECT_FALSE(f[0][1]);
}

TEST(Eval, UltralyticsMatchingGoesByConfidence) {
  // The case above under ultralytics 8.4's rule: D0 (conf .9) first claims its best label, L1
  // (IoU .9); D1 then takes the label left, L0, at IoU .53: a TP at 0.50, an FP from 0.55 on.
  const std::vector<GroundTruth> l = {gt(0, 10, 0, 160, 10), gt(0, 0, 0, 100, 10)};
  const Detections d = {det(0, 0.9f, 10, 0, 100, 10), det(0, 0.8f, 0, 0, 95, 10)};
  const auto m = MapEvaluator::match(d, l, ValRules::kUltralytics);
  EXPECT_TRUE(m[0][0]);
  EXPECT_TRUE(m[1][0]);
  EXPECT_FALSE(m[1][1]);
  // Given in the other order, the detections are still taken by confidence.
  const auto r = MapEvaluator::match({d[1], d[0]}, l, ValRules::kUltralytics);
  EXPECT_TRUE(r[1][0]);
  EXPECT_TRUE(r[0][0]);
  EXPECT_FALSE(r[0][1]);
  // D1 alone (conf .8) is matched to L1 at IoU .95: a TP at every threshold.
  const auto one = MapEvaluator::match({d[1]}, l, ValRules::kUltralytics);
  for (int t = 0; t < kNumIouThresholds; ++t) EXPECT_TRUE(one[0][static_cast<size_t>(t)]);
  // another class never matches
  EXPECT_FALSE(MapEvaluator::match({det(1, 0.9f, 0, 0, 100, 10)}, {gt(0, 0, 0, 100, 10)}, ValRules::kUltralytics)[0][0]);
}

TEST(Eval, UltralyticsEnvelopeEndsAtTheLastRecall) {
  // One TP out of two labels: recall .5, precision 1. val.py's sentinels (mrec [0, .5, 1], mpre
  // [1, 1, 0]) let the envelope fall linearly from .5 to 1: AP .5 + .25 = .75. ultralytics 8.4
  // (compute_ap: mrec [0, .5, .5, 1], mpre [1, 1, 0, 0]) drops it to 0 at recall .5 (np.interp
  // takes the last of equal xp): AP .49 + .01 / 2 = .495, as its compute_ap([.5], [1.]) returns.
  for (ValRules rules : {ValRules::kYolov5, ValRules::kUltralytics}) {
    MapEvaluator ev(rules);
    ev.add_image({det(0, 0.9f, 0, 0, 10, 10)}, {gt(0, 0, 0, 10, 10), gt(0, 50, 50, 60, 60)});
    EXPECT_NEAR(ev.compute().map50, rules == ValRules::kUltralytics ? 0.495 : 0.75, 1e-12);
  }
}

TEST(Eval, LoadYoloLabels) {
  const std::string dir = test::scratch_dir("eval");
  {
    std::ofstream(dir + "/a.txt") << "0 0.5 0.5 0.2 0.4\n\n45 0.25 0.75 0.5 0.5\n0 0.5 0.5 0.2 0.4\n";
  }
  const auto l = load_yolo_labels(dir + "/a.txt", 100, 200);
  ASSERT_EQ(l.size(), 2u);  // the duplicate row is dropped
  EXPECT_EQ(l[0].class_id, 0);
  EXPECT_FLOAT_EQ(l[0].x1, 40.f);
  EXPECT_FLOAT_EQ(l[0].y1, 60.f);
  EXPECT_FLOAT_EQ(l[0].x2, 60.f);
  EXPECT_FLOAT_EQ(l[0].y2, 140.f);
  EXPECT_EQ(l[1].class_id, 45);
  EXPECT_FLOAT_EQ(l[1].x2, 50.f);
  EXPECT_TRUE(load_yolo_labels(dir + "/missing.txt", 100, 100).empty());
  { std::ofstream(dir + "/bad.txt") << "0 0.5 zebra 0.2 0.4\n"; }
  EXPECT_THROW(load_yolo_labels(dir + "/bad.txt", 100, 100), Error);
  { std::ofstream(dir + "/short.txt") << "0 0.5 0.2\n"; }
  EXPECT_THROW(load_yolo_labels(dir + "/short.txt", 100, 100), Error);
}

TEST(Eval, Coco128LabelsLoad) {
  YOLOCU_REQUIRE_DATA(p, "coco128/labels/train2017/000000000009.txt");
  const auto l = load_yolo_labels(p, 640, 480);
  EXPECT_GT(l.size(), 0u);
  for (const GroundTruth& g : l) {
    EXPECT_LE(g.x1, g.x2);
    EXPECT_LE(g.y1, g.y2);
  }
}

// ultralytics' ConfusionMatrix.process_batch on hand-made cases: [predicted][true], background last.
TEST(Eval, ConfusionMatrixCases) {
  ConfusionMatrix cm(2);  // conf 0.25, IoU 0.45
  cm.add_image({det(0, 0.9f, 0, 0, 10, 10),      // matches label 0 (class 0): correct
                det(0, 0.8f, 20, 20, 30, 30),    // matches label 1 (class 1) with the wrong class
                det(1, 0.7f, 50, 50, 60, 60),    // no label there: background (false positive)
                det(1, 0.2f, 70, 70, 80, 80)},   // under conf: ignored
               {gt(0, 0, 0, 10, 10), gt(1, 20, 20, 30, 30), gt(1, 70, 70, 80, 80)});  // the last one missed
  cm.add_image({det(0, 0.9f, 0, 0, 10, 10)}, {});                                  // no labels: false positive
  cm.add_image({}, {gt(0, 0, 0, 10, 10)});                                         // no detections: missed
  cm.add_image({det(0, 0.9f, 0, 0, 10, 10), det(0, 0.8f, 0, 0, 10, 9)},           // one label, two boxes:
               {gt(0, 0, 0, 10, 10)});                                             // the best IoU matches
  const std::vector<std::vector<int64_t>> want = {{2, 1, 2}, {0, 0, 1}, {1, 1, 0}};
  const std::vector<std::vector<int64_t>> got = cm.matrix();
  EXPECT_EQ(got, want);
  // IoU exactly at the threshold does not match (iou > 0.45)
  ConfusionMatrix edge(1, 0.25f, 0.5f);
  edge.add_image({det(0, 0.9f, 0, 0, 10, 10)}, {gt(0, 0, 0, 10, 20)});  // IoU 0.5 (within the 1e-7 eps)
  EXPECT_EQ(edge.matrix()[0][0], 0);
  EXPECT_THROW(ConfusionMatrix(0), Error);
}

// ultralytics' img2label_paths: the last /images/ becomes /labels/, the extension .txt.
TEST(Eval, ImageToLabelPath) {
  EXPECT_EQ(image_to_label_path("/d/coco/images/train2017/0001.jpg"), "/d/coco/labels/train2017/0001.txt");
  EXPECT_EQ(image_to_label_path("images/a/images/b.x.png"), "images/a/labels/b.x.txt");
  EXPECT_EQ(image_to_label_path("/d/pics/a.jpg"), "/d/pics/a.txt");
  EXPECT_EQ(image_to_label_path("/d/images.v2/a"), "/d/images.v2/a.txt");
}

// A label class the model does not have names the file and line.
TEST(Eval, LabelClassOutsideModel) {
  try {
    parse_yolo_labels("0 0.5 0.5 0.1 0.1\n80 0.5 0.5 0.1 0.1\n", 640, 480, "x.txt", 80);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.txt:2: class id 80 is not a class of the model (it has 80: 0..79)"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_yolo_labels("79 0.5 0.5 0.1 0.1\n", 640, 480, "x.txt", 80).size(), 1u);
}

}  // namespace
