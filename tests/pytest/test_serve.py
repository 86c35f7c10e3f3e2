"""`yolocu serve`: Triton's own server (the nvidia-pytriton wheel's tritonserver) with yolocu's C++
backend, on loopback. tritonclient over HTTP and gRPC gets the Python API's detections (equal
boxes: FP32 on the CPU both ways), a load test counts every response, hostile requests get errors
of their own while the others are answered, a full queue rejects instead of hanging, the model
repository API unloads and loads the model, and shutdown leaves no process behind.

The server runs the dynamic model at 320 on the CPU (CI has two cores); every port is a random free
one on 127.0.0.1; every wait and loop is bounded; the server is stopped by the tests (and killed
with its whole process group if anything goes wrong)."""
import base64
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

import yolocu
import yolocu.serve
from conftest import data_path

httpclient = pytest.importorskip("tritonclient.http")
grpcclient = pytest.importorskip("tritonclient.grpc")
from tritonclient.utils import InferenceServerException  # noqa: E402

MODEL, IMGSZ, NAME = "yolov5n_dyn.onnx", 320, "yolov5"
START_TIMEOUT_S = 240
MAX_PIXELS = 4_000_000
MAX_REQUEST_BYTES = 8 << 20


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def http_get(url, timeout=5):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except Exception as e:  # noqa: BLE001
        return None, str(e)


def session_processes(sid):
    """Live processes of the server's session (it is started in a session of its own)."""
    psutil = pytest.importorskip("psutil")
    out = []
    for p in psutil.process_iter(["pid", "status", "cmdline"]):
        try:
            if os.getsid(p.info["pid"]) == sid and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
            pass
    return out


def server_rss_mb(sid):
    return sum(p.memory_info().rss for p in session_processes(sid)) / 2**20


