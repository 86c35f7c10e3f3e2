#!/usr/bin/env bash
# GPU-machine part `int8`: int8_math.hpp's device side against its host side (test_int8_math_cuda),
# the INT8 convolution and the fp16 <-> int8 boundary kernels (src/engine/cuda/int8) against their
# host references (test_conv_int8; Hopper's kernels: test_conv_int8_sm90), the INT8 engine against
# the CPU's simulated INT8 (test_cuda_engine_int8), compute-sanitizer; with INT8_CAL (a calibration
# of models/yolov5n.onnx, yolocu calibrate) or INT8_EVAL ("model.onnx=calibration.json ..."), each
# model's coco128 mAP in FP16, INT8 on the GPU and simulated INT8 on the CPU, its engine forward in FP16 and INT8
# (bench_cuda_engine, batch 1 and 32) and end to end (yolocu bench, batch 32); a QDQ export's mAP on
# the GPU (its scales imported) and on the CPU (its graph as written); then
# bench_conv_int8: the INT8 kernel's tiles against the FP16 tuner's choice on YOLOv5s's layers at
# batch 1 and 32 (one table row per layer and batch; on the 1x1 layers also Hopper's fused kernels of
# conv_int8_sm90.hpp); then bench_conv_int8_sm90, CUTLASS 3.x's Hopper INT8 convolution and, on the
# 1x1 layers, its persistent GEMM with a plain epilogue (batch-1 outputs checked against exact sums).
#   scripts/gpu/bundle.sh int8   here;   bash scripts/gpu/run_all.sh int8   there (carry .gpu)
# Reads: TEST_FILTER, SKIP_TESTS, SKIP_SANITIZE, SAN_TIMEOUT, SKIP_BENCH, SKIP_SM90_BENCH, SKIP_QDQ, INT8_CAL, INT8_EVAL, INT8_PROFILE, INT8_NCU, INT8_BENCH_ARGS (extra
# bench_conv_int8 flags, e.g. "--cutlass" or "--batches 1,8,32"), INT8_SM90_ARGS (bench_conv_int8_sm90's), OUT, YOLOCU_GPU_DIR
# (the table: docs/gpu-runs.md).
set -uo pipefail
# shellcheck source=scripts/gpu/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

gpu_begin
if run_tests test_int8_math_cuda test_conv_int8 test_conv_int8_sm90 test_cuda_engine_int8 && want_sanitizers; then
  # binary | memcheck filter | racecheck + initcheck filter
  sanitize_each <<'LIST'
