#!/usr/bin/env bash
# Makes the video test material (scripts/video/make_refs.py) into OUT_DIR (default .data/video/refs):
# clips encoded from coco128 with the ffmpeg tool, their frames as cv2.VideoCapture decodes them, and
# ultralytics/yolov5 v7.0's detections on those frames. Nothing when it is up to date. Never committed.
#
#   scripts/video/make_refs.sh [OUT_DIR]        env: YOLOCU_DATA_DIR (default ../shared/data)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/.data/video/refs}
command -v ffmpeg >/dev/null || { echo "scripts/video/make_refs.sh: no ffmpeg tool (Debian: apt install ffmpeg; scripts/setup.sh)" >&2; exit 1; }
yolov5=${YOLOV5_DIR:-$root/.data/yolov5}
no_det=()
if [ ! -d "$yolov5/utils" ] && ! command -v git >/dev/null; then
  no_det=(--no-detections "no ultralytics/yolov5 v7.0 tree at $yolov5 and no git to fetch one")
elif [ ! -d "$yolov5/utils" ]; then
  # the unmodified ultralytics/yolov5 v7.0 source (AGPL-3.0), git-ignored, never committed
  v70=915bbf294bb74c859f0b41f1c23bc395014ea679
  echo "[video refs] no ultralytics/yolov5 v7.0 source at $yolov5: cloning tag v7.0 ($v70)"
  tmp=$(mktemp -d)
  if timeout 120 git clone -q --depth 1 -b v7.0 https://github.com/ultralytics/yolov5 "$tmp/yolov5"; then
    [ "$(git -C "$tmp/yolov5" rev-parse HEAD)" = "$v70" ] || { echo "[video refs] v7.0 is not $v70" >&2; exit 1; }
    mkdir -p "$yolov5" && git -C "$tmp/yolov5" archive HEAD | tar -x -C "$yolov5"
  else
    # No network to GitHub (CI reaches only Debian and PyPI): the clips and their cv2 frames are
    # still made (decode parity); the detection-parity tests skip, saying why.
    echo "[video refs] cannot clone ultralytics/yolov5: the detection references are skipped; put an unmodified" \
         "v7.0 tree at $yolov5 (e.g. git --git-dir=<a yolov5 mirror> archive v7.0 | tar -x -C $yolov5) or set" \
         "YOLOV5_DIR to make them" >&2
    no_det=(--no-detections "ultralytics/yolov5 v7.0 could not be fetched (no tree at $yolov5)")
  fi
  rm -rf "$tmp"
fi
exec /usr/bin/python3 "$root/scripts/video/make_refs.py" "$out" --yolov5 "$yolov5" "${no_det[@]}"
