#!/usr/bin/env bash
# Installs a yolocu wheel into a new virtual environment as a user would (its dependencies from
# PyPI, nothing of this checkout on the path), then imports it, detects objects in a sample image
# through the Python API and through the `yolocu` command, and, for a CUDA build, says where each
# CUDA library came from. Fails on any error; exit 0 means the package works where it was installed.
#
#   scripts/check-fresh-venv.sh [--serve] WHEEL [MODEL IMAGE]
#
# --serve: installs WHEEL[serve] (Triton's server from the nvidia-pytriton wheel, tritonclient), then
# starts `yolocu serve` on the CPU on free loopback ports, asks it once over gRPC and stops it.
# MODEL and IMAGE default to the sample model and image of YOLOCU_DATA_DIR (../shared/data).
# PYTHON names the interpreter for the venv (default python3). Downloads go through pip's cache.
set -euo pipefail
serve=0
[ "${1:-}" = --serve ] && { serve=1; shift; }
root=$(cd "$(dirname "$0")/.." && pwd)
wheel=$(readlink -f "${1:?usage: scripts/check-fresh-venv.sh [--serve] WHEEL [MODEL IMAGE]}")
data=${YOLOCU_DATA_DIR:-$root/../shared/data}
model=$(readlink -f "${2:-$data/models/yolov5n.onnx}")
image=$(readlink -f "${3:-$data/images/bus.jpg}")
for f in "$wheel" "$model" "$image"; do
  [ -r "$f" ] || { echo "[fresh-venv] cannot read $f" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"  # nothing of the checkout importable
"${PYTHON:-python3}" -m venv "$tmp/venv"
extra=""
((serve)) && extra="[serve]"
echo "[fresh-venv] pip install $(basename "$wheel")$extra into a new venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel$extra"
"$tmp/venv/bin/python" - "$model" "$image" <<'EOF'
import sys
import yolocu
from yolocu import _cuda_libs
model, image = sys.argv[1], sys.argv[2]
print(f"[fresh-venv] import yolocu: ok (with_cuda={yolocu.with_cuda}, package {yolocu.__file__})")
for soname in _cuda_libs._needed():
    src = _cuda_libs.loaded.get(soname)
    print(f"[fresh-venv]   {soname}: " + (src if src else "the system loader"))
det = yolocu.Detector(model, device="auto")
res = det(image)
print(f"[fresh-venv] Python detect on {det.device}: {len(res.boxes)} boxes")
if len(res.boxes) == 0:
    sys.exit("[fresh-venv] no detections on the sample image")
EOF
out=$("$tmp/venv/bin/yolocu" detect --model "$model" --nosave "$image" 2>&1) || { echo "$out" >&2; echo "[fresh-venv] the yolocu command failed" >&2; exit 1; }
echo "[fresh-venv] yolocu detect: ok ($(echo "$out" | tail -n 1))"
((serve)) || exit 0

echo "[fresh-venv] yolocu serve (CPU, loopback) and one gRPC request"
"$tmp/venv/bin/python" - "$model" "$image" <<'EOF'
import socket, subprocess, sys, time, urllib.request
import numpy as np
import tritonclient.grpc as grpcclient
model, image = sys.argv[1], sys.argv[2]
ports = []
for _ in range(3):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    ports.append(s.getsockname()[1])
    s.close()
proc = subprocess.Popen([sys.executable, "-m", "yolocu.serve", "--model", model, "--device", "cpu", "--http-port", str(ports[0]),
                         "--grpc-port", str(ports[1]), "--metrics-port", str(ports[2]), "--timeout-s", "300"])
try:
    for _ in range(240):
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{ports[0]}/v2/models/yolov5/ready", timeout=2).status == 200:
                break
        except Exception:
            pass
        if proc.poll() is not None:
            sys.exit(f"[fresh-venv] yolocu serve exited with {proc.returncode}")
        time.sleep(0.5)
    c = grpcclient.InferenceServerClient(f"127.0.0.1:{ports[1]}")
    inp = grpcclient.InferInput("IMAGE", [1, 1], "BYTES")
    inp.set_data_from_numpy(np.array([[open(image, "rb").read()]], dtype=object))
    n = int(c.infer("yolov5", [inp]).as_numpy("COUNT")[0, 0])
    print(f"[fresh-venv] yolocu serve answered: {n} boxes")
    if n == 0:
        sys.exit("[fresh-venv] the server found nothing in the sample image")
finally:
    proc.terminate()
    proc.wait(timeout=60)
EOF
