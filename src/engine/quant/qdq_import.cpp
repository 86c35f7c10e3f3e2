// import_qdq_int8 (yolocu/int8.hpp): an already quantised (QDQ) export as the float model and the
// calibration its Q / DQ nodes carry. Constant DequantizeLinear nodes (int8 weights, int32 biases)
// fold into float initializers, keeping the weights' scales; each activation's QuantizeLinear ->
// DequantizeLinear pair goes, its readers reading the float tensor, keeping its scale; then every
// convolution whose input had a pair and whose weights had scales is an INT8 convolution at those
// scales, and every other one stays in float. Only yolocu's scheme is taken: symmetric int8 (zero
// points 0), one scale per activation tensor, weights per output channel or per tensor.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/check.hpp"
#include "engine/plan.hpp"
#include "engine/quant/conv_sites.hpp"
#include "yolocu/int8.hpp"
#include "yolocu/model.hpp"

namespace yolocu {
namespace {

bool is_q(const Node& n) { return n.op_type == "QuantizeLinear"; }
bool is_dq(const Node& n) { return n.op_type == "DequantizeLinear"; }

double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kInt8: return t.data_as<int8_t>()[i];
    case DType::kUInt8: return t.data_as<uint8_t>()[i];
    case DType::kInt32: return t.data_as<int32_t>()[i];
    case DType::kFloat32: return t.data_as<float>()[i];
    default: break;
  }
  detail::fail(ErrorCode::kUnsupported, "QDQ import: a quantisation tensor of type ", dtype_name(t.dtype()));
}

class QdqImporter {
 public:
  explicit QdqImporter(const Model& m) : m_(m) {}

  QdqImport run(int width, int height) {
    fold_constant_dequantize();
    remove_activation_pairs();
    for (const Node& n : m_.graph.nodes)
      YOLOCU_CHECK(!is_q(n) && !is_dq(n), kUnsupported, "QDQ import: ", n.describe(),
                   " is not a weight's DequantizeLinear nor half of an activation's QuantizeLinear -> DequantizeLinear "
                   "pair (yolocu's INT8 takes those alone)");
    drop_unused_initializers();
    QdqImport r;
    r.model = std::make_shared<const Model>(std::move(m_));
    r.calibration = calibration(*r.model, width, height, &r.dropped_pairs);
    return r;
  }

 private:
  const Tensor& initializer(const Node& n, size_t i, const char* what) const {
    YOLOCU_CHECK(i < n.inputs.size() && m_.graph.initializers.count(n.inputs[i]), kUnsupported, "QDQ import: ",
                 n.describe(), ": its ", what, " is not a constant");
    return m_.graph.initializers.at(n.inputs[i]);
  }

