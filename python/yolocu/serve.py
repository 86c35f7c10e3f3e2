"""`yolocu serve`: the model behind NVIDIA Triton Inference Server, run by yolocu's own Triton
backend (libtriton_yolocu.so, C++, in the server process: no Python on the request path).

    yolocu serve --model yolov5n.onnx [--device auto|cpu|cuda|cuda:N] [--gpus 0 1] [--instances N]
                 [--max-batch 8 --max-queue-delay-us 2000 --max-queue-size 256]
                 [--http-port 8000 --grpc-port 8001 --metrics-port 8002] [--host 127.0.0.1 | --expose]
    yolocu serve --model yolov5n.onnx --write-repo DIR   # only write the model repository

The server is the `tritonserver` that the nvidia-pytriton wheel ships (pip install "yolocu[serve]"),
started with --backend-directory pointing at the backend inside this package and a model
repository that this command writes (config.pbtxt + the model): Triton's HTTP/REST and gRPC
endpoints (KServe v2), health, model repository API and Prometheus metrics are Triton's own.
Tensors and the config's parameters: docs/serving.md. SIGINT / SIGTERM stop the server.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
CALIBRATION_FILE = "calibration.json"  # --calibration, beside model.onnx in the version folder


def backend_directory() -> str:
    """The folder to pass as Triton's --backend-directory (it holds yolocu/libtriton_yolocu.so)."""
    return os.path.join(PACKAGE_DIR, "backends")


def find_tritonserver() -> str:
    """The tritonserver executable of the nvidia-pytriton wheel, or $YOLOCU_TRITONSERVER."""
    exe = os.environ.get("YOLOCU_TRITONSERVER")
    if exe:
        return exe
    try:
        import pytriton  # noqa: F401  (only its folder is used)
    except ImportError:
        raise SystemExit('yolocu serve: no tritonserver: pip install "yolocu[serve]" (the nvidia-pytriton wheel '
                         "ships it), or set YOLOCU_TRITONSERVER to a tritonserver executable")
    import pytriton
    exe = os.path.join(os.path.dirname(pytriton.__file__), "tritonserver", "bin", "tritonserver")
    if not os.access(exe, os.X_OK):
        raise SystemExit(f"yolocu serve: the nvidia-pytriton wheel has no tritonserver at {exe}")
    return exe


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="yolocu serve", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", required=True, help="ONNX file exported by ultralytics (YOLOv5, YOLOv8, YOLO11)")
    p.add_argument("--name", default="yolov5", help="model name in Triton")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--gpus", type=int, nargs="+", default=None, help="GPUs of the instance group (default: --device's)")
    p.add_argument("--instances", type=int, default=1, help="model instances per GPU (or on the CPU)")
    p.add_argument("--precision", default="fp16", choices=["fp16", "fp32", "int8"],
                   help="GPU engine precision; int8 with --calibration (INT8 kernels on GPU instances, simulated INT8 on CPU ones)")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="INT8 calibration of --model (yolocu calibrate), with --precision int8: copied into the repository")
    p.add_argument("--max-batch", type=int, default=8, help="Triton max_batch_size: the most images of one execution")
    p.add_argument("--max-queue-delay-us", type=int, default=2000, help="dynamic batcher: longest wait for a fuller batch")
    p.add_argument("--max-queue-size", type=int, default=256, help="requests queued at most; more are rejected")
    p.add_argument("--queue-timeout-us", type=int, default=0, help="a request queued longer is rejected (0: no limit)")
    p.add_argument("--conf", type=float, default=0.25)
    p.add_argument("--iou", type=float, default=None, help="NMS IoU (default: the model family's, 0.45 v5 / 0.7 v8, 11)")
    p.add_argument("--max-det", type=int, default=300)
    p.add_argument("--classes", type=int, nargs="+", default=None)
    p.add_argument("--agnostic", action="store_true")
    p.add_argument("--decode", default="auto", choices=["auto", "gpu", "cpu"],
                   help="JPEG decode: nvJPEG on the instance's GPU, the CPU, or auto (gpu where it can)")
    p.add_argument("--engine-graphs", dest="engine_graphs", action="store_const", const="on", default="on",
                   help="replay the engine as CUDA graphs (the default)")
    p.add_argument("--no-engine-graphs", dest="engine_graphs", action="store_const", const="off",
                   help="launch the engine's kernels one by one instead")
    p.add_argument("--engine-graph-segments", type=int, default=1, metavar="K",
                   help="the engine's forward as K CUDA graphs of consecutive layers (1 to 64), so that nvJPEG's "
                        "work runs between them (parameter engine_graph_segments)")
    p.add_argument("--contexts", type=int, default=1, help="execution contexts per GPU instance")
    p.add_argument("--imgsz", type=int, nargs="+", default=None, help="network input: size, or height width")
    p.add_argument("--threads", type=int, default=0, help="CPU engine threads of a CPU instance (0: all cores)")
    p.add_argument("--max-pixels", type=int, default=None, help="largest image accepted, pixels (default 50,000,000)")
    p.add_argument("--max-request-bytes", type=int, default=64 << 20, help="largest IMAGE tensor of one request")
    p.add_argument("--tactic-cache", default=None, help="GPU tactic cache file ('none': no file)")
    p.add_argument("--slow-execution-ms", type=int, default=0, metavar="MS",
                   help="log an execution that takes at least MS with its phases, count it in "
                        "yolocu_slow_executions_total (0: off)")
    p.add_argument("--blocking-sync", action="store_true",
                   help="GPU instances wait for the device asleep instead of spinning a core (parameter blocking_sync)")
    p.add_argument("--fast-start", action="store_true",
                   help="GPU instances ready soonest on a cold tactic cache: only --max-batch tuned, padded batch "
                        "sizes, the smaller ones on tactics that compile nothing (parameter fast_start)")
    p.add_argument("--sync-responses", action="store_true",
                   help="each instance answers its requests itself before its next execution, instead of on a "
                        "thread of its own (parameter response_thread false)")
    p.add_argument("--host", default="127.0.0.1", help="address the HTTP, gRPC and metrics endpoints bind to")
    p.add_argument("--expose", action="store_true", help="bind to all interfaces (0.0.0.0) instead of --host")
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--grpc-port", type=int, default=8001)
    p.add_argument("--metrics-port", type=int, default=8002)
    p.add_argument("--log-verbose", type=int, default=0, help="Triton's log verbosity")
    p.add_argument("--write-repo", default=None, metavar="DIR",
                   help="write the model repository into DIR and exit (for your own Triton)")
    p.add_argument("--timeout-s", type=float, default=0,
                   help="stop by itself after this many seconds (0: run until SIGINT/SIGTERM; for tests)")
    return p


