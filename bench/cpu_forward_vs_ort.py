"""CPU forward of a model: yolocu's engine against ONNX Runtime, alternating in one session.

usage: cpu_forward_vs_ort.py BUILD_DIR MODEL [--batch B] [--rounds R] [--iters N]
Each round runs bench_cpu_engine (N timed runs after warm-up), the same with the Detect head run
node by node (--fuse-detect 0, the engine before the fused tail), and then ONNX Runtime on the
same input shape with the same random data distribution and all cores (N timed runs after
warm-up); prints the median over rounds of each side's median, and the ratio.
"""
import argparse
import os
import re
import statistics
import subprocess
import time

import numpy as np
import onnxruntime as ort


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=640)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    sess = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    dtype = np.float16 if "float16" in inp.type else np.float32
    x = np.random.default_rng(0).random((a.batch, 3, a.size, a.size)).astype(dtype)
    ours, unfused, theirs = [], [], []

    def bench(fuse: int) -> float:
        out = subprocess.run([os.path.join(a.build, "bench", "bench_cpu_engine"), a.model, "--batch", str(a.batch),
                              "--size", str(a.size), "--iters", str(a.iters), "--fuse-detect", str(fuse)],
                             check=True, capture_output=True, text=True).stdout
        return float(re.search(r"median_ms=([0-9.]+)", out).group(1))

    for r in range(a.rounds):
        ours.append(bench(1))
        unfused.append(bench(0))
        for _ in range(3):
            sess.run(None, {inp.name: x})
        ts = []
        for _ in range(a.iters):
            t = time.perf_counter()
            sess.run(None, {inp.name: x})
            ts.append((time.perf_counter() - t) * 1e3)
        theirs.append(statistics.median(ts))
        print(f"round {r + 1}: yolocu {ours[-1]:.2f} ms, yolocu node-by-node Detect tail {unfused[-1]:.2f} ms, "
              f"onnxruntime {theirs[-1]:.2f} ms", flush=True)
    y, u, o = statistics.median(ours), statistics.median(unfused), statistics.median(theirs)
    print(f"| {os.path.basename(a.model)} | batch {a.batch} | {a.size} | yolocu {y:.2f} ms | node-by-node tail {u:.2f} ms "
          f"| onnxruntime {ort.__version__} {o:.2f} ms | yolocu/ort {y / o:.2f} |")


if __name__ == "__main__":
    main()
