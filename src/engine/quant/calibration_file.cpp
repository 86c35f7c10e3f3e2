// The INT8 calibration file (yolocu/int8.hpp): JSON through nlohmann::json, written atomically,
// checked when read (version, model hash, every tensor a convolution names).
#include <cmath>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/check.hpp"
#include "core/sha256.hpp"
#include "yolocu/atomic_file.hpp"
#include "yolocu/image.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/model.hpp"

namespace yolocu {

using nlohmann::json;

const char* calibration_method_name(CalibrationMethod m) noexcept {
  switch (m) {
    case CalibrationMethod::kEntropy: return "entropy";
    case CalibrationMethod::kPercentile: return "percentile";
    case CalibrationMethod::kMinMax: return "minmax";
  }
  return "?";
}

CalibrationMethod parse_calibration_method(const std::string& name) {
  for (CalibrationMethod m : {CalibrationMethod::kEntropy, CalibrationMethod::kPercentile, CalibrationMethod::kMinMax})
    if (name == calibration_method_name(m)) return m;
  detail::fail(ErrorCode::kInvalidArgument, "calibration method must be entropy, percentile or minmax, got '", name, "'");
}

const Int8TensorScale* Int8Calibration::tensor(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const Int8ConvScales* Int8Calibration::conv(const std::string& node) const {
  for (const auto& c : convs)
    if (c.node == node) return &c;
  return nullptr;
}

int Int8Calibration::float_convs() const {
  int n = 0;
  for (const auto& c : convs) n += c.keep_float ? 1 : 0;
  return n;
}

std::string file_sha256(const std::string& path) { return detail::sha256_hex(read_file_bytes(path)); }

std::string int8_calibration_json(const Int8Calibration& c) {
  json j;
  j["format"] = "yolocu-int8-calibration";
  j["version"] = c.version;
  j["method"] = calibration_method_name(c.method);
  j["percentile"] = c.percentile;
  j["num_bins"] = c.num_bins;
  j["model"] = {{"sha256", c.model_sha256}, {"input_width", c.input_width}, {"input_height", c.input_height}};
  j["images"] = {{"count", c.num_images}, {"sha256", c.images_sha256}};
  j["sensitivity_keep"] = c.sensitivity_keep;
  json tensors = json::array();
  for (const auto& t : c.tensors) tensors.push_back({{"name", t.name}, {"amax", t.amax}, {"scale", t.scale}});
  j["tensors"] = tensors;
  json convs = json::array();
  for (const auto& k : c.convs)
    convs.push_back({{"node", k.node}, {"weight", k.weight}, {"input", k.input}, {"output", k.output},
                     {"keep_float", k.keep_float}, {"sensitivity", k.sensitivity}, {"weight_scales", k.weight_scales}});
  j["convs"] = convs;
  return j.dump(1) + "\n";
}

void save_int8_calibration(const Int8Calibration& c, const std::string& path) {
  write_file_atomic(path, int8_calibration_json(c));
}

namespace {

// j[key] of the expected type, else kParse naming the file and the field.
const json& field(const json& j, const char* key, json::value_t type, const std::string& what) {
  const auto it = j.find(key);
  YOLOCU_CHECK(it != j.end(), kParse, what, ": the field '", key, "' is missing");
  const bool ok = it->type() == type || (type == json::value_t::number_float && it->is_number()) ||
                  (type == json::value_t::number_integer && it->is_number_integer());
  YOLOCU_CHECK(ok, kParse, what, ": the field '", key, "' has the wrong type (", it->type_name(), ")");
  return *it;
}

float positive_float(const json& j, const char* key, const std::string& what) {
  const double v = field(j, key, json::value_t::number_float, what).get<double>();
  YOLOCU_CHECK(std::isfinite(v) && v > 0, kParse, what, ": '", key, "' must be a positive number, got ", v);
  return static_cast<float>(v);
}

void read_tensors(const json& j, const std::string& what, Int8Calibration& c) {
  for (const json& t : field(j, "tensors", json::value_t::array, what)) {
    YOLOCU_CHECK(t.is_object(), kParse, what, ": an entry of 'tensors' is not an object");
    Int8TensorScale s;
    s.name = field(t, "name", json::value_t::string, what).get<std::string>();
    const std::string w = what + ": tensor '" + s.name + "'";
    s.amax = static_cast<float>(field(t, "amax", json::value_t::number_float, w).get<double>());
    s.scale = positive_float(t, "scale", w);
    c.tensors.push_back(s);
  }
}

void read_convs(const json& j, const std::string& what, Int8Calibration& c) {
  for (const json& k : field(j, "convs", json::value_t::array, what)) {
    YOLOCU_CHECK(k.is_object(), kParse, what, ": an entry of 'convs' is not an object");
    Int8ConvScales s;
    s.node = field(k, "node", json::value_t::string, what).get<std::string>();
    const std::string w = what + ": conv '" + s.node + "'";
    s.weight = field(k, "weight", json::value_t::string, w).get<std::string>();
    s.input = field(k, "input", json::value_t::string, w).get<std::string>();
    s.output = field(k, "output", json::value_t::string, w).get<std::string>();
    s.keep_float = field(k, "keep_float", json::value_t::boolean, w).get<bool>();
    s.sensitivity = field(k, "sensitivity", json::value_t::number_float, w).get<double>();
    for (const json& v : field(k, "weight_scales", json::value_t::array, w)) {
      YOLOCU_CHECK(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0, kParse, w,
                   ": 'weight_scales' must hold positive numbers");
      s.weight_scales.push_back(static_cast<float>(v.get<double>()));
    }
    for (const std::string* t : {&s.input, &s.output})
      YOLOCU_CHECK(c.tensor(*t), kParse, w, " names tensor '", *t, "', which has no entry in 'tensors'");
    c.convs.push_back(std::move(s));
  }
}

}  // namespace

Int8Calibration parse_int8_calibration(const std::string& text, const std::string& what, const std::string& model_sha256) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    detail::fail(ErrorCode::kParse, what, ": not a JSON calibration file (", e.what(), ")");
  }
  YOLOCU_CHECK(j.is_object(), kParse, what, ": not a JSON object");
  YOLOCU_CHECK(j.value("format", std::string()) == "yolocu-int8-calibration", kParse, what,
               ": not a yolocu INT8 calibration file (no \"format\": \"yolocu-int8-calibration\")");
  Int8Calibration c;
  c.version = static_cast<int>(field(j, "version", json::value_t::number_integer, what).get<int64_t>());
  YOLOCU_CHECK(c.version == Int8Calibration::kVersion, kInvalidArgument, what, ": calibration format version ",
               c.version, " is not supported (this yolocu reads version ", Int8Calibration::kVersion,
               "): calibrate again");
  const json& model = field(j, "model", json::value_t::object, what);
  c.model_sha256 = field(model, "sha256", json::value_t::string, what).get<std::string>();
  YOLOCU_CHECK(model_sha256.empty() || model_sha256 == c.model_sha256, kInvalidArgument, what,
               ": made for another model (model sha256 ", c.model_sha256, "; this model's is ", model_sha256,
               "): calibrate this model");
  c.input_width = static_cast<int>(field(model, "input_width", json::value_t::number_integer, what).get<int64_t>());
  c.input_height = static_cast<int>(field(model, "input_height", json::value_t::number_integer, what).get<int64_t>());
  c.method = parse_calibration_method(field(j, "method", json::value_t::string, what).get<std::string>());
  c.percentile = field(j, "percentile", json::value_t::number_float, what).get<double>();
  c.num_bins = static_cast<int>(field(j, "num_bins", json::value_t::number_integer, what).get<int64_t>());
  const json& images = field(j, "images", json::value_t::object, what);
  c.num_images = field(images, "count", json::value_t::number_integer, what).get<int64_t>();
  c.images_sha256 = field(images, "sha256", json::value_t::string, what).get<std::string>();
  c.sensitivity_keep = static_cast<int>(field(j, "sensitivity_keep", json::value_t::number_integer, what).get<int64_t>());
  read_tensors(j, what, c);
  read_convs(j, what, c);
  return c;
}

