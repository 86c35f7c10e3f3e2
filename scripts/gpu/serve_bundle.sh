#!/usr/bin/env bash
# Prepares the GPU serving measurement without a GPU here (docs/serving.md): builds the Triton
# backend libtriton_yolocu.so and the CLI with CUDA for sm_90 into build-gpu/, and packs into
# .gpu-serve/bundle.tar.xz (git-ignored): the backend, the CLI, the non-system shared libraries they
# load (found with ldd), the tritonserver of the nvidia-pytriton wheel in .venv-serve with the
# libraries it loads, the tritonclient wheel (gRPC client for bench/serve_load.py), Triton's
# perf_analyzer with its libraries, yolov5n.onnx and coco128's images. Then one device call with
# carry [".gpu-serve"]:  bash scripts/gpu/serve_run.sh
# Environment: YOLOCU_DATA_DIR, CUDA_ARCH (90), JOBS (2).
# SERVE_ASAN=1: the backend built with AddressSanitizer instead (build-gpu-asan/; symbols kept, debug
# information stripped: `addr2line -f -C -e build-gpu-asan/src/triton/libtriton_yolocu.so <offset>`
# turns a report's offsets into lines) with the ASan runtime, and no perf_analyzer (the call's
# 64 MiB); serve_run.sh then starts tritonserver with the runtime preloaded, so that a heap error
# anywhere in the server process stops it with a report.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
data=${YOLOCU_DATA_DIR:-$root/../shared/data}
arch=${CUDA_ARCH:-90}
jobs=${JOBS:-2}
site=$(.venv-serve/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ -x "$site/pytriton/tritonserver/bin/tritonserver" ] || { echo "no tritonserver in .venv-serve: run scripts/setup.sh" >&2; exit 1; }

scripts/nvjpeg.sh >/dev/null  # nvJPEG beside a toolkit that lacks it (.venv/nvjpeg)
# The same build folder and flags as scripts/gpu/bundle.sh (YOLOCU_VIDEO=OFF: FFmpeg's libraries would
# not fit a call's 64 MiB, and the server needs none), so that one build serves every GPU part.
bdir=${YOLOCU_GPU_BUILD:-build-gpu}
cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" -DYOLOCU_CUDA=ON -DYOLOCU_VIDEO=OFF -DYOLOCU_CLI_OPENCV=OFF \
  -DYOLOCU_DATA_DIR="$data" >/dev/null
cmake --build "$bdir" -j "$jobs" --target triton_yolocu yolocu_cli
asan=${SERVE_ASAN:-0}
if [ "$asan" = 1 ]; then
  abdir=${YOLOCU_GPU_ASAN_BUILD:-build-gpu-asan}
  cmake -S . -B "$abdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES="$arch" -DYOLOCU_CUDA=ON \
    -DYOLOCU_VIDEO=OFF -DYOLOCU_CLI_OPENCV=OFF -DCMAKE_CXX_FLAGS="-fsanitize=address -fno-omit-frame-pointer" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address" -DYOLOCU_DATA_DIR="$data" >/dev/null
  cmake --build "$abdir" -j "$jobs" --target triton_yolocu
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" "$stage/bin" "$stage/backends/yolocu" "$stage/triton/bin" "$stage/triton/lib" \
  "$stage/data/models" "$stage/data/coco128"
cp "$bdir"/apps/yolocu/yolocu "$stage/bin/"
if [ "$asan" = 1 ]; then
  cp "$abdir"/src/triton/libtriton_yolocu.so "$stage/backends/yolocu/"
  strip --strip-debug "$stage/backends/yolocu/libtriton_yolocu.so"
  strip --strip-unneeded "$stage/bin/yolocu"
  mkdir -p "$stage/lib/asan" && cp -L "$(gcc -print-file-name=libasan.so)" "$stage/lib/asan/libasan.so.8"
else
  cp "$bdir"/src/triton/libtriton_yolocu.so "$stage/backends/yolocu/"
  strip --strip-unneeded "$stage/bin/yolocu" "$stage/backends/yolocu/libtriton_yolocu.so"
