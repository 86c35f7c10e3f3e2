#!/usr/bin/env bash
# GPU-machine part `decode`: the nvJPEG tests (test_decode_cuda, test_nvjpeg_allocators_cuda,
# test_detect_encoded_cuda) and
# compute-sanitizer on them; then GPU JPEG decode (nvJPEG) against CPU decode through the CLI, same
# model and batch: coco128 mAP50-95 (must stay within 0.001), detections on the sample images at
# conf 0.25, nvJPEG alone and beside the engine, the torchvision / OpenCV peer, and files -> boxes
# throughput (coco128 cycled to 4,096 images, page-cached) with each decoder.
#   scripts/gpu/bundle.sh decode   here;   bash scripts/gpu/run_all.sh decode   there (carry .gpu)
# Reads: TEST_FILTER, TEST_QUICK, TEST_TIMEOUT, SKIP_TESTS, SKIP_SANITIZE, SAN_TIMEOUT, SKIP_BENCH,
# FROM_JPEG_ONLY, DECODE_ALONE, DECODE_LISTS, DECODE_COPIES, GREEN_SMS, BUSY_SEGMENTS, FROM_JPEG_DECODE, FROM_JPEG_CPU_SHARE,
# FROM_JPEG_CONTEXTS, FROM_JPEG_GRAPHS, FROM_JPEG_BACKEND, NSYS, OUT, YOLOCU_GPU_DIR (docs/gpu-runs.md).
# shellcheck disable=SC2046  # $([ ... ] && echo --flag): a flag or nothing, split on purpose
set -uo pipefail
# shellcheck source=scripts/gpu/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

decode_parity() {  # eval and detect with each decoder, then their comparison (not with FROM_JPEG_ONLY=1)
  local dec
  for dec in cpu gpu; do
    timeout 300 "$bin/yolocu" eval --model "$m" --images "$d/coco128/images/train2017" --labels "$d/coco128/labels/train2017" \
      --device cuda --batch 32 --decode "$dec" --json "$out/eval_$dec.json" >"$out/eval_$dec.log" 2>&1 || row "FAIL  yolocu eval --decode $dec (log eval_$dec.log)"
    timeout 120 "$bin/yolocu" detect --model "$m" --device cuda --batch 2 --conf 0.25 --decode "$dec" --nosave --json "$out/detect_$dec.json" \
      "$d/images/bus.jpg" "$d/images/zidane.jpg" >"$out/detect_$dec.log" 2>&1 || row "FAIL  yolocu detect --decode $dec (log detect_$dec.log)"
  done
  python3 - "$out" 2>&1 <<'PY' | tee -a "$summary"
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
}

# nvJPEG alone, our decoder per backend and thread count (alone, beside host functions, beside the
# engine's forward). GREEN_SMS="16 32": the decode on that many SMs of its own (green contexts), the
# engine on the rest (0: none); BUSY_SEGMENTS="4,16": also beside the engine's forward as that many graphs
decode_alone() {
  local k
  for k in ${GREEN_SMS:-16}; do
    timeout 200 "$bin/bench_jpeg_decode" "$d/coco128/images/train2017" --images 4096 --batch 32 --threads 1,3 --busy-ms 5 \
      --backends hardware --busy-model "$m" --green-sms "$k" ${BUSY_SEGMENTS:+--busy-segments "$BUSY_SEGMENTS"} \
      >"$out/bench_jpeg_decode_green$k.log" 2>&1 ||
      row "FAIL  bench_jpeg_decode (log bench_jpeg_decode_green$k.log)"
    sed 's/^/jpeg-decode  /' "$out/bench_jpeg_decode_green$k.log" | grep -E '\| |green' >>"$summary"
  done
}

