#!/usr/bin/env bash
# One-shot `sandman run` on a reused per_run sandbox: with an unchanged
# workspace of FILES files, and the same call without a workspace, side by
# side in one run (issue 27, item 3). Not a test: prints a table.
#
#   bench/workspace/oneshot.sh [FILES] [BYTES_PER_FILE]   (default 10000 x 1024)
#
# Env:
#   SANDMAN_BUILD_DIR   the build to time (default build)
#   SANDMAN_BASE_BIN    a second sandman binary (e.g. main's) timed in the same
#                       rounds, on a sandbox of its own
#   ROUNDS              rounds (default 20); each round times, for each binary,
#                       the call with the workspace and the call without, in an
#                       order that alternates from round to round
#   SANDMAN_INSTANCE    labels (default bench-oneshot-<pid>)
# Each call is a new sandman process, as a script or an agent framework
# without a runner makes it: `sandman run --mode per_run --run-id R
# [--workspace DIR] -- true`. The load average is printed before and after.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${SANDMAN_BUILD_DIR:-$SRC/build}
BASE=${SANDMAN_BASE_BIN:-}
ROUNDS=${ROUNDS:-20}
FILES=${1:-10000}
SIZE=${2:-1024}
export SANDMAN_INSTANCE=${SANDMAN_INSTANCE:-bench-oneshot-$$}
WORK=$(mktemp -d /tmp/sm-bench-oneshot.XXXXXX)
export SANDMAN_STATE_DIR=$WORK/state

cleanup() {
  local ids
  ids=$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" 2>/dev/null || true)
  [ -n "$ids" ] && docker rm -f $ids >/dev/null 2>&1 || true
  ids=$(docker volume ls -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" 2>/dev/null || true)
  [ -n "$ids" ] && docker volume rm -f $ids >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# 100 folders of FILES/100 files, aged an hour (mtimes, not contents, decide).
python3 - "$WORK/ws" "$FILES" "$SIZE" <<'EOF'
import os, sys, time
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
old = time.time() - 3600
for i in range(n):
    d = os.path.join(root, "d%03d" % (i * 100 // n))
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "f%05d.txt" % i)
    with open(p, "wb") as f:
        f.write((b"%08d\n" % i) * (size // 9) + b"x" * (size % 9))
    os.utime(p, (old, old))
for r, _, _ in os.walk(root):
    os.utime(r, (old, old))
EOF

BINS=("$BUILD/sandman")
NAMES=("this build")
[ -n "$BASE" ] && BINS+=("$BASE") && NAMES+=("base")

now_ns() { date +%s%N; }
# one BIN RUN [ARGS...]: prints the call's wall time in units of 0.01 ms
one() {
  local bin=$1 run=$2 a b
  shift 2
  a=$(now_ns)
  "$bin" run --mode per_run --run-id "$run" "$@" -- true >/dev/null
  b=$(now_ns)
  echo $(((b - a) / 10000))
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in "${!BINS[@]}"; do
  # The sandbox, its first copy in and the agent installed: not timed.
  "${BINS[$i]}" run --mode per_run --run-id "r$i" --workspace "$WORK/ws" -- true >/dev/null
  "${BINS[$i]}" run --mode per_run --run-id "r$i" --workspace "$WORK/ws" -- true >/dev/null
done
declare -A T
for ((r = 0; r < ROUNDS; r++)); do
  for i in "${!BINS[@]}"; do
    if ((r % 2 == 0)); then
      T[$i,ws]+="$(one "${BINS[$i]}" "r$i" --workspace "$WORK/ws") "
      T[$i,plain]+="$(one "${BINS[$i]}" "r$i") "
    else
      T[$i,plain]+="$(one "${BINS[$i]}" "r$i") "
      T[$i,ws]+="$(one "${BINS[$i]}" "r$i" --workspace "$WORK/ws") "
    fi
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# pct P values... -> the P-th percentile (nearest rank), in ms
pct() {
  local p=$1
  shift
  printf '%s\n' "$@" | sort -n | awk -v p="$p" '{a[NR]=$1} END {i=int((p*NR+99)/100); if (i<1) i=1; printf "%.1f", a[i]/100}'
}
echo
echo "| sandman | calls | unchanged ${FILES}-file workspace p50 | p95 | no workspace p50 | p95 | difference of p50s |"
echo "|---|---|---|---|---|---|---|"
for i in "${!BINS[@]}"; do
  # shellcheck disable=SC2206
  ws=(${T[$i,ws]})
  # shellcheck disable=SC2206
  pl=(${T[$i,plain]})
  w50=$(pct 50 "${ws[@]}")
  p50=$(pct 50 "${pl[@]}")
  diff=$(awk -v a="$w50" -v b="$p50" 'BEGIN {printf "%.1f", a - b}')
  echo "| ${NAMES[$i]} | $ROUNDS | $w50 ms | $(pct 95 "${ws[@]}") ms | $p50 ms | $(pct 95 "${pl[@]}") ms | $diff ms |"
done
