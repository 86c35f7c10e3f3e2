#!/usr/bin/env bash
# GPU-machine part `engine`: test_cuda_engine (the GPU engine against the CPU engine on every model,
# FP16, graphs, its own kernels) and compute-sanitizer on it; then the engine against PyTorch in the
# same call: a cold tune (fresh tactic cache) with the per-layer profile, a second process that loads
# every tactic from that cache (warm load), the comparisons asked for, Nsight Compute on one kernel.
# WARM_START=1: a detector's start for every batch size 1..WARM_BATCH (32), yolov5n FP16, per
# WARM_MODES (scripts/gpu/warm_start.sh), after the tests.
#   scripts/gpu/bundle.sh engine   here;   bash scripts/gpu/run_all.sh engine   there (carry .gpu)
# Reads: TEST_FILTER, TEST_QUICK, TEST_TIMEOUT, SKIP_TESTS, SKIP_SANITIZE, SAN_TIMEOUT, SKIP_BENCH,
# TACTICS, PROFILE, WARM, CUTLASS, COMPARE_PLAIN, TACTICS_PLAIN, COMPARE_COPY_FREE, TACTICS_COPIES,
# COMPARE_FLAGS, OLD_BENCH, NCU_KERNEL, NCU_SKIP, NCU_BATCH, WARM_START, WARM_MODES, WARM_BATCH, OUT,
# YOLOCU_GPU_DIR (docs/gpu-runs.md).
# shellcheck disable=SC2046  # $([ ... ] && echo --flag): a flag or nothing, split on purpose
set -uo pipefail
# shellcheck source=scripts/gpu/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=scripts/gpu/warm_start.sh
source "$(dirname "${BASH_SOURCE[0]}")/../warm_start.sh"

profile_flag() { [ "${PROFILE:-1}" = 1 ] && echo "$1"; }  # PROFILE=0: no per-layer profiles

engine_bench() {  # the cold tune (from TACTICS=FILE when given), then with WARM=1 the warm load
  step "engine benchmark and the PyTorch peer"
  rm -f "$out/tactics.json"
  [ -n "${TACTICS:-}" ] && cp "$TACTICS" "$out/tactics.json"
  # CUTLASS=1: the engines may also choose the cutlass family's kernels (--cutlass)
  timeout 420 "$bin/bench_cuda_engine" --models "$models" --batches 1,8,32 $(profile_flag --profile) \
    $([ "${CUTLASS:-0}" = 1 ] && echo --cutlass) \
    --tactic-cache "$out/tactics.json" >"$out/bench_cuda_engine.log" 2>&1 || row "FAIL  bench_cuda_engine (log bench_cuda_engine.log)"
  if [ "${WARM:-1}" = 1 ]; then
    timeout 200 "$bin/bench_cuda_engine" --models "$models" --batches 1,32 --iters 20 --tactic-cache "$out/tactics.json" \
      >"$out/bench_cuda_engine_warm.log" 2>&1 || row "FAIL  bench_cuda_engine warm (log bench_cuda_engine_warm.log)"
  fi
}

# compare_run NAME "FLAGS" [TACTICS [BINARY]]: the same engines again with other bench_cuda_engine
# flags, in the same call (NAME.log); their tactics from TACTICS (a cache: .json, or .json.xz such
# as .data/tactics-h100-*.json.xz) when given, else tuned here; BINARY: another bench_cuda_engine.
compare_run() {
  local name=$1 flags=$2 tactics=${3:-} tc="$out/tactics_$1.json" b=${4:-$bin/bench_cuda_engine}
  rm -f "$tc"
  case "$tactics" in "") ;; *.xz) xz -dc "$tactics" >"$tc" ;; *) cp "$tactics" "$tc" ;; esac
  # shellcheck disable=SC2086  # FLAGS: several flags
  timeout 420 "$b" --models "$models" --batches 1,8,32 $flags --tactic-cache "$tc" \
    >"$out/$name.log" 2>&1 || row "FAIL  bench_cuda_engine ${flags:-(default)} (log $name.log)"
  rm -f "$tc"
}

