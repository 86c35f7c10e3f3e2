// PyTorch operators over the yolocu_training kernels: torch.ops.yolocu.*
//
//   upsample_nearest2x(Tensor x) -> Tensor                    (autograd: C++ Function)
//   upsample_nearest2x_backward(Tensor grad_y) -> Tensor
//   ciou(Tensor[] pbox, Tensor[] tbox, float eps) -> Tensor[]   (autograd: C++ Function, all levels)
//   ciou_backward(Tensor[] grad, Tensor[] pbox, Tensor[] tbox, float eps) -> Tensor[]
//   ema_update_(Tensor(a!)[] ema, Tensor[] model, float d) -> ()
//   sgd_step_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] bufs, int[] group, float[] lr,
//             float[] momentum, float[] dampening, float[] weight_decay, int[] nesterov,
//             bool first_step) -> ()
// CPU kernels are the library's CPU references; CUDA kernels run on the current stream.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#ifdef YOLOCU_TRAIN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include "yolocu/error.hpp"
#include "yolocu/training/ciou.hpp"
#include "yolocu/training/multi_tensor.hpp"
#include "yolocu/training/upsample.hpp"

namespace yt = yolocu::training;

namespace {

yt::FloatType float_type_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return yt::FloatType::kFloat32;
    case at::kHalf: return yt::FloatType::kFloat16;
    case at::kBFloat16: return yt::FloatType::kBFloat16;
    case at::kDouble: return yt::FloatType::kFloat64;
    default: TORCH_CHECK(false, "yolocu: unsupported dtype ", t.scalar_type());
  }
  return yt::FloatType::kFloat32;
}

// yolocu::Error -> c10::Error with the same message.
template <typename F>
void guarded(F&& f) {
  try {
    f();
  } catch (const yolocu::Error& e) {
    TORCH_CHECK(false, "yolocu: ", e.what());
  }
}

#ifdef YOLOCU_TRAIN_WITH_CUDA
cudaStream_t current_stream() { return at::cuda::getCurrentCUDAStream().stream(); }
#endif

// ---- upsample --------------------------------------------------------------------------------------
// Picks the layout the kernel will see: channels_last if the tensor is dense in that format and
// PyTorch would suggest it, NCHW (after .contiguous()) otherwise. Output follows the same format.
std::pair<at::Tensor, at::MemoryFormat> dense_4d(const at::Tensor& t) {
  TORCH_CHECK(t.dim() == 4, "yolocu.upsample_nearest2x: expected a 4-D tensor, got ", t.dim(), "-D");
  const auto fmt = t.suggest_memory_format();
  if (fmt == at::MemoryFormat::ChannelsLast && t.is_contiguous(at::MemoryFormat::ChannelsLast))
    return {t, fmt};
  return {t.contiguous(), at::MemoryFormat::Contiguous};
}

at::Tensor upsample_impl(const at::Tensor& input, bool forward, bool cuda) {
  auto [x, fmt] = dense_4d(input);
  const int64_t n = x.size(0), c = x.size(1);
  const int64_t h = forward ? x.size(2) : x.size(2) / 2, w = forward ? x.size(3) : x.size(3) / 2;
  if (!forward)
    TORCH_CHECK(x.size(2) % 2 == 0 && x.size(3) % 2 == 0,
                "yolocu.upsample_nearest2x_backward: grad height and width must be even, got ", x.sizes());
  at::Tensor out = at::empty(forward ? std::vector<int64_t>{n, c, 2 * h, 2 * w} : std::vector<int64_t>{n, c, h, w},
                             x.options().memory_format(fmt));
  const yt::Upsample2xShape shape{n, c, h, w,
                                  fmt == at::MemoryFormat::ChannelsLast ? yt::Layout::kNHWC : yt::Layout::kNCHW};
  const yt::FloatType type = float_type_of(x);
  guarded([&] {
    if (cuda) {
#ifdef YOLOCU_TRAIN_WITH_CUDA
      const c10::cuda::CUDAGuard device(x.device());
      if (forward)
        yt::upsample2x_forward_cuda(type, x.data_ptr(), out.data_ptr(), shape, current_stream());
      else
        yt::upsample2x_backward_cuda(type, x.data_ptr(), out.data_ptr(), shape, current_stream());
#endif
    } else if (forward) {
      yt::upsample2x_forward_cpu(type, x.data_ptr(), out.data_ptr(), shape);
    } else {
      yt::upsample2x_backward_cpu(type, x.data_ptr(), out.data_ptr(), shape);
    }
  });
  return out;
}

