#include <gtest/gtest.h>

#include <fstream>

#include "test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/npy.hpp"

using namespace yolocu;

TEST(Npy, RoundTrip) {
  Tensor t(DType::kFloat32, {2, 3});
  for (int i = 0; i < 6; ++i) t.data_as<float>()[i] = i * 0.5f;
  const std::string p = test::scratch_dir("npy") + "/a.npy";
  save_npy(p, t);
  Tensor u = load_npy(p);
  ASSERT_EQ(u.shape(), t.shape());
  EXPECT_EQ(u.dtype(), DType::kFloat32);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(u.data_as<float>()[i], i * 0.5f);
  Tensor s(DType::kInt64, {});
  s.data_as<int64_t>()[0] = 42;
  save_npy(p, s);
  EXPECT_EQ(load_npy(p).data_as<int64_t>()[0], 42);
  EXPECT_TRUE(load_npy(p).shape().empty());
}

TEST(Npy, ReadsNumpyWrittenFile) {
  const std::string py = test::python();
  if (py.empty()) GTEST_SKIP() << "no .venv python (run scripts/setup.sh)";
  const std::string p = test::scratch_dir("npy") + "/np.npy";
  ASSERT_EQ(test::run_command(py + " -c \"import numpy as np; np.save('" + p +
                              "', np.arange(12, dtype=np.float16).reshape(3,4)*0.25)\""),
            0);
  Tensor t = load_npy(p);
  ASSERT_EQ(t.shape(), (Shape{3, 4}));
  ASSERT_EQ(t.dtype(), DType::kFloat16);
  EXPECT_EQ(half_to_float(t.data_as<uint16_t>()[11]), 2.75f);
}

TEST(Npy, RejectsBadInput) {
  const std::string dir = test::scratch_dir("npy");
  std::ofstream(dir + "/bad.npy") << "hello world, not numpy";
  EXPECT_THROW(load_npy(dir + "/bad.npy"), Error);
  EXPECT_THROW(load_npy(dir + "/does-not-exist.npy"), Error);
  // Truncated data: valid header promising more bytes than present.
  Tensor t(DType::kFloat32, {100});
  save_npy(dir + "/full.npy", t);
  std::ifstream f(dir + "/full.npy", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  try {
    parse_npy(bytes.data(), bytes.size() - 8);
    FAIL() << "truncated npy accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kParse);
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

TEST(Npz, LoadsReference) {
  YOLOCU_REQUIRE_DATA(path, "reference/bus.npz");
  auto arrays = load_npz(path);
  ASSERT_TRUE(arrays.count("letterboxed_bgr"));
  EXPECT_EQ(arrays["letterboxed_bgr"].shape(), (Shape{640, 640, 3}));
  EXPECT_EQ(arrays["letterboxed_bgr"].dtype(), DType::kUInt8);
  EXPECT_EQ(arrays["input"].shape(), (Shape{1, 3, 640, 640}));
  EXPECT_EQ(arrays["output"].shape(), (Shape{1, 25200, 85}));
  // Pad value of the letterbox is 114 in the top-left corner (bus is padded left/right).
  EXPECT_EQ(arrays["letterboxed_bgr"].data_as<uint8_t>()[0], 114);
  // detect holds 4 boxes: person 0.823 first (docs/reference figures).
  ASSERT_EQ(arrays["detect"].shape(), (Shape{4, 6}));
  EXPECT_NEAR(arrays["detect"].data_as<float>()[4], 0.823, 1e-3);
}
