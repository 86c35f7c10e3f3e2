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
exec /usr/bin/python3 "$root/scripts/video/make_refs.py" "$out" --yolov5 "${YOLOV5_DIR:-$root/.data/yolov5}"
