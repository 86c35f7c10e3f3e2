#!/usr/bin/env bash
# GPU machine, training part: GPU correctness tests (C++ parity tests + PyTorch op tests incl.
# float64 gradcheck) and kernel benchmarks against PyTorch, logs under OUTDIR.
#
#   scripts/gpu/training.sh OUTDIR           tests + kernel benchmarks (~2-3 min incl. the extension build)
#   scripts/gpu/training.sh OUTDIR --train   ... then scripts/gpu/train_bench.sh OUTDIR/train
#
# Expects the C++ tree built into build/ (builds the training targets itself if missing), python3
# with torch (CUDA), wheels for missing pure-Python deps in .whl/ (installed, only when missing,
# into build/pydeps). Exit status is nonzero if any test fails.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${1:?usage: scripts/gpu/training.sh OUTDIR [--train]}
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-16}
source scripts/gpu/py_deps.sh
status=0
step() { echo "== $* ($(date +%T))"; }

step "device"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv | tee "$out/device.txt"

step "C++ training tests (CPU references + CUDA parity)"
if [ ! -x build/tests/training/test_training_gpu ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 &&
    cmake --build build -j "$MAX_JOBS" --target test_training_cpu test_training_gpu >>"$out/cmake.log" 2>&1 ||
    { echo "FAIL  C++ build (see cmake.log)"; status=1; }
fi
for t in test_training_cpu test_training_gpu; do
  if build/tests/training/$t >"$out/$t.log" 2>&1; then
    echo "PASS  $t: $(grep -E '^\[  (PASSED|SKIPPED) +\] [0-9]+ test' "$out/$t.log" | tr -s ' ' | tr '\n' ' ')"
  else
    echo "FAIL  $t (see $t.log)"; grep -E '^\[  FAILED  \]' "$out/$t.log" | head -20; status=1
  fi
done

step "build the PyTorch extension"
if "$py" python/yolocu_train/build.py >"$out/ext_build.log" 2>&1; then
  tail -1 "$out/ext_build.log"
else
  echo "FAIL  extension build (see ext_build.log)"; tail -30 "$out/ext_build.log"; exit 1
fi

step "PyTorch op tests (forward/gradients vs PyTorch, gradcheck float64)"
if "$py" tests/training/test_torch_ops.py --device cuda >"$out/test_torch_ops.log" 2>&1; then
  echo "PASS  test_torch_ops.py: $(grep -c '^PASS' "$out/test_torch_ops.log") checks passed"
else
  status=1
  echo "FAIL  test_torch_ops.py (see test_torch_ops.log):"
  grep -E '^FAIL' "$out/test_torch_ops.log" || tail -15 "$out/test_torch_ops.log"
fi

step "kernel benchmarks vs PyTorch"
extra=()
[ "${YOLOCU_BENCH_COMPILE:-0}" = 1 ] && extra+=(--compile)
if "$py" bench/training/bench_kernels.py --out "$out" "${extra[@]}" >"$out/bench_kernels.log" 2>&1; then
  sed -n '/^device/,$p' "$out/bench_kernels.log"
else
  status=1
  echo "FAIL  bench_kernels.py (see bench_kernels.log):"; tail -15 "$out/bench_kernels.log"
fi

if [ "${2:-}" = "--train" ]; then
  step "real training benchmark"
  scripts/gpu/train_bench.sh "$out/train" || status=1
fi
step "done, status $status"
exit $status
