// The Triton backend's tensor handling without a server: the BYTES serialisation of IMAGE, the
// padded outputs, and the messages clients see.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "triton/tensors.hpp"
#include "yolocu/error.hpp"

namespace yt = yolocu::triton;

namespace {

std::vector<uint8_t> serialise(const std::vector<std::string>& elements) {
  std::vector<uint8_t> out;
  for (const std::string& e : elements) {
    const uint32_t n = static_cast<uint32_t>(e.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
    out.insert(out.end(), e.begin(), e.end());
  }
  return out;
}

std::string error_of(const std::vector<uint8_t>& bytes, int64_t expected) {
  try {
    yt::split_bytes_tensor(bytes.data(), bytes.size(), expected);
  } catch (const yolocu::Error& e) {
    EXPECT_EQ(e.code(), yolocu::ErrorCode::kParse);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TritonTensors, SplitsTheBytesSerialisation) {
  const std::vector<uint8_t> bytes = serialise({"abc", std::string(300, 'x'), "z"});
  const auto items = yt::split_bytes_tensor(bytes.data(), bytes.size(), 3);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(items[0].data), items[0].size), "abc");
  EXPECT_EQ(items[1].size, 300u);
  EXPECT_EQ(items[1].data, bytes.data() + 4 + 3 + 4);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(items[2].data), items[2].size), "z");
}

TEST(TritonTensors, RefusesMalformedSerialisations) {
  std::vector<uint8_t> cut = serialise({"abcdef"});
  cut.resize(cut.size() - 2);
  EXPECT_NE(error_of(cut, 1).find("IMAGE[0]: 6 bytes declared, 4 present"), std::string::npos);
  EXPECT_NE(error_of(serialise({"ab", "cd"}), 3).find("IMAGE[2]: the tensor ends before its length prefix"), std::string::npos);
  EXPECT_NE(error_of(serialise({"ab", "cd"}), 1).find("6 bytes after its 1 elements"), std::string::npos);
  EXPECT_NE(error_of(serialise({"ab", ""}), 2).find("IMAGE[1]: empty"), std::string::npos);
  std::vector<uint8_t> huge = {0xff, 0xff, 0xff, 0xff, 1, 2, 3};
  EXPECT_NE(error_of(huge, 1).find("4294967295 bytes declared, 3 present"), std::string::npos);
  EXPECT_NE(error_of({1, 0}, 1).find("ends before its length prefix"), std::string::npos);
}

TEST(TritonTensors, PacksOutputsPaddedToTheLargestImage) {
  yolocu::Detections a{{1, 2, 3, 4, 0.9f, 5}, {5, 6, 7, 8, 0.5f, 0}};
  yolocu::Detections none;
  const yt::RequestOutputs o = yt::pack_outputs({a, none});
  EXPECT_EQ(o.images, 2);
  EXPECT_EQ(o.k, 2);
  EXPECT_EQ(o.count, (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(o.boxes, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(o.scores, (std::vector<float>{0.9f, 0.5f, 0, 0}));
  EXPECT_EQ(o.classes, (std::vector<int32_t>{5, 0, 0, 0}));
}

TEST(TritonTensors, NoDetectionsStillGivesOneZeroRow) {
  const yt::RequestOutputs o = yt::pack_outputs({yolocu::Detections{}});
  EXPECT_EQ(o.k, 1);
  EXPECT_EQ(o.count, (std::vector<int32_t>{0}));
  EXPECT_EQ(o.boxes, (std::vector<float>(4, 0.f)));
}

TEST(TritonTensors, ClientMessagesAreOneShortLineWithoutPaths) {
  EXPECT_EQ(yt::client_message("kParse: /srv/models/secret/m.onnx: bad\nstack line"), "kParse: m.onnx: bad");
  EXPECT_EQ(yt::client_message(std::string(1000, 'a')).size(), 240u);
  EXPECT_EQ(yt::client_message("IMAGE[0]: not a JPEG or PNG image"), "IMAGE[0]: not a JPEG or PNG image");
}
