#!/usr/bin/env bash
# GPU-machine part `tests`: the kernel tests (pre-processing, letterbox, decode / NMS and its plan,
# training kernels), then compute-sanitizer memcheck, racecheck and initcheck on short filters.
#   scripts/gpu/bundle.sh tests   here;   bash scripts/gpu/run_all.sh tests   there (carry .gpu)
# Reads: TEST_FILTER, TEST_QUICK, TEST_TIMEOUT, SKIP_TESTS, SKIP_SANITIZE, SAN_TIMEOUT, OUT,
# YOLOCU_GPU_DIR (the table: docs/gpu-runs.md).
set -uo pipefail
# shellcheck source=scripts/gpu/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

gpu_begin
if run_tests test_preprocess_cuda test_letterbox_image_cuda test_postprocess_cuda test_postprocess_cuda_plan \
  test_training_cpu test_training_gpu && want_sanitizers; then
  # binary | memcheck filter | racecheck + initcheck filter ("-": none)
  sanitize_each <<'LIST'
test_preprocess_cuda * *Batch1*:*RealImages*
test_letterbox_image_cuda * *ForEveryFormatInOneBatch*
test_postprocess_cuda *-PostprocessCuda.BitmaskPathCrowdedSets:PostprocessCuda.BitmaskPathCountsAndStops PostprocessCuda.RandomWithTies:PostprocessCuda.OverflowKeepsTheBestScored:PostprocessCuda.RawHeadsMatchCpu:PostprocessCuda.BitmaskPathSmall
test_training_gpu * *Ciou*:*MultiTensor*
LIST
fi
gpu_end
