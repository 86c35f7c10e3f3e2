"""The Python API (yolocu.Detector, Results, eval) against the C++ CLI's JSON output, bad inputs,
memory over many calls, and calls from several threads. CPU; GPU tests skip visibly without one."""
import gc
import json
import os
import subprocess
import threading
import time

import numpy as np
import pytest

import yolocu
from conftest import data_path, run_cli_json

MODEL = "yolov5n.onnx"


def model_path(name=MODEL):
    return data_path("models", name)


def cli_arrays(entry):
    dets = entry["detections"]
    boxes = np.array([d["box"] for d in dets], np.float32).reshape(-1, 4)
    scores = np.array([d["confidence"] for d in dets], np.float32)
    classes = np.array([d["class_id"] for d in dets], np.int32)
    return boxes, scores, classes


def assert_same_as_cli(res, entry):
    """Bit-equal boxes and scores (the CLI prints 9 significant digits: a float32 round-trips)."""
    assert res.orig_shape == (entry["height"], entry["width"]), entry["path"]
    boxes, scores, classes = cli_arrays(entry)
    assert len(res) == len(scores), f"{entry['path']}: {len(res)} detections, CLI {len(scores)}"
    np.testing.assert_array_equal(res.boxes.cls.astype(np.int32), classes, err_msg=entry["path"])
    np.testing.assert_array_equal(res.boxes.conf, scores, err_msg=entry["path"])
    np.testing.assert_array_equal(res.boxes.xyxy, boxes, err_msg=entry["path"])


@pytest.fixture(scope="module")
def det():
    return yolocu.Detector(model_path(), device="cpu", conf=0.25, iou=0.45, max_det=300, batch=8)


@pytest.fixture(scope="module")
def samples():
    return [data_path("images", "bus.jpg"), data_path("images", "zidane.jpg")]


@pytest.fixture(scope="module")
def cli_samples(cli, samples, tmp_path_factory):
    return run_cli_json(cli, ["detect", "--model", model_path(), "--device", "cpu", "--max-det", "300", "--batch", "8"]
                        + samples, tmp_path_factory.mktemp("cli"))["images"]


# ---- same detections as the CLI ------------------------------------------------------------------

def test_paths_match_cli(det, samples, cli_samples):
    res = det(samples)
    assert isinstance(res, list) and len(res) == 2
    for r, entry in zip(res, cli_samples):
        assert len(r) > 0
        assert_same_as_cli(r, entry)
        assert json.loads(r.to_cli_json()) == entry  # the CLI's JSON, field for field


def test_arrays_bytes_and_single_image_match_cli(det, samples, cli_samples):
    for path, entry in zip(samples, cli_samples):
        with open(path, "rb") as f:
            encoded = f.read()
        img = yolocu.decode(path)
        assert img.dtype == np.uint8 and img.shape == (entry["height"], entry["width"], 3)
        assert_same_as_cli(det(img), entry)                 # one array -> one Results
        assert_same_as_cli(det(encoded), entry)             # bytes
        assert_same_as_cli(det(bytearray(encoded)), entry)  # bytearray
        assert_same_as_cli(det([img, encoded])[1], entry)   # mixed list


def test_cv2_imread_matches_cli(det, samples, cli_samples):
    cv2 = pytest.importorskip("cv2", reason="OpenCV (cv2) not installed in this environment")
    for path, entry in zip(samples, cli_samples):
        assert_same_as_cli(det(cv2.imread(path)), entry)


def test_row_padded_view_and_dlpack_match(det, samples, cli_samples):
    img = yolocu.decode(samples[0])
    h, w, _ = img.shape
    big = np.zeros((h + 4, w + 7, 3), np.uint8)
    big[2:2 + h, 5:5 + w] = img
    crop = big[2:2 + h, 5:5 + w]  # row pitch (w + 7) * 3: no copy
    assert not crop.flags["C_CONTIGUOUS"]
    assert_same_as_cli(det(crop), cli_samples[0])
    ro = np.frombuffer(img.tobytes(), np.uint8).reshape(img.shape)  # read-only
    assert not ro.flags.writeable
    assert_same_as_cli(det(ro), cli_samples[0])

    class DLPackOnly:  # a producer that only speaks DLPack (like a torch tensor)
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, *args, **kwargs):
            return self.a.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    assert_same_as_cli(det(DLPackOnly(img)), cli_samples[0])


