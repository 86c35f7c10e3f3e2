// yolocu._yolocu's drawing and image writing: the annotator the CLI's --save-img uses
// (yolocu/annotate.hpp), so that Results.plot() and the CLI's saved images are the same pixels.
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <string>
#include <vector>

#include "ext_bindings.hpp"
#include "yolocu/annotate.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace yolocu::python {
namespace {

using HostImage = nb::ndarray<const uint8_t, nb::ndim<3>, nb::c_contig, nb::device::cpu>;
using Floats = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using Ints = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// A copy of a C-contiguous HxWx3 uint8 array (the Python layer makes it contiguous).
Image to_image(const HostImage& a) {
  if (a.shape(2) != 3 || a.shape(0) == 0 || a.shape(1) == 0)
    throw nb::value_error("image: expected a non-empty HxWx3 uint8 BGR array");
  Image im(static_cast<int>(a.shape(1)), static_cast<int>(a.shape(0)));
  const size_t row = a.shape(1) * 3;
  for (int y = 0; y < im.height(); ++y) std::memcpy(im.row(y), a.data() + static_cast<size_t>(y) * row, row);
  return im;
}

nb::ndarray<nb::numpy, uint8_t> to_array(Image&& im) {
  auto* owned = new Image(std::move(im));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Image*>(p); });
  const size_t shape[3] = {static_cast<size_t>(owned->height()), static_cast<size_t>(owned->width()), 3};
  const int64_t strides[3] = {static_cast<int64_t>(owned->pitch_bytes()), 3, 1};
  return nb::ndarray<nb::numpy, uint8_t>(owned->data(), 3, shape, owner, strides);
}

// boxes N x 4 (x1 y1 x2 y2), conf N, cls N; ids empty or N (-1: none).
nb::ndarray<nb::numpy, uint8_t> draw(const HostImage& image, const Floats& boxes, const Floats& conf, const Ints& cls,
                                     const std::vector<int64_t>& ids, const std::vector<std::string>& names,
                                     int line_width, bool labels, bool show_conf) {
  const size_t n = cls.shape(0);
  if (boxes.ndim() != 2 || boxes.shape(0) != n || boxes.shape(1) != 4 || conf.ndim() != 1 || conf.shape(0) != n)
    throw nb::value_error("draw: expected boxes N x 4, conf N and cls N");
  Detections dets(n);
  for (size_t i = 0; i < n; ++i) {
    const float* b = boxes.data() + 4 * i;
    dets[i] = {b[0], b[1], b[2], b[3], conf.data()[i], cls.data()[i]};
  }
  Image im = to_image(image);
  AnnotateOptions o;
  o.line_width = line_width;
  o.labels = labels;
  o.conf = show_conf;
  o.track_ids = ids;
  {
    nb::gil_scoped_release release;
    draw_detections(im, dets, names, o);
  }
  return to_array(std::move(im));
}

nb::bytes encode(const HostImage& image, const std::string& name) {
  const Image im = to_image(image);
  std::string bytes;
  {
    nb::gil_scoped_release release;
    bytes = encode_image(name, im.view());
  }
  return nb::bytes(bytes.data(), bytes.size());
}

void write(const std::string& path, const HostImage& image) {
  const Image im = to_image(image);
  nb::gil_scoped_release release;
  write_image(path, im.view());
}

}  // namespace

void bind_annotate(nb::module_& m) {
  m.def("draw", &draw, "image"_a, "boxes"_a, "conf"_a, "cls"_a, "ids"_a, "names"_a, "line_width"_a, "labels"_a,
        "show_conf"_a, "The CLI's annotator on a copy of an HxWx3 BGR image (yolocu/annotate.hpp).");
  m.def("encode_image", &encode, "image"_a, "name"_a,
        "PNG (name ends in .png) or JPEG (.jpg / .jpeg, quality 95) bytes of an HxWx3 BGR image.");
  m.def("write_image", &write, "path"_a, "image"_a,
        "Writes PNG or JPEG by the name's suffix; an earlier file is replaced only once the new one is complete.");
}

}  // namespace yolocu::python
