"""yolocu_train: fused CUDA kernels for PyTorch YOLOv5 training.

    import yolocu_train as yt
    y = yt.upsample_nearest2x(x)                 # == F.interpolate(x, scale_factor=2, mode="nearest")
    ious = yt.ciou([pbox0, pbox1, pbox2], [tbox0, tbox1, tbox2])   # one launch for all levels
    yt.ema_update_(ema_tensors, model_tensors, d)                    # one launch per step
    opt = yt.FusedSGD(params, lr=0.01, momentum=0.937, nesterov=True)

    yt.yolov5.enable()    # switch an ultralytics/yolov5 (v7.0) training run onto these kernels

The operators live in torch.ops.yolocu (registered by a C++ extension that is compiled on first
import against the installed torch; see build.py). Autograd for upsample and CIoU is C++.
"""
from . import build as _build

LIBRARY_PATH, HAVE_CUDA_KERNELS = _build.load()

from .functional import ciou, ema_update_, sgd_step_, upsample_nearest2x  # noqa: E402
from .modules import FusedModelEMA, FusedSGD, Upsample2x  # noqa: E402

__all__ = ["LIBRARY_PATH", "HAVE_CUDA_KERNELS", "upsample_nearest2x", "ciou", "ema_update_", "sgd_step_",
           "Upsample2x", "FusedModelEMA", "FusedSGD"]
