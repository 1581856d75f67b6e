#!/usr/bin/env bash
# Workspace copy-in benchmark: sandman against `docker cp`, and the second
# call on an unchanged workspace against the first. Not a test (no
# assertions on time); prints tables.
#
#   bench/workspace/run.sh [FILES] [BYTES_PER_FILE]     (default 10000 x 10240 = ~100 MB)
#
# Env:
#   SANDMAN_BUILD_DIR   the build to time (default build)
#   SANDMAN_BASE_BUILD_DIR
#                       a second build (e.g. of the previous commit) timed in
#                       the same rounds, to compare a change on a noisy machine
#   ROUNDS              rounds (default 1); each round times docker cp and
#                       each build once, every copy into a fresh container,
#                       in an order that rotates from round to round
#   SANDMAN_INSTANCE    labels (default bench-ws)
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${SANDMAN_BUILD_DIR:-$SRC/build}
BASE=${SANDMAN_BASE_BUILD_DIR:-}
ROUNDS=${ROUNDS:-1}
FILES=${1:-10000}
SIZE=${2:-10240}
INSTANCE=${SANDMAN_INSTANCE:-bench-ws}
IMAGE=${IMAGE:-sandman/minimal:latest}
WORK=$(mktemp -d /tmp/sm-bench-ws.XXXXXX)
CONTAINERS=()
VOLUMES=()