Int8Calibration load_int8_calibration(const std::string& path, const std::string& model_sha256) {
  return parse_int8_calibration(read_file_bytes(path), path, model_sha256);
}

void check_int8_calibration(const Int8Calibration& c, const Model& model) {
  for (const Node& n : model.graph.nodes) {
    if (n.op_type != "Conv" || n.inputs.size() < 2 || !model.graph.initializers.count(n.inputs[1])) continue;
    const Int8ConvScales* k = c.conv(n.name);
    YOLOCU_CHECK(k, kInvalidArgument, "the INT8 calibration has no scales for ", n.describe(),
                 ": it was made for another model");
    const Tensor& w = model.graph.initializers.at(n.inputs[1]);
    YOLOCU_CHECK(!w.shape().empty() && static_cast<int64_t>(k->weight_scales.size()) == w.shape()[0], kInvalidArgument,
                 "the INT8 calibration has ", k->weight_scales.size(), " weight scales for ", n.describe(), ", which has ",
                 w.shape().empty() ? 0 : w.shape()[0], " output channels");
    YOLOCU_CHECK(k->keep_float || c.tensor(k->input), kInvalidArgument, "the INT8 calibration has no scale for '",
                 k->input, "', the input of ", n.describe());
  }
}

}  // namespace yolocu