# DECODE_LISTS=1: nvJPEG alone on lists of random sizes (1..32, as a server's dynamic batches),
# the batched state initialised again at each new size against power_of_two_lists (one state per
# power-of-two size), 1 to 3 threads; the host time per call shows what the initialisations cost
decode_lists() {
  timeout 200 "$bin/bench_jpeg_decode" "$d/coco128/images/train2017" --images 4096 --batch 32 --threads 1,2,3 \
    --backends hardware --random-lists 7 --pow2-lists 0,1 >"$out/bench_jpeg_decode_lists.log" 2>&1 ||
    row "FAIL  bench_jpeg_decode --random-lists (log bench_jpeg_decode_lists.log)"
  sed 's/^/jpeg-decode lists  /' "$out/bench_jpeg_decode_lists.log" | grep -E '\| ' >>"$summary"
}

# DECODE_COPIES=1: nvJPEG alone on lists of 32 whose images repeat 1, 4 and 32 times in a row (a
# server's batch when its clients send the same images in step, as perf_analyzer's processes do)
decode_copies() {
  timeout 200 "$bin/bench_jpeg_decode" "$d/coco128/images/train2017" --images 4096 --batch 32 --threads 1,2 \
    --backends hardware,hybrid --copies 1,4,32 >"$out/bench_jpeg_decode_copies.log" 2>&1 ||
    row "FAIL  bench_jpeg_decode --copies (log bench_jpeg_decode_copies.log)"
  sed 's/^/jpeg-decode copies  /' "$out/bench_jpeg_decode_copies.log" | grep -E '\| ' >>"$summary"
}

decode_peer() {  # torchvision's / OpenCV's decode in this run
  LD_LIBRARY_PATH=${peer_ld:-} timeout 150 python3 bench/peer_torch_decode.py "$d/coco128/images/train2017" --images 4096 \
    --batch 32 --cpu-threads "$(nproc)" >"$out/peer_torch_decode.log" 2>&1 || row "FAIL  peer_torch_decode (log peer_torch_decode.log)"
  sed 's/^/jpeg-decode peer  /' "$out/peer_torch_decode.log" | tail -2 >>"$summary"
}

# from_jpeg <decoder> <cpu share> <contexts> <graphs>: one files -> boxes row (yolocu bench --from-jpeg).
# graphs: default (the CLI's: with --decode gpu eager launches), on (--engine-graphs), off
# (--no-engine-graphs), or a number (--engine-graph-segments N). FROM_JPEG_BACKEND=hybrid: nvJPEG's backend.
from_jpeg() {
  local dec=$1 share=$2 ctx=$3 graphs=$4 gflag name
  case "$graphs" in default) gflag="" ;; on) gflag="--engine-graphs" ;; off) gflag="--no-engine-graphs" ;; *) gflag="--engine-graph-segments $graphs" ;; esac
  name=from_jpeg_${dec}_ctx$ctx$([ "$share" = 0 ] || echo "_share$share")$([ "$graphs" = default ] || echo "_graphs$graphs")
  # shellcheck disable=SC2086  # $gflag: one or two arguments, or none
  YOLOCU_NVJPEG_BACKEND=${FROM_JPEG_BACKEND:-} timeout 150 "$bin/yolocu" bench --model "$m" --device cuda --from-jpeg "$d/coco128/images/train2017" --images 4096 \
    --batches 32 --contexts "$ctx" --decode "$dec" $([ "$share" = 0 ] || echo "--decode-cpu-share $share") --decode-threads "$(nproc)" \
    $gflag --stage-times --json "$out/$name.json" >"$out/$name.log" 2>&1 ||
    row "FAIL  yolocu bench --from-jpeg --decode $dec --contexts $ctx share $share graphs $graphs (rc $?, log $name.log)"
  grep -E '^cuda |host ms per batch|gpu ms per batch' "$out/$name.log" | sed "s/^/from-jpeg  ctx $ctx  cpu share $share  graphs $graphs  /" >>"$summary"
}

