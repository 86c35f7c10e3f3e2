#!/usr/bin/env bash
# THE GPU-machine run: GPU tests, compute-sanitizer, benchmarks against their peers in the same
# run; full logs under $OUT (or ./gpu-out), a short table printed last.
#
#   scripts/gpu/bundle.sh <part>   (here, no GPU needed)   then on the GPU machine:
#   bash scripts/gpu/run_all.sh tests          (carry: .gpu)  kernel tests + compute-sanitizer
#   bash scripts/gpu/run_all.sh engine         (carry: .gpu)  GPU engine tests + compute-sanitizer
#   bash scripts/gpu/run_all.sh v8             (carry: .gpu)  YOLOv8n / YOLO11n through the GPU engine
#   bash scripts/gpu/run_all.sh detector       (carry: .gpu)  GPU detector tests (+ device images) + compute-sanitizer
#   bash scripts/gpu/run_all.sh decode         (carry: .gpu)  nvJPEG tests; decode gpu vs cpu (eval mAP, detect,
#                                              bench --from-jpeg). Its bundle is over 64 MiB for now (bundle.sh)
#   bash scripts/gpu/run_all.sh bench          (carry: .gpu)  benchmarks vs peers, coco128 on the GPU
#   bash scripts/gpu/run_all.sh train          (carry: .gpu .data .whl; see docs/training.md)
#   bash scripts/gpu/run_all.sh fuzz           (carry: .gpu)  the onnx fuzz corpus on the GPU engine + memcheck
#                                              (SHARD=k/n: every n-th model from the k-th, for a large corpus)
set -uo pipefail
part=${1:?usage: run_all.sh tests|engine|v8|detector|decode|bench|train|fuzz, or several: tests,detector,fuzz}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if [[ "$part" == *,* ]]; then  # several parts of one bundle (bundle.sh a,b,c): each in turn, logs in $OUT/<part>/
  for p in ${part//,/ }; do YOLOCU_RUN_SUBDIR=$p bash "$0" "$p"; done
  for p in ${part//,/ }; do echo "---- $p"; cat "${OUT:-$root/gpu-out}${YOLOCU_GPU_DIR:+/${YOLOCU_GPU_DIR#.}}/$p/summary.txt"; done
  exit 0
fi
# The carry folder bundle.sh filled: .gpu, or YOLOCU_GPU_DIR=.gpu-<name> (several parts in one call,
# e.g. `YOLOCU_GPU_DIR=.gpu-tests bash run_all.sh tests; YOLOCU_GPU_DIR=.gpu-det bash run_all.sh
# detector`; each part's output then goes to $OUT/gpu-<name>/).
g=${YOLOCU_GPU_DIR:-.gpu}
# $OUT takes at most 8 files back: full logs go to $out/logs and are packed into one archive.
final=${OUT:-$root/gpu-out}
[ -n "${YOLOCU_GPU_DIR:-}" ] && final=$final/${g#.}
[ -n "${YOLOCU_RUN_SUBDIR:-}" ] && final=$final/$YOLOCU_RUN_SUBDIR
out=$final/logs
mkdir -p "$out"
summary="$final/summary.txt"
: >"$summary"
row() { printf '%s\n' "$*" | tee -a "$summary"; }
pack() {  # the logs into one archive (also when the call's time limit stops this script: TERM)
  # (model checkpoints and training images stay behind: the archive must stay small)
  tar -C "$final" --exclude='*.pt' --exclude='*.jpg' --exclude='*.png' --exclude='*.cache' --exclude='*.onnx' \
    --exclude='*.nsys-rep' --exclude='*.qdstrm' --exclude='*.sqlite' \
    -czf "$final/logs.tar.gz" logs && rm -rf "$out"
  echo
  echo "================ summary ================"
  cat "$summary"
}
trap 'row "STOPPED (time limit): logs so far in logs.tar.gz"; exit 124' TERM INT
trap pack EXIT
step() { echo "== $* ($(date +%T))"; }

step "unpack"
mkdir -p $g/run && tar -C $g/run -xJf $g/bundle.tar.xz || { echo "no bundle: run scripts/gpu/bundle.sh first"; exit 1; }
find $g/data -name '*.xz' -exec xz -d -f {} +  # test material bundle.sh compressed to fit a call
bin=$root/$g/run/bin
cudnn_dir=$(dirname "$(find / -name 'libcudnn.so.9*' -not -path '/proc/*' 2>/dev/null | head -1)")
cudart_dir=$(dirname "$(find / -name 'libcudart.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)")
nvrtc_dir=$(dirname "$(find / -name 'libnvrtc.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)")
# The Python peers keep the machine's own library path: torch checks that it loads the cuDNN it
# was built with, and the system's (found above for our binaries) may be another version.
peer_ld=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH=$root/$g/run/lib:$cudnn_dir:$cudart_dir:$nvrtc_dir:${LD_LIBRARY_PATH:-}
export YOLOCU_DATA_DIR=$root/$g/data YOLOCU_SOURCE_DIR=$root YOLOCU_SCRATCH_DIR=$out/scratch YOLOCU_PYTHON=python3
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
echo "cudnn: $cudnn_dir"; ls "$bin"
row "commit $(cat $g/COMMIT 2>/dev/null || echo unknown) on $(head -1 "$out/device.txt")"

run_test() {  # run_test <binary> [gtest filter]
  local t=$1 filter=${2:-*}
  [ -x "$bin/$t" ] || { row "SKIP  $t (not built)"; return; }
  # TEST_QUICK=1: the engines these tests build tune with the quick candidate list (correctness is
  # the same: every tactic is checked; only the timing sweep is shorter). Benchmarks never do.
  local quick=$([ "${TEST_QUICK:-0}" = 1 ] && echo YOLOCU_TUNE_QUICK=1)
  if [ -n "${TEST_TIMEOUT:-}" ]; then
    # TEST_TIMEOUT=<s>: each test case in a process of its own under that limit, so that one that
    # hangs is named and the others still run.
    # (a skipped case exits 0: counted apart from the passed ones)
    local c rc ok=0 bad=0 skipped=0 one="$out/$t.one.log"
    for c in $("$bin/$t" --gtest_filter="$filter" --gtest_list_tests | awk '/^[^ ]/ {s = $1} /^  / {print s $1}'); do
      timeout "$TEST_TIMEOUT" env $quick "$bin/$t" --gtest_filter="$c" >"$one" 2>&1
      rc=$?
      cat "$one" >>"$out/$t.log"
      if [ $rc = 0 ] && grep -q '^\[  SKIPPED \]' "$one"; then skipped=$((skipped + 1))
      elif [ $rc = 0 ]; then ok=$((ok + 1)); else
        bad=$((bad + 1))
        [ $rc = 124 ] && row "HANG  $t $c (over ${TEST_TIMEOUT} s)" || row "FAIL  $t $c (rc $rc)"
      fi
    done
    rm -f "$one"
    [ $bad = 0 ] && row "PASS  $t: $ok ok, $skipped skipped (one process per test)" || { row "FAIL  $t: $bad failed, $ok ok, $skipped skipped (log $t.log)"; grep -E '^\[  FAILED  \]|Failure|error' "$out/$t.log" | head -15; }
    return
  fi
  if env $quick "$bin/$t" --gtest_filter="$filter" >"$out/$t.log" 2>&1; then
    row "PASS  $t: $(grep -c '^\[       OK \]' "$out/$t.log") ok, $(grep -c '^\[  SKIPPED \]' "$out/$t.log") skipped"
  else
    row "FAIL  $t (log $t.log)"; grep -E '^\[  FAILED  \]|Failure|error' "$out/$t.log" | head -15
  fi
}
sanitize() {  # sanitize <tool> <binary> <gtest filter>
  local tool=$1 t=$2 filter=$3
  [ -x "$bin/$t" ] || return
  YOLOCU_TUNE_QUICK=1 timeout "${SAN_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin/$t" --gtest_filter="$filter" >"$out/san_${tool}_$t.log" 2>&1
  local rc=$?
  if [ $rc = 0 ]; then
    row "CLEAN compute-sanitizer $tool $t ($filter): $(grep -E '(ERROR|RACECHECK) SUMMARY' "$out/san_${tool}_$t.log" | tail -1 | sed 's/=* *//')"
  elif [ $rc = 124 ] && ! grep -qE 'Invalid|Race|Uninitialized|hazard|ERROR SUMMARY: [1-9]' "$out/san_${tool}_$t.log"; then
    row "TIMEOUT compute-sanitizer $tool $t after ${SAN_TIMEOUT:-300} s, nothing reported; finished clean: $(grep '^\[       OK \]' "$out/san_${tool}_$t.log" | awk '{print $4}' | tr '\n' ' ')"
  else
    row "DIRTY compute-sanitizer $tool $t (log san_${tool}_$t.log)"; grep -E 'ERROR SUMMARY|Invalid|Race|Uninitialized' "$out/san_${tool}_$t.log" | head -8
  fi
}

case "$part" in
  tests) tests="test_preprocess_cuda test_letterbox_image_cuda test_postprocess_cuda test_postprocess_cuda_plan test_training_cpu test_training_gpu" ;;
  engine) tests="test_cuda_engine" ;;
  v8) tests="test_cuda_engine test_postprocess_cuda test_detector_v8"; export YOLOCU_V8_DIR=$root/$g/data/v8
      TEST_FILTER=${TEST_FILTER:-Exports/CudaV8.*:PostprocessCuda.V8*:Exports/V8Detector.SampleImages*_cuda} ;;  # (the _cpu cases need letterboxed_bgr, which the static set leaves out; CI runs them)
  detector) tests="test_detector_cuda test_device_image_cuda" ;;
  decode) tests="test_decode_cuda test_detect_encoded_cuda" ;;
  fuzz) tests="test_fuzz_replay_cuda"
        export YOLOCU_FUZZ_REPLAY_DIR=$root/$g/fuzz-onnx YOLOCU_FUZZ_REPLAY_SHARD=${SHARD:-0/1} ;;
  *) tests="" ;;
