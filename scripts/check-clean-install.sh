#!/usr/bin/env bash
# Clean-room check of the README's two commands: builds a minimal Debian 12 root (mmdebstrap,
# variant minbase: no compiler, no Python, no CUDA), copies a `git archive` of HEAD and the sample
# data (../shared/data, or YOLOCU_DATA_DIR) into it, and runs there, with nothing else installed:
#
#   (default)  scripts/setup.sh --run, then scripts/test.sh   (CPU build, main job, whole test suite)
#   --cuda     scripts/setup.sh --cuda --run                  (CUDA 13.0 + cuDNN from PyPI into .venv;
#              then the GPU tests, which must build and skip visibly without a device, and the
#              find_package(yolocu) consumer against that toolkit, then `pip wheel .` and
#              scripts/check-fresh-venv.sh --serve on that wheel: a new venv, import, detect, serve)
#
# The root reaches the package registries as this machine does: Debian's mirror from this machine's
# apt sources, its apt Acquire settings, its pip settings and its CA bundle are copied in.
# Run as root (chroot, mounts). Takes 20-60 minutes on two cores; too slow for CI, run it by hand
# before changing setup.sh, CMake's package lookups or the README's commands.
#
#   scripts/check-clean-install.sh [--cuda] [--keep] [--cache DIR] [--workdir DIR] [--timeout SECONDS]
#
#   --keep       keep the root afterwards (WORKDIR/root; several GB)
#   --cache DIR  keep downloaded .deb files and pip wheels in DIR across runs (only downloads are
#                reused; every run installs into a fresh root)
#   --workdir    where the root is built (default: a new folder under /var/tmp)
#   --timeout    limit for the commands inside the root (default 5400 s)
#
# Exit status: 0 when every command passed in the root, 1 otherwise, 2 on bad usage.
set -euo pipefail
{ # bash reads this whole block before running it: editing the file during a run cannot derail that run
src=$(cd "$(dirname "$0")/.." && pwd)

cuda=0 keep=0 cache="" work="" limit=5400
while (($#)); do
  case "$1" in
    --cuda) cuda=1 ;;
    --keep) keep=1 ;;
    --cache) cache=$(mkdir -p "$2" && cd "$2" && pwd); shift ;;
    --workdir) work=$2; shift ;;
    --timeout) limit=$2; shift ;;
    -h|--help) sed -n '2,26s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "check-clean-install: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
data=${YOLOCU_DATA_DIR:-$src/../shared/data}
variant=$( ((cuda)) && echo "cuda" || echo "cpu")

