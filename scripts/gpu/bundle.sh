#!/usr/bin/env bash
# Prepares a GPU-machine run without a GPU here: builds the CUDA targets for sm_90 into build-gpu/,
# then packs into .gpu/ (git-ignored) what the GPU machine needs and does not have: our binaries,
# the non-system shared libraries they load (oneDNN, protobuf, libjpeg, libpng; found with ldd),
# and the test material the GPU tests and benchmarks read. scripts/gpu/run_all.sh runs it there.
#
#   scripts/gpu/bundle.sh tests     kernel tests (letterbox, decode/NMS, training) + compute-sanitizer
#   scripts/gpu/bundle.sh engine    GPU engine tests against the CPU engine (all four models)
#   scripts/gpu/bundle.sh v8        YOLOv8n / YOLO11n through the GPU engine (static exports; needs
#                                   scripts/v8/make_refs.sh's references, YOLOCU_V8_DIR or .data/v8/refs)
#   scripts/gpu/bundle.sh detector  GPU detector tests: bus/zidane, coco128, threads, overlap, memory cap,
#                                   soak; device images
#   scripts/gpu/bundle.sh decode    nvJPEG: test_decode_cuda, test_detect_encoded_cuda, decode gpu vs cpu
#   scripts/gpu/bundle.sh bench     benchmarks against their peers (+ a v7.0 copy for the peers)
#   scripts/gpu/bundle.sh train     training kernels and the real-training benchmark
#   scripts/gpu/bundle.sh int8      the INT8 convolution's tests and its benchmark against the FP16 tactics;
#                                   the INT8 engine against simulated INT8; calibrations of yolov5n and
#                                   yolov5s (INT8_CALIBRATE=0: none) for INT8_EVAL / INT8_PROFILE=bundled
#   scripts/gpu/bundle.sh fuzz      the onnx fuzz corpus replayed on the GPU engine under compute-sanitizer
#                                   (fuzz/corpus, fuzz/regressions and the corpus scripts/fuzz.sh grew in
#                                   build-fuzz/corpus/onnx, up to 48 MiB)
# Each call carries at most 64 MiB. Several parts may share one carry folder (one copy of the
# binaries and libraries, the union of their data): `bundle.sh tests,detector,fuzz`, then there
# `bash scripts/gpu/run_all.sh tests,detector,fuzz` runs them in turn. Carry .gpu (and .data, .whl
# for train) to the GPU machine and run there  bash scripts/gpu/run_all.sh <part>  (docs/gpu-runs.md).
# Reads: YOLOCU_DATA_DIR, CUDA_ARCH, YOLOCU_GPU_BUILD, YOLOCU_GPU_DIR, INT8_CALIBRATE, V8_SET, V8_MODELS, V8_ALSO,
# YOLOCU_V8_DIR, YOLOCU_V8_VENV (the table: docs/gpu-runs.md).
set -euo pipefail
parts=${1:?usage: bundle.sh tests|engine|v8|detector|decode|bench|train|fuzz|int8, or several: tests,detector,fuzz}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
data=${YOLOCU_DATA_DIR:-$root/../shared/data}
arch=${CUDA_ARCH:-90}
bdir=${YOLOCU_GPU_BUILD:-build-gpu}  # an existing sm_90 build folder may be named instead
# The carry folder: .gpu, or YOLOCU_GPU_DIR=.gpu-<name> to prepare several parts for one call (carry
# them all; run_all.sh with the same YOLOCU_GPU_DIR per part).
g=${YOLOCU_GPU_DIR:-.gpu}
case "$g" in .gpu | .gpu-[a-z0-9]*) ;; *) echo "YOLOCU_GPU_DIR must be .gpu or .gpu-<name> (git-ignored), got '$g'" >&2; exit 2 ;; esac

# nvJPEG (GPU JPEG decode): the pinned wheel into .venv/nvjpeg when the toolkit lacks it (CMake finds it there).
scripts/nvjpeg.sh >/dev/null || echo "[bundle] WARNING: scripts/nvjpeg.sh failed: no nvJPEG, the GPU decode tests will fail with kUnsupported"
# YOLOCU_VIDEO=OFF: FFmpeg's libraries and their dependencies (~280 MB through ldd) would not fit a
# call's 64 MiB, and the GPU machine has none; the GPU video run carries a minimal FFmpeg of its own
# (scripts/gpu/video_bundle.sh, scripts/gpu/video_run.sh; docs/video.md).
cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" -DYOLOCU_CUDA=ON -DYOLOCU_VIDEO=OFF -DYOLOCU_CLI_OPENCV=OFF \
  -DYOLOCU_DATA_DIR="$data" >/dev/null
