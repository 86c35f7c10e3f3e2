#!/usr/bin/env bash
# THE GPU-machine run of the serving measurement (docs/serving.md, docs/performance.md section 8).
# Needs .gpu-serve/bundle.tar.xz from scripts/gpu/serve_bundle.sh (carry [".gpu-serve"]). Builds the
# extension against this machine's Python, runs the GPU Python tests, then bench/serve_throughput.py.
# Logs and the table under $OUT (or ./gpu-out); the table is printed last.
#   bash scripts/gpu/serve_run.sh [extra bench/serve_throughput.py options]
# Environment: SERVE_MODES="raw bytes" (a table per request mode), SKIP_TESTS=1, SKIP_PROBE=1,
# PY_FROM_JPEG=1 (the Python API from JPEG bytes, graphs vs eager), SKIP_SERVE_BENCH=1,
# SERVE_GRAPHS="on off" (each table also with the server's engine launched eagerly).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
g=/tmp/yolocu-serve
rm -rf "$g" && mkdir -p "$g" && tar -C "$g" -xJf .gpu-serve/bundle.tar.xz || { echo "no bundle: run scripts/gpu/serve_bundle.sh first"; exit 1; }
# PyTriton and Triton's Python backend pass every tensor through /dev/shm: its size is part of the record
echo "/dev/shm: $(df -h /dev/shm | tail -1 | awk '{print $2 " total, " $4 " free"}')"
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
# PyTriton finds tritonserver's libraries beside its package only in a site-packages folder (else it
# takes the layout of a source checkout): give the carried folder that layout too.
[ -d "$g/site/nvidia_pytriton.libs" ] && ln -sfn ../../nvidia_pytriton.libs "$g/site/pytriton/tritonserver/external_libs"
export YOLOCU_DATA_DIR=$g/data PYTHONUNBUFFERED=1
# Triton's Python-backend stub (an embedded interpreter) did not see PYTHONPATH's folder: the model
# failed to load with "No module named 'zmq'" (H100, 47f9194). A .pth file in this interpreter's
# user and system site folders names the carried one for every interpreter of this prefix.
for site_dir in $($py -c "import site; print(site.getusersitepackages()); print(*site.getsitepackages())"); do
  mkdir -p "$site_dir" 2>/dev/null && echo "import sys; sys.path.insert(0, '$g/site')" >"$site_dir/yolocu-gpu-run.pth" 2>/dev/null && echo "site folder: $site_dir"
done
# The carried folder goes FIRST (a .pth "import" line): a plain .pth line appends it, so the stub took
# this machine's own NumPy (2.x, the torch environment's) instead of the carried 1.26 its
# triton_python_backend_utils expects, and every tensor between Triton and PyTriton's proxy arrived
# empty or as garbage (H100, b95f78e: empty outputs, a BYTES length prefix of 0x0E0E0E0E).
echo "NumPy as an interpreter without PYTHONPATH sees it (Triton's Python-backend stub): $(env -u PYTHONPATH $py -c 'import numpy; print(numpy.__version__, numpy.__file__)')"
$py -c "import yolocu, numpy; print('yolocu', yolocu.__version__, 'cuda build', yolocu.with_cuda, 'gpu usable', yolocu.cuda_available(), 'numpy', numpy.__version__)"

echo "== PyTriton preflight (its Python-backend stub embeds libpython3.12)"
$py -c "import sysconfig as s; print('LIBDIR', s.get_config_var('LIBDIR'), 'LDLIBRARY', s.get_config_var('LDLIBRARY'))"
ldconfig -p | grep -E 'libpython3\.12' || {
  lp=$(find / -name 'libpython3.12.so.1.0' -not -path '/proc/*' 2>/dev/null | head -1)
  echo "no libpython3.12 in ldconfig's cache; found: ${lp:-none}"
  [ -n "$lp" ] && export LD_LIBRARY_PATH=$(dirname "$lp"):$LD_LIBRARY_PATH
}
ldd "$g/site/pytriton/tritonserver/python_backend_stubs/3.12/triton_python_backend_stub" | grep -E 'not found|python' || true

