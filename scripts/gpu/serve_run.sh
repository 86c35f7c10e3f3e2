#!/usr/bin/env bash
# The GPU-machine run of the serving measurement (docs/serving.md, docs/performance.md section 8):
# tritonserver with the yolocu backend on this machine's GPUs, loaded with JPEG bytes of coco128 over
# gRPC by bench/serve_load.py (Python clients; requests of 8 and of 1 image, closed loop; then
# 1-image requests at half the measured rate for the p99 latency) and by Triton's perf_analyzer (C++,
# async; the same three loads), beside `yolocu bench --from-jpeg` in the same call;
# then the model unloaded and loaded twice through the repository API (GPU memory each time); with
# two or more GPUs the same loads on one instance group spanning two GPUs.
# Needs .gpu-serve/bundle.tar.xz from scripts/gpu/serve_bundle.sh (carry [".gpu-serve"]).
#   bash scripts/gpu/serve_run.sh
# Environment: SERVE_MAX_BATCH (32), SERVE_INSTANCES (2 per GPU), SERVE_PROCS (12 client processes),
# SERVE_THREADS (8 requests in flight per process), SERVE_SECONDS (15 per load), SERVE_DECODE (gpu),
# SERVE_QUEUE_DELAY_US (500: the dynamic batcher's max_queue_delay_microseconds), SERVE_SLOW_MS (0:
# the backend's slow_execution_ms, whose log lines land in server_<name>.log),
# PA_INFLIGHT_B8 (32) and PA_INFLIGHT_B1 (128): perf_analyzer's requests in flight per GPU;
# PA_PROCS (1): perf_analyzer processes sharing those requests (each its own connection; the rate is
# their sum); PA_DISTINCT (1): one sender thread a process, the processes' walks through the images
# apart, so that no image is in flight twice (0: perf_analyzer's own threads, which send copies; see
# pa()); PA_RATE_PROCS (8): the processes that share a fixed request rate when PA_DISTINCT=1;
# PA_COMPARE=1: perf_analyzer's 1-image loads (SERVE_THREADS_ONLY's, SERVE_SWEEP's) both ways (PA_DISTINCT=0, then 1);
# PA_DISTRIBUTION (constant): its arrivals at a fixed request rate (constant or poisson);
# SERVE_EXTRA: more `serve.py` flags for the full run's servers (e.g. --blocking-sync);
# SERVE_PIN=1: the server on the first half of the cores and the load generators on the other half
# (taskset), so that clients that a real deployment runs elsewhere take no core from the server;
# SERVE_SWEEP ("500 100p 100x3pa", see sweep()) instead runs (SERVE_REPEAT: its half load that many times), for each server setting, the 1-image
# closed loop and both clients at half its rate (the latency at 50% load), and nothing else;
# SERVE_FAST_START=1 (see below) the model's load with fast_start on a cold tactic cache, then a load;
# SERVE_THREADS_ONLY=1 only the 8- and 1-image loads on each server (one GPU, then two), each with
# Triton's times, the server's cores and its busiest threads, and the backend's counters after it.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
g=/tmp/yolocu-serve
rm -rf "$g" && mkdir -p "$g" && tar -C "$g" -xJf .gpu-serve/bundle.tar.xz || { echo "no bundle: run scripts/gpu/serve_bundle.sh first"; exit 1; }
mkdir -p "$g/site" && for w in .gpu-serve/wheels/*.whl; do python3 -m zipfile -e "$w" "$g/site"; done  # no unzip there
ngpu=$(nvidia-smi -L | wc -l)
echo "bundle of commit $(cat "$g/COMMIT"); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $ngpu GPU(s); $(nproc) cores"
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(grep -c ^processor /proc/cpuinfo) logical CPUs; GPU 0 idle: $(nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.mem,pstate,persistence_mode --format=csv,noheader -i 0)"
lib_dir() { dirname "$(find / -name "$1" -not -path '/proc/*' 2>/dev/null | head -1)"; }
export LD_LIBRARY_PATH=$g/lib:$(lib_dir 'libcudnn.so.9*'):$(lib_dir 'libcudart.so.13*'):$(lib_dir 'libnvrtc.so.13*'):${LD_LIBRARY_PATH:-}
export PYTHONPATH=$g/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
batch=${SERVE_MAX_BATCH:-32}
inst=${SERVE_INSTANCES:-2}
procs=${SERVE_PROCS:-12}
threads=${SERVE_THREADS:-8}
secs=${SERVE_SECONDS:-15}
m=$g/data/models/yolov5n.onnx
imgs=$g/data/coco128/images/train2017
cache=$g/tactics.json
# A tactic cache of an earlier call (returned compressed as $OUT/tactics.json.xz, about 30x smaller)
# skips the cold tuning: carry it as .gpu-serve/tactics.json.xz (or uncompressed as tactics.json).
if [ -f .gpu-serve/tactics.json.xz ]; then
  xz -dc .gpu-serve/tactics.json.xz >"$cache"
elif [ -f .gpu-serve/tactics.json ]; then
  cp .gpu-serve/tactics.json "$cache"
fi
keep_cache() { [ -s "$cache" ] && xz -6 -c "$cache" >"$out/tactics.json.xz"; return 0; }

serve_extra=${SERVE_EXTRA:-}
# A bundle of SERVE_ASAN=1 (serve_bundle.sh): tritonserver with the ASan runtime preloaded (CUDA needs
# the shadow gap unprotected); the first heap error stops the server with its report in the log.
asan_env=
if [ -f "$g/lib/asan/libasan.so.8" ]; then
  asan_env="env LD_PRELOAD=$g/lib/asan/libasan.so.8 ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0:halt_on_error=1:alloc_dealloc_mismatch=0"
  echo "== AddressSanitizer: the backend built with ASan, its runtime preloaded into tritonserver"
fi
half_cores=$(( $(nproc) / 2 ))
pin_halves() {  # the server on the first half of the cores, the load generators on the other (taskset)
  command -v taskset >/dev/null || return 1
  server_pin="taskset -c 0-$((half_cores - 1))" client_pin="taskset -c $half_cores-$(($(nproc) - 1))"
}
# GPU 0's NUMA-local cores (sysfs local_cpulist of its PCI device; nvidia-smi's bus id has an 8-digit domain)
gpu0_cpus=$(id=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 | tr 'A-F' 'a-f'); cat "/sys/bus/pci/devices/${id:4}/local_cpulist" 2>/dev/null)
pin_numa() {  # the server on GPU 0's NUMA-local cores, the load generators on the rest
  local list=$gpu0_cpus rest
  command -v taskset >/dev/null && [ -n "$list" ] || return 1
  rest=$(python3 - "$list" "$(nproc)" <<'PY'
import sys
cores = set()
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    cores.update(range(int(a), int(b or a) + 1))
print(",".join(str(c) for c in range(int(sys.argv[2])) if c not in cores))
PY
)
  [ -n "$rest" ] || return 1
  server_pin="taskset -c $list" client_pin="taskset -c $rest"
}
echo "GPU 0's NUMA-local cores: ${gpu0_cpus:-unknown}"
if [ "${SERVE_PIN:-0}" = 1 ] && pin_halves; then
  echo "== the server (and the library's bench) on cores 0-$((half_cores - 1)), the load generators on cores $half_cores-$(($(nproc) - 1))"
fi
threads_only=${SERVE_THREADS_ONLY:-0}  # SERVE_THREADS_ONLY=1: measured_loads() alone on each server
if [ -z "$asan_env" ] && [ "${SERVE_FAST_START:-0}" != 1 ] && [ "$threads_only" != 1 ]; then
  echo "== the library beside it: yolocu bench --from-jpeg (batch $batch, nvJPEG, 2 contexts)"
  timeout 300 ${server_pin:-} "$g/bin/yolocu" bench --model "$m" --device cuda --from-jpeg "$imgs" --images 4096 --batches "$batch" \
    --contexts 2 --decode gpu --decode-threads "$( [ -n "${server_pin:-}" ] && echo "$half_cores" || nproc)" --tactic-cache "$cache" 2>&1 | tee "$out/bench_from_jpeg.log" | tail -6
fi

serve() {  # serve <gpus, e.g. "0" or "0, 1"> <log name>: starts tritonserver, waits until the model is ready
  local gpus=$1 name=$2 repo=$g/repo-$2
  python3 python/yolocu/serve.py --model "$m" --name yolo --device cuda --gpus ${gpus//,/} --instances "$inst" \
    --max-batch "$batch" --max-queue-delay-us "${SERVE_QUEUE_DELAY_US:-500}" --max-queue-size 4096 --decode "${SERVE_DECODE:-gpu}" \
    --slow-execution-ms "${SERVE_SLOW_MS:-0}" ${serve_extra:-} \
    --tactic-cache "$cache" --write-repo "$repo" >/dev/null || return 1
  ${server_env:-} ${asan_env:-} ${server_pin:-} "$g/triton/bin/tritonserver" --model-repository "$repo" --backend-directory "$g/backends" --model-control-mode explicit \
    --load-model yolo --http-port 8000 --grpc-port 8001 --metrics-port 8002 ${server_extra:-} >"$out/server_$name.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 300); do
    curl -sf localhost:8000/v2/models/yolo/ready >/dev/null && { grep "yolocu backend" "$out/server_$name.log" | sed 's/^/  /'; return 0; }
    kill -0 $server_pid 2>/dev/null || break
    sleep 1
  done
  echo "server did not come up:"; tail -30 "$out/server_$name.log"; return 1
}
stop() { kill -TERM "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; }
load() {  # load <name> <images per request> [rate]
  ${client_pin:-} python3 bench/serve_load.py --url 127.0.0.1:8001 --model yolo --images "$imgs" --per-request "$2" --procs "$procs" \
    --threads "$threads" --seconds "$secs" ${3:+--rate "$3"} --json "$out/load_$1.json" 2>&1 | tee "$out/load_$1.log" | tail -1
}

# Triton's perf_analyzer (carried, with its libraries in perf/lib): async gRPC, real JPEGs round robin
# (bench/perf_analyzer_input.py), requests of $2 images, $3 requests in flight, or an open-loop
# request rate $4; its CSV (images/s, latency percentiles in us) in $out/pa_<name>_<i>.csv.
# perf_analyzer 2.41 gives each sender thread one context whose walk through the data starts at the
# first entry and steps by the number of threads: with T threads, every thread sends the same images
# at the same time (T copies of each in flight) and only every T-th image is ever sent. So by default
# (PA_DISTINCT=1) every process runs one sender thread (--max-threads 1), which walks all 128 images,
# and k processes start their walks 128/k images apart: the requests in flight are different images,
# as independent clients' are. PA_DISTINCT=0: perf_analyzer's own threads, every process from the
# first image (the copies).
pa_json=$g/pa_images.json
python3 bench/perf_analyzer_input.py --images "$imgs" --out "$pa_json" >/dev/null
pa() {  # pa <name> <images per request> <requests in flight> [requests/s]
  local distinct=${PA_DISTINCT:-1} k=${PA_PROCS:-1} i input threads=()
  # rate mode: a fixed request rate split over the processes; the latency tail moves the average that
  # perf_analyzer stabilises on (50% there); with its own threads, 16 (4 did not keep up with the
  # half-load rate)
  local stable=20 mode
  if [ -n "${4:-}" ]; then
    stable=50
    if [ "$distinct" = 1 ]; then k=${PA_RATE_PROCS:-8}; else k=1 threads=(--max-threads 16); fi
    mode=(--request-rate-range "$(python3 -c "print(f'{$4 / $k:.1f}')")" --request-distribution "${PA_DISTRIBUTION:-constant}")
  else
    # PA_PROCS=k: k processes at once, each with its own gRPC connection and 1/k of the requests in
    # flight; the rate is their sum (one process's connection can be the limit, not the server)
    mode=(--concurrency-range "$(( ($3 + k - 1) / k ))")
  fi
  [ "$distinct" = 1 ] && threads=(--max-threads 1)
  # k processes: each stops after its first three windows (a stability test one passed before the
  # others let it stop early and the others measure alone), so their windows are the same 12 s
  [ "$k" -gt 1 ] && stable=100
  for i in $(seq 1 "$k"); do
    input=$pa_json
    if [ "$distinct" = 1 ] && [ "$k" -gt 1 ]; then
      input=$g/pa_images_${k}_$i.json
      [ -f "$input" ] || python3 bench/perf_analyzer_input.py --images "$imgs" --rotate $(( (i - 1) * 128 / k )) --out "$input" >/dev/null
    fi
    LD_LIBRARY_PATH=$g/perf/lib:$LD_LIBRARY_PATH timeout 150 ${client_pin:-} "$g/perf/bin/perf_analyzer" -m yolo -u 127.0.0.1:8001 -i grpc \
      --async -b "$2" --input-data "$input" "${mode[@]}" "${threads[@]}" --measurement-interval 4000 --max-trials 8 \
      --stability-percentage "$stable" -f "$out/pa_$1_$i.csv" >"$out/pa_$1_$i.log" 2>&1 &
  done
  wait
  python3 - "$1" "$k" "$out" "$distinct" <<'PY' || { echo "pa_$1: no result:"; tail -5 "$out/pa_$1_1.log"; }
import csv, sys
name, k, out, distinct = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
rows = [next(csv.DictReader(open(f"{out}/pa_{name}_{i}.csv"))) for i in range(1, k + 1)]
rate = sum(float(r["Inferences/Second"]) for r in rows)
ms = lambda key: " / ".join(f"{int(r[key]) / 1000:.2f}" for r in rows)
how = ("distinct images in flight" if distinct else "perf_analyzer's threads: copies in flight") + (f", {k} processes" if k > 1 else "")
print(f"perf_analyzer {name} ({how}): {rate:.1f} images/s, p50 {ms('p50 latency')} ms, p99 {ms('p99 latency')} ms")
PY
}

gpu0_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | tr -d ' '; }
repo_api() { curl -sf -X POST "localhost:8000/v2/repository/models/yolo/$1" -d '{}' >/dev/null; }
unload_cycles() {  # the model unloaded and loaded twice through the repository API: GPU 0's memory each time
  local i
  echo "-- repository API: unload / load (GPU 0 memory used, MiB; before the server: $base_mib)"
  for i in 1 2; do
    repo_api unload || echo "unload $i failed"
    sleep 3
    echo "   cycle $i: loaded $loaded_mib -> unloaded $(gpu0_mib)"
    repo_api load || echo "load $i failed"
    loaded_mib=$(gpu0_mib)
  done
  python3 bench/serve_load.py --url 127.0.0.1:8001 --model yolo --images "$imgs" --per-request 8 --procs 1 --threads 1 \
    --seconds 2 --warmup 1 2>&1 | tail -1 | sed 's/^/   after reloading: /'
}

stats() {  # Triton's statistics, and the CPU time so far: the machine's (/proc/stat) and the server's
  curl -sf localhost:8000/v2/models/yolo/stats >"$out/stats_$1.json" || echo '{}' >"$out/stats_$1.json"
  date +%s.%N >"$out/time_$1.txt"
  { head -1 /proc/stat; cat "/proc/$server_pid/stat" 2>/dev/null || echo; } >"$out/cpu_$1.txt"
  cat /proc/"$server_pid"/task/*/stat >"$out/threads_$1.txt" 2>/dev/null  # each thread's CPU time
}
measured() {  # measured <log> <command...>: the command, then Triton's times, the cores and GPU 0's clocks over it, appended to <log>
  local log=$1 smi
  shift
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,utilization.gpu,power.draw,pstate --format=csv,noheader,nounits -i 0 \
    -lms 250 >"$out/clocks.csv" 2>/dev/null &
  smi=$!
  ${server_pin:-} python3 - "$secs" "$out/jitter.txt" <<'PY' &
# A core of the server's asks to wake 1 ms later, over and over for the load's seconds: how late it
# wakes (p50 / p99 / max) says whether the host's threads wait for a core that is not there (a
# virtual machine's CPU taken by its host, frequency changes), independently of the backend.
import statistics, sys, time
end, late = time.monotonic() + float(sys.argv[1]), []
while time.monotonic() < end:
    t = time.perf_counter(); time.sleep(0.001); late.append((time.perf_counter() - t - 0.001) * 1e3)
late.sort()
q = lambda f: late[min(len(late) - 1, int(f * len(late)))]
open(sys.argv[2], "w").write(f"  host wake-up lateness over the load ({len(late)} sleeps of 1 ms on a server core): "
                             f"p50 {q(0.5):.3f} ms, p99 {q(0.99):.3f} ms, p99.9 {q(0.999):.3f} ms, max {late[-1]:.3f} ms, "
                             f"late by > 1 ms {sum(x > 1 for x in late)}\n")
PY
  local probe=$!
  stats a; "$@"; stats b
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
  wait "$probe" 2>/dev/null
  { server_times a b; gpu_clocks "$out/clocks.csv"; cat "$out/jitter.txt" 2>/dev/null; } | tee -a "$log"
}
gpu_clocks() {  # the samples of nvidia-smi over a load: SM clock, memory clock, utilisation, power, P-states
  python3 - "$1" <<'PY'
import statistics, sys
rows = [[c.strip() for c in l.split(",")] for l in open(sys.argv[1]) if l.count(",") == 4]
num = lambda i: [float(r[i]) for r in rows if r[i].replace(".", "", 1).isdigit()]
if rows:
    sm, mem, util, power = num(0), num(1), num(2), num(3)
    m = lambda v: f"{statistics.median(v):.0f}" if v else "?"
    print(f"  GPU 0 over the load ({len(rows)} samples): SM clock median {m(sm)} MHz (min {min(sm, default=0):.0f}), "
          f"memory clock {m(mem)} MHz, utilisation median {m(util)}%, power median {m(power)} W, "
          f"P-states {sorted(set(r[4] for r in rows))}")
PY
}
pa_summary() { pa "$@" | tee -a "$out/pa_summary.txt"; }  # pa, its line kept in pa_summary.txt
server_times() {  # server_times <before> <after>: Triton's own mean times per request between two stats
  # snapshots, the cores the server, everything else (the clients) and nothing used meanwhile, and the
  # server's own rate between the snapshots
  python3 - "$out/stats_$1.json" "$out/stats_$2.json" "$out/cpu_$1.txt" "$out/cpu_$2.txt" "$out/time_$1.txt" "$out/time_$2.txt" <<'PY'
import json, sys
def cpu(f):
    machine, server = (open(f).read().split("\n") + [""])[:2]
    t = [int(x) for x in machine.split()[1:]]
    fields = server.rsplit(")", 1)[-1].split()  # after the command name: state, ppid, ... utime stime at 12, 13
    steal = t[7] if len(t) > 7 else 0  # a virtual machine's time its host gave to others
    return sum(t[:8]), t[3] + (t[4] if len(t) > 4 else 0), (int(fields[11]) + int(fields[12])) if len(fields) > 12 else 0, steal
(t0, i0, s0, st0), (t1, i1, s1, st1) = cpu(sys.argv[3]), cpu(sys.argv[4])
if t1 > t0:
    import os
    n = os.cpu_count()
    share = lambda j: n * j / (t1 - t0)
    print(f"  cpu over the load (cores of {n}): server {share(s1 - s0):.1f}, everything else {share((t1 - t0) - (i1 - i0) - (s1 - s0)):.1f}, "
          f"idle {share(i1 - i0):.1f}, stolen by the host {share(st1 - st0):.2f}")
def get(f):
    s = json.load(open(f)).get("model_stats", [{}])[0].get("inference_stats", {})
    return {k: (v.get("count", 0), v.get("ns", 0)) for k, v in s.items()}
a, b = get(sys.argv[1]), get(sys.argv[2])
n = b.get("success", (0, 0))[0] - a.get("success", (0, 0))[0]
if n:
    ms = {k: (b[k][1] - a.get(k, (0, 0))[1]) / n / 1e6 for k in ("success", "queue", "compute_input", "compute_infer", "compute_output") if k in b}
    print("  server side, mean per request (ms): " + ", ".join(f"{k} {v:.3f}" for k, v in ms.items()))
# The server's rate from snapshot to snapshot: every client's ramp-up and tail included, so a lower
# bound on what it sustained, but one window for all clients (perf_analyzer processes each report a
# rate over windows of their own, which need not overlap)
dt = float(open(sys.argv[6]).read()) - float(open(sys.argv[5]).read())
images = lambda f: json.load(open(f)).get("model_stats", [{}])[0].get("inference_count", 0)
if n and dt > 0:
    print(f"  server side, from snapshot to snapshot ({dt:.1f} s): {(images(sys.argv[2]) - images(sys.argv[1])) / dt:.1f} images/s, {n / dt:.1f} requests/s")
PY
  thread_times "$1" "$2"
}
thread_times() {  # thread_times <before> <after>: the server's busiest threads over the load, in cores
  python3 - "$out/threads_$1.txt" "$out/threads_$2.txt" "$out/cpu_$1.txt" "$out/cpu_$2.txt" <<'PY'
import collections, os, sys
def threads(f):
    out = {}
    for line in open(f) if os.path.exists(f) else []:
        head, _, rest = line.rpartition(")")
        tid, _, name = head.partition(" (")
        fields = rest.split()
        if len(fields) > 12: out[tid] = (name, int(fields[11]) + int(fields[12]))
    return out
a, b = threads(sys.argv[1]), threads(sys.argv[2])
jiffies = lambda f: sum(int(x) for x in open(f).readline().split()[1:9])
span = (jiffies(sys.argv[4]) - jiffies(sys.argv[3])) / os.cpu_count()  # the load's seconds, in ticks
if span > 0 and b:
    busy = sorted(((t1 - a.get(tid, (n, 0))[1]) / span, n, tid) for tid, (n, t1) in b.items())[::-1]
    by_name = collections.Counter()
    for c, n, _ in busy: by_name[n] += c
    print("  server threads over the load, cores: " + ", ".join(f"{n}[{tid}] {c:.2f}" for c, n, tid in busy[:10]))
    print("  by thread name, cores (threads): " + ", ".join(f"{n} {c:.2f} ({sum(1 for _, m, _ in busy if m == n)})"
                                                           for n, c in by_name.most_common(8)))
PY
}

