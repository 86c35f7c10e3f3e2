#!/usr/bin/env python3
"""Compares launch_train.py logs: median step time and loss curves.

    python bench/training/compare_train.py --skip 8 base.json yolocu.json [base_otherseed.json]

The first run is the baseline, the second the candidate, an optional third a baseline with another
seed (its distance to the baseline is the run-to-run noise reference for the loss curves). Step
times of the first --skip iterations (warm-up: cuDNN autotuning, allocator growth) are dropped.
"""
import argparse
import json
import statistics


def load(path):
    with open(path) as f:
        r = json.load(f)
    n = min(len(r["t_start"]), len(r["t_end"]), len(r["ni"]))
    r["step"] = [r["t_end"][i] - r["t_start"][i] for i in range(n)]
    r["period"] = [r["t_start"][i + 1] - r["t_start"][i] for i in range(n - 1)]
    r["loss"] = [sum(x) for x in r["loss_items"][:n]]
    return r


def stats(xs):
    xs = sorted(xs)
    if not xs:
        return float("nan"), float("nan"), float("nan")
    return statistics.median(xs), xs[len(xs) // 10], xs[(9 * len(xs)) // 10]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip", type=int, default=8)
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    runs = [load(p) for p in a.runs]
    names = ["baseline", "yolocu", "baseline(seed+1)"][:len(runs)]
    print(f"device {runs[0].get('device')}, torch {runs[0].get('torch')}, yolocu switches {runs[1].get('switched')}")
    print(f"compat fixes: {runs[0].get('compat')}")
    print(f"\n{'run':>17} {'iters':>5} {'step ms (median)':>16} {'p10':>7} {'p90':>7} {'period ms':>9} {'total s':>8}")
    med = []
    for name, r in zip(names, runs):
        m, lo, hi = stats(r["step"][a.skip:])
        pm, _, _ = stats(r["period"][a.skip:])
        med.append(m)
        print(f"{name:>17} {len(r['step']):5d} {1e3 * m:16.2f} {1e3 * lo:7.2f} {1e3 * hi:7.2f} {1e3 * pm:9.2f} "
              f"{r.get('total_s', float('nan')):8.1f}")
    if len(med) >= 2:
        red = 100 * (1 - med[1] / med[0])
        print(f"\nstep time reduction (yolocu vs baseline, median after {a.skip} warm-up iterations): {red:.1f}% "
              f"(target >= 15%: {'met' if red >= 15 else 'NOT met'})")
    print(f"\nloss curves (box+obj+cls per iteration, as train.py's loss_items):")
    n = min(len(r["loss"]) for r in runs)
    hdr = "".join(f"{nm:>18}" for nm in names)
    print(f"{'iter':>5}{hdr}{'|yolocu-base|':>15}" + (f"{'|seed1-base|':>14}" if len(runs) > 2 else ""))
    for i in range(n):
        row = "".join(f"{r['loss'][i]:18.6f}" for r in runs)
        d = abs(runs[1]["loss"][i] - runs[0]["loss"][i])
        extra = f"{abs(runs[2]['loss'][i] - runs[0]['loss'][i]):14.6f}" if len(runs) > 2 else ""
        print(f"{runs[0]['ni'][i]:5d}{row}{d:15.6f}{extra}")
    if n:
        dy = [abs(runs[1]["loss"][i] - runs[0]["loss"][i]) for i in range(n)]
        msg = f"\nmean |yolocu - baseline| = {statistics.mean(dy):.6f}, max = {max(dy):.6f}"
        if len(runs) > 2:
            dn = [abs(runs[2]["loss"][i] - runs[0]["loss"][i]) for i in range(n)]
            msg += (f"; noise reference mean |seed+1 - baseline| = {statistics.mean(dn):.6f}, max = {max(dn):.6f}"
                    f" -> {'within' if statistics.mean(dy) <= statistics.mean(dn) else 'OUTSIDE'} run-to-run noise")
        print(msg)


if __name__ == "__main__":
    main()
