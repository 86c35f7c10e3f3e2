"""`yolocu serve`: yolocu behind NVIDIA Triton Inference Server, through PyTriton.

    yolocu serve --model yolov5n.onnx [--device cpu|cuda] [--http-port 8000 --grpc-port 8001
                 --metrics-port 8002] [--name yolov5] [--max-batch 8 --max-queue-delay-us 2000]
                 [--instances N] [--gpus 0 1] [--host 127.0.0.1 | --expose]
    python -m yolocu.serve ...

The server is Triton itself (bundled by the nvidia-pytriton wheel): its HTTP/REST and gRPC
endpoints (KServe v2 protocol), health (/v2/health/live, /v2/health/ready), model readiness and
the Prometheus metrics endpoint (/metrics on --metrics-port) are Triton's own. Triton's dynamic
batcher collects requests (up to --max-batch images, waiting at most --max-queue-delay-us) and
hands them to one yolocu detect() call, which runs them as yolocu batches.

Model (default name "yolov5"), per request either input:
    image_bytes  BYTES [batch, 1]           encoded JPEG/PNG
    image        UINT8 [batch, H, W, 3]     raw BGR pixels
outputs, K = the most detections of an image in the request (at least 1; rows past count are 0):
    boxes    FP32  [batch, K, 4]   x1 y1 x2 y2, original-image pixels
    scores   FP32  [batch, K]
    classes  INT32 [batch, K]
    count    INT32 [batch, 1]      valid rows per image
An input that cannot be decoded, or of the wrong dtype or shape, gives an error response (Triton
checks dtype and shape itself; PyTriton reports an error for the whole dynamic batch the request
was in); the server carries on. SIGINT / SIGTERM stop the server and its child processes.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import sysconfig
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

LOG = logging.getLogger("yolocu.serve")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="yolocu serve", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", required=True, help="ONNX file exported by ultralytics/yolov5 export.py")
    p.add_argument("--name", default="yolov5", help="model name in Triton")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--gpus", type=int, nargs="+", default=None,
                   help="one detector per listed GPU (each with --instances contexts); overrides --device")
    p.add_argument("--precision", default="fp16", choices=["fp16", "fp32"], help="GPU engine precision")
    p.add_argument("--host", default="127.0.0.1", help="address the HTTP, gRPC and metrics endpoints bind to")
    p.add_argument("--expose", action="store_true", help="bind to all interfaces (0.0.0.0) instead of --host")
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--grpc-port", type=int, default=8001)
    p.add_argument("--metrics-port", type=int, default=8002)
    p.add_argument("--max-batch", type=int, default=8, help="Triton max_batch_size and yolocu's batch")
    p.add_argument("--max-queue-delay-us", type=int, default=2000,
                   help="dynamic batcher: longest wait for more requests (microseconds)")
    p.add_argument("--instances", type=int, default=1,
                   help="model instances (Triton) = concurrent yolocu execution contexts per device")
    p.add_argument("--conf", type=float, default=0.25)
    p.add_argument("--iou", type=float, default=0.45)
    p.add_argument("--max-det", type=int, default=300)
    p.add_argument("--classes", type=int, nargs="+", default=None)
    p.add_argument("--agnostic", action="store_true")
    p.add_argument("--imgsz", type=int, nargs="+", default=None, help="network input: size, or height width")
    p.add_argument("--threads", type=int, default=0, help="CPU engine threads (0: all cores)")
    p.add_argument("--decode", default="cpu", choices=["cpu", "gpu"],
                   help="where image_bytes requests are decoded: cpu (the same pixels as cv2.imread) or gpu (nvJPEG)")
    p.add_argument("--decode-cpu-share", type=float, default=0.0,
                   help="with --decode gpu: share of each batch (0-0.9) decoded on CPU threads beside nvJPEG")
    p.add_argument("--no-engine-graphs", dest="engine_graphs", action="store_false",
                   help="GPU: launch the engine's kernels one by one instead of replaying CUDA graphs (beside "
                        "nvJPEG, --decode gpu, it can leave the decoder more of the GPU)")
    p.add_argument("--log-verbose", type=int, default=0, help="Triton's log verbosity")
    p.add_argument("--timeout-s", type=float, default=0,
                   help="stop by itself after this many seconds (0: run until SIGINT/SIGTERM; for tests)")
    return p


def _validate(args: argparse.Namespace) -> None:
    if not os.path.isfile(args.model):
        raise SystemExit(f"yolocu serve: --model {args.model}: no such file")
    if not 0 <= args.decode_cpu_share <= 0.9:
        raise SystemExit(f"yolocu serve: --decode-cpu-share must be in [0, 0.9], got {args.decode_cpu_share}")
    if args.decode_cpu_share > 0 and args.decode != "gpu":
        raise SystemExit("yolocu serve: --decode-cpu-share needs --decode gpu")
    for name in ("http_port", "grpc_port", "metrics_port"):
        v = getattr(args, name)
        if not 0 < v < 65536:
            raise SystemExit(f"yolocu serve: --{name.replace('_', '-')} must be in 1..65535, got {v}")
    if len({args.http_port, args.grpc_port, args.metrics_port}) != 3:
        raise SystemExit("yolocu serve: --http-port, --grpc-port and --metrics-port must differ")
    if not 1 <= args.max_batch <= 1024:
        raise SystemExit("yolocu serve: --max-batch must be in 1..1024")
    if not 1 <= args.instances <= 64:
        raise SystemExit("yolocu serve: --instances must be in 1..64")
    if args.max_queue_delay_us < 0:
        raise SystemExit("yolocu serve: --max-queue-delay-us must be >= 0")
    if args.imgsz is not None and len(args.imgsz) not in (1, 2):
        raise SystemExit("yolocu serve: --imgsz takes one or two values")


def _images_of(request: Any, index: int) -> List[Any]:
    """The images of one Triton request (bytes objects or HxWx3 uint8 arrays)."""
    if "image_bytes" in request:
        arr = np.asarray(request["image_bytes"])
        out = []
        for v in arr.reshape(arr.shape[0], -1)[:, 0]:
            b = v if isinstance(v, bytes) else bytes(v)
            if not b:
                raise ValueError(f"request {index}: empty image_bytes")
            out.append(b)
        return out
    if "image" in request:
        arr = request["image"]
        if arr.dtype != np.uint8 or arr.ndim != 4 or arr.shape[3] != 3:
            raise ValueError(f"request {index}: image must be UINT8 [batch, H, W, 3], got {arr.dtype} {list(arr.shape)}")
        return [np.ascontiguousarray(arr[k]) for k in range(arr.shape[0])]
    raise ValueError(f"request {index}: neither image_bytes nor image given")


def make_infer_func(detector: Any) -> Callable[[List[Any]], List[Dict[str, np.ndarray]]]:
    """Triton's batched requests -> one yolocu detect() call -> one padded response per request."""

    def infer(requests: List[Any]) -> List[Dict[str, np.ndarray]]:
        items: List[Any] = []
        counts: List[int] = []
        for i, r in enumerate(requests):
            imgs = _images_of(r, i)
            items += imgs
            counts.append(len(imgs))
        raw = detector._det.detect(items)  # GIL released inside
        responses = []
        at = 0
        for n in counts:
            part = raw[at:at + n]
            at += n
            k = max([len(s) for _, s, _, _, _ in part] + [1])
            boxes = np.zeros((n, k, 4), np.float32)
            scores = np.zeros((n, k), np.float32)
            classes = np.zeros((n, k), np.int32)
            count = np.zeros((n, 1), np.int32)
            for j, (b, s, c, _, _) in enumerate(part):
                m = len(s)
                boxes[j, :m], scores[j, :m], classes[j, :m], count[j, 0] = b, s, c, m
            responses.append({"boxes": boxes, "scores": scores, "classes": classes, "count": count})
        return responses

    return infer


