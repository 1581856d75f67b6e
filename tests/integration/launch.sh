#!/usr/bin/env bash
# ctest runs every integration and swarm test through this (CMakeLists.txt):
#
#   launch.sh COMMAND [ARGS...]
#
# 1. The test's instance: SANDMAN_INSTANCE=<prefix>-<SANDMAN_TEST_ID>, the
#    prefix SANDMAN_TEST_PREFIX (default "it"), SANDMAN_TEST_ID the build
#    folder's hash and the test's name (from CMake). Two runs at once from
#    one build folder keep apart with different prefixes.
# 2. The image check: every container the test made on the engine (labelled
#    with its instance, or an instance under it) must come from an image
#    scripts/setup.sh or scripts/test-images.sh provides, or from one built,
#    tagged or loaded while the test ran; anything else is an image that only
#    an earlier run, another test or a person left behind, and fails the
#    test, naming it and the image (tests/integration/image_check.py).
#    SANDMAN_IMAGE_CHECK=0 leaves the check out.
#
# The exit status is the test's (77 = skipped), or 1 when the check fails.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=${SANDMAN_SOURCE_DIR:-$(cd "$HERE/../.." && pwd)}
if [ -n "${SANDMAN_TEST_ID:-}" ]; then
  export SANDMAN_INSTANCE="${SANDMAN_TEST_PREFIX:-it}-$SANDMAN_TEST_ID"
fi
TEST=${SANDMAN_TEST_NAME:-$(basename "${1:-test}")}

WATCH=""
EVENTS=""
if [ "${SANDMAN_IMAGE_CHECK:-1}" != 0 ] && command -v docker >/dev/null &&
  docker version --format '{{.Server.APIVersion}}' >/dev/null 2>&1; then
  EVENTS=$(mktemp "${TMPDIR:-/tmp}/sm-events.XXXXXX")
  # --since: what happens between this line and the stream's start is
  # replayed, so nothing the test does is missed.
  docker events --since "$(($(date +%s) - 1))" --format '{{json .}}' \
    --filter type=container --filter type=image --filter type=volume \
    --filter event=create --filter event=tag --filter event=load --filter event=import \
    >"$EVENTS" 2>/dev/null &
  WATCH=$!
fi

rc=0
"$@" || rc=$?

if [ -n "$WATCH" ]; then
  # A marker the stream must show: once it has, every earlier event is in.
  marker="sm-check-$SANDMAN_INSTANCE-$$"
  marker=${marker//[^a-zA-Z0-9_.-]/-}
  seen=0
  if docker volume create --label "io.sandman.instance=${SANDMAN_INSTANCE:-}" "$marker" >/dev/null 2>&1; then
    for _ in $(seq 1 300); do
      if grep -q "\"$marker\"" "$EVENTS"; then seen=1; break; fi
      kill -0 "$WATCH" 2>/dev/null || break
      sleep 0.1
    done
    docker volume rm -f "$marker" >/dev/null 2>&1
  fi
  kill "$WATCH" 2>/dev/null
  wait "$WATCH" 2>/dev/null
  if [ "$seen" = 1 ]; then
    provided=$(SANDMAN_BIN=${SANDMAN_BIN:-} "$SRC/scripts/test-images.sh" provided 2>/dev/null)
    if ! python3 "$HERE/image_check.py" "$TEST" "${SANDMAN_INSTANCE:-}" "$EVENTS" <<<"$provided"; then
      [ "$rc" = 0 ] || [ "$rc" = 77 ] && rc=1
    fi
  else
    echo "launch: the image check of $TEST did not run: the engine's event stream did not show its marker" >&2
    [ "${CI:-}" = true ] && [ "$rc" = 0 ] && rc=1
  fi
  rm -f "$EVENTS"
fi
exit "$rc"
