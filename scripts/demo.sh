#!/usr/bin/env bash
# Runs the main job with a built tree: detection on the sample images.
#   scripts/demo.sh <build dir> <data dir>
set -euo pipefail
build=${1:-build}; data=${2:-../shared/data}
"$build/apps/yolocu/yolocu" --version
