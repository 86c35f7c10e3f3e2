// GPU executor: runs the steps planned by gpu_steps.cpp with cuDNN convolutions (NHWC, tensor
// cores in FP16, FMA-only in FP32) and the kernels of cuda_kernels.cu, all activations in one
// liveness-planned device arena, one CUDA graph per batch size.
#include "yolocu/cuda_engine.hpp"

#include <cudnn.h>

#include <algorithm>
#include <mutex>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <type_traits>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/gpu_steps.hpp"
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

void destroy_tensor_desc(cudnnTensorDescriptor_t d) { cudnnDestroyTensorDescriptor(d); }
void destroy_filter_desc(cudnnFilterDescriptor_t d) { cudnnDestroyFilterDescriptor(d); }
void destroy_conv_desc(cudnnConvolutionDescriptor_t d) { cudnnDestroyConvolutionDescriptor(d); }
void destroy_cudnn(cudnnHandle_t h) { cudnnDestroy(h); }
void destroy_stream(cudaStream_t s) { cudaStreamDestroy(s); }
void destroy_event(cudaEvent_t e) { cudaEventDestroy(e); }
void destroy_graph(cudaGraph_t g) { cudaGraphDestroy(g); }
void destroy_graph_exec(cudaGraphExec_t g) { cudaGraphExecDestroy(g); }

using TensorDesc = Handle<cudnnTensorDescriptor_t, destroy_tensor_desc>;
using FilterDesc = Handle<cudnnFilterDescriptor_t, destroy_filter_desc>;
using ConvDesc = Handle<cudnnConvolutionDescriptor_t, destroy_conv_desc>;
using CudnnHandle = Handle<cudnnHandle_t, destroy_cudnn>;
using Stream = Handle<cudaStream_t, destroy_stream>;
using Event = Handle<cudaEvent_t, destroy_event>;
using CudaGraph = Handle<cudaGraph_t, destroy_graph>;
using GraphExec = Handle<cudaGraphExec_t, destroy_graph_exec>;

TensorDesc make_tensor_desc() {
  cudnnTensorDescriptor_t d = nullptr;
  YOLOCU_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  return TensorDesc(d);
}
FilterDesc make_filter_desc() {
  cudnnFilterDescriptor_t d = nullptr;
  YOLOCU_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d));
  return FilterDesc(d);
}
ConvDesc make_conv_desc() {
  cudnnConvolutionDescriptor_t d = nullptr;
  YOLOCU_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
  return ConvDesc(d);
}
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
struct ConvInfo {
  int step = -1;
  int x = -1, y = -1, residual = -1;
  int k = 0, c = 0, r = 0, s = 0, group = 1;
  int pad_h = 0, pad_w = 0, str_h = 1, str_w = 1, dil_h = 1, dil_w = 1;
  bool silu = false;
  DeviceMem d_w, d_bias;
  FilterDesc wdesc;
  std::string name;
};

struct ConvBatch {
  TensorDesc x, y;
  ConvDesc conv;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t ws = 0;
};

