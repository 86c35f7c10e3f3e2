#!/usr/bin/env bash
# Makes the YOLOv8n / YOLO11n / YOLOv8s / YOLO11s test models and ultralytics' reference outputs for the tests
# (scripts/v8/make_refs.py says what is written). Nothing it writes is ever committed.
#
#   scripts/v8/make_refs.sh [OUT]      default OUT: .data/v8/refs (git-ignored; the tests read it,
#                                      or $YOLOCU_V8_DIR); YOLOCU_V8_WEIGHTS=DIR: trained weights
#
# A throw-away venv (.data/v8/venv, or $YOLOCU_V8_VENV) on top of Debian's CPU PyTorch, with the
# pinned ultralytics of scripts/v8/requirements.txt from PyPI; the models are built from
# ultralytics' own yaml files with fixed-seed random weights: nothing is downloaded but packages.
# Skips the work when OUT already holds a complete set made with the same script and pins. Fails
# (non-zero) on any error; takes a few minutes on 2 cores (the `s` models without coco128).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
data=${YOLOCU_DATA_DIR:-$root/../shared/data}
out=${1:-$root/.data/v8/refs}
venv=${YOLOCU_V8_VENV:-$root/.data/v8/venv}
reqs=$root/scripts/v8/requirements.txt
stamp=$(cat "$reqs" "$root/scripts/v8/make_refs.py" "$root/scripts/v8/coco128_dataset.py" "$0" | sha256sum | cut -c1-16)
# YOLOCU_V8_WEIGHTS=DIR: the models of DIR/<model>.pt (trained by scripts/v8/train_coco128.py)
# instead of random weights; use another OUT for them (e.g. .data/v8/trained)
weights=${YOLOCU_V8_WEIGHTS:-}
extra=()
if [ -n "$weights" ]; then
  models=$(find "$weights" -maxdepth 1 -name '*.pt' -printf '%f\n' | sed 's/\.pt$//' | sort | paste -sd, -)
  [ -n "$models" ] || { echo "[v8 refs] no <model>.pt in $weights" >&2; exit 1; }
  stamp=$( (echo "$stamp"; cd "$weights" && sha256sum -- *.pt) | sha256sum | cut -c1-16)
  extra=(--weights "$(cd "$weights" && pwd)" --models "$models")
fi

if [ -f "$out/COMPLETE" ] && grep -q "stamp $stamp" "$out/COMPLETE"; then
  echo "[v8 refs] up to date: $out"
  exit 0
fi
for m in torch torchvision cv2 yaml PIL requests psutil; do
  /usr/bin/python3 -c "import $m" 2>/dev/null || {
    echo "[v8 refs] Debian's python3 lacks '$m' (scripts/setup.sh installs python3-torchvision, python3-opencv)" >&2
    exit 1
  }
done
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$reqs" "$venv/.yolocu-v8-requirements"; then
  echo "[v8 refs] creating $venv (ultralytics from PyPI, Debian's torch)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$reqs"
  cp "$reqs" "$venv/.yolocu-v8-requirements"
fi
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
start=$(date +%s)
YOLO_CONFIG_DIR="$out.tmp/config" "$venv/bin/python" "$root/scripts/v8/make_refs.py" --data "$data" --out "$out.tmp" "${extra[@]}"
rm -rf "$out.tmp/config" "$out"
echo "stamp $stamp" >> "$out.tmp/COMPLETE"
mv "$out.tmp" "$out"
echo "[v8 refs] done in $(( $(date +%s) - start )) s: $out"
