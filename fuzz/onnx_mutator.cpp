// Structure-aware mutations of ONNX models for the 'onnx' harness (LLVMFuzzerCustomMutator).
//
// Plain byte mutation mostly breaks the protobuf framing, and what still parses rarely reaches the
// planner with a meaningful change. libprotobuf-mutator would do this generically but is not in
// Debian 12, so this file does the model-specific part by hand: parse the input as a ModelProto,
// change one thing the way a hostile or broken export would (a dim, an attribute, a shape tensor's
// value, an op type, an edge, a node), and serialise it again. One call in four (and every input
// that does not parse) is left to libFuzzer's own byte mutator, so the protobuf parser is fuzzed too.
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "yolocu/model.hpp"
#include "yolocu/onnx.pb.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

namespace pb = ::yolocu_onnx;
using Rng = std::mt19937_64;

size_t pick(Rng& rng, size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; }

// Integers that break shape arithmetic: zero, negatives, 32- and 64-bit boundaries, neighbours of v.
int64_t interesting_int(Rng& rng, int64_t v) {
  static const int64_t kEdges[] = {0, 1, -1, 2, 3, -2, 4, 8, 255, 256, 65535, 65536,
                                   (int64_t{1} << 31) - 1, int64_t{1} << 31, int64_t{1} << 32, -(int64_t{1} << 31),
                                   int64_t{1} << 62, std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min() + 1};
  switch (rng() % 4) {
    case 0: return kEdges[pick(rng, sizeof(kEdges) / sizeof(kEdges[0]))];
    case 1: return static_cast<int64_t>(static_cast<uint64_t>(v) + rng() % 5 - 2);  // wraps, no UB
    case 2: return static_cast<int64_t>(static_cast<uint64_t>(v) * (1 + rng() % 1000));
    default: return static_cast<int64_t>(0 - static_cast<uint64_t>(v));
  }
}

