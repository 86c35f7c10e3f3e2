#!/usr/bin/env bash
# Generated detection sequences (crossing, occlusion, leave/re-enter, missed detections, camera
# pans, random motion; fixed seeds) and the outputs of ultralytics' BYTETracker and BOTSORT on them,
# for tests/track (scripts/track/make_refs.py says what is written). Nothing it writes is committed.
#
#   scripts/track/make_refs.sh [OUT]   default OUT: .data/track/refs (git-ignored; the tests read it,
#                                      or $YOLOCU_TRACK_DIR)
#
# A throw-away venv (.data/track/venv, or $YOLOCU_TRACK_VENV) on top of Debian's CPU PyTorch, with
# the pinned ultralytics of scripts/v8/requirements.txt and the `lap` of scripts/track/requirements.txt
# from PyPI. Skips the work when OUT already holds a complete set made with the same script and pins.
# Fails (non-zero) on any error; takes 1-2 minutes on 2 cores and writes ~80 MB (rendered frames).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$root/.data/track/refs}
venv=${YOLOCU_TRACK_VENV:-$root/.data/track/venv}
reqs="$root/scripts/v8/requirements.txt $root/scripts/track/requirements.txt"
# shellcheck disable=SC2086
stamp=$(cat $reqs "$root/scripts/track/make_refs.py" "$0" | sha256sum | cut -c1-16)

if [ -f "$out/COMPLETE" ] && grep -q "stamp $stamp" "$out/COMPLETE"; then
  echo "[track refs] up to date: $out"
  exit 0
fi
for m in torch torchvision cv2 yaml PIL requests psutil; do
  /usr/bin/python3 -c "import $m" 2>/dev/null || {
    echo "[track refs] Debian's python3 lacks '$m' (scripts/setup.sh installs python3-torchvision, python3-opencv)" >&2
    exit 1
  }
done
# shellcheck disable=SC2086
if [ ! -x "$venv/bin/python" ] || ! cat $reqs | cmp -s - "$venv/.yolocu-track-requirements"; then
  echo "[track refs] creating $venv (ultralytics and lap from PyPI, Debian's torch)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps $(printf -- '-r %s ' $reqs)
  # shellcheck disable=SC2086
  cat $reqs > "$venv/.yolocu-track-requirements"
fi
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
start=$(date +%s)
YOLO_CONFIG_DIR="$out.tmp/config" YOLO_OFFLINE=1 "$venv/bin/python" "$root/scripts/track/make_refs.py" --out "$out.tmp"
rm -rf "$out.tmp/config" "$out"
echo "stamp $stamp" >> "$out.tmp/COMPLETE"
mv "$out.tmp" "$out"
echo "[track refs] done in $(( $(date +%s) - start )) s: $out"