def test_results_api(det, samples):
    r = det(samples[0])
    assert r.boxes.xyxy.dtype == np.float32 and r.boxes.xyxy.shape == (len(r), 4)
    assert r.boxes.conf.dtype == np.float32 and r.boxes.cls.dtype == np.float32 and r.boxes.data.shape == (len(r), 6)
    assert r.names[0] == "person" and len(r.names) == 80
    assert r.path == samples[0]
    assert np.all(np.diff(r.boxes.conf) <= 0)  # confidence descending
    assert "person" in repr(r)
    assert det.device == "cpu" and det.imgsz == (640, 640) and det.batch == 8
    t = det.last_times()
    assert all(k in t for k in ("preprocess", "inference", "postprocess", "total", "gpu_engine"))
    assert t["batches"] == 1 and t["max_in_flight"] == 1
    det.set_stage_profiling(True)  # the CPU has no device stages: accepted, the gpu_* times stay 0
    det(samples[:2])
    det.set_stage_profiling(False)
    t = det.last_times()
    # two images, two forwards: the static export runs batch 1 (and one after the other on the CPU)
    assert t["gpu_engine"] == 0 and t["gpu_upload"] == 0 and t["batches"] == 2 and t["max_in_flight"] == 1


# coco128 runs the dynamic model at 320 (a quarter of the work of 640 on CI's two cores); the sample
# images above run the static 640 model.
C128_MODEL, C128_IMGSZ = "yolov5n_dyn.onnx", 320


def test_coco128_matches_cli(cli, tmp_path):
    folder = data_path("coco128", "images", "train2017")
    paths = yolocu.list_images(folder)
    assert len(paths) == 128
    m = model_path(C128_MODEL)
    ref = run_cli_json(cli, ["detect", "--model", m, "--device", "cpu", "--max-det", "300", "--batch", "8",
                             "--imgsz", str(C128_IMGSZ), folder], tmp_path)["images"]
    assert [e["path"] for e in ref] == paths
    d = yolocu.Detector(m, device="cpu", max_det=300, batch=8, imgsz=C128_IMGSZ)
    total = 0
    for r, entry in zip(d(paths), ref):
        assert_same_as_cli(r, entry)
        total += len(r)
    assert total > 300


def test_options_match_cli(cli, samples, tmp_path):
    """Non-default options reach the C++ detector the way the CLI's flags do."""
    opts = dict(conf=0.4, iou=0.3, max_det=5, classes=[0, 5], agnostic=True)
    d = yolocu.Detector(model_path(), device="cpu", **opts)
    ref = run_cli_json(cli, ["detect", "--model", model_path(), "--device", "cpu", "--conf", "0.4", "--iou", "0.3",
                             "--max-det", "5", "--classes", "0", "5", "--agnostic"] + samples, tmp_path)["images"]
    for r, entry in zip(d(samples), ref):
        assert_same_as_cli(r, entry)
        assert set(r.boxes.cls.astype(np.int32).tolist()) <= {0, 5} and len(r) <= 5


def test_dynamic_model_imgsz_matches_cli(cli, samples, tmp_path):
    m = model_path("yolov5n_dyn.onnx")
    d = yolocu.Detector(m, device="cpu", imgsz=320)
    assert d.imgsz == (320, 320)
    ref = run_cli_json(cli, ["detect", "--model", m, "--device", "cpu", "--max-det", "300", "--imgsz", "320"] + samples,
                       tmp_path)["images"]
    for r, entry in zip(d(samples), ref):
        assert_same_as_cli(r, entry)