struct BatchExec {
  std::vector<ConvBatch> convs;  // per ConvInfo
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

struct AlgoChoice {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnMathType_t math;
};

// Convolution algorithms chosen once per (device, shape, precision) for the whole process: every
// later engine of the same model (a detector's other execution contexts, a rebuilt detector)
// reuses the first engine's choice, so results never depend on which engine ran a batch and only
// the first build pays for the search.
struct AlgoCache {
  std::mutex mutex;
  std::map<std::string, AlgoChoice> choices;
};
AlgoCache& algo_cache() {
  static AlgoCache cache;
  return cache;
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
  size_t workspace_bytes = 0;
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
  void setup_conv_batch(ConvInfo& ci, ConvBatch& cb, int batch, bool timed, void* ws, size_t ws_size);
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
      ci.silu = st.silu;
      const Tensor& w = val(st.in[1]).value;
      YOLOCU_CHECK(w.rank() == 4 && w.dtype() == DType::kFloat32, kUnsupported, n.describe(),
                   ": only 2-D convolutions with float weights are supported, weights ", shape_str(w.shape()));
      ci.k = static_cast<int>(w.dim(0));
      ci.c = static_cast<int>(w.dim(1));
      ci.r = static_cast<int>(w.dim(2));
      ci.s = static_cast<int>(w.dim(3));
      ci.group = static_cast<int>(n.attr_int("group", 1));
      const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
      const auto str = n.attr_ints("strides", {1, 1});
      const auto dil = n.attr_ints("dilations", {1, 1});
      YOLOCU_CHECK(str.size() == 2 && dil.size() == 2 && pads.size() == 4, kUnsupported, n.describe(),
                   ": only 2-D convolutions are supported");
      ci.pad_h = static_cast<int>(pads[0]);
      ci.pad_w = static_cast<int>(pads[1]);
      ci.str_h = static_cast<int>(str[0]);
      ci.str_w = static_cast<int>(str[1]);
      ci.dil_h = static_cast<int>(dil[0]);
      ci.dil_w = static_cast<int>(dil[1]);
      YOLOCU_CHECK(val(ci.x).shape[1] == int64_t{ci.c} * ci.group, kInvalidArgument, n.describe(), ": input has ",
                   val(ci.x).shape[1], " channels, weights expect ", int64_t{ci.c} * ci.group);
      // Weights OIHW -> KRSC (cuDNN's NHWC filter layout) in the activation dtype.
      const float* src = w.data_as<float>();
      const size_t cnt = static_cast<size_t>(w.numel());
      std::vector<float> krsc(cnt);
      for (int k = 0; k < ci.k; ++k)
        for (int c = 0; c < ci.c; ++c)
          for (int r = 0; r < ci.r; ++r)
            for (int s = 0; s < ci.s; ++s)
              krsc[((static_cast<size_t>(k) * ci.r + r) * ci.s + s) * ci.c + c] =
                  src[((static_cast<size_t>(k) * ci.c + c) * ci.r + r) * ci.s + s];
      ci.d_w = device_alloc(cnt * es, "weights");
      if (half) {
        std::vector<uint16_t> h(cnt);
        for (size_t j = 0; j < cnt; ++j) h[j] = float_to_half(krsc[j]);
        YOLOCU_CUDA_CHECK(cudaMemcpy(ci.d_w.get(), h.data(), cnt * 2, cudaMemcpyHostToDevice));
      } else {
        YOLOCU_CUDA_CHECK(cudaMemcpy(ci.d_w.get(), krsc.data(), cnt * 4, cudaMemcpyHostToDevice));
      }
      stats.weight_bytes += cnt * es;
      if (st.in[2] >= 0) {
        const Tensor& b = val(st.in[2]).value;
        YOLOCU_CHECK(b.dtype() == DType::kFloat32 && b.numel() == ci.k, kInvalidArgument, n.describe(), ": bias has ",
                     b.numel(), " elements, expected ", ci.k);
        ci.d_bias = device_alloc(b.nbytes(), "bias");
        YOLOCU_CUDA_CHECK(cudaMemcpy(ci.d_bias.get(), b.data(), b.nbytes(), cudaMemcpyHostToDevice));
        stats.weight_bytes += b.nbytes();
      }
      ci.wdesc = make_filter_desc();
      YOLOCU_CUDNN_CHECK(cudnnSetFilter4dDescriptor(ci.wdesc.get(), half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT,
                                                    CUDNN_TENSOR_NHWC, ci.k, ci.c, ci.r, ci.s));
      const Shape& ys = val(ci.y).shape;
      stats.conv_flops_per_image += 2.0 * ci.k * ci.c * ci.r * ci.s * static_cast<double>(ys[2] * ys[3]) *
                                    static_cast<double>(ys[0]) / options.max_batch;
      a.conv = static_cast<int>(convs.size());
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
        a.tail_tables.push_back(std::move(m));
      }
      break;
    default: break;
  }
}