fi
# Shared libraries that are neither glibc, libstdc++/libgcc/libgomp, OpenSSL 3 (libcrypto.so.3) nor
# CUDA / cuDNN (those are there).
for f in "$stage/bin/yolocu" "$stage/backends/yolocu/libtriton_yolocu.so"; do
  ldd "$f" | awk '$3 ~ /^\// {print $3}' |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libgomp|libcrypto|libssl|libasan|ld-linux[^/]*|libcuda|libcudart|libcudnn[^/]*|libcublas[^/]*|libnvrtc[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
done
# tritonserver and the libraries of the wheel it loads (its RUNPATH names ../../../nvidia_pytriton.libs:
# serve_run.sh puts them on LD_LIBRARY_PATH instead).
cp "$site/pytriton/tritonserver/bin/tritonserver" "$stage/triton/bin/"
ldd "$site/pytriton/tritonserver/bin/tritonserver" | awk '$3 ~ /nvidia_pytriton.libs/ {print $3}' |
  while read -r lib; do cp -L "$lib" "$stage/triton/lib/"; done
# The gRPC client of bench/serve_load.py: tritonclient and python-rapidjson (the GPU machine has
# grpcio, protobuf, NumPy, ml_dtypes), Python 3.12 wheels kept as files beside the bundle.
rm -rf .gpu-serve && mkdir -p .gpu-serve/wheels
"$root/.venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .gpu-serve/wheels tritonclient==2.73.0 python-rapidjson==1.25

# Triton's own load generator, perf_analyzer: the C++ client that tritonclient's manylinux wheels
# carried (2.41.0's; today's py3-none-any wheel has none), with the two libraries it loads that the GPU machine lacks:
# libb64 (Debian's libb64-0d) and the CUDA 12 runtime (NVIDIA's nvidia-cuda-runtime-cu12 wheel).
pa=$stage/perf
[ "$asan" = 1 ] || {
mkdir -p "$pa/bin" "$pa/lib" "$stage/pa-tmp"
"$root/.venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --platform manylinux1_x86_64 --platform manylinux2014_x86_64 -d "$stage/pa-tmp" \
  tritonclient==2.41.0 nvidia-cuda-runtime-cu12==12.6.77
(cd "$stage/pa-tmp" && apt-get download -q libb64-0d >/dev/null 2>&1) || { echo "apt-get download libb64-0d failed" >&2; exit 1; }
(cd "$stage/pa-tmp" && for w in *.whl; do python3 -m zipfile -e "$w" x >/dev/null; done && dpkg-deb -x libb64-0d_*.deb deb)
cp "$stage"/pa-tmp/x/tritonclient-2.41.0.data/data/bin/perf_analyzer "$pa/bin/" && chmod +x "$pa/bin/perf_analyzer"
cp -L "$stage"/pa-tmp/x/nvidia/cuda_runtime/lib/libcudart.so.12 "$stage"/pa-tmp/deb/usr/lib/x86_64-linux-gnu/libb64.so.0d "$pa/lib/"
rm -rf "$stage/pa-tmp"
if LD_LIBRARY_PATH=$pa/lib ldd "$pa/bin/perf_analyzer" | grep "not found" >&2; then
  echo "perf_analyzer misses the libraries above" >&2
  exit 1
fi
}

cp "$data/models/yolov5n.onnx" "$stage/data/models/"
cp -r "$data/coco128/images" "$stage/data/coco128/"
git rev-parse --short HEAD >"$stage/COMMIT"

# The CLI and the backend first and side by side: they share most of their code, which xz then
# stores once (2.4 MB less than apart); the rest in any order.
(cd "$stage" && tar -cf - ./COMMIT ./bin ./backends $(ls -A | grep -v -x -E 'COMMIT|bin|backends' | sed 's|^|./|')) |
  xz -9 -T"$jobs" >.gpu-serve/bundle.tar.xz
size=$(stat -c %s .gpu-serve/bundle.tar.xz)
echo "[serve_bundle] .gpu-serve/bundle.tar.xz: $((size / 1048576)) MiB (the device call carries at most 64 MiB with the tree)"
