"""The peer of yolocu's GPU engine: PyTorch's fastest forward of the same YOLOv5 network.

ultralytics/yolov5 v7.0's model built from its yaml (random weights: timing only), Conv+BN fused,
FP16, channels_last weights and input, torch.backends.cudnn.benchmark = True (cuDNN's algorithms
timed per shape), the whole forward captured in one CUDA graph; median of N graph replays timed
with CUDA events after warm-up. Prints one markdown row per (model, batch) in the format of
bench_cuda_engine. --per-layer also times every distinct Conv+SiLU module of the model alone
(20 launches in a CUDA graph, median per launch), the PyTorch column of the engine's per-layer
profile.

usage: peer_torch_forward.py [--yolov5 .data/yolov5] [--models yolov5n.yaml yolov5s.yaml]
                             [--batches 1 8 32] [--iters 50] [--per-layer]
Needs a copy of ultralytics/yolov5 v7.0 (never committed; see docs/gpu-runs.md).
"""
import argparse
import os
import statistics
import sys


def graph_ms(torch, fn, iters, reps=1):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    for _ in range(5):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / reps)
    return statistics.median(times), sorted(times)[int(0.9 * (len(times) - 1))]


def time_batches(torch, model, label, batches, iters, dev):
    """FP16 model -> channels_last weights; per batch, one markdown row of the CUDA-graph forward
    (median and p90 of `iters` replays); returns the last batch's input."""
    for prm in model.parameters():
        if prm.dim() == 4:
            prm.data = prm.data.contiguous(memory_format=torch.channels_last)
    x = None
    for b in batches:
        x = torch.rand(b, 3, 640, 640, device=dev).half().contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            med, p90 = graph_ms(torch, lambda: model(x), iters)
        print(f"| {label} | {b} | {med:.3f} | {p90:.3f} | {1000 * b / med:.0f} |", flush=True)
    return x


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--yolov5", default=os.environ.get("YOLOV5_DIR", os.path.join(here, ".data", "yolov5")))
    ap.add_argument("--models", nargs="+", default=["yolov5n.yaml", "yolov5s.yaml"])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--per-layer", action="store_true")
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peer_util import import_yolov5
    import_yolov5(here, a.yolov5)
    import torch
    from models.common import Conv
    from models.yolo import Model

    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, cudnn {torch.backends.cudnn.version()}, "
          f"fp16 channels_last, cudnn.benchmark, CUDA graph, median of {a.iters}")
    print("| model | batch | PyTorch median ms | p90 ms | images/s |")
    print("|---|---|---|---|---|")
    layer_rows = []
    for name in a.models:
        torch.manual_seed(0)
        model = Model(os.path.join(a.yolov5, "models", name)).to(dev).fuse().eval().half()
        for b in a.batches:
            x = time_batches(torch, model, name.replace(".yaml", ""), [b], a.iters, dev)
            if not a.per_layer:
                continue
            # Every Conv+SiLU module alone at the input it sees in this forward.
            seen, inputs = {}, {}
            hooks = [m.register_forward_hook(lambda m, i, o: inputs.setdefault(id(m), (m, i[0])) and None)
                     for m in model.modules() if isinstance(m, Conv)]
            with torch.inference_mode():
                model(x)
            for h in hooks:
                h.remove()
            for m, xi in inputs.values():
                c = m.conv
                key = (xi.shape[1], c.out_channels, c.kernel_size[0], c.stride[0], xi.shape[2], xi.shape[3], c.groups)
                if key in seen:
                    seen[key][1] += 1
                    continue
                xi = xi.contiguous(memory_format=torch.channels_last)
                with torch.inference_mode():
                    us = 1000 * graph_ms(torch, lambda: m(xi), 10, reps=20)[0]
                seen[key] = [us, 1]
            for (cin, cout, k, st, h, w, g), (us, uses) in seen.items():
                grouped = f" g{g}" if g > 1 else ""  # as the engine's LayerTime::shape
                layer_rows.append((name.replace(".yaml", ""), b, f"{cin}->{cout} {k}x{k} s{st} {h}x{w}{grouped}", uses, us))
    if layer_rows:
        print("\n| model | batch | Conv+SiLU (cin->cout k s input) | uses | PyTorch us per use |")
        print("|---|---|---|---|---|")
        for r in layer_rows:
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.1f} |")


if __name__ == "__main__":
    main()