void CudaEngine::Impl::setup_conv_batch(ConvInfo& ci, ConvBatch& cb, int batch, bool timed, void* ws, size_t ws_size) {
  const cudnnDataType_t dt = half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
  const Shape xs = shape_at(ci.x, batch), ys = shape_at(ci.y, batch);
  cb.x = make_tensor_desc();
  cb.y = make_tensor_desc();
  cb.conv = make_conv_desc();
  YOLOCU_CUDNN_CHECK(cudnnSetTensor4dDescriptor(cb.x.get(), CUDNN_TENSOR_NHWC, dt, static_cast<int>(xs[0]),
                                                static_cast<int>(xs[1]), static_cast<int>(xs[2]), static_cast<int>(xs[3])));
  YOLOCU_CUDNN_CHECK(cudnnSetTensor4dDescriptor(cb.y.get(), CUDNN_TENSOR_NHWC, dt, static_cast<int>(ys[0]),
                                                static_cast<int>(ys[1]), static_cast<int>(ys[2]), static_cast<int>(ys[3])));
  YOLOCU_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(cb.conv.get(), ci.pad_h, ci.pad_w, ci.str_h, ci.str_w, ci.dil_h,
                                                     ci.dil_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  YOLOCU_CUDNN_CHECK(cudnnSetConvolutionGroupCount(cb.conv.get(), ci.group));
  const cudnnMathType_t want = half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  YOLOCU_CUDNN_CHECK(cudnnSetConvolutionMathType(cb.conv.get(), want));
  int on = 0, oc = 0, oh = 0, ow = 0;
  YOLOCU_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(cb.conv.get(), cb.x.get(), ci.wdesc.get(), &on, &oc, &oh, &ow));
  YOLOCU_CHECK(on == ys[0] && oc == ys[1] && oh == ys[2] && ow == ys[3], kInternal, "conv '", ci.name,
               "': cuDNN output ", on, "x", oc, "x", oh, "x", ow, " differs from the plan's ", shape_str(ys));

  char key[256];
  std::snprintf(key, sizeof key, "%d:%lldx%lldx%lldx%lld:%dx%dx%dx%d:g%d:p%d,%d:s%d,%d:d%d,%d:%s", batch,
                static_cast<long long>(xs[0]), static_cast<long long>(xs[1]), static_cast<long long>(xs[2]),
                static_cast<long long>(xs[3]), ci.k, ci.c, ci.r, ci.s, ci.group, ci.pad_h, ci.pad_w, ci.str_h, ci.str_w,
                ci.dil_h, ci.dil_w, timed ? "t" : "h");
  auto allowed = [&](cudnnConvolutionFwdAlgo_t algo) {
    if (algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT || algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING) return false;
    if (!half && (algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED))
      return false;  // FP32 parity with the CPU engine: direct / GEMM-style algorithms only
    return true;
  };
  // Tries an algorithm with the math type: true (and sets cb) if supported within the workspace.
  auto try_algo = [&](cudnnConvolutionFwdAlgo_t algo, cudnnMathType_t math) {
    if (!allowed(algo)) return false;
    if (!half && (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) return false;
    const cudnnMathType_t use = half ? math : CUDNN_FMA_MATH;
    if (cudnnSetConvolutionMathType(cb.conv.get(), use) != CUDNN_STATUS_SUCCESS) return false;
    size_t need = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(cudnn.get(), cb.x.get(), ci.wdesc.get(), cb.conv.get(), cb.y.get(), algo,
                                                &need) != CUDNN_STATUS_SUCCESS || need > ws_size)
      return false;
    cb.algo = algo;
    cb.ws = need;
    return true;
  };
  const std::string cache_key = std::to_string(options.device) + (half ? ":h:" : ":f:") + key;
  {
    std::lock_guard<std::mutex> lock(algo_cache().mutex);
    auto cached = algo_cache().choices.find(cache_key);
    if (cached != algo_cache().choices.end() && try_algo(cached->second.algo, cached->second.math)) return;
  }

  constexpr int kCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  cudnnConvolutionFwdAlgoPerf_t perf[kCount];
  int returned = 0;
  bool found = false;
  if (timed) {
    // A failing search is not fatal: the heuristic ranking below still gives a correct choice.
    found = cudnnFindConvolutionForwardAlgorithmEx(cudnn.get(), cb.x.get(), ptr(ci.x), ci.wdesc.get(), ci.d_w.get(),
                                                   cb.conv.get(), cb.y.get(), ptr(ci.y), kCount, &returned, perf, ws,
                                                   ws_size) == CUDNN_STATUS_SUCCESS;
    (void)cudaGetLastError();
    YOLOCU_CUDNN_CHECK(cudnnSetConvolutionMathType(cb.conv.get(), want));
  }
  if (!found) {
    YOLOCU_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(cudnn.get(), cb.x.get(), ci.wdesc.get(), cb.conv.get(),
                                                              cb.y.get(), kCount, &returned, perf));
  }
  // Results come fastest (or best-ranked) first; prefer deterministic ones (bit-identical runs).
  for (int pass = 0; pass < 2; ++pass)
    for (int j = 0; j < returned; ++j) {
      const auto& p = perf[j];
      if (p.status != CUDNN_STATUS_SUCCESS) continue;
      if (pass == 0 && p.determinism != CUDNN_DETERMINISTIC) continue;
      if (try_algo(p.algo, p.mathType)) {
        std::lock_guard<std::mutex> lock(algo_cache().mutex);
        algo_cache().choices.emplace(cache_key, AlgoChoice{p.algo, half ? p.mathType : CUDNN_FMA_MATH});
        return;
      }
    }
  // Last resort: the plain implicit GEMM needs no workspace.
  if (try_algo(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, want) ||
      try_algo(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, want))
    return;
  detail::fail(ErrorCode::kUnsupported, "conv '", ci.name, "': cuDNN offers no usable algorithm for input ",
               shape_str(xs), " (", half ? "fp16" : "fp32", ", workspace ", ws_size, " bytes)");
}

