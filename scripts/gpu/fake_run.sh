#!/usr/bin/env bash
# A GPU-machine run without a GPU, for changes to run_all.sh, lib.sh and scripts/gpu/parts/: runs
# `bash scripts/gpu/run_all.sh <part>[,<part>...]` in a scratch copy of scripts/gpu with a fake carry
# folder, then prints every command the run gave a program (with the YOLOCU_* variables, YOLOV5_DIR
# and LD_LIBRARY_PATH it set for it), the run's output and the files it left under $OUT.
# The fakes: every binary bundle.sh builds (test binaries pass their three tests, the others print a
# few table lines and write the files their --json / --tactic-cache name), nvidia-smi,
# compute-sanitizer (clean), ncu, nsys, the python3 peers, scripts/gpu/training.sh, and the
# whole-filesystem search for cuDNN. Nothing here runs GPU code: it shows what the scripts would run.
#   scripts/gpu/fake_run.sh engine > /tmp/before; (change the scripts); scripts/gpu/fake_run.sh engine > /tmp/after
# The switches of docs/gpu-runs.md pass through (SKIP_TESTS=1 scripts/gpu/fake_run.sh engine);
# FAKE_FAIL=<Suite.Case> makes that test case fail, FAKE_SAN_RC=99 makes compute-sanitizer report.
set -uo pipefail
part=${1:?usage: fake_run.sh <part>[,<part>...]}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
repo=$work/repo fake=$work/fake
mkdir -p "$repo/scripts" "$fake/bin" "$repo/.gpu/bin" "$repo/.gpu/lib" "$repo/.gpu/data" "$repo/.gpu/fuzz-onnx"
cp -r "$src/scripts/gpu" "$repo/scripts/gpu"
export FAKE_TRACE=$work/trace FAKE_LIB=$fake/trace FAKE_PY
FAKE_PY=$(command -v python3)

# trace: one line per call and the variables the run sets for the binaries
cat >"$fake/trace" <<'EOF'
{ printf 'CALL %s' "$(basename "$0")"; printf ' %q' "$@"; echo
  env | grep -E '^(YOLOCU_[A-Z_]*|YOLOV5_DIR|LD_LIBRARY_PATH)=' | sort | sed 's/^/    /'; } >>"$FAKE_TRACE"
EOF
cat >"$fake/test" <<'EOF'
#!/usr/bin/env bash
. "$FAKE_LIB"
if [[ " $* " == *" --gtest_list_tests "* ]]; then printf 'Suite.\n  A\n  B\n  C\n'; exit 0; fi
rc=0
for c in Suite.A Suite.B Suite.C; do
  if [ "${FAKE_FAIL:-}" = $c ]; then echo "[  FAILED  ] $c"; rc=1; else echo "[       OK ] $c"; fi
done
exit $rc
EOF
cat >"$fake/tool" <<'EOF'
#!/usr/bin/env bash
. "$FAKE_LIB"
prev=
for a; do
  case "$prev" in --json) echo '{"metrics": {"map50_95": 0.5, "map50": 0.7}, "images": []}' >"$a" ;; --tactic-cache) echo '{}' >"$a" ;; esac
  prev=$a
done
case "$(basename "$0")" in
  nvidia-smi) echo "FAKE GPU, 1 MiB, 0.0, 1 MHz" ;;
  compute-sanitizer) echo "[       OK ] Suite.A"; echo "========= ERROR SUMMARY: $((${FAKE_SAN_RC:-0} / 99)) errors"; exit "${FAKE_SAN_RC:-0}" ;;
  *) printf '| fake | %s |\ndevice: fake\ncuda fake\ntimeline: fake\nmatched fake\n' "$(basename "$0")" ;;
esac
EOF
cat >"$fake/find" <<'EOF'
#!/usr/bin/env bash
# the whole-filesystem searches: a fixed answer
if [ "$1" = / ]; then echo "/fake/lib/$(echo "$*" | grep -oE 'lib[a-z]+' | head -1).so"; exit 0; fi
exec /usr/bin/find "$@"
EOF
chmod +x "$fake"/*
for t in nvidia-smi compute-sanitizer ncu nsys; do ln -s ../tool "$fake/bin/$t"; done
ln -s ../find "$fake/bin/find"
# python3: the peers print a line; `python3 -` (a script on stdin, the decode comparison) is the real one
# shellcheck disable=SC2016  # the fake's own code
printf '#!/usr/bin/env bash\n[ "${1:-}" = - ] && exec "$FAKE_PY" "$@"\n. "$FAKE_LIB"\necho "| fake | peer |"\n' >"$fake/bin/python3"
chmod +x "$fake/bin/python3"

# the binaries bundle.sh builds for these parts, as fakes
# shellcheck source=/dev/null
source <(sed -n '/^targets_of()/,/^}/p' "$src/scripts/gpu/bundle.sh")
bins="yolocu"
for p in ${part//,/ }; do bins="$bins $(targets_of "$p" 2>/dev/null)"; done
for b in $bins; do
  case "$b" in test_*) cp "$fake/test" "$repo/.gpu/bin/$b" ;; *) cp "$fake/tool" "$repo/.gpu/bin/$b" ;; esac
done
tar -C "$repo/.gpu" -cJf "$repo/.gpu/bundle.tar.xz" bin lib && rm -rf "$repo/.gpu/bin" "$repo/.gpu/lib"
echo fake >"$repo/.gpu/COMMIT"
# shellcheck disable=SC2016  # the fake's own code
printf '#!/usr/bin/env bash\n. "$FAKE_LIB"\necho "PASS  fake training"\n' >"$repo/scripts/gpu/training.sh"

cd "$repo" || exit 1
touch "$work/trace"; mkdir -p "$work/out"
OUT=$work/out PATH=$fake/bin:$PATH bash scripts/gpu/run_all.sh "$part" >"$work/stdout" 2>&1
rc=$?
echo "rc $rc" >>"$work/stdout"
norm() { sed -E "s#$work#WORK#g; s#/tmp/tmp\\.[A-Za-z0-9]+#TMP#g; s#\\([0-9]{2}:[0-9]{2}:[0-9]{2}\\)#(TIME)#"; }
echo "######## commands"; norm <"$work/trace"
echo "######## output"; norm <"$work/stdout"
echo "######## files under \$OUT"; (cd "$work/out" && find . -type f | sort)
exit $rc