# The binaries each part runs (run_all.sh <part>), plus the CLI.
targets_of() {
  case "$1" in
    engine) echo "test_cuda_engine bench_cuda_engine bench_warm_up" ;;
    v8) case "${V8_SET:-static}" in  # what a call of 64 MiB can hold (see the v8 data below)
          dynamic) echo "test_cuda_engine" ;;
          detector | trained) echo "test_detector_v8" ;;
          bench) echo "bench_cuda_engine" ;;
          e2e) ;;  # the CLI alone
          *) echo "test_cuda_engine test_detector_v8 test_postprocess_cuda bench_cuda_engine" ;;
        esac ;;
    fuzz) echo "test_fuzz_replay_cuda" ;;
    detector) echo "test_detector_cuda test_device_image_cuda test_host_staging" ;;
    decode) echo "test_decode_cuda test_nvjpeg_allocators_cuda test_detect_encoded_cuda bench_jpeg_decode test_host_staging" ;;  # nvJPEG (JPEG / PNG test inputs from libjpeg / libpng, no OpenCV)
    tests) echo "test_preprocess_cuda test_letterbox_image_cuda test_postprocess_cuda test_postprocess_cuda_plan test_training_cpu test_training_gpu" ;;
    int8) echo "test_conv_int8 test_conv_int8_sm90 test_int8_math_cuda test_cuda_engine_int8 bench_conv_int8 bench_conv_int8_sm90 bench_cuda_engine" ;;
    bench) echo "bench_letterbox bench_postprocess bench_nms bench_cuda_engine" ;;
    train) ;;
    *) echo "unknown part $1" >&2; return 2 ;;
  esac
}
targets="yolocu_cli"
# the v8 benchmark set alone carries no CLI (an s model takes the room)
[ "$parts" = v8 ] && [ "${V8_SET:-static}" = bench ] && targets=""
for part in ${parts//,/ }; do targets="$targets $(targets_of "$part")" || exit 2; done
targets=$(echo $targets | tr ' ' '\n' | sort -u | tr '\n' ' ')
echo "[bundle] building: $(echo $targets | tr '\n' ' ')"
grep -q '^NVJPEG_LIBRARY:FILEPATH=/' "$bdir/CMakeCache.txt" ||
  echo "[bundle] WARNING: this build has no nvJPEG (NVJPEG_LIBRARY not found): GPU JPEG decode is off"
cmake --build "$bdir" --target $targets

rm -rf $g
mkdir -p $g/bin $g/lib $g/data
for t in $targets; do
  [ "$t" = yolocu_cli ] && t=yolocu
  # (not the copies the package test installs under test-scratch/: those may be from a video build)
  f=$(find "$bdir" -path "$bdir/test-scratch" -prune -o -type f -name "$t" -perm -u+x -print | head -1)
  [ -n "$f" ] && cp "$f" $g/bin/
done
# Shared libraries that are not part of glibc, the CUDA driver/runtime or cuDNN (those are on the
# GPU machine): copied and loaded through LD_LIBRARY_PATH there.
for b in $g/bin/*; do
  ldd "$b" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*|libcuda|libcudart|libcudnn[^/]*|libcublas[^/]*|libnvrtc[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" $g/lib/; done

copy() { [ -e "$g/data/$1" ] && [ ! -f "$g/data/$1.slim" ] && return; mkdir -p "$g/data/$(dirname "$1")"; rm -rf "$g/data/$1" "$g/data/$1.slim"; cp -r "$data/$1" "$g/data/$1"; }
# Test material per part (a call carries at most 64 MiB).
slim_npz() {  # slim_npz <name> <keys...>: a copy of reference/<name>.npz holding only these arrays
  # (plus those an earlier part of the same folder asked for; none if it copied the whole file)
  local name=$1; shift
  local dst=$g/data/reference/$name.npz
  [ -f "$dst" ] && [ ! -f "$dst.slim" ] && return
  mkdir -p $g/data/reference
  "$root/.venv/bin/python" - "$data/reference/$name.npz" "$dst" "$@" <<'PY'
import os, sys, numpy as np
src, dst, keys = sys.argv[1], sys.argv[2], sys.argv[3:]
if os.path.exists(dst):
    keys = sorted(set(keys) | set(np.load(dst).files))
d = np.load(src)
np.savez_compressed(dst, **{k: d[k] for k in keys})
PY
  touch "$dst.slim"
}
for part in ${parts//,/ }; do
case "$part" in
  tests)    # kernels: letterbox, decode/NMS, training
    slim_npz bus output; slim_npz zidane output; copy images; copy coco.names
    ;;
  engine)   # the GPU engine against the CPU engine, all four models; its benchmark and PyTorch's
    copy models/yolov5n.onnx; copy models/yolov5n_dyn.onnx; copy models/yolov5n_raw_heads.onnx
    copy models/yolov5s_random_fp16.onnx; slim_npz bus input; slim_npz zidane input
    if [ -d .data/yolov5 ]; then cp -r .data/yolov5 $g/yolov5; else echo "[bundle] WARNING: no .data/yolov5 (ultralytics v7.0 copy): the PyTorch peer will not run"; fi
    ;;
  v8)       # YOLOv8n / YOLO11n; the whole set (~180 MiB) takes three calls, V8_SET says which:
            #   static (default): static exports, bus / zidane references, the benchmark's peer (~52 MiB)
            #   dynamic: dynamic exports and the batch-4 references (engine raw outputs, b1 and b4)
            #   detector: static + dynamic exports, coco128 and its references (the detector tests)
            #   trained: with YOLOCU_V8_DIR=.data/v8/trained (trained weights compress less), the static
            #            exports, coco128's references and ultralytics' val mAP of both models:
            #            TEST_FILTER='V8Trained*:Exports/V8Detector.Coco128*' run_all.sh v8
            #   bench: the exports of V8_MODELS and the peer, bench_cuda_engine alone (no CLI, no
            #          references): an s model's call (V8_MODELS=yolov8s; run_all.sh v8 with SKIP_TESTS=1)
            #   e2e: the exports, the CLI, bus.jpg and coco128's images: run_all.sh v8 with V8_E2E=1
            #        SKIP_TESTS=1 SKIP_BENCH=1 (fits beside the decode part: bundle.sh decode,v8)
    v8=${YOLOCU_V8_DIR:-$root/.data/v8/refs}
    [ -f "$v8/COMPLETE" ] || { echo "[bundle] no YOLOv8 references in $v8: run scripts/v8/make_refs.sh first" >&2; exit 1; }
    mkdir -p $g/data/v8
    cp "$v8/COMPLETE" $g/data/v8/
    slim_v8() {  # slim_v8 <npz> <keys...>: a compressed copy holding only these arrays
      local f=$1; shift
      "$root/.venv/bin/python" -c "import sys, numpy as np; d = np.load(sys.argv[1]); np.savez_compressed(sys.argv[2], **{k: d[k] for k in sys.argv[3:]})" \
        "$v8/$f" "$g/data/v8/$f" "$@"
    }
    set_=${V8_SET:-static}
    for n in ${V8_MODELS:-yolov8n yolo11n}; do  # V8_MODELS="yolov8n": one model (detector: one call each)
      case "$set_" in
        dynamic)  # (the exports xz-compressed: 19% smaller, run_all.sh unpacks them)
          xz -T2 -6 -c "$v8/${n}_dyn.onnx" >"$g/data/v8/${n}_dyn.onnx.xz"
          slim_v8 "${n}_batch4.npz" input output
          slim_v8 "${n}_bus.npz" input output ;;
        detector)  # (with trained weights' references, make_refs.sh's YOLOCU_V8_WEIGHTS: their val mAP too)
          cp "$v8/${n}_coco128.npz" $g/data/v8/
          if [ -f "$v8/${n}_val.json" ]; then cp "$v8/${n}_val.json" $g/data/v8/; fi
          for f in "$n.onnx" "${n}_dyn.onnx"; do xz -T2 -6 -c "$v8/$f" >"$g/data/v8/$f.xz"; done
          for im in bus zidane; do slim_v8 "${n}_$im.npz" letterboxed_bgr input output detect detect_low val; done ;;
        trained)
          cp "$v8/${n}_coco128.npz" "$v8/${n}_val.json" $g/data/v8/
          xz -T2 -6 -c "$v8/$n.onnx" >"$g/data/v8/$n.onnx.xz" ;;
        bench | e2e)  # the benchmark alone (no references): room for an s model (V8_MODELS=yolov8s)
          xz -T2 -6 -c "$v8/$n.onnx" >"$g/data/v8/$n.onnx.xz" ;;
        *)  # (xz as above: with the references and the peer the static set is near a call's 64 MiB)
          xz -T2 -6 -c "$v8/$n.onnx" >"$g/data/v8/$n.onnx.xz"
          # (with V8_ALSO bus.jpg alone: zidane's detector cases skip, the second model fits)
          ims="bus zidane"
          [ -n "${V8_ALSO:-}" ] && ims=bus
          for im in $ims; do slim_v8 "${n}_$im.npz" input output detect detect_low val; done ;;
      esac
    done
    # V8_ALSO="yolov8n" (static set): these models' exports and bus.jpg's references only (raw
    # outputs and detections), enough for the engine's tests, the detector's bus case and the
    # benchmark, so that a second model fits the same call
    if [ "$set_" = static ]; then
      for n in ${V8_ALSO:-}; do
        xz -T2 -6 -c "$v8/$n.onnx" >"$g/data/v8/$n.onnx.xz"
        slim_v8 "${n}_bus.npz" input output detect detect_low val
      done
    fi
    { [ "$set_" = detector ] || [ "$set_" = trained ]; } && copy coco128
    [ "$set_" = e2e ] && copy images && copy coco128/images
    [ "$set_" = dynamic ] || [ "$set_" = bench ] || [ "$set_" = e2e ] || { mkdir -p $g/data/images && cp "$data/images/bus.jpg" "$data/images/zidane.jpg" $g/data/images/; }
    # the peer (bench/peer_torch_forward_v8.py): the pinned ultralytics package of make_refs.sh's venv
    ulx=$(ls -d "${YOLOCU_V8_VENV:-$root/.data/v8/venv}"/lib/python3*/site-packages/ultralytics 2>/dev/null | head -1)
    if [ "$set_" != static ] && [ "$set_" != bench ]; then
      :
    elif [ -n "$ulx" ]; then
      mkdir -p $g/ultralytics && cp -r "$ulx" $g/ultralytics/
      find $g/ultralytics -name __pycache__ -prune -exec rm -rf {} +
    else
      echo "[bundle] WARNING: no ultralytics package in the v8 venv: the v8 peer will not run"
    fi
    ;;
  detector | decode) # the GPU detector end to end: bus/zidane, coco128, threads, soak; nvJPEG
    copy models/yolov5n.onnx; copy images; copy coco.names; copy coco128
    [ "$part" = detector ] && copy models/yolov5n_raw_heads.onnx  # (the decode tests do not read it)
    slim_npz bus letterboxed_bgr input detect val; slim_npz zidane letterboxed_bgr input detect val
    ;;
  bench)    # benchmarks against their peers
    copy models/yolov5n.onnx; copy models/yolov5s_random_fp16.onnx; copy models/yolov5n.pt
    copy reference/bus.npz; slim_npz zidane output; copy images; copy coco.names
    if [ -d .data/yolov5 ]; then cp -r .data/yolov5 $g/yolov5; else echo "[bundle] WARNING: no .data/yolov5 (ultralytics v7.0 copy): the peers will not run"; fi
    ;;
  int8)     # the INT8 convolution (random data); the INT8 engine against simulated INT8 (yolov5n,
            # calibrated on coco128's first image), coco128 for `yolocu eval --precision int8`
    copy models/yolov5n.onnx; slim_npz bus input; slim_npz zidane input; copy coco128; copy coco.names
    mkdir -p $g/data/images && cp "$data/images/bus.jpg" $g/data/images/
    # an already quantised export in yolocu's scheme (ONNX Runtime's quantize_static, symmetric, the
    # convolutions alone): the GPU imports its scales (docs/int8.md)
    if "$root/.venv/bin/python" tests/python/make_qdq_model.py "$data/models/yolov5n.onnx" "$data/coco128/images/train2017" \
        "$g/qdq" 8 symmetric-conv >/dev/null 2>&1; then
      mkdir -p $g/data/qdq && mv "$g/qdq/model_qdq.onnx" $g/data/qdq/yolov5n_qdq.onnx
    else
      echo "[bundle] WARNING: no QDQ export (tests/python/make_qdq_model.py failed): the QDQ eval will not run"
    fi
    rm -rf "$g/qdq"
    # the calibrations INT8_EVAL=bundled and INT8_PROFILE=bundled read (INT8_CALIBRATE=0: none), made
    # with the defaults by the CLI just built: yolov5n on coco128's 128 images, yolov5s (random
    # weights) on the first 32
    if [ "${INT8_CALIBRATE:-1}" = 1 ]; then
      copy models/yolov5s_random_fp16.onnx
      mkdir -p "$g/cal"
      for spec in yolov5n:128 yolov5s_random_fp16:32; do
        m=${spec%%:*}
        echo "[bundle] calibrating $m on ${spec#*:} coco128 images"
        "$bdir/apps/yolocu/yolocu" calibrate --model "$data/models/$m.onnx" --images "$data/coco128/images/train2017" \
          --max-images "${spec#*:}" -o "$g/cal/$m.int8.json" >"$g/cal/$m.log" 2>&1 ||
          { echo "[bundle] calibrating $m failed:" >&2; tail -5 "$g/cal/$m.log" >&2; exit 1; }
      done
    fi
    ;;
  fuzz)     # the onnx corpus: seeds, past crashes, and what the fuzzer grew here (largest files last out)
    mkdir -p $g/fuzz-onnx
    { find fuzz/corpus/onnx fuzz/regressions/onnx -type f ! -name '.*'; if [ -d build-fuzz/corpus/onnx ]; then find build-fuzz/corpus/onnx -type f; fi; if [ -d build-fuzz/derived-seeds/onnx ]; then find build-fuzz/derived-seeds/onnx -type f; fi; } |
      xargs -r ls -S -r | awk -v cap=$((48 << 20)) '{ cmd = "stat -c %s " $0; cmd | getline s; close(cmd); if (t + s <= cap) { t += s; print } }' |
      while read -r f; do cp "$f" "$g/fuzz-onnx/$(echo "$f" | tr / _)"; done
    echo "[bundle] fuzz corpus: $(ls $g/fuzz-onnx | wc -l) models, $(du -sh $g/fuzz-onnx | cut -f1)"
    ;;
  train)
    # training.sh/train_bench.sh read .data/yolov5 (a v7.0 copy) and .data/coco128; wheels in .whl
    [ -d .data/coco128 ] || { mkdir -p .data; cp -r "$data/coco128" .data/coco128; }
    [ -d .data/yolov5 ] || echo "[bundle] WARNING: no .data/yolov5 (ultralytics v7.0 copy): see docs/training.md"
    ;;
  *) echo "unknown part $part" >&2; exit 2 ;;
