// GPU executor: runs the steps planned by gpu_steps.cpp as the step objects of steps/, each
// convolution through the tactic the tuner chose for it and the batch size (tactics/), everything
// else through the engine's kernels (cuda_kernels.hpp); all activations in one liveness-planned
// device arena, one CUDA graph per batch size. This file: the public API; the rest in
// engine_{build,exec,stem}.cpp (engine_impl.hpp).
#include "engine/cuda/engine_impl.hpp"
#include "engine/cuda/tactics/batch_sizes.hpp"

namespace yolocu {

using cuda_engine_internal::BatchExec;
using cuda_engine_internal::DeviceGuard;
using cuda_engine_internal::Event;
using cuda_engine_internal::make_event;

CudaEngine::CudaEngine(std::shared_ptr<const Model> model, const CudaEngineOptions& options)
    : impl_(std::make_unique<Impl>()) {
  YOLOCU_CHECK(model, kInvalidArgument, "CudaEngine: null model");
  YOLOCU_CHECK(options.max_batch >= 1 && options.max_batch <= 4096, kInvalidArgument,
               "CudaEngine: max_batch must be in [1, 4096], got ", options.max_batch);
  YOLOCU_CHECK(options.height >= 0 && options.width >= 0 && options.height <= 16384 && options.width <= 16384,
               kInvalidArgument, "CudaEngine: height/width must be in [0, 16384], got ", options.height, "x",
               options.width);
  YOLOCU_CHECK(options.precision == Precision::kFloat32 || options.precision == Precision::kFloat16 ||
                   options.precision == Precision::kInt8,
               kInvalidArgument, "CudaEngine: invalid precision");
  YOLOCU_CHECK(options.precision != Precision::kInt8 || options.int8_calibration, kInvalidArgument,
               "CudaEngine: precision kInt8 needs int8_calibration (yolocu calibrate makes one)");
  YOLOCU_CHECK(options.graph_segments >= 1 && options.graph_segments <= 64, kInvalidArgument,
               "CudaEngine: graph_segments must be in [1, 64], got ", options.graph_segments);
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) (void)cudaGetLastError();
  YOLOCU_CHECK(e == cudaSuccess && count > 0, kCuda, "CudaEngine: no usable CUDA device (",
               e == cudaSuccess ? "none found" : cudaGetErrorString(e), ")");
  YOLOCU_CHECK(options.device >= 0 && options.device < count, kInvalidArgument, "CudaEngine: device ", options.device,
               " does not exist (", count, " device(s))");
  impl_->model = std::move(model);
  impl_->options = options;
  impl_->budget.set_limit(options.max_device_memory);
  impl_->half = options.precision != Precision::kFloat32;
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

void CudaEngine::prepare(const std::vector<int>& batches) {
  for (int b : batches)
    YOLOCU_CHECK(b >= 1 && b <= impl_->options.max_batch, kInvalidArgument, "CudaEngine::prepare: batch ", b,
                 " outside [1, max_batch = ", impl_->options.max_batch, "]");
  std::vector<int> ready;
  for (size_t b = 0; b < impl_->batches.size(); ++b)
    if (impl_->batches[b]) ready.push_back(static_cast<int>(b));
  DeviceGuard guard(impl_->options.device);
  impl_->prepare_batches(engine::sizes_to_prepare(batches, impl_->anchors, ready));
}

int CudaEngine::run_batch(int batch) const { return engine::run_batch(batch, impl_->anchors); }

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

namespace {

using cuda_engine_internal::Engine;

// Every step run eagerly `iters` times with events around it: the mean ms of the input conversion
// ([0]) and of each step ([i + 1]).
std::vector<double> time_steps(Engine& im, BatchExec& be, int batch, int iters) {
  cudaStream_t s = im.stream.get();
  const size_t n = im.steps.size();
  std::vector<Event> ev;
  for (size_t i = 0; i <= n + 1; ++i) ev.push_back(make_event(cudaEventDefault));
  std::vector<double> total(n + 1, 0.0);
  YOLOCU_CUDNN_CHECK(cudnnSetStream(im.cudnn.get(), s));
  for (int it = 0; it < iters; ++it) {
    YOLOCU_CUDA_CHECK(cudaEventRecord(ev[0].get(), s));
    im.convert_input(be, im.staging.get(), batch, s);
    YOLOCU_CUDA_CHECK(cudaEventRecord(ev[1].get(), s));
    const cuda_engine_internal::LaunchContext ctx = im.launch_context(be, batch);
    for (size_t i = 0; i < n; ++i) {
      im.steps[i]->launch(ctx, s);
      YOLOCU_CUDA_CHECK(cudaEventRecord(ev[i + 2].get(), s));
    }
    YOLOCU_CUDA_CHECK(cudaEventSynchronize(ev[n + 1].get()));
    for (size_t i = 0; i <= n; ++i) {
      float ms = 0;
      YOLOCU_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[i].get(), ev[i + 1].get()));
      total[i] += ms;
    }
  }
  for (double& t : total) t /= iters;
  return total;
}

// The input conversion's row (input_ms: its time).
LayerTime input_row(const Engine& im, const BatchExec& be, int batch, double input_ms) {
  const double es = static_cast<double>(im.es);
  const double px = static_cast<double>(batch) * im.in_c * im.in_h * im.in_w;
  LayerTime in;
  in.kind = "Input";
  if (be.direct_stem) {
    // The direct stem kernel ran in the input's place: its time and bytes go to the stem's row.
    in.name = "input (read by the direct stem)";
    return in;
  }
  in.name = im.stem_conv >= 0 ? "input -> space-to-depth NHWC" : "input -> NHWC";
  in.ms = input_ms;
  in.bytes = px * es + (im.stem_conv >= 0 ? px / im.in_c / 4 * cuda_engine_internal::kStemChannels * es : px * es);
  return in;
}

