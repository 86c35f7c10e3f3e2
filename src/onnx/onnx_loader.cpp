// ONNX protobuf -> yolocu IR. Everything read from the file is validated before it is used.
#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/check.hpp"
#include "core/file_util.hpp"
#include "yolocu/model.hpp"
#include "yolocu/onnx.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

namespace yolocu {
namespace {

namespace pb = ::yolocu_onnx;
using detail::fail;

// TensorProto.DataType -> DType; kUnsupported for types YOLO exports never use.
DType map_dtype(int32_t t, const std::string& what) {
  switch (t) {
    case pb::TensorProto::FLOAT: return DType::kFloat32;
    case pb::TensorProto::FLOAT16: return DType::kFloat16;
    case pb::TensorProto::DOUBLE: return DType::kFloat64;
    case pb::TensorProto::INT64: return DType::kInt64;
    case pb::TensorProto::INT32: return DType::kInt32;
    case pb::TensorProto::INT8: return DType::kInt8;
    case pb::TensorProto::UINT8: return DType::kUInt8;
    case pb::TensorProto::BOOL: return DType::kBool;
    default: break;
  }
  fail(ErrorCode::kUnsupported, what, ": element type ", t, " (TensorProto.DataType) is not supported");
}

Tensor convert_tensor(const pb::TensorProto& tp, const std::string& what) {
  YOLOCU_CHECK(tp.data_location() != pb::TensorProto::EXTERNAL && tp.external_data_size() == 0,
               kUnsupported, what, ": tensor '", tp.name(),
               "' uses external data (a separate weights file); re-export the model with the weights "
               "embedded (onnx.save(..., save_as_external_data=False))");
  YOLOCU_CHECK(!tp.has_segment(), kUnsupported, what, ": segmented tensor '", tp.name(), "'");
  const DType dtype = map_dtype(tp.data_type(), what + ": tensor '" + tp.name() + "'");
  Shape shape(tp.dims().begin(), tp.dims().end());
  for (int64_t d : shape)
    YOLOCU_CHECK(d >= 0, kParse, what, ": tensor '", tp.name(), "' has negative dimension ", d);
  int64_t numel = 0;
  try {
    numel = shape_numel(shape);
  } catch (const Error&) {
    fail(ErrorCode::kParse, what, ": tensor '", tp.name(), "' has an impossible shape ", shape_str(shape));
  }
  const size_t esize = dtype_size(dtype);
  // Check the element count against the bytes actually present before allocating anything.
  if (tp.has_raw_data()) {
    YOLOCU_CHECK(static_cast<uint64_t>(numel) == tp.raw_data().size() / esize &&
                     tp.raw_data().size() % esize == 0,
                 kParse, what, ": tensor '", tp.name(), "' of shape ", shape_str(shape), " (",
                 dtype_name(dtype), ") has ", tp.raw_data().size(), " bytes of raw_data, expected ",
                 static_cast<uint64_t>(numel) * esize);
    Tensor t(dtype, shape);
    if (t.nbytes()) std::memcpy(t.data(), tp.raw_data().data(), t.nbytes());
    return t;
  }
  int64_t have = 0;
  switch (dtype) {
    case DType::kFloat32: have = tp.float_data_size(); break;
    case DType::kFloat64: have = tp.double_data_size(); break;
    case DType::kInt64: have = tp.int64_data_size(); break;
    default: have = tp.int32_data_size(); break;  // int32, int8, uint8, bool, float16 (bits)
  }
  YOLOCU_CHECK(have == numel, kParse, what, ": tensor '", tp.name(), "' of shape ", shape_str(shape),
               " holds ", have, " values, expected ", numel);
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < numel; ++i) {
    switch (dtype) {
      case DType::kFloat32: t.data_as<float>()[i] = tp.float_data(static_cast<int>(i)); break;
      case DType::kFloat64: t.data_as<double>()[i] = tp.double_data(static_cast<int>(i)); break;
      case DType::kInt64: t.data_as<int64_t>()[i] = tp.int64_data(static_cast<int>(i)); break;
      case DType::kInt32: t.data_as<int32_t>()[i] = tp.int32_data(static_cast<int>(i)); break;
      case DType::kFloat16:
        t.data_as<uint16_t>()[i] = static_cast<uint16_t>(tp.int32_data(static_cast<int>(i)));
        break;
      case DType::kInt8: t.data_as<int8_t>()[i] = static_cast<int8_t>(tp.int32_data(static_cast<int>(i))); break;
      case DType::kUInt8:
      case DType::kBool: t.data_as<uint8_t>()[i] = static_cast<uint8_t>(tp.int32_data(static_cast<int>(i))); break;
    }
  }
  return t;
}

ValueInfo convert_value_info(const pb::ValueInfoProto& vi, const std::string& what) {
  ValueInfo v;
  v.name = vi.name();
  YOLOCU_CHECK(!v.name.empty(), kParse, what, ": graph input/output without a name");
  if (vi.has_type()) {
    YOLOCU_CHECK(vi.type().has_tensor_type(), kUnsupported, what, ": value '", v.name,
                 "' is not a tensor (sequences and maps are not supported)");
    const auto& tt = vi.type().tensor_type();
    v.dtype = map_dtype(tt.elem_type(), what + ": value '" + v.name + "'");
    if (tt.has_shape()) {
      v.has_shape = true;
      for (const auto& d : tt.shape().dim()) {
        Dim dim;
        if (d.has_dim_value()) {
          YOLOCU_CHECK(d.dim_value() >= 0, kParse, what, ": value '", v.name, "' has a negative dimension");
          dim.value = d.dim_value();
        } else {
          dim.param = d.has_dim_param() ? d.dim_param() : "?";
        }
        v.dims.push_back(dim);
      }
    }
  }
  return v;
}

Attribute convert_attribute(const pb::AttributeProto& a, const std::string& what) {
  Attribute r;
  using A = pb::AttributeProto;
  switch (a.type()) {
    case A::FLOAT: r.kind = Attribute::Kind::kFloat; r.f = a.f(); break;
    case A::INT: r.kind = Attribute::Kind::kInt; r.i = a.i(); break;
    case A::STRING: r.kind = Attribute::Kind::kString; r.s = a.s(); break;
    case A::TENSOR: r.kind = Attribute::Kind::kTensor; r.t = convert_tensor(a.t(), what); break;
    case A::FLOATS: r.kind = Attribute::Kind::kFloats; r.floats.assign(a.floats().begin(), a.floats().end()); break;
    case A::INTS: r.kind = Attribute::Kind::kInts; r.ints.assign(a.ints().begin(), a.ints().end()); break;
    case A::STRINGS: r.kind = Attribute::Kind::kStrings; r.strings.assign(a.strings().begin(), a.strings().end()); break;
    default: r.kind = Attribute::Kind::kOther; break;  // graphs, sparse tensors: rejected by the op that sees them
  }
  return r;
}

// Kahn's algorithm over node outputs; kParse if a node input is never produced or there is a cycle.
void check_and_sort(Graph& g, const std::string& what) {
  std::unordered_set<std::string> available;
  for (const auto& v : g.inputs) available.insert(v.name);
  for (const auto& kv : g.initializers) available.insert(kv.first);
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].outputs) {
      if (o.empty()) continue;
      YOLOCU_CHECK(!available.count(o) && producer.emplace(o, i).second, kParse, what, ": value '", o,
                   "' is produced twice (", g.nodes[i].describe(), ")");
    }
  for (const auto& n : g.nodes)
    for (const auto& in : n.inputs)
      YOLOCU_CHECK(in.empty() || available.count(in) || producer.count(in), kParse, what, ": ",
                   n.describe(), " reads '", in, "', which no node, input or initializer provides");
  for (const auto& o : g.outputs)
    YOLOCU_CHECK(available.count(o.name) || producer.count(o.name), kParse, what, ": graph output '",
                 o.name, "' is not produced by any node");
  // Already sorted (the common case)?
  std::unordered_set<std::string> seen = available;
  bool sorted = true;
  for (const auto& n : g.nodes) {
    for (const auto& in : n.inputs)
      if (!in.empty() && !seen.count(in)) sorted = false;
    for (const auto& o : n.outputs) seen.insert(o);
  }
  if (sorted) return;
  std::vector<int> pending(g.nodes.size(), 0);
  std::unordered_map<std::string, std::vector<size_t>> consumers;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty() && !available.count(in)) {
        ++pending[i];
        consumers[in].push_back(i);
      }
  std::vector<size_t> ready, order;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!pending[i]) ready.push_back(i);
  while (!ready.empty()) {
    const size_t i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (const auto& o : g.nodes[i].outputs)
      for (size_t c : consumers[o])
        if (--pending[c] == 0) ready.push_back(c);
  }
  YOLOCU_CHECK(order.size() == g.nodes.size(), kParse, what, ": the graph has a cycle");
  std::vector<Node> nodes;
  nodes.reserve(order.size());
  for (size_t i : order) nodes.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(nodes);
}

}  // namespace