if [ "${SERVE_DIAG:-0}" = 1 ]; then  # SERVE_DIAG=1: why a GPU Detector fails in Python, then stop
  echo "== diagnosis: a GPU Detector from Python"
  ldd "$g"/site/yolocu/_yolocu*.so | tee "$out/ext_ldd.txt" | grep -E 'not found|cudnn|cudart|nvjpeg|dnnl|gomp|protobuf'
  snippet="import yolocu; d = yolocu.Detector('$g/data/models/yolov5n.onnx', device='cuda', precision='fp32'); print('created', d.device)"
  $py -X faulthandler -c "import yolocu; d = yolocu.Detector('$g/data/models/yolov5n.onnx', device='cpu'); print('cpu created', d.device)" 2>&1 | tail -5
  # no gdb there: a preloaded SIGSEGV handler prints the native stack (offsets resolved with addr2line)
  cat >"$g/segv.c" <<'C'
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
static void on_segv(int sig, siginfo_t* si, void* ctx) {
  ucontext_t* uc = (ucontext_t*)ctx;
  unsigned long rip = uc->uc_mcontext.gregs[REG_RIP], rsp = uc->uc_mcontext.gregs[REG_RSP];
  char b[512];
  int n = snprintf(b, sizeof b, "SEGV native: tid %ld addr %p rip 0x%lx rsp 0x%lx\n", (long)syscall(SYS_gettid), si->si_addr, rip, rsp);
  write(2, b, n);
  for (int i = 0; i < 24; ++i) {  // words on the stack: return addresses among them
    n = snprintf(b, sizeof b, "stack[%d] 0x%lx\n", i, ((unsigned long*)rsp)[i]);
    write(2, b, n);
  }
  void* f[64];
  backtrace_symbols_fd(f, backtrace(f, 64), 2);
  int m = open("/proc/self/maps", O_RDONLY);
  ssize_t r;
  while ((r = read(m, b, sizeof b)) > 0) write(2, b, r);
  (void)sig;
  _exit(139);
}
__attribute__((constructor)) static void install(void) {
  static char alt[1 << 16];
  stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
  sigaltstack(&ss, 0);
  struct sigaction sa = {0};
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &sa, 0);
}
C
  cc -shared -fPIC -o "$g/segv.so" "$g/segv.c" && echo "segv handler built"
  LD_PRELOAD=$g/segv.so timeout 240 $py -c "import faulthandler; faulthandler.disable(); $snippet" >"$out/segv.log" 2>&1
  echo "rc=$?"; grep -A30 'SEGV native' "$out/segv.log" | grep -v '^[0-9a-f]*-[0-9a-f]* ' | head -32
  # each stack word and the rip that falls in a mapped file: file + offset, and addr2line for ours
  $py - "$out/segv.log" <<'PY'
import re, subprocess, sys
t = open(sys.argv[1]).read()
maps = [(int(a, 16), int(b, 16), int(off, 16), path) for a, b, off, path in
        re.findall(r'^([0-9a-f]+)-([0-9a-f]+) r.x. ([0-9a-f]+) \S+ \d+\s+(/\S+)$', t, re.M)]
words = [int(w, 16) for w in re.findall(r'(?:rip|stack\[\d+\]) (0x[0-9a-f]+)', t)]
for w in words:
    for a, b, off, path in maps:
        if a <= w < b:
            o = w - a + off
            line = f"0x{w:x} {path}+0x{o:x}"
            if "yolocu" in path or "cudnn" in path:
                try:
                    line += "  " + subprocess.run(["addr2line", "-f", "-C", "-e", path, hex(o)], capture_output=True, text=True, timeout=20).stdout.replace("\n", " ")
                except Exception as e:
                    line += f"  ({e})"
            print(line)
PY
  $py -c "import yolocu, inspect; print(inspect.signature(yolocu.Detector.__init__))"
  "$g/bin/yolocu" detect --model "$g/data/models/yolov5n.onnx" --device cuda --precision fp32 "$g/data/images/bus.jpg" 2>&1 | tail -3
  timeout 200 compute-sanitizer --tool memcheck $py -c "$snippet" >"$out/san_py.log" 2>&1
  grep -E 'Program hit|Invalid|ERROR SUMMARY|created|Host Frame' "$out/san_py.log" | head -30
  exit 0
