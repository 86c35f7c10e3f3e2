#!/usr/bin/env python3
"""Kernel benchmarks of torch.ops.yolocu against PyTorch, same process, same GPU.

Timing: CUDA events around each call, warm-up first, median (and p10/p90) of N calls; for the
bandwidth-bound kernels a 256 MiB buffer is zeroed before every timed call so L2 (50 MB on H100)
starts cold. Bandwidth reference: a device-to-device copy_ with the same read+write traffic,
timed the same way (and a 1 GiB copy for the peak). Effective GB/s = algorithmic bytes / time.

    python bench/training/bench_kernels.py --out OUTDIR
Writes OUTDIR/bench_kernels.json and prints a table.
"""
import argparse
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, os.path.join(REPO, "tests", "training"))
import yolocu_train as yt  # noqa: E402
from test_torch_ops import bbox_ciou_reference, make_boxes  # noqa: E402

ops = torch.ops.yolocu
FLUSH = None
SLEEP_CYCLES = 600_000  # ~300 us at 1.98 GHz


def timeit(fn, iters=50, warmup=10, flush=True, hide_launch=False):
    """Median/p10/p90 in microseconds of fn() on the current stream (GPU time between two events).

    flush: zero a 256 MiB buffer first (cold L2). hide_launch: queue a ~300 us spin kernel first so
    the host has enqueued all of fn()'s kernels before the start event runs: then the events time
    GPU execution only, not Python/dispatcher launch overhead (for launch-bound ops; see wall())."""
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        if flush:
            FLUSH.zero_()
        if hide_launch:
            torch.cuda._sleep(SLEEP_CYCLES)
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))
    return {"median_us": statistics.median(t), "p10_us": t[len(t) // 10], "p90_us": t[(9 * len(t)) // 10]}


def wall(fn, iters=100, warmup=10):
    """Median host wall time in microseconds of fn() followed by torch.cuda.synchronize()."""
    import time
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        t.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(t)


def copy_bw(traffic_bytes, iters=50):
    """GB/s of dst.copy_(src) moving traffic_bytes (half read, half written)."""
    n = max(int(traffic_bytes // 2 // 4), 1)
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    r = timeit(lambda: dst.copy_(src), iters)
    return 2 * n * 4 / (r["median_us"] * 1e-6) / 1e9


def bench_upsample(rows):
    shapes = [(16, 32, 80, 80), (16, 256, 20, 20), (16, 128, 40, 40)]
    for shape in shapes:
        for dtype in (torch.float32, torch.float16):
            for cl in (False, True):
                x = torch.randn(shape, device="cuda", dtype=dtype)
                if cl:
                    x = x.to(memory_format=torch.channels_last)
                N, C, H, W = shape
                g = torch.randn(N, C, 2 * H, 2 * W, device="cuda", dtype=dtype)
                if cl:
                    g = g.to(memory_format=torch.channels_last)
                nbytes = 5 * x.numel() * x.element_size()
                bw = copy_bw(nbytes)
                cases = {
                    "fwd": (lambda: ops.upsample_nearest2x(x), lambda: F.interpolate(x, scale_factor=2, mode="nearest")),
                    "bwd": (lambda: ops.upsample_nearest2x_backward(g),
                            lambda: torch.ops.aten.upsample_nearest2d_backward(g, [2 * H, 2 * W], list(shape), 2.0, 2.0)),
                }
                for direction, (ours, theirs) in cases.items():
                    a, b = timeit(ours), timeit(theirs)
                    ga = nbytes / (a["median_us"] * 1e-6) / 1e9
                    gb = nbytes / (b["median_us"] * 1e-6) / 1e9
                    rows.append({
                        "bench": "upsample", "shape": list(shape), "dtype": str(dtype)[6:],
                        "layout": "channels_last" if cl else "nchw", "dir": direction, "bytes": nbytes,
                        "ours_us": a["median_us"], "torch_us": b["median_us"], "ours_GBs": ga, "torch_GBs": gb,
                        "copy_GBs": bw, "ours_pct_copy": 100 * ga / bw, "torch_pct_copy": 100 * gb / bw,
                        "speedup": b["median_us"] / a["median_us"], "pass": ga >= 0.85 * bw})


def bench_ciou(rows, compile_baseline=False):
    levels = [6000, 8000, 6000]
    ps, ts, gs = [], [], []
    for i, n in enumerate(levels):
        p, t = make_boxes(n, torch.float32, "cuda", 20 + i)
        ps.append(p)
        ts.append(t)
        gs.append(torch.full((n,), -0.05 / n, device="cuda"))

    def ours_kernels():
        ops.ciou(ps, ts, 1e-7)
        ops.ciou_backward(gs, ps, ts, 1e-7)

    pr = [p.clone().requires_grad_() for p in ps]

    def ours_autograd():
        ious = yt.ciou(pr, ts)
        loss = sum((1.0 - iou).mean() for iou in ious)
        loss.backward()

    def eager():
        loss = 0
        for p, t in zip(pr, ts):
            loss = loss + (1.0 - bbox_ciou_reference(p, t).squeeze()).mean()
        loss.backward()

    fns = {"ours_kernels": ours_kernels, "ours_autograd": ours_autograd, "eager": eager}
    if compile_baseline:
        try:
            compiled = torch.compile(bbox_ciou_reference)

            def comp():
                loss = 0
                for p, t in zip(pr, ts):
                    loss = loss + (1.0 - compiled(p, t).squeeze()).mean()
                loss.backward()

            comp()
            fns["torch_compile"] = comp
        except Exception as e:  # noqa: BLE001
            print(f"note: torch.compile baseline failed: {str(e)[:200]}")
    row = {"bench": "ciou", "boxes": sum(levels), "levels": levels}
    for k, f in fns.items():
        row[f"{k}_gpu_us"] = timeit(f, iters=100, warmup=10, flush=False, hide_launch=True)["median_us"]
        row[f"{k}_wall_us"] = wall(f)
    row["pass"] = row["ours_kernels_gpu_us"] <= 30.0
    rows.append(row)


def yolov5s_shapes():
    with open(os.path.join(REPO, "bench", "training", "yolov5s_shapes.json")) as f:
        return json.load(f)


def bench_ema(rows):
    shapes = yolov5s_shapes()["state"]
    model = [torch.randn(s, device="cuda") for _, s in shapes]
    ema = [m.clone() for m in model]
    numel = sum(m.numel() for m in model)
    nbytes = 12 * numel  # read ema, read model, write ema
    bw = copy_bw(nbytes)
    d = 0.9999 * (1 - math.exp(-100 / 2000))

    def ours():
        yt.ema_update_(ema, model, d)

    def ultralytics_loop():
        for v, m in zip(ema, model):
            v *= d
            v += (1 - d) * m

    def foreach_lerp():
        torch._foreach_lerp_(ema, model, 1 - d)

    def foreach_mul_add():
        torch._foreach_mul_(ema, d)
        torch._foreach_add_(ema, model, alpha=1 - d)

    fns = (("ours", ours), ("ultralytics_loop", ultralytics_loop), ("foreach_lerp", foreach_lerp),
           ("foreach_mul_add", foreach_mul_add))
    # GPU time with the launches hidden behind a spin kernel (these are launch-bound ops: without it
    # the events would time the Python/dispatcher gap before the kernel); host wall time separately.
    res = {k: timeit(f, iters=50, hide_launch=True) for k, f in fns if k != "ultralytics_loop"}
    res["ultralytics_loop"] = timeit(ultralytics_loop, iters=20)
    walls = {f"{k}_wall_us": wall(f, iters=50) for k, f in fns}
    floor_us = nbytes / (bw * 1e9) * 1e6
    rows.append({"bench": "ema", "tensors": len(model), "elements": numel, "bytes": nbytes, "copy_GBs": bw,
                 "floor_us": floor_us, **{f"{k}_us": v["median_us"] for k, v in res.items()},
                 **walls, "ours_over_floor": res["ours"]["median_us"] / floor_us,
                 "pass": res["ours"]["median_us"] <= 1.2 * floor_us})


def bench_sgd(rows):
    info = yolov5s_shapes()
    results = {}
    numel = 0
    for kind in ("ours", "torch_foreach", "torch_fused"):
        g = torch.Generator(device="cuda").manual_seed(0)
        groups = [[torch.nn.Parameter(torch.randn(s, device="cuda", generator=g)) for s in grp]
                  for grp in info["groups"]]
        numel = sum(p.numel() for grp in groups for p in grp)
        for grp in groups:
            for p in grp:
                p.grad = torch.randn_like(p)
        kw = dict(lr=0.01, momentum=0.937, nesterov=True)
        try:
            if kind == "ours":
                opt = yt.FusedSGD(groups[2], **kw)
            else:
                opt = torch.optim.SGD(groups[2], **kw, **({"foreach": True} if kind == "torch_foreach"
                                                           else {"fused": True}))
            opt.add_param_group({"params": groups[0], "weight_decay": 5e-4})
            opt.add_param_group({"params": groups[1], "weight_decay": 0.0})
            opt.step()
            results[kind] = timeit(opt.step, iters=50, hide_launch=True)["median_us"]
            results[kind + "_wall"] = wall(opt.step, iters=50)
        except Exception as e:  # noqa: BLE001
            results[kind] = results[kind + "_wall"] = float("nan")
            print(f"note: sgd {kind} unavailable: {str(e)[:120]}")
    nbytes = 20 * numel  # read p, g, buf; write p, buf
    bw = copy_bw(nbytes)
    floor_us = nbytes / (bw * 1e9) * 1e6
    rows.append({"bench": "sgd", "elements": numel, "bytes": nbytes, "copy_GBs": bw, "floor_us": floor_us,
                 **{f"{k}_us": v for k, v in results.items()}, "ours_over_floor": results["ours"] / floor_us})


def main():
    global FLUSH
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "out", "training"))
    ap.add_argument("--compile", action="store_true", help="also time torch.compile(bbox_iou) for CIoU")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if not yt.HAVE_CUDA_KERNELS:
        sys.exit(f"the yolocu extension was built without CUDA kernels ({yt.LIBRARY_PATH})")
    FLUSH = torch.empty(256 * 1024 * 1024 // 4, device="cuda")
    dev = torch.cuda.get_device_name(0)
    peak = copy_bw(2 * 1024 ** 3, iters=20)
    print(f"device {dev}, torch {torch.__version__}, 1 GiB copy: {peak:.0f} GB/s")
    rows = []
    bench_upsample(rows)
    bench_ciou(rows, args.compile)
    bench_ema(rows)
    bench_sgd(rows)
    with open(os.path.join(args.out, "bench_kernels.json"), "w") as f:
        json.dump({"device": dev, "torch": torch.__version__, "copy_1GiB_GBs": peak, "rows": rows}, f, indent=1)

    print("\nupsample nearest 2x (L2 flushed; copy = same-traffic D2D copy)")
    print(f"{'shape':>18} {'dtype':>8} {'layout':>13} {'dir':>4} {'ours us':>8} {'torch us':>9} {'ours GB/s':>9} "
          f"{'%copy':>6} {'torch %copy':>11} {'speedup':>7} {'>=85%':>5}")
    for r in rows:
        if r["bench"] == "upsample":
            print(f"{str(tuple(r['shape'])):>18} {r['dtype']:>8} {r['layout']:>13} {r['dir']:>4} {r['ours_us']:8.1f} "
                  f"{r['torch_us']:9.1f} {r['ours_GBs']:9.0f} {r['ours_pct_copy']:6.1f} {r['torch_pct_copy']:11.1f} "
                  f"{r['speedup']:7.2f} {'yes' if r['pass'] else 'NO':>5}")
    for r in rows:
        if r["bench"] == "ciou":
            print(f"\nCIoU fwd+bwd, {r['boxes']} boxes in {len(r['levels'])} levels "
                  f"(gpu = GPU time with launches hidden; wall = host time incl. launches, synchronous):")
            for k in ("ours_kernels", "ours_autograd", "eager", "torch_compile"):
                if f"{k}_gpu_us" in r:
                    print(f"  {k:>14}: gpu {r[k + '_gpu_us']:8.1f} us   wall {r[k + '_wall_us']:8.1f} us")
            print(f"  ours kernels <= 30 us (gpu): {'yes' if r['pass'] else 'NO'}")
        if r["bench"] == "ema":
            print(f"\nEMA yolov5s: {r['tensors']} tensors, {r['elements']} floats, floor {r['floor_us']:.1f} us "
                  f"({r['bytes'] / 1e6:.1f} MB at {r['copy_GBs']:.0f} GB/s): ours {r['ours_us']:.1f} us "
                  f"({r['ours_over_floor']:.2f}x floor, <=1.2x: {'yes' if r['pass'] else 'NO'}), "
                  f"foreach_lerp_ {r['foreach_lerp_us']:.1f} us, foreach mul+add {r['foreach_mul_add_us']:.1f} us, "
                  f"ultralytics loop {r['ultralytics_loop_us']:.1f} us; host wall incl. launches: ours "
                  f"{r['ours_wall_us']:.1f} us, foreach_lerp_ {r['foreach_lerp_wall_us']:.1f} us, ultralytics loop "
                  f"{r['ultralytics_loop_wall_us']:.1f} us")
        if r["bench"] == "sgd":
            print(f"\nSGD yolov5s (3 groups, nesterov): floor {r['floor_us']:.1f} us: FusedSGD.step {r['ours_us']:.1f} us "
                  f"({r['ours_over_floor']:.2f}x floor), torch foreach {r['torch_foreach_us']:.1f} us, "
                  f"torch fused {r['torch_fused_us']:.1f} us; host wall: ours {r['ours_wall_us']:.1f} us, "
                  f"foreach {r['torch_foreach_wall_us']:.1f} us, fused {r['torch_fused_wall_us']:.1f} us")
    fails = [r for r in rows if r.get("pass") is False]
    print(f"\nbenchmark targets: {'all met' if not fails else f'{len(fails)} not met'}")


if __name__ == "__main__":
    main()