def _fail(msg: str) -> None:
    raise SystemExit("yolocu serve: " + msg)


def _validate(args: argparse.Namespace) -> None:
    if not os.path.isfile(args.model):
        _fail(f"--model {args.model}: no such file")
    for name in ("http_port", "grpc_port", "metrics_port"):
        if not 0 < getattr(args, name) < 65536:
            _fail(f"--{name.replace('_', '-')} must be in 1..65535, got {getattr(args, name)}")
    if len({args.http_port, args.grpc_port, args.metrics_port}) != 3:
        _fail("--http-port, --grpc-port and --metrics-port must differ")
    if not 1 <= args.max_batch <= 256:
        _fail("--max-batch must be in 1..256")
    if not 1 <= args.instances <= 64:
        _fail("--instances must be in 1..64")
    if args.max_queue_delay_us < 0 or args.queue_timeout_us < 0 or args.max_queue_size < 1:
        _fail("--max-queue-delay-us and --queue-timeout-us must be >= 0, --max-queue-size >= 1")
    if not 0 <= args.slow_execution_ms <= 600000:
        _fail("--slow-execution-ms must be in 0..600000")
    if not 1 <= args.engine_graph_segments <= 64:
        _fail("--engine-graph-segments must be in 1..64")
    if args.engine_graph_segments > 1 and args.engine_graphs == "off":
        _fail("--engine-graph-segments goes with the engine as CUDA graphs (not with --no-engine-graphs)")
    if not 0 <= args.conf <= 1 or (args.iou is not None and not 0 <= args.iou <= 1):
        _fail("--conf and --iou must be in [0, 1]")
    if (args.precision == "int8") != (args.calibration is not None):
        _fail("--precision int8 and --calibration FILE go together (yolocu calibrate makes the file)")
    if args.calibration is not None and not os.path.isfile(args.calibration):
        _fail(f"--calibration {args.calibration}: no such file")
    if args.imgsz is not None and len(args.imgsz) not in (1, 2):
        _fail("--imgsz takes one or two values")
    if not args.name.replace("_", "").replace("-", "").isalnum():
        _fail(f"--name {args.name!r}: letters, digits, '_' and '-' only")