fi
# Preflight: one GPU Detector from Python in a child process (a crash here would take every test and
# the server down). If it fails, variants name the cause: the module imported RTLD_GLOBAL; libcudart
# preloaded (global scope).
echo "== preflight: a GPU Detector from Python"
snip="import yolocu; d = yolocu.Detector('$g/data/models/yolov5n.onnx', device='cuda', precision='fp16', batch=1); print('created', d.device)"
cudart=$($py -c "import yolocu._yolocu as m; print(m.__file__)" 2>/dev/null | xargs -r ldd | awk '/libcudart\.so/ {print $3}')
pre_ok() { timeout 120 env "$@" >"$out/preflight.log" 2>&1 && grep -q created "$out/preflight.log"; }
if pre_ok $py -c "$snip"; then echo "preflight: plain import works"
else
  echo "preflight: plain import FAILS: $(tail -3 "$out/preflight.log" | tr '\n' ' ')"
  LD_DEBUG=libs timeout 120 $py -c "$snip" 2>&1 | grep -iE 'cudart|cudnn|nvrtc|find library|cannot|error' | grep -v 'search path' | tail -25 >"$out/preflight_lddebug.log"
  head -25 "$out/preflight_lddebug.log"
  if pre_ok $py -c "import os, sys; sys.setdlopenflags(os.RTLD_NOW | os.RTLD_GLOBAL); $snip"; then
    echo "preflight: WORKS with the module imported RTLD_GLOBAL (yolocu/__init__.py should do that)"
  elif [ -n "$cudart" ] && pre_ok LD_PRELOAD="$cudart" $py -c "$snip"; then
    echo "preflight: WORKS with LD_PRELOAD=$cudart (libcudart global), not with RTLD_GLOBAL"
  else echo "preflight: no variant works"; fi
fi
echo "== GPU Python tests"
[ "${SKIP_TESTS:-0}" = 1 ] && echo "skipped (SKIP_TESTS=1)" ||
timeout 180 $py -m pytest -q -rs -p no:cacheprovider tests/pytest/test_api.py -k "gpu or readme or paths_match or bad_inputs" 2>&1 | tee "$out/pytest_gpu.log" | tail -15

# PY_FROM_JPEG=1: the Python API on JPEG bytes with nvJPEG, CUDA graphs against eager launches
# (bench/python_from_jpeg.py: engine_graphs's default beside decode="gpu")
if [ "${PY_FROM_JPEG:-0}" = 1 ]; then
  echo "== Python API from JPEG bytes (nvJPEG): graphs vs eager"
  timeout 300 $py bench/python_from_jpeg.py --model "$g/data/models/yolov5n.onnx" \
    --images "$g/data/images/bus.jpg" "$g/data/images/zidane.jpg" >"$out/python_from_jpeg.log" 2>&1 ||
    echo "FAIL  python_from_jpeg (rc $?)"
  cat "$out/python_from_jpeg.log" | tail -8
fi
# SKIP_SERVE_BENCH=1: no Triton throughput table
[ "${SKIP_SERVE_BENCH:-0}" = 1 ] && exit 0
echo "== serving throughput"
gpus=$(nvidia-smi -L | wc -l)
extra=()
[ "$gpus" -ge 2 ] && extra=(--gpus 0 1)
# SERVE_MODES="raw bytes": one table per request mode (raw pixels, then JPEG bytes decoded in the server)
# SERVE_GRAPHS="on off": each table also with the server's engine launched eagerly (--no-engine-graphs)
for mode in ${SERVE_MODES:-raw}; do
  for graphs in ${SERVE_GRAPHS:-on}; do
    sfx=$([ "$mode" = raw ] || echo "_$mode")$([ "$graphs" = on ] || echo "_eager")
    gflag=$([ "$graphs" = on ] || echo --server-no-engine-graphs)
    echo "-- mode $mode, engine graphs $graphs"
    timeout 420 $py bench/serve_throughput.py --model "$g/data/models/yolov5n.onnx" --image "$g/data/images/bus.jpg" \
      --device cuda --precision fp16 --batch 8 --clients 8 32 --instances 1 2 --requests 3000 --max-seconds 40 \
      --mode "$mode" "${extra[@]}" --json "$out/serve_throughput$sfx.json" $gflag "$@" 2>"$out/serve_throughput$sfx.log" |
      tee "$out/serve_throughput$sfx.md"
    tail -5 "$out/serve_throughput$sfx.log"
  done
done

if [ "${SKIP_PROBE:-0}" != 1 ]; then
  echo "== Triton's own ceiling: a no-op model through PyTriton (bench/serve_noop_probe.py)"
  for args in "--per-request 1" "--per-request 8 --requests 200" "--height 240 --width 320"; do
    timeout 120 $py bench/serve_noop_probe.py $args 2>>"$out/serve_noop_probe.log" | grep "no-op" | tee -a "$out/serve_throughput.md"
  done
fi
# Few files come back from a call: the logs in one archive, the tables beside it.
(cd "$out" && tar czf logs.tar.gz --remove-files $(ls | grep -v -E '\.md$|^logs\.tar\.gz$'))
