"""Results and Boxes: the detections of one image, with ultralytics' attribute names and layout."""
from __future__ import annotations

import json
import os
import warnings
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from . import _yolocu


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"Results.{old} is deprecated; use Results.{new} (ultralytics' name)", DeprecationWarning,
                  stacklevel=3)


def _json_number(v: float) -> str:
    """The CLI's number format (%.9g: round-trips a float32)."""
    v = float(v)
    if not np.isfinite(v):
        return "null"
    return "%.9g" % v


class Boxes:
    """Detection boxes as ultralytics' `Results.boxes` holds them (NumPy float32 arrays).

    data: N x 6 [x1, y1, x2, y2, conf, cls], or N x 7 [x1, y1, x2, y2, id, conf, cls] when tracked.
    xyxy, xywh (centre x, y, width, height), xyxyn, xywhn (divided by the image's width / height),
    conf, cls (float, as ultralytics), id (None unless tracked), orig_shape (h, w); len() and
    iteration (one Boxes per box), indexing with an int, slice or mask.
    """

    def __init__(self, data: np.ndarray, orig_shape: Tuple[int, int]):
        data = np.asarray(data, dtype=np.float32)
        if data.ndim == 1:
            data = data[None, :]
        if data.ndim != 2 or data.shape[1] not in (6, 7):
            raise ValueError(f"Boxes: expected N x 6 or N x 7 data, got shape {data.shape}")
        self.data = data
        self.orig_shape = tuple(orig_shape)

    @property
    def is_track(self) -> bool:
        return self.data.shape[1] == 7

    @property
    def xyxy(self) -> np.ndarray:
        return self.data[:, :4]

    @property
    def conf(self) -> np.ndarray:
        return self.data[:, -2]

    @property
    def cls(self) -> np.ndarray:
        return self.data[:, -1]

    @property
    def id(self) -> Optional[np.ndarray]:
        return self.data[:, -3] if self.is_track else None

    @property
    def xywh(self) -> np.ndarray:
        x = self.xyxy
        y = np.empty_like(x)
        y[:, 0] = (x[:, 0] + x[:, 2]) / 2
        y[:, 1] = (x[:, 1] + x[:, 3]) / 2
        y[:, 2] = x[:, 2] - x[:, 0]
        y[:, 3] = x[:, 3] - x[:, 1]
        return y

    @property
    def xyxyn(self) -> np.ndarray:
        y = np.copy(self.xyxy)
        y[:, [0, 2]] /= self.orig_shape[1]
        y[:, [1, 3]] /= self.orig_shape[0]
        return y

    @property
    def xywhn(self) -> np.ndarray:
        y = self.xywh
        y[:, [0, 2]] /= self.orig_shape[1]
        y[:, [1, 3]] /= self.orig_shape[0]
        return y

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.data.shape

    def numpy(self) -> "Boxes":  # ultralytics' .cpu().numpy() chains work
        return self

    cpu = numpy

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def __getitem__(self, idx: Any) -> "Boxes":
        return Boxes(self.data[idx], self.orig_shape)

    def __iter__(self) -> Iterator["Boxes"]:
        for i in range(len(self)):
            yield Boxes(self.data[i:i + 1], self.orig_shape)

    def __array__(self, dtype=None, copy=None):
        # yolocu <= 0.1 returned Results.boxes as the N x 4 xyxy array: np.asarray(res.boxes) keeps that
        warnings.warn("Results.boxes is a Boxes object now; np.asarray(res.boxes) gives its xyxy (N x 4) for "
                      "compatibility: use res.boxes.xyxy", DeprecationWarning, stacklevel=2)
        a = self.xyxy
        return a.astype(dtype) if dtype is not None else a

    def __repr__(self) -> str:
        return f"yolocu.Boxes({len(self)} boxes, data={self.data!r})"