std::string Node::describe() const { return op_type + " node '" + name + "'"; }

int64_t Node::attr_int(const std::string& key, int64_t fallback) const {
  auto it = attributes.find(key);
  if (it == attributes.end()) return fallback;
  YOLOCU_CHECK(it->second.kind == Attribute::Kind::kInt, kParse, describe(), ": attribute '", key,
               "' is not an int");
  return it->second.i;
}

float Node::attr_float(const std::string& key, float fallback) const {
  auto it = attributes.find(key);
  if (it == attributes.end()) return fallback;
  YOLOCU_CHECK(it->second.kind == Attribute::Kind::kFloat, kParse, describe(), ": attribute '", key,
               "' is not a float");
  return it->second.f;
}

std::string Node::attr_string(const std::string& key, const std::string& fallback) const {
  auto it = attributes.find(key);
  if (it == attributes.end()) return fallback;
  YOLOCU_CHECK(it->second.kind == Attribute::Kind::kString, kParse, describe(), ": attribute '", key,
               "' is not a string");
  return it->second.s;
}

std::vector<int64_t> Node::attr_ints(const std::string& key, const std::vector<int64_t>& fallback) const {
  auto it = attributes.find(key);
  if (it == attributes.end()) return fallback;
  YOLOCU_CHECK(it->second.kind == Attribute::Kind::kInts, kParse, describe(), ": attribute '", key,
               "' is not a list of ints");
  return it->second.ints;
}

