// The yolocu backend's tensors, independent of Triton (tested without a server):
//   IMAGE   TYPE_STRING (BYTES) [batch, 1]   one encoded JPEG or PNG per image
//   PIXELS  UINT8 [batch, H, W, 3]           raw BGR pixels (one size per request)
//   BOXES   FP32  [batch, K, 4]              x1 y1 x2 y2 in the image's own pixels
//   SCORES  FP32  [batch, K]
//   CLASSES INT32 [batch, K]
//   COUNT   INT32 [batch, 1]                 the valid rows of each image (the rest are 0)
// K is the most detections of an image of that request, at least 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "yolocu/detection.hpp"

namespace yolocu::triton {

struct ByteItem {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// Splits Triton's serialisation of a BYTES tensor (per element: a 4-byte little-endian length, then
// that many bytes) of `expected` elements. Throws yolocu::Error(kParse) naming the element and the
// problem: a length past the end, bytes left over, fewer elements, an empty element.
std::vector<ByteItem> split_bytes_tensor(const uint8_t* data, size_t size, int64_t expected);

// The outputs of one request, K = max(1, the most detections of one image).
struct RequestOutputs {
  int64_t images = 0, k = 1;
  std::vector<float> boxes;     // images x k x 4
  std::vector<float> scores;    // images x k
  std::vector<int32_t> classes; // images x k
  std::vector<int32_t> count;   // images
};
RequestOutputs pack_outputs(const std::vector<Detections>& per_image);

// A short message for a client: the first line of `what`, at most 240 characters, with anything
// that looks like a file path (a token with a '/') replaced by its last component.
std::string client_message(const std::string& what);

}  // namespace yolocu::triton