engine_compares() {
  # COMPARE_COPY_FREE=1: every Concat copying (--no-copy-free-concat), tactics from TACTICS_COPIES
  [ "${COMPARE_COPY_FREE:-0}" = 1 ] && compare_run bench_cuda_engine_copies --no-copy-free-concat "${TACTICS_COPIES:-}"
  # COMPARE_FLAGS="...": those flags (e.g. --no-fuse-sppf, --no-direct-stem), from this call's cache
  [ -n "${COMPARE_FLAGS:-}" ] && compare_run bench_cuda_engine_compare "$COMPARE_FLAGS" "$out/tactics.json"
  # OLD_BENCH=FILE: a bench_cuda_engine built at an earlier commit (carried; .xz unpacked), the same
  # engines from this call's cache: before and after a change in one call (bench_cuda_engine_old.log)
  if [ -n "${OLD_BENCH:-}" ]; then
    case "$OLD_BENCH" in *.xz) xz -dc "$OLD_BENCH" >"$out/bench_old" ;; *) cp "$OLD_BENCH" "$out/bench_old" ;; esac
    chmod +x "$out/bench_old"
    compare_run bench_cuda_engine_old "$(profile_flag --profile)" "$out/tactics.json" "$out/bench_old"
    rm -f "$out/bench_old"
  fi
  # CUTLASS=1: also the engines without the cutlass family (the rows it must beat), tactics from
  # TACTICS_PLAIN (COMPARE_PLAIN=0: not)
  [ "${CUTLASS:-0}" = 1 ] && [ "${COMPARE_PLAIN:-1}" = 1 ] && compare_run bench_cuda_engine_plain "" "${TACTICS_PLAIN:-}"
}

# NCU_KERNEL=REGEX: Nsight Compute's full section set for one launch of the kernels matching REGEX
# (after NCU_SKIP=5 of them: past the build's check; the cache holds the choices), yolov5n at
# NCU_BATCH=32 from this call's cache, as text (ncu.log): stall reasons, memory throughput,
# occupancy of that kernel; its key lines into the summary.
engine_ncu() {
  [ -n "${NCU_KERNEL:-}" ] || return 0
  timeout 300 ncu --kernel-name "regex:$NCU_KERNEL" --launch-skip "${NCU_SKIP:-5}" --launch-count 1 --set full \
    "$bin/bench_cuda_engine" --models "$d/models/yolov5n.onnx" --batches "${NCU_BATCH:-32}" --iters 2 \
    --tactic-cache "$out/tactics.json" >"$out/ncu.log" 2>&1 || row "FAIL  ncu (log ncu.log)"
  echo "-- ncu $NCU_KERNEL (yolov5n batch ${NCU_BATCH:-32})" >>"$summary"
  grep -E "^  .*($NCU_KERNEL)|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible|Executed Ipc Active" "$out/ncu.log" >>"$summary"
}

engine_peer() {  # PyTorch's forward (FP16, channels_last, CUDA graph); with PROFILE=1 the convolutions side by side
  LD_LIBRARY_PATH=$peer_ld timeout 300 python3 bench/peer_torch_forward.py --batches 1 8 32 $(profile_flag --per-layer) \
    >"$out/peer_torch_forward.log" 2>&1 || row "FAIL  peer_torch_forward (log peer_torch_forward.log)"
  if [ "${PROFILE:-1}" = 1 ]; then
    python3 bench/merge_profiles.py "$out/bench_cuda_engine.log" "$out/peer_torch_forward.log" --top 8 \
      >"$out/merged_profile.log" 2>&1 || row "FAIL  merge_profiles (log merged_profile.log)"
  fi
}

engine_summary() {  # the tactic cache comes back as tactics.json next to the logs
  cp "$out/tactics.json" "$final/tactics.json" 2>/dev/null
  local f logs=()
  for f in bench_cuda_engine bench_cuda_engine_copies bench_cuda_engine_plain bench_cuda_engine_compare bench_cuda_engine_old bench_cuda_engine_warm peer_torch_forward; do
    logs+=("$out/$f.log")
  done
  summarize '^(yolov5|device|model)|^\| yolov5|tune breakdown:| stem: |own direct stem' "${logs[@]}"
  [ -s "$out/merged_profile.log" ] && { echo "-- merged_profile (yolocu vs PyTorch per convolution)"; grep -E 'matched' "$out/merged_profile.log"; } >>"$summary"
}

gpu_begin
if run_tests test_cuda_engine && want_sanitizers; then
  # binary | memcheck filter | racecheck + initcheck filter
  sanitize_each <<'LIST'
test_cuda_engine OwnConv.*:CutlassConv.*:SppfKernel.*:StemConv.*:CudaEngine.TacticFamiliesSmall:CudaEngine.DeviceApiOnUserStream:CudaEngine.BadArguments OwnConv.*:CutlassConv.*:SppfKernel.*:StemConv.*
LIST
fi
[ "${WARM_START:-0}" = 1 ] && warm_start_modes "$bin/bench_warm_up" "$YOLOCU_DATA_DIR/models/yolov5n.onnx" "${WARM_BATCH:-32}"
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  export YOLOV5_DIR=$root/$g/yolov5
  d=$YOLOCU_DATA_DIR
  models="$d/models/yolov5n.onnx,$d/models/yolov5s_random_fp16.onnx"
  engine_bench
  engine_compares
  engine_ncu
  engine_peer
  engine_summary
fi
gpu_end