log() { printf '[clean-room %s %s] %s\n' "$variant" "$(date +%H:%M:%S)" "$*"; }
die() { log "FAIL: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (it builds a root file system and chroots into it)"
[ -d "$data" ] || die "no sample data at $data (set YOLOCU_DATA_DIR)"
git -C "$src" rev-parse --verify -q HEAD >/dev/null || die "$src is not a git checkout"
if ! command -v mmdebstrap >/dev/null; then
  log "installing mmdebstrap"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null
fi

t_start=$(date +%s)
work=${work:-$(mktemp -d /var/tmp/yolocu-clean-room.XXXXXX)}
mkdir -p "$work"
root=$work/root
mounts=()
cmd_pid=""
cleanup() {
  local rc=$?
  if [ -n "$cmd_pid" ]; then  # interrupted: stop the commands in the root before unmounting
    kill -TERM "$cmd_pid" 2>/dev/null
    wait "$cmd_pid" 2>/dev/null
  fi
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null || true
  done
  if ((keep)); then
    log "root kept at $root"
  else
    rm -rf --one-file-system "$work"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the root: Debian 12 minbase from this machine's Debian mirror ----------------------------------
mirror=()
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  [ -s "$f" ] && grep -q '^[^#]*deb.debian.org\|^[^#]*debian' "$f" && { mirror=("$f"); break; }
done
((${#mirror[@]})) || mirror=("http://deb.debian.org/debian")
aptopts=()
for f in /etc/apt/apt.conf.d/*; do  # Acquire:: settings (proxy, validity, ...), no hooks
  [ -f "$f" ] && grep -q 'Acquire::' "$f" && ! grep -q 'Invoke' "$f" && aptopts+=("--aptopt=$f")
done
log "mmdebstrap bookworm (minbase) into $root from ${mirror[*]}"
timeout 1800 mmdebstrap --variant=minbase --mode=root "${aptopts[@]}" \
  bookworm "$root" "${mirror[@]}" >"$work/mmdebstrap.log" 2>&1 || { tail -20 "$work/mmdebstrap.log"; die "mmdebstrap failed"; }
log "root ready ($(du -sh --exclude=proc "$root" | cut -f1))"

# registries as this machine reaches them: CA bundle, pip settings, proxies
mkdir -p "$root/etc/ssl"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/host-ca-bundle.crt"
if [ -f /etc/pip.conf ]; then
  sed 's|^\(\s*cert\s*=\).*|\1 /etc/ssl/host-ca-bundle.crt|' /etc/pip.conf >"$root/etc/pip.conf"
fi
envs=(HOME=/root LANG=C.UTF-8 TERM=dumb PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
      PIP_CERT=/etc/ssl/host-ca-bundle.crt REQUESTS_CA_BUNDLE=/etc/ssl/host-ca-bundle.crt
      SSL_CERT_FILE=/etc/ssl/host-ca-bundle.crt JOBS="${JOBS:-$(nproc)}")
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY PIP_INDEX_URL PIP_EXTRA_INDEX_URL \
         PIP_TRUSTED_HOST PIP_DEFAULT_TIMEOUT; do
  [ -n "${!v:-}" ] && envs+=("$v=${!v}")
done
if [ -n "$cache" ]; then  # downloads of earlier runs: apt takes matching .debs from its archive folder
  mkdir -p "$cache/apt" "$cache/pip" "$root/var/cache/apt/archives"
  cp -n "$cache"/apt/*.deb "$root/var/cache/apt/archives/" 2>/dev/null || true
  envs+=(PIP_CACHE_DIR=/var/cache/yolocu-pip)
fi

# the project: HEAD as `git archive` writes it, the sample data beside it as ../shared/data
mkdir -p "$root/src/yolocu" "$root/src/shared"
git -C "$src" archive --format=tar HEAD | tar -x -C "$root/src/yolocu"
cp -a "$data" "$root/src/shared/data"
log "source: $(git -C "$src" log -1 --format='%h %s' | cut -c1-100)"

mount_in() {  # <mount args...> <target under the root>
  local target=$root/${*: -1}
  mkdir -p "$target"
  mount "${@:1:$#-1}" "$target"
  mounts+=("$target")
}
mount_in -t proc proc /proc
mount_in --bind /dev /dev
mount_in --bind /dev/pts /dev/pts
mount_in -t tmpfs tmpfs /dev/shm
if [ -n "$cache" ]; then
  mount_in --bind "$cache/pip" /var/cache/yolocu-pip
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

# ---- the commands, as a new user runs them ---------------------------------------------------------
if ((cuda)); then
  commands='
    set -euo pipefail
    cd /src/yolocu
    if command -v nvcc || [ -e /usr/local/cuda ]; then echo "a CUDA toolkit is already in the root"; exit 1; fi
    step() { echo "== $* ($(date +%H:%M:%S))"; }
    step "scripts/setup.sh --cuda --run"
    time scripts/setup.sh --cuda --run
    step "the GPU parts were built, with the PyPI toolkit"
    grep -E "^CMAKE_CUDA_COMPILER:" build/CMakeCache.txt
    grep -q "^CMAKE_CUDA_COMPILER:.*/.venv/cuda/bin/nvcc$" build/CMakeCache.txt
    for t in tests/engine/test_cuda_engine tests/pipeline/test_detector_cuda tests/training/test_training_gpu \
             bench/bench_cuda_engine; do
      test -x build/$t || { echo "missing: build/$t"; exit 1; }
    done
    ldd build/tests/engine/test_cuda_engine | grep -E "libcud(art|nn)|libcublas"
    step "GPU tests (no device here: each must skip visibly) and the find_package(yolocu) consumer"
    (cd build && time ctest -L gpu -j "$JOBS" --output-on-failure && time ctest -R package --output-on-failure)
    step "pip wheel . with the PyPI toolkit, then that wheel in a new venv: import, detect, yolocu serve"
    CMAKE_BUILD_PARALLEL_LEVEL=$JOBS .venv/bin/python -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wheel .
    time scripts/check-fresh-venv.sh --serve /tmp/wheel/yolocu-*.whl
  '
else
  commands='
    set -euo pipefail
    cd /src/yolocu
    if command -v nvcc || [ -e /usr/local/cuda ]; then echo "a CUDA toolkit is already in the root"; exit 1; fi
    step() { echo "== $* ($(date +%H:%M:%S))"; }
    step "scripts/setup.sh --run"
    time scripts/setup.sh --run
    test -s runs/demo/detections.json
    step "scripts/test.sh"
    time scripts/test.sh
  '
fi
log "running the README's commands in the root (limit ${limit}s)"
t_cmd=$(date +%s)
set +e
# timeout leads its own process group: stopping it (a signal to this script) stops everything in the root
timeout --kill-after=60 "$limit" chroot "$root" /usr/bin/env -i "${envs[@]}" /bin/bash -c "$commands" 2>&1 &
cmd_pid=$!
wait "$cmd_pid"
rc=$?
cmd_pid=""
set -e
if [ -n "$cache" ]; then
  cp -n "$root"/var/cache/apt/archives/*.deb "$cache/apt/" 2>/dev/null || true
fi
t_end=$(date +%s)
dur() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
if ((rc == 0)); then
  log "PASS: the README's commands in a clean Debian 12 root ($variant): commands $(dur $((t_end - t_cmd))), total $(dur $((t_end - t_start)))"
else
  [ $rc -eq 124 ] && log "the commands ran past ${limit}s"
  log "FAIL (exit $rc) after $(dur $((t_end - t_start)))"
  rc=1
fi
exit $rc
}
