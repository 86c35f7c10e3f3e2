#!/usr/bin/env bash
# GPU machine: YOLOv5s from scratch on coco128 with ultralytics/yolov5 v7.0's train.py (an
# unmodified copy in .data/yolov5, never committed), baseline vs yolocu kernels, same seed; plus a
# baseline with another seed as the run-to-run noise reference. Reports median step time and the
# loss curves (bench/training/compare_train.py).
#
#   scripts/gpu/train_bench.sh OUTDIR
#   env: EPOCHS=5 BATCH=16 WORKERS=8 SEED=0 NOISE_RUN=1 YOLOV5_DIR=.data/yolov5 COCO128=.data/coco128
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${1:?usage: scripts/gpu/train_bench.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-16}
source scripts/gpu/py_deps.sh
yolov5=$(cd "${YOLOV5_DIR:-.data/yolov5}" && pwd) || { echo "FAIL  no yolov5 v7.0 copy at ${YOLOV5_DIR:-.data/yolov5}"; exit 1; }
coco=${COCO128:-.data/coco128}
if [ ! -d "$coco/images" ]; then
  for c in ../shared/data/coco128 shared/data/coco128; do
    if [ -d "$c/images" ]; then mkdir -p "$(dirname "$coco")"; cp -r "$c" "$coco"; break; fi
  done
fi
[ -d "$coco/images" ] || { echo "FAIL  coco128 not found at $coco"; exit 1; }
coco=$(cd "$coco" && pwd)
EPOCHS=${EPOCHS:-5}; BATCH=${BATCH:-16}; WORKERS=${WORKERS:-8}; SEED=${SEED:-0}

# Dataset yaml: yolov5's coco128.yaml class names, our local path.
"$py" - "$yolov5/data/coco128.yaml" "$coco" "$out/coco128.yaml" <<'PY'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
d.update(path=sys.argv[2], train="images/train2017", val="images/train2017", test=None)
d.pop("download", None)
yaml.safe_dump(d, open(sys.argv[3], "w"), sort_keys=False)
PY

"$py" python/yolocu_train/build.py >"$out/ext_build.log" 2>&1 || { echo "FAIL  extension build"; tail -20 "$out/ext_build.log"; exit 1; }

common=(--data "$out/coco128.yaml" --cfg yolov5s.yaml --weights '' --hyp "$yolov5/data/hyps/hyp.scratch-low.yaml"
        --epochs "$EPOCHS" --batch-size "$BATCH" --imgsz 640 --workers "$WORKERS" --cache ram
        --noplots --noval --nosave --noautoanchor --project "$out/runs" --exist-ok)
run() {  # name seed [--yolocu]
  local name=$1 seed=$2; shift 2
  echo "== train $name (seed $seed) $(date +%T)"
  YOLOv5_VERBOSE=True "$py" python/yolocu_train/launch_train.py --yolov5 "$yolov5" "$@" --log "$out/train_$name.json" \
    -- "${common[@]}" --seed "$seed" --name "$name" >"$out/train_$name.log" 2>&1
  local rc=$?
  tail -3 "$out/train_$name.log"
  return $rc
}
status=0
run base "$SEED" || status=1
run yolocu "$SEED" --yolocu || status=1
runs=("$out/train_base.json" "$out/train_yolocu.json")
if [ "${NOISE_RUN:-1}" = 1 ]; then
  run base_seed$((SEED + 1)) $((SEED + 1)) || status=1
  runs+=("$out/train_base_seed$((SEED + 1)).json")
fi
"$py" bench/training/compare_train.py --skip "$(( (128 + BATCH - 1) / BATCH ))" "${runs[@]}" | tee "$out/train_compare.txt"
exit $status
