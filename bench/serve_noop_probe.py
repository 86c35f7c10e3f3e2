#!/usr/bin/env python3
"""Triton's own cost through PyTriton, without yolocu: a model that does nothing (returns a count
and ten empty boxes per image), bound like `yolocu serve` (dynamic batcher, max batch 8, 1 ms queue
delay), N gRPC client threads sending K HxWx3 uint8 images per request. What it prints is the
ceiling any model served this way can reach on the machine (docs/performance.md section 8).

    python bench/serve_noop_probe.py [--height 1080 --width 810] [--clients 8] [--requests 400] [--per-request 1]

Needs the yolocu package with the serving extras (pip install ".[serve]"). Ports 18000-18002 on 127.0.0.1.
"""
import argparse
import os
import threading
import time

import numpy as np

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--height", type=int, default=1080)
ap.add_argument("--width", type=int, default=810)
ap.add_argument("--clients", type=int, default=8)
ap.add_argument("--requests", type=int, default=400)
ap.add_argument("--per-request", type=int, default=1)
a = ap.parse_args()

# Triton's Python-backend stub embeds libpython: this interpreter's, as `yolocu serve` sets it up
# (the helper only; no detector is made)
from yolocu.serve import _python_libdir_first  # noqa: E402

_python_libdir_first()

import tritonclient.grpc as grpcclient  # noqa: E402
from pytriton.decorators import batch  # noqa: E402
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor  # noqa: E402
from pytriton.triton import Triton, TritonConfig  # noqa: E402


@batch
def infer(image):
    n = image.shape[0]
    return {"count": np.ones((n, 1), np.int32), "boxes": np.zeros((n, 10, 4), np.float32)}


H, W, K = a.height, a.width, a.per_request
cfg = TritonConfig(http_address="127.0.0.1", grpc_address="127.0.0.1", http_port=18000, grpc_port=18001,
                   metrics_port=18002)
with Triton(config=cfg) as t:
    t.bind("noop", infer, inputs=[Tensor(name="image", dtype=np.uint8, shape=(-1, -1, 3))],
           outputs=[Tensor(name="count", dtype=np.int32, shape=(1,)), Tensor(name="boxes", dtype=np.float32, shape=(-1, 4))],
           config=ModelConfig(max_batch_size=8, batcher=DynamicBatcher(max_queue_delay_microseconds=1000)), strict=False)
    t.run()
    img = np.random.randint(0, 255, (K, H, W, 3), np.uint8)
    lat, lock = [], threading.Lock()

    def client(n):
        c = grpcclient.InferenceServerClient("127.0.0.1:18001")
        i = grpcclient.InferInput("image", [K, H, W, 3], "UINT8")
        i.set_data_from_numpy(img)
        mine = []
        for _ in range(n):
            t0 = time.perf_counter()
            c.infer("noop", [i])
            mine.append(time.perf_counter() - t0)
        with lock:
            lat.extend(mine)
        c.close()

    for _ in range(2):  # the first pass warms up
        lat.clear()
        th = [threading.Thread(target=client, args=(a.requests // a.clients,)) for _ in range(a.clients)]
        t0 = time.perf_counter()
        for x in th:
            x.start()
        for x in th:
            x.join()
        wall = time.perf_counter() - t0
    lat.sort()
    mb = K * H * W * 3 / 1e6
    print(f"no-op model, {K} x {H}x{W}x3 uint8 per request ({mb:.2f} MB), {a.clients} clients: "
          f"{len(lat) / wall:.1f} requests/s = {K * len(lat) / wall:.1f} images/s ({mb * len(lat) / wall:.0f} MB/s), "
          f"p50 {1e3 * lat[len(lat) // 2]:.1f} ms, p99 {1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))]:.1f} ms, "
          f"{os.cpu_count()} CPU cores")
