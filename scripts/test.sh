#!/usr/bin/env bash
# Builds yolocu and runs the whole test suite (CPU machine or GPU machine; GPU tests skip visibly
# without a device). Then rebuilds the robustness tests and the CPU engine tests under AddressSanitizer
# + UBSan (label asan) and runs them, the thread tests under ThreadSanitizer (scripts/tsan.sh), and a
# bounded fuzz smoke: every libFuzzer harness for FUZZ_SECONDS (default 20) on its seed corpus
# (scripts/fuzz.sh; FUZZ_SECONDS=0 skips it).
#
#   scripts/test.sh                 full run (installs missing packages first)
#   YOLOCU_DATA_DIR=... scripts/test.sh   test material elsewhere than ../shared/data
#   YOLOCU_V8_REFS=0 scripts/test.sh      without the YOLOv8 / YOLO11 references (their tests skip)
#   YOLOCU_VIDEO_REFS=0 scripts/test.sh   without the video test clips and references (their tests skip)
#   YOLOCU_TRACK_REFS=0 scripts/test.sh   without ultralytics' tracker outputs (the tracker parity tests skip)
#
# First makes the YOLOv8n / YOLO11n / YOLOv8s / YOLO11s test models and ultralytics' reference outputs
# (scripts/v8/make_refs.sh: a throw-away venv with the pinned ultralytics from PyPI; ~9 CPU-minutes
# for the n models, about 5-6 minutes on 2 idle cores, and some 3 more minutes for the s models,
# bounded by a 30-minute timeout; nothing when they are up to date). Any failure there fails the
# run, and the tests then treat a missing reference as a failure (YOLOCU_REQUIRE_V8), not a skip.
# Then the video test material (scripts/video/make_refs.sh: clips encoded from coco128 with the
# ffmpeg tool, cv2.VideoCapture's frames, ultralytics v7.0's detections; ~15 s), required likewise
# (YOLOCU_REQUIRE_VIDEO).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
data=${YOLOCU_DATA_DIR:-$root/../shared/data}
jobs=${JOBS:-$(nproc)}

if [ "${YOLOCU_V8_REFS:-1}" != "0" ]; then
  echo "== YOLOv8 / YOLO11 references (scripts/v8/make_refs.sh) =="
  YOLOCU_DATA_DIR="$data" timeout 1800 scripts/v8/make_refs.sh "$root/.data/v8/refs"
  export YOLOCU_V8_DIR="$root/.data/v8/refs" YOLOCU_REQUIRE_V8=1
fi

if [ "${YOLOCU_VIDEO_REFS:-1}" != "0" ]; then
  echo "== video test material (scripts/video/make_refs.sh) =="
  YOLOCU_DATA_DIR="$data" timeout 900 scripts/video/make_refs.sh "$root/.data/video/refs"
  export YOLOCU_VIDEO_DIR="$root/.data/video/refs" YOLOCU_REQUIRE_VIDEO=1
fi

if [ "${YOLOCU_TRACK_REFS:-1}" != "0" ]; then
  echo "== tracker references (scripts/track/make_refs.sh: ultralytics' BYTETracker / BOTSORT, 1-2 min) =="
  timeout 900 scripts/track/make_refs.sh "$root/.data/track/refs"
  export YOLOCU_TRACK_DIR="$root/.data/track/refs" YOLOCU_REQUIRE_TRACK=1
fi

echo "== build (Release) =="
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DYOLOCU_DATA_DIR="$data" >/dev/null
cmake --build build -j "$jobs"

echo "== build (AddressSanitizer + UBSan: robustness and CPU engine tests) =="
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DYOLOCU_ASAN=ON \
  -DYOLOCU_CUDA=OFF -DYOLOCU_BUILD_BENCH=OFF -DYOLOCU_DATA_DIR="$data" >/dev/null
cmake --build build-asan -j "$jobs" --target yolocu_asan_tests

echo "== tests =="
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
(cd build-asan && ctest -L asan --output-on-failure -j "$jobs") || status=1
(cd build && ctest -LE asan --output-on-failure -j "$jobs") || status=1

echo "== ThreadSanitizer: thread tests (scripts/tsan.sh) =="
JOBS=$jobs scripts/tsan.sh || status=1

if [ "${FUZZ_SECONDS:-20}" != "0" ]; then
  echo "== fuzz smoke: every harness ${FUZZ_SECONDS:-20} s (scripts/fuzz.sh) =="
  # its own work folder, emptied first: the smoke starts from the committed seeds, like CI's clean clone
  rm -rf build-fuzz/smoke
  FUZZ_WORK=build-fuzz/smoke FUZZ_SEED=${FUZZ_SEED:-1} JOBS=$jobs FUZZ_PARALLEL=$jobs FUZZ_NICE=0 scripts/fuzz.sh "${FUZZ_SECONDS:-20}" || status=1
fi

echo "== Python package: wheel (pip, scikit-build-core + nanobind), pytest =="
# CUDA in the extension only where a GPU can run it (its GPU tests skip visibly otherwise): a CUDA
# wheel compiles the CUDA library a second time, which CI's time does not allow. The CUDA wheel in a
# new venv is scripts/check-clean-install.sh --cuda's. Its own build folder at the depth of build/
# and with build/'s warning flags, so that ccache serves the C++ objects of the Release build above.
py_cuda=OFF
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then py_cuda=AUTO; fi
rm -f build-py/dist/yolocu-*.whl
YOLOCU_CUDA=$py_cuda CMAKE_BUILD_PARALLEL_LEVEL=$jobs .venv/bin/python -m pip wheel -q --disable-pip-version-check \
  --no-build-isolation --no-deps -C build-dir=build-wheel -C cmake.define.YOLOCU_WERROR=ON -w build-py/dist .
for venv in .venv .venv-serve; do  # the wheel anew, then what it depends on that the venv lacks (a CUDA build: NVIDIA's wheels)
  $venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --force-reinstall build-py/dist/yolocu-*.whl
  $venv/bin/python -m pip install -q --disable-pip-version-check build-py/dist/yolocu-*.whl
done
export YOLOCU_DATA_DIR="$data"
.venv/bin/python -m pytest -q -rs -s tests/pytest/test_api.py tests/pytest/test_tracker.py tests/pytest/test_results.py \
  tests/pytest/test_formats.py tests/pytest/test_cuda_libs.py tests/deploy || status=1
.venv-serve/bin/python -m pytest -q -rs -s tests/pytest/test_serve.py || status=1

echo "== the wheel in a new venv, dependencies from PyPI: import, detect, yolocu serve (scripts/check-fresh-venv.sh) =="
scripts/check-fresh-venv.sh --serve build-py/dist/yolocu-*.whl || status=1
exit $status