class Server:
    def __init__(self, tmp_dir, precision=("--precision", "fp32")):
        if not os.path.isfile(os.path.join(yolocu.serve.backend_directory(), "yolocu", "libtriton_yolocu.so")):
            pytest.fail("the package has no Triton backend (libtriton_yolocu.so)")
        self.http, self.grpc, self.metrics = free_ports(3)
        self.log_path = os.path.join(tmp_dir, "serve.log")
        self.log = open(self.log_path, "w")
        cmd = [sys.executable, "-m", "yolocu.serve", "--model", data_path("models", MODEL), "--imgsz", str(IMGSZ),
               "--device", "cpu", *precision, "--name", NAME, "--http-port", str(self.http),
               "--grpc-port", str(self.grpc), "--metrics-port", str(self.metrics), "--max-batch", "8",
               "--max-queue-delay-us", "2000", "--instances", "2", "--threads", "1",
               "--max-pixels", str(MAX_PIXELS), "--max-request-bytes", str(MAX_REQUEST_BYTES),
               "--slow-execution-ms", "1", "--timeout-s", "1500"]  # --timeout-s: it stops by itself even if we die
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.sid = self.proc.pid

    def log_tail(self, n=4000):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()[-n:]

    def wait_ready(self, name=NAME):
        t0 = time.time()
        while time.time() - t0 < START_TIMEOUT_S:
            if self.proc.poll() is not None:
                raise RuntimeError(f"yolocu serve exited with {self.proc.returncode}:\n{self.log_tail()}")
            code, _ = http_get(f"http://127.0.0.1:{self.http}/v2/models/{name}/ready", timeout=2)
            if code == 200:
                return time.time() - t0
            time.sleep(0.3)
        raise RuntimeError(f"yolocu serve not ready after {START_TIMEOUT_S} s:\n{self.log_tail()}")

    def stop(self, timeout=60):
        """SIGTERM to the server; returns (exit code, seconds, processes of its session still alive)."""
        t0 = time.time()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        left = []
        while time.time() - t0 < timeout:
            left = session_processes(self.sid)
            if not left:
                break
            time.sleep(0.2)
        return code, time.time() - t0, left

    def kill(self):
        try:
            os.killpg(self.sid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(str(tmp_path_factory.mktemp("serve")))
    try:
        took = s.wait_ready()
        print(f"\n[serve] ready in {took:.1f} s (HTTP {s.http}, gRPC {s.grpc}, metrics {s.metrics})")
        yield s
    finally:
        if s.proc.poll() is None or session_processes(s.sid):
            s.kill()  # a test failed before test_zz_shutdown_is_clean: no orphans either way


@pytest.fixture(scope="module")
def images():
    paths = [data_path("images", "bus.jpg"), data_path("images", "zidane.jpg")]
    return [open(p, "rb").read() for p in paths]


@pytest.fixture(scope="module")
def python_detector():
    return yolocu.Detector(data_path("models", MODEL), device="cpu", precision="fp32", imgsz=IMGSZ, max_det=300, batch=8)


@pytest.fixture(scope="module")
def expected(images, python_detector):
    return [python_detector(b) for b in images]


def bytes_input(mod, blobs):
    i = mod.InferInput("IMAGE", [len(blobs), 1], "BYTES")
    i.set_data_from_numpy(np.array([[b] for b in blobs], dtype=object))
    return i


def raw_input(mod, arr, name="PIXELS", dtype="UINT8"):
    i = mod.InferInput(name, list(arr.shape), dtype)
    i.set_data_from_numpy(arr)
    return i


def check_response(result, expected_list):
    count = result.as_numpy("COUNT")
    boxes, scores, classes = result.as_numpy("BOXES"), result.as_numpy("SCORES"), result.as_numpy("CLASSES")
    assert count.shape == (len(expected_list), 1)
    assert boxes.shape[:2] == scores.shape == classes.shape and boxes.shape[2] == 4
    for k, exp in enumerate(expected_list):
        n = int(count[k, 0])
        assert n == len(exp)
        np.testing.assert_array_equal(boxes[k, :n], exp.boxes.xyxy)
        np.testing.assert_array_equal(scores[k, :n], exp.boxes.conf)
        np.testing.assert_array_equal(classes[k, :n], exp.boxes.cls.astype(np.int32))
        assert not boxes[k, n:].any() and not scores[k, n:].any()  # padding


def metric(server, name):
    code, text = http_get(f"http://127.0.0.1:{server.metrics}/metrics")
    assert code == 200
    vals = [float(ln.split()[-1]) for ln in text.splitlines() if ln.startswith(name + " ") or ln.startswith(name + "{")]
    return sum(vals) if vals else None


def test_health_readiness_config(server):
    assert http_get(f"http://127.0.0.1:{server.http}/v2/health/live")[0] == 200
    assert http_get(f"http://127.0.0.1:{server.http}/v2/health/ready")[0] == 200
    code, cfg = http_get(f"http://127.0.0.1:{server.http}/v2/models/{NAME}/config")
    assert code == 200
    cfg = json.loads(cfg)
    assert cfg["backend"] == "yolocu" and cfg["max_batch_size"] == 8
    assert cfg["dynamic_batching"]["default_queue_policy"]["timeout_action"] == "REJECT"
    assert [i["name"] for i in cfg["input"]] == ["IMAGE", "PIXELS"]
    c = httpclient.InferenceServerClient(f"127.0.0.1:{server.http}")
    assert c.is_server_live() and c.is_model_ready(NAME)


def test_http_bytes_match_python_api(server, images, expected):
    c = httpclient.InferenceServerClient(f"127.0.0.1:{server.http}")
    for b, exp in zip(images, expected):
        check_response(c.infer(NAME, [bytes_input(httpclient, [b])]), [exp])
    check_response(c.infer(NAME, [bytes_input(httpclient, images)]), expected)  # two images, one request


def test_grpc_pixels_and_bytes_match_python_api(server, images, expected):
    c = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")
    for b, exp in zip(images, expected):
        img = yolocu.decode(b)
        check_response(c.infer(NAME, [raw_input(grpcclient, img[None])]), [exp])
        check_response(c.infer(NAME, [bytes_input(grpcclient, [b])]), [exp])
    img = yolocu.decode(images[0])
    check_response(c.infer(NAME, [raw_input(grpcclient, np.stack([img, img]))]), [expected[0]] * 2)


def test_coco128_matches_python_api(server, python_detector):
    folder = data_path("coco128", "images", "train2017")
    paths = sorted(os.path.join(folder, f) for f in os.listdir(folder))
    blobs = [open(p, "rb").read() for p in paths]
    want = [python_detector(b) for b in blobs]
    c = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")
    for at in range(0, len(blobs), 8):
        check_response(c.infer(NAME, [bytes_input(grpcclient, blobs[at:at + 8])]), want[at:at + 8])
    h = httpclient.InferenceServerClient(f"127.0.0.1:{server.http}")
    for b, w in zip(blobs[:16], want[:16]):
        check_response(h.infer(NAME, [bytes_input(httpclient, [b])]), [w])


def bomb_jpeg(real_jpeg, width, height):
    """A real JPEG whose frame header declares width x height (a few KB declaring gigapixels)."""
    b = bytearray(real_jpeg)
    for marker in (b"\xff\xc0", b"\xff\xc2"):
        at = b.find(marker)
        if at >= 0:
            b[at + 5:at + 9] = struct.pack(">HH", height, width)
            return bytes(b)
    raise AssertionError("no SOF marker")


def progressive_bomb(width=16384, height=16384):
    """A progressive JPEG of a few hundred bytes declaring width x height: SOI, DQT, SOF2, DHT, one
    DC scan, EOI - what a decompression bomb sends."""
    soi, eoi = b"\xff\xd8", b"\xff\xd9"
    dqt = b"\xff\xdb" + struct.pack(">H", 67) + b"\x00" + bytes([1] * 64)
    sof2 = b"\xff\xc2" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    dht = b"\xff\xc4" + struct.pack(">H", 20) + b"\x00" + bytes([1] + [0] * 15) + b"\x00"
    sos = b"\xff\xda" + struct.pack(">HB", 8, 1) + b"\x01\x00" + b"\x00\x00\x00"
    return soi + dqt + sof2 + dht + sos + b"\x00" * 200 + eoi


def test_hostile_requests_fail_alone(server, images, expected):
    c = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")
    h = httpclient.InferenceServerClient(f"127.0.0.1:{server.http}")
    img = yolocu.decode(images[0])
    rss0 = server_rss_mb(server.sid)
    refused0 = metric(server, "yolocu_images_refused_total") or 0
    bad = [
        ("garbage bytes", [bytes_input(grpcclient, [b"this is not an image"])], "IMAGE[0]"),
        ("truncated JPEG", [bytes_input(grpcclient, [images[0][:3000]])], "IMAGE[0]"),
        ("empty item", [bytes_input(grpcclient, [images[0], b""])], "IMAGE[1]: empty"),
        ("wrong dtype", [raw_input(grpcclient, np.zeros((1, 8, 8, 3), np.float32), dtype="FP32")], "PIXELS"),
        ("4 channels", [raw_input(grpcclient, np.zeros((1, 8, 8, 4), np.uint8))], "PIXELS"),
        ("both inputs", [bytes_input(grpcclient, [images[0]]), raw_input(grpcclient, img[None])], "exactly one"),
        ("no input", [], ""),
        ("over the pixel limit", [raw_input(grpcclient, np.zeros((1, 2100, 2100, 3), np.uint8))], "over the limit"),
        ("huge declared JPEG", [bytes_input(grpcclient, [bomb_jpeg(images[0], 16384, 16384)])], "IMAGE[0]"),
        ("progressive bomb", [bytes_input(grpcclient, [progressive_bomb()])], "IMAGE[0]"),
        ("request over max_request_bytes", [bytes_input(grpcclient, [os.urandom(MAX_REQUEST_BYTES + 1)])],
         "max_request_bytes"),
    ]
    for what, inputs, text in bad:
        with pytest.raises(InferenceServerException) as info:
            c.infer(NAME, inputs, client_timeout=60)
        msg = str(info.value)
        assert text in msg, f"{what}: {msg[:500]}"
        assert "Traceback" not in msg and "/tmp/" not in msg and len(msg) < 600, f"{what}: {msg[:600]}"
        check_response(c.infer(NAME, [raw_input(grpcclient, img[None])], client_timeout=60), [expected[0]])
    with pytest.raises(InferenceServerException):  # a 100 MB body: Triton or the backend refuses it
        h.infer(NAME, [bytes_input(httpclient, [b"\xff\xd8" + bytes(100 << 20)])], timeout=120)
    check_response(h.infer(NAME, [bytes_input(httpclient, [images[1]])]), [expected[1]])
    rss1 = server_rss_mb(server.sid)
    print(f"\n[hostile] server RSS {rss0:.0f} -> {rss1:.0f} MB over {len(bad) + 1} hostile requests")
    assert rss1 < rss0 + 512, f"RSS grew from {rss0:.0f} to {rss1:.0f} MB"
    assert (metric(server, "yolocu_images_refused_total") or 0) >= refused0 + 2
    assert server.proc.poll() is None


def test_mixed_good_and_bad_requests_under_load(server, images, expected):
    """Good and bad requests at once (the batcher puts them in the same executions): every good one
    is answered correctly, every bad one gets its error."""
    errors, wrong = [], []

    def client(k):
        c = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")
        for j in range(30):
            bad = (k + j) % 3 == 0
            try:
                blob = b"garbage" if bad else images[j % 2]
                r = c.infer(NAME, [bytes_input(grpcclient, [blob])], client_timeout=120)
                if bad:
                    wrong.append(f"client {k} request {j}: garbage answered")
                elif int(r.as_numpy("COUNT")[0, 0]) != len(expected[j % 2]) or not np.array_equal(
                        r.as_numpy("SCORES")[0, :len(expected[j % 2])], expected[j % 2].boxes.conf):
                    wrong.append(f"client {k} request {j}: wrong detections")
            except InferenceServerException as e:
                if not bad:
                    errors.append(f"client {k} request {j}: {e}")
        c.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors[:5]
    assert not wrong, wrong[:5]


LOAD_MODEL, LOAD_IMGSZ = "yolov5_load", 160


@pytest.fixture(scope="module")
def load_model(server):
    """The load tests' model: the same export at 160 through the repository API (the server's
    model config with another name and imgsz), so that 16 x 200 requests of 8 images fit CI's two
    cores; what the load tests check is the server (nothing lost, no errors, right answers)."""
    c = httpclient.InferenceServerClient(f"127.0.0.1:{server.http}")
    cfg = json.loads(http_get(f"http://127.0.0.1:{server.http}/v2/models/{NAME}/config")[1])
    cfg["name"] = LOAD_MODEL
    cfg.setdefault("parameters", {})["imgsz"] = {"string_value": str(LOAD_IMGSZ)}
    c.load_model(LOAD_MODEL, config=json.dumps(cfg), files={"file:1/model.onnx": open(data_path("models", MODEL), "rb").read()})
    assert c.is_model_ready(LOAD_MODEL)
    c.close()  # no connection left open: the server's shutdown waits for open HTTP connections
    return LOAD_MODEL  # it stays loaded: test_zz_shutdown_is_clean stops a server holding two models


@pytest.fixture(scope="module")
def load_images():
    """Two coco128 images (640 x 480 and smaller: quick to decode on two cores)."""
    folder = data_path("coco128", "images", "train2017")
    names = ["000000000009.jpg", "000000000025.jpg"]
    return [open(os.path.join(folder, n), "rb").read() for n in names]


@pytest.fixture(scope="module")
def load_expected(load_images):
    det = yolocu.Detector(data_path("models", MODEL), device="cpu", precision="fp32", imgsz=LOAD_IMGSZ, max_det=300, batch=8)
    return [det(b) for b in load_images]


def run_load(server, images, expected, clients, per_client, per_request, deadline_s, model=NAME, imgsz=IMGSZ):
    latencies = [[] for _ in range(clients)]
    errors, mismatches = [], []
    deadline = time.time() + deadline_s

    def client(k):
        c = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")
        for j in range(per_client):
            if time.time() > deadline:
                errors.append(f"client {k}: deadline reached after {j} requests")
                return
            e = (k + j) % 2
            t0 = time.perf_counter()
            try:
                r = c.infer(model, [bytes_input(grpcclient, [images[e]] * per_request)], client_timeout=120)
            except Exception as ex:  # noqa: BLE001
                errors.append(f"client {k} request {j}: {ex}")
                continue
            latencies[k].append(time.perf_counter() - t0)
            counts = r.as_numpy("COUNT")[:, 0]
            if list(counts) != [len(expected[e])] * per_request or not np.array_equal(
                    r.as_numpy("SCORES")[per_request - 1, :len(expected[e])], expected[e].boxes.conf):
                mismatches.append(f"client {k} request {j}")
        c.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=deadline_s + 60)
    wall = time.perf_counter() - t0
    done = sum(len(x) for x in latencies)
    lat = np.sort(np.concatenate([np.array(x) for x in latencies])) * 1e3 if done else np.zeros(1)
    print(f"\n[load] {clients} clients x {per_client} requests of {per_request} image(s) (gRPC, yolov5n {imgsz}, CPU, "
          f"{os.cpu_count()} cores): {done} responses, {len(errors)} errors, {len(mismatches)} wrong, in {wall:.1f} s: "
          f"{done * per_request / wall:.1f} img/s, latency p50 {np.percentile(lat, 50):.1f} ms, "
          f"p99 {np.percentile(lat, 99):.1f} ms")
    assert not any(t.is_alive() for t in threads), "clients still running"
    assert not errors, errors[:5]
    assert not mismatches, mismatches[:5]
    assert done == clients * per_client


