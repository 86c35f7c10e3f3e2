"""yolocu's Python API: Detector, Results and eval (over the C++ extension yolocu._yolocu)."""
from __future__ import annotations

import glob
import os
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _yolocu
from .results import Boxes, Results

ImageLike = Any  # np.ndarray (HxWx3 uint8 BGR) | str | os.PathLike | bytes | bytearray | memoryview | DLPack tensor

_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".tif", ".tiff", ".bmp")  # include/yolocu/pipeline.hpp kImageSuffixes


_VIDEO_SUFFIXES = (".asf", ".avi", ".gif", ".m4v", ".mkv", ".mov", ".mp4", ".mpeg", ".mpg", ".ts", ".wmv", ".webm")
_STREAM_PREFIXES = ("rtsp://", "rtsps://", "rtmp://", "http://", "https://", "udp://", "tcp://", "srt://")


def _is_video(path: str) -> bool:
    """A video file or stream (by suffix or URL scheme), a camera (/dev/videoN, or "0")."""
    low = path.lower()
    return (low.endswith(_VIDEO_SUFFIXES) or low.startswith(_STREAM_PREFIXES) or low.startswith("/dev/video")
            or (low.isdigit() and len(low) < 4))


def _tensor_images(t: Any) -> Optional[List[np.ndarray]]:
    """A torch tensor as ultralytics takes it (BCHW or CHW, float 0..1, RGB) -> HxWx3 uint8 BGR
    arrays; None for anything else (uint8 HxWx3 DLPack tensors go to the extension as they are)."""
    mod = type(t).__module__ or ""
    if not mod.startswith("torch") or not hasattr(t, "detach"):
        return None
    if not t.is_floating_point():
        return None
    a = t.detach().cpu().float().numpy()
    if a.ndim == 3:
        a = a[None]
    if a.ndim != 4 or a.shape[1] != 3:
        raise ValueError(f"tensor of shape {tuple(a.shape)}: expected BCHW (or CHW) RGB, float 0..1, as ultralytics")
    if a.size and (a.min() < 0 or a.max() > 1):
        raise ValueError("tensor values must be in 0..1 (ultralytics' float input); pass uint8 HxWx3 BGR arrays "
                         "for 0..255 pixels")
    return [np.ascontiguousarray(np.rint(np.transpose(x, (1, 2, 0))[:, :, ::-1] * 255).astype(np.uint8)) for x in a]


def _flatten(source: Any) -> Tuple[List[Any], List[Optional[str]], bool]:
    """One list entry per image (bytes, str path or array-like), their paths, and whether the call
    named one image (-> one Results) or several (-> a list). Folders and glob patterns are expanded
    (list_images); a video among them raises (see Detector.predict). Raises TypeError / FileNotFoundError."""
    single = not isinstance(source, (list, tuple))
    items = [source] if single else list(source)
    flat: List[Any] = []
    paths: List[Optional[str]] = []
    for i, it in enumerate(items):
        if isinstance(it, (str, os.PathLike)):
            p = os.fspath(it)
            if _is_video(p) and not os.path.isdir(p):
                raise ValueError(f"image {i}: {p} is a video or stream: pass it alone (Detector.predict(video, "
                                 f"stream=True))")
            if os.path.isdir(p) or (not os.path.exists(p) and any(ch in p for ch in "*?[")):
                found = list_images(p)
                if not found:
                    raise FileNotFoundError(2, f"image {i}: no {'/'.join(_IMAGE_SUFFIXES)} images", p)
                flat += found
                paths += found
                single = False
                continue
            if not os.path.exists(p):
                raise FileNotFoundError(2, f"image {i}: no such file", p)
            flat.append(p)
            paths.append(p)
        elif isinstance(it, (bytes, bytearray, memoryview)):
            b = bytes(it)
            if not b:
                raise ValueError(f"image {i}: empty bytes")
            flat.append(b)
            paths.append(None)
        elif _tensor_images(it) is not None:
            arrays = _tensor_images(it)
            flat += arrays
            paths += [None] * len(arrays)
            single = single and len(arrays) == 1
        elif isinstance(it, np.ndarray) or hasattr(it, "__dlpack__") or hasattr(it, "__array_interface__"):
            flat.append(it)
            paths.append(None)
        elif isinstance(it, (list, tuple)):
            raise TypeError(f"image {i}: nested list; pass images as a flat list")
        else:
            raise TypeError(f"image {i}: expected a NumPy HxWx3 uint8 array, a path, encoded bytes or a DLPack "
                            f"tensor, got {type(it).__name__}")
    return flat, paths, single