float interesting_float(Rng& rng, float v) {
  static const float kEdges[] = {0.f, -1.f, 1.f, 0.5f, 2.f, 1e30f, -1e30f, 1e-30f, 1e9f,
                                 std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  return rng() % 3 ? kEdges[pick(rng, sizeof(kEdges) / sizeof(kEdges[0]))] : v * static_cast<float>(rng() % 9);
}

// Every value name of the graph (inputs, initializers, node outputs).
std::vector<std::string> value_names(const pb::GraphProto& g) {
  std::vector<std::string> names;
  for (const auto& v : g.input()) names.push_back(v.name());
  for (const auto& t : g.initializer()) names.push_back(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) names.push_back(o);
  return names;
}

// Changes one int64 element of an integer initializer (Reshape targets, Slice starts/ends/axes,
// Resize sizes, Split sizes, Expand shapes...).
bool mutate_int_tensor(pb::TensorProto* t, Rng& rng) {
  if (t->data_type() == pb::TensorProto::INT64) {
    if (t->has_raw_data() && t->raw_data().size() >= 8) {
      std::string* raw = t->mutable_raw_data();
      const size_t i = pick(rng, raw->size() / 8) * 8;
      int64_t v;
      std::memcpy(&v, raw->data() + i, 8);
      v = interesting_int(rng, v);
      std::memcpy(&(*raw)[i], &v, 8);
      return true;
    }
    if (t->int64_data_size()) {
      const int i = static_cast<int>(pick(rng, static_cast<size_t>(t->int64_data_size())));
      t->set_int64_data(i, interesting_int(rng, t->int64_data(i)));
      return true;
    }
  }
  if (t->data_type() == pb::TensorProto::FLOAT && t->has_raw_data() && t->raw_data().size() >= 4 &&
      t->raw_data().size() <= 64) {  // small float tensors: Resize scales, thresholds
    std::string* raw = t->mutable_raw_data();
    const size_t i = pick(rng, raw->size() / 4) * 4;
    float v;
    std::memcpy(&v, raw->data() + i, 4);
    v = interesting_float(rng, v);
    std::memcpy(&(*raw)[i], &v, 4);
    return true;
  }
  return false;
}

bool mutate_attribute(pb::NodeProto* n, Rng& rng) {
  if (n->attribute_size() == 0 || rng() % 4 == 0) {  // add one the op may read
    static const char* kNames[] = {"axis", "axes", "perm", "split", "kernel_shape", "strides", "pads", "dilations",
                                   "group", "mode", "keepdims", "to", "value", "ceil_mode", "alpha", "starts", "ends"};
    auto* a = n->add_attribute();
    a->set_name(kNames[pick(rng, sizeof(kNames) / sizeof(kNames[0]))]);
    if (rng() % 2) {
      a->set_type(pb::AttributeProto::INT);
      a->set_i(interesting_int(rng, 1));
    } else {
      a->set_type(pb::AttributeProto::INTS);
      for (size_t k = 0, m = rng() % 6; k < m; ++k) a->add_ints(interesting_int(rng, 1));
    }
    return true;
  }
  const int index = static_cast<int>(pick(rng, static_cast<size_t>(n->attribute_size())));
  auto* a = n->mutable_attribute(index);
  switch (rng() % 6) {
    case 0: n->mutable_attribute()->DeleteSubrange(index, 1); return true;
    case 1: a->set_type(static_cast<pb::AttributeProto::AttributeType>(rng() % 15)); return true;
    default: break;
  }
  if (a->ints_size() && rng() % 3) {
    if (rng() % 4 == 0) {
      a->add_ints(interesting_int(rng, 0));
    } else {
      const int i = static_cast<int>(pick(rng, static_cast<size_t>(a->ints_size())));
      a->set_ints(i, interesting_int(rng, a->ints(i)));
    }
  } else if (a->type() == pb::AttributeProto::INT) {
    a->set_i(interesting_int(rng, a->i()));
  } else if (a->type() == pb::AttributeProto::FLOAT) {
    a->set_f(interesting_float(rng, a->f()));
  } else if (a->type() == pb::AttributeProto::TENSOR) {
    return mutate_int_tensor(a->mutable_t(), rng);
  } else if (a->type() == pb::AttributeProto::STRING) {
    static const char* kModes[] = {"nearest", "linear", "cubic", "constant", "reflect", "NOTSET", "SAME_UPPER", "VALID"};
    a->set_s(kModes[pick(rng, sizeof(kModes) / sizeof(kModes[0]))]);
  } else {
    return false;
  }
  return true;
}

bool mutate_dims(google::protobuf::RepeatedField<int64_t>* dims, Rng& rng) {
  if (dims->empty() || rng() % 5 == 0) {
    dims->Add(interesting_int(rng, 1));
    return true;
  }
  if (rng() % 5 == 0) {
    dims->RemoveLast();
    return true;
  }
  const int i = static_cast<int>(pick(rng, static_cast<size_t>(dims->size())));
  dims->Set(i, interesting_int(rng, dims->Get(i)));
  return true;
}

bool mutate(pb::ModelProto* m, Rng& rng) {
  pb::GraphProto* g = m->mutable_graph();
  switch (rng() % 10) {
    case 0: {  // a declared dim of an input or output (static <-> symbolic, edge values)
      auto* vis = rng() % 2 ? g->mutable_input() : g->mutable_output();
      if (vis->empty()) return false;
      auto* vi = vis->Mutable(static_cast<int>(pick(rng, static_cast<size_t>(vis->size()))));
      auto* shape = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
      if (shape->dim_size() == 0 || rng() % 6 == 0) {
        shape->add_dim()->set_dim_value(interesting_int(rng, 1));
        return true;
      }
      auto* d = shape->mutable_dim(static_cast<int>(pick(rng, static_cast<size_t>(shape->dim_size()))));
      if (rng() % 4 == 0) d->set_dim_param(rng() % 2 ? "batch" : "height");
      else d->set_dim_value(interesting_int(rng, d->dim_value()));
      return true;
    }
    case 1:
    case 2: {  // attributes
      if (g->node_size() == 0) return false;
      return mutate_attribute(g->mutable_node(static_cast<int>(pick(rng, static_cast<size_t>(g->node_size())))), rng);
    }
    case 3:
    case 4: {  // integer (shape) constants: initializers and Constant nodes
      std::vector<pb::TensorProto*> ts;
      for (auto& t : *g->mutable_initializer())
        if (t.data_type() == pb::TensorProto::INT64 || (t.data_type() == pb::TensorProto::FLOAT && t.raw_data().size() <= 64))
          ts.push_back(&t);
      for (auto& n : *g->mutable_node())
        for (auto& a : *n.mutable_attribute())
          if (a.type() == pb::AttributeProto::TENSOR) ts.push_back(a.mutable_t());
      if (ts.empty()) return false;
      return mutate_int_tensor(ts[pick(rng, ts.size())], rng);
    }
    case 5: {  // an initializer's dims (shape vs. byte size)
      if (g->initializer_size() == 0) return false;
      return mutate_dims(g->mutable_initializer(static_cast<int>(pick(rng, static_cast<size_t>(g->initializer_size()))))->mutable_dims(), rng);
    }
    case 6: {  // rewire an input of a node (dangling names, cycles, wrong operands)
      if (g->node_size() == 0) return false;
      auto* n = g->mutable_node(static_cast<int>(pick(rng, static_cast<size_t>(g->node_size()))));
      const auto names = value_names(*g);
      // (a graph may name no value at all: then a dangling name)
      const std::string name = names.empty() || rng() % 8 == 0 ? std::string(rng() % 2 ? "" : "dangling")
                                                               : names[pick(rng, names.size())];
      if (n->input_size() == 0 || rng() % 5 == 0) n->add_input(name);
      else n->set_input(static_cast<int>(pick(rng, static_cast<size_t>(n->input_size()))), name);
      return true;
    }
    case 7: {  // another op type (a supported one, mostly)
      if (g->node_size() == 0) return false;
      auto* n = g->mutable_node(static_cast<int>(pick(rng, static_cast<size_t>(g->node_size()))));
      const auto& ops = yolocu::supported_ops();
      n->set_op_type(rng() % 16 ? ops[pick(rng, ops.size())] : std::string("NoSuchOp"));
      return true;
    }
    case 8: {  // delete, duplicate or swap nodes
      if (g->node_size() == 0) return false;
      const int i = static_cast<int>(pick(rng, static_cast<size_t>(g->node_size())));
      const int j = static_cast<int>(pick(rng, static_cast<size_t>(g->node_size())));
      switch (rng() % 3) {
        case 0: g->mutable_node()->erase(g->mutable_node()->begin() + i); break;
        case 1: *g->add_node() = g->node(i); break;
        default: g->mutable_node()->SwapElements(i, j); break;
      }
      return true;
    }
    default: {  // the opset, or a graph output
      if (rng() % 2 && m->opset_import_size()) {
        auto* op = m->mutable_opset_import(0);
        op->set_version(rng() % 2 ? static_cast<int64_t>(6 + rng() % 16) : interesting_int(rng, op->version()));
        return true;
      }
      const auto names = value_names(*g);
      if (names.empty() || g->output_size() == 0) return false;
      g->mutable_output(0)->set_name(names[pick(rng, names.size())]);
      return true;
    }
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Rng rng(seed);
  if (rng() % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);
  pb::ModelProto m;
  if (!m.ParseFromArray(data, static_cast<int>(size))) return LLVMFuzzerMutate(data, size, max_size);
  bool changed = false;
  for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) changed = mutate(&m, rng) || changed;
  if (!changed) return LLVMFuzzerMutate(data, size, max_size);
  std::string out;
  if (!m.SerializeToString(&out) || out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
