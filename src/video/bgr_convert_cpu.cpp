// BGR conversion of decoded pictures, byte-identical to cv2.VideoCapture (see the header).
#include "video/bgr_convert_cpu.hpp"

#include <algorithm>
#include <cstring>

extern "C" {
#include <libavutil/pixdesc.h>
}

#include "core/check.hpp"

namespace yolocu::video {

void BgrConverter::convert(const AVFrame& picture, int coded_w, int coded_h, int out_w, int out_h, Image& out) {
  // as OpenCV: the context and buffer at the coded size (falling back to the picture's size where a
  // decoder reports none), rebuilt when the size or pixel format changes
  const int w = coded_w > 0 ? std::max(coded_w, picture.width) : picture.width;
  const int h = coded_h > 0 ? std::max(coded_h, picture.height) : picture.height;
  out_w = std::min(out_w, w);
  out_h = std::min(out_h, h);
  YOLOCU_CHECK(w > 0 && h > 0 && out_w > 0 && out_h > 0, kParse, "decoded picture without a size");
  if (!sws_ || !bgr_ || w != w_ || h != h_ || picture.format != format_) {
    const auto fmt = static_cast<AVPixelFormat>(picture.format);
    SwsContext* c = sws_getCachedContext(sws_.release(), w, h, fmt, w, h, AV_PIX_FMT_BGR24, SWS_BICUBIC, nullptr,
                                         nullptr, nullptr);
    const char* name = av_get_pix_fmt_name(fmt);
    YOLOCU_CHECK(c, kUnsupported, "swscale cannot convert pixel format ", name ? name : "?", " to bgr24");
    sws_.reset(c);
    bgr_ = make_frame();
    bgr_->format = AV_PIX_FMT_BGR24;
    bgr_->width = w;
    bgr_->height = h;
    YOLOCU_CHECK(av_frame_get_buffer(bgr_.get(), 32) == 0, kOutOfMemory, "cannot allocate a ", w, "x", h,
                 " BGR frame");
    w_ = w;
    h_ = h;
    format_ = picture.format;
  }
  sws_scale(sws_.get(), picture.data, picture.linesize, 0, picture.height, bgr_->data, bgr_->linesize);
  if (out.width() != out_w || out.height() != out_h) out = Image(out_w, out_h);
  const size_t row = static_cast<size_t>(out_w) * 3;
  for (int y = 0; y < out_h; ++y)
    std::memcpy(out.row(y), bgr_->data[0] + static_cast<ptrdiff_t>(y) * bgr_->linesize[0], row);
}

}  // namespace yolocu::video
