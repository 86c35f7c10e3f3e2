// GPU executor: runs the steps planned by gpu_steps.cpp, each convolution through the tactic the
// tuner chose for it and the batch size (tactics/), everything else through the kernels of
// cuda_kernels.cu; all activations in one liveness-planned device arena, one CUDA graph per batch
// size.
#include "yolocu/cuda_engine.hpp"

#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>
#include <type_traits>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/gpu_steps.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/tactics/tactic_cache.hpp"
#include "engine/cuda/tactics/tuner.hpp"
#include "engine/detect_tail.hpp"
#include "engine/ops.hpp"
#include "engine/plan.hpp"

namespace yolocu {
namespace {

using engine::GpuStep;
using engine::GpuStepKind;
using engine::GpuStepPlan;
using engine::Layout;
namespace ck = cuda_kernels;

// ---- RAII ------------------------------------------------------------------------------------
struct CudaFree {
  void operator()(void* p) const noexcept { cudaFree(p); }
};
using DeviceMem = std::unique_ptr<void, CudaFree>;

DeviceMem device_alloc(size_t bytes, const char* what) {
  if (bytes == 0) return DeviceMem();
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    detail::fail(ErrorCode::kOutOfMemory, "cannot allocate ", bytes, " bytes of device memory for ", what);
  }
  YOLOCU_CUDA_CHECK(e);
  return DeviceMem(p);
}

template <typename T, void (*Destroy)(T)>
struct Deleter {
  void operator()(std::remove_pointer_t<T>* p) const noexcept { Destroy(p); }
};
template <typename T, void (*Destroy)(T)>
using Handle = std::unique_ptr<std::remove_pointer_t<T>, Deleter<T, Destroy>>;

void destroy_cudnn(cudnnHandle_t h) { cudnnDestroy(h); }
void destroy_stream(cudaStream_t s) { cudaStreamDestroy(s); }
void destroy_event(cudaEvent_t e) { cudaEventDestroy(e); }
void destroy_graph(cudaGraph_t g) { cudaGraphDestroy(g); }
void destroy_graph_exec(cudaGraphExec_t g) { cudaGraphExecDestroy(g); }

using CudnnHandle = Handle<cudnnHandle_t, destroy_cudnn>;
using Stream = Handle<cudaStream_t, destroy_stream>;
using Event = Handle<cudaEvent_t, destroy_event>;
using CudaGraph = Handle<cudaGraph_t, destroy_graph>;
using GraphExec = Handle<cudaGraphExec_t, destroy_graph_exec>;

Event make_event(unsigned flags) {
  cudaEvent_t e = nullptr;
  YOLOCU_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags));
  return Event(e);
}

// Makes `device` current for a scope and restores the caller's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    YOLOCU_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != device) YOLOCU_CUDA_CHECK(cudaSetDevice(device));
    else prev_ = -1;
  }
  ~DeviceGuard() {
    if (prev_ >= 0) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

// ---- per-step data ---------------------------------------------------------------------------
// Channels of the space-to-depth stem's input: 4 * 3 = 12, padded to 16 (32-byte pixels).
constexpr int kStemChannels = 16;

struct ConvInfo {
  int step = -1;
  int x = -1, y = -1, residual = -1;
  engine::ConvProblem pb;  // at max_batch; n is set per batch (problem())
  bool s2d = false;        // the space-to-depth stem: x is the engine's stem buffer
  DeviceMem d_w, d_bias;   // KRSC in the activation dtype (padded), float32 bias [pb.k]
  std::string name;
  engine::ConvProblem problem(int batch) const {
    engine::ConvProblem p = pb;
    p.n = batch;
    return p;
  }
};

struct BatchExec {
  std::vector<std::shared_ptr<const engine::ConvTactic>> tactics;  // per ConvInfo
  GraphExec graph;
  bool graph_failed = false;
  int runs = 0;
};

struct StepAux {
  int conv = -1;                  // index into convs
  DeviceMem d_sy, d_sx;           // resize tables
  ck::PoolParams pool{};          // maxpool (n filled at launch)
  std::vector<int64_t> start, step;  // slice: per input axis
  std::vector<int64_t> perm;      // transpose
  int64_t split_start = 0;        // split: offset along axis
  int axis = 0;                   // split / concat axis
  std::vector<DeviceMem> tail_tables;            // Detect tail: per level, the 5 constant tables
  std::vector<engine::tail::Level> tail_levels;  // (tables pointing at tail_tables)
};

int64_t numel(const Shape& s) { return shape_numel(s); }

Shape row_major_strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// Is `ci` YOLOv5's stem (6x6, stride 2, pads 2, 3 channels) on the network input, alone?
bool is_s2d_stem(const ConvInfo& ci, int input_value, int readers, int h, int w) {
  const engine::ConvProblem& p = ci.pb;
  return ci.x == input_value && readers == 1 && p.c == 3 && p.group == 1 && p.r == 6 && p.s == 6 && p.str_h == 2 &&
         p.str_w == 2 && p.pad_h == 2 && p.pad_w == 2 && p.dil_h == 1 && p.dil_w == 1 && h % 2 == 0 && w % 2 == 0 &&
         p.p == h / 2 && p.q == w / 2;
}

}  // namespace

struct CudaEngine::Impl {
  std::shared_ptr<const Model> model;
  CudaEngineOptions options;
  bool half = true;
  size_t es = 2;
  int in_c = 3, in_h = 0, in_w = 0;
  GpuStepPlan sp;
  std::vector<StepAux> aux;
  std::vector<ConvInfo> convs;
  std::map<int, DeviceMem> consts;  // value id -> float32 device copy
  DeviceMem arena, workspace, staging;
  DeviceMem stem_input;  // the space-to-depth stem's input [max_batch, H/2, W/2, kStemChannels]
  int stem_conv = -1;    // index into convs, -1: no space-to-depth stem
  int input_readers = 0; // steps reading the network input
  size_t workspace_bytes = 0;
  std::vector<int> tuned;               // tuned batch sizes, ascending
  std::unique_ptr<engine::Tuner> tuner; // kept for the batch sizes derived later
  CudnnHandle cudnn;
  Stream stream;          // run_host / profile
  Stream capture_stream;  // graph capture only (never executes work)
  std::vector<std::unique_ptr<BatchExec>> batches;  // index = batch size
  CudaEngineStats stats;

  const engine::PlanValue& val(int id) const { return sp.plan.values[static_cast<size_t>(id)]; }
  Shape shape_at(int id, int batch) const {
    Shape s = val(id).shape;
    if (!val(id).constant && !s.empty()) s[0] = s[0] / options.max_batch * batch;
    return s;
  }
  void* ptr(int id) const {
    if (val(id).constant) {
      auto it = consts.find(id);
      YOLOCU_CHECK(it != consts.end(), kInternal, "constant '", val(id).name, "' not on the device");
      return it->second.get();
    }
    const int64_t off = sp.offset[static_cast<size_t>(id)];
    YOLOCU_CHECK(off >= 0, kInternal, "value '", val(id).name, "' has no buffer");
    return static_cast<uint8_t*>(arena.get()) + off;
  }
  float* fptr(int id) const { return static_cast<float*>(ptr(id)); }

