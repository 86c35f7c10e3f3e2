#!/usr/bin/env bash
# The GPU video run's bundle (issue #16): the GPU machine has no FFmpeg and no network, and Debian's
# libavcodec with its dependencies is ~280 MB, so this builds a MINIMAL FFmpeg from Debian's own
# source (the same 5.1 release as the system's libraries) and carries that:
#   shared libavformat / libavcodec / libavutil / libswscale; decoders h264 + hevc and their parsers;
#   demuxers mov (mp4), matroska, h264, hevc, rtsp, sdp; the file, tcp, udp and rtp protocols; the
#   rtsp muxer and the ffmpeg program with the few filters it needs (a publisher for live RTSP
#   sources pushed to yolocu --rtsp-listen); the CUDA hw device and the NVDEC
#   hwaccels (h264_nvdec, hevc_nvdec), the NVENC encoder (h264_nvenc) and MPEG-4 and the mp4 muxer
#   for --save, through the ffnvcodec headers (Debian: libffmpeg-nvenc-dev; libcuda / libnvcuvid /
#   libnvidia-encode are loaded at run time, not linked); x86 assembly on (nasm), so swscale's
#   conversion is the same code as the system library's; no other program, no external libraries.
# Then it builds libyolocu, the CLI, the video GPU tests and the decode benchmark against it (sm_90,
# -DYOLOCU_VIDEO=ON), makes the 1080p H.264 and HEVC benchmark clips (bench/make_video_clip.sh, the
# system ffmpeg tool with libx264 / libx265)
# and packs all of it with yolov5n.onnx into .gpu-video/carry/ (git-ignored, < 64 MiB).
#
#   scripts/gpu/video_bundle.sh              everything (FFmpeg is built once, ~15 min on 2 cores)
#   scripts/gpu/video_bundle.sh --ffmpeg     only the FFmpeg build (start it early, in the background)
# Then call the device tool with carry [".gpu-video/carry"] and the command
#   bash scripts/gpu/video_run.sh
# Environment: YOLOCU_DATA_DIR (default ../shared/data), JOBS (default 2), CUDA_ARCH (default 90),
# YOLOCU_GPU_VIDEO_BUILD (the yolocu build folder, default build-gpu-video).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
data=${YOLOCU_DATA_DIR:-$root/../shared/data}
jobs=${JOBS:-2}
arch=${CUDA_ARCH:-90}
bdir=${YOLOCU_GPU_VIDEO_BUILD:-build-gpu-video}
work=$root/.gpu-video            # git-ignored: FFmpeg source, build, prefix, the carry folder
prefix=$work/ffmpeg
ffver=5.1.9                      # Debian 12's FFmpeg (7:5.1.9-0+deb12u1); the same code as the system libraries
only_ffmpeg=0
[ "${1:-}" = "--ffmpeg" ] && only_ffmpeg=1

