// yolocu/model.hpp - a YOLO ONNX model as yolocu's intermediate representation (IR).
//
// load_onnx() reads the file that ultralytics' export.py writes (any opset 11-17, static or
// dynamic shapes, fp32 or fp16 weights, merged output or raw heads) into plain C++ structures:
// values, nodes with typed attributes, initializers and the model metadata (`names`, `stride`).
// Malformed, truncated or non-ONNX input, external data and inconsistent graphs are reported as
// yolocu::Error naming the problem; the loader never trusts a size it has not checked against the
// bytes actually present.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "yolocu/tensor.hpp"

namespace yolocu {

// One dimension of a declared shape: static (value >= 0) or symbolic (param, e.g. "batch").
struct Dim {
  int64_t value = -1;
  std::string param;
  bool is_static() const noexcept { return value >= 0; }
};

struct ValueInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  bool has_shape = false;
  std::vector<Dim> dims;
};

struct Attribute {
  enum class Kind { kFloat, kInt, kString, kTensor, kFloats, kInts, kStrings, kOther };
  Kind kind = Kind::kOther;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;                // "" or "ai.onnx" for the default domain
  std::vector<std::string> inputs;   // "" marks an omitted optional input
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attributes;

  bool has_attr(const std::string& key) const { return attributes.count(key) != 0; }
  // Typed accessors: kParse error naming node and attribute if present with another type.
  int64_t attr_int(const std::string& key, int64_t fallback) const;
  float attr_float(const std::string& key, float fallback) const;
  std::string attr_string(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& key, const std::vector<int64_t>& fallback = {}) const;
  // "Conv 'name'" for messages.
  std::string describe() const;
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;  // topologically sorted (checked by the loader)
  std::map<std::string, Tensor> initializers;
  std::vector<ValueInfo> inputs;   // runtime inputs (initializers excluded)
  std::vector<ValueInfo> outputs;
};

struct Model {
  int64_t ir_version = 0;
  int64_t opset = 0;  // version of the default ("" / "ai.onnx") domain
  std::string producer_name;
  std::string producer_version;
  std::map<std::string, std::string> metadata;
  Graph graph;

  // From metadata `names` ("{0: 'person', 1: 'bicycle', ...}"); empty if absent.
  std::vector<std::string> class_names() const;
  // From metadata `stride` (max stride, e.g. 32); 32 if absent.
  int stride() const;
};

// What a model file may cost to load. The counts are read from the protobuf wire format before
// the model is parsed (a 10 MB file of 400,000 nodes would otherwise take ~850 MB and a minute):
// over a cap, kUnsupported (counts) or kOutOfMemory (memory) naming the file, the count and the
// field. YOLO exports have well under 1,000 nodes and initializers.
struct LoadOptions {
  static constexpr int64_t kDefaultMaxNodes = 100'000;
  static constexpr int64_t kDefaultMaxInitializers = 100'000;
  // Parsing memory estimated per node / initializer, beyond the file's own bytes (held about three
  // times: the file, protobuf's copy, the converted tensors), for max_memory.
  static constexpr uint64_t kParsedNodeBytes = 2048;
  static constexpr uint64_t kParsedInitializerBytes = 1024;

  uint64_t max_file_bytes = uint64_t{2} << 30;  // protobuf's hard limit is 2 GiB
  int64_t max_nodes = kDefaultMaxNodes;
  int64_t max_initializers = kDefaultMaxInitializers;
  // The memory budget loading may use (the CLI's --max-memory, DetectorOptions::max_memory); 0: none.
  uint64_t max_memory = 0;
};

Model load_onnx(const std::string& path, const LoadOptions& options = {});
Model parse_onnx(const void* data, size_t size, const std::string& name = "model",
                 const LoadOptions& options = {});

// Which generation of ultralytics wrote a detection export, read from the graph and the
// metadata (docs/semantics.md):
enum class ModelFamily {
  kYolov5,  // ultralytics/yolov5 export.py (v6-v7): merged output [batch, rows, 5 + nc] with
            // objectness (or the three raw Detect heads); metadata `stride`, `names` only
  kYolov8,  // the ultralytics package (8.x: YOLOv8, YOLO11, YOLOv5u, ...): anchor-free Detect
            // head, output [batch, 4 + nc, anchors], DFL inside, no objectness; metadata `task`,
            // `stride`, `names`, `imgsz`, `description`, `version`
};
const char* family_name(ModelFamily family) noexcept;  // "yolov5", "yolov8"

struct ModelInfo {
  ModelFamily family = ModelFamily::kYolov5;
  std::string task = "detect";  // metadata `task` ("detect", "segment", "pose", "obb", "classify");
                                // "detect" when absent (yolov5 exports)
  std::string title;            // e.g. "YOLOv8n", "YOLO11n" (metadata `description`), else the family
  std::string version;          // metadata `version` (the ultralytics version), may be empty
  int stride = 32;              // metadata `stride`
  int imgsz_h = 0, imgsz_w = 0; // metadata `imgsz` ([h, w]), 0 when absent
  bool end2end = false;         // metadata `end2end` True: an NMS-free export (YOLOv10, YOLO26)
  std::string family_reason;    // how the family was decided, for `yolocu inspect`
};

// The family and task of `model`. The metadata key `task` marks the ultralytics package; without
// it, the first output decides: [batch, rows, 5 + nc] with rows > channels (or three 4-D heads) is
// YOLOv5, [batch, 4 + nc, anchors] with channels < anchors (or a symbolic anchor axis) is YOLOv8.
ModelInfo model_info(const Model& model);

// kUnsupported unless `info` is a detection model yolocu can run: other tasks (segment, pose, obb,
// classify) and end-to-end exports are refused with a message naming them.
void check_detection_model(const ModelInfo& info);

// Op types (default domain) the engines implement, and the opset range covered.
const std::vector<std::string>& supported_ops();
constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 18;  // 18: what the ultralytics package exports with torch >= 2.4

}  // namespace yolocu
