#!/usr/bin/env bash
# GPU-machine part `v8`: YOLOv8n / YOLO11n through the GPU engine. The tests of the static set
# (the engine's raw outputs, the v8 decode, the detector's CUDA cases on the sample images; the
# _cpu cases need letterboxed_bgr, which the static set leaves out, and run in CI) and
# compute-sanitizer on the new plain-layout kernels (Softmax, MatMul, channel Split), the fused v8
# Detect tail, the fused C2PSA attention and channel views (memcheck and racecheck on their
# synthetic cases), the depthwise kernel (memcheck) and the v8 decode; then both models on the
# engine against ultralytics' own in PyTorch (FP16, channels_last,
# CUDA graph), same call.
#   scripts/gpu/bundle.sh v8 (V8_SET=static)   here;   bash scripts/gpu/run_all.sh v8   there (carry .gpu)
# Reads: TEST_FILTER (default: the static set's CUDA cases), TEST_QUICK, TEST_TIMEOUT, SKIP_TESTS,
# SKIP_SANITIZE, SAN_TIMEOUT, SKIP_BENCH, BATCHES (default 1,32; each a cold tune), TACTICS, COMPARE_FLAGS,
# PROFILE (default 0 here), V8_SAN=kernels (only the attention and thin-conv kernels' own tests,
# then those under compute-sanitizer, then the benchmark),
# V8_MODELS (the benchmark's models, default "yolov8n yolo11n"), V8_E2E (see v8_e2e), OUT,
# YOLOCU_GPU_DIR (the table: docs/gpu-runs.md).
set -uo pipefail
# shellcheck source=scripts/gpu/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

v8_bench() {
  step "v8 engine benchmark and the PyTorch peer"
  rm -f "$out/tactics_v8.json"
  [ -n "${TACTICS:-}" ] && cp "$TACTICS" "$out/tactics_v8.json"
  local bs=${BATCHES:-1,32} names=${V8_MODELS:-yolov8n yolo11n} models="" n
  for n in $names; do models="$models${models:+,}$YOLOCU_V8_DIR/$n.onnx"; done
  # shellcheck disable=SC2046  # --profile or nothing
  timeout 330 "$bin/bench_cuda_engine" --models "$models" --batches "$bs" \
    $([ "${PROFILE:-0}" = 1 ] && echo --profile) --tactic-cache "$out/tactics_v8.json" >"$out/bench_cuda_engine_v8.log" 2>&1 ||
    row "FAIL  bench_cuda_engine v8 (log bench_cuda_engine_v8.log)"
  # shellcheck disable=SC2046  # the batch sizes as separate arguments
  # shellcheck disable=SC2046  # the model yamls as separate arguments
  LD_LIBRARY_PATH=$peer_ld timeout 200 python3 bench/peer_torch_forward_v8.py --ultralytics "$root/$g/ultralytics" \
    --models $(for n in $names; do echo "$n.yaml"; done) --batches $(echo "$bs" | tr ',' ' ') >"$out/peer_torch_forward_v8.log" 2>&1 ||
    row "FAIL  peer_torch_forward_v8 (log peer_torch_forward_v8.log)"
  # COMPARE_FLAGS="...": the same engines again with those flags (e.g. --no-fuse-v8-tail, --own-dwconv),
  # starting from a copy of this call's tactics (what they tune differently stays out of tactics_v8.json);
  # with PROFILE=1 profiled too
  if [ -n "${COMPARE_FLAGS:-}" ]; then
    cp "$out/tactics_v8.json" "$out/tactics_v8_compare.json" 2>/dev/null
    # shellcheck disable=SC2086,SC2046  # COMPARE_FLAGS: several flags; --profile or nothing
    timeout 330 "$bin/bench_cuda_engine" --models "$models" --batches "$bs" \
      $COMPARE_FLAGS $([ "${PROFILE:-0}" = 1 ] && echo --profile) --tactic-cache "$out/tactics_v8_compare.json" \
      >"$out/bench_cuda_engine_v8_compare.log" 2>&1 ||
      row "FAIL  bench_cuda_engine v8 $COMPARE_FLAGS (log bench_cuda_engine_v8_compare.log)"
  fi
  cp "$out/tactics_v8.json" "$final/tactics_v8.json" 2>/dev/null
  # (with PROFILE=1 also the grouped convolutions' rows: YOLO11's depthwise layers)
  summarize '^(yolo|device|model)|^\| yolo|tune breakdown:|^  \| [0-9]+ \| .* g[0-9]+ \|' "$out/bench_cuda_engine_v8.log" "$out/peer_torch_forward_v8.log" \
    "$out/bench_cuda_engine_v8_compare.log"
}