class Results:
    """Detections of one image, in original-image pixels (ultralytics' Results).

    Attributes:
        boxes: a Boxes object (xyxy, xywh, xyxyn, xywhn, conf, cls, id, data), confidence descending.
        names: {class id: name} of the model.
        orig_shape: (height, width) of the image.
        orig_img: the image (HxWx3 uint8 BGR) when the call had it decoded, else None (plot() then
            decodes `path`).
        path: the file or stream the image came from, or "image<i>" for an array.
        speed: {"preprocess", "inference", "postprocess"}: milliseconds per image of the call.
        frame: the frame's index in its video (videos only), else None.
    """

    def __init__(self, boxes: Union[Boxes, np.ndarray], names: Dict[int, str], orig_shape: Tuple[int, int],
                 path: Optional[str] = None, orig_img: Optional[np.ndarray] = None,
                 speed: Optional[Dict[str, float]] = None, frame: Optional[int] = None):
        self.orig_shape = tuple(orig_shape)
        if not isinstance(boxes, Boxes):
            data = np.asarray(boxes, np.float32)
            boxes = Boxes(data.reshape(0, 6) if data.size == 0 else data, self.orig_shape)
        self.boxes = boxes
        self.names = names
        self.path = path
        self.orig_img = orig_img
        self.speed = dict(speed or {"preprocess": None, "inference": None, "postprocess": None})
        self.frame = frame

    def __len__(self) -> int:
        return len(self.boxes)

    def __repr__(self) -> str:
        return f"Results({self.orig_shape[1]}x{self.orig_shape[0]}: {self.verbose() or 'no detections'})"

    # ---- deprecated names of yolocu <= 0.1 --------------------------------------------------------
    @property
    def scores(self) -> np.ndarray:
        _deprecated("scores", "boxes.conf")
        return self.boxes.conf

    @property
    def classes(self) -> np.ndarray:
        _deprecated("classes", "boxes.cls (float, as ultralytics)")
        return self.boxes.cls.astype(np.int32)

    def to_list(self) -> List[Dict[str, Any]]:
        _deprecated("to_list()", "summary()")
        return [{"box": [float(v) for v in b], "confidence": float(s), "class_id": int(c), "class_name": self.label(c)}
                for b, s, c in zip(self.boxes.xyxy, self.boxes.conf, self.boxes.cls)]

    # ---- ultralytics' methods --------------------------------------------------------------------
    def label(self, class_id: int) -> str:
        """The class name, or class<N> for an id without one (as the CLI writes it)."""
        return self.names.get(int(class_id), f"class{int(class_id)}")

    def verbose(self) -> str:
        """'2 persons, 1 tie' style counts, as ultralytics' Results.verbose() (no trailing ', ')."""
        if not len(self):
            return ""
        cls = self.boxes.cls.astype(int)
        parts = []
        for c in np.unique(cls):
            n = int((cls == c).sum())
            parts.append(f"{n} {self.label(c)}{'s' * (n > 1)}")
        return ", ".join(parts)

    def summary(self, normalize: bool = False, decimals: int = 5) -> List[Dict[str, Any]]:
        """One dict per box, ultralytics' layout: name, class, confidence, box {x1, y1, x2, y2}
        (divided by the image size with normalize=True), track_id when tracked."""
        h, w = self.orig_shape if normalize else (1, 1)
        out = []
        data = self.boxes
        for i, (b, conf, c) in enumerate(zip(data.xyxy.tolist(), data.conf.tolist(), data.cls.tolist())):
            r = {"name": self.label(c), "class": int(c), "confidence": round(conf, decimals),
                 "box": {"x1": round(b[0] / w, decimals), "y1": round(b[1] / h, decimals),
                         "x2": round(b[2] / w, decimals), "y2": round(b[3] / h, decimals)}}
            if data.is_track:
                r["track_id"] = int(data.id[i])
            out.append(r)
        return out

    def to_json(self, normalize: bool = False, decimals: int = 5) -> str:
        """summary() as a JSON array (ultralytics' to_json: one object per box)."""
        return json.dumps(self.summary(normalize=normalize, decimals=decimals))

    def to_df(self, normalize: bool = False, decimals: int = 5):
        """summary() as a pandas DataFrame (ultralytics' to_df gives polars'; pandas is the common one):
        columns name, class, confidence, box (and track_id when tracked)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("Results.to_df() needs pandas: pip install pandas (or use summary(), a list of "
                              "dicts)") from e
        return pd.DataFrame(self.summary(normalize=normalize, decimals=decimals),
                            columns=["name", "class", "confidence", "box"] + (["track_id"] if self.boxes.is_track
                                                                               else []))

    def to_cli_json(self) -> str:
        """This image as `yolocu detect --json` writes it (one element of "images")."""
        b = self.boxes
        dets = ", ".join(
            '{"box": [%s], "confidence": %s, "class_id": %d, "class_name": %s}'
            % (", ".join(_json_number(v) for v in box), _json_number(s), int(c), json.dumps(self.label(c)))
            for box, s, c in zip(b.xyxy.tolist(), b.conf.tolist(), b.cls.tolist()))
        path = json.dumps(self.path) if self.path is not None else "null"
        return '{"path": %s, "width": %d, "height": %d, "detections": [%s]}' % (
            path, self.orig_shape[1], self.orig_shape[0], dets)

    def plot(self, conf: bool = True, line_width: Optional[int] = None, labels: bool = True, boxes: bool = True,
             img: Optional[np.ndarray] = None) -> np.ndarray:
        """The image with boxes and "name 0.82" labels drawn (HxWx3 uint8 BGR, a new array): the
        annotator of the CLI's --save-img, so the pixels equal the CLI's saved PNG."""
        im = img if img is not None else self.orig_img
        if im is None:
            if self.path is None or not os.path.isfile(self.path):
                raise ValueError("plot(): this result has no image (pass img=)")
            im = _yolocu.decode(self.path)
        im = np.ascontiguousarray(im, dtype=np.uint8)
        if not boxes or not len(self):
            return im.copy()
        b = self.boxes
        ids = [int(v) for v in b.id] if b.is_track else []
        names = [self.label(c) for c in range(max(self.names, default=-1) + 1)]
        return _yolocu.draw(im, np.ascontiguousarray(b.xyxy), np.ascontiguousarray(b.conf),
                            b.cls.astype(np.int32), ids, names, int(line_width or 0), bool(labels), bool(conf))

    def save(self, filename: Optional[str] = None, **plot_args: Any) -> str:
        """Writes plot() to `filename` (PNG for .png, else JPEG .jpg / .jpeg; default
        results_<name of path>.jpg as ultralytics). Returns the file name."""
        if filename is None:
            filename = f"results_{os.path.splitext(os.path.basename(self.path or 'image'))[0]}.jpg"
        filename = os.fspath(filename)
        _yolocu.write_image(filename, self.plot(**plot_args))
        return filename

    def save_txt(self, txt_file: Union[str, os.PathLike], save_conf: bool = False) -> str:
        """Appends YOLO label lines to `txt_file` as ultralytics' save_txt writes them: 'cls cx cy w h'
        normalised ('%g'), + conf with save_conf, + track id when tracked; nothing for no boxes."""
        b = self.boxes
        texts = []
        for j, (c, xywhn, cf) in enumerate(zip(b.cls.tolist(), b.xywhn.tolist(), b.conf.tolist())):
            line = (int(c), *xywhn) + ((cf,) if save_conf else ()) + ((int(b.id[j]),) if b.is_track else ())
            texts.append(("%g " * len(line)).rstrip() % line)
        txt_file = os.fspath(txt_file)
        if texts:
            parent = os.path.dirname(txt_file)
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(txt_file, "a", encoding="utf-8") as f:
                f.writelines(t + "\n" for t in texts)
        return txt_file

    def to_supervision(self):
        """The detections as supervision's `sv.Detections` (xyxy, confidence, class_id, tracker_id,
        data["class_name"]); needs the `supervision` package."""
        try:
            import supervision as sv
        except ImportError as e:
            raise ImportError("Results.to_supervision() needs supervision: pip install supervision") from e
        b = self.boxes
        return sv.Detections(xyxy=b.xyxy.copy(), confidence=b.conf.copy(), class_id=b.cls.astype(int),
                             tracker_id=None if b.id is None else b.id.astype(int),
                             data={"class_name": np.array([self.label(c) for c in b.cls], dtype=str)})

    def new(self, boxes: Union[Boxes, np.ndarray]) -> "Results":
        """A Results of the same image with other boxes (N x 6, or N x 7 with track ids: a tracker's)."""
        return Results(boxes, self.names, self.orig_shape, self.path, self.orig_img, self.speed, self.frame)
