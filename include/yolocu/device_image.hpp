// yolocu/device_image.hpp - images already in GPU memory: BGR, RGB or NV12 (what video decoders
// such as NVDEC produce), for Detector::detect_device(), and the CPU reference of the NV12 -> BGR
// conversion the GPU letterbox uses.
//
//   yolocu::DeviceImage im;                      // an NV12 frame from NVDEC or another CUDA library
//   im.format = yolocu::PixelFormat::kNv12;
//   im.data = d_luma;  im.pitch_bytes = luma_pitch;
//   im.chroma = d_uv;  im.chroma_pitch_bytes = uv_pitch;
//   im.width = 1920;   im.height = 1080;
//   im.stream = producer_stream;                 // the detector waits for it; no host synchronisation
//   auto boxes = det->detect_device({im});
//
// NV12 -> BGR is defined as FFmpeg's libswscale converts 8-bit 4:2:0 YUV to BGR24 without scaling
// (what OpenCV's cv2.VideoCapture, and so yolocu's CPU video path, do): BT.601 coefficients
// whatever the stream's colour matrix says, limited (16-235) or full range, chroma taken from the
// 2x2 block (no interpolation), 16-bit fixed-point arithmetic. Written once in
// src/preprocess/yuv_math.hpp for this CPU reference and the CUDA kernel, and tested against
// libswscale itself (tests/video/test_nv12_convert.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "yolocu/image.hpp"

struct CUstream_st;  // the CUDA runtime's stream type: cudaStream_t is CUstream_st*

namespace yolocu {

enum class PixelFormat { kBgr, kRgb, kNv12 };
const char* pixel_format_name(PixelFormat format) noexcept;

// Luma range of YUV pictures: kLimited (video levels, Y in 16..235; almost every video stream) or
// kFull (0..255; JPEG-style "yuvj" streams, AVCOL_RANGE_JPEG).
enum class YuvRange { kLimited, kFull };

// A caller-owned image in the device memory of the detector's GPU. Nothing is copied or freed.
//   kBgr / kRgb: `data` holds height rows of width * 3 bytes, row y at data + y * pitch_bytes.
//   kNv12: `data` is the luma plane (height rows of width bytes, pitch_bytes apart), `chroma` the
//          interleaved U, V plane: (height + 1) / 2 rows of (width + 1) / 2 U, V byte pairs,
//          chroma_pitch_bytes apart (0: the same as pitch_bytes). Odd sizes are accepted.
// `stream`: the CUDA stream on which the producer wrote the pixels (cudaStream_t; nullptr is the
// legacy default stream, cudaStreamPerThread works too). The detector records an event on it and
// makes its own stream wait for that event: the caller does not synchronise, but the pixels must
// stay valid and unchanged until detect_device() returns.
struct DeviceImage {
  PixelFormat format = PixelFormat::kBgr;
  const uint8_t* data = nullptr;
  const uint8_t* chroma = nullptr;
  int width = 0;
  int height = 0;
  size_t pitch_bytes = 0;
  size_t chroma_pitch_bytes = 0;
  YuvRange range = YuvRange::kLimited;  // kNv12 only
  CUstream_st* stream = nullptr;
};

// The CPU reference: an NV12 picture in host memory (layout as DeviceImage) converted to BGR
// exactly as the GPU letterbox converts it, i.e. as libswscale does (see the top of this file).
// kInvalidArgument for null planes, a size <= 0 or pitches too small. Thread-safe.
Image nv12_to_bgr(const uint8_t* luma, size_t luma_pitch, const uint8_t* chroma, size_t chroma_pitch, int width,
                  int height, YuvRange range = YuvRange::kLimited);

}  // namespace yolocu