# V8_E2E=1: each of V8_MODELS end to end through the CLI (issue: v8 / 11 at the YOLOv5 figures), and
# yolov5n beside them where the bundle carries it (bundle.sh decode,v8 with V8_SET=e2e): host BGR
# image -> host boxes at batch 1 / 8 / 32 on one context and at 32 on 2 and 3, then coco128's JPEG
# files -> boxes with nvJPEG on E2E_JPEG_CONTEXTS contexts (default "1 2 3"; none: no such row)
# (first the host staging test where the bundle carries it: the upload path the host rows measure;
# E2E_COMPARE_ENV="VAR=value": the host rows at batch 1, 8 and 32 and at 32 on 2 contexts again with that
# environment, into e2e_<model>_host_compare*.log)
v8_e2e() {
  step "v8 end to end (yolocu bench, --from-jpeg)"
  local d=$root/$g/data m n c f paths=""
  [ -x "$bin/test_host_staging" ] && run_test test_host_staging
  for n in ${V8_MODELS:-yolov8n yolo11n}; do paths="$paths $YOLOCU_V8_DIR/$n.onnx"; done
  [ -f "$d/models/yolov5n.onnx" ] && paths="$paths $d/models/yolov5n.onnx"
  for m in $paths; do
    n=$(basename "$m" .onnx)
    timeout 150 "$bin/yolocu" bench --model "$m" --image "$d/images/bus.jpg" --device cuda \
      --precision fp16 --batches 1 8 32 --iters 200 --warmup 20 >"$out/e2e_${n}_host.log" 2>&1 ||
      row "FAIL  yolocu bench $n (log e2e_${n}_host.log)"
    # E2E_COMPARE_ENV="VAR=value ...": the host rows at batch 1, 8 and 32 (32 on 2 contexts too) again with
    # that environment (a measurement switch: YOLOCU_UPLOAD_CHUNKS=0, YOLOCU_UPLOAD_STREAMING_STORES=0, YOLOCU_GRAPH_BRANCHES=0)
    if [ -n "${E2E_COMPARE_ENV:-}" ]; then
      # shellcheck disable=SC2086  # several assignments
      env $E2E_COMPARE_ENV timeout 150 "$bin/yolocu" bench --model "$m" --image "$d/images/bus.jpg" --device cuda \
        --precision fp16 --batches 1 8 32 --iters 200 --warmup 20 >"$out/e2e_${n}_host_compare.log" 2>&1
      # shellcheck disable=SC2086
      env $E2E_COMPARE_ENV timeout 150 "$bin/yolocu" bench --model "$m" --image "$d/images/bus.jpg" --device cuda \
        --precision fp16 --batches 32 --contexts 2 --iters 200 --warmup 20 >"$out/e2e_${n}_host_compare_ctx2.log" 2>&1
    fi
    for c in 2 3; do
      timeout 150 "$bin/yolocu" bench --model "$m" --image "$d/images/bus.jpg" --device cuda \
        --precision fp16 --batches 32 --contexts $c --iters 200 --warmup 20 >"$out/e2e_${n}_host_ctx$c.log" 2>&1 ||
        row "FAIL  yolocu bench $n --contexts $c (log e2e_${n}_host_ctx$c.log)"
    done
    [ -d "$d/coco128/images/train2017" ] || continue
    local jpeg_ctx=${E2E_JPEG_CONTEXTS:-1 2 3}
    [ "$jpeg_ctx" = none ] && jpeg_ctx=""  # E2E_JPEG_CONTEXTS=none: the host rows alone
    for c in $jpeg_ctx; do
      timeout 150 "$bin/yolocu" bench --model "$m" --device cuda --precision fp16 \
        --from-jpeg "$d/coco128/images/train2017" --images 4096 --batches 32 --contexts $c --decode gpu \
        --decode-threads "$(nproc)" >"$out/e2e_${n}_jpeg_ctx$c.log" 2>&1 ||
        row "FAIL  yolocu bench --from-jpeg $n --contexts $c (log e2e_${n}_jpeg_ctx$c.log)"
    done
  done
  for f in "$out"/e2e_*.log; do grep -E '^cuda ' "$f" | sed "s|^|$(basename "$f" .log)  |" >>"$summary"; done
}

gpu_begin
export YOLOCU_V8_DIR=$root/$g/data/v8
[ "${V8_SAN:-all}" = kernels ] && TEST_FILTER=${TEST_FILTER:-ThinConv.*:CudaAttentionKernel.*}
TEST_FILTER=${TEST_FILTER:-Exports/CudaV8.*:Exports/CudaV8Tail.*:CudaV8TailSynthetic.*:CudaAttention.*:CudaAttentionSynthetic.*:CudaAttentionKernel.*:CudaChannelViews.*:ThinConv.*:PostprocessCuda.V8*:Exports/V8Detector.SampleImages*_cuda}
if [ "${V8_SAN:-all}" = kernels ]; then  # the new kernels' own cases, then under the sanitizers
  run_tests test_cuda_engine
  sanitize memcheck test_cuda_engine 'CudaAttentionKernel.*:ThinConv.MatchesDirectConvolution'
  sanitize racecheck test_cuda_engine 'CudaAttentionKernel.*:ThinConv.MatchesDirectConvolution'
  sanitize initcheck test_cuda_engine 'CudaAttentionKernel.*:ThinConv.MatchesDirectConvolution'
elif run_tests test_cuda_engine test_postprocess_cuda test_detector_v8 && want_sanitizers; then
  sanitize racecheck test_cuda_engine 'CudaAttentionKernel.*'
  sanitize memcheck test_cuda_engine 'ThinConv.MatchesDirectConvolution'
  sanitize racecheck test_cuda_engine 'ThinConv.MatchesDirectConvolution'
  sanitize memcheck test_cuda_engine 'Exports/CudaV8.StaticBatch1*'
  sanitize memcheck test_cuda_engine 'CudaV8TailSynthetic.*'
  sanitize racecheck test_cuda_engine 'CudaV8TailSynthetic.ConcatenatedForm'
  sanitize memcheck test_cuda_engine 'CudaAttentionSynthetic.*'
  sanitize memcheck test_cuda_engine 'OwnDwConv.MatchesDirectConvolution'
  sanitize memcheck test_cuda_engine 'CudaChannelViews.SyntheticC2f'
  sanitize memcheck test_postprocess_cuda 'PostprocessCuda.V8*'
  sanitize racecheck test_postprocess_cuda 'PostprocessCuda.V8*'
fi
[ "${SKIP_BENCH:-0}" != 1 ] && v8_bench
[ "${V8_E2E:-0}" = 1 ] && v8_e2e
gpu_end
