"""Reference models and tensors for the YOLOv8 / YOLO11 tests, made by ultralytics itself.

Run by scripts/v8/make_refs.sh inside a throw-away venv (pinned ultralytics, Debian's CPU torch).
Builds yolov8n, yolo11n, yolov8s and yolo11s from ultralytics' own yaml files with fixed-seed
random weights (no weights are downloaded), or, with --weights DIR, takes DIR/<model>.pt (trained on
coco128 by scripts/v8/train_coco128.py: weights whose mAP means something); exports static (batch 1,
640x640) and dynamic ONNX files the way `yolo export format=onnx [dynamic=True]` does, and writes what ultralytics computes on the sample
images (PyTorch FP32 on the CPU):

  OUT/<model>.onnx, OUT/<model>_dyn.onnx       the exports (simplified by onnxslim, as by default)
  OUT/<model>_op18.onnx                        the static export converted to opset 18
  OUT/<model>_<image>.npz                      per sample image:
      letterboxed_bgr   640x640x3 uint8   LetterBox(auto=False) (predict with a static ONNX model)
      input             1x3x640x640       predictor.preprocess (BGR->RGB, /255)
      output            1x(4+nc)x8400     the model's raw output (DFL and sigmoid inside)
      detect            k x 6             predict defaults: conf 0.25, iou 0.7, max_det 300
      detect_low        k x 6             the same at conf 0.001
      val               k x 6             validator NMS: conf 0.001, iou 0.7, multi-label, max_det 300
                                          (x1, y1, x2, y2, conf, cls in original pixels)
  OUT/<model>_batch4.npz      input 4x3x640x640 (bus, zidane, the first two coco128 images) and output
  OUT/<model>_rect.npz        input 1x3x480x640 (bus letterboxed to 640 wide: the dynamic model at
                              another size) and output
  OUT/<model>_coco128.npz     (yolov8n, yolo11n) per coco128 image <stem>: detections at conf 0.25 (`<stem>/detect`)
                              and the validator's (`<stem>/val`)
  OUT/<model>_val.json        (with --weights) ultralytics' val of <model>.onnx on coco128: mAP50-95,
                              mAP50, precision, recall

Nothing here comes from yolocu: these are the expected values of its tests.
"""
import argparse
import copy
import glob
import math
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from coco128_dataset import stage_coco128  # noqa: E402