def _instance_group(args: argparse.Namespace) -> str:
    dev = args.device
    if dev == "cpu" or (dev == "auto" and not _gpu_usable()):
        return f"instance_group [ {{ kind: KIND_CPU count: {args.instances} }} ]"
    if dev not in ("auto", "cuda") and not (dev.startswith("cuda:") and dev[5:].isdigit()):
        _fail(f"--device {dev!r}: auto, cpu, cuda or cuda:N")
    gpus = args.gpus if args.gpus else [int(dev[5:]) if dev.startswith("cuda:") else 0]
    return (f"instance_group [ {{ kind: KIND_GPU count: {args.instances} "
            f"gpus: [ {', '.join(str(g) for g in gpus)} ] }} ]")


def _gpu_usable() -> bool:
    try:
        import yolocu
        return yolocu.cuda_available()
    except ImportError:
        return False


def parameters(args: argparse.Namespace) -> Dict[str, str]:
    """The backend's parameters for these arguments (docs/serving.md lists them)."""
    p = {"precision": args.precision, "conf": repr(args.conf), "max_det": str(args.max_det), "decode": args.decode,
         "engine_graphs": args.engine_graphs, "contexts": str(args.contexts),
         "max_request_bytes": str(args.max_request_bytes)}
    if args.iou is not None:
        p["iou"] = repr(args.iou)
    if args.classes:
        p["classes"] = ",".join(str(c) for c in args.classes)
    if args.agnostic:
        p["agnostic"] = "true"
    if args.imgsz:
        p["imgsz"] = ",".join(str(x) for x in args.imgsz)
    if args.threads:
        p["cpu_threads"] = str(args.threads)
    if args.max_pixels is not None:
        p["max_pixels"] = str(args.max_pixels)
    if args.tactic_cache is not None:
        p["tactic_cache"] = args.tactic_cache
    if args.calibration is not None:
        p["calibration"] = CALIBRATION_FILE
    if args.slow_execution_ms:
        p["slow_execution_ms"] = str(args.slow_execution_ms)
    if args.blocking_sync:
        p["blocking_sync"] = "true"
    if args.fast_start:
        p["fast_start"] = "true"
    if args.sync_responses:
        p["response_thread"] = "false"
    if args.engine_graph_segments != 1:
        p["engine_graph_segments"] = str(args.engine_graph_segments)
    return p


def model_config(args: argparse.Namespace) -> str:
    """config.pbtxt of the model (every field: docs/serving.md)."""
    params = "\n".join(f'parameters {{ key: "{k}" value: {{ string_value: "{v}" }} }}' for k, v in parameters(args).items())
    return f"""name: "{args.name}"
backend: "yolocu"
max_batch_size: {args.max_batch}
dynamic_batching {{
  max_queue_delay_microseconds: {args.max_queue_delay_us}
  default_queue_policy {{
    timeout_action: REJECT
    default_timeout_microseconds: {args.queue_timeout_us}
    allow_timeout_override: true
    max_queue_size: {args.max_queue_size}
  }}
}}
input [
  {{ name: "IMAGE" data_type: TYPE_STRING dims: [ 1 ] optional: true }},
  {{ name: "PIXELS" data_type: TYPE_UINT8 dims: [ -1, -1, 3 ] optional: true }}
]
output [
  {{ name: "BOXES" data_type: TYPE_FP32 dims: [ -1, 4 ] }},
  {{ name: "SCORES" data_type: TYPE_FP32 dims: [ -1 ] }},
  {{ name: "CLASSES" data_type: TYPE_INT32 dims: [ -1 ] }},
  {{ name: "COUNT" data_type: TYPE_INT32 dims: [ 1 ] }}
]
{_instance_group(args)}
{params}
"""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_atomically(path: str, write) -> None:
    """`write(f)` into a temporary file of a unique name beside `path`, flushed, fsync'ed, renamed over
    `path` (a symbolic link there is replaced, never written through), the folder fsync'ed. On an
    error the previous file stays and the command stops: "<path>: cannot write: <reason>"."""
    folder = os.path.dirname(path) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-", dir=folder)
    except OSError as e:
        _fail(f"{path}: cannot write: {e.strerror or e}")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # as a created file (mkstemp makes 0600)
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            _fail(f"{path}: cannot write: {e.strerror or e}")
        raise
    dfd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dfd)
    except OSError:
        pass  # a folder that cannot be synced still holds the file
    finally:
        os.close(dfd)


