#!/usr/bin/env bash
# A benchmark clip (never committed): ten coco128 images, each held 30 frames, at 30 fps, scaled and
# padded to SIZE, with temporal noise so that every frame costs the decoder like camera footage
# (about 6 Mbit/s at 1080p), H.264 through libx264 (veryfast, 6 Mbit/s, yuv420p) or HEVC through
# libx265 (veryfast, 6 Mbit/s average and peak, yuv420p, tagged hvc1); h264-live: H.264 as an IP
# camera sends it, without B-frames (no reordering delay: a picture leaves the decoder with its own
# packet) and a key frame every second. Deterministic: the noise filter has a fixed seed.
#
#   bench/make_video_clip.sh OUT.mp4 [SIZE, default 1920x1080] [CODEC: h264 (default), hevc or
#                            h264-live] [IMAGES: how many images, 30 frames each, default 10]
#   env: YOLOCU_DATA_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: bench/make_video_clip.sh OUT.mp4 [WIDTHxHEIGHT]}
size=${2:-1920x1080}
codec=${3:-h264}
count=${4:-10}
[[ $count =~ ^[1-9][0-9]*$ ]] || { echo "bench/make_video_clip.sh: IMAGES must be a positive count, got '$count'" >&2; exit 2; }
case $codec in
  h264) enc=(-c:v libx264 -preset veryfast -b:v 6M -maxrate 6M -bufsize 12M) ;;
  h264-live) enc=(-c:v libx264 -preset veryfast -b:v 6M -maxrate 6M -bufsize 12M -bf 0 -g 30) ;;
  hevc | h265) enc=(-c:v libx265 -preset veryfast -b:v 6M -tag:v hvc1
                    -x265-params log-level=error:vbv-maxrate=6000:vbv-bufsize=12000) ;;
  *) echo "bench/make_video_clip.sh: CODEC must be h264, hevc or h264-live, got '$codec'" >&2; exit 2 ;;
esac
w=${size%x*} h=${size#*x}
images=${YOLOCU_DATA_DIR:-$root/../shared/data}/coco128/images/train2017
seq=$(mktemp -d)
trap 'rm -rf "$seq"' EXIT
n=0
for f in $(ls "$images" | head -"$count"); do
  for _ in $(seq 30); do n=$((n + 1)); ln -s "$(cd "$images" && pwd)/$f" "$seq/$(printf %04d $n).jpg"; done
done
ffmpeg -nostdin -hide_banner -loglevel error -y -framerate 30 -i "$seq/%04d.jpg" \
  -vf "scale=$w:$h:force_original_aspect_ratio=decrease,pad=$w:$h:(ow-iw)/2:(oh-ih)/2,setsar=1,noise=alls=6:allf=t" \
  "${enc[@]}" -pix_fmt yuv420p "$out"
echo "$out: $n frames ${w}x${h} $codec"