namespace {
Model parse_onnx_checked(const void* data, size_t size, const std::string& name, const LoadOptions& options);
}  // namespace

Model parse_onnx(const void* data, size_t size, const std::string& name, const LoadOptions& options) {
  return detail::oom_as_error(name, [&] { return parse_onnx_checked(data, size, name, options); });
}

namespace {
struct GraphCounts {
  int64_t nodes = 0, initializers = 0;
};

// Counts GraphProto.node (field 1) and .initializer (field 5) inside ModelProto.graph (field 7) on
// the wire, skipping everything else unparsed. False for malformed framing (the parse reports it).
bool count_graph(const void* data, size_t size, GraphCounts* c) {
  namespace io = google::protobuf::io;
  using Wfl = google::protobuf::internal::WireFormatLite;
  io::CodedInputStream in(static_cast<const uint8_t*>(data), static_cast<int>(size));
  while (const uint32_t tag = in.ReadTag()) {
    if (Wfl::GetTagFieldNumber(tag) != 7 || Wfl::GetTagWireType(tag) != Wfl::WIRETYPE_LENGTH_DELIMITED) {
      if (!Wfl::SkipField(&in, tag)) return false;
      continue;
    }
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return false;
    const auto limit = in.PushLimit(static_cast<int>(std::min<uint32_t>(length, INT32_MAX)));
    while (const uint32_t t = in.ReadTag()) {
      if (Wfl::GetTagWireType(t) == Wfl::WIRETYPE_LENGTH_DELIMITED) {
        if (Wfl::GetTagFieldNumber(t) == 1) ++c->nodes;
        if (Wfl::GetTagFieldNumber(t) == 5) ++c->initializers;
      }
      if (!Wfl::SkipField(&in, t)) return false;
    }
    in.PopLimit(limit);
  }
  return true;
}

// The LoadOptions caps, before anything of the model is parsed.
void check_load_limits(const void* data, size_t size, const std::string& name, const LoadOptions& o) {
  GraphCounts c;
  if (!count_graph(data, size, &c)) return;  // the parse that follows names the broken framing
  YOLOCU_CHECK(c.nodes <= o.max_nodes, kUnsupported, name, ": the graph has ", c.nodes,
               " nodes, over the limit (LoadOptions max_nodes ", o.max_nodes, ")");
  YOLOCU_CHECK(c.initializers <= o.max_initializers, kUnsupported, name, ": the graph has ", c.initializers,
               " initializers, over the limit (LoadOptions max_initializers ", o.max_initializers, ")");
  if (o.max_memory == 0) return;
  const uint64_t need = 3 * uint64_t{size} + static_cast<uint64_t>(c.nodes) * LoadOptions::kParsedNodeBytes +
                        static_cast<uint64_t>(c.initializers) * LoadOptions::kParsedInitializerBytes;
  YOLOCU_CHECK(need <= o.max_memory, kOutOfMemory, name, ": loading the model (", size, " bytes, ", c.nodes,
               " nodes, ", c.initializers, " initializers) needs about ", need,
               " bytes, over the memory budget (max_memory ", o.max_memory, " bytes)");
}

Model parse_onnx_checked(const void* data, size_t size, const std::string& name, const LoadOptions& options) {
  YOLOCU_CHECK(size > 0, kParse, name, ": empty file, not an ONNX model");
  YOLOCU_CHECK(size <= options.max_file_bytes && size < (size_t{1} << 31), kUnsupported, name, ": ",
               size, " bytes is above the 2 GiB protobuf limit");
  YOLOCU_CHECK(options.max_nodes > 0 && options.max_initializers >= 0, kInvalidArgument, name,
               ": LoadOptions max_nodes must be > 0 and max_initializers >= 0");
  check_load_limits(data, size, name, options);
  pb::ModelProto mp;
  YOLOCU_CHECK(mp.ParseFromArray(data, static_cast<int>(size)), kParse, name,
               ": not a valid ONNX model (protobuf parsing failed: truncated or not ONNX)");
  YOLOCU_CHECK(mp.has_graph() && mp.graph().node_size() > 0, kParse, name,
               ": not an ONNX model (no graph or an empty graph)");
  YOLOCU_CHECK(mp.ir_version() > 0, kParse, name, ": not an ONNX model (missing ir_version)");
  Model m;
  m.ir_version = mp.ir_version();
  m.producer_name = mp.producer_name();
  m.producer_version = mp.producer_version();
  for (const auto& op : mp.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") m.opset = op.version();
  YOLOCU_CHECK(m.opset > 0, kParse, name, ": model imports no opset of the default ONNX domain");
  for (const auto& kv : mp.metadata_props()) m.metadata[kv.key()] = kv.value();

  const auto& gp = mp.graph();
  Graph& g = m.graph;
  g.name = gp.name();
  YOLOCU_CHECK(gp.sparse_initializer_size() == 0, kUnsupported, name, ": sparse initializers are not supported");
  for (const auto& tp : gp.initializer()) {
    YOLOCU_CHECK(!tp.name().empty(), kParse, name, ": initializer without a name");
    YOLOCU_CHECK(g.initializers.emplace(tp.name(), convert_tensor(tp, name)).second, kParse, name,
                 ": initializer '", tp.name(), "' defined twice");
  }
  for (const auto& vi : gp.input())
    if (!g.initializers.count(vi.name())) g.inputs.push_back(convert_value_info(vi, name));
  for (const auto& vi : gp.output()) g.outputs.push_back(convert_value_info(vi, name));
  YOLOCU_CHECK(!g.outputs.empty(), kParse, name, ": the graph declares no outputs");
  for (const auto& v : g.inputs)
    YOLOCU_CHECK(v.has_shape, kUnsupported, name, ": graph input '", v.name, "' has no declared shape");

  g.nodes.reserve(gp.node_size());
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    Node n;
    n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name();
    n.op_type = np.op_type();
    n.domain = np.domain();
    YOLOCU_CHECK(!n.op_type.empty(), kParse, name, ": node #", i, " has no op_type");
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    for (const auto& a : np.attribute())
      n.attributes[a.name()] = convert_attribute(a, name + ": " + n.describe());
    g.nodes.push_back(std::move(n));
  }
  check_and_sort(g, name);
  return m;
}
}  // namespace