need_pkgs=()
for p in nasm libffmpeg-nvenc-dev pkg-config ffmpeg xz-utils; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_pkgs+=("$p")
done
if ((${#need_pkgs[@]})); then
  echo "[video-bundle] installing Debian packages: ${need_pkgs[*]} (nasm: FFmpeg's x86 assembly; libffmpeg-nvenc-dev: the NVDEC headers; ffmpeg: makes the test clip)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

# 1. FFmpeg's source through apt-get source, with a private apt configuration (deb-src lines and
#    package lists under .gpu-video/apt): the system's apt sources are left as they are.
build_ffmpeg() {
  mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial"
  local tarball=$work/ffmpeg_$ffver.orig.tar.xz
  if [ ! -f "$tarball" ]; then
    cat > "$work/apt/sources.list" <<'EOF'
deb-src http://deb.debian.org/debian bookworm main
deb-src http://deb.debian.org/debian-security bookworm-security main
deb-src http://deb.debian.org/debian bookworm-updates main
EOF
    local A=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache")
    echo "[video-bundle] fetching FFmpeg $ffver's source (apt-get source, private deb-src list)"
    apt-get "${A[@]}" update -qq
    (cd "$work" && apt-get "${A[@]}" source --download-only "ffmpeg=7:$ffver-0+deb12u1")
  fi
  rm -rf "$work/src" "$prefix"
  mkdir -p "$work/src"
  tar -C "$work/src" --strip-components=1 -xJf "$tarball"
  echo "[video-bundle] configuring the minimal FFmpeg"
  (cd "$work/src" && ./configure --prefix="$prefix" --enable-shared --disable-static --disable-programs --enable-ffmpeg \
     --disable-doc --disable-autodetect --enable-pthreads --enable-ffnvcodec --enable-cuda --enable-nvdec \
     --disable-everything --disable-avdevice --disable-swresample --disable-postproc \
     --enable-decoder=h264,hevc --enable-parser=h264,hevc --enable-demuxer=mov,matroska,h264,hevc,rtsp,sdp \
     --enable-protocol=file,tcp,udp,rtp --enable-hwaccel=h264_nvdec,hevc_nvdec --enable-bsf=h264_mp4toannexb,hevc_mp4toannexb \
     --enable-nvenc --enable-encoder=h264_nvenc,mpeg4 --enable-muxer=mp4,rtsp >"$work/configure.log" 2>&1) ||
    { tail -20 "$work/configure.log"; exit 1; }
  grep -q "^CONFIG_NVDEC=yes" "$work/src/ffbuild/config.mak" || { echo "[video-bundle] FFmpeg configured without NVDEC" >&2; exit 1; }
  grep -q "^CONFIG_H264_NVENC_ENCODER=yes" "$work/src/ffbuild/config.mak" || { echo "[video-bundle] FFmpeg configured without NVENC" >&2; exit 1; }
  grep -q "^CONFIG_RTSP_DEMUXER=yes" "$work/src/ffbuild/config.mak" && grep -q "^CONFIG_RTSP_MUXER=yes" "$work/src/ffbuild/config.mak" &&
    grep -q "^CONFIG_FFMPEG=yes" "$work/src/ffbuild/config.mak" || { echo "[video-bundle] FFmpeg configured without RTSP or its ffmpeg program" >&2; exit 1; }
  echo "[video-bundle] building FFmpeg with -j$jobs (log: $work/make.log)"
  make -C "$work/src" -j"$jobs" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log"; exit 1; }
  make -C "$work/src" install >>"$work/make.log" 2>&1
  echo "$ffver+nvenc+rtsp+annexb" > "$prefix/STAMP"
}
# (the stamp names the configuration: an FFmpeg built before NVENC, the mp4 muxer or RTSP were in is rebuilt)
if [ ! -f "$prefix/STAMP" ] || [ "$(cat "$prefix/STAMP")" != "$ffver+nvenc+rtsp+annexb" ]; then
  build_ffmpeg
else
  echo "[video-bundle] FFmpeg $ffver already built in $prefix"
fi
((only_ffmpeg)) && exit 0

# 2. yolocu against that FFmpeg (pkg-config sees only it: no system libavdevice), CUDA for sm_90.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# Besides FFmpeg, pkg-config sees only the other modules the build asks it for (libwebp), each .pc
# linked into a folder of its own.
pcx=$work/pkgconfig-extra
rm -rf "$pcx" && mkdir -p "$pcx"
for m in libwebp libsharpyuv; do
  pc=$(pkg-config --variable=pcfiledir "$m" 2>/dev/null)/$m.pc && [ -f "$pc" ] && ln -s "$pc" "$pcx/"
done
PKG_CONFIG_LIBDIR=$prefix/lib/pkgconfig:$pcx PKG_CONFIG_PATH= cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DYOLOCU_CUDA=ON -DYOLOCU_VIDEO=ON -DYOLOCU_DATA_DIR="$data" "${launcher[@]}" \
  -DYOLOCU_CLI_OPENCV=OFF \
  >"$work/cmake.log" 2>&1 || { tail -20 "$work/cmake.log"; exit 1; }
grep -q "video input on: libavformat" "$work/cmake.log" || { echo "[video-bundle] yolocu did not find the minimal FFmpeg" >&2; exit 1; }
grep -q "FFMPEG_LIBRARY_DIRS:INTERNAL=$prefix/lib" "$bdir/CMakeCache.txt" ||
  { echo "[video-bundle] $bdir uses another FFmpeg than $prefix (delete $bdir and rerun)" >&2; exit 1; }
targets="yolocu_cli bench_video_decode bench_track bench_warm_up test_video_cuda test_nv12_convert test_letterbox_image_cuda test_device_image_cuda"
echo "[video-bundle] building $targets in $bdir (-j$jobs)"
cmake --build "$bdir" -j"$jobs" --target $targets

# 3. Test material: scripts/video/make_refs.py's short clips (coco128 images, each held 3 frames,
#    640x480 / 640x360 letterboxed, H.264 and H.265, a frame size change), and the 1080p benchmark clips.
carry=$work/carry
rm -rf "$carry" && mkdir -p "$carry/video" "$carry/data/models" "$carry/data/images"
images=$data/coco128/images/train2017
[ -d "$images" ] || { echo "[video-bundle] no coco128 in $data" >&2; exit 1; }
seq=$(mktemp -d)
trap 'rm -rf "$seq"' EXIT
n=0
for f in $(ls "$images" | head -10); do
  for _ in 1 2 3; do n=$((n + 1)); ln -s "$images/$f" "$seq/$(printf %04d $n).jpg"; done
done
# the clips and their encoder settings of scripts/video/make_refs.py (CI's material), from its own functions
/usr/bin/python3 - "$seq" "$carry/video" <<'PY'
import sys
sys.path.insert(0, "scripts/video")
import make_refs
seq, out = sys.argv[1:]
for name in ("clip_h264.mp4", "clip_h265.mkv", "clip_h264_360.mp4"):
    make_refs.make_clip(name, seq, out, *make_refs.CLIPS[name])
make_refs.make_size_change_clip(seq, out)
PY
touch "$carry/video/COMPLETE"
for codec in h264 hevc; do
  YOLOCU_DATA_DIR=$data bench/make_video_clip.sh "$carry/video/bench_1080p_$codec.mp4" 1920x1080 $codec >/dev/null
done
# the live sources' clip, as a camera sends it (no B-frames), 3 s: the publishers loop it
YOLOCU_DATA_DIR=$data bench/make_video_clip.sh "$carry/video/bench_1080p_h264_live.mp4" 1920x1080 h264-live 3 >/dev/null
cp "$data/models/yolov5n.onnx" "$carry/data/models/"
cp "$data/images/bus.jpg" "$data/images/zidane.jpg" "$carry/data/images/"

# 4. Binaries and the shared libraries the GPU machine lacks (the minimal FFmpeg, oneDNN, protobuf,
#    libjpeg, libpng, ...; found with ldd; glibc, the CUDA driver/runtime and cuDNN are there).
mkdir -p "$carry/pkg/bin" "$carry/pkg/lib"
for t in $targets; do
  [ "$t" = yolocu_cli ] && t=yolocu
  f=$(find "$bdir" -path "$bdir/test-scratch" -prune -o -type f -name "$t" -perm -u+x -print | head -1)
  [ -n "$f" ] || { echo "[video-bundle] $t not built" >&2; exit 1; }
  cp "$f" "$carry/pkg/bin/"
done
cp "$prefix/bin/ffmpeg" "$carry/pkg/bin/"  # the live run's RTSP publishers
for b in "$carry"/pkg/bin/*; do
  LD_LIBRARY_PATH=$prefix/lib ldd "$b" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*|libcuda|libcudart|libcudnn[^/]*|libcublas[^/]*|libnvrtc[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$carry/pkg/lib/"; done
if ls "$carry/pkg/lib" | grep -q -E '^libav(codec|format|util)\.so'; then :; else
  echo "[video-bundle] the binaries do not load FFmpeg's libraries?" >&2; exit 1
fi
for lib in "$carry"/pkg/lib/libav*.so* "$carry"/pkg/lib/libsw*.so*; do
  cmp -s "$lib" "$prefix/lib/$(basename "$lib")" || { echo "[video-bundle] $lib is not the minimal FFmpeg's" >&2; exit 1; }
done
git rev-parse --short HEAD > "$carry/COMMIT"
git diff --quiet HEAD 2>/dev/null || echo "$(cat "$carry/COMMIT")+uncommitted" > "$carry/COMMIT"
tar -C "$carry/pkg" -cJf "$carry/bundle.tar.xz" bin lib
rm -rf "$carry/pkg"
du -sh "$carry"; du -sh "$carry"/* | sort -h
size=$(du -sb "$carry" | cut -f1)
[ "$size" -lt $((64 << 20)) ] || { echo "[video-bundle] $carry is $size bytes: over a call's 64 MiB" >&2; exit 1; }
echo "[video-bundle] done: carry [\".gpu-video/carry\"], command: bash scripts/gpu/video_run.sh"