def _python_libdir_first() -> None:
    """Triton's Python backend stub embeds libpython; make it load this interpreter's (a venv of a
    pyenv / custom-built Python would otherwise get the system's, of another patch level)."""
    libdir = sysconfig.get_config_var("LIBDIR")
    ldlib = sysconfig.get_config_var("LDLIBRARY")
    if libdir and ldlib and os.path.exists(os.path.join(libdir, ldlib)):
        cur = os.environ.get("LD_LIBRARY_PATH", "")
        if libdir not in cur.split(":"):
            os.environ["LD_LIBRARY_PATH"] = libdir + (":" + cur if cur else "")


def create_detectors(args: argparse.Namespace) -> List[Any]:
    from .detector import Detector
    imgsz = None if args.imgsz is None else (args.imgsz[0] if len(args.imgsz) == 1 else tuple(args.imgsz))
    devices = [f"cuda:{g}" for g in args.gpus] if args.gpus else [args.device]
    return [Detector(args.model, device=d, precision=args.precision, conf=args.conf, iou=args.iou,
                     max_det=args.max_det, classes=args.classes, agnostic=args.agnostic, batch=args.max_batch,
                     imgsz=imgsz, threads=args.threads, contexts=args.instances, decode=args.decode,
                     decode_cpu_share=args.decode_cpu_share, engine_graphs=args.engine_graphs) for d in devices]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    _validate(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s yolocu.serve %(levelname)s %(message)s")
    try:
        from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
        from pytriton.triton import Triton, TritonConfig
    except ImportError as e:  # pragma: no cover - depends on the environment
        print(f"yolocu serve needs PyTriton (pip install 'yolocu[serve]', i.e. nvidia-pytriton): {e}", file=sys.stderr)
        return 2

    detectors = create_detectors(args)
    for d in detectors:
        LOG.info("detector %s on %s, input %s, batch %d, %d context(s)", args.model, d.device, d.imgsz,
                 args.max_batch, args.instances)
        # Triton's dynamic batcher forms every batch size up to max_batch; on the GPU a size's first
        # run builds its plans (seconds): pay that now, not in the first requests (H200: 4-9 s stalls).
        t0 = time.perf_counter()
        d.warm_up()
        LOG.info("warmed up batch sizes 1..%d on %s in %.1f s", args.max_batch, d.device, time.perf_counter() - t0)
    infer_funcs = [make_infer_func(d) for d in detectors for _ in range(args.instances)]

    host = "0.0.0.0" if args.expose else args.host
    _python_libdir_first()
    config = TritonConfig(http_address=host, http_port=args.http_port, grpc_address=host, grpc_port=args.grpc_port,
                          metrics_address=host, metrics_port=args.metrics_port, allow_metrics=True,
                          log_verbose=args.log_verbose, exit_timeout_secs=10)
    stop = {"signal": None}

    def on_signal(signum, _frame):
        stop["signal"] = signum
        raise KeyboardInterrupt

    with Triton(config=config) as triton:
        triton.bind(
            model_name=args.name,
            infer_func=infer_funcs,
            inputs=[Tensor(name="image_bytes", dtype=bytes, shape=(1,), optional=True),
                    Tensor(name="image", dtype=np.uint8, shape=(-1, -1, 3), optional=True)],
            outputs=[Tensor(name="boxes", dtype=np.float32, shape=(-1, 4)),
                     Tensor(name="scores", dtype=np.float32, shape=(-1,)),
                     Tensor(name="classes", dtype=np.int32, shape=(-1,)),
                     Tensor(name="count", dtype=np.int32, shape=(1,))],
            config=ModelConfig(max_batch_size=args.max_batch,
                               batcher=DynamicBatcher(max_queue_delay_microseconds=args.max_queue_delay_us)),
            strict=False,
        )
        signal.signal(signal.SIGTERM, on_signal)
        if args.timeout_s > 0:
            signal.signal(signal.SIGALRM, on_signal)
            signal.setitimer(signal.ITIMER_REAL, args.timeout_s)
        LOG.info("serving model %r on %s: HTTP %d, gRPC %d, metrics %d", args.name, host, args.http_port,
                 args.grpc_port, args.metrics_port)
        try:
            triton.serve()
        except KeyboardInterrupt:
            pass
        LOG.info("stopping (%s)", signal.Signals(stop["signal"]).name if stop["signal"] else "SIGINT")
    LOG.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
