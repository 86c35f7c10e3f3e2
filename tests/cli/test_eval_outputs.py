"""yolocu eval's outputs checked against their peers: --save-json evaluated by pycocotools,
--plots drawn by matplotlib (python/yolocu/plots.py) and read back with PIL, --data data.yaml with
labels inferred as ultralytics does, --json - on stdout, a label class the model lacks.

Runs the CLI once over coco128 with yolov5n (module fixture). Needs YOLOCU_BIN (the yolocu binary)
and YOLOCU_DATA_DIR (test material); skips without the material.

pycocotools vs yolocu eval's mAP50-95: both match detections to labels the same way (greedy by
score, best IoU), but COCO's AP is a 101-point interpolation sampled on the precision envelope
(np.searchsorted: the precision at the first recall >= each point), while ultralytics' compute_ap
integrates the same envelope with np.trapz over np.interp. COCO also evaluates crowd regions and
area ranges (none here: iscrowd 0) and keeps at most 100 detections per image (maxDets) where
val.py keeps 300. On coco128 these move mAP50-95 by about 0.01; the test allows 0.02.
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("YOLOCU_BIN", os.path.join(ROOT, "build", "apps", "yolocu", "yolocu"))
DATA = os.environ.get("YOLOCU_DATA_DIR", os.path.join(ROOT, "..", "shared", "data"))
COCO128 = os.path.join(DATA, "coco128")
MODEL = os.path.join(DATA, "models", "yolov5n.onnx")
COCO91 = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32, 33,
          34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61,
          62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90]

pytestmark = pytest.mark.skipif(not (os.path.isfile(MODEL) and os.path.isdir(COCO128)),
                                reason=f"test material absent ({MODEL}, {COCO128})")


def coco_names():
    with open(os.path.join(DATA, "coco.names"), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def write_data_yaml(path, names, root=COCO128, val="images/train2017"):
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"path: {root}\ntrain: {val}\nval: {val}\nnames:\n")
        for i, n in enumerate(names):
            f.write(f"  {i}: {n}\n")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One eval over coco128 through --data, every output asked for."""
    tmp = tmp_path_factory.mktemp("eval")
    data = tmp / "coco128.yaml"
    write_data_yaml(data, coco_names())
    out = {"coco": tmp / "predictions.json", "plots": tmp / "plots", "tmp": tmp}
    env = dict(os.environ, YOLOCU_PYTHON=os.environ.get("YOLOCU_PYTHON", sys.executable))
    p = subprocess.run([BIN, "eval", "--model", MODEL, "--data", str(data), "--json", "-", "--save-json",
                        str(out["coco"]), "--plots", str(out["plots"]), "--verbose"],
                       capture_output=True, text=True, env=env, timeout=1200)
    assert p.returncode == 0, p.stderr
    out["json"] = json.loads(p.stdout)  # --json -: stdout is the JSON and nothing else
    out["stderr"] = p.stderr
    return out


def coco_ground_truth(path):
    """COCO-format ground truth from coco128's YOLO label files (image sizes read by PIL)."""
    from PIL import Image
    img_dir = os.path.join(COCO128, "images", "train2017")
    images, annotations = [], []
    for name in sorted(os.listdir(img_dir)):
        stem = os.path.splitext(name)[0]
        with Image.open(os.path.join(img_dir, name)) as im:
            w, h = im.size
        images.append({"id": int(stem), "file_name": name, "width": w, "height": h})
        label = os.path.join(COCO128, "labels", "train2017", stem + ".txt")
        if not os.path.exists(label):
            continue
        seen = set()
        for line in open(label, encoding="utf-8"):
            v = line.split()
            if not v or tuple(v) in seen:  # duplicate rows dropped, as ultralytics' loader does
                continue
            seen.add(tuple(v))
            c, cx, cy, bw, bh = int(v[0]), *map(float, v[1:5])
            box = [(cx - bw / 2) * w, (cy - bh / 2) * h, bw * w, bh * h]
            annotations.append({"id": len(annotations) + 1, "image_id": int(stem), "category_id": COCO91[c],
                                "bbox": box, "area": box[2] * box[3], "iscrowd": 0})
    cats = [{"id": COCO91[i], "name": n} for i, n in enumerate(coco_names())]
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"images": images, "annotations": annotations, "categories": cats}, f)