at::Tensor upsample_fwd_cpu(const at::Tensor& x) { return upsample_impl(x, true, false); }
at::Tensor upsample_bwd_cpu(const at::Tensor& g) { return upsample_impl(g, false, false); }

// ---- CIoU --------------------------------------------------------------------------------------------
void check_ciou_lists(at::TensorList pbox, at::TensorList tbox, const char* what) {
  TORCH_CHECK(pbox.size() == tbox.size(), what, ": ", pbox.size(), " pbox tensors but ", tbox.size(), " tbox tensors");
  TORCH_CHECK(pbox.size() <= static_cast<size_t>(yt::kCiouMaxLevels), what, ": at most ", yt::kCiouMaxLevels,
              " levels");
  for (size_t l = 0; l < pbox.size(); ++l) {
    TORCH_CHECK(pbox[l].dim() == 2 && pbox[l].size(1) == 4 && tbox[l].sizes() == pbox[l].sizes(), what, ": level ",
                l, " needs (n, 4) pbox and tbox, got ", pbox[l].sizes(), " and ", tbox[l].sizes());
    TORCH_CHECK(pbox[l].scalar_type() == pbox[0].scalar_type() && tbox[l].scalar_type() == pbox[0].scalar_type(),
                what, ": all boxes must share one dtype");
    TORCH_CHECK(pbox[l].device() == pbox[0].device() && tbox[l].device() == pbox[0].device(), what,
                ": all boxes must be on one device");
  }
}

std::vector<at::Tensor> ciou_impl(const std::vector<at::Tensor>* grad, at::TensorList pbox_in, at::TensorList tbox_in,
                                  double eps, bool cuda) {
  const bool forward = grad == nullptr;
  check_ciou_lists(pbox_in, tbox_in, forward ? "yolocu.ciou" : "yolocu.ciou_backward");
  const size_t L = pbox_in.size();
  std::vector<at::Tensor> pbox, tbox, g, out;
  std::vector<yt::CiouLevel> levels(L);
  std::vector<void*> outs(L);
  std::vector<const void*> gs(L);
  for (size_t l = 0; l < L; ++l) {
    pbox.push_back(pbox_in[l].contiguous());
    tbox.push_back(tbox_in[l].contiguous());
    const int64_t n = pbox[l].size(0);
    levels[l] = {pbox[l].data_ptr(), tbox[l].data_ptr(), n};
    if (forward) {
      out.push_back(at::empty({n}, pbox[l].options()));
    } else {
      TORCH_CHECK((*grad)[l].numel() == n, "yolocu.ciou_backward: grad ", l, " has ", (*grad)[l].numel(),
                  " elements for ", n, " boxes");
      g.push_back((*grad)[l].to(pbox[l].scalar_type()).contiguous());
      gs[l] = g[l].data_ptr();
      out.push_back(at::empty({n, 4}, pbox[l].options()));
    }
    outs[l] = out[l].data_ptr();
  }
  if (L == 0) return out;
  const yt::FloatType type = float_type_of(pbox[0]);
  guarded([&] {
    if (cuda) {
#ifdef YOLOCU_TRAIN_WITH_CUDA
      const c10::cuda::CUDAGuard device(pbox[0].device());
      if (forward)
        yt::ciou_forward_cuda(type, levels.data(), static_cast<int>(L), outs.data(), eps, current_stream());
      else
        yt::ciou_backward_cuda(type, levels.data(), static_cast<int>(L), gs.data(), outs.data(), eps,
                               current_stream());
#endif
    } else if (forward) {
      yt::ciou_forward_cpu(type, levels.data(), static_cast<int>(L), outs.data(), eps);
    } else {
      yt::ciou_backward_cpu(type, levels.data(), static_cast<int>(L), gs.data(), outs.data(), eps);
    }
  });
  return out;
}

