#!/usr/bin/env bash
# Prepares the GPU serving measurement without a GPU here (docs/serving.md): builds libyolocu and
# the CLI with CUDA for sm_90 into build-gpu-py/, downloads the Python 3.12 wheels the GPU machine
# lacks (PyTriton, NumPy 1.26 which PyTriton needs, tritonclient and their missing dependencies),
# and packs into .gpu-serve/bundle.tar.xz (git-ignored): the static libraries, the non-system
# shared libraries they load (found with ldd), the CLI, the unpacked wheels and the test material.
# Then, one call of the device tool with carry [".gpu-serve"]:  bash scripts/gpu/serve_run.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
data=${YOLOCU_DATA_DIR:-$root/../shared/data}
arch=${CUDA_ARCH:-90}
jobs=${JOBS:-2}

# YOLOCU_VIDEO=OFF: FFmpeg's libraries and their dependencies (~280 MB through ldd) would not fit a
# call's 64 MiB, and the GPU machine has none; the GPU video run (docs/video.md) carries its own.
cmake -S . -B build-gpu-py -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" -DYOLOCU_CUDA=ON -DYOLOCU_VIDEO=OFF \
  -DYOLOCU_BUILD_TESTS=OFF -DYOLOCU_BUILD_BENCH=OFF -DYOLOCU_WERROR=OFF -DYOLOCU_DATA_DIR="$data" >/dev/null
cmake --build build-gpu-py -j "$jobs" --target yolocu yolocu_cli

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib" "$stage/bin" "$stage/site" "$stage/data/models" "$stage/data/images" "$stage/wheels"
cp build-gpu-py/src/libyolocu.a build-gpu-py/src/libyolocu_proto.a "$stage/lib/"
cp build-gpu-py/apps/yolocu/yolocu "$stage/bin/"
strip --strip-debug "$stage/lib/"*.a "$stage/bin/yolocu" 2>/dev/null || true
# Shared libraries that are neither glibc, libstdc++/libgcc/libgomp, nor CUDA / cuDNN (those are there).
ldd "$stage/bin/yolocu" | awk '$3 ~ /^\// {print $3}' |
  grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libgomp|ld-linux[^/]*|libcuda|libcudart|libcudnn[^/]*|libcublas[^/]*|libnvrtc[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done

# Python 3.12 wheels the GPU machine does not have (it has grpcio, protobuf, typer, wrapt,
# typing-inspect, urllib3, certifi, zipp, psutil, pytest): unpacked = what
# `pip install --target` would put there.
"$root/.venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp \
  --platform manylinux_2_35_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d "$stage/wheels" nvidia-pytriton==0.7.0 numpy==1.26.4 tritonclient==2.73.0 pyzmq==27.3.0 sh==2.4.0 \
  importlib_metadata==10.2.0 python-rapidjson==1.25 \
  gevent==26.9.0 geventhttpclient==2.6.1 greenlet==3.3.2 zope.event==6.2 zope.interface==8.7 brotli==1.2.1 \
  nanobind==2.9.2  # nanobind: the version the binding is built with here (the GPU machine's own may differ)
for w in "$stage"/wheels/*.whl; do unzip -q -o "$w" -d "$stage/site"; done
rm -rf "$stage/wheels"
# Only the Python-backend stub of Python 3.12 is needed there.
for v in 3.8 3.9 3.10 3.11 3.13; do rm -rf "$stage/site/pytriton/tritonserver/python_backend_stubs/$v"; done
rm -f "$stage"/site/nvidia_pytriton.libs/libpython3-*.13.so*  # libpython3.13: only the 3.13 stub loads it
rm -rf "$stage"/site/numpy/tests "$stage"/site/numpy/*/tests "$stage"/site/numpy/*/*/tests  # NumPy's own test suite

cp "$data/models/yolov5n.onnx" "$stage/data/models/"  # the one model there (a second would not fit)
cp "$data/images/bus.jpg" "$data/images/zidane.jpg" "$stage/data/images/"
git rev-parse --short HEAD >"$stage/COMMIT"

rm -rf .gpu-serve && mkdir -p .gpu-serve
tar -C "$stage" -cf - . | xz -6 -T"$jobs" >.gpu-serve/bundle.tar.xz
size=$(stat -c %s .gpu-serve/bundle.tar.xz)
echo "[serve_bundle] .gpu-serve/bundle.tar.xz: $((size / 1048576)) MiB (the device call carries at most 64 MiB with the tree)"