test_conv_int8 * ConvInt8.SmallEveryFeature:ConvInt8.SecondOutput:Int8Convert.*
test_conv_int8_sm90 * ConvInt8Sm90.SecondOutput
LIST
fi
d=$YOLOCU_DATA_DIR
# eval_map <tag> <yolocu eval flags...>: one coco128 mAP50-95 run, its log and its row
eval_map() {
  local tag=$1
  shift
  step "yolocu eval $tag"
  if timeout 300 "$bin/yolocu" eval --images "$d/coco128/images/train2017" --labels "$d/coco128/labels/train2017" \
      --batch 32 --json "$out/$tag.json" "$@" >"$out/$tag.log" 2>&1; then
    row "ok    $tag: $(grep -o '"map50_95": *[0-9.]*' "$out/$tag.json" | head -1)"
  else
    row "FAIL  $tag (log $tag.log)"; tail -5 "$out/$tag.log"
  fi
}
# A model may come with several calibrations: its FP16 runs once (first_time: whether `seen` lacks
# it, adding it), each INT8 log named after its calibration file (for_precision <prec> <cal>: sets
# calopt, the calibration flag for int8, and sfx, the logs' suffix).
seen=" "
first_time() {
  case "$seen" in *" $1 "*) return 1 ;; esac
  seen="$seen$1 "
}
for_precision() {
  calopt=() sfx=$1
  if [ "$1" = int8 ]; then calopt=(--calibration "$2") sfx=$1_$(basename "$2" .json); fi
}
# INT8_EVAL: "model.onnx=calibration.json ..." (INT8_CAL: the bundled yolov5n with that calibration;
# INT8_EVAL=bundled: yolov5n with bundle.sh's calibration)
evals=${INT8_EVAL:-}
[ "$evals" = bundled ] && evals="$d/models/yolov5n.onnx=$root/$g/cal/yolov5n.int8.json"
[ -n "${INT8_CAL:-}" ] && evals="$d/models/yolov5n.onnx=$INT8_CAL $evals"
for pair in $evals; do
  m=${pair%%=*} cal=${pair#*=} name=$(basename "${pair%%=*}" .onnx)
  again=0
  first_time "$m" || again=1
  for run in "cuda fp16" "cuda int8" "cpu int8"; do
    read -r dev prec <<<"$run"
    [ "$prec" = fp16 ] && [ $again = 1 ] && continue
    for_precision "$prec" "$cal"
    eval_map "eval_${name}_${dev}_$sfx" --model "$m" --device "$dev" --precision "$prec" "${calopt[@]}"
  done
  # the engine forward, FP16 and INT8, the same call
  for prec in fp16 int8; do
    [ "$prec" = fp16 ] && [ $again = 1 ] && continue
    for_precision "$prec" "$cal"
    step "bench_cuda_engine $name --precision $prec ${calopt[*]}"
    timeout 200 "$bin/bench_cuda_engine" --models "$m" --batches 1,32 --precision "$prec" "${calopt[@]}" \
      --tactic-cache none >"$out/engine_${name}_$sfx.log" 2>&1 || row "FAIL  bench_cuda_engine $name $sfx (log engine_${name}_$sfx.log)"
    summarize "^$name" "$out/engine_${name}_$sfx.log"
    # end to end: bus.jpg in host memory to boxes, batch 32
    step "yolocu bench $name --precision $prec ${calopt[*]}"
    timeout 200 "$bin/yolocu" bench --model "$m" --image "$d/images/bus.jpg" --device cuda --precision "$prec" "${calopt[@]}" \
      --batches 32 --tactic-cache none >"$out/bench_${name}_$sfx.log" 2>&1 || row "FAIL  yolocu bench $name $sfx (log bench_${name}_$sfx.log)"
    summarize '^cuda ' "$out/bench_${name}_$sfx.log"
  done
done
# an already quantised export (bundle.sh's yolov5n_qdq.onnx): on the GPU with its own scales, and
# on the CPU as its graph says (SKIP_QDQ=1: not this time; the CPU's evaluation takes minutes)
if [ -f "$d/qdq/yolov5n_qdq.onnx" ] && [ "${SKIP_QDQ:-0}" != 1 ]; then
  for dev in cuda cpu; do eval_map "eval_yolov5n_qdq_$dev" --model "$d/qdq/yolov5n_qdq.onnx" --device "$dev"; done
fi
# INT8_PROFILE: "model.onnx=calibration.json ...": each model's engine at batch 1 and 32 step by step
# (bench_cuda_engine --profile), FP16 then INT8, the kernel each layer runs named (several
# calibrations of one model as in INT8_EVAL)
seen=" "
profiles=${INT8_PROFILE:-}  # (bundled: yolov5s with bundle.sh's calibration)
[ "$profiles" = bundled ] && profiles="$d/models/yolov5s_random_fp16.onnx=$root/$g/cal/yolov5s_random_fp16.int8.json"
for pair in $profiles; do
  m=${pair%%=*} cal=${pair#*=} name=$(basename "${pair%%=*}" .onnx)
  again=0
  first_time "$m" || again=1
  for prec in fp16 int8; do
    [ "$prec" = fp16 ] && [ $again = 1 ] && continue
    for_precision "$prec" "$cal"
    step "bench_cuda_engine --profile $name --precision $prec ${calopt[*]}"
    timeout 200 "$bin/bench_cuda_engine" --models "$m" --batches 1,32 --precision "$prec" "${calopt[@]}" --profile \
      --tactic-cache none >"$out/profile_${name}_$sfx.log" 2>&1 || row "FAIL  bench_cuda_engine --profile $name $sfx"
    summarize "^$name" "$out/profile_${name}_$sfx.log"
  done
done
# INT8_NCU="4 13": Nsight Compute on the Hopper kernels (CUTLASS's device_kernel) that
# bench_conv_int8 times for each of these layers at batch 32, one launch each: throughput, pipe
# use, warp stalls, instruction counts (ncu_layer<L>.txt)
if [ -n "${INT8_NCU:-}" ]; then
  ncu=$(command -v ncu || find /usr/local -maxdepth 3 -path '*/bin/ncu' 2>/dev/null | head -1)
  for layer in ${INT8_NCU}; do
    step "ncu bench_conv_int8 layer $layer"
    if [ -z "$ncu" ]; then row "SKIP  ncu (not on this machine)"; break; fi
    if timeout 300 "$ncu" -k regex:device_kernel -c 80 --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section WarpStateStats --section SchedulerStats --section InstructionStats --section LaunchStats \
        "$bin/bench_conv_int8" --batches 32 --layers "$layer" --samples 1 --reps 1 >"$out/ncu_layer$layer.txt" 2>&1; then
      row "ok    ncu layer $layer: $(grep -c 'device_kernel<' "$out/ncu_layer$layer.txt") launches profiled (ncu_layer$layer.txt)"
    else
      row "FAIL  ncu layer $layer (ncu_layer$layer.txt)"; tail -3 "$out/ncu_layer$layer.txt"
    fi
  done
fi
bench() {  # bench <binary> <timeout s> [flags...]: one benchmark, its log and its table rows
  local b=$1 limit=$2
  shift 2
  step "$b"
  if timeout "$limit" "$bin/$b" "$@" >"$out/$b.log" 2>&1; then
    row "ok    $b"
  else
    row "FAIL  $b (log $b.log)"; tail -5 "$out/$b.log"
  fi
  summarize '^\||^device|^total' "$out/$b.log"
}
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  # shellcheck disable=SC2086  # INT8_BENCH_ARGS, INT8_SM90_ARGS: several flags
  bench bench_conv_int8 400 ${INT8_BENCH_ARGS:-}
  # CUTLASS 3.x's Hopper INT8 convolution and GEMM on the same layers, the same call
  # shellcheck disable=SC2086
  if [ -x "$bin/bench_conv_int8_sm90" ] && [ "${SKIP_SM90_BENCH:-0}" != 1 ]; then bench bench_conv_int8_sm90 300 ${INT8_SM90_ARGS:-}; fi
fi
gpu_end