esac
# SKIP_TESTS=1 / SKIP_BENCH=1 / SKIP_SANITIZE=1: leave out a part's tests / benchmark / compute-sanitizer runs
# (a part over several calls of 10 minutes). TEST_FILTER=<gtest filter>: only those tests (e.g. the
# ones a change touches, next to a benchmark call).
[ "${SKIP_TESTS:-0}" = 1 ] && tests=""
if [ -n "$tests" ]; then
  step "GPU tests"
  for t in $tests; do run_test "$t" "${TEST_FILTER:-*}"; done
  [ "${SKIP_SANITIZE:-0}" = 1 ] || step "compute-sanitizer (short runs)"
  # binary | memcheck filter | racecheck + initcheck filter ("-": skip)
  while read -r t mem race; do
    [ "${SKIP_SANITIZE:-0}" = 1 ] && continue
    [ -x "$bin/$t" ] && [[ " $tests " == *" $t "* ]] && [ "$part" != v8 ] || continue
    sanitize memcheck "$t" "$mem"
    [ "$race" = - ] && continue
    sanitize racecheck "$t" "$race"
    sanitize initcheck "$t" "$race"
  done <<'LIST'
test_preprocess_cuda * *Batch1*:*RealImages*
test_letterbox_image_cuda * *ForEveryFormatInOneBatch*
test_device_image_cuda * -
test_postprocess_cuda *-PostprocessCuda.BitmaskPathCrowdedSets:PostprocessCuda.BitmaskPathCountsAndStops PostprocessCuda.RandomWithTies:PostprocessCuda.OverflowKeepsTheBestScored:PostprocessCuda.RawHeadsMatchCpu:PostprocessCuda.BitmaskPathSmall
test_training_gpu * *Ciou*:*MultiTensor*
test_cuda_engine OwnConv.*:CutlassConv.*:SppfKernel.*:StemConv.*:CudaEngine.TacticFamiliesSmall:CudaEngine.DeviceApiOnUserStream:CudaEngine.BadArguments OwnConv.*:CutlassConv.*:SppfKernel.*:StemConv.*
test_detector_cuda *Bus* *Bus*
test_decode_cuda DecodeCuda.JpegVariants*:DecodeCuda.BadInputs*:DecodeCuda.Corrupt*:DecodeCuda.BufferGrows* -
test_detect_encoded_cuda DetectEncodedCuda.FallbacksAreExactAndErrorsNamed -
test_fuzz_replay_cuda * -
LIST
  # v8: the new plain-layout kernels (Softmax, MatMul, channel Split) and the v8 decode under
  # compute-sanitizer (quick tuning).
  if [ "$part" = v8 ] && [ "${SKIP_SANITIZE:-0}" != 1 ]; then
    sanitize memcheck test_cuda_engine 'Exports/CudaV8.StaticBatch1*'
    sanitize memcheck test_postprocess_cuda 'PostprocessCuda.V8*'
    sanitize racecheck test_postprocess_cuda 'PostprocessCuda.V8*'
  fi