Model load_onnx(const std::string& path, const LoadOptions& options) {
  const std::string ext = path.size() >= 3 ? path.substr(path.size() - 3) : "";
  YOLOCU_CHECK(ext != ".pt" && ext != ".PT", kUnsupported, path,
               ": a PyTorch checkpoint, not an ONNX model; export it first: `yolo export model=", path,
               " format=onnx` (YOLOv8 / YOLO11, the ultralytics package) or `python export.py --weights ", path,
               " --include onnx` (YOLOv5, in a clone of ultralytics/yolov5)");
  const std::string bytes = detail::oom_as_error(path, [&] { return detail::read_file(path, options.max_file_bytes); });
  return parse_onnx(bytes.data(), bytes.size(), path, options);
}

std::vector<std::string> Model::class_names() const {
  std::vector<std::string> names;
  auto it = metadata.find("names");
  if (it == metadata.end()) return names;
  const std::string& s = it->second;
  // Python dict repr {0: 'person', 1: "a 'quoted' name", ...} or a list ['a', 'b'].
  std::map<int64_t, std::string> by_id;
  size_t i = 0;
  int64_t next_index = 0;
  while (i < s.size()) {
    while (i < s.size() && (std::isspace(static_cast<unsigned char>(s[i])) || s[i] == '{' || s[i] == '[' || s[i] == ','))
      ++i;
    if (i >= s.size() || s[i] == '}' || s[i] == ']') break;
    int64_t id = next_index;
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      id = 0;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) id = id * 10 + (s[i++] - '0');
      while (i < s.size() && (s[i] == ':' || s[i] == ' ')) ++i;
    }
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return {};  // not the expected format
    const char q = s[i++];
    std::string v;
    while (i < s.size() && s[i] != q) {
      if (s[i] == '\\' && i + 1 < s.size()) ++i;
      v += s[i++];
    }
    ++i;
    if (id < 0 || id > 100000) return {};
    by_id[id] = v;
    next_index = id + 1;
  }
  if (by_id.empty()) return names;
  names.resize(static_cast<size_t>(by_id.rbegin()->first + 1));
  for (auto& kv : by_id) names[static_cast<size_t>(kv.first)] = kv.second;
  return names;
}