def test_load_16_clients_x_200_requests_of_1_image(server, load_model, load_images, load_expected):
    run_load(server, load_images, load_expected, clients=16, per_client=200, per_request=1, deadline_s=900,
             model=load_model, imgsz=LOAD_IMGSZ)


def test_load_16_clients_x_200_requests_of_8_images(server, load_model, load_images, load_expected):
    run_load(server, load_images, load_expected, clients=16, per_client=200, per_request=8, deadline_s=1200,
             model=load_model, imgsz=LOAD_IMGSZ)


def test_custom_metrics_count_images(server):
    decoded = metric(server, "yolocu_images_decoded_total")
    failures = metric(server, "yolocu_decode_failures_total")
    assert decoded is not None and decoded >= 16 * 200, decoded
    # CPU instances (decode cpu): every image decoded is decoded on the CPU
    assert metric(server, "yolocu_images_decoded_cpu_total") == decoded
    assert failures is not None and failures >= 1, failures
    assert (metric(server, "nv_inference_request_success") or 0) >= 16 * 200


def test_slow_executions_counted_and_logged(server):
    """--slow-execution-ms 1: the CPU executions that detect (milliseconds at least) are slow; each
    counts in the metric, at most one a second per instance is logged, with its phases."""
    slow = metric(server, "yolocu_slow_executions_total")
    # Triton counts the executions that answered an image; those whose requests all failed count
    # only in the failed requests
    executions = metric(server, "nv_inference_exec_count")
    failed = metric(server, "nv_inference_request_failure") or 0
    assert slow is not None and executions is not None and 0 < slow <= executions + failed, (slow, executions, failed)
    lines = [l for l in server.log_tail(10**7).splitlines() if "slow execution" in l]
    assert lines, "no slow execution logged"
    assert all("detection" in l and "responses" in l for l in lines), lines[0]
    # each logged execution says how many of its images were decoded on the CPU: on CPU instances
    # all of those that came as encoded bytes (PIXELS requests decode nothing)
    counts = [re.search(r"and (\d+) images \((\d+) decoded on the CPU\)", l) for l in lines]
    assert all(counts), lines[0]
    assert all(int(m[2]) <= int(m[1]) for m in counts), lines
    assert any(int(m[2]) == int(m[1]) > 0 for m in counts), lines
    # the pinned memory nvJPEG took since the last line (none on CPU instances)
    assert all(re.search(r"nvJPEG pinned memory since then: 0 allocations, 0 frees", l) for l in lines), lines[0]
    assert len(lines) < slow, (len(lines), slow)  # rate-limited