fi

if [ "$part" = engine ] && [ "${SKIP_BENCH:-0}" != 1 ]; then
  # The engine against PyTorch in the same call: cold tune (fresh tactic cache) with the per-layer
  # profile, then a second process that loads every tactic from that cache (warm load).
  export YOLOV5_DIR=$root/$g/yolov5
  d=$YOLOCU_DATA_DIR
  # TACTICS=FILE: start from that tactic cache (e.g. one carried from an earlier call) instead of a
  # cold one; PROFILE=0: no per-layer profiles; WARM=0: no second (warm-load) process.
  step "engine benchmark and the PyTorch peer"
  rm -f "$out/tactics.json"
  [ -n "${TACTICS:-}" ] && cp "$TACTICS" "$out/tactics.json"
  models="$d/models/yolov5n.onnx,$d/models/yolov5s_random_fp16.onnx"
  # CUTLASS=1: the engines may also choose the cutlass family's kernels (--cutlass)
  timeout 420 "$bin/bench_cuda_engine" --models "$models" --batches 1,8,32 $([ "${PROFILE:-1}" = 1 ] && echo --profile) \
    $([ "${CUTLASS:-0}" = 1 ] && echo --cutlass) \
    --tactic-cache "$out/tactics.json" >"$out/bench_cuda_engine.log" 2>&1 || row "FAIL  bench_cuda_engine (log bench_cuda_engine.log)"
  if [ "${WARM:-1}" = 1 ]; then
    timeout 200 "$bin/bench_cuda_engine" --models "$models" --batches 1,32 --iters 20 --tactic-cache "$out/tactics.json" \
      >"$out/bench_cuda_engine_warm.log" 2>&1 || row "FAIL  bench_cuda_engine warm (log bench_cuda_engine_warm.log)"
  fi
  # compare_run NAME "FLAGS" [TACTICS [BINARY]]: the same engines again with other bench_cuda_engine
  # flags, in the same call (NAME.log); their tactics from TACTICS (a cache: .json, or .json.xz such
  # as .data/tactics-h100-*.json.xz) when given, else tuned here; BINARY: another bench_cuda_engine.
  compare_run() {
    local name=$1 flags=$2 tactics=${3:-} tc="$out/tactics_$1.json" b=${4:-$bin/bench_cuda_engine}
    rm -f "$tc"
    case "$tactics" in "") ;; *.xz) xz -dc "$tactics" >"$tc" ;; *) cp "$tactics" "$tc" ;; esac
    timeout 420 "$b" --models "$models" --batches 1,8,32 $flags --tactic-cache "$tc" \
      >"$out/$name.log" 2>&1 || row "FAIL  bench_cuda_engine ${flags:-(default)} (log $name.log)"
    rm -f "$tc"
  }
  # COMPARE_COPY_FREE=1: every Concat copying (--no-copy-free-concat), tactics from TACTICS_COPIES
  [ "${COMPARE_COPY_FREE:-0}" = 1 ] && compare_run bench_cuda_engine_copies --no-copy-free-concat "${TACTICS_COPIES:-}"
  # COMPARE_FLAGS="...": those flags (e.g. --no-fuse-sppf, --no-direct-stem), from this call's cache
  [ -n "${COMPARE_FLAGS:-}" ] && compare_run bench_cuda_engine_compare "$COMPARE_FLAGS" "$out/tactics.json"
  # OLD_BENCH=FILE: a bench_cuda_engine built at an earlier commit (carried; .xz unpacked), the same
  # engines from this call's cache: before and after a change in one call (bench_cuda_engine_old.log)
  if [ -n "${OLD_BENCH:-}" ]; then
    case "$OLD_BENCH" in *.xz) xz -dc "$OLD_BENCH" >"$out/bench_old" ;; *) cp "$OLD_BENCH" "$out/bench_old" ;; esac
    chmod +x "$out/bench_old"
    compare_run bench_cuda_engine_old "$([ "${PROFILE:-1}" = 1 ] && echo --profile)" "$out/tactics.json" "$out/bench_old"
    rm -f "$out/bench_old"
  fi
  # CUTLASS=1: also the engines without the cutlass family (the rows it must beat), tactics from
  # TACTICS_PLAIN (COMPARE_PLAIN=0: not)
  [ "${CUTLASS:-0}" = 1 ] && [ "${COMPARE_PLAIN:-1}" = 1 ] && compare_run bench_cuda_engine_plain "" "${TACTICS_PLAIN:-}"
  # NCU_KERNEL=REGEX: Nsight Compute's full section set for one launch of the kernels matching REGEX
  # (after NCU_SKIP=5 of them: past the build's check; the cache holds the choices), yolov5n at
  # NCU_BATCH=32 from this call's cache, as text (ncu.log): stall reasons, memory throughput,
  # occupancy of that kernel.
  if [ -n "${NCU_KERNEL:-}" ]; then
    timeout 300 ncu --kernel-name "regex:$NCU_KERNEL" --launch-skip "${NCU_SKIP:-5}" --launch-count 1 --set full \
      "$bin/bench_cuda_engine" --models "$d/models/yolov5n.onnx" --batches "${NCU_BATCH:-32}" --iters 2 \
      --tactic-cache "$out/tactics.json" >"$out/ncu.log" 2>&1 || row "FAIL  ncu (log ncu.log)"
    echo "-- ncu $NCU_KERNEL (yolov5n batch ${NCU_BATCH:-32})" >>"$summary"
    grep -E "^  .*($NCU_KERNEL)|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible|Executed Ipc Active" "$out/ncu.log" >>"$summary"
  fi
  LD_LIBRARY_PATH=$peer_ld timeout 300 python3 bench/peer_torch_forward.py --batches 1 8 32 $([ "${PROFILE:-1}" = 1 ] && echo --per-layer) \
    >"$out/peer_torch_forward.log" 2>&1 || row "FAIL  peer_torch_forward (log peer_torch_forward.log)"
  # The profile's convolutions next to PyTorch's for the same shapes (PROFILE=1)
  if [ "${PROFILE:-1}" = 1 ]; then
    python3 bench/merge_profiles.py "$out/bench_cuda_engine.log" "$out/peer_torch_forward.log" --top 8 \
      >"$out/merged_profile.log" 2>&1 || row "FAIL  merge_profiles (log merged_profile.log)"
  fi
  cp "$out/tactics.json" "$final/tactics.json" 2>/dev/null
  for f in bench_cuda_engine bench_cuda_engine_copies bench_cuda_engine_plain bench_cuda_engine_compare bench_cuda_engine_old bench_cuda_engine_warm peer_torch_forward; do
    [ -f "$out/$f.log" ] || continue
    echo "-- $f" >>"$summary"
    grep -E '^(yolov5|device|model)|^\| yolov5|tune breakdown:| stem: |own direct stem' "$out/$f.log" >>"$summary" || tail -5 "$out/$f.log" >>"$summary"
  done
  [ -s "$out/merged_profile.log" ] && { echo "-- merged_profile (yolocu vs PyTorch per convolution)"; grep -E 'matched' "$out/merged_profile.log"; } >>"$summary"
