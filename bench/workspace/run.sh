#!/usr/bin/env bash
# Workspace copy-in benchmark: sandman against `docker cp`, and the second
# call on an unchanged workspace against the first. Not a test (no
# assertions on time); prints a table.
#
#   bench/workspace/run.sh [FILES] [BYTES_PER_FILE]     (default 10000 x 10240 = ~100 MB)
# Env: SANDMAN_BUILD_DIR (default build), SANDMAN_INSTANCE (labels, default bench-ws).
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${SANDMAN_BUILD_DIR:-$SRC/build}
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

[ -f "$BUILD/libsandman.a" ] || { echo "build first: $BUILD/libsandman.a is missing" >&2; exit 1; }
cc -O2 -I"$SRC/include" -o "$WORK/ws_bench" "$SRC/bench/workspace/ws_bench.c" "$BUILD/libsandman.a" \
  $(pkg-config --libs libcurl json-c yaml-0.1 libarchive openssl libmicrohttpd) -lpthread -lm

# A container like sandman's: read-only root, user 1000, a tmpfs volume at /workspace.
box() {
  local vol="sm-bench-ws-$$-$1"
  docker volume create --driver local --opt type=tmpfs --opt device=tmpfs \
    --opt o=size=1g,uid=1000,gid=1000,mode=0755 \
    --label io.sandman.managed=true --label "io.sandman.instance=$INSTANCE" "$vol" >/dev/null
  local id
  id=$(docker run -d --network none --read-only --user 1000:1000 \
    --label io.sandman.managed=true --label "io.sandman.instance=$INSTANCE" \
    --mount "type=volume,source=$vol,target=/workspace" "$IMAGE" sleep 3600)
  echo "$id"
}

echo "generating $FILES files of $SIZE bytes in $WORK/ws ..."
"$WORK/ws_bench" gen "$WORK/ws" "$FILES" "$SIZE"
# An existing workspace is not freshly written: age it, so mtimes decide.
find "$WORK/ws" -exec touch -h -d '1 hour ago' {} +
sync
MB=$(du -sm "$WORK/ws" | cut -f1)

# box runs in a subshell ($(...)): what it made is recorded here, so the
# EXIT trap removes it.
VOLUMES+=("sm-bench-ws-$$-cp")
c1=$(box cp)
CONTAINERS+=("$c1")
t0=$(date +%s.%N)
docker cp "$WORK/ws/." "$c1:/workspace"
t1=$(date +%s.%N)
DOCKER_CP=$(echo "$t1 - $t0" | bc)
n=$(docker exec "$c1" sh -c 'find /workspace -type f | wc -l')
[ "$n" -eq "$FILES" ] || echo "warning: docker cp copied $n files" >&2

VOLUMES+=("sm-bench-ws-$$-sandman")
c2=$(box sandman)
CONTAINERS+=("$c2")
out=$("$WORK/ws_bench" sync "$WORK/ws" "$c2" "$WORK/manifest")
n=$(docker exec "$c2" sh -c 'find /workspace -type f | wc -l')
[ "$n" -eq "$FILES" ] || echo "warning: sandman copied $n files" >&2

val() { echo "$out" | awk -v k="$1" '$1 == k { print $'"$2"' }'; }
printf '\nworkspace: %s files, %s MB (tmpfs volume, %s)\n\n' "$FILES" "$MB" "$(docker version --format '{{.Server.Version}}')"
printf '%-42s %10s %10s %12s\n' "operation" "seconds" "entries" "bytes moved"
printf '%-42s %10s %10s %12s\n' "docker cp (whole folder)" "$DOCKER_CP" "-" "-"
printf '%-42s %10s %10s %12s\n' "sandman copy in, first call" "$(val in_first 2)" "$(val in_first 3)" "$(val in_first 4)"
printf '%-42s %10s %10s %12s\n' "sandman copy in, unchanged (next call)" "$(val in_unchanged 2)" "$(val in_unchanged 3)" "$(val in_unchanged 4)"
printf '%-42s %10s %10s %12s\n' "sandman copy out, nothing changed" "$(val out_unchanged 2)" "$(val out_unchanged 3)" "$(val out_unchanged 4)"
printf '%-42s %10s %10s %12s\n' "sandman copy out, 5 files changed" "$(val out_5_changed 2)" "$(val out_5_changed 3)" "$(val out_5_changed 4)"
printf '%-42s %10s %10s %12s\n' "sandman copy out, 100 files changed" "$(val out_100_changed 2)" "$(val out_100_changed 3)" "$(val out_100_changed 4)"
printf '%-42s %10s %10s %12s\n' "sandman copy in, 10 files changed" "$(val in_10_changed 2)" "$(val in_10_changed 3)" "$(val in_10_changed 4)"
