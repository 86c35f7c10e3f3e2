# shellcheck shell=bash
# warm_start_modes BENCH_WARM_UP MODEL BATCH: a GPU detector's start for every batch size 1..BATCH,
# cold (empty tactic cache) and from the cache file that run wrote, per mode of WARM_MODES (default
# "pad fast"): derive (every size derived), pad (--pad-batches), pad1 (that, tuning only BATCH),
# pad1q (that, with YOLOCU_TUNE_QUICK=1: at most 3 cuDNN graph plans a layer, one timing each), fast
# (--fast-start: BATCH tuned with 4 graph plans a layer, the other anchors built without compiling).
# Rows: each start's time, its derived sizes, the tuner's breakdown; then the engine time per batch
# size of both runs. Sourced by
# scripts/gpu/video_run.sh and scripts/gpu/parts/engine.sh, which define row, step, out and summary.
# shellcheck disable=SC2154  # out, summary: the sourcing script's
warm_start_modes() {
  local bin_warm=$1 model=$2 wb=$3 mode start cache log pre flag
  step "warm start: batch sizes 1..$wb, cold and from the cache file (${WARM_MODES:-pad fast})"
  for mode in ${WARM_MODES:-pad fast}; do
    pre=(env -u YOLOCU_TUNE_QUICK) flag=()
    case $mode in
      derive) ;;
      pad) flag=(--pad-batches) ;;
      pad1) flag=(--pad-batches --tune-batches "$wb") ;;
      pad1q) pre=(env YOLOCU_TUNE_QUICK=1) flag=(--pad-batches --tune-batches "$wb") ;;
      fast) flag=(--fast-start) ;;
      *) row "FAIL  WARM_MODES: unknown mode '$mode'"; continue ;;
    esac
    cache=$out/warm_$mode.json
    rm -f "$cache"
    for start in cold cached; do
      log=$out/warm_${mode}_$start.log
      "${pre[@]}" timeout 420 "$bin_warm" "$model" --batch "$wb" "${flag[@]}" --tactic-cache "$cache" >"$log" 2>&1 ||
        row "FAIL  bench_warm_up $mode $start (log warm_${mode}_$start.log)"
      row "$mode ($start start): $(grep '^warm start' "$log" | sed 's/^warm start: //')"
      row "      $(grep '^warm-up:' "$log")"
      row "      $(grep '^tune breakdown' "$log")"
    done
    grep '^engine ms' "$out/warm_${mode}_cold.log" | sed "s/^/$mode, cold: /" | tee -a "$summary"
    grep '^engine ms' "$out/warm_${mode}_cached.log" | sed "s/^/$mode, cached: /" | tee -a "$summary"
  done
}
