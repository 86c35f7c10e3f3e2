"""ultralytics-style results and predict(): Results / Boxes attributes on images, folders and a
video, per-call overrides against Detectors built with those options, stream=True's memory over a
long clip, plot() against the CLI's saved PNG, labels kept inside the image, to_json / to_df /
save_txt, the deprecated names. CPU."""
import glob
import json
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

import yolocu
from conftest import data_path

MODEL = "yolov5n.onnx"


def model_path():
    return data_path("models", MODEL)


@pytest.fixture(scope="module")
def det():
    return yolocu.Detector(model_path(), device="cpu", batch=4)


@pytest.fixture(scope="module")
def bus():
    return data_path("images", "bus.jpg")


@pytest.fixture(scope="module")
def folder(tmp_path_factory, bus):
    d = tmp_path_factory.mktemp("imgs")
    shutil.copy(bus, d / "a.jpg")
    shutil.copy(data_path("images", "zidane.jpg"), d / "b.jpg")
    return str(d)


def make_clip(path, frames, size="96x64", rate=25):
    """A clip encoded by the ffmpeg tool (FFmpeg's test pattern, H.264 or MPEG-4)."""
    ffmpeg = shutil.which("ffmpeg")
    if not ffmpeg:
        pytest.skip("the ffmpeg tool is missing (scripts/setup.sh installs it)")
    if not yolocu._yolocu.video_supported():
        pytest.skip("this build reads no video (no FFmpeg)")
    subprocess.run([ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc=size={size}:rate={rate}",
                    "-frames:v", str(frames), "-pix_fmt", "yuv420p", str(path)], check=True, timeout=300)
    return str(path)


# ---- attributes ----------------------------------------------------------------------------------

def check_boxes(r):
    b = r.boxes
    h, w = r.orig_shape
    assert isinstance(b, yolocu.Boxes) and len(b) == len(r) > 0
    assert b.data.dtype == np.float32 and b.data.shape == (len(r), 6)
    np.testing.assert_array_equal(b.xyxy, b.data[:, :4])
    np.testing.assert_array_equal(b.conf, b.data[:, 4])
    np.testing.assert_array_equal(b.cls, b.data[:, 5])
    assert b.id is None and not b.is_track
    x = b.xyxy.astype(np.float64)
    xywh = np.stack([(x[:, 0] + x[:, 2]) / 2, (x[:, 1] + x[:, 3]) / 2, x[:, 2] - x[:, 0], x[:, 3] - x[:, 1]], 1)
    np.testing.assert_allclose(b.xywh, xywh, rtol=1e-6)
    np.testing.assert_allclose(b.xyxyn, x / [w, h, w, h], rtol=1e-6)
    np.testing.assert_allclose(b.xywhn, xywh / [w, h, w, h], rtol=1e-6)
    assert [len(one) for one in b] == [1] * len(b)
    np.testing.assert_array_equal(next(iter(b)).data, b.data[:1])
    assert len(b[b.conf > 0.5]) == int((b.conf > 0.5).sum())
    assert set(r.speed) == {"preprocess", "inference", "postprocess"} and r.speed["inference"] > 0
    assert r.names[0] == "person"


def test_image_attributes(det, bus):
    r = det.predict(bus)
    check_boxes(r)
    assert r.path == bus and r.orig_shape == (1080, 810)
    img = yolocu.decode(bus)
    ra = det(img)
    np.testing.assert_array_equal(ra.boxes.data, r.boxes.data)
    assert ra.orig_img is img and ra.path == "image0"


def test_folder_glob_and_list(det, folder):
    by_folder = det(folder)
    by_glob = det(os.path.join(folder, "*.jpg"))
    by_list = det(sorted(glob.glob(os.path.join(folder, "*.jpg"))))
    assert [r.path for r in by_folder] == [r.path for r in by_glob] == [r.path for r in by_list]
    assert [os.path.basename(r.path) for r in by_folder] == ["a.jpg", "b.jpg"]
    for a, b in zip(by_folder, by_list):
        check_boxes(a)
        np.testing.assert_array_equal(a.boxes.data, b.boxes.data)
    streamed = list(det.predict(folder, stream=True))
    for a, b in zip(by_folder, streamed):
        np.testing.assert_array_equal(a.boxes.data, b.boxes.data)


def test_video_frames_match_images(det, tmp_path):
    clip = make_clip(tmp_path / "clip.mp4", 6, size="320x240")
    res = det(clip)
    assert isinstance(res, list) and [r.frame for r in res] == list(range(6))
    assert all(r.path == clip and r.orig_shape == (240, 320) for r in res)
    # each frame's detections are those of the frame as an image (the reader's pixels)
    for r in res[:2]:
        np.testing.assert_array_equal(det(r.orig_img).boxes.data, r.boxes.data)
    strided = det(clip, vid_stride=2)
    assert [r.frame for r in strided] == [1, 3, 5]  # ultralytics' --vid-stride: frames N-1, 2N-1, ...
    with pytest.raises(FileNotFoundError):
        det(str(tmp_path / "missing.mp4"))


