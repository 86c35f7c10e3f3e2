#!/usr/bin/env bash
# Runs the main job with a built tree: detection on the sample images.
#   scripts/demo.sh <build dir> <data dir> [output dir (runs/demo)]
set -euo pipefail
build=${1:-build}; data=${2:-../shared/data}
"$build/apps/yolocu/yolocu" --version
out=${3:-runs/demo}
# detection on the sample images: JSON on stdout, YOLO txt + annotated JPEGs under $out
"$build/apps/yolocu/yolocu" detect --model "$data/models/yolov5n.onnx" --verbose \
  --save-txt --save-img --output-dir "$out" --json "$out/detections.json" \
  "$data/images/bus.jpg" "$data/images/zidane.jpg"
echo "[demo] $out/detections.json, $out/labels/*.txt, $out/*.jpg"