def test_eval_matches_cli(cli, tmp_path):
    images = data_path("coco128", "images", "train2017")
    labels = data_path("coco128", "labels", "train2017")
    m_path = model_path(C128_MODEL)
    ref = run_cli_json(cli, ["eval", "--model", m_path, "--device", "cpu", "--batch", "8", "--imgsz", str(C128_IMGSZ),
                             "--images", images, "--labels", labels], tmp_path)["metrics"]
    m = yolocu.eval(m_path, images, labels, device="cpu", batch=8, imgsz=C128_IMGSZ)
    assert m["errors"] == []
    for k in ("num_images", "num_labels"):
        assert m[k] == ref[k]
    for k in ("map50", "map50_95", "precision", "recall"):
        assert m[k] == pytest.approx(ref[k], rel=0, abs=5e-9), k  # the CLI prints 9 digits
    assert len(m["per_class"]) == len(ref["per_class"])
    for a, b in zip(m["per_class"], ref["per_class"]):
        assert a["class_id"] == b["class_id"] and a["labels"] == b["labels"] and a["predictions"] == b["predictions"]
        assert a["ap50_95"] == pytest.approx(b["ap50_95"], rel=0, abs=5e-9)
    assert 0.1 < m["map50_95"] < 0.5


# ---- simulated INT8 (precision="int8", calibration=) ------------------------------------------------

