#!/usr/bin/env python3
"""Peer of bench_jpeg_decode: torchvision.io.decode_jpeg(device="cuda") (nvJPEG) on the JPEGs of a
folder, in memory, cycled to --images, in lists of --batch, one thread; and cv2.imdecode on
--cpu-threads threads. Prints images/s, median of --runs.

    python3 bench/peer_torch_decode.py DIR [--images 4096] [--batch 32] [--runs 3] [--cpu-threads 16]
"""
import argparse
import glob
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("dir")
ap.add_argument("--images", type=int, default=4096)
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--cpu-threads", type=int, default=os.cpu_count())
a = ap.parse_args()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402
from torchvision.io import decode_jpeg  # noqa: E402

files = sorted(glob.glob(os.path.join(a.dir, "*.jpg")))
data = [open(f, "rb").read() for f in files]
items = [data[i % len(data)] for i in range(a.images)]
tensors = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in items]
lists = [tensors[i:i + a.batch] for i in range(0, len(tensors), a.batch)]


def gpu_pass():
    t0 = time.perf_counter()
    for lst in lists:
        decode_jpeg(lst, device="cuda")
    torch.cuda.synchronize()
    return a.images / (time.perf_counter() - t0)


gpu_pass()  # warm-up
rates = [gpu_pass() for _ in range(a.runs)]
print(f"torchvision {torchvision.__version__} decode_jpeg(device=cuda), lists of {a.batch}, 1 thread: "
      f"{statistics.median(rates):.0f} img/s (median of {a.runs})")
try:
    import cv2

    cv2.setNumThreads(1)
    arrays = [np.frombuffer(b, dtype=np.uint8) for b in items]

    def cpu_pass():
        t0 = time.perf_counter()
        with ThreadPoolExecutor(a.cpu_threads) as ex:
            list(ex.map(lambda x: cv2.imdecode(x, cv2.IMREAD_COLOR), arrays, chunksize=16))
        return a.images / (time.perf_counter() - t0)

    cpu_pass()
    rates = [cpu_pass() for _ in range(a.runs)]
    print(f"cv2 {cv2.__version__} imdecode, {a.cpu_threads} threads: {statistics.median(rates):.0f} img/s (median of {a.runs})")
except ImportError:
    print("cv2 not installed: no CPU peer")
