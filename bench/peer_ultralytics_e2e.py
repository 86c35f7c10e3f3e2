"""The peer of yolocu's GPU detector: ultralytics/yolov5 v7.0's own pipeline, end to end, on the GPU.

Input: decoded images in host memory (bus.jpg, 810x1080, decoded once with cv2, as a video
pipeline hands frames over); output: boxes in host memory. Per batch: cv2 letterbox of every
image (auto=False, 640x640), stack, upload, FP16, /255, model (fused, eval, FP16), the v7.0
non_max_suppression (conf 0.25, iou 0.45, max_det 1000), scale_boxes, .cpu(). Also the forward
alone in its strongest form (channels_last + CUDA graph). Median of N after warm-up.

usage: peer_ultralytics_e2e.py [--yolov5 .data/yolov5] [--data .gpu/data] [--batch 1 32] [--iters 50]
Needs a copy of ultralytics/yolov5 v7.0 (never committed; see docs/gpu-runs.md).
"""
import argparse
import os
import statistics
import sys
import time


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--yolov5", default=os.environ.get("YOLOV5_DIR", os.path.join(here, ".data", "yolov5")))
    ap.add_argument("--data", default=os.environ.get("YOLOCU_DATA_DIR", os.path.join(here, ".gpu", "data")))
    ap.add_argument("--models", nargs="+", default=["yolov5n.pt", "yolov5s.yaml"])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--iters", type=int, default=50)
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peer_util import import_yolov5
    import_yolov5(here, a.yolov5)
    import cv2
    import numpy as np
    import torch
    from models.experimental import attempt_load
    from models.yolo import Model
    from utils.augmentations import letterbox
    from utils.general import non_max_suppression, scale_boxes

    dev = torch.device("cuda")
    img = cv2.imread(os.path.join(a.data, "images", "bus.jpg"))
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, image {img.shape[1]}x{img.shape[0]}")
    print("| model | batch | ultralytics end to end ms/batch | ms/image | images/s | cv2 letterbox + upload ms | forward eager ms | forward channels_last+graph ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name in a.models:
        if name.endswith(".pt"):
            model = attempt_load(os.path.join(a.data, "models", name), device=dev, fuse=True)
        else:
            torch.manual_seed(0)
            model = Model(os.path.join(a.yolov5, "models", name)).to(dev).fuse().eval()
        model = model.half().eval()
        for b in a.batch:
            frames = [img] * b

            def pipeline():
                ims = [letterbox(f, 640, auto=False)[0] for f in frames]
                x = np.ascontiguousarray(np.stack(ims)[..., ::-1].transpose(0, 3, 1, 2))
                t = torch.from_numpy(x).to(dev).half() / 255
                with torch.no_grad():
                    pred = model(t)[0]
                det = non_max_suppression(pred, 0.25, 0.45, max_det=1000)
                out = []
                for d in det:
                    d[:, :4] = scale_boxes(t.shape[2:], d[:, :4], img.shape).round()
                    out.append(d.cpu())
                return out

            def timed(fn, iters):
                for _ in range(5):
                    fn()
                torch.cuda.synchronize()
                ts = []
                for _ in range(iters):
                    t0 = time.perf_counter()
                    fn()
                    torch.cuda.synchronize()
                    ts.append((time.perf_counter() - t0) * 1e3)
                return statistics.median(ts)

            def preprocess():
                ims = [letterbox(f, 640, auto=False)[0] for f in frames]
                x = np.ascontiguousarray(np.stack(ims)[..., ::-1].transpose(0, 3, 1, 2))
                return torch.from_numpy(x).to(dev).half() / 255

            e2e = timed(pipeline, a.iters)
            prep = timed(preprocess, a.iters)
            x = torch.rand(b, 3, 640, 640, device=dev).half()
            with torch.no_grad():
                eager = timed(lambda: model(x), a.iters)
                # channels_last on the 4-D weights (Detect's anchor buffers are 3-D)
                for prm in model.parameters():
                    if prm.dim() == 4:
                        prm.data = prm.data.contiguous(memory_format=torch.channels_last)
                m_cl = model
                xs = x.contiguous(memory_format=torch.channels_last).clone()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        m_cl(xs)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    m_cl(xs)
                graphed = timed(g.replay, a.iters)
                for prm in model.parameters():
                    if prm.dim() == 4:
                        prm.data = prm.data.contiguous()
            print(f"| {name} | {b} | {e2e:.2f} | {e2e / b:.3f} | {1000 * b / e2e:.0f} | {prep:.3f} | {eager:.3f} | {graphed:.3f} |", flush=True)


if __name__ == "__main__":
    main()