cleanup() {
  [ ${#CONTAINERS[@]} -gt 0 ] && docker rm -f "${CONTAINERS[@]}" >/dev/null 2>&1 || true
  [ ${#VOLUMES[@]} -gt 0 ] && docker volume rm -f "${VOLUMES[@]}" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

LIBS=$(pkg-config --libs libcurl json-c yaml-0.1 libarchive openssl libmicrohttpd)
build_bench() { # build-dir output
  [ -f "$1/libsandman.a" ] || { echo "build first: $1/libsandman.a is missing" >&2; exit 1; }
  # shellcheck disable=SC2086
  cc -O2 -I"$SRC/include" -I"$SRC/src/lib" -I"$SRC/src/shared" -o "$2" "$SRC/bench/workspace/ws_bench.c" "$1/libsandman.a" $LIBS \
    -lpthread -lm
}
build_bench "$BUILD" "$WORK/ws_bench"
[ -n "$BASE" ] && build_bench "$BASE" "$WORK/ws_bench_base"

# A container like sandman's: read-only root, user 1000, a tmpfs volume at
# /workspace, sandman's /.sandman (where the copy in's unpacker goes). Runs in a subshell ($(...)), so the caller records what it made.
box() {
  docker volume create --driver local --opt type=tmpfs --opt device=tmpfs \
    --opt o=size=1g,uid=1000,gid=1000,mode=0755 \
    --label io.sandman.managed=true --label "io.sandman.instance=$INSTANCE" "$1" >/dev/null
  docker run -d --network none --read-only --user 1000:1000 \
    --label io.sandman.managed=true --label "io.sandman.instance=$INSTANCE" \
    --mount "type=volume,source=$1,target=/workspace" \
    --tmpfs /.sandman:rw,nosuid,nodev,exec,size=8m,mode=0755 "$IMAGE" sleep 3600
}
N_BOX=0
new_box() { # sets BOX
  N_BOX=$((N_BOX + 1))
  local vol="sm-bench-ws-$$-$N_BOX"
  VOLUMES+=("$vol")
  BOX=$(box "$vol")
  CONTAINERS+=("$BOX")
}
drop_box() {
  docker rm -f "$BOX" >/dev/null 2>&1 || true
  docker volume rm -f "sm-bench-ws-$$-$N_BOX" >/dev/null 2>&1 || true
}
count_files() { docker exec "$BOX" sh -c 'find /workspace -type f | wc -l'; }

echo "generating $FILES files of $SIZE bytes in $WORK/ws ..."
"$WORK/ws_bench" gen "$WORK/ws" "$FILES" "$SIZE"
# An existing workspace is not freshly written: age it, so mtimes decide.
find "$WORK/ws" -exec touch -h -d '1 hour ago' {} +
sync
MB=$(du -sm "$WORK/ws" | cut -f1)

run_cp() {
  new_box
  local t0 t1
  t0=$(date +%s.%N)
  docker cp "$WORK/ws/." "$BOX:/workspace"
  t1=$(date +%s.%N)
  printf '%.3f\n' "$(echo "$t1 - $t0" | bc)" >>"$WORK/t.cp"
  local n
  n=$(count_files)
  [ "$n" -eq "$FILES" ] || echo "warning: docker cp copied $n files" >&2
  drop_box
}
run_sm() { # tag binary
  new_box
  local out n
  # ws_bench changes the host workspace (copy out, 10 files touched at its
  # end): every run works on a fresh copy, written back before the timing.
  rm -rf "$WORK/wsc" && cp -a "$WORK/ws" "$WORK/wsc" && sync
  out=$("$2" sync "$WORK/wsc" "$BOX" "$WORK/manifest")
  n=$(count_files)
  [ "$n" -eq "$FILES" ] || echo "warning: sandman ($1) copied $n files" >&2
  echo "$out" >"$WORK/last.$1"
  # One file of seconds per operation: t.<tag>.<operation>.
  echo "$out" | while read -r op sec _; do echo "$sec" >>"$WORK/t.$1.$op"; done
  drop_box
}

peers=(cp sm)
[ -n "$BASE" ] && peers+=(base)
for ((r = 0; r < ROUNDS; r++)); do
  for ((k = 0; k < ${#peers[@]}; k++)); do
    p=${peers[$(((k + r) % ${#peers[@]}))]}
    case $p in
    cp) run_cp ;;
    sm) run_sm sm "$WORK/ws_bench" ;;
    base) run_sm base "$WORK/ws_bench_base" ;;
    esac
  done
  [ "$ROUNDS" -gt 1 ] && echo "round $((r + 1))/$ROUNDS done" >&2
done

out=$(cat "$WORK/last.sm")
val() { echo "$out" | awk -v k="$1" '$1 == k { print $'"$2"' }'; }
med() { sort -g "$1" | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '\nworkspace: %s files, %s MB (tmpfs volume, %s)\n\n' "$FILES" "$MB" "$(docker version --format '{{.Server.Version}}')"
printf '%-42s %10s %10s %12s\n' "operation (the last round)" "seconds" "entries" "bytes moved"
printf '%-42s %10s %10s %12s\n' "docker cp (whole folder)" "$(tail -1 "$WORK/t.cp")" "-" "-"
printf '%-42s %10s %10s %12s\n' "sandman unpacker install (once per sandbox)" "$(val install 2)" "-" "-"
printf '%-42s %10s %10s %12s\n' "sandman copy in, first call" "$(val in_first 2)" "$(val in_first 3)" "$(val in_first 4)"
printf '%-42s %10s %10s %12s\n' "sandman copy in, unchanged (next call)" "$(val in_unchanged 2)" "$(val in_unchanged 3)" "$(val in_unchanged 4)"
printf '%-42s %10s %10s %12s\n' "sandman copy out, nothing changed" "$(val out_unchanged 2)" "$(val out_unchanged 3)" "$(val out_unchanged 4)"
printf '%-42s %10s %10s %12s\n' "sandman copy out, 5 files changed" "$(val out_5_changed 2)" "$(val out_5_changed 3)" "$(val out_5_changed 4)"
printf '%-42s %10s %10s %12s\n' "sandman copy out, 100 files changed" "$(val out_100_changed 2)" "$(val out_100_changed 3)" "$(val out_100_changed 4)"
printf '%-42s %10s %10s %12s\n' "sandman copy in, 10 files changed" "$(val in_10_changed 2)" "$(val in_10_changed 3)" "$(val in_10_changed 4)"

if [ "$ROUNDS" -gt 1 ] || [ -n "$BASE" ]; then
  printf '\n%d round(s), medians (min-max), seconds; sandman: %s%s\n\n' "$ROUNDS" "$BUILD" \
    "${BASE:+, base: $BASE}"
  cell() { [ -s "$1" ] && printf '%s (%s-%s)' "$(med "$1")" "$(sort -g "$1" | head -1)" "$(sort -g "$1" | tail -1)"; }
  printf '%-42s %-24s %s\n' "operation" "sandman" "${BASE:+base}"
  printf '%-42s %-24s\n' "docker cp (whole folder)" "$(cell "$WORK/t.cp")"
  for op in in_first:"copy in, first call" in_unchanged:"copy in, unchanged (next call)" \
    out_unchanged:"copy out, nothing changed" out_5_changed:"copy out, 5 files changed" \
    out_100_changed:"copy out, 100 files changed" in_10_changed:"copy in, 10 files changed"; do
    printf '%-42s %-24s %s\n' "sandman ${op#*:}" "$(cell "$WORK/t.sm.${op%%:*}")" \
      "$([ -n "$BASE" ] && cell "$WORK/t.base.${op%%:*}")"
  done
  printf '\nper round (seconds): docker cp, sandman first call%s\n' "${BASE:+, base}"
  paste -d' ' "$WORK/t.cp" "$WORK/t.sm.in_first" ${BASE:+"$WORK/t.base.in_first"} | nl -w3 -s': '
  printf '\ndocker cp / sandman first call (medians): %s' \
    "$(echo "scale=3; $(med "$WORK/t.cp") / $(med "$WORK/t.sm.in_first")" | bc)"
  [ -n "$BASE" ] && printf ', base: %s' \
    "$(echo "scale=3; $(med "$WORK/t.cp") / $(med "$WORK/t.base.in_first")" | bc)"
  printf '\n'
fi
