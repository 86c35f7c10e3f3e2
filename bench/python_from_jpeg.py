"""Encoded images -> boxes through the Python API with nvJPEG (`Detector(decode="gpu")`): images/s
with the engine's forward replayed as CUDA graphs and launched eagerly, in the same process,
alternating rounds (the question behind `engine_graphs`'s default; the CLI's answer is in
docs/performance.md section 10).

    python bench/python_from_jpeg.py --model yolov5n.onnx --images bus.jpg zidane.jpg \\
        [--batch 32] [--per-call 4] [--contexts 1 2] [--n 2048] [--rounds 5]

The JPEG files are read once into memory and cycled to --n images; each of `contexts` threads
calls the detector with --per-call batches of bytes at a time (a call of several batches decodes
batch k + 1 while batch k computes). Median images/s over the rounds; prints a markdown table.
"""
import argparse
import statistics
import threading
import time

import yolocu


def images_per_second(det, blobs, per_call, threads):
    calls = [blobs[i:i + per_call] for i in range(0, len(blobs), per_call)]

    def worker(k):
        for c in calls[k::threads]:
            det(c)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return len(blobs) / (time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--images", nargs="+", required=True, help="JPEG files, cycled")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--per-call", type=int, default=4, help="batches per detector call")
    p.add_argument("--contexts", type=int, nargs="+", default=[1, 2], help="contexts = calling threads")
    p.add_argument("--n", type=int, default=2048, help="images per round")
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    if a.batch < 1 or a.per_call < 1 or a.n < a.batch or a.rounds < 1 or min(a.contexts) < 1:
        p.error("--batch, --per-call, --rounds and --contexts must be >= 1, --n >= --batch")
    data = [open(f, "rb").read() for f in a.images]
    blobs = [data[i % len(data)] for i in range(a.n)]
    default = yolocu.Detector(a.model, device="cuda", batch=1, decode="gpu").engine_graphs
    print(f"yolocu {yolocu.__version__}; Detector(decode='gpu') default engine_graphs={default}; "
          f"batch {a.batch}, {a.per_call} batches per call, {a.n} images per round, median of {a.rounds} rounds")
    print("| contexts | CUDA graphs images/s | eager images/s | eager / graphs |")
    print("|---|---|---|---|")
    for contexts in a.contexts:
        dets = {g: yolocu.Detector(a.model, device="cuda", precision="fp16", batch=a.batch, contexts=contexts,
                                   decode="gpu", engine_graphs=g) for g in (True, False)}
        for d in dets.values():
            d.warm_up([a.batch])
            images_per_second(d, blobs[:a.batch * a.per_call * contexts], a.batch * a.per_call, contexts)
        rates = {True: [], False: []}
        for _ in range(a.rounds):
            for g in (True, False):
                rates[g].append(images_per_second(dets[g], blobs, a.batch * a.per_call, contexts))
        on, off = statistics.median(rates[True]), statistics.median(rates[False])
        print(f"| {contexts} | {on:,.0f} | {off:,.0f} | {off / on:.3f} |", flush=True)
        del dets


if __name__ == "__main__":
    main()
