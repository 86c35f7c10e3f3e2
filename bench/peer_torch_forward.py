#!/usr/bin/env python3
"""PyTorch peer of bench_cuda_engine: the strongest plain-PyTorch YOLOv5 forward on the same GPU.

FP16, channels_last, fused Conv+BN (ultralytics' .fuse()), timed as CUDA-graph replays
(torch.cuda.CUDAGraph, captured after a warm-up on a side stream); eager timings for reference;
optionally torch.compile (inductor, --compile MODE, e.g. max-autotune-no-cudagraphs) captured
into a CUDA graph the same way. Same rows as the C++ bench: median / p90 ms per forward, images/s.

Needs the ultralytics/yolov5 v7.0 source at .data/yolov5 and .data/models/yolov5n.pt (our own
test material: loaded with weights_only=False); yolov5s is built from models/yolov5s.yaml with
random weights (seed 0), like yolov5s_random_fp16.onnx.

  python bench/peer_torch_forward.py [--batches 1,8,32] [--iters 50] [--warmup 10] [--compile MODE]
"""
import argparse
import statistics
import sys
import time

sys.path.insert(0, '.data/yolov5')

import torch  # noqa: E402


def load_models():
    from models.yolo import Model  # noqa: E402  (yolov5 v7.0)
    ckpt = torch.load('.data/models/yolov5n.pt', map_location='cpu', weights_only=False)
    n = (ckpt.get('ema') or ckpt['model']).float().fuse().eval()
    torch.manual_seed(0)
    s = Model('.data/yolov5/models/yolov5s.yaml').float().fuse().eval()
    return [('yolov5n', n), ('yolov5s (random)', s)]


def time_fn(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(iters):
        a.record()
        fn()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    ms.sort()
    return statistics.median(ms), ms[min(len(ms) - 1, int(0.9 * (len(ms) - 1) + 0.5))]


def graphed(fn, x):
    """Captures fn(x) into a CUDA graph (warm-up on a side stream first); returns replay()."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(x)
    return g.replay, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--batches', default='1,8,32')
    ap.add_argument('--iters', type=int, default=50)
    ap.add_argument('--warmup', type=int, default=10)
    ap.add_argument('--compile', default='', help='torch.compile mode, e.g. max-autotune-no-cudagraphs (slow to build)')
    ap.add_argument('--no-eager', action='store_true')
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    dev = torch.device('cuda')
    print(f'device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}')
    print(f'{"model":<26} {"batch":>5} {"config":<28} {"median_ms":>9} {"p90_ms":>9} {"images/s":>11}')
    for name, model in load_models():
        model = model.to(dev).half().to(memory_format=torch.channels_last)
        for batch in [int(b) for b in args.batches.split(',')]:
            x = torch.rand(batch, 3, 640, 640, device=dev).half().contiguous(memory_format=torch.channels_last)
            configs = []
            with torch.inference_mode():
                fwd = lambda t: model(t)[0]  # noqa: E731
                if not args.no_eager:
                    configs.append(('fp16 channels_last eager', lambda: fwd(x)))
                replay, _ = graphed(fwd, x)
                configs.append(('fp16 channels_last cudagraph', replay))
                if args.compile:
                    try:
                        t0 = time.time()
                        cm = torch.compile(model, mode=args.compile)
                        cfwd = lambda t: cm(t)[0]  # noqa: E731
                        cfwd(x)
                        creplay, _ = graphed(cfwd, x)
                        configs.append((f'compile+cudagraph ({time.time() - t0:.0f}s)', creplay))
                    except Exception as e:  # report and go on: the graph config is the reference
                        print(f'  torch.compile({args.compile}) failed: {type(e).__name__}: {e}'[:300])
                for cname, fn in configs:
                    med, p90 = time_fn(fn, args.iters, args.warmup)
                    print(f'{name:<26} {batch:>5} {cname:<28} {med:>9.3f} {p90:>9.3f} {batch * 1e3 / med:>11.0f}', flush=True)


if __name__ == '__main__':
    main()
