"""Throughput of yolocu behind Triton (`yolocu serve`) against the C++ API and the Python API, same
model, image and batch: the gap is what Triton + PyTriton + the client cost.

    python bench/serve_throughput.py --model yolov5n.onnx --image bus.jpg --device cuda --batch 8 \\
        --clients 8 32 --instances 1 2 [--gpus 0 1] [--mode raw|bytes] [--requests 4000] [--json out.json]

Rows:
  C++ API     `yolocu bench` (the CLI inside the package): detect() on `batch` copies of the decoded
              image, back to back, median.
  Python API  yolocu.Detector(batch=...)(list of `batch` arrays), back to back, median.
  Triton      `python -m yolocu.serve` on 127.0.0.1 (random free ports), dynamic batching up to
              --batch, N concurrent gRPC clients (threads of this process, one client each), each
              request one image (raw UINT8 HxWx3, or the JPEG bytes with --mode bytes); after a
              warm-up, --requests requests in all; images/s and request latency p50/p99.
              With --gpus: one server, one detector per listed GPU (--instances contexts each).
Everything is bounded: each server is stopped (SIGTERM, then SIGKILL of its process group).
Needs the yolocu package and, for the Triton rows, nvidia-pytriton + tritonclient[grpc] with
NumPy < 2 (docs/serving.md).
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

import yolocu
from yolocu.cli import cli_path


def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def cpp_api(args):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        cmd = [cli_path(), "bench", "--model", args.model, "--image", args.image, "--device", args.device,
               "--precision", args.precision, "--batches", str(args.batch), "--iters", str(args.iters),
               "--warmup", "20", "--max-det", "300", "--json", out]
        subprocess.run(cmd, check=True, timeout=600, stdout=sys.stderr)
        with open(out) as f:
            row = json.load(f)["results"][0]
    return {"images_per_s": row["images_per_s"], "batch_ms_p50": row["e2e_ms"]["median"],
            "batch_ms_p99": row["e2e_ms"]["p99"]}


def python_api(args):
    det = yolocu.Detector(args.model, device=args.device, precision=args.precision, batch=args.batch, max_det=300)
    imgs = [yolocu.decode(args.image)] * args.batch
    for _ in range(20):
        det(imgs)
    times = []
    for _ in range(args.iters):
        t0 = time.perf_counter()
        det(imgs)
        times.append(time.perf_counter() - t0)
    times.sort()
    med = statistics.median(times)
    return {"images_per_s": args.batch / med, "batch_ms_p50": med * 1e3,
            "batch_ms_p99": times[min(len(times) - 1, int(0.99 * len(times)))] * 1e3}


class Server:
    def __init__(self, args, instances, gpus=None):
        self.ready_s = None
        self.http, self.grpc, self.metrics = free_ports(3)
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        cmd = [sys.executable, "-m", "yolocu.serve", "--model", args.model, "--precision", args.precision,
               "--http-port", str(self.http), "--grpc-port", str(self.grpc), "--metrics-port", str(self.metrics),
               "--max-batch", str(args.batch), "--max-queue-delay-us", str(args.queue_delay_us),
               "--instances", str(instances), "--max-det", "300", "--timeout-s", "1200",
               "--decode", args.server_decode, "--decode-cpu-share", str(args.server_decode_cpu_share)]
        if args.server_no_engine_graphs:
            cmd.append("--no-engine-graphs")
        cmd += ["--gpus"] + [str(g) for g in gpus] if gpus else ["--device", args.device]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.time()
        while time.time() - t0 < 300:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {open(self.log.name).read()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/v2/models/yolov5/ready", timeout=2) as r:
                    if r.status == 200:
                        self.ready_s = time.time() - t0  # the detectors' build and warm-up included
                        warm = [ln.strip() for ln in open(self.log.name, errors="replace") if "warmed up" in ln]
                        print(f"server ready in {self.ready_s:.1f} s; {warm[-1] if warm else 'no warm-up line'}",
                              file=sys.stderr, flush=True)
                        return
            except Exception:  # noqa: BLE001
                time.sleep(0.5)
        self.stop()
        raise RuntimeError("server not ready after 300 s")

    def stop(self):
        # the server's own log, last lines (an error response's cause is often only there)
        try:
            tail = open(self.log.name, errors="replace").read().splitlines()[-25:]
            print("server log, last lines:\n  " + "\n  ".join(tail), file=sys.stderr, flush=True)
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def load(args, server, clients, total):
    import tritonclient.grpc as grpcclient
    img = yolocu.decode(args.image)
    blob = open(args.image, "rb").read()

    def make_input(client=grpcclient):  # tritonclient.grpc or tritonclient.http: the same InferInput
        if args.mode == "bytes":
            i = client.InferInput("image_bytes", [1, 1], "BYTES")
            i.set_data_from_numpy(np.array([[blob]], dtype=object))
        else:
            i = client.InferInput("image", [1, *img.shape], "UINT8")
            i.set_data_from_numpy(img[None])
        return i

    # The answers must be right before they are timed: one request, against yolocu.Detector on the
    # same image in this process (same device and precision; boxes within 1 px: a batch size of the
    # server's may take another tuned size's tactics, whose FP16 rounding differs).
    ref = yolocu.Detector(args.model, device=args.device, precision=args.precision, batch=1, max_det=300)(img)

    def check_answer(count, boxes):
        n = int(np.asarray(count).reshape(-1)[0])
        got = np.asarray(boxes).reshape(-1, 4)[:n]
        if n != len(ref.boxes):
            return f"MISMATCH: {n} detections, yolocu.Detector {len(ref.boxes)}"
        d = float(np.abs(np.sort(got, axis=0) - np.sort(ref.boxes, axis=0)).max()) if n else 0.0
        return f"ok: {n} detections, boxes within {d:.3f} px" if d <= 1.0 else f"MISMATCH: boxes differ by {d:.2f} px"

    check = "not checked"
    try:
        c0 = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")
        r = c0.infer("yolov5", [make_input()], client_timeout=300)
        c0.close()
        resp = r.get_response()
        sizes = {o.name: len(raw) for o, raw in zip(resp.outputs, resp.raw_output_contents)}
        print(f"gRPC answer: outputs {[(o.name, o.datatype, list(o.shape)) for o in resp.outputs]}, raw bytes {sizes}",
              file=sys.stderr, flush=True)
        check = "gRPC " + check_answer(r.as_numpy("count"), r.as_numpy("boxes"))
    except Exception as e:  # noqa: BLE001
        check = f"gRPC FAILED: {str(e)[:160]}"
    if not check.startswith("gRPC ok"):  # the same request over HTTP: is it the answer or the gRPC client?
        try:
            import tritonclient.http as httpclient
            h = httpclient.InferenceServerClient(f"127.0.0.1:{server.http}")
            r = h.infer("yolov5", [make_input(httpclient)])
            h.close()
            check += "; HTTP " + check_answer(r.as_numpy("count"), r.as_numpy("boxes"))
        except Exception as e:  # noqa: BLE001
            check += f"; HTTP FAILED: {str(e)[:160]}"
    print(f"answer check ({args.mode}, {clients} clients): {check}", file=sys.stderr, flush=True)

    lat, errors = [], []
    lock = threading.Lock()
    per = max(1, total // clients)
    deadline = time.time() + 1e9  # the warm-up's requests are not timed: the limit starts after them

    def client(k, n, record):
        c = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")
        inp = [make_input()]
        mine = []
        for _ in range(n):
            if time.time() > deadline:
                break
            t0 = time.perf_counter()
            try:
                c.infer("yolov5", inp, client_timeout=120)
                mine.append(time.perf_counter() - t0)
            except Exception as e:  # noqa: BLE001
                errors.append(str(e)[:200])
        if record:
            with lock:
                lat.extend(mine)
        c.close()

    def run_clients(n, record):  # every client thread n requests; wall seconds
        threads = [threading.Thread(target=client, args=(k, n, record)) for k in range(clients)]
        t_start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.perf_counter() - t_start

    run_clients(10, False)  # warm-up, untimed
    deadline = time.time() + args.max_seconds
    wall = run_clients(per, True)
    lat_ms = np.array(sorted(lat)) * 1e3 if lat else np.zeros(1)
    if errors:
        print(f"{len(errors)} errors, the first: {errors[0]}", file=sys.stderr)
    return {"clients": clients, "requests": len(lat), "errors": len(errors), "answer_check": check,
            "first_error": errors[0] if errors else None, "images_per_s": len(lat) / wall,
            "latency_ms_p50": float(np.percentile(lat_ms, 50)), "latency_ms_p99": float(np.percentile(lat_ms, 99)),
            "wall_s": wall}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--precision", default="fp16")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--iters", type=int, default=200, help="timed detect() calls of the API rows")
    p.add_argument("--clients", type=int, nargs="+", default=[8, 32])
    p.add_argument("--instances", type=int, nargs="+", default=[1, 2])
    p.add_argument("--gpus", type=int, nargs="+", default=None, help="also: one server over these GPUs")
    p.add_argument("--mode", choices=["raw", "bytes"], default="raw")
    p.add_argument("--server-decode", choices=["cpu", "gpu"], default="cpu",
                   help="yolocu serve --decode: where the server decodes --mode bytes requests")
    p.add_argument("--server-decode-cpu-share", type=float, default=0.0, help="yolocu serve --decode-cpu-share")
    p.add_argument("--server-no-engine-graphs", action="store_true", help="yolocu serve --no-engine-graphs")
    p.add_argument("--requests", type=int, default=4000, help="timed requests per Triton row")
    p.add_argument("--queue-delay-us", type=int, default=1000)
    p.add_argument("--max-seconds", type=float, default=120, help="time limit of one Triton row")
    p.add_argument("--skip-api", action="store_true")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    # A timeout's SIGTERM unwinds through the finally blocks below, which stop the servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    rows = []
    if not args.skip_api:
        rows.append(dict(what="C++ API (yolocu bench)", **cpp_api(args)))
        rows.append(dict(what="Python API (yolocu.Detector)", **python_api(args)))
    configs = [(f"Triton, {i} instance(s), {args.device}", i, None) for i in args.instances]
    if args.gpus:
        configs.append((f"Triton, GPUs {args.gpus}, {args.instances[0]} instance(s) each", args.instances[0], args.gpus))
    for name, inst, gpus in configs:
        srv = Server(args, inst, gpus)
        try:
            for c in args.clients:
                rows.append(dict(what=f"{name}, {args.mode}", server_ready_s=srv.ready_s, **load(args, srv, c, args.requests)))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        finally:
            srv.stop()

    base = rows[0]["images_per_s"] if rows and not args.skip_api else None
    try:
        import google.protobuf
        import grpc
        import tritonclient
        versions = (f"grpcio {grpc.__version__}, protobuf {google.protobuf.__version__}, "
                    f"tritonclient {getattr(tritonclient, '__version__', '?')}, Python {sys.version.split()[0]}")
    except Exception as e:  # noqa: BLE001
        versions = f"versions unknown ({e})"
    print(f"\n{versions}")
    print(f"model {os.path.basename(args.model)}, image {os.path.basename(args.image)}, batch {args.batch}, "
          f"{args.precision}, device {args.device}, yolocu {yolocu.__version__}, {os.cpu_count()} CPU cores")
    print("| path | clients | images/s | p50 ms | p99 ms | errors | vs C++ API | answer |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        p50 = r.get("latency_ms_p50", r.get("batch_ms_p50"))
        p99 = r.get("latency_ms_p99", r.get("batch_ms_p99"))
        rel = f"{r['images_per_s'] / base:.2f}x" if base else "-"
        print(f"| {r['what']} | {r.get('clients', '-')} | {r['images_per_s']:.1f} | {p50:.2f} | {p99:.2f} | "
              f"{r.get('errors', 0)} | {rel} | {r.get('answer_check', '-')} |")
    print("(API rows: latency of one detect() call of `batch` images; Triton rows: latency of one request)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