def test_save_json_pycocotools(run):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    preds = json.load(open(run["coco"], encoding="utf-8"))
    assert preds and all(set(p) == {"image_id", "category_id", "bbox", "score"} for p in preds)
    assert {p["category_id"] for p in preds} <= set(COCO91)
    gt_path = run["tmp"] / "gt.json"
    coco_ground_truth(gt_path)
    gt = COCO(str(gt_path))
    ev = COCOeval(gt, gt.loadRes(str(run["coco"])), "bbox")
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    ours = run["json"]["metrics"]["map50_95"]
    print(f"pycocotools mAP50-95 {ev.stats[0]:.4f}, mAP50 {ev.stats[1]:.4f}; yolocu eval {ours:.4f}, "
          f"mAP50 {run['json']['metrics']['map50']:.4f}")
    assert abs(ev.stats[0] - ours) < 0.02
    assert abs(ev.stats[1] - run["json"]["metrics"]["map50"]) < 0.02


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


def test_plots(run):
    from PIL import Image
    plots = run["plots"]
    files = ["PR_curve.png", "F1_curve.png", "P_curve.png", "R_curve.png", "confusion_matrix.png",
             "confusion_matrix_normalized.png"]
    if not (plots / "PR_curve.png").exists():  # drawn by the CLI when YOLOCU_PYTHON has the package
        subprocess.run([sys.executable, os.path.join(ROOT, "python", "yolocu", "plots.py"), str(plots)], check=True)
    for f in files:
        w, h = png_size(plots / f)
        with Image.open(plots / f) as im:
            im.verify()
        assert 400 <= w <= 4000 and 300 <= h <= 4000, (f, w, h)
    # the data behind them is the eval's
    curves = json.load(open(plots / "curves.json", encoding="utf-8"))
    metrics = run["json"]["metrics"]
    by_id = {c["class_id"]: c for c in metrics["per_class"]}
    best = curves["best_index"]
    assert len(curves["x"]) == 1000 and len(curves["classes"]) == len(by_id)
    for c in curves["classes"]:
        m = by_id[c["class_id"]]
        assert c["name"] == m["name"]
        assert c["precision"][best] == pytest.approx(m["precision"], abs=1e-9)
        assert c["recall"][best] == pytest.approx(m["recall"], abs=1e-9)
        # the PR curve integrates to the class's AP50 (1000 points vs compute_ap's 101)
        assert np.trapezoid(c["pr"], curves["x"]) == pytest.approx(m["ap50"], abs=0.02)
    assert np.mean([c["precision"][best] for c in curves["classes"]]) == pytest.approx(metrics["precision"], abs=1e-9)
    # confusion matrix: every label counted once, in its true class's column
    cm = json.load(open(plots / "confusion_matrix.json", encoding="utf-8"))
    matrix = np.asarray(cm["matrix"])
    assert matrix.shape == (81, 81) and cm["names"] == coco_names()
    column = matrix.sum(0)
    for cid, m in by_id.items():
        assert column[cid] == m["labels"], cid
    assert column[:80].sum() == metrics["num_labels"]


def test_json_stdout_names(run):
    metrics = run["json"]["metrics"]
    assert metrics["num_images"] == 128 and metrics["per_class"][0]["name"] == "person"
    assert "mAP50-95" in run["stderr"]  # the table went to stderr


