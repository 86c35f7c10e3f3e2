// yolocu._yolocu._Tracker: one stream's ByteTrack / BoT-SORT (yolocu/track.hpp) for the Python
// class yolocu.Tracker (python/yolocu/tracker.py), which turns its arguments into YAML text and
// arrays. Output: ultralytics' N x 8 float32 rows [x1, y1, x2, y2, track_id, score, cls, idx].
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "yolocu/error.hpp"
#include "yolocu/track.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using F32 = nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Boxes = nb::ndarray<const float, nb::shape<-1, 4>, nb::c_contig, nb::device::cpu>;

const char* gmc_name(yolocu::GmcMethod m) {
  switch (m) {
    case yolocu::GmcMethod::kNone: return "none";
    case yolocu::GmcMethod::kSparseOptFlow: return "sparseOptFlow";
    case yolocu::GmcMethod::kOrb: return "orb";
    case yolocu::GmcMethod::kSift: return "sift";
    case yolocu::GmcMethod::kEcc: return "ecc";
  }
  return "none";
}

// The Tracker runs with gmc_method none; the camera motion a BoT-SORT config asks for comes from
// the caller (the Python class estimates it from the frame, or takes a warp).
yolocu::TrackerConfig without_gmc(yolocu::TrackerConfig c) {
  c.gmc_method = yolocu::GmcMethod::kNone;
  return c;
}

class PyTracker {
 public:
  PyTracker(const std::string& yaml_text, const std::string& source_name)
      : config_(yolocu::parse_tracker_config(yaml_text, source_name)), tracker_(without_gmc(config_)) {}

  nb::ndarray<nb::numpy, float> update(const Boxes& xyxy, const F32& conf, const F32& cls,
                                       const std::optional<std::vector<double>>& warp) {
    const size_t n = xyxy.shape(0);
    if (conf.shape(0) != n || cls.shape(0) != n)
      throw nb::value_error(("update: " + std::to_string(n) + " boxes but " + std::to_string(conf.shape(0)) +
                             " scores and " + std::to_string(cls.shape(0)) + " classes")
                                .c_str());
    if (warp && warp->size() != 6) throw nb::value_error("update: warp must be 6 numbers (a 2x3 affine map)");
    std::vector<yolocu::TrackInput> in(n);
    const float* b = xyxy.data();
    for (size_t i = 0; i < n; ++i) in[i] = {b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3], conf.data()[i], cls.data()[i]};
    yolocu::Warp2x3 w{};
    if (warp)
      for (size_t i = 0; i < 6; ++i) w[i] = (*warp)[i];
    std::vector<yolocu::TrackOutput> out;
    {
      nb::gil_scoped_release release;
      out = tracker_.update(in, warp ? &w : nullptr);
    }
    auto* rows = new std::vector<float>(out.size() * 8 + 1);
    for (size_t i = 0; i < out.size(); ++i) {
      const yolocu::TrackOutput& t = out[i];
      const float r[8] = {t.x1, t.y1, t.x2, t.y2, static_cast<float>(t.track_id), t.score, t.cls, static_cast<float>(t.idx)};
      std::copy(r, r + 8, rows->data() + 8 * i);
    }
    nb::capsule owner(rows, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
    return nb::ndarray<nb::numpy, float>(rows->data(), {out.size(), size_t{8}}, owner);
  }

  void reset() { tracker_.reset(); }
  int frame_id() const { return tracker_.frame_id(); }
  std::string tracker_type() const { return config_.type == yolocu::TrackerType::kBotSort ? "botsort" : "bytetrack"; }
  std::string gmc_method() const { return config_.type == yolocu::TrackerType::kBotSort ? gmc_name(config_.gmc_method) : "none"; }

 private:
  yolocu::TrackerConfig config_;
  yolocu::Tracker tracker_;
};

}  // namespace

void bind_tracker(nb::module_& m) {
  nb::class_<PyTracker>(m, "_Tracker")
      .def(nb::init<const std::string&, const std::string&>(), "yaml_text"_a, "source_name"_a)
      .def("update", &PyTracker::update, "xyxy"_a, "conf"_a, "cls"_a, "warp"_a = nb::none(),
           "One frame: N x 4 float32 boxes, N scores, N classes (float32); returns the N x 8 rows.")
      .def("reset", &PyTracker::reset)
      .def_prop_ro("frame_id", &PyTracker::frame_id)
      .def_prop_ro("tracker_type", &PyTracker::tracker_type)
      .def_prop_ro("gmc_method", &PyTracker::gmc_method);
  m.def("_default_tracker_yaml", &yolocu::default_tracker_yaml, "name"_a,
        "ultralytics' default tracker settings by name (bytetrack.yaml, botsort.yaml); '' for another name.");
}
