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
import types
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_torch_forward import graph_ms  # noqa: E402


class _Stub(types.ModuleType):
    """An inert module: any attribute is a MagicMock; it has a version and a path like real ones."""
    __version__ = "0.0.0"
    __path__ = []

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        value = mock.MagicMock(name=f"{self.__name__}.{attr}")
        setattr(self, attr, value)
        return value


def stub_missing(names):
    stubbed = []
    for name in names:
        try:
            __import__(name)
        except ImportError:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                sub = ".".join(parts[:i])
                if sub not in sys.modules:
                    sys.modules[sub] = _Stub(sub)
                    if i > 1:
                        setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], sys.modules[sub])
            stubbed.append(name)
    return stubbed


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
        for prm in model.parameters():
            if prm.dim() == 4:
                prm.data = prm.data.contiguous(memory_format=torch.channels_last)
        for b in a.batches:
            x = torch.rand(b, 3, 640, 640, device=dev).half().contiguous(memory_format=torch.channels_last)
            with torch.inference_mode():
                med, p90 = graph_ms(torch, lambda: model(x), a.iters)
            print(f"| {name.replace('.yaml', '')} | {b} | {med:.3f} | {p90:.3f} | {1000 * b / med:.0f} |", flush=True)


if __name__ == "__main__":
    main()
