"""The peer of yolocu's GPU engine on YOLOv8 / YOLO11: PyTorch's fastest forward of the same network.

ultralytics' DetectionModel built from its own yaml (yolov8n.yaml, yolo11n.yaml; random weights:
timing only), Conv+BN fused, FP16, channels_last weights and input, torch.backends.cudnn.benchmark
= True, the whole forward (Detect's box decode included, as in the ONNX export yolocu runs)
captured in one CUDA graph; median of N graph replays timed with CUDA events after warm-up (the
method of peer_torch_forward.py). Prints one markdown row per (model, batch).

usage: peer_torch_forward_v8.py --ultralytics DIR [--models yolov8n.yaml yolo11n.yaml]
                                [--batches 1 8 32] [--iters 50]
DIR holds the `ultralytics` package (scripts/gpu/bundle.sh v8 copies the pinned one of
scripts/v8/requirements.txt). Modules ultralytics imports but the forward never uses (plotting,
dataframes) are stubbed when the machine lacks them; the stubs are listed in the first line.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_torch_forward import time_batches  # noqa: E402
from peer_util import stub_missing  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ultralytics", required=True, help="folder holding the ultralytics package")
    ap.add_argument("--models", nargs="+", default=["yolov8n.yaml", "yolo11n.yaml"])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--iters", type=int, default=50)
    a = ap.parse_args()
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_CONFIG_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"), "yolocu-ultralytics-cfg"))
    stubbed = stub_missing(["matplotlib", "matplotlib.pyplot", "polars", "pandas", "scipy", "scipy.optimize",
                            "scipy.ndimage", "thop", "ultralytics_thop", "psutil", "requests", "tqdm", "PIL",
                            "PIL.Image"])
    sys.path.insert(0, os.path.abspath(a.ultralytics))
    import torch
    import ultralytics
    from ultralytics.nn.tasks import DetectionModel

    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, cudnn {torch.backends.cudnn.version()}, "
          f"ultralytics {ultralytics.__version__}, fp16 channels_last, cudnn.benchmark, CUDA graph, median of "
          f"{a.iters}; stubbed: {', '.join(stubbed) or 'none'}")
    print("| model | batch | PyTorch median ms | p90 ms | images/s |")
    print("|---|---|---|---|---|")
    for name in a.models:
        torch.manual_seed(0)
        model = DetectionModel(name, verbose=False).to(dev).fuse(verbose=False).eval().half()
        time_batches(torch, model, name.replace(".yaml", ""), a.batches, a.iters, dev)

if __name__ == "__main__":
    main()
