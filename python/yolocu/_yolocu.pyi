"""Type stubs of yolocu's C++ extension (python/src/yolocu_ext.cpp). Use the `yolocu` package."""
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import numpy.typing as npt

with_cuda: bool

class _Options:
    """The Detector's options; iou < 0 leaves the IoU threshold to the model family (`defaults`:
    "predict" or "val")."""
    device: str
    precision: str
    calibration: str
    decode: str
    defaults: str
    conf: float
    iou: float
    decode_cpu_share: float
    max_det: int
    batch: int
    imgsz_h: int
    imgsz_w: int
    threads: int
    contexts: int
    classes: List[int]
    agnostic: bool
    multi_label: bool
    engine_graphs: bool
    max_memory: int
    max_device_memory: int
    max_pixels: int
    def __init__(self) -> None: ...

class _Detector:
    def __init__(self, model: str, options: _Options) -> None: ...
    def detect(self, items: List[Any], post: Optional[Dict[str, Any]] = None) -> List[Tuple[npt.NDArray[np.float32], npt.NDArray[np.float32],
                                                     npt.NDArray[np.int32], int, int]]:
        """Per image: boxes N x 4, scores N, classes N, width, height. `post`: this call's conf, iou,
        max_det, classes, agnostic in place of the detector's. The GIL is released."""
    def evaluate(self, paths: List[str], labels_dir: str) -> Dict[str, Any]: ...
    @property
    def class_names(self) -> List[str]: ...
    @property
    def device(self) -> str: ...
    @property
    def imgsz(self) -> Tuple[int, int]: ...
    @property
    def batch(self) -> int: ...
    @property
    def postprocess(self) -> Dict[str, Any]:
        """conf, iou, max_det, multi_label, agnostic, classes in use (the family's defaults resolved)."""
    def last_times(self) -> Dict[str, float]: ...
    def set_stage_profiling(self, on: bool) -> None: ...
    def warm_up(self, sizes: List[int] = ...) -> None: ...

class _Tracker:
    def __init__(self, yaml_text: str, source_name: str) -> None: ...
    def update(self, xyxy: npt.NDArray[np.float32], conf: npt.NDArray[np.float32], cls: npt.NDArray[np.float32],
               warp: Optional[List[float]] = None) -> npt.NDArray[np.float32]:
        """N x 8 rows [x1, y1, x2, y2, track_id, score, cls, idx]; the GIL is released."""
    def reset(self) -> None: ...
    @property
    def frame_id(self) -> int: ...
    @property
    def tracker_type(self) -> str: ...
    @property
    def gmc_method(self) -> str: ...

def _default_tracker_yaml(name: str) -> str: ...
def decode(source: str | bytes, max_pixels: int = ...) -> npt.NDArray[np.uint8]: ...
def cuda_available() -> bool: ...
def draw(image: npt.NDArray[np.uint8], boxes: npt.NDArray[np.float32], conf: npt.NDArray[np.float32],
         cls: npt.NDArray[np.int32], ids: List[int], names: List[str], line_width: int, labels: bool,
         show_conf: bool) -> npt.NDArray[np.uint8]:
    """The CLI's annotator on a copy of an HxWx3 BGR image."""
def encode_image(image: npt.NDArray[np.uint8], name: str) -> bytes: ...
def write_image(path: str, image: npt.NDArray[np.uint8]) -> None: ...
def classify_source(source: str) -> str: ...
def video_supported() -> bool: ...

class _VideoReader:
    def __init__(self, source: str, vid_stride: int = 1, start: int = 0, max_frames: int = -1) -> None: ...
    def read(self) -> Optional[Tuple[npt.NDArray[np.uint8], int, Optional[float]]]: ...
    @property
    def info(self) -> Dict[str, Any]: ...
