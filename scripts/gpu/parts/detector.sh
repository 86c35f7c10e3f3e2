#!/usr/bin/env bash
# GPU-machine part `detector`: the GPU detector tests (test_detector_cuda: bus / zidane, coco128
# against the CPU, FP16 mAP, threads, overlap, device-memory cap, soak) and the device-image tests,
# then compute-sanitizer.
#   scripts/gpu/bundle.sh detector   here;   bash scripts/gpu/run_all.sh detector   there (carry .gpu)
# Reads: TEST_FILTER, TEST_QUICK, TEST_TIMEOUT, SKIP_TESTS, SKIP_SANITIZE, SAN_TIMEOUT, OUT,
# YOLOCU_GPU_DIR (the table: docs/gpu-runs.md).
set -uo pipefail
# shellcheck source=scripts/gpu/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

gpu_begin
if run_tests test_detector_cuda test_device_image_cuda && want_sanitizers; then
  # binary | memcheck filter | racecheck + initcheck filter ("-": none)
  sanitize_each <<'LIST'
test_device_image_cuda * -
test_detector_cuda *Bus* *Bus*
LIST
fi
gpu_end