class Detector:
    """A YOLO detector: `Detector("yolov5n.onnx")(img)` -> Results.

    Args:
        model: ONNX file exported by ultralytics/yolov5 export.py or the ultralytics package
            (YOLOv8, YOLO11; static or dynamic, fp32 or fp16).
        device: "auto" (the GPU when this build has CUDA and one is usable, else the CPU), "cpu",
            "cuda" or "cuda:N".
        precision: GPU engine precision, "fp16" or "fp32" (the CPU always runs fp32); or "int8" with
            `calibration`: the calibration's convolutions on INT8 kernels on the GPU, simulated INT8
            on the CPU (docs/int8.md).
        calibration: the INT8 calibration file of this model (`yolocu calibrate`), with
            precision="int8" only; a calibration of another model raises ValueError naming both hashes.
        conf: confidence threshold (obj > conf and obj * cls > conf).
        iou: NMS IoU threshold (suppress when IoU > iou). None: the model family's default, as
            the CLI's `yolocu detect` picks it: 0.45 for YOLOv5 (detect.py), 0.7 for YOLOv8 /
            YOLO11 (ultralytics predict). The value in use is `Detector.iou`.
        max_det: detections kept per image.
        classes: keep only these class ids (None: all).
        agnostic: class-agnostic NMS.
        batch: images per forward pass (a call with more images runs several).
        imgsz: network input size, int or (h, w); None: the model's static size, else 640.
        multi_label: one candidate per (box, class) above conf (val.py's mode).
        threads: CPU engine threads (0: all cores).
        contexts: concurrent execution contexts (GPU streams) for calls from several threads.
        max_memory: CPU engine memory budget in bytes per context (0: the machine's memory); a
            model whose tensors or arena would exceed it raises MemoryError naming the budget.
        max_device_memory: GPU memory budget in bytes per context (0: none): the engine's buffers and
            the context's; over it the build, or the call whose images need more, raises MemoryError
            naming the buffer, and the Detector stays usable.
        max_pixels: the largest image (width x height) this Detector decodes, from bytes or paths,
            on the CPU or with nvJPEG (default 50,000,000: 8K and 48 MP photos pass); a larger one
            raises MemoryError naming the image and the limit before its pixels are allocated. Its
            sides are limited to 16384 either way.
        decode: where encoded images (bytes, paths) are decoded: "cpu" (libjpeg-turbo, the same
            pixels as cv2.imread) or "gpu" (nvJPEG on the CUDA device, for calls whose images are all
            encoded; pixels differ slightly, mAP within 0.001; needs the CUDA detector).
        decode_cpu_share: with decode="gpu", the share of each batch (0 to 0.9) decoded on CPU
            threads while nvJPEG decodes the rest (more images/s where nvJPEG is the limit).
        engine_graphs: GPU: replay the engine's forward as CUDA graphs (True, default) or launch
            its kernels one by one (False). Beside nvJPEG (decode="gpu") eager launches leave the
            decoder more of the GPU: the CLI launches eagerly there; through this API neither won
            clearly (docs/performance.md section 10). The CPU path ignores it.

    Calling it releases the GIL while C++ runs; one Detector may be called from several threads at
    once (the C++ thread contract). Raises FileNotFoundError (model), ValueError (bad options or
    model), RuntimeError (no usable GPU for device="cuda").
    """

    def __init__(self, model: Union[str, os.PathLike], device: str = "auto", precision: str = "fp16",
                 conf: float = 0.25, iou: Optional[float] = None, max_det: int = 300,
                 classes: Optional[Iterable[int]] = None, agnostic: bool = False, batch: int = 8,
                 imgsz: Union[None, int, Sequence[int]] = None, multi_label: bool = False, threads: int = 0,
                 contexts: int = 1, max_memory: int = 0, max_device_memory: int = 0, decode: str = "cpu",
                 decode_cpu_share: float = 0.0, engine_graphs: bool = True, max_pixels: int = 50_000_000,
                 calibration: Union[None, str, os.PathLike] = None, _defaults: str = "predict"):
        model = os.fspath(model)
        if not os.path.isfile(model):
            raise FileNotFoundError(2, "model: no such file", model)
        if imgsz is None:
            h = w = 0
        elif isinstance(imgsz, int):
            h = w = imgsz
        else:
            h, w = (int(v) for v in imgsz)
        if h < 0 or w < 0:
            raise ValueError(f"imgsz must be > 0, got {imgsz}")
        cls = [int(c) for c in classes] if classes is not None else []
        if int(max_memory) < 0:
            raise ValueError(f"max_memory must be >= 0 bytes, got {max_memory}")
        if int(max_device_memory) < 0:
            raise ValueError(f"max_device_memory must be >= 0 bytes, got {max_device_memory}")
        if int(max_pixels) <= 0:
            raise ValueError(f"max_pixels must be > 0, got {max_pixels}")
        if not isinstance(engine_graphs, bool):
            raise TypeError(f"engine_graphs must be True or False, got {engine_graphs!r}")
        if iou is not None and not 0 <= float(iou) <= 1:
            raise ValueError(f"iou must be in [0, 1] (or None: the model family's default), got {iou}")
        self._engine_graphs = engine_graphs
        o = _yolocu._Options()
        o.device, o.precision, o.decode, o.defaults = str(device), str(precision), str(decode), str(_defaults)
        o.conf, o.iou, o.max_det, o.classes = float(conf), -1.0 if iou is None else float(iou), int(max_det), cls
        o.agnostic, o.multi_label, o.batch, o.imgsz_h, o.imgsz_w = bool(agnostic), bool(multi_label), int(batch), h, w
        o.threads, o.contexts, o.max_memory, o.max_device_memory = (int(threads), int(contexts), int(max_memory),
                                                                    int(max_device_memory))
        o.decode_cpu_share, o.engine_graphs = float(decode_cpu_share), self._engine_graphs
        o.max_pixels = int(max_pixels)
        if calibration is not None:
            calibration = os.fspath(calibration)
            if not os.path.isfile(calibration):
                raise FileNotFoundError(2, "calibration: no such file", calibration)
            o.calibration = calibration
        self._det = _yolocu._Detector(model, o)
        self.model = model
        self.names: Dict[int, str] = dict(enumerate(self._det.class_names))

    @property
    def device(self) -> str:
        """The device the detector runs on: "cpu" or "cuda:N"."""
        return self._det.device

    @property
    def engine_graphs(self) -> bool:
        """Whether the GPU engine replays CUDA graphs (the engine_graphs option); the CPU path
        ignores it."""
        return self._engine_graphs

    @property
    def imgsz(self) -> Tuple[int, int]:
        """Network input (height, width)."""
        return tuple(self._det.imgsz)

    @property
    def batch(self) -> int:
        return self._det.batch

    @property
    def conf(self) -> float:
        """The confidence threshold in use."""
        return float(self._det.postprocess["conf"])

    @property
    def iou(self) -> float:
        """The NMS IoU threshold in use (the model family's default when the iou argument was None)."""
        return float(self._det.postprocess["iou"])

    @property
    def max_det(self) -> int:
        """Detections kept per image."""
        return int(self._det.postprocess["max_det"])

    def predict(self, source: Any, conf: Optional[float] = None, iou: Optional[float] = None,
                classes: Optional[Iterable[int]] = None, max_det: Optional[int] = None,
                agnostic: Optional[bool] = None, stream: bool = False, vid_stride: int = 1
                ) -> Union[Results, List[Results], Iterator[Results]]:
        """Detects objects, ultralytics' predict(): `source` is
          - an image: a NumPy HxWx3 uint8 BGR array (what cv2.imread returns; row padding allowed),
            a path, the bytes of an encoded JPEG / PNG / WebP / TIFF / BMP, a DLPack tensor (host, or CUDA in CUDA
            builds), or a torch tensor as ultralytics takes it (BCHW / CHW float 0..1 RGB);
          - several: a list of those, a folder (its image files, sorted: list_images), a glob pattern;
          - a video file (mp4, mkv, avi, mov, ...), a stream URL (rtsp://, http(s)://, ...) or a
            camera ("/dev/video0", 0): its frames, decoded by the C++ video reader (FFmpeg,
            cv2.VideoCapture's pixels), every vid_stride-th.
        conf, iou, classes, max_det, agnostic: this call's post-processing, in place of the
        Detector's (None: the Detector's); the same engine, nothing rebuilt.
        Returns one Results for one image, a list for several; with stream=True a generator of
        Results (one per image or frame, the images decoded as it goes: memory stays flat over a
        long video)."""
        post = self._call_options(conf, iou, classes, max_det, agnostic)
        if isinstance(source, int) and not isinstance(source, bool) and 0 <= source < 100:
            source = str(source)  # a camera number, as ultralytics' source=0
        if isinstance(source, (str, os.PathLike)) and _is_video(os.fspath(source)) \
                and not os.path.isdir(os.fspath(source)):
            gen = self._video(os.fspath(source), post, vid_stride)
            return gen if stream else list(gen)
        flat, paths, single = _flatten(source)
        gen = self._images(flat, paths, post, self.batch if stream else max(len(flat), 1))
        if stream:
            return gen
        out = list(gen)
        return out[0] if single else out

    __call__ = predict

    def track(self, source: Any, tracker: Union[str, os.PathLike, Dict[str, Any]] = "bytetrack.yaml",
              persist: bool = False, stream: bool = False, conf: Optional[float] = None,
              iou: Optional[float] = None, classes: Optional[Iterable[int]] = None, max_det: Optional[int] = None,
              agnostic: Optional[bool] = None, vid_stride: int = 1, frame_rate: int = 30
              ) -> Union[Results, List[Results], Iterator[Results]]:
        """Detects and tracks, ultralytics' model.track(): `source` as for predict (a video, a
        stream, or images taken as consecutive frames), each frame's detections through one
        yolocu.Tracker (ByteTrack or BoT-SORT: "bytetrack.yaml", "botsort.yaml", a YAML path or a
        dict; docs/track.md). Each Results holds the boxes tracked in its frame, with their ids
        (`boxes.id`; `boxes.data` N x 7 [x1, y1, x2, y2, id, conf, cls], ultralytics' layout), in
        the tracker's order. conf defaults to 0.1 as in ultralytics' track (ByteTrack's second
        association uses the low-score boxes). persist=True keeps the tracker of the previous
        call (the same stream continued: ids go on); otherwise a new tracker starts (ids from 1).
        frame_rate: passed to Tracker (ultralytics' signature; ultralytics 8.4 does not use it)."""
        from .tracker import Tracker
        if not persist or getattr(self, "_tracker", None) is None:
            self._tracker = Tracker(tracker, frame_rate=frame_rate)
        trk = self._tracker
        frames = self.predict(source, conf=0.1 if conf is None else conf, iou=iou, classes=classes,
                              max_det=max_det, agnostic=agnostic, stream=True, vid_stride=vid_stride)

        def tracked() -> Iterator[Results]:
            for r in frames:
                rows = trk.update(r.boxes, img=r.orig_img)
                yield r.new(rows[:, :7])

        if stream:
            return tracked()
        out = list(tracked())
        video = isinstance(source, int) or (isinstance(source, (str, os.PathLike)) and _is_video(os.fspath(source)))
        return out[0] if not video and len(out) == 1 and _flatten(source)[2] else out

    def _call_options(self, conf, iou, classes, max_det, agnostic) -> Optional[Dict[str, Any]]:
        post: Dict[str, Any] = {}
        if conf is not None:
            if not 0 <= float(conf) <= 1:
                raise ValueError(f"conf must be in [0, 1], got {conf}")
            post["conf"] = float(conf)
        if iou is not None:
            if not 0 <= float(iou) <= 1:
                raise ValueError(f"iou must be in [0, 1], got {iou}")
            post["iou"] = float(iou)
        if max_det is not None:
            if int(max_det) < 1:
                raise ValueError(f"max_det must be >= 1, got {max_det}")
            post["max_det"] = int(max_det)
        if classes is not None:
            cls = [int(c) for c in ([classes] if isinstance(classes, int) else classes)]
            bad = [c for c in cls if not 0 <= c < len(self.names)]
            if bad:
                raise ValueError(f"classes: {bad} outside the model's classes 0..{len(self.names) - 1}")
            post["classes"] = cls
        if agnostic is not None:
            post["agnostic"] = bool(agnostic)
        return post or None

    def _speed(self, n: int) -> Dict[str, float]:
        t = self._det.last_times()
        n = max(n, 1)
        return {k: float(t[k]) / n for k in ("preprocess", "inference", "postprocess")}

    def _results(self, raw: list, items: List[Any], paths: List[Optional[str]], first: int,
                 frames: Optional[List[int]] = None) -> List[Results]:
        speed = self._speed(len(raw))
        out = []
        for k, ((b, s, c, w, h), it, p) in enumerate(zip(raw, items, paths)):
            data = np.concatenate([b, s[:, None], c[:, None].astype(np.float32)], axis=1)
            img = it if isinstance(it, np.ndarray) else None
            out.append(Results(Boxes(data, (h, w)), self.names, (h, w), p if p is not None else f"image{first + k}",
                               img, speed, None if frames is None else frames[k]))
        return out

    def _images(self, flat: List[Any], paths: List[Optional[str]], post: Optional[Dict[str, Any]],
                chunk: int) -> Iterator[Results]:
        for i in range(0, len(flat), chunk):
            part = flat[i:i + chunk]
            raw = self._det.detect(part, post)
            yield from self._results(raw, part, paths[i:i + chunk], i)

    def _video(self, source: str, post: Optional[Dict[str, Any]], vid_stride: int) -> Iterator[Results]:
        """Opens the video now (errors raise at the call, also with stream=True); the frames come as
        the generator runs."""
        if not _yolocu.video_supported() and _yolocu.classify_source(source) != "image sequence":
            raise ValueError(f"{source}: this build of yolocu reads no video (built without FFmpeg)")
        if not source.lower().startswith(_STREAM_PREFIXES) and not os.path.exists(source) \
                and not source.isdigit():
            raise FileNotFoundError(2, "no such video", source)
        reader = _yolocu._VideoReader(source, int(vid_stride))
        return self._frames(reader, source, post)

    def _frames(self, reader: Any, source: str, post: Optional[Dict[str, Any]]) -> Iterator[Results]:
        while True:
            frames, index = [], []
            while len(frames) < self.batch:
                f = reader.read()
                if f is None:
                    break
                frames.append(f[0])
                index.append(int(f[1]))
            if not frames:
                return
            raw = self._det.detect(frames, post)
            yield from self._results(raw, frames, [source] * len(frames), 0, index)

    def last_times(self) -> Dict[str, float]:
        """Times of the last call in milliseconds: preprocess, inference, postprocess, total (host
        wall times; on the GPU, enqueue times except postprocess, which includes the wait), the GPU's
        own stage times gpu_upload, gpu_letterbox, gpu_engine, gpu_postprocess (while
        set_stage_profiling(True), else 0), and the counts batches, max_in_flight,
        gpu_timed_batches and gpu_untimed_batches (profiled batches left out of the GPU stage
        times: their stream waited over 100 ms for the enqueue)."""
        return dict(self._det.last_times())

    def warm_up(self, sizes: Optional[Sequence[int]] = None) -> None:
        """Makes every execution context ready for these batch sizes (default: every size from 1 to
        ``batch``), so that no later call pays a size's first run: on the GPU, a size the build did
        not tune builds its plans and captures its CUDA graph on first use (seconds). Servers whose
        batcher forms any size call it before taking requests (``yolocu serve`` does). Raises
        ValueError for a size outside 1..batch."""
        self._det.warm_up([int(s) for s in (sizes or [])])

    def set_stage_profiling(self, on: bool) -> None:
        """GPU: time every stage with CUDA events from now on (a few microseconds per batch)."""
        self._det.set_stage_profiling(bool(on))

    def __repr__(self) -> str:
        return f"yolocu.Detector({self.model!r}, device={self.device!r}, imgsz={self.imgsz}, batch={self.batch})"


