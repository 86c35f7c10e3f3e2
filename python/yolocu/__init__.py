"""yolocu: YOLOv5 detection in C++17/CUDA with the same boxes as ultralytics/yolov5.

    import cv2, yolocu
    det = yolocu.Detector("yolov5n.onnx", device="auto", conf=0.25, iou=0.45)
    res = det(cv2.imread("bus.jpg"), conf=0.5)  # or a path, folder, glob, list, tensor, video (stream=True)
    print(res.boxes.xyxy, res.boxes.conf, res.boxes.cls, res.summary())
    cv2.imwrite("out.jpg", res.plot())
    metrics = yolocu.eval("yolov5n.onnx", "coco128/images/train2017", "coco128/labels/train2017")

Serving through NVIDIA Triton: `yolocu serve --model m.onnx` (pip install ".[serve]"; docs/serving.md).
"""
import os as _os
import sys as _sys

# The extension is imported RTLD_GLOBAL: cuDNN 9 looks up CUDA runtime entry points by name in the
# process's global scope, and with Python's default (RTLD_LOCAL) the first GPU Detector crashed
# inside cudnnCreate (promoting libcudart alone after the import did not help).
# A CUDA build first loads the CUDA libraries it links from NVIDIA's wheels wherever pip put them
# (_cuda_libs.py); what no wheel has is left to the system loader.
from . import _cuda_libs

_missing = _cuda_libs.preload()
_flags = _sys.getdlopenflags()
_sys.setdlopenflags(_flags | _os.RTLD_GLOBAL)
try:
    from . import _yolocu
except ImportError as _e:
    if _missing:
        raise ImportError(_cuda_libs.missing_message(_missing)) from _e
    raise
finally:
    _sys.setdlopenflags(_flags)
from .detector import Detector, decode, eval, list_images
from .results import Boxes, Results
from .tracker import Tracker

__version__ = "0.1.0"
with_cuda: bool = bool(_yolocu.with_cuda)


def cuda_available() -> bool:
    """True when this build has CUDA and a GPU is usable."""
    return bool(_yolocu.cuda_available())


__all__ = ["Detector", "Results", "Boxes", "Tracker", "eval", "decode", "list_images", "cuda_available", "with_cuda",
           "__version__"]