# SERVE_SWEEP entries: <queue delay us> then letters: x<N>: N instances; p: the server on the first
# half of the cores and the clients on the other half (taskset); a: --grpc-infer-allocation-pool-size
# 256; h: nvJPEG's hybrid backend instead of the hardware decoder (YOLOCU_NVJPEG_BACKEND=hybrid);
# w: nvJPEG lists in power-of-two parts, each size on a state initialised once (YOLOCU_NVJPEG_POW2_LISTS=1);
# g: --engine-graphs (the default since the backend's engine_graphs is on; serve.py of this tree decides);
# n: the server on GPU 0's NUMA-local cores and the clients on the others; s<K>: the forward as K graphs (--engine-graph-segments K); b: the instances wait for the GPU asleep
# instead of spinning a core (parameter blocking_sync); r: the instances answer their requests
# themselves instead of on their response thread (--sync-responses); t: Triton's request trace (every 20th
# request's timestamps: server-side latency, queue and compute percentiles) of the Python clients at
# SERVE_HALF_RATE requests/s alone (no closed loop, no perf_analyzer). SERVE_HALF_RATE set: every
# setting's half load at that rate, without the closed loop first.
sweep() {
  local spec d n r rate
  for spec in $SERVE_SWEEP; do
    d=${spec%%[!0-9]*}; n=$inst
    [[ $spec =~ x([0-9]+) ]] && n=${BASH_REMATCH[1]}
    server_pin= client_pin= server_extra= server_env= serve_extra=
    [[ $spec == *b* ]] && serve_extra="--blocking-sync"
    [[ $spec == *r* ]] && serve_extra="$serve_extra --sync-responses"
    [[ $spec == *g* ]] && serve_extra="$serve_extra --engine-graphs"
    [[ $spec =~ s([0-9]+) ]] && serve_extra="$serve_extra --engine-graph-segments ${BASH_REMATCH[1]}"
    [[ $spec == *h* ]] && server_env="env YOLOCU_NVJPEG_BACKEND=hybrid"
    [[ $spec == *w* ]] && server_env="${server_env:-env} YOLOCU_NVJPEG_POW2_LISTS=1"
    [[ $spec == *p* ]] && pin_halves
    [[ $spec == *n* ]] && pin_numa
    [[ $spec == *a* ]] && server_extra="--grpc-infer-allocation-pool-size 256"
    [[ $spec == *t* ]] && server_extra="$server_extra --trace-config triton,file=$out/trace_$spec.json --trace-config level=TIMESTAMPS --trace-config rate=20"
    echo "== sweep $spec: max_queue_delay_microseconds $d, $n instances on GPU 0${server_pin:+, server on cores ${server_pin#taskset -c }}${server_extra:+, $server_extra}${server_env:+, $server_env}"
    inst=$n SERVE_QUEUE_DELAY_US=$d serve "0" "sweep_$spec" || continue
    if [[ $spec == *t* ]] || [ -n "${SERVE_HALF_RATE:-}" ]; then  # Python clients at SERVE_HALF_RATE (5000) requests/s
      rate=${SERVE_HALF_RATE:-5000}
    else
      load "sweep_${spec}_b1" 1
      rate=$(python3 -c "import json; print(round(json.load(open('$out/load_sweep_${spec}_b1.json'))['requests_per_s'] / 2))")
    fi
    echo "-- 1-image requests at half that rate ($rate requests/s, open loop)"
    measured "$out/load_sweep_${spec}_b1_half.log" load "sweep_${spec}_b1_half" 1 "$rate"
    for r in $(seq 2 "${SERVE_REPEAT:-1}"); do  # the same load again on the same server: the spread between runs
      load "sweep_${spec}_b1_half_$r" 1 "$rate"
    done
    if [[ $spec != *t* ]]; then
      [ "${PA_COMPARE:-0}" = 1 ] && PA_DISTINCT=0 measured "$out/pa_summary.txt" pa_summary "sweep_${spec}_b1_half_copies" 1 - "$rate"
      measured "$out/pa_summary.txt" pa_summary "sweep_${spec}_b1_half" 1 - "$rate"
    fi
    stop
    grep -ho 'slow execution.*' "$out/server_sweep_$spec.log" | tail -30 | sed 's/^/  /' | tee -a "$out/pa_summary.txt"
    [ -f "$out/trace_$spec.json" ] && python3 - "$out/trace_$spec.json" <<'PY' | tee -a "$out/pa_summary.txt"
import collections, json, sys
import numpy as np
ts = collections.defaultdict(dict)  # Triton writes a request's timestamps in several entries of one id
for e in json.load(open(sys.argv[1])):
    for t in e.get("timestamps", []):
        ts[e["id"]][t["name"]] = t["ns"]
def span(a, b):
    return np.array([(t[b] - t[a]) / 1e6 for t in ts.values() if a in t and b in t])
for name, a, b in (("request (server)", "REQUEST_START", "REQUEST_END"), ("queue", "QUEUE_START", "COMPUTE_START"),
                   ("compute", "COMPUTE_START", "COMPUTE_END")):
    v = span(a, b)
    if len(v):
        print(f"  trace {name}: {len(v)} requests, p50 {np.percentile(v, 50):.2f} ms, p99 {np.percentile(v, 99):.2f} ms, max {v.max():.2f} ms")
PY
  done
  server_pin= client_pin= server_extra= server_env= serve_extra=
}