def list_images(*specs: Union[str, os.PathLike]) -> List[str]:
    """Image files as the CLI expands them: files as given, folders' image files (.jpg, .jpeg, .png,
    .webp, .tif, .tiff, .bmp; sorted, not recursive), glob patterns (sorted)."""
    out: List[str] = []
    for spec in specs:
        s = os.fspath(spec)
        if os.path.isdir(s):
            out += sorted(os.path.join(s, f) for f in os.listdir(s)
                          if f.lower().endswith(_IMAGE_SUFFIXES) and os.path.isfile(os.path.join(s, f)))
        elif not os.path.exists(s) and any(ch in s for ch in "*?["):
            out += sorted(glob.glob(s))
        else:
            out.append(s)
    return out


def decode(source: Union[str, os.PathLike, bytes], max_pixels: int = 50_000_000) -> np.ndarray:
    """Decodes a JPEG, PNG, WebP, TIFF or BMP file or bytes into an HxWx3 uint8 BGR array (cv2.imread's
    pixels).

    max_pixels: the largest image (width x height) decoded; a larger one raises MemoryError naming
    the image and the limit before its pixels are allocated (as Detector(max_pixels=) and the CLI's
    --max-pixels). Progressive JPEGs of more than 100 scans and decoders needing more than 256 MB
    of working memory are refused the same way."""
    if int(max_pixels) <= 0:
        raise ValueError(f"max_pixels must be > 0, got {max_pixels}")
    if isinstance(source, (str, os.PathLike)):
        source = os.fspath(source)
        if not os.path.exists(source):
            raise FileNotFoundError(2, "no such file", source)
    elif isinstance(source, (bytearray, memoryview)):
        source = bytes(source)
    return _yolocu.decode(source, int(max_pixels))