def eval_cmd(*args, timeout=600):
    return subprocess.run([BIN, "eval", "--model", MODEL, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def small_dataset(tmp, label_text):
    """images/x.jpg + labels/x.txt, ultralytics' layout, one image of coco128."""
    (tmp / "images").mkdir()
    (tmp / "labels").mkdir()
    src = os.path.join(COCO128, "images", "train2017", "000000000009.jpg")
    os.symlink(src, tmp / "images" / "000000000009.jpg")
    (tmp / "labels" / "000000000009.txt").write_text(label_text)
    return tmp


def test_inferred_labels_and_list_names(tmp_path):
    """--data with names as a list; labels found at images/ -> labels/ without --labels."""
    label = open(os.path.join(COCO128, "labels", "train2017", "000000000009.txt")).read()
    ds = small_dataset(tmp_path, label)
    (ds / "data.yaml").write_text("path: .\nval: images\nnames: [" + ", ".join(coco_names()) + "]\n")
    p = eval_cmd("--data", ds / "data.yaml", "--json", "-", "--quiet")
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)["metrics"]
    assert m["num_labels"] == len(label.strip().splitlines()) and m["map50"] > 0.3
    p = eval_cmd("--images", ds / "images", "--json", "-", "--quiet")  # --images alone: inferred too
    assert p.returncode == 0 and json.loads(p.stdout)["metrics"]["num_labels"] == m["num_labels"], p.stderr


def test_label_class_outside_model(tmp_path):
    ds = small_dataset(tmp_path, "45 0.5 0.5 0.2 0.2\n80 0.5 0.5 0.1 0.1\n")
    p = eval_cmd("--images", ds / "images", "--quiet")
    assert p.returncode == 1
    assert "000000000009.txt:2: class id 80 is not a class of the model" in p.stderr, p.stderr


def test_data_yaml_errors(tmp_path):
    (tmp_path / "a.yaml").write_text("path: .\nnames: [a]\n")
    p = eval_cmd("--data", tmp_path / "a.yaml")
    assert p.returncode == 2 and "has no 'val'" in p.stderr, p.stderr
    (tmp_path / "b.yaml").write_text("val: [unclosed\n")
    p = eval_cmd("--data", tmp_path / "b.yaml")
    assert p.returncode == 2 and "b.yaml" in p.stderr, p.stderr
    write_data_yaml(tmp_path / "c.yaml", ["a", "b"])
    p = eval_cmd("--data", tmp_path / "c.yaml")
    assert p.returncode == 2 and "names 2 classes, the model has 80" in p.stderr, p.stderr


def test_v8_save_json_clips_the_boxes_its_matching_leaves_whole(tmp_path):
    """YOLOv8: the matching uses the boxes unclipped (ultralytics 8.4's val), --json keeps them so,
    and --save-json clips them to the image as val's scale_boxes does for its JSON."""
    v8 = os.environ.get("YOLOCU_V8_DIR", os.path.join(ROOT, ".data", "v8", "refs"))
    model = os.path.join(v8, "yolov8n.onnx")
    if not os.path.isfile(model):
        if os.environ.get("YOLOCU_REQUIRE_V8"):
            pytest.fail(f"no {model} (scripts/v8/make_refs.sh)")
        pytest.skip(f"no YOLOv8 test model {model} (scripts/v8/make_refs.sh)")
    img_dir = os.path.join(COCO128, "images", "train2017")
    images = [os.path.join(img_dir, f) for f in sorted(os.listdir(img_dir))[:8]]
    jpath, cpath = tmp_path / "eval.json", tmp_path / "coco.json"
    p = subprocess.run([BIN, "eval", "--model", model, "--images", *images, "--labels",
                        os.path.join(COCO128, "labels", "train2017"), "--device", "cpu", "--quiet", "--json", str(jpath),
                        "--save-json", str(cpath)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    result, coco = json.loads(jpath.read_text()), json.loads(cpath.read_text())
    sizes = {int(os.path.splitext(os.path.basename(im["path"]))[0]): (im["width"], im["height"]) for im in result["images"]}
    outside = sum(1 for im in result["images"] for d in im["detections"]
                  if min(d["box"][:2]) < 0 or d["box"][2] > im["width"] or d["box"][3] > im["height"])
    assert outside > 0, "no detection reaches past its image: the test shows nothing"
    assert len(coco) == sum(len(im["detections"]) for im in result["images"])
    for pred in coco:
        x, y, w, h = pred["bbox"]
        width, height = sizes[pred["image_id"]]
        assert x >= 0 and y >= 0 and x + w <= width + 2e-3 and y + h <= height + 2e-3, pred
