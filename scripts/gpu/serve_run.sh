#!/usr/bin/env bash
# THE GPU-machine run of the serving measurement (docs/serving.md, docs/performance.md section 8).
# Needs .gpu-serve/bundle.tar.xz from scripts/gpu/serve_bundle.sh (carry [".gpu-serve"]). Builds the
# extension against this machine's Python, runs the GPU Python tests, then bench/serve_throughput.py.
# Logs and the table under $OUT (or ./gpu-out); the table is printed last.
#   bash scripts/gpu/serve_run.sh [extra bench/serve_throughput.py options]
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
g=/tmp/yolocu-serve
rm -rf "$g" && mkdir -p "$g" && tar -C "$g" -xJf .gpu-serve/bundle.tar.xz || { echo "no bundle: run scripts/gpu/serve_bundle.sh first"; exit 1; }
echo "bundle of commit $(cat "$g/COMMIT"); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $(nvidia-smi -L | wc -l) GPU(s)"
py=${PYTHON:-python3}
cudnn=$(find / -name 'libcudnn.so.9*' -not -path '/proc/*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$g/lib:$(dirname "$cudnn"):${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

export PYTHONPATH=$g/site${PYTHONPATH:+:$PYTHONPATH}  # carried wheels first (nanobind 2.9.2, NumPy 1.26, PyTriton)
echo "== build the extension ($($py --version), cuDNN $cudnn)"
cmake -S scripts/gpu/serve_ext -B "$g/build" -G Ninja -DYOLOCU_REPO="$root" -DPREBUILT="$g/lib" \
  -DCUDNN_LIBRARY="$cudnn" -DPython_EXECUTABLE="$(command -v "$py")" >"$out/ext_build.log" 2>&1 &&
  cmake --build "$g/build" >>"$out/ext_build.log" 2>&1 || { tail -40 "$out/ext_build.log"; exit 1; }
cp -r python/yolocu "$g/site/"
cp "$g"/build/_yolocu*.so "$g/site/yolocu/"
mkdir -p "$g/site/yolocu/bin" && cp "$g/bin/yolocu" "$g/site/yolocu/bin/"
export YOLOCU_DATA_DIR=$g/data PYTHONUNBUFFERED=1
$py -c "import yolocu, numpy; print('yolocu', yolocu.__version__, 'cuda build', yolocu.with_cuda, 'gpu usable', yolocu.cuda_available(), 'numpy', numpy.__version__)"

echo "== PyTriton preflight (its Python-backend stub embeds libpython3.12)"
$py -c "import sysconfig as s; print('LIBDIR', s.get_config_var('LIBDIR'), 'LDLIBRARY', s.get_config_var('LDLIBRARY'))"
ldconfig -p | grep -E 'libpython3\.12' || {
  lp=$(find / -name 'libpython3.12.so.1.0' -not -path '/proc/*' 2>/dev/null | head -1)
  echo "no libpython3.12 in ldconfig's cache; found: ${lp:-none}"
  [ -n "$lp" ] && export LD_LIBRARY_PATH=$(dirname "$lp"):$LD_LIBRARY_PATH
}
ldd "$g/site/pytriton/tritonserver/python_backend_stubs/3.12/triton_python_backend_stub" | grep -E 'not found|python' || true

echo "== GPU Python tests"
$py -m pytest -q -rs -p no:cacheprovider tests/pytest/test_api.py -k "gpu or readme or paths_match or bad_inputs" 2>&1 | tee "$out/pytest_gpu.log" | tail -15

echo "== serving throughput"
gpus=$(nvidia-smi -L | wc -l)
extra=()
[ "$gpus" -ge 2 ] && extra=(--gpus 0 1)
timeout 420 $py bench/serve_throughput.py --model "$g/data/models/yolov5n.onnx" --image "$g/data/images/bus.jpg" \
  --device cuda --precision fp16 --batch 8 --clients 8 32 --instances 1 2 --requests 3000 --max-seconds 40 \
  "${extra[@]}" --json "$out/serve_throughput.json" "$@" 2>"$out/serve_throughput.log" | tee "$out/serve_throughput.md"
tail -5 "$out/serve_throughput.log"
