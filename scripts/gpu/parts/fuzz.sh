#!/usr/bin/env bash
# GPU-machine part `fuzz`: the ONNX fuzz corpus bundle.sh carried (.gpu/fuzz-onnx) replayed on the
# CUDA engine (test_fuzz_replay_cuda), then under compute-sanitizer memcheck.
#   scripts/gpu/bundle.sh fuzz   here;   bash scripts/gpu/run_all.sh fuzz   there (carry .gpu)
# Reads: SHARD (k/n: every n-th model from the k-th; default 0/1, all), TEST_FILTER, TEST_QUICK,
# TEST_TIMEOUT, SKIP_TESTS, SKIP_SANITIZE, SAN_TIMEOUT, OUT, YOLOCU_GPU_DIR (docs/gpu-runs.md).
set -uo pipefail
# shellcheck source=scripts/gpu/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

gpu_begin
export YOLOCU_FUZZ_REPLAY_DIR=$root/$g/fuzz-onnx YOLOCU_FUZZ_REPLAY_SHARD=${SHARD:-0/1}
if run_tests test_fuzz_replay_cuda && want_sanitizers; then
  sanitize_each <<'LIST'
test_fuzz_replay_cuda * -
LIST
fi
gpu_end
