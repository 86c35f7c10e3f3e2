// yolocu._yolocu's video reader: frames of a video file, network stream or camera through the
// C++ frame source (yolocu/video.hpp: FFmpeg, cv2.VideoCapture's pixels), one at a time, for
// Detector.predict(video, stream=True).
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "ext_bindings.hpp"
#include "yolocu/video.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace yolocu::python {
namespace {

class VideoReader {
 public:
  VideoReader(const std::string& source, int vid_stride, int64_t start, int64_t max_frames) {
    if (vid_stride < 1) throw nb::value_error(("vid_stride must be >= 1, got " + std::to_string(vid_stride)).c_str());
    VideoSourceOptions o;
    o.vid_stride = vid_stride;
    o.start_frame = start;
    o.max_frames = max_frames;
    nb::gil_scoped_release release;
    src_ = FrameSource::open(source, o);
  }

  // (frame HxWx3 uint8 BGR, index, pts seconds or None), or None at the end. The array owns its
  // pixels (the next read does not overwrite them).
  nb::object read() {
    auto frame = std::make_unique<VideoFrame>();
    bool ok = false;
    {
      nb::gil_scoped_release release;
      ok = src_->read(*frame);
    }
    if (!ok) return nb::none();
    const int64_t index = frame->index;
    const double pts = frame->pts;
    Image* im = &frame->image;
    const size_t shape[3] = {static_cast<size_t>(im->height()), static_cast<size_t>(im->width()), 3};
    const int64_t strides[3] = {static_cast<int64_t>(im->pitch_bytes()), 3, 1};
    uint8_t* data = im->data();
    auto* owned = frame.release();
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<VideoFrame*>(p); });
    nb::ndarray<nb::numpy, uint8_t> arr(data, 3, shape, owner, strides);
    return nb::make_tuple(arr, index, std::isnan(pts) ? nb::none() : nb::cast(pts));
  }

  nb::dict info() const {
    const SourceInfo& i = src_->info();
    nb::dict d;
    d["source"] = i.source;
    d["kind"] = source_kind_name(i.kind);
    d["width"] = i.width;
    d["height"] = i.height;
    d["fps"] = i.fps;
    d["frame_count"] = i.frame_count;
    d["codec"] = i.codec;
    return d;
  }

 private:
  std::unique_ptr<FrameSource> src_;
};

}  // namespace

void bind_video(nb::module_& m) {
  nb::class_<VideoReader>(m, "_VideoReader")
      .def(nb::init<const std::string&, int, int64_t, int64_t>(), "source"_a, "vid_stride"_a = 1, "start"_a = 0,
           "max_frames"_a = -1)
      .def("read", &VideoReader::read, "The next frame (array, index, pts) or None at the end; the GIL is released.")
      .def_prop_ro("info", &VideoReader::info);
  m.def("classify_source", [](const std::string& s) { return std::string(source_kind_name(classify_source(s))); },
        "source"_a, "'file', 'network', 'camera' or 'image sequence' (yolocu/video.hpp classify_source).");
  m.def("video_supported", &video_input_supported, "Whether this build reads video files and streams (FFmpeg).");
}

}  // namespace yolocu::python