int Model::stride() const {
  auto it = metadata.find("stride");
  if (it == metadata.end()) return 32;
  try {
    const int s = std::stoi(it->second);
    return s > 0 ? s : 32;
  } catch (const std::exception&) {
    return 32;
  }
}

const char* family_name(ModelFamily family) noexcept {
  switch (family) {
    case ModelFamily::kYolov5: return "yolov5";
    case ModelFamily::kYolov8: return "yolov8";
  }
  return "unknown";
}

namespace {

std::string meta(const Model& m, const std::string& key) {
  auto it = m.metadata.find(key);
  return it == m.metadata.end() ? std::string() : it->second;
}

// "Ultralytics YOLOv8n model " -> "YOLOv8n"; anything else -> "".
std::string title_from_description(const std::string& d) {
  std::vector<std::string> words;
  std::string w;
  for (char c : d + " ") {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!w.empty()) words.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  for (const auto& x : words)
    if (x.size() > 4 && x.compare(0, 4, "YOLO") == 0) return x;
  return "";
}

}  // namespace

ModelInfo model_info(const Model& m) {
  ModelInfo info;
  info.stride = m.stride();
  info.version = meta(m, "version");
  const std::string task = meta(m, "task");
  const std::string imgsz = meta(m, "imgsz");  // "[640, 640]"
  {
    std::vector<int> v;
    int cur = -1;
    for (char c : imgsz + ",") {
      if (std::isdigit(static_cast<unsigned char>(c))) {
        cur = (cur < 0 ? 0 : cur) * 10 + (c - '0');
        if (cur > 1 << 20) break;
      } else if (cur >= 0) {
        v.push_back(cur);
        cur = -1;
      }
    }
    if (v.size() == 2) {
      info.imgsz_h = v[0];
      info.imgsz_w = v[1];
    }
  }
  const std::string e2e = meta(m, "end2end");
  info.end2end = e2e == "True" || e2e == "true" || e2e == "1";
  if (!task.empty()) {
    info.family = ModelFamily::kYolov8;
    info.task = task;
    info.family_reason = "metadata task '" + task + "' (written by the ultralytics package)";
  } else {
    // No `task`: the first output's layout decides.
    const auto& outs = m.graph.outputs;
    info.family = ModelFamily::kYolov5;
    info.family_reason = "no metadata task: yolov5 export";
    if (outs.size() == 1 && outs[0].has_shape && outs[0].dims.size() == 3) {
      const Dim& a = outs[0].dims[1];
      const Dim& b = outs[0].dims[2];
      const bool v8 = a.is_static() && (!b.is_static() || a.value < b.value);
      if (v8) {
        info.family = ModelFamily::kYolov8;
        info.family_reason = "no metadata task; output [batch, 4 + nc, anchors] (channels before anchors)";
      } else {
        info.family_reason = "no metadata task; output [batch, rows, 5 + nc]";
      }
    }
  }
  info.title = title_from_description(meta(m, "description"));
  if (info.title.empty()) info.title = info.family == ModelFamily::kYolov5 ? "YOLOv5" : "YOLOv8-style";
  return info;
}

void check_detection_model(const ModelInfo& info) {
  YOLOCU_CHECK(info.task == "detect", kUnsupported, "this is a '", info.task, "' model (", info.title,
               "): only detection models are supported; segment, pose, obb and classify exports are not (yet)");
  YOLOCU_CHECK(!info.end2end, kUnsupported, "this is an end-to-end (NMS-free) export (", info.title,
               ", metadata end2end=True): not supported; export it with end2end=False");
}

}  // namespace yolocu