@pytest.fixture(scope="module")
def int8_calibration(cli, tmp_path_factory):
    """A calibration of yolov5n made by `yolocu calibrate` on the two sample images (no sensitivity
    pass: quick, and every convolution but the first and the heads in INT8)."""
    out = os.path.join(str(tmp_path_factory.mktemp("cal")), "yolov5n.int8.json")
    proc = subprocess.run([cli, "calibrate", "--model", model_path(), "--images", data_path("images", "bus.jpg"),
                           data_path("images", "zidane.jpg"), "--keep-float-worst", "0", "--quiet", "-o", out],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_int8_matches_cli(cli, samples, int8_calibration, tmp_path):
    ref = run_cli_json(cli, ["detect", "--model", model_path(), "--device", "cpu", "--batch", "8", "--precision", "int8",
                             "--calibration", int8_calibration] + samples, tmp_path)["images"]
    det = yolocu.Detector(model_path(), device="cpu", iou=0.45, batch=8, precision="int8", calibration=int8_calibration)
    res = det(samples)
    for r, e in zip(res, ref):
        assert_same_as_cli(r, e)
    # INT8 is not FP32: the boxes move (else the calibration would not be in use)
    fp32 = yolocu.Detector(model_path(), device="cpu", iou=0.45, batch=8)(samples)
    assert any(not np.array_equal(a.boxes.xyxy, b.boxes.xyxy) for a, b in zip(res, fp32))


def test_int8_eval_matches_cli(cli, int8_calibration, tmp_path):
    src, labels = data_path("coco128", "images", "train2017"), data_path("coco128", "labels", "train2017")
    images = tmp_path / "images"
    images.mkdir()
    for name in sorted(os.listdir(src))[:16]:  # 16 images: the INT8 eval stays quick
        os.symlink(os.path.join(src, name), images / name)
    ref = run_cli_json(cli, ["eval", "--model", model_path(), "--device", "cpu", "--batch", "8",
                             "--images", str(images), "--labels", labels, "--precision", "int8",
                             "--calibration", int8_calibration], tmp_path)["metrics"]
    m = yolocu.eval(model_path(), str(images), labels, device="cpu", batch=8, precision="int8",
                    calibration=int8_calibration)
    assert m["errors"] == [] and m["num_images"] == ref["num_images"] == 16
    for k in ("map50", "map50_95", "precision", "recall"):
        assert m[k] == pytest.approx(ref[k], rel=0, abs=5e-9), k


def test_int8_refusals(int8_calibration):
    with pytest.raises(ValueError, match="calibration"):
        yolocu.Detector(model_path(), device="cpu", precision="int8")
    with pytest.raises(ValueError, match="precision='int8'"):
        yolocu.Detector(model_path(), device="cpu", calibration=int8_calibration)
    with pytest.raises(FileNotFoundError):
        yolocu.Detector(model_path(), device="cpu", precision="int8", calibration="no-such.json")
    # bound to the model's bytes: another model (the dynamic export of the same weights) is refused
    with pytest.raises(ValueError, match="sha256|SHA-256|hash"):
        yolocu.Detector(model_path("yolov5n_dyn.onnx"), device="cpu", precision="int8", calibration=int8_calibration)


# ---- the model family's defaults -----------------------------------------------------------------

def v8_model(name):
    """A YOLOv8 / YOLO11 export made by scripts/v8/make_refs.sh ($YOLOCU_V8_DIR, else .data/v8/refs), or None."""
    root = os.environ.get("YOLOCU_V8_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", ".data", "v8", "refs")
    path = os.path.join(root, name)
    return path if os.path.isfile(os.path.join(root, "COMPLETE")) and os.path.isfile(path) else None


def test_iou_none_takes_the_family_default_like_the_cli(cli, samples, tmp_path):
    """iou=None (the default) is the model family's, as the CLI picks it: YOLOv5 0.45 (detect.py),
    0.6 for eval (val.py); YOLOv8 / YOLO11 0.7 (ultralytics predict and val). Explicit values win."""
    d = yolocu.Detector(model_path(), device="cpu")
    assert d.iou == pytest.approx(0.45) and d.conf == pytest.approx(0.25) and d.max_det == 300
    assert yolocu.Detector(model_path(), device="cpu", iou=0.3).iou == pytest.approx(0.3)
    assert yolocu.Detector(model_path(), device="cpu", _defaults="val").iou == pytest.approx(0.6)
    with pytest.raises(ValueError, match="iou"):
        yolocu.Detector(model_path(), device="cpu", iou=1.5)
    with pytest.raises(ValueError, match="iou"):
        yolocu.Detector(model_path(), device="cpu", iou=-0.5)
    v8 = v8_model("yolov8n.onnx")
    if v8 is None:
        pytest.skip("no YOLOv8 export (scripts/v8/make_refs.sh): the YOLOv8 half of this test did not run")
    d8 = yolocu.Detector(v8, device="cpu")
    assert d8.iou == pytest.approx(0.7)
    assert yolocu.Detector(v8, device="cpu", _defaults="val").iou == pytest.approx(0.7)
    ref = run_cli_json(cli, ["detect", "--model", v8, "--device", "cpu", "--max-det", "300"] + samples, tmp_path)["images"]
    for res, entry in zip(d8(samples), ref):
        assert_same_as_cli(res, entry)


# ---- bad inputs: an exception naming the problem, and the process carries on -------------------

def test_bad_inputs_raise_and_process_survives(det, samples, cli_samples):
    img = yolocu.decode(samples[0])
    cases = [
        (img.astype(np.float32), TypeError, "float32"),
        (img.astype(np.uint16), TypeError, "uint16"),
        (img[:, :, 0].copy(), ValueError, "1 channel"),
        (np.zeros((20, 20, 4), np.uint8), ValueError, "4 channels"),
        (np.zeros((20, 20, 1), np.uint8), ValueError, "1 channels"),
        (np.zeros((20, 20, 3, 1), np.uint8), ValueError, "HxWx3"),
        (img[:, ::2], ValueError, "strides"),      # non-contiguous pixels
        (img[::-1], ValueError, "negative"),       # negative row stride
        (img[:, ::-1], ValueError, "strides"),     # negative pixel stride
        (np.asfortranarray(img), ValueError, "strides"),
        (np.zeros((0, 10, 3), np.uint8), ValueError, "empty"),
        (np.zeros((10, 0, 3), np.uint8), ValueError, "empty"),
        (b"", ValueError, "empty"),
        (b"this is not an image", ValueError, ""),
        (open(samples[0], "rb").read()[:2000], ValueError, ""),                 # truncated JPEG
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, ValueError, ""),                    # corrupt PNG
        (os.path.join(os.path.dirname(samples[0]), "no_such_image.jpg"), FileNotFoundError, "no_such_image"),
        (12345, TypeError, "int"),
        (None, TypeError, "NoneType"),
        ([[img]], TypeError, "nested"),
    ]
    for bad, exc, text in cases:
        with pytest.raises(exc) as info:
            det(bad)
        assert text in str(info.value), f"{exc.__name__} message {str(info.value)!r} does not name {text!r}"
        # an error in one image of a list fails the call, not the process
        with pytest.raises(exc):
            det([img, bad])
    assert_same_as_cli(det(img), cli_samples[0])  # still working


