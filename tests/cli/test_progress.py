"""The progress line with an ETA on stderr (folders of images, eval, video files): printed when
stderr is a terminal or when --progress asks for it, never on stdout. Needs YOLOCU_BIN and the test
material (YOLOCU_DATA_DIR; the video clip of scripts/video/make_refs.sh in YOLOCU_VIDEO_DIR)."""
import json
import os
import re
import subprocess
import tempfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("YOLOCU_BIN", os.path.join(ROOT, "build", "apps", "yolocu", "yolocu"))
DATA = os.environ.get("YOLOCU_DATA_DIR", os.path.join(ROOT, "..", "shared", "data"))
MODEL = os.path.join(DATA, "models", "yolov5n.onnx")
IMAGES = os.path.join(DATA, "coco128", "images", "train2017")
LABELS = os.path.join(DATA, "coco128", "labels", "train2017")
CLIP = os.path.join(os.environ.get("YOLOCU_VIDEO_DIR", os.path.join(ROOT, ".data", "video", "refs")), "clip_h264_360.mp4")
ETA = re.compile(r"ETA \d+:\d\d")

pytestmark = pytest.mark.skipif(not (os.path.isfile(MODEL) and os.path.isdir(IMAGES)), reason=f"no {MODEL} or {IMAGES}")


def yolocu(*args):
    # in a temporary folder: detect saves its annotated images into ./runs/detect/predict* by default
    with tempfile.TemporaryDirectory() as cwd:
        return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=600, cwd=cwd)


def two_images():
    return [os.path.join(IMAGES, f) for f in ("000000000009.jpg", "000000000025.jpg")]


def test_eval_progress():
    p = yolocu("eval", "--model", MODEL, *two_images(), "--labels", LABELS, "--progress", "--json", "-")
    assert p.returncode == 0, p.stderr
    assert "[2/2]" in p.stderr and ETA.search(p.stderr), p.stderr
    json.loads(p.stdout)  # stdout holds the JSON alone
    p = yolocu("eval", "--model", MODEL, *two_images(), "--labels", LABELS)
    assert p.returncode == 0 and "[2/2]" not in p.stderr, p.stderr  # not a terminal, not asked
    assert "mAP50-95" in p.stdout  # without --json -, the table is on stdout


def test_detect_images_progress():
    p = yolocu("detect", "--model", MODEL, *two_images(), "--progress", "1", "--json", "-")
    assert p.returncode == 0, p.stderr
    assert "[2/2]" in p.stderr and ETA.search(p.stderr), p.stderr
    assert "[2/2]" not in yolocu("detect", "--model", MODEL, *two_images()).stderr


@pytest.mark.skipif(not os.path.isfile(CLIP), reason=f"no {CLIP} (scripts/video/make_refs.sh)")
def test_video_progress():
    p = yolocu("detect", "--model", MODEL, "--source", CLIP, "--frames", "8", "--progress", "0.1", "--jsonl", os.devnull)
    assert p.returncode == 0, p.stderr
    assert re.search(r"\d+ frames of 8, ETA \d+:\d\d", p.stderr), p.stderr
    p = yolocu("detect", "--model", MODEL, "--source", CLIP, "--frames", "8", "--jsonl", os.devnull)
    assert "ETA" not in p.stderr, p.stderr
