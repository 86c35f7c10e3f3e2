// cuDNN Graph API tactics (cudnn-frontend): the whole layer conv_fprop -> add bias -> swish -> add
// residual as one operation graph that cuDNN runs as one fused kernel. A candidate is one engine
// config (engine id + knob choices) of the heuristics' list; its id "cudnn-graph:e<engine>;<knob
// type>=<value>;..." re-creates exactly that config (Graph::create_execution_plan), so a cached
// choice needs no heuristics query at load, and the tuner lists the configs of a problem once
// (cudnn_graph_configs) and builds each config as its own work item, on any thread. A chosen plan
// also serialises itself (Graph::serialize, runtime-compiled engines only), and a cached one
// deserialises without compiling its kernel again.
#include <cudnn_frontend.h>

#include <algorithm>
#include <sstream>
#include <utility>

#include "core/cuda_check.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"

namespace yolocu::engine {
namespace {

namespace fe = cudnn_frontend;
using Knobs = std::unordered_map<fe::KnobType_t, int64_t>;

enum Uid : int64_t { kX = 1, kW = 2, kBias = 3, kResidual = 4, kY = 5 };

std::vector<int64_t> nhwc_strides(int64_t c, int64_t h, int64_t w) { return {h * w * c, 1, w * c, c}; }

// The operation graph of the problem, validated and lowered; null if cuDNN refuses it.
std::shared_ptr<fe::graph::Graph> make_graph(cudnnHandle_t cudnn, const ConvProblem& pb) {
  const fe::DataType_t io = pb.half ? fe::DataType_t::HALF : fe::DataType_t::FLOAT;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t cg = pb.c / pb.group;
  auto x = g->tensor(fe::graph::Tensor_attributes().set_name("x").set_uid(kX).set_dim({pb.n, pb.c, pb.h, pb.w})
                         .set_stride(nhwc_strides(pb.x_pitch(), pb.h, pb.w)));
  auto w = g->tensor(fe::graph::Tensor_attributes().set_name("w").set_uid(kW).set_dim({pb.k, cg, pb.r, pb.s})
                         .set_stride(nhwc_strides(cg, pb.r, pb.s)));
  auto conv = fe::graph::Conv_fprop_attributes()
                  .set_padding({pb.pad_h, pb.pad_w})
                  .set_stride({pb.str_h, pb.str_w})
                  .set_dilation({pb.dil_h, pb.dil_w});
  auto y = g->conv_fprop(x, w, conv);
  if (pb.bias) {
    auto b = g->tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(kBias).set_dim({1, pb.k, 1, 1})
                           .set_stride({pb.k, 1, pb.k, pb.k}).set_data_type(fe::DataType_t::FLOAT));
    y = g->pointwise(y, b, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
  }
  if (pb.silu) y = g->pointwise(y, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::SWISH_FWD));
  if (pb.residual) {
    auto r = g->tensor(fe::graph::Tensor_attributes().set_name("residual").set_uid(kResidual)
                           .set_dim({pb.n, pb.k, pb.p, pb.q}).set_stride(nhwc_strides(pb.r_pitch(), pb.p, pb.q)));
    y = g->pointwise(y, r, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
  }
  // Pitched buffers (channel slices of wider NHWC buffers: a copy-free Concat's input, a channel
  // view): pixels x_pitch() / r_pitch() / y_pitch() elements apart; engines that refuse the strides
  // drop out.
  y->set_output(true).set_uid(kY).set_data_type(io).set_dim({pb.n, pb.k, pb.p, pb.q})
      .set_stride(nhwc_strides(pb.y_pitch(), pb.p, pb.q));
  if (!g->validate().is_good() || !g->build_operation_graph(cudnn).is_good()) return nullptr;
  return g;
}

void filter_numerics(fe::graph::Graph& g, bool half) {
  std::vector<fe::NumericalNote_t> bad = {fe::NumericalNote_t::FFT, fe::NumericalNote_t::NONDETERMINISTIC};
  if (!half) {
    // FP32: no TF32 and no reduced-precision arithmetic (parity with the CPU engine).
    for (auto n : {fe::NumericalNote_t::TENSOR_CORE, fe::NumericalNote_t::DOWN_CONVERT_INPUTS,
                   fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION, fe::NumericalNote_t::WINOGRAD,
                   fe::NumericalNote_t::WINOGRAD_TILE_4x4, fe::NumericalNote_t::WINOGRAD_TILE_6x6,
                   fe::NumericalNote_t::WINOGRAD_TILE_13x13})
      bad.push_back(n);
  }
  g.deselect_numeric_notes(bad);
}

std::string id_of(int64_t engine, const Knobs& knobs) {
  std::vector<std::pair<int64_t, int64_t>> kv;
  for (const auto& [k, v] : knobs) kv.emplace_back(static_cast<int64_t>(k), v);
  std::sort(kv.begin(), kv.end());
  std::ostringstream os;
  os << "cudnn-graph:e" << engine;
  for (const auto& [k, v] : kv) os << ';' << k << '=' << v;
  return os.str();
}

bool parse_id(const std::string& id, int64_t* engine, Knobs* knobs) {
  const std::string pre = "cudnn-graph:e";
  if (id.rfind(pre, 0) != 0) return false;
  std::istringstream is(id.substr(pre.size()));
  std::string part;
  if (!std::getline(is, part, ';')) return false;
  try {
    size_t used = 0;
    *engine = std::stoll(part, &used);
    if (used != part.size() || *engine < 0) return false;
    while (std::getline(is, part, ';')) {
      const auto eq = part.find('=');
      if (eq == std::string::npos) return false;
      const int64_t k = std::stoll(part.substr(0, eq)), v = std::stoll(part.substr(eq + 1));
      (*knobs)[static_cast<fe::KnobType_t>(k)] = v;
    }
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

class GraphTactic final : public ConvTactic {
 public:
  GraphTactic(std::shared_ptr<fe::graph::Graph> g, int64_t index, const ConvProblem& pb, std::string id, std::string name,
              size_t ws, bool compiled)
      : g_(std::move(g)), index_(index), pb_(pb), id_(std::move(id)), name_(std::move(name)), ws_(ws),
        compiled_(compiled) {}
  const std::string& id() const override { return id_; }
  const std::string& name() const override { return name_; }
  size_t workspace() const override { return ws_; }
  int kernels() const override { return 1; }
  void run(cudnnHandle_t h, const ConvBuffers& b, cudaStream_t s) const override {
    YOLOCU_CUDNN_CHECK(cudnnSetStream(h, s));
    std::unordered_map<int64_t, void*> pack = {{kX, const_cast<void*>(b.x)}, {kW, const_cast<void*>(b.w)}, {kY, b.y}};
    if (pb_.bias) pack[kBias] = const_cast<float*>(b.bias);
    if (pb_.residual) pack[kResidual] = const_cast<void*>(b.residual);
    auto st = index_ >= 0 ? g_->execute_plan_at_index(h, pack, b.ws, index_) : g_->execute(h, pack, b.ws);
    YOLOCU_CHECK(st.is_good(), kCuda, "cuDNN graph ", name_, " for conv ", pb_.signature(), ": ", st.get_message());
  }
  bool restored_from_plan() const override { return index_ < 0; }
  bool compiled_at_runtime() const override { return compiled_; }
  bool serialize_plan(std::vector<uint8_t>* out) const override {
    // Building an already built plan only makes it the graph's candidate, which serialize() writes.
    if (index_ >= 0 && !g_->build_plan_at_index(index_).is_good()) return false;
    out->clear();
    return g_->serialize(*out, /*serialize_structure=*/false).is_good() && !out->empty();
  }

 private:
  std::shared_ptr<fe::graph::Graph> g_;  // this tactic's own graph
  int64_t index_;                         // plan of g_; -1: a deserialised graph's only plan
  ConvProblem pb_;
  std::string id_, name_;
  size_t ws_;
  bool compiled_;  // the engine's behaviour notes say RUNTIME_COMPILATION
};

// A tactic for plan `i` of `g` once built; null if it does not build or needs too much workspace.
TacticPtr tactic_at(const std::shared_ptr<fe::graph::Graph>& g, int64_t i, const ConvProblem& pb, size_t ws_limit) {
  if (!g->build_plan_at_index(i).is_good()) return nullptr;
  int64_t ws = 0;
  if (!g->get_workspace_size_plan_at_index(i, ws).is_good() || ws < 0 || static_cast<size_t>(ws) > ws_limit)
    return nullptr;
  int64_t engine = 0;
  Knobs knobs;
  std::string plan_name;
  if (!g->get_engine_and_knobs_at_index(i, engine, knobs).is_good()) return nullptr;
  if (!g->get_plan_name_at_index(i, plan_name).is_good()) plan_name = "plan " + std::to_string(i);
  std::vector<fe::BehaviorNote_t> notes;
  // Notes that cannot be read: taken as compiled (the cautious answer for derived batch sizes).
  const bool compiled = !g->get_behavior_notes_for_plan_at_index(i, notes).is_good() ||
                        std::find(notes.begin(), notes.end(), fe::BehaviorNote_t::RUNTIME_COMPILATION) != notes.end();
  return std::make_unique<GraphTactic>(g, i, pb, id_of(engine, knobs), "cudnn-graph " + plan_name,
                                       static_cast<size_t>(ws), compiled);
}

}  // namespace

std::vector<std::string> cudnn_graph_configs(cudnnHandle_t cudnn, const ConvProblem& pb, const TacticLimits& lim) {
  std::vector<std::string> out;
  auto g = make_graph(cudnn, pb);
  if (!g) return out;
  g->deselect_workspace_greater_than(static_cast<int64_t>(lim.workspace));
  if (!g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}).is_good()) return out;
  filter_numerics(*g, pb.half);  // after the list exists: it bars entries of it
  if (!g->check_support(cudnn).is_good()) return out;
  // Entries the filters barred stay in the list (the frontend does not tell which): the build of
  // each config applies the same filters to its own one-entry list and refuses them before compiling.
  const int64_t count = g->get_execution_plan_count();
  for (int64_t i = 0; i < count; ++i) {
    int64_t engine = 0;
    Knobs knobs;
    if (!g->get_engine_and_knobs_at_index(i, engine, knobs).is_good()) continue;
    std::string id = id_of(engine, knobs);
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(std::move(id));  // A and FALLBACK overlap
  }
  return out;
}

std::vector<TacticPtr> cudnn_graph_candidates(cudnnHandle_t cudnn, const ConvProblem& pb, const TacticLimits& lim) {
  std::vector<TacticPtr> out;
  for (const std::string& id : cudnn_graph_configs(cudnn, pb, lim)) {
    if (static_cast<int>(out.size()) >= lim.max_graph_plans) break;
    if (TacticPtr t = make_cudnn_graph(cudnn, pb, id, lim)) out.push_back(std::move(t));
  }
  return out;
}

TacticPtr restore_cudnn_graph(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id,
                              const TacticLimits& lim, const std::vector<uint8_t>& plan) {
  if (plan.empty() || id.rfind("cudnn-graph:", 0) != 0) return nullptr;
  // The serialised plan of this id (the cache keys it by GPU, driver, cuDNN and cudnn-frontend
  // versions); anything that does not load or does not fit gives null.
  try {
    auto g = std::make_shared<fe::graph::Graph>();
    int64_t ws = 0;
    std::string plan_name;
    if (g->deserialize(cudnn, plan).is_good() && g->get_workspace_size(ws).is_good() && ws >= 0 &&
        static_cast<size_t>(ws) <= lim.workspace) {
      if (!g->get_plan_name(plan_name).is_good()) plan_name = id.substr(std::string("cudnn-graph:").size());
      // Only runtime-compiled engines' plans deserialise (plan_text in tuner.cpp).
      return std::make_unique<GraphTactic>(g, -1, pb, id, "cudnn-graph " + plan_name, static_cast<size_t>(ws), true);
    }
  } catch (const std::exception&) {
    // malformed bytes
  }
  return nullptr;
}

TacticPtr make_cudnn_graph(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id, const TacticLimits& lim,
                           const std::vector<uint8_t>* plan) {
  int64_t engine = 0;
  Knobs knobs;
  if (!parse_id(id, &engine, &knobs)) return nullptr;
  if (plan && !plan->empty())
    if (TacticPtr t = restore_cudnn_graph(cudnn, pb, id, lim, *plan)) return t;
  // One graph per config (its own list of one entry), so that configs of one problem build on
  // several threads at once: a frontend Graph is not safe to build from two threads.
  auto g = make_graph(cudnn, pb);
  if (!g) return nullptr;
  g->deselect_workspace_greater_than(static_cast<int64_t>(lim.workspace));
  if (!g->create_execution_plan(engine, knobs).is_good()) return nullptr;
  filter_numerics(*g, pb.half);
  if (!g->check_support(cudnn).is_good()) return nullptr;
  if (g->get_execution_plan_count() < 1) return nullptr;
  TacticPtr t = tactic_at(g, 0, pb, lim.workspace);
  return t && t->id() == id ? std::move(t) : nullptr;
}

}  // namespace yolocu::engine