esac
done
find $g/data -name '*.slim' -delete
echo "$parts" > $g/PART
git rev-parse --short HEAD > $g/COMMIT
git diff --quiet HEAD 2>/dev/null || echo "$(cat $g/COMMIT)+uncommitted" > $g/COMMIT
# xz -9: its 64 MiB window spans several binaries, which share most of their code (the engine
# bundle: 18.5 instead of 24.8 MB at xz's default level).
tar -C $g -cf - bin lib | xz -9 -T2 >$g/bundle.tar.xz
rm -rf $g/bin $g/lib
du -sh $g; du -sh $g/* | sort -h
# What the device call will carry: this folder plus the working tree (tracked files and untracked
# ones git does not ignore); over 64 MiB the call is refused before it starts.
carry_kib=$(( $(du -sk "$g" | cut -f1) + $( { git ls-files -z; git ls-files -z --others --exclude-standard; } | du -ck --files0-from=- 2>/dev/null | tail -1 | cut -f1) ))
if [ "$carry_kib" -gt $((64 * 1024)) ]; then
  echo "[bundle] WARNING: $g with the working tree is $((carry_kib / 1024)) MiB, over a call's 64 MiB: carry fewer parts" >&2
else
  echo "[bundle] carry with the working tree: $((carry_kib / 1024)) MiB of 64"
fi
