#!/usr/bin/env bash
# Installs what yolocu needs to build and test on a Debian 12 machine (run as root or with sudo):
# Debian packages for the build, and a project-local Python virtual environment (.venv) holding the
# peers the tests compare against (ONNX Runtime, NumPy) and the GPU engine's header-only libraries.
#
#   scripts/setup.sh            install only
#   scripts/setup.sh --run      install, build (Release) and run detection on the sample images
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

apt_packages=(
  build-essential cmake ninja-build pkg-config ccache
  protobuf-compiler libprotobuf-dev libonnx-dev   # ONNX schema (onnx.proto) + protobuf runtime
  libdnnl-dev                                       # oneDNN: CPU convolutions
  nlohmann-json3-dev                                # the GPU engine's tactic cache (JSON)
  libjpeg62-turbo-dev libturbojpeg0-dev libpng-dev zlib1g-dev   # image codecs, .npz
  libgtest-dev libgmock-dev libbenchmark-dev       # tests and benchmarks
  libopencv-dev                                     # tests only: OpenCV 4.6 as the letterbox oracle
  python3-torchvision python3-numpy                 # tests only: torchvision NMS as the NMS oracle
  python3-opencv                                    # bench/peer_torch_cpu.py: ultralytics on PyTorch-CPU
  python3-yaml python3-pil python3-requests python3-psutil   # scripts/v8/make_refs.sh: the ultralytics package's deps
  python3-venv
  libpython3.11                                     # yolocu serve: Triton's Python-backend stub loads it
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$py" -m venv .venv
fi
stamp=.venv/.yolocu-requirements
if ! cmp -s scripts/requirements.txt "$stamp" 2>/dev/null; then
  echo "[setup] installing Python packages into .venv (scripts/requirements.txt)"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements.txt
  cp scripts/requirements.txt "$stamp"
fi
# .venv-serve: `yolocu serve` (PyTriton) and its tests; PyTriton needs NumPy < 2, .venv keeps NumPy 2.
if [ ! -x .venv-serve/bin/python ]; then
  echo "[setup] creating .venv-serve"
  "$py" -m venv .venv-serve
fi
stamp=.venv-serve/.yolocu-requirements
if ! cmp -s scripts/requirements-serve.txt "$stamp" 2>/dev/null; then
  echo "[setup] installing Python packages into .venv-serve (scripts/requirements-serve.txt)"
  .venv-serve/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements-serve.txt
  cp scripts/requirements-serve.txt "$stamp"
fi

if [ "${1:-}" = "--run" ]; then
  data=${YOLOCU_DATA_DIR:-$root/../shared/data}
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DYOLOCU_DATA_DIR="$data"
  cmake --build build
  exec scripts/demo.sh build "$data"
fi
echo "[setup] done"