  void build();
  void check_batch_scaling(const engine::Plan& big);
  void setup_step(size_t i);
  void upload_const(int id);
  void choose_tactics();
  engine::ConvBuffers conv_buffers(const ConvInfo& ci) const;
  void convert_input(const void* d_input, int batch, cudaStream_t s);
  BatchExec& batch_exec(int batch);
  void enqueue_steps(BatchExec& be, int batch, cudaStream_t s);
  void exec_step(BatchExec& be, size_t i, int batch, cudaStream_t s);
  void capture(BatchExec& be, int batch);
  void run(const void* d_input, int batch, cudaStream_t s);
};

// ---- build -----------------------------------------------------------------------------------
void CudaEngine::Impl::check_batch_scaling(const engine::Plan& big) {
  // Steps are planned once at max_batch and launched at smaller batches by scaling dim 0 of every
  // runtime value; verify on a batch-1 plan that the model really scales that way.
  const engine::Plan one = engine::build_plan(*model, {{1, in_c, in_h, in_w}});
  YOLOCU_CHECK(one.values.size() == big.values.size() && one.nodes.size() == big.nodes.size(), kUnsupported,
               "CudaEngine: the model's graph changes with the batch size (", big.nodes.size(), " runtime nodes at batch ",
               options.max_batch, ", ", one.nodes.size(), " at batch 1)");
  const int64_t mb = options.max_batch;
  for (size_t v = 0; v < big.values.size(); ++v) {
    const auto& a = big.values[v];
    const auto& b = one.values[v];
    YOLOCU_CHECK(a.constant == b.constant && a.shape.size() == b.shape.size(), kUnsupported, "CudaEngine: value '",
                 a.name, "' differs between batch sizes");
    if (a.constant) continue;
    bool ok = !a.shape.empty() && a.shape[0] == b.shape[0] * mb;
    for (size_t d = 1; ok && d < a.shape.size(); ++d) ok = a.shape[d] == b.shape[d];
    YOLOCU_CHECK(ok, kUnsupported, "CudaEngine: value '", a.name, "' does not scale with the batch (",
                 shape_str(b.shape), " at batch 1, ", shape_str(a.shape), " at batch ", mb, ")");
  }
  for (size_t n = 0; n < big.nodes.size(); ++n) {
    const auto& pn = big.nodes[n];
    YOLOCU_CHECK(pn.node.op_type == one.nodes[n].node.op_type, kUnsupported, "CudaEngine: node order differs");
    if (pn.op->is_view) continue;  // shape inputs are never read on the device
    if (pn.node.op_type == "Resize" || pn.node.op_type == "Upsample") {
      // The dynamic export computes Resize 'sizes' from the input shape, batch included: what
      // must not change is the source index map of the non-batch axes.
      auto indices = [&](const engine::Plan& p, const engine::PlanNode& node) {
        auto idx = engine::resize_indices(p, node);
        idx.erase(idx.begin());
        return idx;
      };
      YOLOCU_CHECK(indices(big, pn) == indices(one, one.nodes[n]), kUnsupported, pn.node.describe(),
                   ": the resize depends on the batch size");
      continue;
    }
    for (int id : pn.in) {
      if (id < 0 || !big.values[static_cast<size_t>(id)].constant) continue;
      const Tensor& ta = big.values[static_cast<size_t>(id)].value;
      const Tensor& tb = one.values[static_cast<size_t>(id)].value;
      YOLOCU_CHECK(ta.shape() == tb.shape() && ta.nbytes() == tb.nbytes() &&
                       (ta.nbytes() == 0 || std::memcmp(ta.data(), tb.data(), ta.nbytes()) == 0),
                   kUnsupported, pn.node.describe(), ": constant input '", big.values[static_cast<size_t>(id)].name,
                   "' depends on the batch size");
    }
  }
}

void CudaEngine::Impl::upload_const(int id) {
  if (id < 0 || !val(id).constant || consts.count(id)) return;
  const Tensor& t = val(id).value;
  YOLOCU_CHECK(t.dtype() == DType::kFloat32, kUnsupported, "GPU engine: constant '", val(id).name, "' of type ",
               dtype_name(t.dtype()), " used at run time");
  DeviceMem m = device_alloc(std::max<size_t>(t.nbytes(), 4), "constants");
  if (t.nbytes()) YOLOCU_CUDA_CHECK(cudaMemcpy(m.get(), t.data(), t.nbytes(), cudaMemcpyHostToDevice));
  stats.weight_bytes += t.nbytes();
  consts.emplace(id, std::move(m));
}