# ---- per-call options ------------------------------------------------------------------------------

@pytest.mark.parametrize("opts", [{"conf": 0.6}, {"iou": 0.9}, {"classes": [0]}, {"max_det": 2},
                                  {"conf": 0.05, "iou": 0.3, "max_det": 50, "agnostic": True}])
def test_per_call_options_equal_a_detector_built_with_them(det, bus, opts):
    ref = yolocu.Detector(model_path(), device="cpu", batch=4, **opts)(bus)
    before = det._det
    own = det(bus)
    got = det(bus, **opts)
    assert det._det is before  # the same engine
    np.testing.assert_array_equal(got.boxes.data, ref.boxes.data)
    assert not np.array_equal(got.boxes.data, own.boxes.data)  # the options changed something
    # the next call without options is the Detector's own again
    np.testing.assert_array_equal(det(bus).boxes.data, own.boxes.data)


def test_per_call_options_are_checked(det, bus):
    for bad in ({"conf": 1.5}, {"iou": -0.1}, {"max_det": 0}, {"classes": [80]}):
        with pytest.raises(ValueError):
            det(bus, **bad)


# ---- stream=True -------------------------------------------------------------------------------------

def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_stream_memory_is_flat_over_a_long_clip(tmp_path):
    clip = make_clip(tmp_path / "long.mp4", 1200, size="64x48", rate=50)
    small = yolocu.Detector(data_path("models", "yolov5n_dyn.onnx"), device="cpu", imgsz=64, batch=4)
    gen = small.predict(clip, stream=True)
    assert not isinstance(gen, list)
    n, base = 0, None
    for r in gen:
        assert r.frame == n
        n += 1
        if n == 200:
            base = rss_bytes()
    grown = rss_bytes() - base
    assert n == 1200
    assert grown < 16 << 20, f"RSS grew {grown / 2**20:.1f} MiB over 1000 streamed frames"


# ---- drawing -------------------------------------------------------------------------------------

