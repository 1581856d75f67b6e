#!/usr/bin/env bash
# Issue 25.8 against the real engine: a nearly full host disk must not
# wedge a workspace's copy out. The workspace is an 8 MiB tmpfs the test
# mounts in a mount namespace of its own (root: the suite runs as root in
# CI), holding a 5 MiB file written right before the first copy in (so it
# is compared by content on the way back). The tool changes one byte of
# another file, twice: both copies out succeed and apply it.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_engine

if [ "${SANDMAN_FULL_DISK_INNER:-}" != 1 ]; then
  if ! unshare -m true 2>/dev/null; then
    [ "${CI:-}" = "true" ] && { echo "FAIL: CI=true and no mount namespace" >&2; exit 1; }
    echo "SKIP: no mount namespace (needs root)"
    exit 77
  fi
  cleanup_instance
  SANDMAN_FULL_DISK_INNER=1 exec unshare -m --propagation private bash "${BASH_SOURCE[0]}"
fi

WORK=$(mktemp -d)
cleanup() {
  cleanup_instance
  umount "$WORK/ws" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
WS=$WORK/ws
mkdir -p "$WS"
mount -t tmpfs -o size=8m tmpfs "$WS"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
R=(--mode per_run --run-id fulldisk --image sandman/minimal:latest)

head -c $((5 * 1024 * 1024)) /dev/urandom > "$WS/big.bin"
echo a > "$WS/small.txt"
for round in 1 2; do
  out=$("$SANDMAN" run --json --workspace "$WS" "${R[@]}" -- sh -c "echo $round > small.txt" 2>&1) \
    && rc=0 || rc=$?
  err=$("$PY" -c "import json,sys; print(json.load(sys.stdin)['error'])" <<<"$out" 2>/dev/null || echo "$out")
  expect_eq "copy out $round succeeds on the nearly full disk" "0 None" "$rc $err"
  expect_eq "copy out $round applies the one-byte change" "$round" "$(cat "$WS/small.txt")"
done
expect_eq "no stage folder is left" "0" "$(find "$WS" -maxdepth 1 -name '.sandman-stage-*' | wc -l)"

it_done