fi

if [ "$part" = v8 ] && [ "${SKIP_BENCH:-0}" != 1 ]; then
  # YOLOv8n / YOLO11n on the engine against ultralytics' own model in PyTorch (FP16, channels_last,
  # CUDA graph), same call. BATCHES=1,8,32 to change the batch sizes (each is a cold tune).
  step "v8 engine benchmark and the PyTorch peer"
  rm -f "$out/tactics_v8.json"
  [ -n "${TACTICS:-}" ] && cp "$TACTICS" "$out/tactics_v8.json"
  bs=${BATCHES:-1,32}
  timeout 330 "$bin/bench_cuda_engine" --models "$YOLOCU_V8_DIR/yolov8n.onnx,$YOLOCU_V8_DIR/yolo11n.onnx" --batches "$bs" \
    $([ "${PROFILE:-0}" = 1 ] && echo --profile) --tactic-cache "$out/tactics_v8.json" >"$out/bench_cuda_engine_v8.log" 2>&1 ||
    row "FAIL  bench_cuda_engine v8 (log bench_cuda_engine_v8.log)"
  LD_LIBRARY_PATH=$peer_ld timeout 200 python3 bench/peer_torch_forward_v8.py --ultralytics "$root/$g/ultralytics" \
    --batches $(echo "$bs" | tr ',' ' ') >"$out/peer_torch_forward_v8.log" 2>&1 ||
    row "FAIL  peer_torch_forward_v8 (log peer_torch_forward_v8.log)"
  cp "$out/tactics_v8.json" "$final/tactics_v8.json" 2>/dev/null
  for f in bench_cuda_engine_v8 peer_torch_forward_v8; do
    [ -f "$out/$f.log" ] || continue
    echo "-- $f" >>"$summary"
    grep -E '^(yolo|device|model)|^\| yolo|tune breakdown:' "$out/$f.log" >>"$summary" || tail -5 "$out/$f.log" >>"$summary"
  done