std::vector<at::Tensor> ciou_fwd_cpu(at::TensorList p, at::TensorList t, double eps) {
  return ciou_impl(nullptr, p, t, eps, false);
}
std::vector<at::Tensor> ciou_bwd_cpu(at::TensorList g, at::TensorList p, at::TensorList t, double eps) {
  const std::vector<at::Tensor> gv(g.begin(), g.end());
  return ciou_impl(&gv, p, t, eps, false);
}

// ---- EMA / SGD ----------------------------------------------------------------------------------------
void check_float_lists(const std::vector<at::TensorList>& lists, const char* what) {
  for (const auto& list : lists) {
    TORCH_CHECK(list.size() == lists[0].size(), what, ": tensor lists differ in length");
    for (size_t i = 0; i < list.size(); ++i) {
      TORCH_CHECK(list[i].scalar_type() == at::kFloat, what, ": tensors must be float32, got ", list[i].scalar_type());
      TORCH_CHECK(list[i].is_contiguous() || list[i].is_contiguous(at::MemoryFormat::ChannelsLast), what,
                  ": tensors must be dense (contiguous or channels_last)");
      TORCH_CHECK(list[i].numel() == lists[0][i].numel(), what, ": tensor ", i, " differs in size between lists");
      TORCH_CHECK(list[i].device() == lists[0][0].device(), what, ": all tensors must be on one device");
    }
  }
}

std::vector<yt::SgdGroup> sgd_groups(at::ArrayRef<double> lr, at::ArrayRef<double> momentum,
                                     at::ArrayRef<double> dampening, at::ArrayRef<double> wd,
                                     at::IntArrayRef nesterov) {
  const size_t G = lr.size();
  TORCH_CHECK(G >= 1 && G <= static_cast<size_t>(yt::kMaxSgdGroups) && momentum.size() == G && dampening.size() == G &&
                  wd.size() == G && nesterov.size() == G,
              "yolocu.sgd_step_: 1..", yt::kMaxSgdGroups, " groups with one value of each hyper-parameter");
  std::vector<yt::SgdGroup> groups(G);
  for (size_t i = 0; i < G; ++i) groups[i] = {lr[i], momentum[i], dampening[i], wd[i], nesterov[i] != 0};
  return groups;
}

void ema_cpu(at::TensorList ema, at::TensorList model, double d) {
  check_float_lists({ema, model}, "yolocu.ema_update_");
  std::vector<float*> e;
  std::vector<const float*> m;
  std::vector<int64_t> n;
  for (size_t i = 0; i < ema.size(); ++i) {
    e.push_back(ema[i].data_ptr<float>());
    m.push_back(model[i].data_ptr<float>());
    n.push_back(ema[i].numel());
  }
  guarded([&] { yt::ema_update_cpu(e.data(), m.data(), n.data(), static_cast<int>(n.size()), d); });
}

void sgd_cpu(at::TensorList params, at::TensorList grads, at::TensorList bufs, at::IntArrayRef group,
             at::ArrayRef<double> lr, at::ArrayRef<double> momentum, at::ArrayRef<double> dampening,
             at::ArrayRef<double> wd, at::IntArrayRef nesterov, bool first_step) {
  check_float_lists({params, grads, bufs}, "yolocu.sgd_step_");
  TORCH_CHECK(group.size() == params.size(), "yolocu.sgd_step_: one group index per tensor");
  const auto groups = sgd_groups(lr, momentum, dampening, wd, nesterov);
  std::vector<float*> p, b;
  std::vector<const float*> g;
  std::vector<int64_t> n;
  std::vector<int> gi;
  for (size_t i = 0; i < params.size(); ++i) {
    p.push_back(params[i].data_ptr<float>());
    g.push_back(grads[i].data_ptr<float>());
    b.push_back(bufs[i].data_ptr<float>());
    n.push_back(params[i].numel());
    gi.push_back(static_cast<int>(group[i]));
  }
  guarded([&] {
    yt::sgd_step_cpu(p.data(), g.data(), b.data(), n.data(), gi.data(), static_cast<int>(n.size()), groups.data(),
                     static_cast<int>(groups.size()), first_step);
  });
}