base_mib=$(gpu0_mib)
# SERVE_FAST_START=1: instead of the loads below, the backend's fast_start on a cold tactic cache (none
# carried): the seconds until Triton reports the model ready, the instances' build lines, then
# 8-image and 1-image requests for SERVE_SECONDS each (every batch size of the dynamic batcher runs).
if [ "${SERVE_FAST_START:-0}" = 1 ]; then
  rm -f "$cache"
  serve_extra="${serve_extra:-} --fast-start"
  echo "== fast_start: one GPU, $inst instances, max_batch_size $batch, cold tactic cache"
  t0=$(date +%s.%N)
  if serve "0" fast_start; then
    echo "-- model ready after $(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')") s (server start included)"
    load fast_start_b8 8
    load fast_start_b1 1
    stop
  fi
  exit 0
fi
if [ -n "${SERVE_SWEEP:-}" ]; then
  sweep
  for backend in ${SERVE_SMALL_BENCH:+hardware hybrid}; do  # SERVE_SMALL_BENCH=1: what one execution costs at small batches
    echo "== the library at small batches, nvJPEG $backend, one context, one thread"
    YOLOCU_NVJPEG_BACKEND=$backend timeout 150 "$g/bin/yolocu" bench --model "$m" --device cuda --from-jpeg "$imgs" --images 1024 \
      --batches 1 4 8 32 --contexts 1 --decode gpu --decode-threads 1 --tactic-cache "$cache" 2>&1 | tee "$out/bench_small_$backend.log" |
      grep -E "^(cuda|device) |^ +host ms"
  done
  echo "== summary"; for f in "$out"/load_*.log; do echo "$(basename "$f" .log): $(tail -2 "$f" | tr '\n' ' ')"; done
  cat "$out/pa_summary.txt" 2>/dev/null
  (cd "$out" && tar -czf /tmp/sweep_logs.tar.gz . && find . -mindepth 1 -delete && mv /tmp/sweep_logs.tar.gz logs.tar.gz)
  keep_cache
  exit 0