void CudaEngine::Impl::setup_step(size_t i) {
  const GpuStep& st = sp.steps[i];
  StepAux& a = aux[i];
  const engine::PlanNode* pn = st.node >= 0 ? &sp.plan.nodes[static_cast<size_t>(st.node)] : nullptr;
  const bool multi_batch = options.max_batch > 1;
  switch (st.kind) {
    case GpuStepKind::kConv: {
      const Node& n = pn->node;
      ConvInfo ci;
      ci.step = static_cast<int>(i);
      ci.name = n.name;
      ci.x = st.in[0];
      ci.y = st.out[0];
      ci.residual = st.residual;
      const Tensor& w = val(st.in[1]).value;
      YOLOCU_CHECK(w.rank() == 4 && w.dtype() == DType::kFloat32, kUnsupported, n.describe(),
                   ": only 2-D convolutions with float weights are supported, weights ", shape_str(w.shape()));
      engine::ConvProblem& p = ci.pb;
      const int k = static_cast<int>(w.dim(0)), cg = static_cast<int>(w.dim(1));
      const int r = static_cast<int>(w.dim(2)), sz = static_cast<int>(w.dim(3));
      p.group = static_cast<int>(n.attr_int("group", 1));
      const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
      const auto str = n.attr_ints("strides", {1, 1});
      const auto dil = n.attr_ints("dilations", {1, 1});
      YOLOCU_CHECK(str.size() == 2 && dil.size() == 2 && pads.size() == 4, kUnsupported, n.describe(),
                   ": only 2-D convolutions are supported");
      YOLOCU_CHECK(pads[0] == pads[2] && pads[1] == pads[3], kUnsupported, n.describe(),
                   ": asymmetric padding is not supported by the GPU engine");
      const Shape& xs = val(ci.x).shape;
      const Shape& ys = val(ci.y).shape;
      YOLOCU_CHECK(xs[1] == int64_t{cg} * p.group, kInvalidArgument, n.describe(), ": input has ", xs[1],
                   " channels, weights expect ", int64_t{cg} * p.group);
      p.n = options.max_batch;
      p.c = static_cast<int>(sp.channel_pitch[static_cast<size_t>(ci.x)]);
      p.h = static_cast<int>(xs[2]);
      p.w = static_cast<int>(xs[3]);
      p.k = static_cast<int>(sp.channel_pitch[static_cast<size_t>(ci.y)]);
      p.r = r;
      p.s = sz;
      p.p = static_cast<int>(ys[2]);
      p.q = static_cast<int>(ys[3]);
      p.pad_h = static_cast<int>(pads[0]);
      p.pad_w = static_cast<int>(pads[1]);
      p.str_h = static_cast<int>(str[0]);
      p.str_w = static_cast<int>(str[1]);
      p.dil_h = static_cast<int>(dil[0]);
      p.dil_w = static_cast<int>(dil[1]);
      p.half = half;
      p.bias = st.in[2] >= 0;
      p.silu = st.silu;
      p.residual = st.residual >= 0;
      YOLOCU_CHECK(p.c == xs[1], kInternal, n.describe(), ": reads a channel-padded value");
      ci.s2d = options.space_to_depth_stem && is_s2d_stem(ci, sp.plan.inputs[0], input_readers, in_h, in_w);
      // Weights OIHW -> KRSC, output channels padded to p.k with zeros. The space-to-depth stem:
      // W'[o, a, b, ch * 4 + dy * 2 + dx] = W[o, ch, 2a + dy, 2b + dx] on a 3x3 filter of
      // kStemChannels input channels (the sums of the 6x6 stride-2 convolution, regrouped).
      const float* src = w.data_as<float>();
      auto at = [&](int o, int c, int y, int x) {
        return src[((static_cast<size_t>(o) * cg + c) * r + y) * sz + x];
      };
      std::vector<float> krsc;
      if (ci.s2d) {
        p.c = kStemChannels;
        p.h = in_h / 2;
        p.w = in_w / 2;
        p.r = p.s = 3;
        p.str_h = p.str_w = 1;
        p.pad_h = p.pad_w = 1;
        krsc.assign(static_cast<size_t>(p.k) * 9 * kStemChannels, 0.f);
        for (int o = 0; o < k; ++o)
          for (int fy = 0; fy < 3; ++fy)
            for (int fx = 0; fx < 3; ++fx)
              for (int ch = 0; ch < cg; ++ch)
                for (int dy = 0; dy < 2; ++dy)
                  for (int dx = 0; dx < 2; ++dx)
                    krsc[((static_cast<size_t>(o) * 3 + fy) * 3 + fx) * kStemChannels + ch * 4 + dy * 2 + dx] =
                        at(o, ch, 2 * fy + dy, 2 * fx + dx);
      } else {
        krsc.assign(static_cast<size_t>(p.k) * r * sz * cg, 0.f);
        for (int o = 0; o < k; ++o)
          for (int c = 0; c < cg; ++c)
            for (int y = 0; y < r; ++y)
              for (int x = 0; x < sz; ++x)
                krsc[((static_cast<size_t>(o) * r + y) * sz + x) * cg + c] = at(o, c, y, x);
      }
      const size_t cnt = krsc.size();
      ci.d_w = device_alloc(cnt * es, "weights");
      if (half) {
        std::vector<uint16_t> h(cnt);
        for (size_t j = 0; j < cnt; ++j) h[j] = float_to_half(krsc[j]);
        YOLOCU_CUDA_CHECK(cudaMemcpy(ci.d_w.get(), h.data(), cnt * 2, cudaMemcpyHostToDevice));
      } else {
        YOLOCU_CUDA_CHECK(cudaMemcpy(ci.d_w.get(), krsc.data(), cnt * 4, cudaMemcpyHostToDevice));
      }
      stats.weight_bytes += cnt * es;
      if (p.bias) {
        const Tensor& b = val(st.in[2]).value;
        YOLOCU_CHECK(b.dtype() == DType::kFloat32 && b.numel() == k, kInvalidArgument, n.describe(), ": bias has ",
                     b.numel(), " elements, expected ", k);
        std::vector<float> bias(static_cast<size_t>(p.k), 0.f);
        std::copy(b.data_as<float>(), b.data_as<float>() + k, bias.begin());
        ci.d_bias = device_alloc(bias.size() * 4, "bias");
        YOLOCU_CUDA_CHECK(cudaMemcpy(ci.d_bias.get(), bias.data(), bias.size() * 4, cudaMemcpyHostToDevice));
        stats.weight_bytes += bias.size() * 4;
      }
      stats.conv_flops_per_image += 2.0 * k * cg * r * sz * static_cast<double>(ys[2] * ys[3]);
      a.conv = static_cast<int>(convs.size());
      if (ci.s2d) stem_conv = a.conv;
      convs.push_back(std::move(ci));
      break;
    }
    case GpuStepKind::kMaxPool: {
      const Node& n = pn->node;
      const auto k = n.attr_ints("kernel_shape");
      const auto str = n.attr_ints("strides", {1, 1});
      const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
      YOLOCU_CHECK(k.size() == 2 && str.size() == 2 && pads.size() == 4, kUnsupported, n.describe(),
                   ": only 2-D max pooling is supported");
      const Shape& xs = val(st.in[0]).shape;
      const Shape& ys = val(st.out[0]).shape;
      a.pool = {0, static_cast<int>(xs[2]), static_cast<int>(xs[3]), static_cast<int>(xs[1]), static_cast<int>(ys[2]),
                static_cast<int>(ys[3]), static_cast<int>(k[0]), static_cast<int>(k[1]), static_cast<int>(str[0]),
                static_cast<int>(str[1]), static_cast<int>(pads[0]), static_cast<int>(pads[1])};
      break;
    }
    case GpuStepKind::kResize: {
      const auto idx = engine::resize_indices(sp.plan, *pn);
      YOLOCU_CHECK(idx.size() == 4, kInternal, pn->node.describe(), ": resize index tables");
      auto upload = [&](const std::vector<int64_t>& v) {
        std::vector<int> t(v.begin(), v.end());
        DeviceMem m = device_alloc(std::max<size_t>(t.size(), 1) * sizeof(int), "resize tables");
        YOLOCU_CUDA_CHECK(cudaMemcpy(m.get(), t.data(), t.size() * sizeof(int), cudaMemcpyHostToDevice));
        return m;
      };
      a.d_sy = upload(idx[2]);
      a.d_sx = upload(idx[3]);
      break;
    }
    case GpuStepKind::kGather: {
      const Node& n = pn->node;
      const Shape& xs = val(st.in[0]).shape;
      const int64_t rank = static_cast<int64_t>(xs.size());
      const Shape& ys = val(st.out[0]).shape;
      if (n.op_type == "Transpose") {
        a.perm = n.attr_ints("perm", {});
        if (a.perm.empty())
          for (int64_t d = rank; d-- > 0;) a.perm.push_back(d);
        YOLOCU_CHECK(static_cast<int64_t>(a.perm.size()) == rank, kParse, n.describe(), ": perm has wrong rank");
        YOLOCU_CHECK(!multi_batch || a.perm[0] == 0, kUnsupported, n.describe(),
                     ": transposing the batch axis is not supported with max_batch > 1");
      } else if (n.op_type == "Slice") {
        std::vector<int64_t> starts, axes, steps;
        if (sp.plan.opset >= 10) {
          auto cint = [&](size_t k) {
            if (pn->in.size() <= k || pn->in[k] < 0) return std::vector<int64_t>{};
            YOLOCU_CHECK(val(pn->in[k]).constant, kUnsupported, n.describe(), ": slice parameters must be constant");
            return ops::to_int_vector(val(pn->in[k]).value);
          };
          starts = cint(1);
          axes = cint(3);
          steps = cint(4);
        } else {
          starts = n.attr_ints("starts");
          axes = n.attr_ints("axes");
        }
        if (axes.empty())
          for (size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<int64_t>(d));
        a.start.assign(static_cast<size_t>(rank), 0);
        a.step.assign(static_cast<size_t>(rank), 1);
        for (size_t j = 0; j < axes.size(); ++j) {
          int64_t ax = axes[j] < 0 ? axes[j] + rank : axes[j];
          YOLOCU_CHECK(ax >= 0 && ax < rank && j < starts.size(), kParse, n.describe(), ": bad slice axes");
          const int64_t stp = j < steps.size() ? steps[j] : 1;
          YOLOCU_CHECK(stp != 0, kParse, n.describe(), ": slice step 0");
          const int64_t dim = xs[static_cast<size_t>(ax)];
          int64_t s0 = starts[j] < 0 ? starts[j] + dim : starts[j];
          s0 = stp > 0 ? std::clamp<int64_t>(s0, 0, dim) : std::clamp<int64_t>(s0, 0, dim - 1);
          a.start[static_cast<size_t>(ax)] = s0;
          a.step[static_cast<size_t>(ax)] = stp;
        }
        YOLOCU_CHECK(!multi_batch || (a.start[0] == 0 && a.step[0] == 1 && ys[0] == xs[0]), kUnsupported,
                     n.describe(), ": slicing the batch axis is not supported with max_batch > 1");
      } else {  // Split
        int64_t axis = n.attr_int("axis", 0);
        if (axis < 0) axis += rank;
        a.axis = static_cast<int>(axis);
        YOLOCU_CHECK(axis > 0 || !multi_batch, kUnsupported, n.describe(),
                     ": splitting the batch axis is not supported with max_batch > 1");
        for (int k = 0; k < st.out_index; ++k)
          if (pn->out[static_cast<size_t>(k)] >= 0) a.split_start += val(pn->out[static_cast<size_t>(k)]).shape[static_cast<size_t>(axis)];
      }
      break;
    }
    case GpuStepKind::kConcat: {
      int64_t axis = pn->node.attr_int("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(val(st.out[0]).shape.size());
      a.axis = static_cast<int>(axis);
      YOLOCU_CHECK(axis > 0 || !multi_batch, kUnsupported, pn->node.describe(),
                   ": concatenating along the batch axis is not supported with max_batch > 1");
      for (int id : st.in) upload_const(id);
      break;
    }
    case GpuStepKind::kBinary:
    case GpuStepKind::kUnary:
      ck::elt_op(pn->node.op_type.c_str());  // throws for an op without kernel
      for (int id : st.in) upload_const(id);
      break;
    case GpuStepKind::kEltwiseNhwc:
      ck::elt_op(pn->node.op_type.c_str());
      break;
    case GpuStepKind::kDetectTail:
      for (const engine::DetectLevel& L : sp.heads[static_cast<size_t>(st.head)].levels) {
        std::vector<float> t;
        engine::tail::tables_of(L, &t);
        DeviceMem m = device_alloc(t.size() * sizeof(float), "Detect tail tables");
        YOLOCU_CUDA_CHECK(cudaMemcpy(m.get(), t.data(), t.size() * sizeof(float), cudaMemcpyHostToDevice));
        stats.weight_bytes += t.size() * sizeof(float);
        a.tail_levels.push_back(engine::tail::level_from(L, static_cast<const float*>(m.get())));
        a.tail_levels.back().pitch = sp.channel_pitch[static_cast<size_t>(st.in[a.tail_levels.size() - 1])];
        a.tail_tables.push_back(std::move(m));
      }
      break;
    default: break;
  }
}

engine::ConvBuffers CudaEngine::Impl::conv_buffers(const ConvInfo& ci) const {
  engine::ConvBuffers b;
  b.x = ci.s2d ? stem_input.get() : ptr(ci.x);
  b.w = ci.d_w.get();
  b.bias = static_cast<const float*>(ci.d_bias.get());
  b.residual = ci.residual >= 0 ? ptr(ci.residual) : nullptr;
  b.y = ptr(ci.y);
  b.ws = workspace.get();
  b.ws_bytes = workspace_bytes;
  return b;
}

// Tactics for every tuned batch size, through the tuner (cache, check, timing) on the engine's own
// buffers, with a temporary workspace of workspace_limit and a reference output buffer; then the
// engine's workspace is sized to what the chosen tactics need.
void CudaEngine::Impl::choose_tactics() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<engine::TacticCache> cache;
  std::string path = options.tactic_cache.empty() ? engine::TacticCache::default_path() : options.tactic_cache;
  if (path == "none") path.clear();
  if (!path.empty()) {
    cache = std::make_unique<engine::TacticCache>(engine::tactic_device_key(options.device));
    std::string warning;
    if (!cache->load(path, &warning)) stats.warnings.push_back(warning);
  }
  stats.tactic_cache_path = path;

  engine::TacticLimits lim;
  lim.workspace = options.workspace_limit;
  lim.max_graph_plans = options.max_graph_plans;
  DeviceMem tmp_ws, y_ref;
  if (lim.workspace > 0) {
    try {
      tmp_ws = device_alloc(lim.workspace, "tactic tuning workspace");
    } catch (const Error&) {
      lim.workspace = 0;
    }
  }
  size_t y_max = 0;
  for (const ConvInfo& ci : convs) {
    const engine::ConvProblem p = ci.problem(tuned.back());
    y_max = std::max(y_max, static_cast<size_t>(p.n) * p.p * p.q * p.k * es);
  }
  y_ref = device_alloc(y_max, "tactic check reference");
  tuner = std::make_unique<engine::Tuner>(cudnn.get(), lim, cache.get(), options.device, stream.get());
  {
    std::vector<engine::ConvProblem> all;
    for (int b : tuned)
      for (const ConvInfo& ci : convs) all.push_back(ci.problem(b));
    tuner->prebuild(all, options.device, static_cast<int>(std::min(16u, std::max(1u, std::thread::hardware_concurrency()))));
  }
  size_t need = 0;
  for (int b : tuned) {
    auto be = std::make_unique<BatchExec>();
    be->tactics.resize(convs.size());
    for (size_t c = 0; c < convs.size(); ++c) {
      engine::ConvBuffers bufs = conv_buffers(convs[c]);
      bufs.ws = tmp_ws.get();
      bufs.ws_bytes = lim.workspace;
      const engine::TunedLayer t = tuner->choose(convs[c].problem(b), bufs, y_ref.get());
      need = std::max(need, t.tactic->workspace());
      be->tactics[c] = t.tactic;
    }
    batches[static_cast<size_t>(b)] = std::move(be);
  }
  YOLOCU_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  tmp_ws.reset();
  y_ref.reset();
  // Derived batch sizes may need some workspace of their own: keep at least 16 MiB.
  workspace_bytes = std::min(options.workspace_limit, std::max(need, size_t{16} << 20));
  workspace = device_alloc(workspace_bytes, "workspace");
  lim.workspace = workspace_bytes;
  tuner->set_limits(lim);
  // The tuning wrote random data into the arena: start every run from zeros as before.
  YOLOCU_CUDA_CHECK(cudaMemset(arena.get(), 0, std::max<size_t>(sp.arena_bytes, 256)));

  if (cache && cache->dirty()) {
    std::string warning;
    if (!cache->save(path, &warning)) stats.warnings.push_back(warning);
  }
  const engine::TunerStats& ts = tuner->stats();
  for (const std::string& w : tuner->warnings()) stats.warnings.push_back(w);
  stats.tuned_batches = tuned;
  stats.tactic_layers = ts.layers;
  stats.tactic_cache_hits = ts.cache_hits;
  stats.tactic_memo_hits = ts.memo_hits;
  stats.tactics_tuned = ts.tuned;
  stats.tactic_candidates = ts.candidates;
  stats.tactic_rejected = ts.rejected;
  stats.tune_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (options.print_warnings)
    for (const std::string& w : stats.warnings) std::fprintf(stderr, "yolocu: warning: %s\n", w.c_str());
}