def test_full_queue_rejects_instead_of_hanging(server, images):
    """A second model loaded through the repository API with a queue of 1: a burst of requests gets
    'queue full' errors quickly, the rest are answered."""
    c = httpclient.InferenceServerClient(f"127.0.0.1:{server.http}")
    cfg = json.loads(http_get(f"http://127.0.0.1:{server.http}/v2/models/{NAME}/config")[1])
    cfg["name"] = "tiny_queue"
    cfg["instance_group"] = [{"kind": "KIND_CPU", "count": 1}]
    cfg["dynamic_batching"] = {"max_queue_delay_microseconds": 0,
                               "default_queue_policy": {"timeout_action": "REJECT", "max_queue_size": 1}}
    model_bytes = open(data_path("models", MODEL), "rb").read()
    c.load_model("tiny_queue", config=json.dumps(cfg), files={"file:1/model.onnx": model_bytes})
    assert c.is_model_ready("tiny_queue")
    results, lock = [], threading.Lock()

    def one():
        g = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")
        t0 = time.perf_counter()
        try:
            g.infer("tiny_queue", [bytes_input(grpcclient, [images[0]] * 8)], client_timeout=120)
            out = ("ok", time.perf_counter() - t0)
        except InferenceServerException as e:
            out = (str(e), time.perf_counter() - t0)
        with lock:
            results.append(out)

    threads = [threading.Thread(target=one) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    rejected = [r for r in results if r[0] != "ok"]
    print(f"\n[queue] 24 requests at once, queue of 1: {len(results) - len(rejected)} answered, {len(rejected)} rejected "
          f"({rejected[0][0][:120] if rejected else ''})")
    assert len(results) == 24
    assert rejected and all("queue" in r[0].lower() for r in rejected)
    c.unload_model("tiny_queue")


def test_unload_and_load_through_the_repository_api(server, images, expected):
    c = httpclient.InferenceServerClient(f"127.0.0.1:{server.http}")
    rss_loaded = server_rss_mb(server.sid)
    c.unload_model(NAME)
    t0 = time.time()
    while c.is_model_ready(NAME) and time.time() - t0 < 60:
        time.sleep(0.2)
    assert not c.is_model_ready(NAME)
    rss_unloaded = server_rss_mb(server.sid)
    c.load_model(NAME)
    assert c.is_model_ready(NAME)
    check_response(c.infer(NAME, [bytes_input(httpclient, [images[1]])]), [expected[1]])
    print(f"\n[repository] RSS loaded {rss_loaded:.0f} MB, unloaded {rss_unloaded:.0f} MB, reloaded "
          f"{server_rss_mb(server.sid):.0f} MB")


def test_zz_shutdown_is_clean(server):
    """SIGTERM: yolocu serve and tritonserver (in the same session) exit; nothing is left."""
    names = [" ".join(p.info["cmdline"] or []) for p in session_processes(server.sid)]
    assert any("tritonserver" in n for n in names), names
    code, took, left = server.stop(timeout=60)
    print(f"\n[serve] stopped in {took:.1f} s, exit code {code}")
    assert not left, f"orphans: {[(p.pid, ' '.join(p.info['cmdline'] or [])[:120]) for p in left]}"
    assert code == 0, server.log_tail()


def test_int8_server_matches_python_api(cli, images, tmp_path):
    """--precision int8 --calibration FILE: CPU instances run simulated INT8 with the calibration the
    repository holds; the answers equal the Python API's with the same file, and differ from FP32.
    This server also answers on the instance's own thread (--sync-responses), the others on the
    instance's response thread."""
    cal = str(tmp_path / "cal.json")
    proc = subprocess.run([cli, "calibrate", "--model", data_path("models", MODEL), "--imgsz", str(IMGSZ), "--images",
                           data_path("images", "bus.jpg"), data_path("images", "zidane.jpg"), "--keep-float-worst", "0",
                           "--quiet", "-o", cal], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    det = yolocu.Detector(data_path("models", MODEL), device="cpu", precision="int8", calibration=cal, imgsz=IMGSZ,
                          max_det=300, batch=8)
    expected = [det(b) for b in images]
    fp32 = yolocu.Detector(data_path("models", MODEL), device="cpu", precision="fp32", imgsz=IMGSZ, max_det=300)
    assert any(not np.array_equal(e.boxes.xyxy, fp32(b).boxes.xyxy) for e, b in zip(expected, images))
    s = Server(str(tmp_path), precision=("--precision", "int8", "--calibration", cal, "--sync-responses"))
    try:
        s.wait_ready()
        c = httpclient.InferenceServerClient(f"127.0.0.1:{s.http}")
        check_response(c.infer(NAME, [bytes_input(httpclient, images)]), expected)
        c.close()  # an open connection holds tritonserver's shutdown for its 30 s exit timeout
        code, _, left = s.stop()
        assert code == 0 and not left, s.log_tail()
    finally:
        s.kill()


def test_int8_needs_its_calibration(tmp_path):
    base = [sys.executable, "-m", "yolocu.serve", "--model", data_path("models", MODEL), "--device", "cpu",
            "--write-repo", str(tmp_path / "repo")]
    for extra, msg in ((["--precision", "int8"], "go together"), (["--calibration", data_path("coco.names")], "go together"),
                       (["--precision", "int8", "--calibration", str(tmp_path / "none.json")], "no such file")):
        r = subprocess.run(base + extra, capture_output=True, text=True, timeout=120)
        assert r.returncode != 0 and msg in r.stderr, (extra, r.stderr)


def test_write_repo_only(tmp_path):
    repo = tmp_path / "repo"
    out = subprocess.run([sys.executable, "-m", "yolocu.serve", "--model", data_path("models", MODEL), "--name", "m1",
                          "--device", "cpu", "--iou", "0.5", "--classes", "0", "2", "--blocking-sync",
                          "--fast-start", "--sync-responses", "--write-repo", str(repo)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    cfg = (repo / "m1" / "config.pbtxt").read_text()
    assert 'backend: "yolocu"' in cfg and "KIND_CPU" in cfg
    assert 'key: "iou" value: { string_value: "0.5" }' in cfg and 'string_value: "0,2"' in cfg
    assert 'key: "blocking_sync" value: { string_value: "true" }' in cfg
    assert 'key: "fast_start" value: { string_value: "true" }' in cfg
    assert 'key: "response_thread" value: { string_value: "false" }' in cfg
    assert (repo / "m1" / "1" / "model.onnx").read_bytes() == open(data_path("models", MODEL), "rb").read()
    assert not [p for p in (repo / "m1").rglob("*.tmp-*")]


def _write_repo(repo, limit=None, name="m1"):
    """`yolocu serve --write-repo` in a child process, under RLIMIT_FSIZE `limit` bytes if given."""
    import resource

    def cap():
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG
    return subprocess.run([sys.executable, "-m", "yolocu.serve", "--model", data_path("models", MODEL), "--name", name,
                           "--device", "cpu", "--write-repo", str(repo)],
                          capture_output=True, text=True, timeout=60, preexec_fn=cap)


def test_write_repo_full_disk_keeps_the_previous_files(tmp_path):
    """A write that fails (a full disk: here RLIMIT_FSIZE) names the file and the reason, exits 1 and
    leaves the previous complete model and config in place, with no temporary file beside them."""
    repo = tmp_path / "repo"
    (repo / "m1" / "1").mkdir(parents=True)
    (repo / "m1" / "config.pbtxt").write_text("previous config\n")
    (repo / "m1" / "1" / "model.onnx").write_bytes(b"previous model")
    out = _write_repo(repo, limit=4096)  # the config fits, the 7.6 MB model does not
    assert out.returncode == 1, out.stderr
    assert f"{repo / 'm1' / '1' / 'model.onnx'}: cannot write: File too large" in out.stderr, out.stderr
    assert (repo / "m1" / "1" / "model.onnx").read_bytes() == b"previous model"
    assert not [p for p in repo.rglob("*.tmp-*")]
    out = _write_repo(repo, limit=64)  # not even the config
    assert out.returncode == 1, out.stderr
    assert "config.pbtxt: cannot write: File too large" in out.stderr, out.stderr
    assert not [p for p in repo.rglob("*.tmp-*")]


def test_write_repo_replaces_planted_links(tmp_path):
    """A symbolic link at an output path is replaced by the file; what it pointed at is untouched."""
    repo = tmp_path / "repo"
    (repo / "m1" / "1").mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours\n")
    os.symlink(victim, repo / "m1" / "config.pbtxt")
    os.symlink(victim, repo / "m1" / "1" / "model.onnx")
    out = _write_repo(repo)
    assert out.returncode == 0, out.stderr
    assert victim.read_text() == "not yours\n"
    for p in (repo / "m1" / "config.pbtxt", repo / "m1" / "1" / "model.onnx"):
        assert not p.is_symlink() and p.stat().st_size > 0
    assert 'backend: "yolocu"' in (repo / "m1" / "config.pbtxt").read_text()
    mask = os.umask(0)
    os.umask(mask)
    assert (repo / "m1" / "config.pbtxt").stat().st_mode & 0o777 == 0o666 & ~mask
