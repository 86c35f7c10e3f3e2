// yolocu/letterbox.hpp - the ultralytics/yolov5 letterbox (resize keeping the aspect ratio, pad
// with grey 114), bit-identical to `letterbox(im, (dst_h, dst_w), auto=False)` with OpenCV 4.6.
//
// The resize reproduces cv::resize(INTER_LINEAR) on 8-bit images exactly: 11-bit fixed-point
// weights, OpenCV's coordinate mapping and border clamping, its rounding in the vertical pass, the
// 2x2-mean path OpenCV takes when both scale factors are exactly 2, and no resize at all when the
// size does not change. See docs/preprocess.md.
//
// Geometry: LetterboxGeometry (yolocu/geometry.hpp) says where the image landed, so that boxes can
// be mapped back to the original image (scale_boxes semantics: use gain and pad_x / pad_y).
//
// Both functions run on the host, synchronously, with OpenMP over rows; `src` and `dst` are host
// memory owned by the caller; `dst` must not overlap `src`. Errors: kInvalidArgument (null
// pointers, non-positive sizes, a pitch smaller than width * 3, or an image so narrow that it
// would resize to 0 pixels).
#pragma once

#include <cstdint>

#include "yolocu/geometry.hpp"
#include "yolocu/image.hpp"
#include "yolocu/tensor.hpp"

namespace yolocu {

// kExact: bit-identical to ultralytics + OpenCV 4.6 (fixed-point INTER_LINEAR, 2x area path).
// kFast: plain float bilinear with correct pixel centres (GPU only; within a few grey levels).
enum class LetterboxMode : int32_t { kExact = 0, kFast = 1 };

// Pad value of the letterbox border, in all three channels.
inline constexpr uint8_t kLetterboxPad = 114;

// Letterboxed 8-bit image: dst is dst_h rows of dst_w * 3 bytes (HWC, BGR, dense).
LetterboxGeometry letterbox_bgr(const ImageView& src, int dst_w, int dst_h, uint8_t* dst);

// The exact model input: dst is 3 planes (R, G, B) of dst_h x dst_w values, value = pixel / 255.f
// computed in float32; dtype kFloat32 (float) or kFloat16 (IEEE half, the float value rounded to
// nearest even). Other dtypes: kInvalidArgument.
LetterboxGeometry letterbox_to_input(const ImageView& src, int dst_w, int dst_h, DType dtype,
                                     void* dst);

}  // namespace yolocu