BatchExec& CudaEngine::Impl::batch_exec(int batch) {
  auto& slot = batches[static_cast<size_t>(batch)];
  if (!slot) {
    // Not tuned: the tactics of the nearest tuned batch size (in ratio; a tie takes the larger).
    int near = tuned.front();
    for (int t : tuned)
      if (std::abs(std::log(static_cast<double>(t) / batch)) <= std::abs(std::log(static_cast<double>(near) / batch)))
        near = t;
    const BatchExec& from = batch_exec(near);
    auto be = std::make_unique<BatchExec>();
    be->tactics.resize(convs.size());
    for (size_t c = 0; c < convs.size(); ++c)
      be->tactics[c] = tuner->derive(convs[c].problem(batch), from.tactics[c]->id());
    slot = std::move(be);
  }
  return *slot;
}

void CudaEngine::Impl::build() {
  const auto t0 = std::chrono::steady_clock::now();
  const Model& m = *model;
  YOLOCU_CHECK(m.graph.inputs.size() == 1, kUnsupported, "CudaEngine: the model has ", m.graph.inputs.size(),
               " inputs (one image input expected)");
  const ValueInfo& in = m.graph.inputs[0];
  YOLOCU_CHECK(in.dims.size() == 4, kUnsupported, "CudaEngine: input '", in.name, "' has rank ", in.dims.size(),
               " (N, C, H, W expected)");
  in_c = in.dims[1].is_static() ? static_cast<int>(in.dims[1].value) : 3;
  auto pick = [&](const Dim& d, int opt) {
    if (opt > 0) return opt;
    return d.is_static() ? static_cast<int>(d.value) : 640;
  };
  in_h = pick(in.dims[2], options.height);
  in_w = pick(in.dims[3], options.width);
  YOLOCU_CHECK(!in.dims[0].is_static() || in.dims[0].value == 1 || options.max_batch == 1, kInvalidArgument,
               "CudaEngine: the model's batch is fixed at ", in.dims[0].value, "; max_batch ", options.max_batch,
               " needs a batch-1 or a dynamic-batch export");
  if (in.dims[0].is_static() && options.max_batch > 1) {
    // export.py's default static batch-1 file: run it at any batch (checked by check_batch_scaling).
    model = std::make_shared<Model>(engine::make_batch_dynamic(m));
    return build();
  }

  engine::Plan plan = engine::build_plan(m, {{options.max_batch, in_c, in_h, in_w}});
  if (options.max_batch > 1) check_batch_scaling(plan);
  engine::GpuStepOptions so;
  so.act_elem_size = es;
  so.fuse_detect_tail = options.fuse_detect_tail;
  sp = engine::plan_gpu_steps(std::move(plan), so);

  cudnnHandle_t h = nullptr;
  YOLOCU_CUDNN_CHECK(cudnnCreate(&h));
  cudnn.reset(h);
  cudaStream_t s = nullptr;
  YOLOCU_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream.reset(s);
  YOLOCU_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  capture_stream.reset(s);

  arena = device_alloc(std::max<size_t>(sp.arena_bytes, 256), "activations");
  YOLOCU_CUDA_CHECK(cudaMemset(arena.get(), 0, std::max<size_t>(sp.arena_bytes, 256)));
  const size_t staging_bytes = static_cast<size_t>(options.max_batch) * in_c * in_h * in_w * es;
  staging = device_alloc(staging_bytes, "input staging");
  YOLOCU_CUDA_CHECK(cudaMemset(staging.get(), 0, staging_bytes));

  input_readers = 0;
  for (const GpuStep& st : sp.steps)
    for (int id : st.in) input_readers += id == sp.plan.inputs[0] ? 1 : 0;
  aux.resize(sp.steps.size());
  for (size_t i = 0; i < sp.steps.size(); ++i) setup_step(i);

  if (stem_conv >= 0) {
    const size_t bytes = static_cast<size_t>(options.max_batch) * (in_h / 2) * (in_w / 2) * kStemChannels * es;
    stem_input = device_alloc(bytes, "space-to-depth input");
    YOLOCU_CUDA_CHECK(cudaMemset(stem_input.get(), 0, bytes));
    stats.space_to_depth_stem = true;
  }

  // Tactics for the tuned batch sizes.
  YOLOCU_CUDNN_CHECK(cudnnSetStream(cudnn.get(), stream.get()));
  batches.resize(static_cast<size_t>(options.max_batch) + 1);
  tuned = options.tune_batches.empty() ? std::vector<int>{1, options.max_batch} : options.tune_batches;
  for (int b : tuned)
    YOLOCU_CHECK(b >= 1 && b <= options.max_batch, kInvalidArgument, "CudaEngine: tune batch ", b,
                 " outside [1, max_batch = ", options.max_batch, "]");
  std::sort(tuned.begin(), tuned.end());
  tuned.erase(std::unique(tuned.begin(), tuned.end()), tuned.end());
  choose_tactics();

  stats.activation_bytes = sp.arena_bytes;
  stats.naive_bytes = sp.naive_bytes;
  stats.workspace_bytes = workspace_bytes;
  stats.steps = static_cast<int>(sp.steps.size());
  stats.fused_convs = sp.fused_silu;
  stats.fused_residuals = sp.fused_residual;
  stats.fused_tail_nodes = sp.fused_tail_nodes;
  stats.convs = sp.convs;
  int kernels = 1;  // input conversion
  for (size_t i = 0; i < sp.steps.size(); ++i) {
    const GpuStep& st = sp.steps[i];
    switch (st.kind) {
      case GpuStepKind::kView: break;
      case GpuStepKind::kConv:  // as the largest tuned batch runs them
        kernels += batches[static_cast<size_t>(tuned.back())]->tactics[static_cast<size_t>(aux[i].conv)]->kernels();
        break;
      case GpuStepKind::kConcat:
      case GpuStepKind::kConcatNhwc:
      case GpuStepKind::kDetectTail: kernels += static_cast<int>(st.in.size()); break;
      default: kernels += 1;
    }
  }
  stats.kernels_per_run = kernels;
  stats.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// ---- execution -------------------------------------------------------------------------------
void CudaEngine::Impl::exec_step(BatchExec& be, size_t i, int batch, cudaStream_t s) {
  const GpuStep& st = sp.steps[i];
  const StepAux& a = aux[i];
  const engine::PlanNode* pn = st.node >= 0 ? &sp.plan.nodes[static_cast<size_t>(st.node)] : nullptr;
  switch (st.kind) {
    case GpuStepKind::kView: return;
    case GpuStepKind::kConv: {
      const ConvInfo& ci = convs[static_cast<size_t>(a.conv)];
      be.tactics[static_cast<size_t>(a.conv)]->run(cudnn.get(), conv_buffers(ci), s);
      return;
    }
    case GpuStepKind::kToNhwc: {
      const Shape xs = shape_at(st.in[0], batch);
      ck::nchw_to_nhwc(ptr(st.in[0]), false, ptr(st.out[0]), half, static_cast<int>(xs[0]), static_cast<int>(xs[1]),
                       static_cast<int>(xs[2]), static_cast<int>(xs[3]), s);
      return;
    }
    case GpuStepKind::kToPlain: {
      const Shape xs = shape_at(st.in[0], batch);
      ck::nhwc_to_nchw(ptr(st.in[0]), half, fptr(st.out[0]), static_cast<int>(xs[0]), static_cast<int>(xs[1]),
                       static_cast<int>(xs[2]), static_cast<int>(xs[3]), s);
      return;
    }
    case GpuStepKind::kEltwiseNhwc: {
      const ck::EltOp op = ck::elt_op(pn->node.op_type.c_str());
      ck::eltwise_flat(op, ptr(st.in[0]), st.in.size() > 1 ? ptr(st.in[1]) : nullptr, ptr(st.out[0]), half,
                       numel(shape_at(st.out[0], batch)), s);
      return;
    }
    case GpuStepKind::kConcatNhwc: {
      const Shape ys = shape_at(st.out[0], batch);
      const int64_t rows = ys[0] * ys[2] * ys[3];
      int64_t off = 0;
      for (int id : st.in) {
        const int64_t c = val(id).shape[1];
        ck::copy_rows(ptr(id), c * static_cast<int64_t>(es), static_cast<uint8_t*>(ptr(st.out[0])) + off * static_cast<int64_t>(es),
                      ys[1] * static_cast<int64_t>(es), rows, c * static_cast<int64_t>(es), s);
        off += c;
      }
      return;
    }
    case GpuStepKind::kMaxPool: {
      ck::PoolParams p = a.pool;
      p.n = static_cast<int>(shape_at(st.in[0], batch)[0]);
      ck::maxpool_nhwc(ptr(st.in[0]), ptr(st.out[0]), half, p, s);
      return;
    }
    case GpuStepKind::kResize: {
      const Shape xs = shape_at(st.in[0], batch), ys = shape_at(st.out[0], batch);
      ck::resize_nearest_nhwc(ptr(st.in[0]), ptr(st.out[0]), half, static_cast<int>(xs[0]), static_cast<int>(xs[2]),
                              static_cast<int>(xs[3]), static_cast<int>(xs[1]), static_cast<int>(ys[2]),
                              static_cast<int>(ys[3]), static_cast<const int*>(a.d_sy.get()),
                              static_cast<const int*>(a.d_sx.get()), s);
      return;
    }
    case GpuStepKind::kUnary:
      ck::unary_plain(ck::elt_op(pn->node.op_type.c_str()), fptr(st.in[0]), fptr(st.out[0]),
                      numel(shape_at(st.out[0], batch)), s);
      return;
    case GpuStepKind::kBinary: {
      const Shape ys = shape_at(st.out[0], batch);
      ck::StridedParams p;
      p.rank = static_cast<int>(ys.size());
      for (int d = 0; d < p.rank; ++d) p.out_dims[d] = ys[static_cast<size_t>(d)];
      for (int k = 0; k < 2; ++k) {
        const Shape xs = shape_at(st.in[static_cast<size_t>(k)], batch);
        const Shape str = row_major_strides(xs);
        const int lead = p.rank - static_cast<int>(xs.size());
        YOLOCU_CHECK(lead >= 0, kInternal, pn->node.describe(), ": input rank above output rank");
        for (int d = 0; d < p.rank; ++d) {
          int64_t v = 0;
          if (d >= lead) {
            const size_t xd = static_cast<size_t>(d - lead);
            v = (xs[xd] == 1 && ys[static_cast<size_t>(d)] != 1) ? 0 : str[xd];
          }
          (k == 0 ? p.a_strides : p.b_strides)[d] = v;
        }
      }
      ck::binary_plain(ck::elt_op(pn->node.op_type.c_str()), fptr(st.in[0]), fptr(st.in[1]), fptr(st.out[0]), p, s);
      return;
    }
    case GpuStepKind::kGather: {
      const Shape xs = shape_at(st.in[0], batch), ys = shape_at(st.out[0], batch);
      const Shape str = row_major_strides(xs);
      ck::StridedParams p;
      p.rank = static_cast<int>(ys.size());
      for (int d = 0; d < p.rank; ++d) p.out_dims[d] = ys[static_cast<size_t>(d)];
      const std::string& op = pn->node.op_type;
      if (op == "Transpose") {
        for (int d = 0; d < p.rank; ++d) p.a_strides[d] = str[static_cast<size_t>(a.perm[static_cast<size_t>(d)])];
      } else if (op == "Slice") {
        for (int d = 0; d < p.rank; ++d) {
          p.a_strides[d] = str[static_cast<size_t>(d)] * a.step[static_cast<size_t>(d)];
          p.a_base += a.start[static_cast<size_t>(d)] * str[static_cast<size_t>(d)];
        }
      } else {
        for (int d = 0; d < p.rank; ++d) p.a_strides[d] = str[static_cast<size_t>(d)];
        p.a_base = a.split_start * str[static_cast<size_t>(a.axis)];
      }
      ck::gather_plain(fptr(st.in[0]), fptr(st.out[0]), p, s);
      return;
    }
    case GpuStepKind::kConcat: {
      const Shape ys = shape_at(st.out[0], batch);
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < a.axis; ++d) outer *= ys[static_cast<size_t>(d)];
      for (size_t d = static_cast<size_t>(a.axis) + 1; d < ys.size(); ++d) inner *= ys[d];
      const int64_t dst_pitch = ys[static_cast<size_t>(a.axis)] * inner * 4;
      int64_t off = 0;
      for (int id : st.in) {
        const Shape xs = shape_at(id, batch);
        const int64_t chunk = xs[static_cast<size_t>(a.axis)] * inner * 4;
        ck::copy_rows(ptr(id), chunk, static_cast<uint8_t*>(ptr(st.out[0])) + off, dst_pitch, outer, chunk, s);
        off += chunk;
      }
      return;
    }
    case GpuStepKind::kDetectTail: {
      const int64_t rows = sp.heads[static_cast<size_t>(st.head)].rows;
      for (size_t l = 0; l < st.in.size(); ++l)
        ck::detect_tail(ptr(st.in[l]), half, fptr(st.out[0]), a.tail_levels[l], rows, batch, s);
      return;
    }
    case GpuStepKind::kCopy:
      YOLOCU_CUDA_CHECK(cudaMemcpyAsync(ptr(st.out[0]), ptr(st.in[0]),
                                        static_cast<size_t>(numel(shape_at(st.out[0], batch))) * 4,
                                        cudaMemcpyDeviceToDevice, s));
      return;
  }
}