def test_bad_options_raise():
    with pytest.raises(FileNotFoundError):
        yolocu.Detector("no/such/model.onnx")
    with pytest.raises(ValueError, match="conf"):
        yolocu.Detector(model_path(), device="cpu", conf=2.0)
    with pytest.raises(ValueError, match="device"):
        yolocu.Detector(model_path(), device="tpu")
    with pytest.raises(ValueError, match="precision"):
        yolocu.Detector(model_path(), device="cpu", precision="int8")
    with pytest.raises(ValueError, match="batch"):
        yolocu.Detector(model_path(), device="cpu", batch=0)
    with pytest.raises(ValueError, match="max_det"):
        yolocu.Detector(model_path(), device="cpu", max_det=0)
    with pytest.raises(ValueError):
        yolocu.Detector(data_path("images", "bus.jpg"), device="cpu")  # not an ONNX file
    with pytest.raises(FileNotFoundError):
        yolocu.eval(model_path(), data_path("images"), "no/such/labels")
    with pytest.raises(ValueError, match="max_memory"):
        yolocu.Detector(model_path(), device="cpu", max_memory=-1)
    # a budget the model's activations do not fit: MemoryError naming the budget, nothing allocated
    with pytest.raises(MemoryError, match="memory budget"):
        yolocu.Detector(model_path(), device="cpu", max_memory=1 << 20)
    assert yolocu.Detector(model_path(), device="cpu", max_memory=1 << 30).names[0] == "person"
    with pytest.raises(ValueError, match="max_device_memory"):
        yolocu.Detector(model_path(), device="cpu", max_device_memory=-1)
    # the CPU engine allocates no device memory: a GPU budget does not constrain it
    assert yolocu.Detector(model_path(), device="cpu", max_device_memory=1).names[0] == "person"


def test_empty_list():
    d = yolocu.Detector(model_path("yolov5n_dyn.onnx"), device="cpu", imgsz=160)
    assert d([]) == []


# ---- memory and threads -------------------------------------------------------------------------

def rss_bytes():
    psutil = pytest.importorskip("psutil")
    return psutil.Process().memory_info().rss


def test_1000_calls_keep_rss_flat(samples):
    d = yolocu.Detector(model_path("yolov5n_dyn.onnx"), device="cpu", imgsz=160, threads=1)
    with open(samples[1], "rb") as f:
        encoded = f.read()
    img = yolocu.decode(samples[0])
    ref_a, ref_b = d(img), d(encoded)
    for _ in range(100):  # warm-up: allocator pools, engine plans
        d(img), d(encoded)
    gc.collect()
    before = rss_bytes()
    t0 = time.time()
    for i in range(1000):
        r = d(img) if i % 2 == 0 else d(encoded)
        ref = ref_a if i % 2 == 0 else ref_b
        assert len(r) == len(ref)
        assert time.time() - t0 < 300, "1000 calls took more than 300 s"
    gc.collect()
    grown = rss_bytes() - before
    # a leak of one decoded image per call (zidane: 2.6 MB) would be gigabytes
    assert grown < 16 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 1000 calls"


