// yolocu/training/ciou.hpp - fused Complete-IoU of the YOLOv5 box loss, forward and backward, for
// up to kCiouMaxLevels detection levels in one call (one kernel launch each way on the GPU).
//
// Boxes are (n, 4) dense arrays of (x, y, w, h) centre/size boxes, in any one unit (YOLOv5 uses
// grid cells). For each pair i: ciou[i] = CIoU(pbox[i], tbox[i]) with the exact arithmetic of
// ultralytics' bbox_iou(xywh=True, CIoU=True, eps): same operation order, no eps inside atan,
//   alpha = v / (v - iou + (1 + eps)) treated as a constant (no gradient), as under torch.no_grad.
// Backward returns d(sum_i g[i] * ciou[i]) / d pbox (tbox gets no gradient), with PyTorch
// autograd's tie rules: min/max of equal values send half the gradient to each side, clamp(0)
// passes the gradient at exactly 0.
// Types: kFloat32 and kFloat64 (under AMP YOLOv5's pbox/tbox are float32).
#pragma once

#include <cstdint>

#include "yolocu/training/common.hpp"

namespace yolocu::training {

constexpr int kCiouMaxLevels = 8;

// One level: n box pairs. Pointers are host pointers for *_cpu and device pointers for *_cuda.
struct CiouLevel {
  const void* pbox = nullptr;  // (n, 4) predictions
  const void* tbox = nullptr;  // (n, 4) targets
  int64_t n = 0;
};

// ciou[l] points to n_l outputs of level l.
void ciou_forward_cpu(FloatType type, const CiouLevel* levels, int num_levels, void* const* ciou,
                      double eps);
// grad_ciou[l]: n_l upstream gradients; grad_pbox[l]: (n_l, 4) outputs (overwritten).
void ciou_backward_cpu(FloatType type, const CiouLevel* levels, int num_levels,
                       const void* const* grad_ciou, void* const* grad_pbox, double eps);

// One launch for all levels; the pointer arrays themselves are host arrays (passed by value to
// the kernel). Enqueued on `stream`, no synchronisation.
void ciou_forward_cuda(FloatType type, const CiouLevel* levels, int num_levels, void* const* d_ciou,
                       double eps, cudaStream_t stream);
void ciou_backward_cuda(FloatType type, const CiouLevel* levels, int num_levels,
                        const void* const* d_grad_ciou, void* const* d_grad_pbox, double eps,
                        cudaStream_t stream);

}  // namespace yolocu::training
