"""yolocu.Tracker: ultralytics' ByteTrack / BoT-SORT on detections the caller gives (one stream).

    tracker = yolocu.Tracker("bytetrack.yaml")         # or "botsort.yaml", a YAML path, a dict
    for frame in frames:
        res = det(frame)
        tracks = tracker.update(res.boxes, img=frame)   # res.boxes: a yolocu.Boxes
        # tracks: N x 8 float32 [x1, y1, x2, y2, track_id, score, cls, idx]; res.new(tracks[:, :7]): tracked Results

Same ids and boxes as ultralytics' BYTETracker / BOTSORT (8.4.190) on the same detections (docs/track.md).
"""
import os

import numpy as np

from . import _yolocu

__all__ = ["Tracker"]


def _yaml_scalar(key, value):
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return repr(float(value)) if isinstance(value, (float, np.floating)) else str(int(value))
    if isinstance(value, str):
        if not value or any(c in value for c in "\n\r#:\"'"):
            raise ValueError(f"tracker setting {key!r}: {value!r} is not a plain word")
        return value
    if value is None:
        return "none"
    raise TypeError(f"tracker setting {key!r}: {type(value).__name__} is not a number, bool or string")


def _config_text(tracker):
    """(YAML text, name for messages) of a tracker argument: a file path, a built-in name, a dict."""
    if isinstance(tracker, dict):
        lines = []
        for k, v in tracker.items():
            if not isinstance(k, str):
                raise TypeError(f"tracker settings: key {k!r} is not a string")
            lines.append(f"{k}: {_yaml_scalar(k, v)}")
        return "\n".join(lines) + "\n", "<dict>"
    if not isinstance(tracker, (str, os.PathLike)):
        raise TypeError(f"tracker: expected a YAML path, 'bytetrack.yaml', 'botsort.yaml' or a dict, got {type(tracker).__name__}")
    path = os.fspath(tracker)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    text = _yolocu._default_tracker_yaml(path)
    if not text:
        raise FileNotFoundError(f"tracker {path!r}: no such file, and not one of the built-in bytetrack.yaml, botsort.yaml")
    return text, path + " (built-in)"


