#!/usr/bin/env bash
# GPU-machine part `train`: scripts/gpu/training.sh (the training kernels' C++ parity tests, PyTorch
# op tests with float64 gradcheck, kernel benchmarks) and, unless TRAIN_RUN=0, the real YOLOv5s
# training baseline against yolocu's kernels (scripts/gpu/train_bench.sh); see docs/training.md.
#   scripts/gpu/bundle.sh train   here;   bash scripts/gpu/run_all.sh train   there (carry .gpu .data .whl)
# Reads: TRAIN_RUN (default 1), OUT, YOLOCU_GPU_DIR; training.sh and train_bench.sh read their own
# (PYTHON, EPOCHS, BATCH, ...: their headers). The table: docs/gpu-runs.md.
set -uo pipefail
# shellcheck source=scripts/gpu/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

gpu_begin
mkdir -p build/tests/training
for t in "$bin"/test_training*; do [ -e "$t" ] && ln -sf "$t" build/tests/training/; done
# TRAIN_RUN=0: tests and kernel benchmarks only (no real training)
# shellcheck disable=SC2046  # --train or nothing
scripts/gpu/training.sh "$out/training" $([ "${TRAIN_RUN:-1}" = 1 ] && echo --train) 2>&1 | tee "$out/training.log"
grep -E '^(PASS|FAIL|\|)' "$out/training.log" >>"$summary"
gpu_end