void CudaEngine::Impl::enqueue_steps(BatchExec& be, int batch, cudaStream_t s) {
  YOLOCU_CUDNN_CHECK(cudnnSetStream(cudnn.get(), s));
  for (size_t i = 0; i < sp.steps.size(); ++i) exec_step(be, i, batch, s);
}

void CudaEngine::Impl::capture(BatchExec& be, int batch) {
  cudaStream_t cs = capture_stream.get();
  YOLOCU_CUDA_CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue_steps(be, batch, cs);
  } catch (...) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(cs, &g);
    if (g) cudaGraphDestroy(g);
    (void)cudaGetLastError();
    throw;
  }
  cudaGraph_t g = nullptr;
  YOLOCU_CUDA_CHECK(cudaStreamEndCapture(cs, &g));
  CudaGraph graph(g);
  cudaGraphExec_t exec = nullptr;
  YOLOCU_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
  be.graph.reset(exec);
}

void CudaEngine::Impl::convert_input(const void* d_input, int batch, cudaStream_t s) {
  if (stem_conv >= 0)
    ck::nchw_to_s2d_nhwc(d_input, half, stem_input.get(), half, batch, in_c, in_h, in_w, kStemChannels, s);
  else
    ck::nchw_to_nhwc(d_input, half, ptr(sp.plan.inputs[0]), half, batch, in_c, in_h, in_w, s);
}