def test_plot_equals_the_cli_saved_png(det, cli, bus, tmp_path):
    src = str(tmp_path / "bus.png")
    yolocu._yolocu.write_image(src, yolocu.decode(bus))  # a lossless input: the CLI saves a PNG too
    out = tmp_path / "out"
    proc = subprocess.run([cli, "detect", "--model", model_path(), "--device", "cpu", "--save-img", "--quiet",
                           "--output-dir", str(out), src], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    saved = yolocu.decode(str(out / "bus.png"))
    plotted = det(src).plot()
    assert plotted.shape == saved.shape and plotted.dtype == np.uint8
    assert np.array_equal(plotted, saved)
    assert not np.array_equal(plotted, yolocu.decode(src))  # something was drawn


def test_label_near_the_right_edge_stays_inside():
    h, w = 120, 200
    img = np.zeros((h, w, 3), np.uint8)
    data = np.array([[185, 60, 200, 110, 0.82, 0]], np.float32)  # a box against the right edge
    r = yolocu.Results(yolocu.Boxes(data, (h, w)), {0: "person"}, (h, w), orig_img=img)
    out = r.plot()
    colour = np.array([0xFF, 0x2A, 0x04], np.uint8)  # ultralytics' colors(0, bgr=True)
    ys, xs = np.nonzero(np.all(out == colour, axis=2))
    label = ys < 60  # the label sits above the box (y1 = 60)
    assert label.any()
    assert xs[label].max() == w - 1  # ends at the right edge ...
    assert xs[label].min() < 185 - 60  # ... moved left: "person 0.82" is wider than 15 px
    text = np.all(out == 255, axis=2)[:60]  # white text on the blue label
    assert text.any() and np.nonzero(text)[1].max() < w - 1
    assert out.shape == img.shape and not img.any()  # plot() draws on a copy


# ---- exports ---------------------------------------------------------------------------------------

def test_summary_json_df_and_save_txt(det, bus, tmp_path, monkeypatch):
    r = det(bus)
    s = r.summary()
    assert json.loads(r.to_json()) == s
    assert s[0]["name"] == r.names[int(r.boxes.cls[0])] and set(s[0]["box"]) == {"x1", "y1", "x2", "y2"}
    assert s[0]["confidence"] == round(float(r.boxes.conf[0]), 5)
    sn = r.summary(normalize=True)
    assert sn[0]["box"]["x2"] == round(float(r.boxes.xyxy[0, 2]) / r.orig_shape[1], 5)
    txt = r.save_txt(tmp_path / "labels" / "bus.txt", save_conf=True)
    lines = open(txt).read().splitlines()
    assert len(lines) == len(r)
    for line, c, xywhn, conf in zip(lines, r.boxes.cls, r.boxes.xywhn, r.boxes.conf):
        assert line == ("%g " * 6).rstrip() % (int(c), *xywhn.tolist(), float(conf))
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if pandas were not installed
    with pytest.raises(ImportError, match="pip install pandas"):
        r.to_df()


def test_to_df_round_trips(det, bus):
    pd = pytest.importorskip("pandas")
    r = det(bus)
    df = r.to_df()
    assert isinstance(df, pd.DataFrame) and len(df) == len(r)
    assert df.to_dict("records") == r.summary()


def test_save_writes_the_plot(det, bus, tmp_path):
    r = det(bus)
    f = r.save(str(tmp_path / "bus.png"))
    assert np.array_equal(yolocu.decode(f), r.plot())


def test_deprecated_names_warn_and_still_work(det, bus):
    r = det(bus)
    with pytest.warns(DeprecationWarning):
        np.testing.assert_array_equal(r.scores, r.boxes.conf)
    with pytest.warns(DeprecationWarning):
        np.testing.assert_array_equal(r.classes, r.boxes.cls.astype(np.int32))
    with pytest.warns(DeprecationWarning):
        np.testing.assert_array_equal(np.asarray(r.boxes), r.boxes.xyxy)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r.boxes.xyxy, r.boxes.conf, r.summary()  # the new names do not warn


def test_tracked_layout():
    data = np.array([[10, 20, 50, 80, 7, 0.9, 2]], np.float32)  # a tracker's N x 7: xyxy, id, conf, cls
    r = yolocu.Results(yolocu.Boxes(data, (100, 100)), {2: "car"}, (100, 100), orig_img=np.zeros((100, 100, 3),
                                                                                                np.uint8))
    assert r.boxes.is_track and r.boxes.id.tolist() == [7] and r.boxes.conf.tolist() == [np.float32(0.9)]
    assert r.summary()[0]["track_id"] == 7
    assert r.plot().any()


def test_tracker_rows_make_tracked_results(det, bus, tmp_path):
    """yolocu.Tracker takes res.boxes as ultralytics' trackers take Boxes; its first 7 columns are
    ultralytics' tracked layout, so res.new() gives Results with ids."""
    res = det(bus)
    tracker = yolocu.Tracker("bytetrack.yaml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecated path on the way
        tracks = tracker.update(res.boxes, img=res.orig_img)
    assert len(tracks) > 0
    tracked = res.new(tracks[:, :7])
    assert tracked.boxes.is_track and tracked.boxes.id.tolist() == tracks[:, 4].tolist()
    np.testing.assert_array_equal(tracked.boxes.cls, tracks[:, 6])
    lines = open(tracked.save_txt(tmp_path / "t.txt")).read().splitlines()
    assert [int(line.split()[-1]) for line in lines] == [int(i) for i in tracks[:, 4]]
    assert not np.array_equal(tracked.plot(img=yolocu.decode(bus)), res.plot(img=yolocu.decode(bus)))  # "id:N" labels


def test_supervision_detections(det, bus):
    sv = pytest.importorskip("supervision")
    r = det(bus)
    d = r.to_supervision()
    assert isinstance(d, sv.Detections) and len(d) == len(r)
    np.testing.assert_array_equal(d.xyxy, r.boxes.xyxy)
    np.testing.assert_array_equal(d.class_id, r.boxes.cls.astype(int))


def test_torch_tensor_input(det, bus):
    torch = pytest.importorskip("torch")
    img = yolocu.decode(bus)
    t = torch.from_numpy(img[:, :, ::-1].copy()).permute(2, 0, 1)[None].float() / 255  # BCHW RGB 0..1
    r = det(t)
    np.testing.assert_array_equal(r.boxes.data, det(img).boxes.data)


needs_gpu = pytest.mark.skipif(not yolocu.cuda_available(),
                               reason="GPU test: needs a CUDA build of yolocu and a usable GPU")


@needs_gpu
def test_gpu_per_call_options_equal_a_gpu_detector_built_with_them(bus):
    """The CUDA detector's per-call workspace: each option set, then back to the Detector's own,
    then the first set again (the workspace made anew as the set changes), each equal to a CUDA
    Detector built with those options; paths (host images) and decode="gpu" (nvJPEG) alike."""
    sets = [{"conf": 0.6}, {"iou": 0.9, "max_det": 3}, {"classes": [0], "agnostic": True}, {"conf": 0.6}]
    for decode in ("cpu", "gpu"):
        try:
            det = yolocu.Detector(model_path(), device="cuda", precision="fp32", batch=4, decode=decode)
        except ValueError:
            if decode == "gpu":  # a build without nvJPEG
                continue
            raise
        own = det(bus)
        for opts in sets:
            ref = yolocu.Detector(model_path(), device="cuda", precision="fp32", batch=4, decode=decode, **opts)(bus)
            np.testing.assert_array_equal(det(bus, **opts).boxes.data, ref.boxes.data, err_msg=f"{decode} {opts}")
            np.testing.assert_array_equal(det(bus).boxes.data, own.boxes.data)
