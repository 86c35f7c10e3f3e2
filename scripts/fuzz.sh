#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/: clang, -fsanitize=fuzzer,address,undefined, CPU only) in
# build-fuzz/ and runs each for SECONDS (default 60) on its seed corpus, with its dictionary. New
# inputs collect in build-fuzz/corpus/<harness>/ (kept between runs: a later run goes on from there);
# a crash leaves its input in build-fuzz/artifacts/<harness>/ and fails the run. Prints per harness:
# executions, exec/s, edges covered (libFuzzer's cov:), new corpus size, crashes.
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]   harnesses: onnx image npy labels tactic_cache video source_list
#                                            triton_request (default: all)
#   scripts/fuzz.sh --seeds                  regenerate fuzz/corpus/ from the sample data (make_corpus)
#   scripts/fuzz.sh --replay FILE...         run inputs through every harness they belong to
#                                            (fuzz_<harness> FILE, no fuzzing) to reproduce a crash
#
# Environment: YOLOCU_DATA_DIR (sample data, default ../shared/data), JOBS (build jobs, default nproc),
# FUZZ_PARALLEL (harnesses run at once, default 1), FUZZ_NICE (nice level, default 10),
# FUZZ_SEED (libFuzzer's -seed: 0 = random, default; CI fixes it so that a run repeats its mutations),
# FUZZ_BUILD (build folder, default build-fuzz), FUZZ_WORK (where corpus/, artifacts/, logs/ go,
# default the build folder).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
data=${YOLOCU_DATA_DIR:-$root/../shared/data}
jobs=${JOBS:-$(nproc)}
build=${FUZZ_BUILD:-build-fuzz}
work=${FUZZ_WORK:-$build}
harnesses_all=(onnx image npy labels tactic_cache video source_list triton_request)

command -v clang++ >/dev/null || { echo "scripts/fuzz.sh: clang++ not found (scripts/setup.sh installs it)" >&2; exit 1; }
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DYOLOCU_FUZZ=ON -DYOLOCU_CUDA=OFF -DYOLOCU_BUILD_TESTS=OFF -DYOLOCU_BUILD_BENCH=OFF -DYOLOCU_WERROR=OFF \
  -DYOLOCU_DATA_DIR="$data" >/dev/null
targets=()
for h in "${harnesses_all[@]}"; do targets+=("fuzz_$h"); done
cmake --build "$build" -j "$jobs" --target "${targets[@]}" yolocu_make_corpus | grep -v '^\[' || true

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1

if [ "${1:-}" = "--seeds" ]; then
  # tactic_cache, source_list, triton_request: hand-written, kept
  rm -rf fuzz/corpus/onnx fuzz/corpus/image fuzz/corpus/npy fuzz/corpus/labels fuzz/corpus/video
  "$build/fuzz/yolocu_make_corpus" fuzz/corpus "$data"
  rm -f fuzz/corpus/onnx/*_shrunk.onnx  # derived from the sample models: made per run (below), not committed
  du -sh fuzz/corpus
  exit 0
fi
if [ "${1:-}" = "--replay" ]; then
  shift
  for f in "$@"; do
    for h in "${harnesses_all[@]}"; do
      case "$f" in */"$h"/*) "$build/fuzz/fuzz_$h" "$f" ;; esac
    done
  done
  exit 0
fi

# Seeds derived from the sample models (yolov5n_dyn / yolov5n_raw_heads with every convolution
# shrunk) are made here from the data folder, not committed: the repository carries only the
# hand-made seeds (fuzz/corpus) and the crash inputs (fuzz/regressions).
derived=$work/derived-seeds
if [ ! -d "$derived/onnx" ]; then
  rm -rf "$derived.tmp" && "$build/fuzz/yolocu_make_corpus" "$derived.tmp" "$data" >/dev/null && mkdir -p "$derived.tmp/onnx" &&
    find "$derived.tmp/onnx" -type f ! -name '*_shrunk.onnx' -delete && mv "$derived.tmp" "$derived"
fi

seconds=${1:-60}
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "scripts/fuzz.sh: SECONDS must be a number, got '$seconds'" >&2; exit 2; }
shift || true
harnesses=("$@")
((${#harnesses[@]})) || harnesses=("${harnesses_all[@]}")

run_one() {  # <harness>: fuzz it for $seconds; the log holds libFuzzer's final stats
  local h=$1
  mkdir -p "$work/corpus/$h" "$work/artifacts/$h" "$work/logs"
  # -max_len: the largest seed (the shrunk models are ~140 KB), at least 4 KB
  local max_len
  mkdir -p "$derived/$h"
  max_len=$(find "fuzz/corpus/$h" "$derived/$h" -type f -printf '%s\n' | sort -n | tail -1)
  max_len=$((max_len < 4096 ? 4096 : max_len + 1024))
  nice -n "${FUZZ_NICE:-10}" "$build/fuzz/fuzz_$h" -max_total_time="$seconds" -dict="fuzz/dict/$h.dict" \
    -max_len="$max_len" -timeout=25 -rss_limit_mb=2560 -print_final_stats=1 -reload=0 -seed="${FUZZ_SEED:-0}" \
    -artifact_prefix="$work/artifacts/$h/" "$work/corpus/$h" "fuzz/corpus/$h" "$derived/$h" fuzz/regressions/"$h" \
    >"$work/logs/$h.log" 2>&1
}

status=0
pids=()
names=()
for h in "${harnesses[@]}"; do
  [ -x "$build/fuzz/fuzz_$h" ] || { echo "scripts/fuzz.sh: no harness '$h' (${harnesses_all[*]})" >&2; exit 2; }
  echo "[fuzz] $h: ${seconds} s"
  run_one "$h" &
  pids+=($!)
  names+=("$h")
  if ((${#pids[@]} >= ${FUZZ_PARALLEL:-1})); then
    wait "${pids[0]}" || { echo "[fuzz] ${names[0]}: FAILED (see $work/logs/${names[0]}.log)"; status=1; }
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "[fuzz] ${names[$i]}: FAILED (see $work/logs/${names[$i]}.log)"; status=1; }
done

printf '%-8s %12s %8s %8s %8s %8s\n' harness execs exec/s edges corpus crashes
for h in "${harnesses[@]}"; do
  log="$work/logs/$h.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  edges=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  corpus=$(find "$work/corpus/$h" -type f | wc -l)
  crashes=$(find "$work/artifacts/$h" -type f | wc -l)
  printf '%-8s %12s %8s %8s %8s %8s\n' "$h" "${execs:-?}" "${rate:-?}" "${edges:-?}" "$corpus" "$crashes"
  if ((crashes)); then
    status=1
    find "$work/artifacts/$h" -type f | sed 's/^/         crash input: /'
    grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer|UndefinedBehaviorSanitizer)|runtime error|uncaught exception' "$log" |
      sed 's/^/         /' || true
  fi
done
exit $status
