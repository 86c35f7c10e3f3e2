#!/usr/bin/env bash
# Installs what yolocu needs to build and test on a Debian 12 machine (run as root or with sudo):
# Debian packages for the build, and a project-local Python virtual environment (.venv) holding the
# peers the tests compare against (ONNX Runtime, NumPy) and the GPU engine's header-only libraries.
#
#   scripts/setup.sh            install only
#   scripts/setup.sh --run      install, build (Release) and run detection on the sample images
#   scripts/setup.sh --cuda     also what the GPU parts need: when this machine has no CUDA toolkit,
#                               CUDA 13.0 and cuDNN 9 from PyPI into .venv (scripts/requirements-cuda.txt),
#                               which CMake then uses (.venv/cuda, .venv/cudnn). Combines with --run.
#
# Environment: YOLOCU_DATA_DIR (the sample data, default ../shared/data), JOBS (build jobs, default nproc),
# PYTHON (the interpreter for .venv, default python3).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

run=0 cuda=0
for a in "$@"; do
  case "$a" in
    --run) run=1 ;;
    --cuda) cuda=1 ;;
    -h|--help) sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "scripts/setup.sh: unknown option '$a' (see scripts/setup.sh --help)" >&2; exit 2 ;;
  esac
done

# --run detects objects in the sample images with the sample model: say what is missing before
# installing and building anything, and how to get it.
data=${YOLOCU_DATA_DIR:-$root/../shared/data}
if ((run)); then
  missing_data=()
  for f in models/yolov5n.onnx images/bus.jpg images/zidane.jpg; do
    [ -r "$data/$f" ] || missing_data+=("$f")
  done
  if ((${#missing_data[@]})); then
    cat >&2 <<EOF
[setup] --run needs the sample model and images, and they are not in $data:
          missing: ${missing_data[*]}
        The data folder is ../shared/data beside this clone, or the folder YOLOCU_DATA_DIR names. To make one:
          - models/yolov5n.onnx: export it with ultralytics/yolov5 v7.0
              git clone -b v7.0 https://github.com/ultralytics/yolov5 && cd yolov5
              pip install -r requirements.txt onnx && python export.py --weights yolov5n.pt --include onnx
          - images/bus.jpg, images/zidane.jpg: yolov5's data/images/ has both
        then: YOLOCU_DATA_DIR=/path/to/that/folder scripts/setup.sh --run
        (scripts/setup.sh without --run installs and needs no data; tests that need it skip visibly.)
EOF
    exit 1
  fi
fi

apt_packages=(
  build-essential cmake ninja-build pkg-config ccache
  protobuf-compiler libprotobuf-dev libonnx-dev   # ONNX schema (onnx.proto) + protobuf runtime
  libdnnl-dev                                       # oneDNN: CPU convolutions
  ocl-icd-opencl-dev opencl-headers                 # Debian's dnnl-config.cmake: find_package(OpenCL REQUIRED)
  nlohmann-json3-dev                                # the GPU engine's tactic cache (JSON)
  libjpeg62-turbo-dev libturbojpeg0-dev libpng-dev zlib1g-dev   # image codecs, .npz
  libwebp-dev libtiff-dev                           # WebP and TIFF images
  libyaml-dev                                       # yolocu eval --data (ultralytics dataset files)
  libssl-dev                                        # SHA-256 (libcrypto): the INT8 calibration file
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev    # video input/output (FFmpeg 5.1; YOLOCU_VIDEO)
  libavdevice-dev                                   # video: V4L2 cameras (/dev/videoN)
  libffmpeg-nvenc-dev                               # video, CUDA builds: the ffnvcodec headers (NVDEC's own API)
  ffmpeg                                            # tests only: encodes the test clips (scripts/video/make_refs.sh)
  libgtest-dev libgmock-dev libbenchmark-dev       # tests and benchmarks
  clang libclang-rt-dev libomp-dev                  # scripts/fuzz.sh (libFuzzer, ASan/UBSan), scripts/tsan.sh (TSan, LLVM OpenMP)
  libopencv-dev                                     # tests only: OpenCV 4.6 as the letterbox oracle
  python3-torchvision python3-numpy                 # tests only: torchvision NMS as the NMS oracle
  python3-opencv                                    # bench/peer_torch_cpu.py: ultralytics on PyTorch-CPU
  python3-yaml python3-pil python3-requests python3-psutil   # scripts/v8/make_refs.sh: the ultralytics package's deps
  python3-venv ca-certificates                      # .venv and pip over HTTPS
  python3-dev                                       # the Python package's extension (nanobind) needs the headers
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$py" -m venv .venv
fi
pip_install() {  # <requirements file>: once per content of the file
  local stamp=.venv/.yolocu-$(basename "$1")
  if ! cmp -s "$1" "$stamp" 2>/dev/null; then
    echo "[setup] installing Python packages into .venv ($1)"
    .venv/bin/python -m pip install -q --disable-pip-version-check -r "$1"
    cp "$1" "$stamp"
  fi
}
pip_install scripts/requirements.txt

if ((cuda)); then
  system_nvcc=${CUDACXX:-$(command -v nvcc || true)}
  [ -n "$system_nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && system_nvcc=/usr/local/cuda/bin/nvcc; }
  if [ -n "$system_nvcc" ]; then
    echo "[setup] --cuda: using this machine's CUDA toolkit ($system_nvcc)"
    scripts/nvjpeg.sh "$system_nvcc"  # nvJPEG beside it when the toolkit lacks it (.venv/nvjpeg)
  else
    pip_install scripts/requirements-cuda.txt
    # The wheels hold the toolkit as one tree (nvidia/cu13: bin/nvcc, include, lib, nvvm) and cuDNN
    # beside it (nvidia/cudnn), with versioned libraries only: add the libX.so links the linker looks
    # for, lib64 (where nvcc.profile sends the linker), and fixed paths for CMake.
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    [ -e "$site/nvidia/cu13/lib64" ] || ln -s lib "$site/nvidia/cu13/lib64"
    for d in "$site/nvidia/cu13/lib" "$site/nvidia/cudnn/lib"; do
      for f in "$d"/lib*.so.*; do
        link=${f%%.so.*}.so
        [ -e "$link" ] || ln -s "$(basename "$f")" "$link"
      done
    done
    ln -sfn "${site#"$root/.venv/"}/nvidia/cu13" .venv/cuda
    ln -sfn "${site#"$root/.venv/"}/nvidia/cudnn" .venv/cudnn
    "$root/.venv/cuda/bin/nvcc" --version | tail -1 | sed 's/^/[setup] --cuda: .venv\/cuda: /'
  fi
fi
# .venv-serve: `yolocu serve` and its tests: the tritonserver of the nvidia-pytriton wheel (which pins
# NumPy < 2; .venv keeps NumPy 2) and tritonclient.
if [ ! -x .venv-serve/bin/python ]; then
  echo "[setup] creating .venv-serve"
  "$py" -m venv .venv-serve
fi
stamp=.venv-serve/.yolocu-requirements
if ! cmp -s scripts/requirements-serve.txt "$stamp" 2>/dev/null; then
  echo "[setup] installing Python packages into .venv-serve (scripts/requirements-serve.txt)"
  .venv-serve/bin/python -m pip install -q --disable-pip-version-check -r scripts/requirements-serve.txt
  cp scripts/requirements-serve.txt "$stamp"
fi

if ((run)); then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DYOLOCU_DATA_DIR="$data"
  cmake --build build -j "${JOBS:-$(nproc)}"
  exec scripts/demo.sh build "$data"
fi
echo "[setup] done"
