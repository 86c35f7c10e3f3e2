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
if [ ! -d "$yolov5/utils" ]; then
  # the unmodified ultralytics/yolov5 v7.0 source (AGPL-3.0), git-ignored, never committed
  v70=915bbf294bb74c859f0b41f1c23bc395014ea679
  echo "[video refs] no ultralytics/yolov5 v7.0 source at $yolov5: cloning tag v7.0 ($v70)"
  tmp=$(mktemp -d)
  git clone -q --depth 1 -b v7.0 https://github.com/ultralytics/yolov5 "$tmp/yolov5" || {
    echo "[video refs] cannot clone ultralytics/yolov5; put an unmodified v7.0 tree at $yolov5 (e.g." \
         "git --git-dir=<a yolov5 mirror> archive v7.0 | tar -x -C $yolov5) or set YOLOV5_DIR" >&2
    rm -rf "$tmp"; exit 1; }
  [ "$(git -C "$tmp/yolov5" rev-parse HEAD)" = "$v70" ] || { echo "[video refs] v7.0 is not $v70" >&2; exit 1; }
  mkdir -p "$yolov5" && git -C "$tmp/yolov5" archive HEAD | tar -x -C "$yolov5"
  rm -rf "$tmp"
fi
exec /usr/bin/python3 "$root/scripts/video/make_refs.py" "$out" --yolov5 "$yolov5"