def eval(model: Union[str, os.PathLike], images: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]],
         labels: Union[str, os.PathLike], conf: float = 0.001, iou: Optional[float] = None, max_det: int = 300,
         single_label: bool = False, device: str = "auto", precision: str = "fp16", batch: int = 8,
         imgsz: Union[None, int, Sequence[int]] = None, classes: Optional[Iterable[int]] = None,
         agnostic: bool = False,
         calibration: Union[None, str, os.PathLike] = None) -> Dict[str, Any]:  # noqa: A001 (the name the issue asks for)
    """mAP of a model over labelled images, as `yolocu eval` computes it (the model family's val).

    images: a folder, a glob pattern, a file, or a list of those; labels: folder of YOLO label
    files (LABELS/<image stem>.txt; a missing one is a background image). iou None: the model
    family's default, as `yolocu eval` picks it: 0.6 for YOLOv5 (val.py), 0.7 for YOLOv8 / YOLO11
    (ultralytics val). The images run through the loop `yolocu eval` runs (decoding threads,
    batches). Returns the CLI's "metrics" dict: map50, map50_95, precision, recall, num_images,
    num_labels, per_class (class_id, labels, predictions, ap50, ap50_95, precision, recall), plus
    errors (images or label files that failed, "<path>: <message>" / "<path>: labels: <message>";
    the metrics cover the others). precision="int8" with `calibration`: INT8 (on the GPU, or simulated
    on the CPU), as `yolocu eval --precision int8 --calibration FILE`."""
    labels = os.fspath(labels)
    if not os.path.isdir(labels):
        raise FileNotFoundError(2, "labels: no such folder", labels)
    specs = [images] if isinstance(images, (str, os.PathLike)) else list(images)
    paths = list_images(*specs)
    det = Detector(model, device=device, precision=precision, conf=conf, iou=iou, max_det=max_det, classes=classes,
                   agnostic=agnostic, batch=batch, imgsz=imgsz, multi_label=not single_label, calibration=calibration,
                   _defaults="val")
    return dict(det._det.evaluate(paths, labels))
