#!/usr/bin/env bash
# THE GPU-machine run: GPU tests, compute-sanitizer, benchmarks against their peers in the same
# run; full logs in $OUT/logs.tar.gz (or ./gpu-out), a short summary table printed last.
#
#   scripts/gpu/bundle.sh <part>          (here, no GPU needed), then on the GPU machine, carrying .gpu:
#   bash scripts/gpu/run_all.sh <part>    or several parts of one bundle in turn: tests,detector,fuzz
#
#   tests      kernel tests + compute-sanitizer
#   engine     GPU engine tests + compute-sanitizer; the engine against PyTorch
#   v8         YOLOv8n / YOLO11n through the GPU engine; against ultralytics in PyTorch
#   detector   GPU detector tests (+ device images) + compute-sanitizer
#   decode     nvJPEG tests; decode gpu vs cpu (eval mAP, detect, bench --from-jpeg)
#   bench      benchmarks vs peers, coco128 on the GPU
#   train      training kernels and the real-training benchmark (carry .gpu .data .whl; docs/training.md)
#   fuzz       the onnx fuzz corpus on the GPU engine + memcheck
#   int8       the INT8 convolution's tests + compute-sanitizer; its benchmark against the FP16 tactics
#
# Each part is scripts/gpu/parts/<part>.sh (its header names the switches it reads), the shared steps
# scripts/gpu/lib.sh. The environment passes through unchanged; every switch is in the table of
# docs/gpu-runs.md. With several parts each part's output goes to $OUT/<part>/ (YOLOCU_RUN_SUBDIR)
# and every summary is printed again at the end.
# Reads: OUT, YOLOCU_GPU_DIR (the carry folder: .gpu, or .gpu-<name> with output in $OUT/gpu-<name>/).
set -uo pipefail
part=${1:?usage: run_all.sh tests|engine|v8|detector|decode|bench|train|fuzz|int8, or several: tests,detector,fuzz}
# shellcheck source=scripts/gpu/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
parts_dir=$root/scripts/gpu/parts

IFS=, read -r -a list <<<"$part"
known=$(cd "$parts_dir" && for f in *.sh; do printf '%s ' "${f%.sh}"; done)
n=0
for p in "${list[@]}"; do
  [ -n "$p" ] || continue
  if ! [[ "$p" =~ ^[a-z0-9]+$ && -f "$parts_dir/$p.sh" ]]; then
    echo "run_all.sh: no part '$p' (parts: ${known% })" >&2; exit 2
  fi
  n=$((n + 1))
done
[ $n -gt 0 ] || { echo "run_all.sh: no part in '$part' (parts: ${known% })" >&2; exit 2; }

if [[ "$part" == *,* ]]; then  # several parts of one bundle (bundle.sh a,b,c): each in turn, logs in $OUT/<part>/
  for p in "${list[@]}"; do [ -z "$p" ] || YOLOCU_RUN_SUBDIR=$p bash "$parts_dir/$p.sh"; done
  for p in "${list[@]}"; do [ -z "$p" ] || { echo "---- $p"; cat "$(gpu_final_dir)/$p/summary.txt"; }; done
  exit 0
fi
exec bash "$parts_dir/$part.sh"