void CudaEngine::Impl::run(const void* d_input, int batch, cudaStream_t s) {
  BatchExec& be = batch_exec(batch);
  // The input conversion stays outside the graph: the graph then never depends on d_input.
  convert_input(d_input, batch, s);
  // The first run of a batch size is eager (it loads every kernel module outside any capture);
  // the second captures the graph, later ones replay it.
  if (options.cuda_graphs && !be.graph_failed && be.runs++ > 0) {
    if (!be.graph) {
      try {
        capture(be, batch);
      } catch (const Error&) {
        be.graph_failed = true;  // run eagerly from now on (still correct, only slower)
        (void)cudaGetLastError();
      }
    }
    if (be.graph) {
      YOLOCU_CUDA_CHECK(cudaGraphLaunch(be.graph.get(), s));
      return;
    }
  }
  enqueue_steps(be, batch, s);
}

// ---- public ----------------------------------------------------------------------------------
CudaEngine::CudaEngine(std::shared_ptr<const Model> model, const CudaEngineOptions& options)
    : impl_(std::make_unique<Impl>()) {
  YOLOCU_CHECK(model, kInvalidArgument, "CudaEngine: null model");
  YOLOCU_CHECK(options.max_batch >= 1 && options.max_batch <= 4096, kInvalidArgument,
               "CudaEngine: max_batch must be in [1, 4096], got ", options.max_batch);
  YOLOCU_CHECK(options.height >= 0 && options.width >= 0 && options.height <= 16384 && options.width <= 16384,
               kInvalidArgument, "CudaEngine: height/width must be in [0, 16384], got ", options.height, "x",
               options.width);
  YOLOCU_CHECK(options.precision == Precision::kFloat32 || options.precision == Precision::kFloat16,
               kInvalidArgument, "CudaEngine: invalid precision");
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) (void)cudaGetLastError();
  YOLOCU_CHECK(e == cudaSuccess && count > 0, kCuda, "CudaEngine: no usable CUDA device (",
               e == cudaSuccess ? "none found" : cudaGetErrorString(e), ")");
  YOLOCU_CHECK(options.device >= 0 && options.device < count, kInvalidArgument, "CudaEngine: device ", options.device,
               " does not exist (", count, " device(s))");
  impl_->model = std::move(model);
  impl_->options = options;
  impl_->half = options.precision == Precision::kFloat16;
  impl_->es = impl_->half ? 2 : 4;
  DeviceGuard guard(options.device);
  impl_->build();
}