fi
measured_loads() {  # measured_loads <name> <GPUs>: 8- and 1-image Python loads and perf_analyzer's 1-image load,
  # each with Triton's times, the server's cores and its busiest threads; the backend's counters
  # after each (images decoded, of them on the CPU: what each client's images cost the decoder)
  measured "$out/$1_measured.txt" load "$1_b8" 8
  backend_counters "after the 8-image load"
  measured "$out/$1_measured.txt" load "$1_b1" 1
  backend_counters "after the 1-image load"
  if [ "${PA_COMPARE:-0}" = 1 ]; then
    PA_DISTINCT=0 measured "$out/$1_measured.txt" pa_summary "$1_b1_copies" 1 "$(($2 * ${PA_INFLIGHT_B1:-128}))"
    backend_counters "after perf_analyzer's 1-image load with copies"
  fi
  measured "$out/$1_measured.txt" pa_summary "$1_b1" 1 "$(($2 * ${PA_INFLIGHT_B1:-128}))"
  backend_counters "after perf_analyzer's 1-image load"
}
backend_counters() {  # the yolocu_* counters of the server's Prometheus endpoint, on one line
  echo "  backend counters $1: $(curl -s localhost:8002/metrics | grep -E '^yolocu_' | tr '\n' ' ')"
}
echo "== one GPU: instance group on GPU 0 ($inst instances, max_batch_size $batch)"
if serve "0" gpu1; then
  if [ "$threads_only" = 1 ]; then
    measured_loads gpu1 1
  else
    loaded_mib=$(gpu0_mib)
    load gpu1_b8 8
    load gpu1_b1 1
    rate=$(python3 -c "import json; print(round(json.load(open('$out/load_gpu1_b1.json'))['requests_per_s'] / 2))")
    echo "-- 1-image requests at half that rate ($rate requests/s, open loop)"
    measured "$out/load_gpu1_b1_half.log" load gpu1_b1_half 1 "$rate"
    echo "-- perf_analyzer"
    pa_summary gpu1_b8 8 "${PA_INFLIGHT_B8:-32}"
    pa_summary gpu1_b1 1 "${PA_INFLIGHT_B1:-128}"
    pa_rate=$(python3 -c "import csv, glob; print(round(sum(float(next(csv.DictReader(open(f)))['Inferences/Second']) for f in glob.glob('$out/pa_gpu1_b1_[0-9]*.csv')) / 2))" 2>/dev/null)
    [ -n "$pa_rate" ] && measured "$out/pa_summary.txt" pa_summary gpu1_b1_half 1 - "$pa_rate"
    curl -s localhost:8002/metrics | grep -E '^(yolocu_|nv_inference_exec_count|nv_inference_count)' | tee "$out/metrics_gpu1.txt"
    unload_cycles
  fi
  stop
fi
if [ "$ngpu" -ge 2 ]; then
  echo "== two GPUs: one instance group on GPUs 0 and 1"
  if serve "0, 1" gpu2; then
    if [ "$threads_only" = 1 ]; then
      measured_loads gpu2 2
    else
      load gpu2_b8 8
      load gpu2_b1 1
      pa_summary gpu2_b8 8 "$((2 * ${PA_INFLIGHT_B8:-32}))"
      pa_summary gpu2_b1 1 "$((2 * ${PA_INFLIGHT_B1:-128}))"
    fi
    stop
  fi
fi
keep_cache
tar -C "$out" -czf "$out/logs.tar.gz" --exclude logs.tar.gz --exclude 'tactics.json*' . 2>/dev/null
echo "== summary"
grep -hE "^cuda |images/s" "$out/bench_from_jpeg.log" 2>/dev/null | tail -3
for f in "$out"/load_*.log; do echo "$(basename "$f" .log): $(tail -1 "$f")"; done
cat "$out/pa_summary.txt" 2>/dev/null