  // The node's scales, checked: positive, and a zero point of 0 (symmetric; none given is 0).
  std::vector<float> scales(const Node& n) const {
    const Tensor& s = initializer(n, 1, "scale");
    std::vector<float> out(static_cast<size_t>(s.numel()));
    for (int64_t i = 0; i < s.numel(); ++i) out[static_cast<size_t>(i)] = static_cast<float>(element(s, i));
    for (float v : out)
      YOLOCU_CHECK(v > 0.f && v <= 3.4e38f, kUnsupported, "QDQ import: ", n.describe(), ": scale ", v);
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      const Tensor& z = initializer(n, 2, "zero point");
      for (int64_t i = 0; i < z.numel(); ++i)
        YOLOCU_CHECK(element(z, i) == 0, kUnsupported, "QDQ import: ", n.describe(), ": zero point ", element(z, i),
                     " (yolocu's INT8 is symmetric: zero points 0)");
    }
    return out;
  }

  // DequantizeLinear of a constant: a float initializer under its output's name; a weight's scales
  // per output channel (axis 0, or one scale for all).
  void fold_constant_dequantize() {
    std::vector<Node> kept;
    for (Node& n : m_.graph.nodes) {
      if (!is_dq(n) || n.inputs.empty() || !m_.graph.initializers.count(n.inputs[0])) {
        kept.push_back(std::move(n));
        continue;
      }
      const Tensor& q = m_.graph.initializers.at(n.inputs[0]);
      const std::vector<float> s = scales(n);
      const int64_t rank = static_cast<int64_t>(q.rank());
      int64_t axis = n.attr_int("axis", 1);
      if (axis < 0) axis += rank;
      const bool per_tensor = s.size() == 1;
      YOLOCU_CHECK(per_tensor || (axis >= 0 && axis < rank && q.dim(static_cast<int>(axis)) == static_cast<int64_t>(s.size())),
                   kUnsupported, "QDQ import: ", n.describe(), ": ", s.size(), " scales for shape ", shape_str(q.shape()));
      int64_t inner = 1;
      for (int64_t d = axis + 1; d < rank; ++d) inner *= q.dim(static_cast<int>(d));
      Tensor f(DType::kFloat32, q.shape());
      for (int64_t i = 0; i < q.numel(); ++i) {
        const size_t c = per_tensor ? 0 : static_cast<size_t>((i / inner) % static_cast<int64_t>(s.size()));
        f.data_as<float>()[i] = static_cast<float>(element(q, i)) * s[c];
      }
      if (q.dtype() == DType::kInt8 && rank >= 1 && (per_tensor || axis == 0))
        weight_scales_[n.outputs[0]] = per_tensor ? std::vector<float>(static_cast<size_t>(q.dim(0)), s[0]) : s;
      m_.graph.initializers[n.outputs[0]] = std::move(f);
    }
    m_.graph.nodes = std::move(kept);
  }

  // QuantizeLinear(x) read only by DequantizeLinear nodes of the same scale: both go, their
  // readers read x; x's scale is kept (the first pair's where x has several).
  void remove_activation_pairs() {
    std::map<std::string, std::vector<size_t>> readers;
    for (size_t i = 0; i < m_.graph.nodes.size(); ++i)
      for (const std::string& in : m_.graph.nodes[i].inputs) readers[in].push_back(i);
    std::set<size_t> gone;
    std::map<std::string, std::string> rename;
    for (size_t i = 0; i < m_.graph.nodes.size(); ++i) {
      const Node& q = m_.graph.nodes[i];
      if (!is_q(q)) continue;
      if (q.inputs.size() > 2 && !q.inputs[2].empty()) {
        const DType zt = initializer(q, 2, "zero point").dtype();
        YOLOCU_CHECK(zt == DType::kInt8, kUnsupported, "QDQ import: ", q.describe(), " quantises to ", dtype_name(zt),
                     " (yolocu's INT8 activations are int8)");
      }
      const std::vector<float> s = scales(q);
      YOLOCU_CHECK(s.size() == 1, kUnsupported, "QDQ import: ", q.describe(),
                   ": per-channel activation scales (yolocu's are per tensor)");
      const std::vector<size_t>& rd = readers[q.outputs[0]];
      for (size_t r : rd) {
        const Node& d = m_.graph.nodes[r];
        YOLOCU_CHECK(is_dq(d) && scales(d) == s, kUnsupported, "QDQ import: ", q.describe(), " is read by ", d.describe(),
                     " (a DequantizeLinear of the same scale expected)");
        rename[d.outputs[0]] = q.inputs[0];
        gone.insert(r);
      }
      gone.insert(i);
      act_scales_.emplace(q.inputs[0], s[0]);
    }
    // A graph output that a pair's DequantizeLinear writes: the float tensor takes the output's name.
    std::map<std::string, std::string> to_output;
    for (const ValueInfo& o : m_.graph.outputs)
      if (auto it = rename.find(o.name); it != rename.end()) {
        YOLOCU_CHECK(!to_output.count(it->second), kUnsupported, "QDQ import: '", it->second,
                     "' reaches two graph outputs through DequantizeLinear nodes");
        to_output[it->second] = o.name;
      }
    const auto final_name = [&](const std::string& t) {
      auto it = to_output.find(t);
      return it == to_output.end() ? t : it->second;
    };
    for (auto& [from, to] : rename) to = final_name(to);
    for (const auto& [x, out] : to_output)
      if (auto it = act_scales_.find(x); it != act_scales_.end()) {
        act_scales_.emplace(out, it->second);
        act_scales_.erase(it);
      }
    std::vector<Node> kept;
    for (size_t i = 0; i < m_.graph.nodes.size(); ++i) {
      if (gone.count(i)) continue;
      Node n = std::move(m_.graph.nodes[i]);
      for (std::string& in : n.inputs) {
        if (auto it = rename.find(in); it != rename.end()) in = it->second;
        in = final_name(in);
      }
      for (std::string& out : n.outputs) out = final_name(out);
      kept.push_back(std::move(n));
    }
    m_.graph.nodes = std::move(kept);
  }

  void drop_unused_initializers() {
    std::set<std::string> used;
    for (const Node& n : m_.graph.nodes) used.insert(n.inputs.begin(), n.inputs.end());
    for (auto it = m_.graph.initializers.begin(); it != m_.graph.initializers.end();)
      it = used.count(it->first) ? std::next(it) : m_.graph.initializers.erase(it);
  }

  Int8Calibration calibration(const Model& model, int width, int height, int* dropped) const {
    const ValueInfo& in = model.graph.inputs.at(0);
    Int8Calibration c;
    c.from_qdq = true;
    c.method = CalibrationMethod::kMinMax;
    c.input_width = engine::planned_input_dim(in.dims.at(3), width);
    c.input_height = engine::planned_input_dim(in.dims.at(2), height);
    std::set<std::string> used;
    for (engine::quant::ConvSite& site : engine::quant::conv_sites(model, c.input_width, c.input_height)) {
      Int8ConvScales k = std::move(site.scales);
      const auto x = act_scales_.find(k.input);
      const auto w = weight_scales_.find(k.weight);
      if (x != act_scales_.end() && w != weight_scales_.end() && w->second.size() == k.weight_scales.size()) {
        k.weight_scales = w->second;
        if (used.insert(k.input).second) c.tensors.push_back({k.input, x->second * 127.f, x->second});
      } else {
        k.keep_float = true;
      }
      c.convs.push_back(std::move(k));
    }
    *dropped = static_cast<int>(act_scales_.size() - used.size());
    return c;
  }

  Model m_;
  std::map<std::string, float> act_scales_;                  // activation tensor -> its scale
  std::map<std::string, std::vector<float>> weight_scales_;  // folded weight -> per output channel
};

}  // namespace

bool has_qdq_nodes(const Model& model) {
  return std::any_of(model.graph.nodes.begin(), model.graph.nodes.end(),
                     [](const Node& n) { return is_q(n) || is_dq(n); });
}

QdqImport import_qdq_int8(const Model& model, int width, int height) {
  YOLOCU_CHECK(has_qdq_nodes(model), kInvalidArgument, "QDQ import: the model has no QuantizeLinear / DequantizeLinear nodes");
  return QdqImporter(model).run(width, height);
}

}  // namespace yolocu
