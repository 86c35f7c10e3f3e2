"""Load generator for a Triton server running the yolocu backend (docs/serving.md): JPEG bytes over
gRPC from several client processes, closed loop (each worker sends its next request when the last
is answered) or open loop at a fixed request rate, for a fixed time after a warm-up. Every answer is
checked against the first answer for the same image (a request of that image alone): the same
detections (class, IoU >= 0.9), or "near" when one detection more or less is the only difference
(another batch size runs other FP16 tactics, whose rounding can move a score across the threshold),
else wrong; errors, wrong and near answers are counted.

    python3 bench/serve_load.py --url 127.0.0.1:8001 --model yolov5 --images DIR --per-request 8 \
        --procs 8 --threads 4 --seconds 20 [--rate 2000] [--json out.json]

Prints one line: images/s, requests/s, latency p50 / p90 / p99 (ms), errors, wrong and near answers.
"""
import argparse
import json
import multiprocessing as mp
import os
import sys
import threading
import time

import numpy as np


def image_names(folder, limit):
    names = sorted(f for f in os.listdir(folder) if f.lower().endswith((".jpg", ".jpeg")))[:limit]
    if not names:
        sys.exit(f"serve_load: no JPEG files in {folder}")
    return names


def load_images(folder, names):
    return [open(os.path.join(folder, n), "rb").read() for n in names]


def make_input(grpcclient, blobs):
    inp = grpcclient.InferInput("IMAGE", [len(blobs), 1], "BYTES")
    inp.set_data_from_numpy(np.array([[b] for b in blobs], dtype=object))
    return inp


def answers(res):
    """Per image of a response: its detections as (class, box) pairs."""
    counts = res.as_numpy("COUNT")[:, 0]
    boxes, classes = res.as_numpy("BOXES"), res.as_numpy("CLASSES")
    return [[(int(classes[i, j]), boxes[i, j]) for j in range(int(c))] for i, c in enumerate(counts)]


def iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - iw * ih
    return iw * ih / u if u > 0 else 0.0


def judge(got, want):
    """'same', 'near' (one detection more or less, the rest matched) or 'wrong'."""
    small, large = (got, want) if len(got) <= len(want) else (want, got)
    if len(large) - len(small) > 1:
        return "wrong"
    used = set()
    for c, b in small:
        m = next((j for j, (c2, b2) in enumerate(large) if j not in used and c2 == c and iou(b, b2) >= 0.9), None)
        if m is None:
            return "wrong"
        used.add(m)
    return "same" if len(small) == len(large) else "near"


