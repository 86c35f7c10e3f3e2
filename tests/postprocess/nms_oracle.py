"""NMS oracle: torchvision.ops.nms / batched_nms on generated box sets.

Usage: python3 nms_oracle.py OUT.npz   (needs torch + torchvision; Debian's /usr/bin/python3)

For each case c<k>: boxes (n,4) f32, scores (n,) f32, classes (n,) i64, iou () f64 and the keep
lists of
  agnostic  = torchvision.ops.nms(boxes, scores, iou)
  aware     = torchvision.ops.nms(boxes + classes * 7680, scores, iou)  (ultralytics' formulation)
  batched   = torchvision.ops.batched_nms(boxes, scores, classes, iou)
plus `stable_argsort` (1 if torch.argsort(descending=True) equals the stable order on the scores).
"""
import sys

import numpy as np
import torch
import torchvision


def make_case(rng, n, kind):
    if kind == "int":  # small integer coordinates: many IoUs exactly 1/2, 1/3, 3/5 ...
        xy = rng.integers(0, 12, size=(n, 2))
        wh = rng.integers(1, 6, size=(n, 2))
        boxes = np.concatenate([xy, xy + wh], 1).astype(np.float32)
        scores = (rng.integers(1, 9, size=n) / 8.0).astype(np.float32)
    else:
        xy = rng.uniform(-20, 620, size=(n, 2))
        wh = rng.uniform(1, 160, size=(n, 2))
        boxes = np.concatenate([xy, xy + wh], 1).astype(np.float32)
        scores = rng.uniform(0.0, 1.0, size=n).astype(np.float32)
        if kind == "ties":  # exact score ties and duplicate boxes
            scores = (np.round(scores * 8) / 8).astype(np.float32)
            dup = rng.integers(0, n, size=n // 4)
            boxes[dup[: len(dup) // 2]] = boxes[dup[len(dup) // 2 : len(dup) // 2 * 2]]
    classes = rng.integers(0, 4, size=n).astype(np.int64)
    return boxes, scores, classes


def run(boxes, scores, classes, iou):
    b, s, c = torch.from_numpy(boxes), torch.from_numpy(scores), torch.from_numpy(classes)
    agn = torchvision.ops.nms(b, s, iou)
    aware = torchvision.ops.nms(b + c[:, None].float() * 7680, s, iou)
    bat = torchvision.ops.batched_nms(b, s, c, iou)
    return agn.numpy(), aware.numpy(), bat.numpy()


def main():
    out = {}
    k = 0

    def add(boxes, scores, classes, iou):
        nonlocal k
        agn, aware, bat = run(boxes, scores, classes, iou)
        t = torch.from_numpy(scores)
        stable = torch.sort(t, descending=True, stable=True)[1]
        p = f"c{k}_"
        out[p + "boxes"] = boxes
        out[p + "scores"] = scores
        out[p + "classes"] = classes
        out[p + "iou"] = np.array(iou, dtype=np.float64)
        out[p + "agnostic"] = agn.astype(np.int64)
        out[p + "aware"] = aware.astype(np.int64)
        out[p + "batched"] = bat.astype(np.int64)
        out[p + "stable_argsort"] = np.array(int(torch.equal(t.argsort(descending=True), stable)))
        k += 1

    for seed in (0, 1, 2):
        for n in (1, 2, 7, 100, 1000, 5000):
            for kind, iou in (("float", 0.45), ("ties", 0.6), ("int", 0.5)):
                rng = np.random.default_rng(seed * 1000 + n)
                add(*make_case(rng, n, kind), iou)
    rng = np.random.default_rng(7)
    add(*make_case(rng, 300, "int"), 0.0)
    add(*make_case(rng, 300, "int"), 1.0)
    # IoU exactly at the threshold: 2/4 = 0.5 is kept at iou 0.5 (strict >).
    add(np.array([[0, 0, 4, 1], [0, 0, 2, 1]], np.float32), np.array([0.9, 0.8], np.float32),
        np.array([0, 0]), 0.5)
    # IoU 3/5 rounds to float(0.6) = 0.6000000238 > 0.6 (double): torchvision's CPU kernel
    # compares the float IoU with the double threshold, so this pair IS suppressed.
    add(np.array([[0, 0, 5, 1], [0, 0, 3, 1]], np.float32), np.array([0.9, 0.8], np.float32),
        np.array([0, 0]), 0.6)
    # Same boxes, different classes: class-aware keeps both, agnostic one.
    add(np.array([[10, 10, 50, 50], [10, 10, 50, 50]], np.float32),
        np.array([0.5, 0.5], np.float32), np.array([3, 1]), 0.45)
    out["count"] = np.array(k, dtype=np.int64)
    np.savez(sys.argv[1], **out)


if __name__ == "__main__":
    main()
