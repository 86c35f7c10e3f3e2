# shellcheck shell=bash
# The shared steps of a GPU-machine run, sourced by scripts/gpu/run_all.sh and scripts/gpu/parts/*.sh:
# gpu_begin (output folders, unpack, cuDNN, the carried material), run_tests / sanitize (a test binary
# under TEST_QUICK / TEST_TIMEOUT, compute-sanitizer), row / summarize (the summary), gpu_end (logs
# packed, summary printed last).
# Reads: OUT, YOLOCU_GPU_DIR, YOLOCU_RUN_SUBDIR, TEST_FILTER, TEST_QUICK, TEST_TIMEOUT, SKIP_TESTS,
# SKIP_SANITIZE, SAN_TIMEOUT, LD_LIBRARY_PATH (the table: docs/gpu-runs.md).
# Sets: root (the repository, the working folder), g (the carry folder), final (the part's output),
# out (its logs), summary, bin (the unpacked binaries), peer_ld (the machine's library path, for the
# Python peers); exports LD_LIBRARY_PATH and YOLOCU_{DATA,SOURCE,SCRATCH}_DIR, YOLOCU_PYTHON.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1

gpu_final_dir() {  # $OUT (else ./gpu-out); with YOLOCU_GPU_DIR=.gpu-<name>: $OUT/gpu-<name>
  local d=${OUT:-$root/gpu-out}
  [ -n "${YOLOCU_GPU_DIR:-}" ] && d=$d/${YOLOCU_GPU_DIR#.}
  echo "$d"
}

gpu_dirs() {  # g, final (+ /$YOLOCU_RUN_SUBDIR when run_all.sh runs several parts), out, summary
  g=${YOLOCU_GPU_DIR:-.gpu}
  final=$(gpu_final_dir)
  [ -n "${YOLOCU_RUN_SUBDIR:-}" ] && final=$final/$YOLOCU_RUN_SUBDIR
  # $OUT takes few files back: full logs go to $out and are packed into one archive.
  out=$final/logs
  mkdir -p "$out"
  summary="$final/summary.txt"
  : >"$summary"
}

row() { printf '%s\n' "$*" | tee -a "$summary"; }
step() { echo "== $* ($(date +%T))"; }

pack() {  # the logs into one archive (also when the call's time limit stops the run: TERM)
  # (model checkpoints and training images stay behind: the archive must stay small)
  tar -C "$final" --exclude='*.pt' --exclude='*.jpg' --exclude='*.png' --exclude='*.cache' --exclude='*.onnx' \
    --exclude='*.nsys-rep' --exclude='*.qdstrm' --exclude='*.sqlite' \
    -czf "$final/logs.tar.gz" logs && rm -rf "$out"
  echo
  echo "================ summary ================"
  cat "$summary"
}

gpu_unpack() {  # bin: the binaries and libraries bundle.sh packed; its compressed test material unpacked
  step "unpack"
  if ! { mkdir -p "$g/run" && tar -C "$g/run" -xJf "$g/bundle.tar.xz"; }; then
    echo "no bundle: run scripts/gpu/bundle.sh first"; exit 1
  fi
  find "$g/data" -name '*.xz' -exec xz -d -f {} +  # test material bundle.sh compressed to fit a call
  bin=$root/$g/run/bin
}

lib_dir() {  # lib_dir <file name pattern>: the folder of the first such file on this machine
  dirname "$(find / -name "$1" -not -path '/proc/*' 2>/dev/null | head -1)"
}

gpu_env() {  # cuDNN, the CUDA runtime and NVRTC of this machine; the carried material for the tests
  local cudnn_dir cudart_dir nvrtc_dir
  cudnn_dir=$(lib_dir 'libcudnn.so.9*')
  cudart_dir=$(lib_dir 'libcudart.so.13*')
  nvrtc_dir=$(lib_dir 'libnvrtc.so.13*')
  # The Python peers keep the machine's own library path: torch checks that it loads the cuDNN it
  # was built with, and the system's (found above for our binaries) may be another version.
  # shellcheck disable=SC2034  # (read by the parts)
  peer_ld=${LD_LIBRARY_PATH:-}
  export LD_LIBRARY_PATH=$root/$g/run/lib:$cudnn_dir:$cudart_dir:$nvrtc_dir:${LD_LIBRARY_PATH:-}
  export YOLOCU_DATA_DIR=$root/$g/data YOLOCU_SOURCE_DIR=$root YOLOCU_SCRATCH_DIR=$out/scratch YOLOCU_PYTHON=python3
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/device.txt"
  echo "cudnn: $cudnn_dir"; ls "$bin"
}

gpu_begin() {  # everything a part needs before its own steps; the first summary row names commit and device
  gpu_dirs
  trap 'row "STOPPED (time limit): logs so far in logs.tar.gz"; exit 124' TERM INT
  trap pack EXIT
  gpu_unpack
  gpu_env
  row "commit $(cat "$g/COMMIT" 2>/dev/null || echo unknown) on $(head -1 "$out/device.txt")"
}

gpu_end() { trap - EXIT; pack; }
fail_lines() { grep -E '^\[  FAILED  \]|Failure|error' "$out/$1.log" | head -15; }

# summarize <ERE> <log...>: under "-- <log name>", each existing log's lines matching ERE (else its last 5)
summarize() {
  local re=$1 f
  shift
  for f in "$@"; do
    [ -f "$f" ] || continue
    echo "-- $(basename "$f" .log)" >>"$summary"
    grep -E "$re" "$f" >>"$summary" || tail -5 "$f" >>"$summary"
  done
}

# run_tests <binary...>: each with TEST_FILTER (default every test); false, running none, with SKIP_TESTS=1
run_tests() {
  [ "${SKIP_TESTS:-0}" = 1 ] && return 1
  step "GPU tests"
  local t
  for t in "$@"; do run_test "$t" "${TEST_FILTER:-*}"; done
  return 0
}

run_test() {  # run_test <binary> [gtest filter]
  local t=$1 filter=${2:-*} quick=
  [ -x "$bin/$t" ] || { row "SKIP  $t (not built)"; return; }
  # TEST_QUICK=1: the engines these tests build tune with the quick candidate list (correctness is
  # the same: every tactic is checked; only the timing sweep is shorter). Benchmarks never do.
  [ "${TEST_QUICK:-0}" = 1 ] && quick=YOLOCU_TUNE_QUICK=1
  if [ -n "${TEST_TIMEOUT:-}" ]; then run_test_each "$t" "$filter" "$quick"; return; fi
  # shellcheck disable=SC2086  # $quick: one assignment for env, or nothing
  if env $quick "$bin/$t" --gtest_filter="$filter" >"$out/$t.log" 2>&1; then
    row "PASS  $t: $(grep -c '^\[       OK \]' "$out/$t.log") ok, $(grep -c '^\[  SKIPPED \]' "$out/$t.log") skipped"
  else
    row "FAIL  $t (log $t.log)"; fail_lines "$t"
  fi
}

# run_test_each <binary> <gtest filter> <env assignment or "">: TEST_TIMEOUT=<s>: each test case in a
# process of its own under that limit, so that one that hangs is named and the others still run.
# (a skipped case exits 0: counted apart from the passed ones)
run_test_each() {
  local t=$1 filter=$2 quick=$3 c rc ok=0 bad=0 skipped=0 one="$out/$1.one.log"
  for c in $("$bin/$t" --gtest_filter="$filter" --gtest_list_tests | awk '/^[^ ]/ {s = $1} /^  / {print s $1}'); do
    # shellcheck disable=SC2086  # $quick: one assignment for env, or nothing
    timeout "$TEST_TIMEOUT" env $quick "$bin/$t" --gtest_filter="$c" >"$one" 2>&1
    rc=$?
    cat "$one" >>"$out/$t.log"
    if [ $rc = 0 ] && grep -q '^\[  SKIPPED \]' "$one"; then skipped=$((skipped + 1))
    elif [ $rc = 0 ]; then ok=$((ok + 1))
    else
      bad=$((bad + 1))
      if [ $rc = 124 ]; then row "HANG  $t $c (over ${TEST_TIMEOUT} s)"; else row "FAIL  $t $c (rc $rc)"; fi
    fi
  done
  rm -f "$one"
  if [ $bad = 0 ]; then row "PASS  $t: $ok ok, $skipped skipped (one process per test)"
  else row "FAIL  $t: $bad failed, $ok ok, $skipped skipped (log $t.log)"; fail_lines "$t"
  fi
}

want_sanitizers() {  # false with SKIP_SANITIZE=1
  [ "${SKIP_SANITIZE:-0}" = 1 ] && return 1
  step "compute-sanitizer (short runs)"
}

# sanitize_each: per line of stdin "<binary> <memcheck filter> <racecheck + initcheck filter, or ->"
sanitize_each() {
  local t mem race
  while read -r t mem race; do
    [ -x "$bin/$t" ] || continue
    sanitize memcheck "$t" "$mem"
    [ "$race" = - ] && continue
    sanitize racecheck "$t" "$race"
    sanitize initcheck "$t" "$race"
  done
}

sanitize() {  # sanitize <tool> <binary> <gtest filter>: quick tuning, SAN_TIMEOUT (300 s) per run
  local tool=$1 t=$2 filter=$3 rc log
  log="$out/san_${tool}_$t.log"
  [ -x "$bin/$t" ] || return
  YOLOCU_TUNE_QUICK=1 timeout "${SAN_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin/$t" --gtest_filter="$filter" >"$log" 2>&1
  rc=$?
  if [ $rc = 0 ]; then
    row "CLEAN compute-sanitizer $tool $t ($filter): $(grep -E '(ERROR|RACECHECK) SUMMARY' "$log" | tail -1 | sed 's/=* *//')"
  elif [ $rc = 124 ] && ! grep -qE 'Invalid|Race|Uninitialized|hazard|ERROR SUMMARY: [1-9]' "$log"; then
    row "TIMEOUT compute-sanitizer $tool $t after ${SAN_TIMEOUT:-300} s, nothing reported; finished clean: $(grep '^\[       OK \]' "$log" | awk '{print $4}' | tr '\n' ' ')"
  else
    row "DIRTY compute-sanitizer $tool $t (log san_${tool}_$t.log)"; grep -E 'ERROR SUMMARY|Invalid|Race|Uninitialized' "$log" | head -8
  fi
}

find_nsys() {  # the nsys executable, or nothing (it is not always on the PATH there)
  local n
  # shellcheck disable=SC2012  # ls: the first of the existing ones in its sorted order
  n=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys /usr/local/cuda*/nsight-systems*/bin/nsys 2>/dev/null | head -1)
  [ -n "$n" ] || n=$(find / -xdev -name nsys -type f -perm -u+x 2>/dev/null | head -1)
  echo "$n"
}
