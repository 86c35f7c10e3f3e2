"""yolocu: YOLOv5 detection in C++17/CUDA with the same boxes as ultralytics/yolov5."""
from .detector import Detector as Detector, decode as decode, eval as eval
from .results import Boxes as Boxes, Results as Results
from .detector import list_images as list_images
from .tracker import Tracker as Tracker

__version__: str
with_cuda: bool

def cuda_available() -> bool: ...