CudaEngine::~CudaEngine() {
  if (!impl_) return;
  int prev = -1;
  if (cudaGetDevice(&prev) == cudaSuccess && prev != impl_->options.device) cudaSetDevice(impl_->options.device);
  if (impl_->stream) cudaStreamSynchronize(impl_->stream.get());
  impl_.reset();  // frees on the engine's device
  if (prev >= 0) cudaSetDevice(prev);
}

void CudaEngine::run(const void* d_input, int batch, cudaStream_t stream) {
  YOLOCU_CHECK(d_input, kInvalidArgument, "CudaEngine::run: d_input is null");
  YOLOCU_CHECK(batch >= 1 && batch <= impl_->options.max_batch, kInvalidArgument, "CudaEngine::run: batch ", batch,
               " outside [1, max_batch = ", impl_->options.max_batch, "]");
  DeviceGuard guard(impl_->options.device);
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, d_input);
  if (e != cudaSuccess) (void)cudaGetLastError();
  YOLOCU_CHECK(e == cudaSuccess && (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged),
               kInvalidArgument, "CudaEngine::run: d_input is not device memory");
  impl_->run(d_input, batch, stream);
}

int CudaEngine::num_outputs() const { return static_cast<int>(impl_->sp.plan.outputs.size()); }

const void* CudaEngine::output(int i) const {
  YOLOCU_CHECK(i >= 0 && i < num_outputs(), kInvalidArgument, "CudaEngine: output ", i, " of ", num_outputs());
  return impl_->ptr(impl_->sp.plan.outputs[static_cast<size_t>(i)]);
}