def _copy_file(src_path: str, flag: str):
    """A writer for _write_atomically: the bytes of the file given as `flag` (--model, --calibration);
    a read error names that flag and file, not the copy."""
    def write(f) -> None:
        try:
            src = open(src_path, "rb")
        except OSError as e:
            _fail(f"{flag} {src_path}: cannot read: {e.strerror or e}")
        with src:
            while True:
                try:
                    chunk = src.read(1 << 20)
                except OSError as e:
                    _fail(f"{flag} {src_path}: cannot read: {e.strerror or e}")
                if not chunk:
                    return
                f.write(chunk)
    return write


def write_repository(args: argparse.Namespace, repo: str) -> str:
    """Writes <repo>/<name>/config.pbtxt and <repo>/<name>/1/model.onnx, each atomically; returns the
    model folder. A write error stops the command (exit 1) naming the file and the reason."""
    model_dir = os.path.join(repo, args.name)
    try:
        os.makedirs(os.path.join(model_dir, "1"), exist_ok=True)
    except OSError as e:
        _fail(f"{os.path.join(model_dir, '1')}: cannot create the folder: {e.strerror or e}")
    config = model_config(args).encode()
    _write_atomically(os.path.join(model_dir, "config.pbtxt"), lambda f: f.write(config))
    _write_atomically(os.path.join(model_dir, "1", "model.onnx"), _copy_file(args.model, "--model"))
    if args.calibration is not None:
        _write_atomically(os.path.join(model_dir, "1", CALIBRATION_FILE), _copy_file(args.calibration, "--calibration"))
    return model_dir


def server_command(args: argparse.Namespace, repo: str) -> List[str]:
    host = "0.0.0.0" if args.expose else args.host
    return [find_tritonserver(), "--model-repository", repo, "--backend-directory", backend_directory(),
            "--model-control-mode", "explicit", "--load-model", args.name, "--exit-on-error", "true",
            "--http-address", host, "--http-port", str(args.http_port),
            "--grpc-address", host, "--grpc-port", str(args.grpc_port),
            "--metrics-address", host, "--metrics-port", str(args.metrics_port),
            "--log-verbose", str(args.log_verbose)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    _validate(args)
    if args.write_repo:
        folder = write_repository(args, args.write_repo)
        print(f"yolocu serve: wrote {folder} (run: tritonserver --model-repository {args.write_repo} "
              f"--backend-directory {backend_directory()})")
        return 0
    if not os.path.isfile(os.path.join(backend_directory(), "yolocu", "libtriton_yolocu.so")):
        _fail("this build has no Triton backend (configure with -DYOLOCU_TRITON=ON)")
    with tempfile.TemporaryDirectory(prefix="yolocu-serve-") as repo:
        write_repository(args, repo)
        from ._cuda_libs import library_dirs
        env = dict(os.environ)
        dirs = library_dirs()
        if dirs:  # the backend's CUDA libraries from NVIDIA's wheels anywhere on sys.path
            env["LD_LIBRARY_PATH"] = os.pathsep.join(dirs + ([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else []))
        # tritonserver stays in this process's session and group: a signal to the group reaches it,
        # and a supervisor that watches the session sees it.
        proc = subprocess.Popen(server_command(args, repo), env=env)

        def stop(signum=None, _frame=None):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        deadline = time.monotonic() + args.timeout_s if args.timeout_s > 0 else None
        while proc.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                stop()
                break
            time.sleep(0.2)
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
    return 0 if rc in (0, -signal.SIGTERM) else rc


if __name__ == "__main__":
    sys.exit(main())