def test_threads_overlap_gil_released(samples):
    """4 Python threads call one Detector at once: results equal the single-threaded ones, and while
    they run in C++ a pure-Python loop on the main thread keeps running (the GIL is released)."""
    d = yolocu.Detector(model_path("yolov5n_dyn.onnx"), device="cpu", imgsz=320, threads=1)
    encoded = [open(p, "rb").read() for p in samples]
    expected = [d(e) for e in encoded]

    def spin(seconds):
        n, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            n += 1
        return n

    solo_rate = spin(0.5) / 0.5
    calls = 6
    errors, intervals = [], []
    lock = threading.Lock()

    def worker(k):
        try:
            for j in range(calls):
                e = (k + j) % 2
                t0 = time.perf_counter()
                r = d(encoded[e])
                t1 = time.perf_counter()
                with lock:
                    intervals.append((t0, t1, k))
                np.testing.assert_array_equal(r.boxes.xyxy, expected[e].boxes.xyxy)
                np.testing.assert_array_equal(r.boxes.conf, expected[e].boxes.conf)
        except Exception as ex:  # noqa: BLE001
            errors.append(repr(ex))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    n = 0
    while any(t.is_alive() for t in threads) and time.perf_counter() - t0 < 300:
        n += spin(0.05)
    for t in threads:
        t.join(timeout=300)
    elapsed = time.perf_counter() - t0
    assert not errors, errors
    assert len(intervals) == 4 * calls
    busy_rate = n / elapsed
    # Calls of different threads in flight at the same moment.
    events = sorted([(a, 1) for a, _, _ in intervals] + [(b, -1) for _, b, _ in intervals])
    depth = most = 0
    for _, step in events:
        depth += step
        most = max(most, depth)
    print(f"\n[threads] 4 threads x {calls} calls in {elapsed:.2f} s; up to {most} calls in flight; main-thread "
          f"Python loop at {100 * busy_rate / solo_rate:.0f}% of its solo rate while they ran")
    assert most >= 2
    # With the GIL held through each C++ call, the loop would stall for the whole run.
    assert busy_rate > 0.2 * solo_rate, f"main thread ran at {busy_rate / solo_rate:.2%} of its solo rate"


# ---- GPU (skips visibly without a CUDA build and device) ----------------------------------------

needs_gpu = pytest.mark.skipif(not yolocu.cuda_available(),
                               reason="no GPU: this build has no CUDA" if not yolocu.with_cuda else "no usable CUDA device")


@needs_gpu
def test_gpu_fp32_matches_cpu(samples, cli_samples):
    g = yolocu.Detector(model_path(), device="cuda", precision="fp32", max_det=300)
    assert g.device.startswith("cuda")
    for r, entry in zip(g(samples), cli_samples):
        boxes, scores, classes = cli_arrays(entry)
        assert len(r) == len(scores)
        np.testing.assert_array_equal(r.boxes.cls.astype(np.int32), classes)
        np.testing.assert_allclose(r.boxes.xyxy, boxes, atol=0.05)
        np.testing.assert_allclose(r.boxes.conf, scores, atol=1e-4)


@needs_gpu
def test_gpu_cuda_tensor_via_dlpack(samples):
    torch = pytest.importorskip("torch")
    g = yolocu.Detector(model_path(), device="cuda", max_det=300)
    img = yolocu.decode(samples[0])
    t = torch.from_numpy(img).cuda()
    a, b = g(img), g(t)  # host array, CUDA tensor read in place (Detector::detect_device)
    np.testing.assert_array_equal(a.boxes.xyxy, b.boxes.xyxy)
    np.testing.assert_array_equal(a.boxes.conf, b.boxes.conf)
    big = torch.zeros((img.shape[0] + 2, img.shape[1] + 5, 3), dtype=torch.uint8, device="cuda")
    big[1:1 + img.shape[0], 3:3 + img.shape[1]] = t
    for r in g([t, big[1:1 + img.shape[0], 3:3 + img.shape[1]]]):  # row-padded device view
        np.testing.assert_array_equal(r.boxes.xyxy, a.boxes.xyxy)
    c = yolocu.Detector(model_path(), device="cpu", max_det=300)(t)  # CPU detector: one copy to the host
    assert len(c) == len(a)


# ---- the README's example -----------------------------------------------------------------------