fi

if [ "$part" = decode ] && [ "${SKIP_BENCH:-0}" != 1 ]; then
  # GPU JPEG decode (nvJPEG) against CPU decode through the CLI, same model and batch: coco128
  # mAP50-95 (must stay within 0.001), detections on the sample images at conf 0.25, and files ->
  # boxes throughput (coco128 cycled to 4,096 images, page-cached) with each decoder.
  step "decode gpu vs cpu (yolocu eval / detect / bench --from-jpeg)"
  d=$YOLOCU_DATA_DIR
  m=$d/models/yolov5n.onnx
  # FROM_JPEG_ONLY=1: only the files -> boxes rows (no mAP / detections comparison, no decode-alone rows)
  for dec in $([ "${FROM_JPEG_ONLY:-0}" = 1 ] || echo cpu gpu); do
    timeout 300 "$bin/yolocu" eval --model "$m" --images "$d/coco128/images/train2017" --labels "$d/coco128/labels/train2017" \
      --device cuda --batch 32 --decode "$dec" --json "$out/eval_$dec.json" >"$out/eval_$dec.log" 2>&1 || row "FAIL  yolocu eval --decode $dec (log eval_$dec.log)"
    timeout 120 "$bin/yolocu" detect --model "$m" --device cuda --batch 2 --conf 0.25 --decode "$dec" --json "$out/detect_$dec.json" \
      "$d/images/bus.jpg" "$d/images/zidane.jpg" >"$out/detect_$dec.log" 2>&1 || row "FAIL  yolocu detect --decode $dec (log detect_$dec.log)"
  done
  [ "${FROM_JPEG_ONLY:-0}" = 1 ] || python3 - "$out" 2>&1 <<'PY' | tee -a "$summary"
