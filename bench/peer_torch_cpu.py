#!/usr/bin/env python3
"""Peer timing: ultralytics/yolov5 v7.0's own pipeline on the CPU (PyTorch), one image, end to end.

    /usr/bin/python3 bench/peer_torch_cpu.py [--yolov5 .data/yolov5] [--weights yolov5n.pt]
                                             [--image bus.jpg] [--iters 20] [--warmup 3]

Runs, in this process, what detect.py does for one image with a fixed 640x640 input:
cv2.imread -> letterbox(auto=False) -> HWC/BGR to CHW/RGB float /255 -> model (attempt_load, fused,
FP32) -> non_max_suppression(conf 0.25, iou 0.45, max_det 1000) -> scale_boxes. Prints the median
of each stage over --iters runs after --warmup runs, as one Markdown table row (milliseconds).

The yolov5 source tree (tag v7.0) is not part of yolocu: bring it into a git-ignored folder, e.g.
    git --git-dir=<mirror of ultralytics/yolov5> archive v7.0 | tar -x -C .data/yolov5
Nothing in it is edited. Run-time patches (this script only), for Debian 12's python3-torch 1.13
and NumPy 1.24 without the rest of requirements.txt:
  * modules v7.0 imports at module level but never uses on this path (pandas, IPython, matplotlib,
    seaborn, scipy, tqdm, thop) are replaced by inert stand-ins when they are not installed;
  * nothing else: torch.load of the checkpoint runs with weights_only=False (the 1.13 default),
    and the checkpoint is our own test material.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_util import stub_missing  # noqa: E402


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    data = os.environ.get("YOLOCU_DATA_DIR", os.path.join(root, "..", "shared", "data"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--yolov5", default=os.path.join(root, ".data", "yolov5"))
    ap.add_argument("--weights", default=os.path.join(data, "models", "yolov5n.pt"))
    ap.add_argument("--image", default=os.path.join(data, "images", "bus.jpg"))
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()

    stubbed = stub_missing(["pandas", "IPython", "IPython.display", "matplotlib", "matplotlib.pyplot",
                            "seaborn", "scipy", "scipy.signal", "tqdm", "thop"])
    sys.path.insert(0, args.yolov5)
    import cv2
    import numpy as np
    import torch
    from models.experimental import attempt_load
    from utils.augmentations import letterbox
    from utils.general import non_max_suppression, scale_boxes

    if args.threads:
        torch.set_num_threads(args.threads)
    model = attempt_load(args.weights, device=torch.device("cpu"), fuse=True)
    model.eval()

    def run():
        t0 = time.perf_counter()
        im0 = cv2.imread(args.image)
        t1 = time.perf_counter()
        im = letterbox(im0, (640, 640), stride=32, auto=False)[0]
        im = np.ascontiguousarray(im.transpose((2, 0, 1))[::-1])
        x = torch.from_numpy(im).float()[None] / 255
        t2 = time.perf_counter()
        with torch.no_grad():
            pred = model(x)[0]
        t3 = time.perf_counter()
        det = non_max_suppression(pred, 0.25, 0.45, None, False, max_det=1000)[0]
        det[:, :4] = scale_boxes(x.shape[2:], det[:, :4], im0.shape)
        t4 = time.perf_counter()
        return [1000 * (t1 - t0), 1000 * (t2 - t1), 1000 * (t3 - t2), 1000 * (t4 - t3), 1000 * (t4 - t0)], det

    for _ in range(args.warmup):
        run()
    times = []
    for _ in range(args.iters):
        t, det = run()
        times.append(t)
    med = [statistics.median(col) for col in zip(*times)]
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, numpy {np.__version__}, "
          f"opencv {cv2.__version__}; stubbed: {', '.join(stubbed) or 'none'}; "
          f"{len(det)} detections: " + ", ".join(f"{int(c)}:{p:.3f}" for *_, p, c in det.tolist()))
    print("| pipeline | decode | letterbox | forward | post | total (median of %d) |" % args.iters)
    print("|---|---|---|---|---|---|")
    print("| ultralytics v7.0, PyTorch CPU | %.2f | %.2f | %.2f | %.2f | %.2f |" % tuple(med))


if __name__ == "__main__":
    main()
