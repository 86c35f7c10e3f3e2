#!/usr/bin/env bash
# Prepares the training of YOLOv8n / YOLO11n on coco128 on the GPU machine (scripts/v8/train_coco128.py;
# docs/gpu-runs.md): packs into .gpu-v8train/ (git-ignored) the pinned ultralytics package of
# scripts/v8/make_refs.sh's venv and coco128's images and labels. Then one device call with carry
# [".gpu-v8train"]:
#   python3 scripts/v8/train_coco128.py --ultralytics .gpu-v8train --data .gpu-v8train/data \
#       --out $OUT/v8train [--models yolov8n,yolo11n] [--epochs N]
# and here, with the weights it returns (OUT/v8train/<model>.pt):
#   YOLOCU_V8_WEIGHTS=<that folder> scripts/v8/make_refs.sh .data/v8/trained
# Reads: YOLOCU_DATA_DIR, YOLOCU_V8_VENV.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
data=${YOLOCU_DATA_DIR:-$root/../shared/data}
g=.gpu-v8train
ulx=$(find "${YOLOCU_V8_VENV:-$root/.data/v8/venv}"/lib -maxdepth 3 -type d -path "*/site-packages/ultralytics" 2>/dev/null | head -1)
[ -n "$ulx" ] || { echo "[v8train] no ultralytics in the v8 venv: run scripts/v8/make_refs.sh first" >&2; exit 1; }
for d in images labels; do
  [ -d "$data/coco128/$d/train2017" ] || { echo "[v8train] no $data/coco128/$d/train2017" >&2; exit 1; }
done
rm -rf $g && mkdir -p $g/data/coco128
cp -r "$ulx" $g/ultralytics
find $g/ultralytics -name __pycache__ -prune -exec rm -rf {} +
cp -r "$data/coco128/images" "$data/coco128/labels" $g/data/coco128/
echo "[v8train] $g: $(du -sh $g | cut -f1) (carry with the working tree: at most 64 MiB)"