import json, sys
out = sys.argv[1]
try:
    e = {k: json.load(open(f"{out}/eval_{k}.json"))["metrics"] for k in ("cpu", "gpu")}
    d = e["gpu"]["map50_95"] - e["cpu"]["map50_95"]
    print(f"{'PASS' if abs(d) <= 0.001 else 'FAIL'}  decode gpu vs cpu: coco128 mAP50-95 {e['gpu']['map50_95']:.4f} vs {e['cpu']['map50_95']:.4f} "
          f"(diff {d:+.4f}, limit 0.001); mAP50 {e['gpu']['map50']:.4f} vs {e['cpu']['map50']:.4f}")
    def iou(a, b):
        iw = max(0, min(a[2], b[2]) - max(a[0], b[0])); ih = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - iw * ih
        return iw * ih / u if u > 0 else 0
    det = {k: json.load(open(f"{out}/detect_{k}.json"))["images"] for k in ("cpu", "gpu")}
    for ic, ig in zip(det["cpu"], det["gpu"]):
        used, changed = set(), 0
        for g in ig["detections"]:
            m = [j for j, c in enumerate(ic["detections"]) if j not in used and c["class_id"] == g["class_id"] and iou(c["box"], g["box"]) >= 0.9]
            if m: used.add(m[0])
            else: changed += 1
        changed += len(ic["detections"]) - len(used)
        print(f"info  decode gpu vs cpu: {ic['path'].split('/')[-1]}: {len(ig['detections'])} vs {len(ic['detections'])} detections, {changed} changed (conf 0.25)")
except Exception as ex:
    print(f"FAIL  decode gpu vs cpu comparison: {ex}")
