#!/usr/bin/env bash
# Builds the thread tests with ThreadSanitizer (clang, CPU only, build-tsan/) and runs them: one
# Detector shared by 8 threads, the async path, the CPU engine from several threads with its OpenMP
# pool (tests/pipeline/test_threads.cpp), the Detector test that mixes threads and async calls, and
# the pipeline loop with several calls at once (tests/pipeline/test_pipeline.cpp).
# Any data race or lock-order inversion fails the run.
#
#   scripts/tsan.sh
#
# OpenMP: the library is built by clang, so its own parallel regions run on LLVM's libomp, whose
# barriers TSan sees through the Archer tool (OMP_TOOL_LIBRARIES=libarcher.so, set here). oneDNN is
# Debian's prebuilt library on GCC's libgomp: TSan cannot instrument its code, so its threads'
# memory accesses are invisible (neither reported nor checked); what remains visible is every
# access yolocu's own code makes. Suppressions (scripts/tsan.supp) are listed there, each with why.
# Environment: YOLOCU_DATA_DIR (the sample data: the tests skip visibly without it), JOBS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
data=${YOLOCU_DATA_DIR:-$root/../shared/data}
jobs=${JOBS:-$(nproc)}
command -v clang++ >/dev/null || { echo "scripts/tsan.sh: clang++ not found (scripts/setup.sh installs it)" >&2; exit 1; }

cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DYOLOCU_TSAN=ON -DYOLOCU_CUDA=OFF -DYOLOCU_BUILD_BENCH=OFF -DYOLOCU_WERROR=OFF -DYOLOCU_DATA_DIR="$data" >/dev/null
cmake --build build-tsan -j "$jobs" --target test_threads test_detector test_pipeline | grep -v '^\[' || true

archer=$(find /usr/lib/llvm-*/lib -name libarcher.so 2>/dev/null | sort -V | tail -1)
[ -n "$archer" ] || { echo "scripts/tsan.sh: libarcher.so (libomp-dev) not found" >&2; exit 1; }
export OMP_TOOL_LIBRARIES=$archer
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1 suppressions=$root/scripts/tsan.supp ${TSAN_OPTIONS:-}"
export YOLOCU_DATA_DIR=$data
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

status=0
echo "== ThreadSanitizer: test_threads =="
build-tsan/tests/pipeline/test_threads || status=1
echo "== ThreadSanitizer: test_detector (threads + async) =="
build-tsan/tests/pipeline/test_detector --gtest_filter='Detector.RowPitchAsyncAndThreadsDoNotChangeResults' || status=1
echo "== ThreadSanitizer: test_pipeline (the sources -> detections loop, 3 contexts: calls at once) =="
build-tsan/tests/pipeline/test_pipeline --gtest_filter='Pipeline.Contexts*' || status=1
exit $status
