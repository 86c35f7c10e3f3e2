// Decoded picture -> 8-bit BGR host image, the way OpenCV 4.6's cv2.VideoCapture (FFmpeg backend,
// CvCapture_FFMPEG::retrieveFrame) does it, so that the bytes are identical:
//   * one swscale context from the decoder's *coded* size to the same size in BGR24, SWS_BICUBIC,
//     no other flags, default colour details (BT.601 matrix; range from the pixel format: yuvj*
//     formats are full range, others limited);
//   * the destination is an AVFrame buffer from av_frame_get_buffer(..., 32), and sws_scale runs
//     over the picture's rows (0 .. picture.height);
//   * the result is the top-left width x height of that buffer (the stream's size).
// Rotation metadata (display matrices) is not applied; OpenCV applies it by default
// (CAP_PROP_ORIENTATION_AUTO), so rotated phone videos differ (docs/video.md).
#pragma once

#include "video/ffmpeg_util.hpp"
#include "yolocu/image.hpp"

namespace yolocu::video {

class BgrConverter {
 public:
  // Converts `picture` (a software pixel format) decoded at coded size coded_w x coded_h into `out`
  // (out_w x out_h, reallocated only when the size changes). kUnsupported when swscale cannot
  // convert the pixel format, kOutOfMemory when the buffer cannot be allocated.
  void convert(const AVFrame& picture, int coded_w, int coded_h, int out_w, int out_h, Image& out);
  // The same at the stream's size (stream_w x stream_h, as cv2.VideoCapture reports it), or at the
  // picture's own size when it changed mid-stream (smaller than the stream's, or past the coded size).
  void convert_at_stream_size(const AVFrame& picture, int coded_w, int coded_h, int stream_w, int stream_h,
                              Image& out) {
    const bool own = picture.width < stream_w || picture.height < stream_h || picture.width > coded_w ||
                     picture.height > coded_h;
    convert(picture, coded_w, coded_h, own ? picture.width : stream_w, own ? picture.height : stream_h, out);
  }

 private:
  SwsPtr sws_;
  FramePtr bgr_;
  int w_ = 0, h_ = 0, format_ = -1;
};

}  // namespace yolocu::video