class _SparseOptFlow:
    """ultralytics' GMC 'sparseOptFlow' (trackers/utils/gmc.py) with OpenCV: the camera's 2x3 warp."""

    def __init__(self):
        try:
            import cv2
        except ImportError as e:
            raise ImportError("BoT-SORT with gmc_method sparseOptFlow needs OpenCV (pip install opencv-python-headless), "
                              "or pass warp= to update(), or use gmc_method: none") from e
        self._cv2 = cv2
        self._prev = None
        self._prev_points = None

    def apply(self, img):
        cv2 = self._cv2
        img = np.asarray(img)
        if img.dtype != np.uint8 or img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[2] not in (1, 3)):
            raise ValueError(f"img: expected an HxWx3 uint8 BGR frame, got {img.dtype} {img.shape}")
        h, w = img.shape[:2]
        frame = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY) if img.ndim == 3 and img.shape[2] == 3 else img.reshape(h, w)
        frame = cv2.resize(frame, (w // 2, h // 2))
        points = cv2.goodFeaturesToTrack(frame, mask=None, maxCorners=400, qualityLevel=0.01, minDistance=0, blockSize=3,
                                         useHarrisDetector=False, k=0.04)
        warp = np.eye(2, 3)
        if self._prev is None or self._prev_points is None:
            self._prev, self._prev_points = frame.copy(), points
            return warp
        moved, status, _ = cv2.calcOpticalFlowPyrLK(self._prev, frame, self._prev_points, None)
        good = status.ravel().astype(bool)
        if good.sum() > 4:
            est = cv2.estimateAffinePartial2D(self._prev_points[good], moved[good], cv2.RANSAC)[0]
            if est is not None:
                warp = est
                warp[0, 2] *= 2
                warp[1, 2] *= 2
        self._prev, self._prev_points = frame.copy(), points
        return warp


class Tracker:
    """One stream's ByteTrack or BoT-SORT, with ultralytics' semantics (ids from 1, never reused).

    tracker: "bytetrack.yaml" / "botsort.yaml" (ultralytics' defaults, built in), the path of a
    tracker YAML file in ultralytics' format, or a dict of its keys (``tracker_type`` required).
    frame_rate: accepted for ultralytics' signature; ultralytics 8.4 no longer scales
    ``track_buffer`` by it, so neither does this (``track_buffer`` counts frames).
    """

    def __init__(self, tracker="bytetrack.yaml", frame_rate=30):
        if not (isinstance(frame_rate, (int, float)) and frame_rate > 0):
            raise ValueError(f"frame_rate must be a positive number, got {frame_rate!r}")
        text, name = _config_text(tracker)
        self._t = _yolocu._Tracker(text, name)
        self.frame_rate = frame_rate
        gmc = self._t.gmc_method
        if gmc not in ("none", "sparseOptFlow"):
            raise ValueError(f"{name}: gmc_method {gmc} is not built (only sparseOptFlow and none); "
                             "use one of those or pass warp= to update()")
        self._gmc = None
        self._gmc_method = gmc

    @property
    def tracker_type(self):
        """'bytetrack' or 'botsort'."""
        return self._t.tracker_type

    @property
    def frame_id(self):
        """Frames seen since the start or the last reset()."""
        return self._t.frame_id

    def update(self, xyxy, conf=None, cls=None, img=None, warp=None):
        """Advances one frame. xyxy: N x 4 boxes (pixels), conf: N scores, cls: N class ids (any array
        or tensor on the CPU); or, as ultralytics' trackers take it, one object with .xyxy, .conf and
        .cls (e.g. ultralytics' Boxes) and conf, cls left out. img: the BGR frame, for BoT-SORT's
        camera-motion estimate (sparseOptFlow, OpenCV). warp: instead of img, the 2x3 camera motion
        from the previous frame to this one. Returns an N x 8 float32 array [x1, y1, x2, y2,
        track_id, score, cls, idx]: the confirmed tracks matched in this frame, the box being the
        Kalman state, idx the index of the matched detection."""
        if conf is None and cls is None and all(hasattr(xyxy, k) for k in ("xyxy", "conf", "cls")):
            xyxy, conf, cls = xyxy.xyxy, xyxy.conf, xyxy.cls
        if conf is None or cls is None:
            raise TypeError("update(xyxy, conf, cls): give the scores and classes, or one object with .xyxy, .conf, .cls")
        xyxy, conf, cls = (v.cpu().numpy() if hasattr(v, "cpu") and hasattr(v, "numpy") else v for v in (xyxy, conf, cls))
        xyxy = np.ascontiguousarray(np.asarray(xyxy, dtype=np.float32))
        if xyxy.size == 0:
            xyxy = xyxy.reshape(0, 4)
        if xyxy.ndim != 2 or xyxy.shape[1] != 4:
            raise ValueError(f"xyxy: expected N x 4 boxes, got shape {xyxy.shape}")
        conf = np.ascontiguousarray(np.asarray(conf, dtype=np.float32).reshape(-1))
        cls = np.ascontiguousarray(np.asarray(cls, dtype=np.float32).reshape(-1))
        if warp is not None:
            warp = np.asarray(warp, dtype=np.float64).reshape(-1)
            if warp.size != 6:
                raise ValueError(f"warp: expected a 2x3 affine map, got {warp.size} numbers")
            warp = [float(v) for v in warp]
        elif self._gmc_method == "sparseOptFlow" and self.tracker_type == "botsort":
            if img is None:
                raise ValueError("BoT-SORT with gmc_method sparseOptFlow needs img (the BGR frame) or warp=")
            if self._gmc is None:
                self._gmc = _SparseOptFlow()
            warp = [float(v) for v in self._gmc.apply(img).reshape(-1)]
        return self._t.update(xyxy, conf, cls, warp)

    def reset(self):
        """Forgets every track (ids start again at 1) and the camera-motion state."""
        self._t.reset()
        self._gmc = None