# Every combination of FROM_JPEG_DECODE ("gpu cpu"; gpu: nvJPEG rows only), FROM_JPEG_CPU_SHARE ("0";
# "0 0.25": nvJPEG rows with that share of each batch decoded on CPU threads beside it),
# FROM_JPEG_CONTEXTS ("3": as many detector calls at once through run_pipeline) and FROM_JPEG_GRAPHS ("default").
from_jpeg_rows() {
  local dec share ctx graphs
  for dec in ${FROM_JPEG_DECODE:-gpu cpu}; do
    for share in $([ "$dec" = gpu ] && echo "${FROM_JPEG_CPU_SHARE:-0}" || echo 0); do
      for ctx in ${FROM_JPEG_CONTEXTS:-3}; do
        for graphs in ${FROM_JPEG_GRAPHS:-default}; do from_jpeg "$dec" "$share" "$ctx" "$graphs"; done
      done
    done
  done
}

decode_nsys() {  # NSYS=1: the gpu-decode run with 3 contexts under Nsight Systems; API and kernel summaries in the logs
  local nsys rep
  nsys=$(find_nsys)
  if [ -z "$nsys" ]; then row "info  NSYS=1: no nsys on this machine"; return; fi
  rep=$(mktemp -d)  # the report stays there (too large to come back); its summaries go to the logs
  timeout 200 "$nsys" profile -t cuda,nvtx -o "$rep/from_jpeg_gpu" --force-overwrite true "$bin/yolocu" bench --model "$m" \
    --device cuda --from-jpeg "$d/coco128/images/train2017" --images 2048 --batches 32 --contexts 3 --decode gpu \
    --decode-threads "$(nproc)" >"$out/nsys_from_jpeg.log" 2>&1
  timeout 200 "$nsys" stats -r cuda_api_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum "$rep/from_jpeg_gpu.nsys-rep" \
    >"$out/nsys_from_jpeg_stats.log" 2>&1 || row "FAIL  nsys from-jpeg stats (log nsys_from_jpeg_stats.log)"
  row "info  nsys from-jpeg: $(grep -c . "$out/nsys_from_jpeg_stats.log") lines of stats (nsys_from_jpeg_stats.log)"
  rm -rf "$rep"
}

gpu_begin
if run_tests test_decode_cuda test_nvjpeg_allocators_cuda test_detect_encoded_cuda && want_sanitizers; then
  # binary | memcheck filter | racecheck + initcheck filter ("-": none)
  sanitize_each <<'LIST'
test_decode_cuda DecodeCuda.JpegVariants*:DecodeCuda.BadInputs*:DecodeCuda.Corrupt*:DecodeCuda.BufferGrows*:DecodeCuda.PowerOfTwoLists* -
test_detect_encoded_cuda DetectEncodedCuda.FallbacksAreExactAndErrorsNamed -
test_nvjpeg_allocators_cuda * -
LIST
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  step "decode gpu vs cpu (yolocu eval / detect / bench --from-jpeg)"
  d=$YOLOCU_DATA_DIR
  m=$d/models/yolov5n.onnx
  # FROM_JPEG_ONLY=1: only the files -> boxes rows (no mAP / detections comparison, no decode-alone
  # rows unless DECODE_ALONE=1, no peer)
  [ "${FROM_JPEG_ONLY:-0}" = 1 ] || decode_parity
  if [ "${FROM_JPEG_ONLY:-0}" != 1 ] || [ "${DECODE_ALONE:-0}" = 1 ]; then decode_alone; fi
  [ "${DECODE_LISTS:-0}" = 1 ] && decode_lists
  [ "${DECODE_COPIES:-0}" = 1 ] && decode_copies
  [ "${FROM_JPEG_ONLY:-0}" = 1 ] || decode_peer
  [ "${FROM_JPEG_DECODE:-}" = none ] || from_jpeg_rows
  [ "${NSYS:-0}" = 1 ] && decode_nsys
fi
gpu_end