# Class-logit offsets that leave a realistic number of detections (YOLO11's random features spread
# wider).
CLASS_BIAS = {"yolov8n": -10.0, "yolo11n": -12.0, "yolov8s": -13.0, "yolo11s": -15.0}
# The models whose coco128 detections are written (the `s` models serve the engine's raw-output,
# head-fusion and speed checks; their coco128 pass would double the script's time).
COCO_MODELS = {"yolov8n", "yolo11n"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="test material (images/, coco128/)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="yolov8n,yolo11n,yolov8s,yolo11s")
    ap.add_argument("--no-coco", action="store_true")
    ap.add_argument("--weights", help="a folder of trained <model>.pt instead of random weights")
    args = ap.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("YOLO_CONFIG_DIR", str(out / "config"))
    os.environ["YOLO_OFFLINE"] = "1"  # no hub, no update checks
    os.environ["YOLO_AUTOINSTALL"] = "false"  # a missing package is an error, not a pip install
    os.environ["YOLO_VERBOSE"] = "false"

    import cv2
    import numpy as np
    import torch
    import ultralytics
    from ultralytics import YOLO
    from ultralytics.cfg import get_cfg
    from ultralytics.data.augment import LetterBox
    from ultralytics.utils import ROOT, YAML, nms, ops

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    print(f"[v8 refs] ultralytics {ultralytics.__version__}, torch {torch.__version__}, opencv {cv2.__version__}",
          flush=True)
    defaults = get_cfg()  # the cfg defaults predict and val use
    assert defaults.iou == 0.7 and defaults.max_det == 300 and defaults.conf is None, defaults
    coco_names = YAML.load(ROOT / "cfg/datasets/coco.yaml")["names"]

    data = Path(args.data)
    samples = {"bus": data / "images/bus.jpg", "zidane": data / "images/zidane.jpg"}
    coco = sorted(glob.glob(str(data / "coco128/images/*/*.jpg")))
    assert len(coco) >= 2, f"no coco128 images under {data}"

    def letterbox(img, shape=(640, 640)):
        # what the predictor does for a static ONNX model (auto=False: no rectangle)
        return LetterBox(shape, auto=False, stride=32)(image=img)

    def to_input(lbs):
        # predictor.preprocess: stack, BHWC -> BCHW, BGR -> RGB, float, / 255
        im = torch.from_numpy(np.stack(lbs)).permute(0, 3, 1, 2).contiguous().flip(1)
        return im.float().div_(255)

    def final(pred, img_shape, orig_shape, conf, multi_label):
        # predictor.postprocess (or the validator's NMS with multi_label) + construct_results
        det = nms.non_max_suppression(pred, conf, defaults.iou, None, False, multi_label=multi_label,
                                      max_det=defaults.max_det)[0]
        det = det.clone()
        det[:, :4] = ops.scale_boxes(img_shape, det[:, :4], orig_shape)
        return det.numpy().astype(np.float32)

    for name in args.models.split(","):
        ckpt = out / f"{name}.pt"
        if args.weights:  # trained weights (ultralytics' checkpoint as its trainer saved it)
            trained = Path(args.weights) / f"{name}.pt"
            assert trained.is_file(), f"no {trained} (scripts/v8/train_coco128.py writes it)"
            shutil.copy(trained, ckpt)
        else:
            torch.manual_seed(0)
            np.random.seed(0)
            yolo = YOLO(f"{name}.yaml", task="detect")
            net = yolo.model
            net.names = dict(coco_names)
            # Random weights that still give varied boxes and scores: PyTorch's default convolution init
            # shrinks the signal layer by layer (every image would give the same output), so He-normal
            # convolutions (the DFL's fixed projection excepted), spread BatchNorm statistics, and class
            # logits scaled up and shifted so that some ten to a hundred boxes per image score above 0.25
            # (and a few hundred above 0.001).
            g = torch.Generator().manual_seed(1)
            with torch.no_grad():
                for m in net.modules():
                    if isinstance(m, torch.nn.Conv2d) and m.weight.requires_grad:
                        fan_in = m.weight[0].numel()
                        m.weight.copy_(torch.randn(m.weight.shape, generator=g) * math.sqrt(2.0 / fan_in))
                    if isinstance(m, torch.nn.BatchNorm2d):
                        m.weight.copy_(torch.rand(m.weight.shape, generator=g) * 0.6 + 0.7)
                        m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
                        m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                        m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 0.6 + 0.7)
                head = net.model[-1]
                for seq in head.cv3:  # class branch
                    seq[-1].weight.mul_(20.0)
                    seq[-1].bias.fill_(CLASS_BIAS[name])
                for seq in head.cv2:  # box branch (DFL logits)
                    seq[-1].weight.mul_(5.0)
            net.eval()
            yolo.save(ckpt)

        # the exports, as `yolo export model=<name>.pt format=onnx [dynamic=True]`
        for dynamic in (True, False):  # both export to <name>.onnx: the dynamic one is renamed first
            f = YOLO(ckpt).export(format="onnx", imgsz=640, dynamic=dynamic, batch=1)
            dst = out / f"{name}{'_dyn' if dynamic else ''}.onnx"
            if Path(f).resolve() != dst:
                os.replace(f, dst)
            print(f"[v8 refs] {dst.name}", flush=True)
        # The package exports opset 18 with torch >= 2.4 (opset 17 with this torch): the static
        # export converted by ONNX's version converter stands in for it.
        import onnx
        from onnx import version_converter
        op18 = version_converter.convert_version(onnx.load(out / f"{name}.onnx"), 18)
        onnx.checker.check_model(op18)
        onnx.save(op18, out / f"{name}_op18.onnx")

        # the PyTorch model the exports come from (fused, as the exporter and predictor fuse it)
        model = YOLO(ckpt).model.float().fuse().eval()

        def forward(x):
            with torch.no_grad():
                y = model(x)
            return (y[0] if isinstance(y, (list, tuple)) else y).float()

        for key, path in samples.items():
            img = cv2.imread(str(path))
            lb = letterbox(img)
            x = to_input([lb])
            y = forward(x)
            np.savez(out / f"{name}_{key}.npz", letterboxed_bgr=lb, input=x.numpy(), output=y.numpy(),
                     detect=final(y, x.shape[2:], img.shape, 0.25, False),
                     detect_low=final(y, x.shape[2:], img.shape, 0.001, False),
                     val=final(y, x.shape[2:], img.shape, 0.001, True))
            print(f"[v8 refs] {name}_{key}: {len(final(y, x.shape[2:], img.shape, 0.25, False))} detections at 0.25",
                  flush=True)

        imgs = [cv2.imread(str(samples["bus"])), cv2.imread(str(samples["zidane"])), cv2.imread(coco[0]),
                cv2.imread(coco[1])]
        x = to_input([letterbox(im) for im in imgs])
        np.savez(out / f"{name}_batch4.npz", input=x.numpy(), output=forward(x).numpy())
        x = to_input([letterbox(imgs[0], (480, 640))])
        np.savez(out / f"{name}_rect.npz", input=x.numpy(), output=forward(x).numpy())

        if not args.no_coco and name in COCO_MODELS:
            arrays = {}
            for p in coco:
                img = cv2.imread(p)
                x = to_input([letterbox(img)])
                y = forward(x)
                stem = Path(p).stem
                arrays[f"{stem}/detect"] = final(y, x.shape[2:], img.shape, 0.25, False)
                arrays[f"{stem}/val"] = final(y, x.shape[2:], img.shape, 0.001, True)
            np.savez(out / f"{name}_coco128.npz", **arrays)
            print(f"[v8 refs] {name}_coco128: {len(coco)} images", flush=True)
            if args.weights:  # weights whose mAP means something: ultralytics' own val of the export
                val_map(name, out, data / "coco128")
    (out / "COMPLETE").write_text(f"ultralytics {ultralytics.__version__}\n")
    return 0


def val_map(name, out, coco):
    """OUT/<name>_val.json: ultralytics' val of the static export (ONNX Runtime, batch 1, 640x640,
    its defaults: conf 0.001, iou 0.7) on coco128, what `yolocu eval` of the same file reproduces.
    The dataset is staged under OUT (ultralytics writes its label cache beside the labels)."""
    import json
    from ultralytics import YOLO
    from ultralytics.utils import ROOT, YAML
    ds = out / "coco128_val"
    yaml = stage_coco128(coco, ds, YAML.load(ROOT / "cfg/datasets/coco.yaml")["names"])
    m = YOLO(out / f"{name}.onnx", task="detect").val(data=str(yaml), imgsz=640, batch=1, device="cpu",
                                                        plots=False, verbose=False, project=str(ds / "runs"))
    result = {"model": f"{name}.onnx", "images": 128, "map50_95": float(m.box.map), "map50": float(m.box.map50),
              "precision": float(m.box.mp), "recall": float(m.box.mr)}
    (out / f"{name}_val.json").write_text(json.dumps(result, indent=1) + "\n")
    shutil.rmtree(ds)
    print(f"[v8 refs] {name}_val: mAP50-95 {result['map50_95']:.4f}, mAP50 {result['map50']:.4f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
