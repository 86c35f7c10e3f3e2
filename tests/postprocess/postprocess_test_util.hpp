// Helpers shared by the post-processing tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "test_util.hpp"
#include "yolocu/postprocess.hpp"

namespace yolocu::test {

// Compares detections with an N x 6 (x1, y1, x2, y2, conf, cls) float32 reference, row by row.
inline void expect_detections_match(const Detections& got, const Tensor& ref, double box_tol,
                                    double conf_tol, const std::string& what) {
  ASSERT_EQ(ref.rank(), 2u) << what;
  ASSERT_EQ(ref.dim(1), 6) << what;
  ASSERT_EQ(static_cast<int64_t>(got.size()), ref.dim(0)) << what << ": detection count";
  const float* r = ref.data_as<float>();
  for (size_t i = 0; i < got.size(); ++i) {
    const float* e = r + 6 * i;
    const Detection& d = got[i];
    EXPECT_EQ(d.class_id, static_cast<int>(e[5])) << what << " #" << i;
    EXPECT_NEAR(d.x1, e[0], box_tol) << what << " #" << i;
    EXPECT_NEAR(d.y1, e[1], box_tol) << what << " #" << i;
    EXPECT_NEAR(d.x2, e[2], box_tol) << what << " #" << i;
    EXPECT_NEAR(d.y2, e[3], box_tol) << what << " #" << i;
    EXPECT_NEAR(d.confidence, e[4], conf_tol) << what << " #" << i;
  }
}

// Directory of this test's Python oracle scripts.
inline std::string oracle_script(const std::string& name) {
  return source_dir() + "/tests/postprocess/" + name;
}

}  // namespace yolocu::test