def test_readme_example_prints_the_cli_boxes(cli, tmp_path):
    """The README's Python block, run as written (file names pointed at the test material), prints
    `yolocu detect`'s boxes (same defaults: device auto, conf 0.25, iou 0.45; max_det 300)."""
    import contextlib
    import io
    import re
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")) as f:
        readme = f.read()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks, "no ```python block in README.md"
    model, image = model_path(), data_path("images", "bus.jpg")
    code = blocks[0].replace('"yolov5n.onnx"', repr(model)).replace('"bus.jpg"', repr(image))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    ref = run_cli_json(cli, ["detect", "--model", model, "--max-det", "300", image], tmp_path)["images"][0]
    expected = [f"{d['class_name']} {np.float32(d['confidence']):.3f} [" + " ".join(f"{np.float32(v):.1f}" for v in d["box"])
                + "]" for d in ref["detections"]]
    assert len(expected) >= 4
    assert lines[:-1] == expected
    assert json.loads(lines[-1]) == ref


def test_console_script_runs_the_cli_and_serve_help(samples, tmp_path):
    """`yolocu` (the package's console script) runs the C++ CLI for detect, and `yolocu serve --help`."""
    import subprocess
    import sys
    exe = os.path.join(os.path.dirname(sys.executable), "yolocu")
    if not os.path.isfile(exe):
        pytest.skip(f"no console script next to {sys.executable}")
    out = os.path.join(str(tmp_path), "c.json")
    p = subprocess.run([exe, "detect", "--model", model_path(), "--device", "cpu", "--max-det", "300", samples[0],
                        "--json", out, "--quiet"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    with open(out) as f:
        entry = json.load(f)["images"][0]
    assert_same_as_cli(yolocu.Detector(model_path(), device="cpu")(samples[0]), entry)
    p = subprocess.run([exe, "serve", "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "--http-port" in p.stdout and "--instances" in p.stdout
    p = subprocess.run([exe, "serve", "--model", "no/such.onnx"], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "no such file" in p.stderr


def test_serve_engine_graphs_flag():
    """yolocu serve: the backend's engine_graphs parameter, on by default, off by flag."""
    from yolocu.serve import build_parser, parameters
    base = ["--model", "m.onnx"]
    assert parameters(build_parser().parse_args(base))["engine_graphs"] == "on"
    assert parameters(build_parser().parse_args(base + ["--no-engine-graphs"]))["engine_graphs"] == "off"
    assert parameters(build_parser().parse_args(base + ["--engine-graphs"]))["engine_graphs"] == "on"
    assert "engine_graph_segments" not in parameters(build_parser().parse_args(base))
    assert parameters(build_parser().parse_args(base + ["--engine-graph-segments", "8"]))["engine_graph_segments"] == "8"


def test_serve_refuses_bad_graph_segments():
    """--engine-graph-segments: 1..64, and only with the engine as CUDA graphs; refused by name."""
    from yolocu.serve import _validate, build_parser
    base = ["--model", model_path()]
    _validate(build_parser().parse_args(base + ["--engine-graph-segments", "64"]))
    with pytest.raises(SystemExit, match="--engine-graph-segments must be in 1..64"):
        _validate(build_parser().parse_args(base + ["--engine-graph-segments", "0"]))
    with pytest.raises(SystemExit, match="not with --no-engine-graphs"):
        _validate(build_parser().parse_args(base + ["--engine-graph-segments", "4", "--no-engine-graphs"]))


def test_warm_up_checks_sizes(det):
    det.warm_up()          # every size 1..batch (nothing to prepare on the CPU)
    det.warm_up([1, 8])
    for bad in ([0], [9], [2, -1]):
        with pytest.raises(ValueError, match="outside 1..8"):
            det.warm_up(bad)
    assert len(det(data_path("images", "bus.jpg")).boxes) > 0  # still usable


def test_decode_option_checked_on_the_cpu():
    """decode="gpu" needs the CUDA detector: refused by name on a CPU detector; bad values too."""
    with pytest.raises(ValueError, match="decode must be 'cpu' or 'gpu'"):
        yolocu.Detector(model_path(), device="cpu", decode="jpeg")
    with pytest.raises(ValueError, match="decode"):
        yolocu.Detector(model_path(), device="cpu", decode="gpu")
    with pytest.raises(ValueError, match="decode_cpu_share"):
        yolocu.Detector(model_path(), device="cpu", decode_cpu_share=0.5)  # needs decode="gpu"


def test_engine_graphs_option():
    """engine_graphs: True by default, a bool taken as given, anything else refused by name; the
    detector reports what it uses."""
    with pytest.raises(TypeError, match="engine_graphs"):
        yolocu.Detector(model_path(), device="cpu", engine_graphs="yes")
    with pytest.raises(TypeError, match="engine_graphs"):
        yolocu.Detector(model_path(), device="cpu", engine_graphs=None)
    assert yolocu.Detector(model_path(), device="cpu").engine_graphs is True
    assert yolocu.Detector(model_path(), device="cpu", engine_graphs=False).engine_graphs is False


@needs_gpu
def test_gpu_decode_of_bytes_and_paths_matches_cpu_decode_gpu(samples):
    """decode="gpu" (nvJPEG, also with a CPU share): the same detections as CPU decode up to nvJPEG's
    pixel differences (same classes, boxes within 2 px), the original image sizes."""
    cpu = yolocu.Detector(model_path(), device="cuda", precision="fp32", batch=2)
    for share in (0.0, 0.5):
        gpu = yolocu.Detector(model_path(), device="cuda", precision="fp32", batch=2, decode="gpu",
                              decode_cpu_share=share)
        blobs = [open(p, "rb").read() for p in samples]
        for src in (samples, blobs):
            want, got = cpu(samples), gpu(src)
            for w, g in zip(want, got):
                assert g.orig_shape == w.orig_shape
                assert sorted(g.boxes.cls.astype(np.int32).tolist()) == sorted(w.boxes.cls.astype(np.int32).tolist())
                assert np.abs(np.sort(g.boxes.xyxy, axis=0) - np.sort(w.boxes.xyxy, axis=0)).max() <= 2.0


def _png_header(width, height):
    """A PNG that declares width x height (8-bit RGB) and holds no pixels."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", b""))  # an empty IDAT: libpng reads the header up to it


def test_max_pixels_limits_every_decode():
    """Detector(max_pixels=) holds for paths and bytes (the decode pool used the library's defaults
    before); arrays are not decoded and pass; the default refuses a declared 16384x16384 image."""
    bus = data_path("images", "bus.jpg")  # 810x1080 = 874,800 pixels
    with open(bus, "rb") as f:
        encoded = f.read()
    tight = yolocu.Detector(model_path(), device="cpu", max_pixels=874_799)
    with pytest.raises(MemoryError, match=r"bus\.jpg: image of 810x1080 pixels exceeds .*max_pixels 874799"):
        tight(bus)
    with pytest.raises(MemoryError, match="max_pixels 874799"):
        tight(encoded)
    assert len(tight(yolocu.decode(bus)).boxes) > 0
    assert len(yolocu.Detector(model_path(), device="cpu", max_pixels=874_800)(bus).boxes) > 0
    with pytest.raises(ValueError, match="max_pixels"):
        yolocu.Detector(model_path(), device="cpu", max_pixels=0)
    with pytest.raises(MemoryError, match="max_pixels 50000000"):
        yolocu.Detector(model_path(), device="cpu")(_png_header(16384, 16384))


def test_decode_has_the_same_limits():
    """yolocu.decode refuses what a Detector refuses: max_pixels (default 50M: a declared 16384x16384
    PNG header), by name and limit, before allocating; a bad limit is a ValueError."""
    bus = data_path("images", "bus.jpg")  # 810x1080 = 874,800 pixels
    with pytest.raises(MemoryError, match=r"bus\.jpg: image of 810x1080 pixels exceeds .*max_pixels 874799"):
        yolocu.decode(bus, max_pixels=874_799)
    with open(bus, "rb") as f:
        with pytest.raises(MemoryError, match="max_pixels 874799"):
            yolocu.decode(f.read(), max_pixels=874_799)
    assert yolocu.decode(bus, max_pixels=874_800).shape == (1080, 810, 3)
    with pytest.raises(MemoryError, match="max_pixels 50000000"):
        yolocu.decode(_png_header(16384, 16384))
    with pytest.raises(ValueError, match="max_pixels"):
        yolocu.decode(bus, max_pixels=0)