PY
  # nvJPEG alone, our decoder per backend and thread count (alone, beside host functions, beside the
  # engine's forward), and torchvision's / OpenCV's in this run. DECODE_ALONE=1: also with FROM_JPEG_ONLY=1.
  if [ "${FROM_JPEG_ONLY:-0}" != 1 ] || [ "${DECODE_ALONE:-0}" = 1 ]; then
    # GREEN_SMS="16 32": the decode on that many SMs of its own (green contexts), the engine on the rest
    # (0: none); BUSY_SEGMENTS="4,16": also beside the engine's forward as that many graphs
    for k in ${GREEN_SMS:-16}; do
      timeout 200 "$bin/bench_jpeg_decode" "$d/coco128/images/train2017" --images 4096 --batch 32 --threads 1,3 --busy-ms 5 \
        --backends hardware --busy-model "$m" --green-sms "$k" ${BUSY_SEGMENTS:+--busy-segments "$BUSY_SEGMENTS"} \
        >"$out/bench_jpeg_decode_green$k.log" 2>&1 ||
        row "FAIL  bench_jpeg_decode (log bench_jpeg_decode_green$k.log)"
      sed 's/^/jpeg-decode  /' "$out/bench_jpeg_decode_green$k.log" | grep -E '\| |green' >>"$summary"
    done
  fi
  if [ "${FROM_JPEG_ONLY:-0}" != 1 ]; then
    LD_LIBRARY_PATH=${peer_ld:-} timeout 150 python3 bench/peer_torch_decode.py "$d/coco128/images/train2017" --images 4096 \
      --batch 32 --cpu-threads "$(nproc)" >"$out/peer_torch_decode.log" 2>&1 || row "FAIL  peer_torch_decode (log peer_torch_decode.log)"
    sed 's/^/jpeg-decode peer  /' "$out/peer_torch_decode.log" | tail -2 >>"$summary"
  fi
  # (contexts: as many run_detector calls at once; FROM_JPEG_CONTEXTS="3 4" to compare; FROM_JPEG_BACKEND=hybrid)
  # FROM_JPEG_CPU_SHARE="0 0.25": nvJPEG rows with that share of each batch decoded on CPU threads beside it
  for dec in ${FROM_JPEG_DECODE:-gpu cpu}; do  # FROM_JPEG_DECODE=gpu: nvJPEG rows only
    for share in $([ "$dec" = gpu ] && echo "${FROM_JPEG_CPU_SHARE:-0}" || echo 0); do
      for ctx in ${FROM_JPEG_CONTEXTS:-3}; do
       # FROM_JPEG_GRAPHS="default on off 16": the CLI's default (with --decode gpu: eager launches), or
       # --engine-graphs (on), --no-engine-graphs (off), --engine-graph-segments 16 (a number)
       for graphs in ${FROM_JPEG_GRAPHS:-default}; do
        case "$graphs" in default) gflag="" ;; on) gflag="--engine-graphs" ;; off) gflag="--no-engine-graphs" ;; *) gflag="--engine-graph-segments $graphs" ;; esac
        name=from_jpeg_${dec}_ctx$ctx$([ "$share" = 0 ] || echo "_share$share")$([ "$graphs" = default ] || echo "_graphs$graphs")
        YOLOCU_NVJPEG_BACKEND=${FROM_JPEG_BACKEND:-} timeout 150 "$bin/yolocu" bench --model "$m" --device cuda --from-jpeg "$d/coco128/images/train2017" --images 4096 \
          --batches 32 --contexts "$ctx" --decode "$dec" $([ "$share" = 0 ] || echo "--decode-cpu-share $share") --decode-threads "$(nproc)" \
          $gflag --stage-times --json "$out/$name.json" >"$out/$name.log" 2>&1 ||
          row "FAIL  yolocu bench --from-jpeg --decode $dec --contexts $ctx share $share graphs $graphs (rc $?, log $name.log)"
        grep -E '^cuda |host ms per batch|gpu ms per batch' "$out/$name.log" | sed "s/^/from-jpeg  ctx $ctx  cpu share $share  graphs $graphs  /" >>"$summary"
       done
      done
    done
  done
  # NSYS=1: the gpu-decode run with 3 contexts under Nsight Systems; API and kernel summaries in the logs
  if [ "${NSYS:-0}" = 1 ]; then
    nsys=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys /usr/local/cuda*/nsight-systems*/bin/nsys 2>/dev/null | head -1)
    [ -n "$nsys" ] || nsys=$(find / -xdev -name nsys -type f -perm -u+x 2>/dev/null | head -1)
    if [ -n "$nsys" ]; then
      rep=$(mktemp -d)  # the report stays there (too large to come back); its summaries go to the logs
      timeout 200 "$nsys" profile -t cuda,nvtx -o "$rep/from_jpeg_gpu" --force-overwrite true "$bin/yolocu" bench --model "$m" \
        --device cuda --from-jpeg "$d/coco128/images/train2017" --images 2048 --batches 32 --contexts 3 --decode gpu \
        --decode-threads "$(nproc)" >"$out/nsys_from_jpeg.log" 2>&1
      timeout 200 "$nsys" stats -r cuda_api_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum "$rep/from_jpeg_gpu.nsys-rep" \
        >"$out/nsys_from_jpeg_stats.log" 2>&1 || row "FAIL  nsys from-jpeg stats (log nsys_from_jpeg_stats.log)"
      row "info  nsys from-jpeg: $(grep -c . "$out/nsys_from_jpeg_stats.log") lines of stats (nsys_from_jpeg_stats.log)"
      rm -rf "$rep"
    else
      row "info  NSYS=1: no nsys on this machine"
    fi
  fi
fi

