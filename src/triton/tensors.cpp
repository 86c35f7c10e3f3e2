#include "triton/tensors.hpp"

#include <algorithm>
#include <sstream>

#include "yolocu/error.hpp"

namespace yolocu::triton {

std::vector<ByteItem> split_bytes_tensor(const uint8_t* data, size_t size, int64_t expected) {
  if (expected < 0) throw Error(ErrorCode::kParse, "IMAGE: negative element count");
  std::vector<ByteItem> items;
  items.reserve(static_cast<size_t>(std::min<int64_t>(expected, 4096)));
  size_t pos = 0;
  for (int64_t i = 0; i < expected; ++i) {
    const std::string at = "IMAGE[" + std::to_string(i) + "]";
    if (size - pos < 4) throw Error(ErrorCode::kParse, at + ": the tensor ends before its length prefix");
    const uint32_t n = static_cast<uint32_t>(data[pos]) | static_cast<uint32_t>(data[pos + 1]) << 8 |
                       static_cast<uint32_t>(data[pos + 2]) << 16 | static_cast<uint32_t>(data[pos + 3]) << 24;
    pos += 4;
    if (n > size - pos)
      throw Error(ErrorCode::kParse, at + ": " + std::to_string(n) + " bytes declared, " + std::to_string(size - pos) + " present");
    if (n == 0) throw Error(ErrorCode::kParse, at + ": empty (no image bytes)");
    items.push_back({data + pos, n});
    pos += n;
  }
  if (pos != size)
    throw Error(ErrorCode::kParse, "IMAGE: " + std::to_string(size - pos) + " bytes after its " + std::to_string(expected) + " elements");
  return items;
}

RequestOutputs pack_outputs(const std::vector<Detections>& per_image) {
  RequestOutputs o;
  o.images = static_cast<int64_t>(per_image.size());
  for (const Detections& d : per_image) o.k = std::max<int64_t>(o.k, static_cast<int64_t>(d.size()));
  const size_t rows = static_cast<size_t>(o.images * o.k);
  o.boxes.assign(rows * 4, 0.f);
  o.scores.assign(rows, 0.f);
  o.classes.assign(rows, 0);
  o.count.resize(per_image.size());
  for (size_t i = 0; i < per_image.size(); ++i) {
    const Detections& d = per_image[i];
    o.count[i] = static_cast<int32_t>(d.size());
    for (size_t r = 0; r < d.size(); ++r) {
      const size_t row = i * static_cast<size_t>(o.k) + r;
      float* b = &o.boxes[row * 4];
      b[0] = d[r].x1, b[1] = d[r].y1, b[2] = d[r].x2, b[3] = d[r].y2;
      o.scores[row] = d[r].confidence;
      o.classes[row] = d[r].class_id;
    }
  }
  return o;
}

std::string client_message(const std::string& what) {
  std::string line = what.substr(0, what.find('\n'));
  std::istringstream words(line);
  std::string out, w;
  while (words >> w) {
    const auto slash = w.find_last_of('/');
    if (slash != std::string::npos && slash + 1 < w.size()) w = w.substr(slash + 1);
    out += (out.empty() ? "" : " ") + w;
  }
  if (out.size() > 240) out = out.substr(0, 237) + "...";
  return out;
}

}  // namespace yolocu::triton