def worker(args, proc_index, names, expected, start_at, stop_at, queue):
    import tritonclient.grpc as grpcclient
    images = load_images(args.images, names)
    # the answers are judged after the load, so that the clients' CPU time under load is the requests'
    lat, errors, kept, lock = [], [], [], threading.Lock()
    interval = args.threads * args.procs / args.rate if args.rate else 0.0

    def run(thread_index):
        client = grpcclient.InferenceServerClient(args.url)
        k = (proc_index * args.threads + thread_index) * args.per_request
        # Open loop: the warm-up runs at the measured rate too (connections made, the server's
        # batch sizes seen), each worker offset by its share of the interval from its start
        offset = (proc_index * args.threads + thread_index) * interval / (args.threads * args.procs)
        next_send = max(start_at - args.warmup, time.time()) + offset
        while True:
            now = time.time()
            if now >= stop_at:
                break
            if interval:
                if now < next_send:
                    time.sleep(min(next_send - now, stop_at - now))
                    continue
                if now < start_at and now - next_send > interval:
                    next_send = now  # behind in the warm-up (a slow start): no burst to catch up
                next_send += interval
            idx = [(k + j) % len(images) for j in range(args.per_request)]
            k += args.per_request
            sent = time.time()
            t0 = time.perf_counter()
            try:
                res = client.infer(args.model, [make_input(grpcclient, [images[i] for i in idx])], client_timeout=60)
                dt = time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001
                with lock:
                    errors.append(str(e)[:200])
                continue
            if sent >= start_at:  # requests sent in the warm-up are not counted
                with lock:
                    lat.append(dt)
                    kept.append((idx, res))
        client.close()

    ts = [threading.Thread(target=run, args=(t,)) for t in range(args.threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wrong = near = 0
    wrong_images = {}  # image index -> wrong answers for it
    for idx, res in kept:
        try:
            verdicts = [judge(a, expected[i]) for i, a in zip(idx, answers(res))]
        except Exception as e:  # noqa: BLE001
            errors.append(f"unreadable answer: {str(e)[:180]}")
            continue
        wrong += "wrong" in verdicts
        near += "wrong" not in verdicts and "near" in verdicts
        for i, v in zip(idx, verdicts):
            if v == "wrong":
                wrong_images[i] = wrong_images.get(i, 0) + 1
    queue.put((lat, errors, wrong, near, wrong_images))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="127.0.0.1:8001")
    p.add_argument("--model", default="yolov5")
    p.add_argument("--images", required=True, help="folder of JPEG files (cycled)")
    p.add_argument("--limit", type=int, default=128, help="at most this many files")
    p.add_argument("--per-request", type=int, default=1)
    p.add_argument("--procs", type=int, default=8)
    p.add_argument("--threads", type=int, default=4, help="concurrent requests per process")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--warmup", type=float, default=5)
    p.add_argument("--rate", type=float, default=0, help="open loop: requests/s over all workers (0: closed loop)")
    p.add_argument("--json", default=None)
    args = p.parse_args()

    import tritonclient.grpc as grpcclient
    names = image_names(args.images, args.limit)
    images = load_images(args.images, names)
    client = grpcclient.InferenceServerClient(args.url)
    expected = [answers(client.infer(args.model, [make_input(grpcclient, [b])]))[0] for b in images]
    client.close()

    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    start_at = time.time() + args.warmup
    stop_at = start_at + args.seconds
    procs = [ctx.Process(target=worker, args=(args, i, names, expected, start_at, stop_at, queue))
             for i in range(args.procs)]
    for pr in procs:
        pr.start()
    results = [queue.get(timeout=args.warmup + args.seconds + 120) for _ in procs]
    for pr in procs:
        pr.join(timeout=30)
    lat = np.array([x for r in results for x in r[0]]) * 1e3
    errors = [e for r in results for e in r[1]]
    wrong = sum(r[2] for r in results)
    near = sum(r[3] for r in results)
    # which images the wrong answers were for (one knife-edge image among the files shows as its
    # share of the requests)
    by_image = {}
    for r in results:
        for i, c in r[4].items():
            by_image[names[i]] = by_image.get(names[i], 0) + c
    n = len(lat)
    out = {
        "per_request": args.per_request, "clients": args.procs * args.threads, "seconds": args.seconds,
        "rate_asked": args.rate, "requests": n, "images_per_s": n * args.per_request / args.seconds,
        "requests_per_s": n / args.seconds, "errors": len(errors), "wrong": wrong, "near": near,
        "p50_ms": float(np.percentile(lat, 50)) if n else None, "p90_ms": float(np.percentile(lat, 90)) if n else None,
        "p99_ms": float(np.percentile(lat, 99)) if n else None, "wrong_by_image": by_image,
    }
    if by_image:  # (before the summary line, which callers read as the last one)
        print("[serve_load] wrong answers by image: " +
              ", ".join(f"{k} x{v}" for k, v in sorted(by_image.items(), key=lambda kv: -kv[1])))
    print(f"[serve_load] {args.per_request} image(s)/request, {out['clients']} clients"
          f"{' at ' + str(args.rate) + ' req/s' if args.rate else ''}: {out['images_per_s']:.1f} images/s, "
          f"{out['requests_per_s']:.1f} requests/s, p50 {out['p50_ms'] or 0:.2f} ms, p90 {out['p90_ms'] or 0:.2f} ms, "
          f"p99 {out['p99_ms'] or 0:.2f} ms, {len(errors)} errors, {wrong} wrong, {near} near" + (f" (first: {errors[0]})" if errors else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 1 if errors or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
