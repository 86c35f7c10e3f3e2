"""Trained YOLOv8 / YOLO11 weights for the accuracy checks that random weights cannot make.

The test models of scripts/v8/make_refs.py carry fixed-seed random weights: their raw outputs and
detections check the engine against ultralytics, but their mAP is meaningless, so "FP16 mAP within
0.002 of FP32" and INT8's mAP drop (docs/int8.md) cannot be measured on them, and the project's data
holds no trained v8 / 11 weights. This script trains them from ultralytics' own yaml files on coco128
(from scratch, nothing downloaded), with the pinned ultralytics package of make_refs.sh's venv:

    python3 scripts/v8/train_coco128.py --ultralytics DIR --data DATA --out OUT \
        [--models yolov8n,yolo11n] [--epochs 200] [--minutes M] [--imgsz 640] [--batch 16] [--device 0]

--minutes M trains each model for M minutes instead (ultralytics' `time`: the epochs are re-estimated
after the first one so that the learning-rate schedule ends on time). DIR: the folder holding the
`ultralytics` package (the GPU bundle's copy, or the venv's site-packages); DATA: test material with coco128/images/train2017 and coco128/labels/train2017.
Writes OUT/<model>.pt (the last epoch's weights, as ultralytics saves them, without the optimiser),
OUT/<model>_train.json (epochs, seconds, ultralytics' own val metrics on coco128 at the end) and the
training logs. Training and validating on the same 128 images measures nothing about the model's
quality; it makes weights whose detections are real objects, which is all the precision checks
need. Then `scripts/v8/make_refs.sh` with YOLOCU_V8_WEIGHTS=OUT makes the exports and ultralytics'
references from these weights (docs/gpu-runs.md). Nothing it writes is ever committed.
"""
import argparse
import json
import os
import shutil
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from coco128_dataset import stage_coco128  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ultralytics", required=True, help="folder holding the ultralytics package")
    ap.add_argument("--data", required=True, help="test material (coco128/images, coco128/labels)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="yolov8n,yolo11n")
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--minutes", type=float, default=0, help="train each model this long instead of --epochs")
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--device", default="0", help="ultralytics' device: 0 (the first GPU) or cpu")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--fraction", type=float, default=1.0, help="share of coco128 used (a quick check)")
    args = ap.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    coco = Path(args.data).resolve() / "coco128"
    if not (coco / "images/train2017").is_dir() or not (coco / "labels/train2017").is_dir():
        print(f"[v8 train] {coco} lacks images/train2017 or labels/train2017", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(args.ultralytics).resolve()))
    os.environ.setdefault("YOLO_CONFIG_DIR", str(out / "config"))
    os.environ["YOLO_OFFLINE"] = "1"  # no hub, no update checks
    os.environ["YOLO_AUTOINSTALL"] = "false"  # a missing package is an error, not a pip install
    os.environ.setdefault("MPLBACKEND", "Agg")

    try:  # the trainer reads its results.csv back with polars for each checkpoint, inside a try
        import polars  # noqa: F401
    except ImportError:  # (the GPU machine has none): a stand-in whose reader fails, so that it is left out
        polars = types.ModuleType("polars")

        def read_csv(*_args, **_kwargs):
            raise ImportError("polars is not installed")

        polars.read_csv = read_csv
        sys.modules["polars"] = polars
    import torch
    import ultralytics
    from ultralytics import YOLO
    from ultralytics.utils import ROOT, YAML

    print(f"[v8 train] ultralytics {ultralytics.__version__}, torch {torch.__version__}, "
          f"device {args.device}", flush=True)
    names = YAML.load(ROOT / "cfg/datasets/coco.yaml")["names"]
    data_yaml = stage_coco128(coco, out / "coco128", names)

    for name in args.models.split(","):
        torch.manual_seed(0)
        start = time.time()
        yolo = YOLO(f"{name}.yaml", task="detect")
        # amp=False: ultralytics' AMP check downloads a model; plots=False: plotting fetches a font;
        # val=False: validated once, after the last epoch (below), not after every one
        yolo.train(data=str(data_yaml), epochs=args.epochs, imgsz=args.imgsz, batch=args.batch,
                   device=args.device, workers=args.workers, pretrained=False, amp=False, plots=False,
                   val=False, cache="ram",
                   project=str(out / "runs"), name=name, exist_ok=True, seed=0, deterministic=False,
                   fraction=args.fraction, verbose=False, **({"time": args.minutes / 60} if args.minutes else {}))
        epochs = yolo.trainer.epoch + 1 if args.minutes else args.epochs  # the epochs that ran in time mode
        seconds = time.time() - start
        run = out / "runs" / name / "weights"
        last = run / "last.pt"
        if not last.is_file():
            print(f"[v8 train] {name}: no {last}", file=sys.stderr)
            return 1
        # last.pt holds the optimiser until training ends; ultralytics strips it from best / last then
        shutil.copy(last, out / f"{name}.pt")
        metrics = YOLO(out / f"{name}.pt").val(data=str(data_yaml), imgsz=args.imgsz, batch=args.batch,
                                               device=args.device, plots=False, verbose=False,
                                               project=str(out / "runs"), name=f"{name}_val", exist_ok=True)
        summary = {"model": name, "epochs": epochs, "imgsz": args.imgsz, "batch": args.batch,
                   "fraction": args.fraction, "train_seconds": round(seconds, 1),
                   "ultralytics": ultralytics.__version__, "torch": torch.__version__,
                   "val_map50_95": float(metrics.box.map), "val_map50": float(metrics.box.map50)}
        (out / f"{name}_train.json").write_text(json.dumps(summary, indent=1) + "\n")
        print(f"[v8 train] {name}: {epochs} epochs in {seconds:.0f} s, ultralytics val mAP50-95 "
              f"{summary['val_map50_95']:.4f} (mAP50 {summary['val_map50']:.4f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
