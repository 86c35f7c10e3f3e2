"""Thin Python wrappers over torch.ops.yolocu (no per-call Python work beyond argument passing)."""
import torch

_ops = torch.ops.yolocu


def upsample_nearest2x(x):
    """Nearest 2x upsample of a 4-D NCHW or channels_last tensor (fp32/fp16/bf16/fp64), with autograd."""
    return _ops.upsample_nearest2x(x)


def ciou(pboxes, tboxes, eps=1e-7):
    """CIoU of (n_i, 4) xywh box pairs for every level i, as ultralytics' bbox_iou(xywh=True, CIoU=True).

    Returns a list of (n_i,) tensors. Gradients flow to pboxes only (alpha is a constant, as in
    ultralytics). float32 or float64; all tensors on one device.
    """
    return _ops.ciou(list(pboxes), list(tboxes), float(eps))


def ema_update_(ema, model, d):
    """ema[i] <- ema[i] * d + (1 - d) * model[i] for float32 tensor lists (one launch on CUDA)."""
    _ops.ema_update_(ema, model, float(d))


def sgd_step_(params, grads, bufs, group, lr, momentum, dampening, weight_decay, nesterov, first_step):
    """One fused SGD step over all tensors; per-group hyper-parameters, group[i] per tensor."""
    _ops.sgd_step_(params, grads, bufs, group, lr, momentum, dampening, weight_decay,
                   [int(bool(n)) for n in nesterov], bool(first_step))