DType CudaEngine::output_dtype(int i) const {
  YOLOCU_CHECK(i >= 0 && i < num_outputs(), kInvalidArgument, "CudaEngine: output ", i, " of ", num_outputs());
  return DType::kFloat32;
}

Shape CudaEngine::output_shape(int i, int batch) const {
  YOLOCU_CHECK(i >= 0 && i < num_outputs(), kInvalidArgument, "CudaEngine: output ", i, " of ", num_outputs());
  YOLOCU_CHECK(batch >= 1 && batch <= impl_->options.max_batch, kInvalidArgument, "CudaEngine: batch ", batch,
               " outside [1, ", impl_->options.max_batch, "]");
  return impl_->shape_at(impl_->sp.plan.outputs[static_cast<size_t>(i)], batch);
}

std::string CudaEngine::output_name(int i) const {
  YOLOCU_CHECK(i >= 0 && i < num_outputs(), kInvalidArgument, "CudaEngine: output ", i, " of ", num_outputs());
  return impl_->model->graph.outputs[static_cast<size_t>(i)].name;
}

Shape CudaEngine::input_shape(int batch) const { return {batch, impl_->in_c, impl_->in_h, impl_->in_w}; }
DType CudaEngine::input_dtype() const { return impl_->half ? DType::kFloat16 : DType::kFloat32; }
CudaEngineStats CudaEngine::stats() const { return impl_->stats; }
const CudaEngineOptions& CudaEngine::options() const { return impl_->options; }

std::vector<Tensor> CudaEngine::run_host(const std::vector<Tensor>& inputs) {
  YOLOCU_CHECK(inputs.size() == 1, kInvalidArgument, "CudaEngine::run_host: one input expected, ", inputs.size(), " given");
  const Tensor& t = inputs[0];
  YOLOCU_CHECK(t.dtype() == DType::kFloat32 || t.dtype() == DType::kFloat16, kInvalidArgument,
               "CudaEngine::run_host: input must be float32 or float16, got ", dtype_name(t.dtype()));
  YOLOCU_CHECK(t.rank() == 4 && t.dim(0) >= 1 && t.dim(0) <= impl_->options.max_batch && t.dim(1) == impl_->in_c &&
                   t.dim(2) == impl_->in_h && t.dim(3) == impl_->in_w,
               kInvalidArgument, "CudaEngine::run_host: input shape ", shape_str(t.shape()), " does not fit ",
               shape_str(input_shape(impl_->options.max_batch)), " (batch 1..", impl_->options.max_batch, ")");
  const int batch = static_cast<int>(t.dim(0));
  DeviceGuard guard(impl_->options.device);
  const Tensor conv = t.dtype() == input_dtype() ? t : cast_tensor(t, input_dtype());
  cudaStream_t s = impl_->stream.get();
  YOLOCU_CUDA_CHECK(cudaMemcpyAsync(impl_->staging.get(), conv.data(), conv.nbytes(), cudaMemcpyHostToDevice, s));
  impl_->run(impl_->staging.get(), batch, s);
  std::vector<Tensor> outs;
  for (int i = 0; i < num_outputs(); ++i) {
    Tensor o(DType::kFloat32, output_shape(i, batch));
    YOLOCU_CUDA_CHECK(cudaMemcpyAsync(o.data(), output(i), o.nbytes(), cudaMemcpyDeviceToHost, s));
    outs.push_back(std::move(o));
  }
  YOLOCU_CUDA_CHECK(cudaStreamSynchronize(s));
  return outs;
}

std::vector<LayerTime> CudaEngine::profile(int batch, int iters) {
  YOLOCU_CHECK(batch >= 1 && batch <= impl_->options.max_batch, kInvalidArgument, "CudaEngine::profile: batch ", batch,
               " outside [1, ", impl_->options.max_batch, "]");
  YOLOCU_CHECK(iters >= 1, kInvalidArgument, "CudaEngine::profile: iters must be >= 1");
  DeviceGuard guard(impl_->options.device);
  Impl& im = *impl_;
  BatchExec& be = im.batch_exec(batch);
  cudaStream_t s = im.stream.get();
  const size_t n = im.sp.steps.size();
  std::vector<Event> ev;
  for (size_t i = 0; i <= n + 1; ++i) ev.push_back(make_event(cudaEventDefault));
  std::vector<double> total(n + 1, 0.0);  // [0]: input conversion, [i + 1]: step i
  YOLOCU_CUDNN_CHECK(cudnnSetStream(im.cudnn.get(), s));
  for (int it = 0; it < iters; ++it) {
    YOLOCU_CUDA_CHECK(cudaEventRecord(ev[0].get(), s));
    im.convert_input(im.staging.get(), batch, s);
    YOLOCU_CUDA_CHECK(cudaEventRecord(ev[1].get(), s));
    for (size_t i = 0; i < n; ++i) {
      im.exec_step(be, i, batch, s);
      YOLOCU_CUDA_CHECK(cudaEventRecord(ev[i + 2].get(), s));
    }
    YOLOCU_CUDA_CHECK(cudaEventSynchronize(ev[n + 1].get()));
    for (size_t i = 0; i <= n; ++i) {
      float ms = 0;
      YOLOCU_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i].get(), ev[i + 1].get()));
      total[i] += ms;
    }
  }
  const double es = static_cast<double>(im.es);
  std::vector<LayerTime> out;
  {
    LayerTime in;
    in.name = im.stem_conv >= 0 ? "input -> space-to-depth NHWC" : "input -> NHWC";
    in.kind = "Input";
    in.ms = total[0] / iters;
    const double px = static_cast<double>(batch) * im.in_c * im.in_h * im.in_w;
    in.bytes = px * es + (im.stem_conv >= 0 ? px / im.in_c / 4 * kStemChannels * es : px * es);
    out.push_back(in);
  }
  for (size_t i = 0; i < n; ++i) {
    const GpuStep& st = im.sp.steps[i];
    if (st.kind == GpuStepKind::kView) continue;
    LayerTime l;
    l.name = st.label;
    l.kind = engine::gpu_step_kind_name(st.kind);
    l.ms = total[i + 1] / iters;
    if (st.kind == GpuStepKind::kConv) {
      const ConvInfo& ci = im.convs[static_cast<size_t>(im.aux[i].conv)];
      const engine::ConvProblem p = ci.problem(batch);
      l.tactic = be.tactics[static_cast<size_t>(im.aux[i].conv)]->name();
      l.flops = p.flops();
      l.bytes = p.min_bytes();
      if (ci.s2d) l.tactic += " (space-to-depth stem)";
    } else {
      for (int id : st.in)
        if (id >= 0 && !im.val(id).constant) l.bytes += static_cast<double>(engine::value_bytes(im.sp, id, im.es)) * batch / im.options.max_batch;
      for (int id : st.out)
        if (id >= 0) l.bytes += static_cast<double>(engine::value_bytes(im.sp, id, im.es)) * batch / im.options.max_batch;
    }
    out.push_back(l);
  }
  return out;
}

}  // namespace yolocu
