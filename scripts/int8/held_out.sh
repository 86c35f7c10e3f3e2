#!/usr/bin/env bash
# INT8 accuracy on images the calibration never saw (docs/int8.md, "Held out"): coco128's images in
# sorted order split in two halves (odd positions calibrate, even positions evaluate), then for each
# method `yolocu calibrate` on the first half and `yolocu eval` FP32 and simulated INT8 on both
# halves (the calibration half shows the noise of a 64-image mAP). CPU only; about 15 minutes on 2 cores.
#   scripts/int8/held_out.sh [MODEL] [COCO128 DIR]      (defaults: the test data's yolov5n and coco128)
# Environment: YOLOCU (the CLI, default build/apps/yolocu/yolocu), METHODS ("percentile minmax entropy").
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
data=${YOLOCU_DATA_DIR:-$root/../shared/data}
model=${1:-$data/models/yolov5n.onnx}
coco=${2:-$data/coco128}
yolocu=${YOLOCU:-$root/build/apps/yolocu/yolocu}
[ -x "$yolocu" ] || { echo "no $yolocu: build first (scripts/test.sh), or set YOLOCU" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/calib" "$work/held"
i=0
for f in $(cd "$coco/images/train2017" && ls | grep -i '\.jpe\?g$' | sort); do
  half=$([ $((i % 2)) = 0 ] && echo calib || echo held)
  ln -s "$coco/images/train2017/$f" "$work/$half/$f"
  i=$((i + 1))
done
map() { "$yolocu" eval --model "$model" --images "$work/$1" --labels "$coco/labels/train2017" --device cpu "${@:2}" 2>&1 |
  awk '$1 == "all" {print $NF}'; }
printf '%-12s %10s %10s %12s %12s\n' method calib_half drop held_out drop
fc=$(map calib) fh=$(map held)
printf '%-12s %10s %10s %12s %12s\n' fp32 "$fc" - "$fh" -
for m in ${METHODS:-percentile minmax entropy}; do
  "$yolocu" calibrate --model "$model" --images "$work/calib" --method "$m" -o "$work/cal_$m.json" --quiet
  c=$(map calib --precision int8 --calibration "$work/cal_$m.json")
  h=$(map held --precision int8 --calibration "$work/cal_$m.json")
  printf '%-12s %10s %10s %12s %12s\n' "$m" "$c" "$(awk -v a="$c" -v b="$fc" 'BEGIN { printf "%+.4f", a - b }')" \
    "$h" "$(awk -v a="$h" -v b="$fh" 'BEGIN { printf "%+.4f", a - b }')"
done
