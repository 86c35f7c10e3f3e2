#!/usr/bin/env bash
# The GPU video run (issue #16), on the GPU machine, from the repository root, carrying
# .gpu-video/carry (made by scripts/gpu/video_bundle.sh here):
#   1. probe: does the driver expose NVDEC (libnvcuvid present; an NVDEC decoder opening on the
#      1080p clip: libnvcuvid loaded, av_hwdevice_ctx_init on the runtime's primary context);
#   2. tests: the NV12 conversion against the carried (minimal) FFmpeg's swscale, the DeviceImage
#      letterbox kernel, detect_device of NV12/RGB/BGR, NVDEC vs the CPU decoder (planes, frames,
#      detections); compute-sanitizer memcheck on the new kernel and on NVDEC frames;
#   3. the CLI: detect --source with --decoder cpu and cuda write the same JSON lines;
#   4. benchmark, per codec of CODECS (default "h264 hevc": the 1080p clips bench_1080p_<codec>.mp4):
#      decode only and decode + yolov5n detect (FP16), CPU decode vs NVDEC, 1 stream and STREAMS (8)
#      streams; a short table per codec; the NVDEC runs of STREAMS streams also report NVDEC
#      utilisation from NVML (decode only and with detection) and the detect run's per-stage
#      timeline (yolocu detect --timeline: medians per batch, the Chrome trace in the logs).
# Logs under $OUT (or ./gpu-out): logs.tar.gz and summary.txt. Everything takes about 8-10 minutes,
# so within a call's 10 minutes run it as two calls: SKIP_BENCH=1 (probe, tests, sanitizers, CLI),
# then SKIP_TESTS=1 (probe, benchmark).
#   5. tracking (issue #34), only with TRACK=1 (with the rest) or TRACK_ONLY=1 (just this and the probe,
#      ~3 minutes; the third call after the two above): 32 streams (TRACK_STREAMS) of
#      the 1080p clip, yolov5n FP16 batch 32: bench_track (detection vs detection + 32 ByteTrack
#      trackers and counting lines, decoding excluded) and yolocu detect vs yolocu track end to end
#      (NVDEC, frames/s of each and the difference).
#   6. warm start (issue #35), only with WARM=1 (with the rest) or WARM_ONLY=1 (just this and the
#      probe, ~4 minutes): bench_warm_up, yolov5n FP16, every batch size 1..WARM_BATCH (32) made
#      ready, each way twice on a fresh tactic cache file of its own (the first process cold, the
#      second from the file): every untuned size derived, then --pad-batches (only 1, 2, 4, ... and
#      32 run); then each way's engine time per batch size (what padding costs).
#   7. two GPUs (issue #35), only with GPUS2=1 (with the rest) or GPUS2_ONLY=1, on a machine of two
#      or more GPUs (nvidia-h100-x2): GPUS2_STREAMS (64) streams of the 1080p H.264 clip, NVDEC:
#      decode alone on GPU 0 and on GPUs 0,1 (bench_video_decode --devices), with each NVDEC way of
#      GPUS2_WAYS (see way_env: the default decoder, libavcodec's hwaccel, the latter on a stream
#      per decoder); then, yolov5n FP16, twice each alternating:
#      `yolocu detect --device cuda:0`, `--device cuda:0,1` (one detector per GPU, the streams
#      spread over both), cuda:0 with each other decoder way, and two processes (cuda:0 and cuda:1,
#      half the streams each): frames/s, cores used and JSON lines.
#   8. live RTSP (issue #35), only with LIVE=1 or LIVE_ONLY=1: LIVE_STREAMS (64) streams of the
#      1080p H.264 camera-like clip (no B-frames; LIVE_BFRAMES=1: the benchmark clip) pushed in real
#      time (30 frames/s each, looped for LIVE_SECONDS, 60) by the carried ffmpeg program to
#      `yolocu detect --rtsp-listen` on loopback ports, NVDEC, yolov5n FP16: frames detected
#      against frames sent, dropped frames, latency from packet to JSON line.
#   9. the sources' start (issue #35), only with START=1 or START_ONLY=1: START_STREAMS (128) sources of
#      the 1080p H.264 clip opened at once, each reading its first frame (bench_video_decode --opens),
#      then 8 one at a time, then all at once again beside one running source (how much the starting
#      decoders hold it up), for each NVDEC way of START_WAYS (default "default hwaccel"); then two
#      processes of half the sources each at once (the default decoder).
# Environment: TEST_FILTER (gtest filter for the tests), SKIP_TESTS=1, SKIP_BENCH=1, SKIP_SANITIZE=1,
# DECODE_RUNS (2: passes of the k-stream decode-alone benchmark), BENCH_TIMEOUT (300 s: each k-stream run),
# CLIP_LOOPS (1: the benchmark's and the two-GPU run's sources play their clip that many times over), BENCH_SEED=1 (the
# benchmark's tactic cache seeded from the carried one: no cold start),
# TRACK=1, TRACK_ONLY=1, STREAMS (default 8; the detector's batch is at most 32), BENCH_DECODERS
# (default "cpu cuda"), TRACK_STREAMS (default 32), WARM=1, WARM_ONLY=1,
# WARM_BATCH (default 32), CODECS (default "h264 hevc"), GPUS2=1, GPUS2_ONLY=1, GPUS2_STREAMS (64),
# GPUS2_WAYS (the NVDEC ways, default "default hwaccel own"), GPUS2_REPEATS (2),
# LIVE=1, LIVE_ONLY=1, LIVE_STREAMS (64), LIVE_SECONDS (60), LIVE_BFRAMES=1, START=1, START_ONLY=1,
# START_STREAMS (128), START_WAYS.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
carry=$root/.gpu-video/carry
final=${OUT:-$root/gpu-out}
out=$final/logs
mkdir -p "$out"
summary=$final/summary.txt
: >"$summary"
row() { printf '%s\n' "$*" | tee -a "$summary"; }
step() { echo "== $* ($(date +%T))"; }
fps_of() { grep -o '[0-9.]* frames/s' "$1" | tail -1 | cut -d' ' -f1; }  # a yolocu / bench log's last frames/s
# the rate over the middle half of the frames (every source running; no start, no tail) of a
# yolocu detect or bench_video_decode log
mid_of() { grep -o '[0-9.]* over the middle half' "$1" | tail -1 | cut -d' ' -f1; }
batch_of() { echo $(( $1 < 32 ? $1 : 32 )); }  # the detector's batch for N streams: N, at most 32
# An NVDEC way's environment (unquoted where used): default, the build's default decoder (the Video
# Codec SDK's parser and decoder, pictures mapped in place); sdk, that one named; hwaccel,
# libavcodec's; own, libavcodec's mapping on a stream per decoder.
way_env() {
  case $1 in
    sdk) echo YOLOCU_NVDEC_API=sdk ;;
    hwaccel) echo YOLOCU_NVDEC_API=hwaccel ;;
    own) echo YOLOCU_NVDEC_API=hwaccel YOLOCU_NVDEC_STREAM=own ;;
    *) echo YOLOCU_NVDEC_API= ;;
  esac
}
# The tactic cache an earlier call returned (tactics.json.xz, carried as .gpu-video/carry/tactics.json.xz)
# seeds the sections that measure no cold start (two GPUs, live, tracking): a fresh machine skips tuning.
seed_cache() { [ -f "$carry/tactics.json.xz" ] && xz -dc "$carry/tactics.json.xz" >"$1"; return 0; }
# looped_clip CLIP: the path of CLIP played CLIP_LOOPS times over (a stream copy under $run, made
# once; not under $out: the logs stay small), or CLIP itself with CLIP_LOOPS 1 or when ffmpeg fails.
looped_clip() {
  local clip=$1 long
  [ "${CLIP_LOOPS:-1}" -gt 1 ] || { echo "$clip"; return; }
  long=$run/$(basename "${clip%.*}")_x${CLIP_LOOPS}.${clip##*.}
  if [ -f "$long" ] || "$bin/ffmpeg" -nostdin -hide_banner -loglevel error -stream_loop $((CLIP_LOOPS - 1)) -i "$clip" \
    -c copy "$long"; then
    echo "$long"
  else
    row "FAIL  ffmpeg -stream_loop: the clip stays $(basename "$clip")" >&2
    echo "$clip"
  fi
}

step "unpack"
run=$root/.gpu-video/run
rm -rf "$run" && mkdir -p "$run" && tar -C "$run" -xJf "$carry/bundle.tar.xz" ||
  { echo "no bundle: run scripts/gpu/video_bundle.sh first and carry .gpu-video/carry"; exit 1; }
bin=$run/bin
cudnn_dir=$(dirname "$(find / -name 'libcudnn.so.9*' -not -path '/proc/*' 2>/dev/null | head -1)")
cudart_dir=$(dirname "$(find / -name 'libcudart.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)")
nvrtc_dir=$(dirname "$(find / -name 'libnvrtc.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$run/lib:$cudnn_dir:$cudart_dir:$nvrtc_dir:${LD_LIBRARY_PATH:-}
export YOLOCU_DATA_DIR=$carry/data YOLOCU_VIDEO_DIR=$carry/video YOLOCU_REQUIRE_VIDEO=1
clip=$carry/video/bench_1080p_h264.mp4
# test_video_cuda also runs on the 1080p clips (':'-separated)
export YOLOCU_VIDEO_BENCH_CLIP=$clip:$carry/video/bench_1080p_hevc.mp4 YOLOCU_SCRATCH_DIR=$out/scratch
model=$carry/data/models/yolov5n.onnx
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt"
row "commit $(cat "$carry/COMMIT" 2>/dev/null || echo unknown) on $(head -1 "$out/device.txt")"

step "probe"
nvcuvid=$( (ldconfig -p 2>/dev/null | grep -o '/[^ ]*libnvcuvid\.so[^ ]*'; find / -name 'libnvcuvid.so*' -not -path '/proc/*' 2>/dev/null) | sort -u | tr '\n' ' ')
row "libnvcuvid: ${nvcuvid:-NOT FOUND}"
row "libcuda: $( (ldconfig -p 2>/dev/null | grep -o '/[^ ]*libcuda\.so[^ ]*') | sort -u | tr '\n' ' ')"
if "$bin/bench_video_decode" "$clip" --decoder cuda --runs 1 >"$out/probe.log" 2>&1; then
  row "NVDEC: yes: $(grep -o 'cuda: NVDEC[^,]*' "$out/probe.log" | head -1) (libnvcuvid loaded, CUDA hw device on the runtime's primary context)"
else
  row "NVDEC: NO: $(tail -1 "$out/probe.log")"
fi

run_test() {  # run_test <binary> [gtest filter]
  local t=$1 filter=${2:-*}
  if "$bin/$t" --gtest_filter="$filter" >"$out/$t.log" 2>&1; then
    row "PASS  $t: $(grep -c '^\[       OK \]' "$out/$t.log") ok, $(grep -c '^\[  SKIPPED \] .*ms)$' "$out/$t.log") skipped"
  else
    row "FAIL  $t (log $t.log)"; grep -E '^\[  FAILED  \]|Failure|error' "$out/$t.log" | head -15
  fi
}
sanitize() {  # sanitize <tool> <binary> <gtest filter>
  local tool=$1 t=$2 filter=$3
  if YOLOCU_TUNE_QUICK=1 timeout "${SAN_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin/$t" --gtest_filter="$filter" >"$out/san_${tool}_$t.log" 2>&1; then
    row "CLEAN compute-sanitizer $tool $t ($filter): $(grep -E '(ERROR|RACECHECK) SUMMARY' "$out/san_${tool}_$t.log" | tail -1 | sed 's/=* *//')"
  else
    row "DIRTY compute-sanitizer $tool $t (log san_${tool}_$t.log)"; grep -E 'ERROR SUMMARY|Invalid|Race|Uninitialized' "$out/san_${tool}_$t.log" | head -8
  fi
}

if [ "${TRACK_ONLY:-0}" = 1 ] || [ "${WARM_ONLY:-0}" = 1 ] || [ "${GPUS2_ONLY:-0}" = 1 ] || [ "${LIVE_ONLY:-0}" = 1 ] ||
   [ "${START_ONLY:-0}" = 1 ]; then
  SKIP_TESTS=1 SKIP_BENCH=1
fi
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  step "tests"
  # exactness tests compare two paths through the same engine: quick tactic tuning is enough
  export YOLOCU_TUNE_QUICK=1
  for t in test_nv12_convert test_letterbox_image_cuda test_device_image_cuda test_video_cuda; do
    run_test "$t" "${TEST_FILTER:-*}"
  done
  grep -h -E 'NVDEC path|NVDEC planes|fast mode' "$out"/test_*.log | sed 's/^/      /' | tee -a "$summary"
  if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
    sanitize memcheck test_letterbox_image_cuda 'LetterboxImageCuda.ExactMatchesCpuForEveryFormatInOneBatch'
    sanitize racecheck test_letterbox_image_cuda 'LetterboxImageCuda.ExactMatchesCpuForEveryFormatInOneBatch'
    sanitize initcheck test_letterbox_image_cuda 'LetterboxImageCuda.ExactMatchesCpuForEveryFormatInOneBatch'
    YOLOCU_VIDEO_BENCH_CLIP= sanitize memcheck test_video_cuda 'NvdecCuda.FramesEqualCpuFramesAndStayValidWhileHeld'
  fi
  step "CLI: --decoder cpu vs cuda"
  for d in cpu cuda; do
    "$bin/yolocu" detect --model "$model" --source "$carry/video/clip_h264.mp4" --device cuda --precision fp32 \
      --decoder $d --jsonl "$out/cli_$d.jsonl" --progress 0 --verbose >"$out/cli_$d.log" 2>&1 || row "FAIL  yolocu detect --decoder $d (log cli_$d.log)"
  done
  if cmp -s "$out/cli_cpu.jsonl" "$out/cli_cuda.jsonl" && [ -s "$out/cli_cpu.jsonl" ]; then
    row "PASS  yolocu detect --source clip_h264.mp4: --decoder cuda JSON lines == --decoder cpu ($(wc -l <"$out/cli_cpu.jsonl") frames); $(grep -o 'decoder cuda: [^)]*' "$out/cli_cuda.log" | head -1)"
  else
    row "FAIL  --decoder cuda JSON lines differ from --decoder cpu (cli_*.jsonl)"
  fi
  # two streams at once (H.264 + H.265, batched together; lines compared sorted: the interleaving
  # of the streams depends on timing) and --save-frames of GPU frames (copied back, same JPEGs)
  printf '%s\n%s\n' "$carry/video/clip_h264.mp4" "$carry/video/clip_h265.mkv" >"$out/two.txt"
  for d in cpu cuda; do
    "$bin/yolocu" detect --model "$model" --source "$out/two.txt" --device cuda --precision fp32 --decoder $d \
      --jsonl "$out/two_$d.jsonl" --save-frames --output-dir "$out/frames_$d" --progress 0 >"$out/two_$d.log" 2>&1 ||
      row "FAIL  yolocu detect two streams --decoder $d (log two_$d.log)"
  done
  if [ -s "$out/two_cpu.jsonl" ] && cmp -s <(sort "$out/two_cpu.jsonl") <(sort "$out/two_cuda.jsonl") &&
     diff -r -q "$out/frames_cpu" "$out/frames_cuda" >/dev/null; then
    row "PASS  two streams: --decoder cuda JSON lines and --save-frames JPEGs == --decoder cpu ($(wc -l <"$out/two_cpu.jsonl") frames)"
  else
    row "FAIL  two streams: --decoder cuda differs from --decoder cpu (two_*.jsonl, frames_*)"
  fi
  rm -rf "$out/frames_cpu" "$out/frames_cuda"
  # --save with the GPU detector: NVENC (h264_nvenc) when it opens; the video reads back
  "$bin/yolocu" detect --model "$model" --source "$carry/video/clip_h264.mp4" --device cuda --decoder cuda --save \
    --output-dir "$out/save" --progress 0 --verbose >"$out/save.log" 2>&1 || row "FAIL  yolocu detect --save (log save.log)"
  saved=$(ls "$out"/save/*.mp4 2>/dev/null | head -1)
  if [ -n "$saved" ] && [ -s "$saved" ]; then
    row "PASS  --save with the GPU detector: $(grep -o 'encodes with [^;]*' "$out/save.log" | head -1), $(stat -c %s "$saved") bytes"
  else
    row "FAIL  --save wrote no video (save.log)"
  fi
  rm -rf "$out/save"
fi

if [ "${SKIP_BENCH:-0}" != 1 ]; then
  unset YOLOCU_TUNE_QUICK
  # A tactic cache of this step's own (not the tests' quick-tuned one): the first batch-k detect
  # below starts cold, the second from the file (its derived sizes' plans restored).
  export YOLOCU_TACTIC_CACHE=$out/video_tactics.json
  rm -f "$YOLOCU_TACTIC_CACHE"
  [ "${BENCH_SEED:-0}" = 1 ] && seed_cache "$YOLOCU_TACTIC_CACHE"  # no cold start to measure
  k=${STREAMS:-8}
  kb=$(batch_of "$k")
  warm_of() { grep -o 'batch sizes 1\.\.[0-9]* warmed up in [0-9.]* s[^)]*)*' "$1" | tail -1; }
  first=1
  for codec in ${CODECS:-h264 hevc}; do
    cclip=$carry/video/bench_1080p_$codec.mp4
    [ -f "$cclip" ] || { row "no $cclip (CODECS: h264, hevc)"; continue; }
    cclip=$(looped_clip "$cclip")
    step "benchmark: 1080p $codec, decode and decode + yolov5n detect"
    for i in $(seq "$k"); do echo "$cclip"; done >"$out/streams_$codec.txt"
    for d in ${BENCH_DECODERS:-cpu cuda}; do  # BENCH_DECODERS=cuda: NVDEC only (128 streams)
      p=$out/${codec}_$d
      timeout 200 "$bin/bench_video_decode" "$cclip" --decoder $d --runs 3 >"${p}_decode_1.log" 2>&1
      timeout "${BENCH_TIMEOUT:-300}" "$bin/bench_video_decode" "$cclip" --decoder $d --runs "${DECODE_RUNS:-2}" --streams "$k" \
        >"${p}_decode_$k.log" 2>&1
      timeout 200 "$bin/yolocu" detect --model "$model" --source "$cclip" --device cuda --precision fp16 --decoder $d \
        --progress 0 >"${p}_detect_1.log" 2>&1
      tl=()
      [ $d = cuda ] && tl=(--timeline "$out/timeline_${codec}_$k.json")
      timeout "${BENCH_TIMEOUT:-300}" "$bin/yolocu" detect --model "$model" --source "$out/streams_$codec.txt" --device cuda \
        --precision fp16 --decoder $d --batch "$kb" --progress 0 "${tl[@]}" >"${p}_detect_$k.log" 2>&1
    done
    c=$out/${codec}_cpu g=$out/${codec}_cuda
    nframes=$(cat "${c}_decode_1.log" "${g}_decode_1.log" 2>/dev/null | grep -o '[0-9]* frames per pass' | head -1 | cut -d' ' -f1)
    {
      echo "| 1080p $codec ($(basename "$cclip"), ${nframes:-?} frames) | CPU decode (libavcodec + swscale) | NVDEC |"
      echo "|---|---|---|"
      echo "| decode only, 1 stream, frames/s | $(fps_of "${c}_decode_1.log") | $(fps_of "${g}_decode_1.log") |"
      echo "| decode only, $k streams, frames/s (middle half) | $(fps_of "${c}_decode_$k.log") ($(mid_of "${c}_decode_$k.log")) | $(fps_of "${g}_decode_$k.log") ($(mid_of "${g}_decode_$k.log")) |"
      echo "| decode + yolov5n FP16 detect, 1 stream, frames/s | $(fps_of "${c}_detect_1.log") | $(fps_of "${g}_detect_1.log") |"
      echo "| decode + yolov5n FP16 detect, $k streams (batch $kb), frames/s (middle half) | $(fps_of "${c}_detect_$k.log") ($(mid_of "${c}_detect_$k.log")) | $(fps_of "${g}_detect_$k.log") ($(mid_of "${g}_detect_$k.log")) |"
    } | tee -a "$summary"
    echo "(1080p30 streams sustained = the $k-stream detect rate / 30; CPU cores: $(nproc))" | tee -a "$summary"
    echo "$codec NVDEC decode only, $k streams: $(grep '^NVDEC utilisation' "${g}_decode_$k.log" | tail -1)" | tee -a "$summary"
    echo "$codec NVDEC decode only, $k streams, last pass: $(grep '^pass ' "${g}_decode_$k.log" | tail -1 | cut -d' ' -f3-)" | tee -a "$summary"
    echo "$codec NVDEC decode only, 1 stream: $(grep '^pass ' "${g}_decode_1.log" | cut -d' ' -f3- | tr '\n' ';')" | tee -a "$summary"
    echo "$codec NVDEC + detect, $k streams: $(grep '^NVDEC utilisation' "${g}_detect_$k.log" | tail -1)" | tee -a "$summary"
    echo "$codec NVDEC + detect, $k streams: $(grep '^timeline: [0-9]* batches' "${g}_detect_$k.log" | tail -1)" | tee -a "$summary"
    if ((first)); then
      echo "warm-up before the $k streams open: first start (--decoder cpu, cold cache): $(warm_of "${c}_detect_$k.log"); second start (--decoder cuda, the same cache file): $(warm_of "${g}_detect_$k.log")" | tee -a "$summary"
      first=0
    fi
  done
fi

if [ "${TRACK:-0}" = 1 ] || [ "${TRACK_ONLY:-0}" = 1 ]; then
  step "tracking: ${TRACK_STREAMS:-32} streams, detect vs detect + track"
  unset YOLOCU_TUNE_QUICK
  export YOLOCU_TACTIC_CACHE=$out/track_tactics.json
  seed_cache "$YOLOCU_TACTIC_CACHE"
  k=${TRACK_STREAMS:-32}
  timeout 300 "$bin/bench_track" "$model" "$clip" --device cuda --streams "$k" --batch "$k" --frames 20 --warmup 2 \
    >"$out/bench_track.log" 2>&1 || row "FAIL  bench_track (log bench_track.log)"
  tail -2 "$out/bench_track.log" | head -1 | sed 's/^/bench_track: /' | tee -a "$summary"
  grep '^device' "$out/bench_track.log" | tee -a "$summary"
  for i in $(seq "$k"); do echo "$clip"; done >"$out/track_streams.txt"
  for cmd in detect track detect track; do  # twice each, alternating: the spread shows the noise
    timeout 300 "$bin/yolocu" $cmd --model "$model" --source "$out/track_streams.txt" --device cuda --precision fp16 \
      --decoder cuda --batch "$k" --progress 0 >"$out/cli_$cmd.log" 2>&1 || row "FAIL  yolocu $cmd (log cli_$cmd.log)"
    row "yolocu $cmd, $k x 1080p H.264 streams, NVDEC, yolov5n FP16 batch $k: $(fps_of "$out/cli_$cmd.log") frames/s"
  done
fi

if [ "${START:-0}" = 1 ] || [ "${START_ONLY:-0}" = 1 ]; then
  k=${START_STREAMS:-128}
  step "start: $k sources opened at once, then 8 one at a time"
  for way in ${START_WAYS:-default hwaccel}; do
    log=$out/start_$way.log
    # shellcheck disable=SC2046  # way_env: several VAR=value words
    env $(way_env "$way") timeout 200 "$bin/bench_video_decode" "$clip" --decoder cuda \
      --opens "$k" >"$log" 2>&1 || row "FAIL  bench_video_decode --opens $k, $way (log $(basename "$log"))"
    row "start, $way: $(grep -h 'at once\|one at a time' "$log" | tr '\n' ' ')"
  done
  # two processes of half the sources each at once: a per-process limit shows as a faster start
  for p in 1 2; do
    timeout 200 "$bin/bench_video_decode" "$clip" --decoder cuda --opens $((k / 2)) >"$out/start_proc$p.log" 2>&1 &
  done
  wait
  row "start, default decoder, two processes of $((k / 2)) sources at once: $(grep -h 'sources at once:' "$out"/start_proc[12].log | tr '\n' ' ')"
fi

if [ "${WARM:-0}" = 1 ] || [ "${WARM_ONLY:-0}" = 1 ]; then
  # shellcheck source=scripts/gpu/warm_start.sh
  source "$(dirname "${BASH_SOURCE[0]}")/warm_start.sh"
  warm_start_modes "$bin/bench_warm_up" "$model" "${WARM_BATCH:-32}"
fi

if { [ "${GPUS2:-0}" = 1 ] || [ "${GPUS2_ONLY:-0}" = 1 ]; } && [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  k=${GPUS2_STREAMS:-64}
  step "two GPUs: $k streams on cuda:0 against cuda:0,1"
  unset YOLOCU_TUNE_QUICK
  export YOLOCU_TACTIC_CACHE=$out/gpus2_tactics.json
  seed_cache "$YOLOCU_TACTIC_CACHE"
  gclip=$(looped_clip "$clip")  # as the single-GPU benchmark's sources
  for i in $(seq "$k"); do echo "$gclip"; done >"$out/gpus2_streams.txt"
  half=$(( (k + 1) / 2 ))
  head -n "$half" "$out/gpus2_streams.txt" >"$out/gpus2_half.txt"
  frames=$(timeout 120 "$bin/bench_video_decode" "$gclip" --decoder cpu --runs 1 2>/dev/null | grep -o '[0-9]* frames per pass' | head -1 | cut -d' ' -f1)
  lines_of() { if [ -f "$out/$1.jsonl" ]; then wc -l <"$out/$1.jsonl"; else echo 0; fi; }  # a run's JSON lines
  # the cores a run used over its wall time (bash's time: wall, user, sys seconds in <name>.time)
  cores_of() { awk '$1 > 0 { printf "%.1f cores of '"$(nproc)"'", ($2 + $3) / $1 }' "$out/$1.time"; }
  timed() {  # timed <name> <command...>: its output in <name>.log, its wall / user / sys seconds in <name>.time
    local name=$1 TIMEFORMAT='%R %U %S'
    shift
    { time "$@" >"$out/$name.log" 2>&1; } 2>"$out/$name.time"
  }
  gdetect() {  # gdetect <name> <device> <streams file> <batch> [env...]: one yolocu detect run
    local name=$1 dev=$2 list=$3 b=$4
    shift 4
    timed "$name" env "$@" timeout 300 "$bin/yolocu" detect --model "$model" --source "$list" --device "$dev" --precision fp16 \
      --decoder cuda --batch "$b" --progress 0 --jsonl "$out/$name.jsonl" || row "FAIL  yolocu detect --device $dev (log $name.log)"
  }
  b1=$(batch_of "$k") b2=$(batch_of "$half")  # the streams of a GPU per batch
  # decode alone (no detection), one process: are the decoders the limit, and do they scale with GPUs?
  for devs in 0 0,1; do
    for way in ${GPUS2_WAYS:-default hwaccel own}; do
      n=gpus2_decode_${devs/,/_}_$way
      # shellcheck disable=SC2046  # way_env: several VAR=value words
      timed "$n" env $(way_env "$way") timeout 300 "$bin/bench_video_decode" "$gclip" --decoder cuda --streams "$k" \
        --runs "${DECODE_RUNS:-2}" --devices "$devs"
      row "decode alone, $k streams, NVDEC on GPU(s) $devs, $way: $(fps_of "$out/$n.log") frames/s ($(mid_of "$out/$n.log") in the middle half), $(cores_of "$n"); $(grep -h 'NVDEC utilisation\|GPU [0-9]* mean' "$out/$n.log" | tr '\n' ' '); last pass: $(grep '^pass ' "$out/$n.log" | tail -1 | cut -d' ' -f3-)"
    done
  done
  for r in $(seq "${GPUS2_REPEATS:-2}"); do  # alternating: the spread shows the noise
    gdetect "gpus2_one_$r" cuda:0 "$out/gpus2_streams.txt" "$b1"
    row "yolocu detect --device cuda:0, $k x 1080p H.264 streams, NVDEC, yolov5n FP16: $(fps_of "$out/gpus2_one_$r.log") frames/s ($(mid_of "$out/gpus2_one_$r.log") in the middle half), $(cores_of "gpus2_one_$r"), $(lines_of "gpus2_one_$r") JSON lines (expected $k x ${frames:-?})"
    gdetect "gpus2_two_$r" cuda:0,1 "$out/gpus2_streams.txt" "$b2"
    row "yolocu detect --device cuda:0,1, $k streams: $(fps_of "$out/gpus2_two_$r.log") frames/s ($(mid_of "$out/gpus2_two_$r.log") in the middle half), $(cores_of "gpus2_two_$r"), $(lines_of "gpus2_two_$r") JSON lines"
    for way in ${GPUS2_WAYS:-default hwaccel own}; do
      [ "$way" = default ] && continue  # (the cuda:0 run above)
      # shellcheck disable=SC2046  # way_env: several VAR=value words
      gdetect "gpus2_${way}_$r" cuda:0 "$out/gpus2_streams.txt" "$b1" $(way_env "$way")
      row "yolocu detect --device cuda:0, $k streams, decoder $way: $(fps_of "$out/gpus2_${way}_$r.log") frames/s ($(mid_of "$out/gpus2_${way}_$r.log") in the middle half), $(cores_of "gpus2_${way}_$r"), $(lines_of "gpus2_${way}_$r") JSON lines"
    done
    # two processes, one per GPU, half the streams each: a limit of one process shows as the difference
    t0=$(date +%s.%N)
    gdetect "gpus2_proc0_$r" cuda:0 "$out/gpus2_half.txt" "$b2" &
    gdetect "gpus2_proc1_$r" cuda:1 "$out/gpus2_half.txt" "$b2" &
    wait
    t1=$(date +%s.%N)
    lines=$(( $(lines_of "gpus2_proc0_$r") + $(lines_of "gpus2_proc1_$r") ))
    row "two processes (cuda:0, cuda:1), $half streams each: $(fps_of "$out/gpus2_proc0_$r.log") + $(fps_of "$out/gpus2_proc1_$r.log") frames/s ($(mid_of "$out/gpus2_proc0_$r.log") + $(mid_of "$out/gpus2_proc1_$r.log") in the middle halves); $lines JSON lines in $(python3 -c "print(f'{$t1 - $t0:.1f}')") s of wall time (start included)"
  done
fi

if [ "${LIVE:-0}" = 1 ] || [ "${LIVE_ONLY:-0}" = 1 ]; then
  k=${LIVE_STREAMS:-64} secs=${LIVE_SECONDS:-60}
  # as a camera sends it (no B-frames: bench_1080p_h264_live.mp4); LIVE_BFRAMES=1: the benchmark clip,
  # whose B-frames hold each picture in the decoder until later packets arrive
  live_clip=$carry/video/bench_1080p_h264_live.mp4
  { [ "${LIVE_BFRAMES:-0}" = 1 ] || [ ! -f "$live_clip" ]; } && live_clip=$clip
  step "live: $k RTSP streams of $(basename "$live_clip") pushed in real time for $secs s to yolocu detect --rtsp-listen"
  unset YOLOCU_TUNE_QUICK
  export YOLOCU_TACTIC_CACHE=$out/live_tactics.json
  seed_cache "$YOLOCU_TACTIC_CACHE"
  base=$((20000 + RANDOM % 20000))
  for i in $(seq 0 $((k - 1))); do echo "rtsp://127.0.0.1:$((base + i))/live"; done >"$out/live.txt"
  b=$(batch_of "$k")
  timeout $((secs + 240)) "$bin/yolocu" detect --model "$model" --source "$out/live.txt" --rtsp-listen --device cuda \
    --precision fp16 --decoder cuda --batch "$b" --timeout 120 --reconnects 0 --latency --progress 10 \
    --jsonl "$out/live.jsonl" >"$out/live.log" 2>&1 &
  y=$!
  grep -q "warmed up" <(timeout 200 tail -f "$out/live.log") || true  # the detector is ready: the sources open next
  for i in $(seq 0 $((k - 1))); do  # each publisher retries until its port listens
    ( for _ in $(seq 100); do
        "$bin/ffmpeg" -nostdin -hide_banner -loglevel error -re -stream_loop -1 -t "$secs" -i "$live_clip" -c copy -f rtsp \
          -rtsp_transport tcp "rtsp://127.0.0.1:$((base + i))/live" && break
        kill -0 $y 2>/dev/null || break
        sleep 0.2
      done ) >"$out/publisher_$i.log" 2>&1 &
  done
  wait $y || row "FAIL  yolocu detect --rtsp-listen (log live.log)"
  wait
  row "live: $k x 1080p30 H.264 RTSP streams of $(basename "$live_clip") for $secs s ($((k * 30 * secs)) frames sent): $(grep 'frames from' "$out/live.log" | tail -1)"
  row "live: $(grep '^latency from packet' "$out/live.log" | tail -1)"
fi

for c in gpus2 live track; do  # one cache back, compressed (about 30x): carry it as .gpu-video/carry/tactics.json.xz
  [ -s "$out/${c}_tactics.json" ] && xz -6 -c "$out/${c}_tactics.json" >"$final/tactics.json.xz" && break
done
tar -C "$final" --exclude='*.jpg' --exclude='*.jsonl' --exclude='*tactics*.json' -czf "$final/logs.tar.gz" logs && rm -rf "$out"
echo
echo "================ summary ================"
cat "$summary"
