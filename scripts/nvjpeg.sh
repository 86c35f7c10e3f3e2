#!/usr/bin/env bash
# nvJPEG for GPU JPEG decode (`--decode gpu`): when the CUDA toolkit of NVCC (default: nvcc on the
# PATH, else /usr/local/cuda) has no nvjpeg.h, installs the pinned nvidia-nvjpeg wheel
# (scripts/requirements-nvjpeg.txt) into .venv/nvjpeg, where CMake looks for it (NVJPEG_ROOT).
#   scripts/nvjpeg.sh [NVCC]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
nvcc=${1:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
toolkit=$(cd "$(dirname "$(readlink -f "$nvcc")")/.." 2>/dev/null && pwd || true)
if [ -n "$toolkit" ] && { [ -f "$toolkit/include/nvjpeg.h" ] || ls "$toolkit"/targets/*/include/nvjpeg.h >/dev/null 2>&1; }; then
  echo "[nvjpeg] the CUDA toolkit has nvJPEG ($toolkit)"
  exit 0
fi
if [ -f .venv/nvjpeg/nvidia/cu13/include/nvjpeg.h ]; then
  echo "[nvjpeg] .venv/nvjpeg: present"
  exit 0
fi
py=.venv/bin/python
[ -x "$py" ] || py=python3
echo "[nvjpeg] installing nvidia-nvjpeg into .venv/nvjpeg (scripts/requirements-nvjpeg.txt)"
"$py" -m pip install -q --disable-pip-version-check --no-deps --target .venv/nvjpeg -r scripts/requirements-nvjpeg.txt