if [ "$part" = bench ]; then
  export YOLOV5_DIR=$root/$g/yolov5
  d=$YOLOCU_DATA_DIR
  step "benchmarks (ours and the peers, same machine, same call)"
  bench() {  # bench <log name> <command...>
    local name=$1; shift
    if timeout 300 "$@" >"$out/$name.log" 2>&1; then echo "ok    $name"; else echo "FAIL  $name (log $name.log)"; tail -5 "$out/$name.log"; fi
  }
  bench bench_letterbox "$bin/bench_letterbox"
  bench bench_postprocess "$bin/bench_postprocess" "$d" 200
  bench bench_nms "$bin/bench_nms" 100
  if [ "${BENCH_ENGINE:-1}" = 1 ]; then  # BENCH_ENGINE=0: measured by the engine part (cold tune included)
    bench bench_cuda_engine "$bin/bench_cuda_engine" --batches 1,8,32 --profile
    bench peer_torch_forward env LD_LIBRARY_PATH="$peer_ld" python3 bench/peer_torch_forward.py --batches 1 8 32
  fi
  for m in yolov5n yolov5s_random_fp16; do
    bench "yolocu_bench_$m" "$bin/yolocu" bench --model "$d/models/$m.onnx" --image "$d/images/bus.jpg" \
      --device cuda --precision fp16 --batches 1 8 32 --iters 200 --warmup 20 --json "$out/yolocu_bench_$m.json"
  done
  # Overlap (issue #13): the same detector with 2 contexts (throughput column), and its timeline.
  # --timeline: every batch's stages per context from CUDA events (Chrome trace + an overlap line in the
  # log), since nsys on that machine cannot import its reports
  for c in 2 3; do
    bench yolocu_bench_yolov5n_ctx$c "$bin/yolocu" bench --model "$d/models/yolov5n.onnx" --image "$d/images/bus.jpg" \
      --device cuda --precision fp16 --batches 1 32 --contexts $c --iters 200 --warmup 20 --json "$out/yolocu_bench_yolov5n_ctx$c.json" \
      --timeline "$out/timeline_ctx$c.json"
    grep -h '^timeline' "$out/yolocu_bench_yolov5n_ctx$c.log" | sed "s/^/contexts $c: /" >>"$summary"
  done
  # (nsys is not always on the PATH there: at 73d83a4 `command -v nsys` found nothing). BENCH_NSYS=0: skip
  # it (it records there but cannot import its reports; --timeline above is the overlap evidence)
  nsys=
  if [ "${BENCH_NSYS:-1}" != 0 ]; then
    nsys=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys /usr/local/cuda*/nsight-systems*/bin/nsys 2>/dev/null | head -1)
    [ -n "$nsys" ] || nsys=$(find / -xdev -name nsys -type f -perm -u+x 2>/dev/null | head -1)
  fi
  if [ "${BENCH_NSYS:-1}" = 0 ]; then
    row "SKIP  nsys overlap timeline (BENCH_NSYS=0)"
  elif [ -n "$nsys" ]; then
    rep=$(mktemp -d)  # the report stays there (too large to come back); its CSV summaries go to the logs
    timeout 300 "$nsys" profile -t cuda,nvtx -o "$rep/overlap_ctx2" --force-overwrite true "$bin/yolocu" bench \
      --model "$d/models/yolov5n.onnx" --image "$d/images/bus.jpg" --device cuda --batches 32 --contexts 2 --iters 20 \
      --warmup 5 >"$out/nsys_overlap.log" 2>&1 &&
      "$nsys" stats -r cuda_gpu_trace,cuda_gpu_kern_sum -f csv -o "$out/overlap_ctx2" "$rep/overlap_ctx2.nsys-rep" >>"$out/nsys_overlap.log" 2>&1 ||
      row "FAIL  nsys overlap timeline (log nsys_overlap.log)"
    rm -rf "$rep"
  else
    row "SKIP  nsys overlap timeline: no nsys on this machine"
  fi
  bench peer_postprocess python3 bench/peer_postprocess.py "$d" 100
  bench peer_ultralytics_e2e python3 bench/peer_ultralytics_e2e.py --batch 1 8 32 --iters 50
  step "summary"
  for f in "$out"/bench_*.log "$out"/yolocu_bench_*.log "$out"/peer_*.log; do
    [ -f "$f" ] || continue
    echo "-- $(basename "$f" .log)" >>"$summary"
    grep -E '^\||^(cpu|cuda) |^device|^batch|^model|^yolov5|^[0-9]+ ' "$f" >>"$summary" || tail -5 "$f" >>"$summary"
  done
fi

if [ "$part" = train ]; then
  mkdir -p build/tests/training
  for t in "$bin"/test_training*; do [ -e "$t" ] && ln -sf "$t" build/tests/training/; done
  # TRAIN_RUN=0: tests and kernel benchmarks only (skips the ~1 minute of real training)
  scripts/gpu/training.sh "$out/training" $([ "${TRAIN_RUN:-1}" = 1 ] && echo --train) 2>&1 | tee "$out/training.log"
  grep -E '^(PASS|FAIL|\|)' "$out/training.log" >>"$summary"
fi

trap - EXIT
pack