// A Conv step's tactic, flops, bytes and the ONNX node's shape (input_ms: the input conversion's
// time, which is the direct stem's when it runs).
void describe_conv(const Engine& im, const BatchExec& be, const cuda_engine_internal::Step& step, int batch,
                   double input_ms, LayerTime& l) {
  const int conv = step.conv_layer();
  const cuda_engine_internal::ConvInfo& ci = im.convs[static_cast<size_t>(conv)];
  const engine::ConvProblem p = ci.problem(batch);
  l.tactic = be.tactics[static_cast<size_t>(conv)]->name();
  l.flops = p.flops();
  l.bytes = p.min_bytes();
  if (conv == im.direct_conv && be.direct_stem) {
    // One pass: the NCHW input read, the output written (the flops are the ONNX layer's).
    const double es = static_cast<double>(im.es);
    const double px = static_cast<double>(batch) * im.in_c * im.in_h * im.in_w;
    const engine::StemConvArgs& d = im.direct_args;
    l.tactic = "own direct stem (reads the NCHW input)";
    l.ms = input_ms;
    l.flops = 2.0 * batch * d.p * d.q * d.k * d.c * d.r * d.s;
    l.bytes = px * es + static_cast<double>(batch) * d.p * d.q * d.k * es;
  } else if (ci.s2d) {
    l.tactic += " (space-to-depth stem)";
  }
  // The ONNX node's own shape (for the stem: the 6x6 stride-2 convolution on 3 channels).
  const engine::PlanNode& pn = im.sp.plan.nodes[static_cast<size_t>(step.step().node)];
  const Shape& xs = im.val(pn.in[0]).shape;
  const Shape& ws = im.val(pn.in[1]).shape;
  const auto strides = pn.node.attr_ints("strides", {1, 1});
  if (xs.size() == 4 && ws.size() == 4) {
    const std::string k = std::to_string(ws[2]) + "x" + std::to_string(ws[3]);
    const int64_t group = pn.node.attr_int("group", 1);
    l.shape = std::to_string(xs[1]) + "->" + std::to_string(ws[0]) + " " + k + " s" +
              std::to_string(strides.empty() ? 1 : strides[0]) + " " + std::to_string(xs[2]) + "x" + std::to_string(xs[3]) +
              (group > 1 ? " g" + std::to_string(group) : "");
  }
}

// Bytes a step other than a Conv moves at `batch`.
double moved_bytes(const Engine& im, const cuda_engine_internal::Step& step, int batch) {
  // Bytes of a value as this step moves it: a copy-free Concat's input (its own channel slice,
  // not the whole pitched buffer); the Concat itself reads and writes only the inputs it copies.
  const auto moved = [&](int id) {
    const bool slice = im.sp.channel_offset[static_cast<size_t>(id)] >= 0;
    const double b = slice ? static_cast<double>(shape_numel(im.val(id).shape)) * static_cast<double>(im.es)
                           : static_cast<double>(engine::value_bytes(im.sp, id, im.es));
    return b * batch / im.options.max_batch;
  };
  double bytes = 0;
  if (step.kind() == engine::GpuStepKind::kConcatNhwc) {
    for (int id : step.reads())
      if (im.sp.channel_offset[static_cast<size_t>(id)] < 0) bytes += 2 * moved(id);
  } else {
    for (int id : step.reads())
      if (id >= 0 && !im.val(id).constant) bytes += moved(id);
    for (int id : step.writes())
      if (id >= 0) bytes += moved(id);
  }
  return bytes;
}

}  // namespace

std::vector<LayerTime> CudaEngine::profile(int batch, int iters) {
  YOLOCU_CHECK(batch >= 1 && batch <= impl_->options.max_batch, kInvalidArgument, "CudaEngine::profile: batch ", batch,
               " outside [1, ", impl_->options.max_batch, "]");
  YOLOCU_CHECK(iters >= 1, kInvalidArgument, "CudaEngine::profile: iters must be >= 1");
  DeviceGuard guard(impl_->options.device);
  Impl& im = *impl_;
  BatchExec& be = im.batch_exec(batch);
  const std::vector<double> ms = time_steps(im, be, batch, iters);  // [0]: input conversion, [i + 1]: step i
  // The graph's longest chain at this batch size (as captured: the steps' accesses with their
  // workspaces); one chain without graph_branches.
  std::vector<bool> on_chain(im.steps.size(), !im.options.graph_branches);
  if (im.options.graph_branches) {
    const std::vector<engine::StepAccess> acc = im.step_accesses(be, batch);
    for (int i : engine::longest_chain(engine::step_dependencies(acc), acc)) on_chain[static_cast<size_t>(i)] = true;
  }
  std::vector<LayerTime> out;
  out.push_back(input_row(im, be, batch, ms[0]));
  out.back().on_chain = true;  // before every step
  for (size_t i = 0; i < im.steps.size(); ++i) {
    const cuda_engine_internal::Step& step = *im.steps[i];
    if (step.kind() == engine::GpuStepKind::kView) continue;
    LayerTime l;
    l.name = step.name();
    l.kind = engine::gpu_step_kind_name(step.kind());
    l.ms = ms[i + 1];
    l.on_chain = on_chain[i];
    if (step.conv_layer() >= 0)
      describe_conv(im, be, step, batch, ms[0], l);
    else
      l.bytes = moved_bytes(im, step, batch);
    if (l.tactic.empty()) l.tactic = step.kernel_at(batch);
    out.push_back(l);
  }
  return out;
}

}  // namespace yolocu
