#!/usr/bin/env bash
# GPU-machine part `bench`: every benchmark against its peers in the same call (letterbox, decode /
# NMS, the engine and PyTorch's forward, the CLI's bench on 1 to 3 contexts with its --timeline,
# the Nsight Systems overlap timeline, the post-processing and ultralytics end-to-end peers).
# No tests: SKIP_TESTS / SKIP_SANITIZE / SKIP_BENCH do not apply.
#   scripts/gpu/bundle.sh bench   here;   bash scripts/gpu/run_all.sh bench   there (carry .gpu; the
#   peers need the ultralytics/yolov5 v7.0 copy bundle.sh puts in .gpu/yolov5)
# Reads: BENCH_ENGINE (default 1), BENCH_NSYS (default 1), OUT, YOLOCU_GPU_DIR (docs/gpu-runs.md).
set -uo pipefail
# shellcheck source=scripts/gpu/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

run_bench() {  # run_bench <log name> <command...>: under 300 s, "ok" or "FAIL" and the log's tail
  local name=$1; shift
  if timeout 300 "$@" >"$out/$name.log" 2>&1; then echo "ok    $name"; else echo "FAIL  $name (log $name.log)"; tail -5 "$out/$name.log"; fi
}

cli_bench() {  # yolocu bench per model; then yolov5n on 2 and 3 contexts with their timelines
  local m c
  for m in yolov5n yolov5s_random_fp16; do
    run_bench "yolocu_bench_$m" "$bin/yolocu" bench --model "$d/models/$m.onnx" --image "$d/images/bus.jpg" \
      --device cuda --precision fp16 --batches 1 8 32 --iters 200 --warmup 20 --json "$out/yolocu_bench_$m.json"
  done
  # Overlap (issue #13): the same detector with 2 contexts (throughput column), and its timeline.
  # --timeline: every batch's stages per context from CUDA events (Chrome trace + an overlap line in
  # the log), since nsys on that machine cannot import its reports
  for c in 2 3; do
    run_bench yolocu_bench_yolov5n_ctx$c "$bin/yolocu" bench --model "$d/models/yolov5n.onnx" --image "$d/images/bus.jpg" \
      --device cuda --precision fp16 --batches 1 32 --contexts $c --iters 200 --warmup 20 --json "$out/yolocu_bench_yolov5n_ctx$c.json" \
      --timeline "$out/timeline_ctx$c.json"
    grep -h '^timeline' "$out/yolocu_bench_yolov5n_ctx$c.log" | sed "s/^/contexts $c: /" >>"$summary"
  done
}

# The Nsight Systems timeline of 2 contexts; BENCH_NSYS=0: skip it (nsys records there but cannot
# import its reports; --timeline above is the overlap evidence)
bench_nsys() {
  local nsys rep
  if [ "${BENCH_NSYS:-1}" = 0 ]; then row "SKIP  nsys overlap timeline (BENCH_NSYS=0)"; return; fi
  nsys=$(find_nsys)
  if [ -z "$nsys" ]; then row "SKIP  nsys overlap timeline: no nsys on this machine"; return; fi
  rep=$(mktemp -d)  # the report stays there (too large to come back); its CSV summaries go to the logs
  if ! { timeout 300 "$nsys" profile -t cuda,nvtx -o "$rep/overlap_ctx2" --force-overwrite true "$bin/yolocu" bench \
    --model "$d/models/yolov5n.onnx" --image "$d/images/bus.jpg" --device cuda --batches 32 --contexts 2 --iters 20 \
    --warmup 5 >"$out/nsys_overlap.log" 2>&1 &&
    "$nsys" stats -r cuda_gpu_trace,cuda_gpu_kern_sum -f csv -o "$out/overlap_ctx2" "$rep/overlap_ctx2.nsys-rep" >>"$out/nsys_overlap.log" 2>&1; }; then
    row "FAIL  nsys overlap timeline (log nsys_overlap.log)"
  fi
  rm -rf "$rep"
}

gpu_begin
export YOLOV5_DIR=$root/$g/yolov5
d=$YOLOCU_DATA_DIR
step "benchmarks (ours and the peers, same machine, same call)"
run_bench bench_letterbox "$bin/bench_letterbox"
run_bench bench_postprocess "$bin/bench_postprocess" "$d" 200
run_bench bench_nms "$bin/bench_nms" 100
if [ "${BENCH_ENGINE:-1}" = 1 ]; then  # BENCH_ENGINE=0: measured by the engine part (cold tune included)
  run_bench bench_cuda_engine "$bin/bench_cuda_engine" --batches 1,8,32 --profile
  run_bench peer_torch_forward env LD_LIBRARY_PATH="$peer_ld" python3 bench/peer_torch_forward.py --batches 1 8 32
fi
cli_bench
bench_nsys
run_bench peer_postprocess python3 bench/peer_postprocess.py "$d" 100
run_bench peer_ultralytics_e2e python3 bench/peer_ultralytics_e2e.py --batch 1 8 32 --iters 50
step "summary"
summarize '^\||^(cpu|cuda) |^device|^batch|^model|^yolov5|^[0-9]+ ' "$out"/bench_*.log "$out"/yolocu_bench_*.log "$out"/peer_*.log
gpu_end