BatchExec& CudaEngine::Impl::batch_exec(int batch) {
  auto& slot = batches[static_cast<size_t>(batch)];
  if (!slot) {
    auto be = std::make_unique<BatchExec>();
    be->convs.resize(convs.size());
    for (size_t c = 0; c < convs.size(); ++c)
      setup_conv_batch(convs[c], be->convs[c], batch, false, workspace.get(), workspace_bytes);
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

  aux.resize(sp.steps.size());
  for (size_t i = 0; i < sp.steps.size(); ++i) setup_step(i);

  // Algorithms for max_batch by timing (cudnnFind) within workspace_limit; then the workspace is
  // sized to what the choices need (with headroom for the heuristic choices of other batch sizes).
  YOLOCU_CUDNN_CHECK(cudnnSetStream(cudnn.get(), stream.get()));
  batches.resize(static_cast<size_t>(options.max_batch) + 1);
  {
    size_t limit = options.workspace_limit;
    DeviceMem tmp;
    if (limit > 0) {
      try {
        tmp = device_alloc(limit, "cuDNN algorithm search");
      } catch (const Error&) {
        limit = 0;
      }
    }
    auto be = std::make_unique<BatchExec>();
    be->convs.resize(convs.size());
    size_t need = 0;
    for (size_t c = 0; c < convs.size(); ++c) {
      setup_conv_batch(convs[c], be->convs[c], options.max_batch, true, tmp.get(), limit);
      need = std::max(need, be->convs[c].ws);
    }
    YOLOCU_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
    tmp.reset();
    workspace_bytes = std::min(options.workspace_limit, std::max(need, size_t{16} << 20));
    workspace = device_alloc(workspace_bytes, "cuDNN workspace");
    batches[static_cast<size_t>(options.max_batch)] = std::move(be);
  }

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
      case GpuStepKind::kConv: kernels += (st.silu || st.residual >= 0 || st.in[2] >= 0) ? 2 : 1; break;
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
      const ConvBatch& cb = be.convs[static_cast<size_t>(a.conv)];
      const float one = 1.f, zero = 0.f;
      YOLOCU_CUDNN_CHECK(cudnnConvolutionForward(cudnn.get(), &one, cb.x.get(), ptr(ci.x), ci.wdesc.get(), ci.d_w.get(),
                                                 cb.conv.get(), cb.algo, workspace.get(), cb.ws, &zero, cb.y.get(),
                                                 ptr(ci.y)));
      if (ci.d_bias || ci.silu || ci.residual >= 0) {
        const Shape ys = shape_at(ci.y, batch);
        ck::bias_act_nhwc(ptr(ci.y), static_cast<const float*>(ci.d_bias.get()),
                          ci.residual >= 0 ? ptr(ci.residual) : nullptr, half, ys[0] * ys[2] * ys[3],
                          static_cast<int>(ys[1]), ci.silu, s);
      }
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

void CudaEngine::Impl::run(const void* d_input, int batch, cudaStream_t s) {
  BatchExec& be = batch_exec(batch);
  const int in_id = sp.plan.inputs[0];
  // The input conversion stays outside the graph: the graph then never depends on d_input.
  ck::nchw_to_nhwc(d_input, half, ptr(in_id), half, batch, in_c, in_h, in_w, s);
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
  for (size_t i = 0; i <= n; ++i) ev.push_back(make_event(cudaEventDefault));
  std::vector<double> total(n, 0.0);
  YOLOCU_CUDNN_CHECK(cudnnSetStream(im.cudnn.get(), s));
  for (int it = 0; it < iters; ++it) {
    ck::nchw_to_nhwc(im.staging.get(), im.half, im.ptr(im.sp.plan.inputs[0]), im.half, batch, im.in_c, im.in_h,
                     im.in_w, s);
    YOLOCU_CUDA_CHECK(cudaEventRecord(ev[0].get(), s));
    for (size_t i = 0; i < n; ++i) {
      im.exec_step(be, i, batch, s);
      YOLOCU_CUDA_CHECK(cudaEventRecord(ev[i + 1].get(), s));
    }
    YOLOCU_CUDA_CHECK(cudaEventSynchronize(ev[n].get()));
    for (size_t i = 0; i < n; ++i) {
      float ms = 0;
      YOLOCU_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i].get(), ev[i + 1].get()));
      total[i] += ms;
    }
  }
  std::vector<LayerTime> out;
  for (size_t i = 0; i < n; ++i) {
    const GpuStep& st = im.sp.steps[i];
    if (st.kind == GpuStepKind::kView) continue;
    out.push_back({st.label, engine::gpu_step_kind_name(st.kind), total[i] / iters});
  }
  return out;
}

}  // namespace yolocu