#ifdef YOLOCU_TRAIN_WITH_CUDA
at::Tensor upsample_fwd_cuda(const at::Tensor& x) { return upsample_impl(x, true, true); }
at::Tensor upsample_bwd_cuda(const at::Tensor& g) { return upsample_impl(g, false, true); }
std::vector<at::Tensor> ciou_fwd_cuda(at::TensorList p, at::TensorList t, double eps) {
  return ciou_impl(nullptr, p, t, eps, true);
}
std::vector<at::Tensor> ciou_bwd_cuda(at::TensorList g, at::TensorList p, at::TensorList t, double eps) {
  const std::vector<at::Tensor> gv(g.begin(), g.end());
  return ciou_impl(&gv, p, t, eps, true);
}

// Device tables cached per (device, list count, sizes, groups): a training loop hits the same entry
// every step, and the table re-uploads tensor addresses only if they moved.
yt::MultiTensorTable& cached_table(int device, int num_lists, const std::vector<int64_t>& numel,
                                   const std::vector<int>& group) {
  using Key = std::tuple<int, int, std::vector<int64_t>, std::vector<int>>;
  static std::map<Key, std::unique_ptr<yt::MultiTensorTable>> cache;
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  Key key{device, num_lists, numel, group};
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() > 16) cache.clear();  // bounded: a training run uses two or three entries
    it = cache.emplace(std::move(key), std::make_unique<yt::MultiTensorTable>(num_lists, numel, group)).first;
  }
  return *it->second;
}

void ema_cuda(at::TensorList ema, at::TensorList model, double d) {
  check_float_lists({ema, model}, "yolocu.ema_update_");
  if (ema.empty()) return;
  const c10::cuda::CUDAGuard device(ema[0].device());
  std::vector<int64_t> n;
  std::vector<void*> ptrs;
  for (const auto& t : ema) n.push_back(t.numel()), ptrs.push_back(t.data_ptr());
  for (const auto& t : model) ptrs.push_back(t.data_ptr());
  guarded([&] {
    auto& table = cached_table(ema[0].get_device(), 2, n, {});
    table.set_pointers(ptrs.data(), current_stream());
    yt::ema_update_cuda(table, d, current_stream());
  });
}

void sgd_cuda(at::TensorList params, at::TensorList grads, at::TensorList bufs, at::IntArrayRef group,
              at::ArrayRef<double> lr, at::ArrayRef<double> momentum, at::ArrayRef<double> dampening,
              at::ArrayRef<double> wd, at::IntArrayRef nesterov, bool first_step) {
  check_float_lists({params, grads, bufs}, "yolocu.sgd_step_");
  TORCH_CHECK(group.size() == params.size(), "yolocu.sgd_step_: one group index per tensor");
  const auto groups = sgd_groups(lr, momentum, dampening, wd, nesterov);
  if (params.empty()) return;
  const c10::cuda::CUDAGuard device(params[0].device());
  std::vector<int64_t> n;
  std::vector<int> gi(group.begin(), group.end());
  std::vector<void*> ptrs;
  for (const auto& t : params) n.push_back(t.numel()), ptrs.push_back(t.data_ptr());
  for (const auto& t : grads) ptrs.push_back(t.data_ptr());
  for (const auto& t : bufs) ptrs.push_back(t.data_ptr());
  guarded([&] {
    auto& table = cached_table(params[0].get_device(), 3, n, gi);
    table.set_pointers(ptrs.data(), current_stream());
    yt::sgd_step_cuda(table, groups.data(), static_cast<int>(groups.size()), first_step, current_stream());
  });
}
#endif

