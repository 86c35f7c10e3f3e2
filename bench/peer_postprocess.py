#!/usr/bin/env python3
"""Peer timings for bench_postprocess / bench_nms (run on the GPU machine, torch + torchvision).

1. ultralytics/yolov5 v7.0-style post-processing on the GPU, written here from the semantics in
   shared/notes/reference-semantics.md section 3-4 (per-image loop: obj filter, obj * cls,
   xywh -> xyxy, best class or multi-label, sort, first max_nms, class offset 7680,
   torchvision.ops.nms, first max_det; then (x - pad) / gain and clamp), on the same tensors as
   bench_postprocess (bus.npz / zidane.npz "output", alternating, tiled to the batch), detect and
   val settings, batch 1 and 32, float32 and float16. Includes copying the detections to the host
   (ours ends with one device-to-host copy too).
2. torchvision.ops.batched_nms alone on the random box sets of bench_nms (same formula, same
   seeds: see bench/bench_nms.cu; 1000 / 5000 / 20000 boxes, one class and 80 classes), iou 0.45.
   (batched_nms on CUDA offsets the boxes by class up to 20000 coordinates = 5000 boxes, above
   that it runs torchvision.ops.nms once per class; ops.nms builds the IoU mask on the GPU and
   sweeps it on the host.)
Timed with torch.cuda.Event around each call, median of `runs` after warm-up; same row labels.

    python3 bench/peer_postprocess.py [data_dir (default $YOLOCU_DATA_DIR)] [runs (default 100)]
"""
import os
import sys

import numpy as np
import torch
import torchvision

MAX_WH = 7680.0


def geometry(w, h, dst=640):
    gain = min(dst / h, dst / w)
    return gain, (dst - w * gain) / 2, (dst - h * gain) / 2, w, h


def postprocess(pred, geos, conf, iou, multi_label, max_det, max_nms=30000):
    """pred: batch x rows x (5 + nc) on the GPU. Returns per image an n x 6 CPU tensor."""
    out = []
    keep_obj = pred[..., 4] > conf
    for b in range(pred.shape[0]):
        x = pred[b][keep_obj[b]]
        if x.shape[0] == 0:
            out.append(torch.zeros((0, 6)))
            continue
        obj = x[:, 4:5]
        scores = x[:, 5:] * obj
        cx, cy, w, h = x[:, 0], x[:, 1], x[:, 2], x[:, 3]
        box = torch.stack((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), 1)
        if multi_label:
            i, j = (scores > conf).nonzero(as_tuple=False).T
            x = torch.cat((box[i], scores[i, j, None], j[:, None].to(x.dtype)), 1)
        else:
            best, j = scores.max(1, keepdim=True)
            x = torch.cat((box, best, j.to(x.dtype)), 1)[best.view(-1) > conf]
        if x.shape[0] == 0:
            out.append(torch.zeros((0, 6)))
            continue
        x = x[x[:, 4].argsort(descending=True)[:max_nms]]
        offset = x[:, 5:6] * MAX_WH
        k = torchvision.ops.nms(x[:, :4] + offset, x[:, 4], iou)[:max_det]
        d = x[k].float()
        gain, pad_x, pad_y, width, height = geos[b]
        d[:, [0, 2]] = ((d[:, [0, 2]] - pad_x) / gain).clamp_(0, width)
        d[:, [1, 3]] = ((d[:, [1, 3]] - pad_y) / gain).clamp_(0, height)
        out.append(d.cpu())
    return out


def time_cuda(fn, runs, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0)
    times.sort()
    return times[len(times) // 2], times[len(times) // 10], times[len(times) * 9 // 10]


def splitmix64(x):
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        z = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def uniform(seed, idx):
    bits = splitmix64((np.uint64(seed) << np.uint64(32)) | idx.astype(np.uint64)) >> np.uint64(40)
    return bits.astype(np.float32) * np.float32(1.0 / 16777216.0)


def random_boxes(n, nc=80):
    k = np.arange(n, dtype=np.uint64) * np.uint64(6)
    f32 = np.float32
    cx = uniform(n, k) * f32(640)
    cy = uniform(n, k + np.uint64(1)) * f32(640)
    w = f32(8) + uniform(n, k + np.uint64(2)) * f32(120)
    h = f32(8) + uniform(n, k + np.uint64(3)) * f32(120)
    score = uniform(n, k + np.uint64(4))
    cls = np.minimum(79, (uniform(n, k + np.uint64(5)) * f32(80)).astype(np.int64))
    if nc == 1:
        cls = np.zeros(n, dtype=np.int64)
    hw, hh = w / f32(2), h / f32(2)
    boxes = np.stack((cx - hw, cy - hh, cx + hw, cy + hh), 1).astype(np.float32)
    return boxes, score, cls


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("YOLOCU_DATA_DIR", "")
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    if not data:
        sys.exit("usage: peer_postprocess.py <data_dir> [runs] (or set YOLOCU_DATA_DIR)")
    dev = torch.device("cuda")
    print(f"# peer_postprocess on {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"torchvision {torchvision.__version__}, median of {runs} runs (p10-p90)")
    bus = np.load(os.path.join(data, "reference", "bus.npz"))["output"]
    zid = np.load(os.path.join(data, "reference", "zidane.npz"))["output"]
    gb, gz = geometry(810, 1080), geometry(1280, 720)
    print("| stage | setting | dtype | batch | impl | median us/batch | us/image | p10-p90 us/batch "
          "| detections img0 |")
    settings = [("detect", 0.25, 0.45, False, 1000), ("val", 0.001, 0.6, True, 300)]
    for name, conf, iou, multi, max_det in settings:
        for dn, dt in (("fp32", torch.float32), ("fp16", torch.float16)):
            for batch in (1, 32):
                host = np.concatenate([zid if i % 2 else bus for i in range(batch)], 0)
                pred = torch.from_numpy(host).to(dev).to(dt)
                geos = [gz if i % 2 else gb for i in range(batch)]
                fn = lambda: postprocess(pred, geos, conf, iou, multi, max_det)  # noqa: E731
                med, p10, p90 = time_cuda(fn, runs if batch == 1 else max(10, runs // 4))
                n0 = fn()[0].shape[0]
                print(f"| decode+nms+project | {name} | {dn} | {batch} | ultralytics-style torch "
                      f"+ torchvision.ops.nms | {med:.1f} | {med / batch:.2f} | {p10:.1f}-{p90:.1f} "
                      f"| {n0} |")
    print("| stage | boxes | classes | impl | median us | p10-p90 us | kept |")
    for n in (1000, 5000, 20000):
        for nc in (1, 80):
            boxes, scores, cls = random_boxes(n, nc)
            b = torch.from_numpy(boxes).to(dev)
            s = torch.from_numpy(scores).to(dev)
            c = torch.from_numpy(cls).to(dev)
            fn = lambda: torchvision.ops.batched_nms(b, s, c, 0.45)  # noqa: E731
            med, p10, p90 = time_cuda(fn, runs if n < 20000 else max(10, runs // 4))
            kept = fn().shape[0]
            print(f"| nms | {n} | {nc} | torchvision.ops.batched_nms (all kept) | {med:.1f} | "
                  f"{p10:.1f}-{p90:.1f} | {kept} |")


if __name__ == "__main__":
    main()
