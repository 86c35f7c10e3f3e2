#!/usr/bin/env bash
# GPU-machine part `int8`: the INT8 convolution and the fp16 <-> int8 boundary kernels
# (src/engine/cuda/int8) against their host references (test_conv_int8), compute-sanitizer, then
# bench_conv_int8: the INT8 kernel's tiles against the FP16 tuner's choice on YOLOv5s's layers at
# batch 1 and 32 (one table row per layer and batch); then bench_conv_int8_sm90, CUTLASS 3.x's
# Hopper INT8 convolution on the same layers (its batch-1 outputs checked against exact sums).
#   scripts/gpu/bundle.sh int8   here;   bash scripts/gpu/run_all.sh int8   there (carry .gpu)
# Reads: TEST_FILTER, SKIP_TESTS, SKIP_SANITIZE, SAN_TIMEOUT, SKIP_BENCH, INT8_BENCH_ARGS (extra
# bench_conv_int8 flags, e.g. "--cutlass" or "--batches 1,8,32"), OUT, YOLOCU_GPU_DIR
# (the table: docs/gpu-runs.md).
set -uo pipefail
# shellcheck source=scripts/gpu/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

gpu_begin
if run_tests test_conv_int8 && want_sanitizers; then
  # binary | memcheck filter | racecheck + initcheck filter
  sanitize_each <<'LIST'
test_conv_int8 * ConvInt8.SmallEveryFeature:Int8Convert.*
LIST
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  step "bench_conv_int8"
  # shellcheck disable=SC2086  # INT8_BENCH_ARGS: several flags
  if timeout 400 "$bin/bench_conv_int8" ${INT8_BENCH_ARGS:-} >"$out/bench_conv_int8.log" 2>&1; then
    row "ok    bench_conv_int8"
  else
    row "FAIL  bench_conv_int8 (log bench_conv_int8.log)"; tail -5 "$out/bench_conv_int8.log"
  fi
  summarize '^\||^device|^total' "$out/bench_conv_int8.log"
  # CUTLASS 3.x's Hopper INT8 convolution on the same layers, the same call (INT8_SM90_ARGS: its flags)
  if [ -x "$bin/bench_conv_int8_sm90" ]; then
    step "bench_conv_int8_sm90"
    # shellcheck disable=SC2086
    if timeout 300 "$bin/bench_conv_int8_sm90" ${INT8_SM90_ARGS:-} >"$out/bench_conv_int8_sm90.log" 2>&1; then
      row "ok    bench_conv_int8_sm90"
    else
      row "FAIL  bench_conv_int8_sm90 (log bench_conv_int8_sm90.log)"; tail -5 "$out/bench_conv_int8_sm90.log"
    fi
    summarize '^\||^device|^total' "$out/bench_conv_int8_sm90.log"
  fi
fi
gpu_end
