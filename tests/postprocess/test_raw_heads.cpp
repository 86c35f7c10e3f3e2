// Raw-head decode against the merged output: ONNX Runtime (.venv) runs yolov5n_raw_heads.onnx and
// yolov5n.onnx on the npz input; decoding the raw heads must give the candidates and detections
// that decoding ORT's merged output gives. Tolerance: the two ORT graphs evaluate the sigmoid with
// different code (MLAS vs our expf), so values agree to float noise: boxes within 1e-3 px,
// scores within 1e-5; a candidate may only be missing on one side when its score is within 1e-5
// of the threshold.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "postprocess_test_util.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;

namespace {

class RawHeads : public ::testing::TestWithParam<const char*> {};

void expect_same_candidates(const Candidates& raw, const Candidates& merged, float conf,
                            const std::string& what) {
  std::map<std::pair<int, int>, const Candidate*> by_key;
  for (const Candidate& m : merged) by_key[{m.row, m.class_id}] = &m;
  size_t matched = 0;
  for (const Candidate& r : raw) {
    auto it = by_key.find({r.row, r.class_id});
    if (it == by_key.end()) {
      EXPECT_LT(std::fabs(r.score - conf), 1e-5f) << what << ": extra raw candidate row " << r.row;
      continue;
    }
    ++matched;
    const Candidate& m = *it->second;
    EXPECT_NEAR(r.score, m.score, 1e-5) << what << " row " << r.row;
    EXPECT_NEAR(r.box.x1, m.box.x1, 1e-3) << what << " row " << r.row;
    EXPECT_NEAR(r.box.y1, m.box.y1, 1e-3) << what << " row " << r.row;
    EXPECT_NEAR(r.box.x2, m.box.x2, 1e-3) << what << " row " << r.row;
    EXPECT_NEAR(r.box.y2, m.box.y2, 1e-3) << what << " row " << r.row;
  }
  std::map<std::pair<int, int>, bool> raw_keys;
  for (const Candidate& r : raw) raw_keys[{r.row, r.class_id}] = true;
  for (const Candidate& m : merged) {
    if (raw_keys.count({m.row, m.class_id})) continue;
    EXPECT_LT(std::fabs(m.score - conf), 1e-5f) << what << ": missing merged row " << m.row;
  }
  EXPECT_GT(matched, 0u) << what;
}

TEST_P(RawHeads, SameCandidatesAndDetectionsAsMergedOutput) {
  const std::string name = GetParam();
  YOLOCU_REQUIRE_DATA(npz, "reference/" + name + ".npz");
  YOLOCU_REQUIRE_DATA(models, "models/yolov5n_raw_heads.onnx");
  const std::string py = test::python();
  if (py.empty()) GTEST_SKIP() << "no .venv python (run scripts/setup.sh)";
  std::string out;
  if (test::run_command(py + " -c 'import onnxruntime, numpy'", &out) != 0)
    GTEST_SKIP() << "no onnxruntime in .venv: " << out;
  const std::string dir = test::scratch_dir("postprocess/raw_heads_" + name);
  const std::string models_dir = models.substr(0, models.rfind('/'));
  ASSERT_EQ(test::run_command(py + " " + test::oracle_script("raw_heads_oracle.py") + " " +
                                  models_dir + " " + npz + " " + dir,
                              &out),
            0)
      << out;
  std::vector<Tensor> heads;
  for (int i = 0; i < 3; ++i) heads.push_back(load_npy(dir + "/head" + std::to_string(i) + ".npy"));
  const Tensor merged = load_npy(dir + "/merged.npy");
  const RawHeadsView hv = raw_heads_view(heads, 80);
  ASSERT_EQ(hv.rows(), 25200);
  const OutputView mv = output_view(merged);
  const LetterboxGeometry g = name == "bus" ? letterbox_geometry(810, 1080, 640, 640)
                                            : letterbox_geometry(1280, 720, 640, 640);
  for (const PostprocessOptions& o : {detect_options(), val_options()}) {
    const std::string what = name + (o.multi_label ? " val" : " detect");
    const Candidates rc = decode_raw_heads_cpu(hv, 0, o);
    const Candidates mc = decode_cpu(mv, 0, o);
    ASSERT_GT(mc.size(), 0u);
    expect_same_candidates(rc, mc, o.conf_threshold, what);
    // Detections: same count; each one matches one of the other side with the same class, boxes
    // within 2e-3 px (1e-3 px / gain) and score within 1e-5 (near-equal scores may swap order).
    const Detections rd = postprocess_raw_heads_cpu(hv, 0, g, o);
    const Detections md = postprocess_cpu(mv, 0, g, o);
    ASSERT_EQ(rd.size(), md.size()) << what;
    std::vector<bool> used(md.size(), false);
    for (size_t i = 0; i < rd.size(); ++i) {
      bool found = false;
      for (size_t j = 0; j < md.size() && !found; ++j) {
        const Detection &r = rd[i], &m = md[j];
        if (used[j] || r.class_id != m.class_id || std::fabs(r.confidence - m.confidence) > 1e-5f ||
            std::fabs(r.x1 - m.x1) > 2e-3f || std::fabs(r.y1 - m.y1) > 2e-3f ||
            std::fabs(r.x2 - m.x2) > 2e-3f || std::fabs(r.y2 - m.y2) > 2e-3f)
          continue;
        EXPECT_LE(i > j ? i - j : j - i, 1u) << what << ": order moved more than one place";
        used[j] = found = true;
      }
      EXPECT_TRUE(found) << what << ": raw-head detection #" << i << " has no merged counterpart";
    }
  }
  // And ORT's merged output is the reference model output (sanity of the oracle itself).
  YOLOCU_REQUIRE_DATA(ref, "reference/" + name + ".npz");
  EXPECT_LT(test::compare(merged, load_npz(ref).at("output")).max_abs, 0.05);
}

INSTANTIATE_TEST_SUITE_P(Images, RawHeads, ::testing::Values("bus", "zidane"));

}  // namespace