// ---- autograd ------------------------------------------------------------------------------------------
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class Upsample2xFunction : public torch::autograd::Function<Upsample2xFunction> {
 public:
  static at::Tensor forward(AutogradContext* /*ctx*/, const at::Tensor& x) {
    at::AutoDispatchBelowADInplaceOrView guard;
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("yolocu::upsample_nearest2x", "")
                         .typed<at::Tensor(const at::Tensor&)>();
    return op.call(x);
  }
  static variable_list backward(AutogradContext* /*ctx*/, variable_list grads) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("yolocu::upsample_nearest2x_backward", "")
                         .typed<at::Tensor(const at::Tensor&)>();
    return {op.call(grads[0])};
  }
};

at::Tensor upsample_autograd(const at::Tensor& x) { return Upsample2xFunction::apply(x); }

class CiouFunction : public torch::autograd::Function<CiouFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, at::TensorList pbox, at::TensorList tbox, double eps) {
    at::AutoDispatchBelowADInplaceOrView guard;
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("yolocu::ciou", "")
                         .typed<std::vector<at::Tensor>(at::TensorList, at::TensorList, double)>();
    std::vector<at::Tensor> saved(pbox.begin(), pbox.end());
    saved.insert(saved.end(), tbox.begin(), tbox.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["levels"] = static_cast<int64_t>(pbox.size());
    return op.call(pbox, tbox, eps);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("yolocu::ciou_backward", "")
                         .typed<std::vector<at::Tensor>(at::TensorList, at::TensorList, at::TensorList, double)>();
    const auto saved = ctx->get_saved_variables();
    const int64_t L = ctx->saved_data["levels"].toInt();
    const double eps = ctx->saved_data["eps"].toDouble();
    std::vector<at::Tensor> p(saved.begin(), saved.begin() + L), t(saved.begin() + L, saved.end()), g;
    for (int64_t l = 0; l < L; ++l)
      g.push_back(grads[l].defined() ? grads[l] : at::zeros({p[l].size(0)}, p[l].options()));
    variable_list out = op.call(g, p, t, eps);
    out.resize(2 * L + 1);  // no gradient for tbox and eps
    return out;
  }
};

std::vector<at::Tensor> ciou_autograd(at::TensorList pbox, at::TensorList tbox, double eps) {
  return CiouFunction::apply(pbox, tbox, eps);
}

}  // namespace

TORCH_LIBRARY(yolocu, m) {
  m.def("upsample_nearest2x(Tensor x) -> Tensor");
  m.def("upsample_nearest2x_backward(Tensor grad_y) -> Tensor");
  m.def("ciou(Tensor[] pbox, Tensor[] tbox, float eps=1e-07) -> Tensor[]");
  m.def("ciou_backward(Tensor[] grad, Tensor[] pbox, Tensor[] tbox, float eps) -> Tensor[]");
  m.def("ema_update_(Tensor(a!)[] ema, Tensor[] model, float d) -> ()");
  m.def(
      "sgd_step_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] bufs, int[] group, float[] lr, float[] momentum, "
      "float[] dampening, float[] weight_decay, int[] nesterov, bool first_step) -> ()");
}

TORCH_LIBRARY_IMPL(yolocu, CPU, m) {
  m.impl("upsample_nearest2x", &upsample_fwd_cpu);
  m.impl("upsample_nearest2x_backward", &upsample_bwd_cpu);
  m.impl("ciou", &ciou_fwd_cpu);
  m.impl("ciou_backward", &ciou_bwd_cpu);
  m.impl("ema_update_", &ema_cpu);
  m.impl("sgd_step_", &sgd_cpu);
}

#ifdef YOLOCU_TRAIN_WITH_CUDA
TORCH_LIBRARY_IMPL(yolocu, CUDA, m) {
  m.impl("upsample_nearest2x", &upsample_fwd_cuda);
  m.impl("upsample_nearest2x_backward", &upsample_bwd_cuda);
  m.impl("ciou", &ciou_fwd_cuda);
  m.impl("ciou_backward", &ciou_bwd_cuda);
  m.impl("ema_update_", &ema_cuda);
  m.impl("sgd_step_", &sgd_cuda);
}
#endif

TORCH_LIBRARY_IMPL(yolocu, Autograd, m) {
  m.impl("upsample_nearest2x", &upsample_autograd);
  m.impl("ciou", &ciou_autograd);
}
