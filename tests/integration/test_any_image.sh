#!/usr/bin/env bash
# Any image works (issue 15 item 1): an image whose /tmp is 0755 root (as
# `docker import` makes them) and one with no /tmp at all. The runtime gives
# the /tmp tmpfs the image's mode whatever the mount asks, so sandman makes
# it 1777 itself: the tool writes /tmp, an out-of-memory kill is reported as
# one, and a timeout kills the call (the wrapper's call file lives in /tmp).
# Both images are built here, offline, under this test's own tags, per_tool
# and per_run.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_engine
WORK=$(mktemp -d)
TAG=sandman-it/$(printf '%s' "$SANDMAN_INSTANCE" | tr -c 'a-z0-9._-' '-')
cleanup() {
  cleanup_instance
  docker image rm -f "$TAG/tmp0755:1" "$TAG/notmp:1" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/tmp0755" "$WORK/notmp"
printf 'FROM sandman/minimal:latest\nUSER 0\nRUN chown 0:0 /tmp && chmod 0755 /tmp\nUSER 1000\n' \
  >"$WORK/tmp0755/Dockerfile"
printf 'FROM sandman/minimal:latest\nUSER 0\nRUN rm -rf /tmp\nUSER 1000\n' >"$WORK/notmp/Dockerfile"
for name in tmp0755 notmp; do
  check "image build $name (offline, tag $TAG/$name:1)" \
    bash -c "'$SANDMAN' image build '$WORK/$name' --tag '$TAG/$name:1' >'$WORK/$name.log' 2>&1"
done
expect_eq "the 0755 image's /tmp is 0755 root" "755 0" \
  "$(docker run --rm --network none --user 0 "$TAG/tmp0755:1" stat -c '%a %u' /tmp 2>&1)"
expect_eq "the other image has no /tmp" "no" \
  "$(docker run --rm --network none "$TAG/notmp:1" sh -c 'test -e /tmp && echo yes || echo no' 2>&1)"

jf() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(str(d[sys.argv[1]]).lower())' "$1" 2>&1; }

for name in tmp0755 notmp; do
  image=$TAG/$name:1
  for m in "--mode per_tool" "--mode per_run --run-id any-$name"; do
    # shellcheck disable=SC2086
    out=$("$SANDMAN" run $m --image "$image" -- sh -c 'stat -c %a /tmp; echo hi >/tmp/f && cat /tmp/f' 2>&1)
    expect_eq "$name ($m): /tmp is 1777 and writable" "1777
hi" "$out"
    # shellcheck disable=SC2086
    j=$("$SANDMAN" run --json $m --image "$image" --mem 64m -- sh -c 'x=0123456789abcdef; while :; do x="$x$x"; done' || true)
    expect_eq "$name ($m): a memory bomb is oom_killed" "true 137" "$(jf oom_killed <<<"$j") $(jf exit_code <<<"$j")"
    # shellcheck disable=SC2086
    j=$("$SANDMAN" run --json $m --image "$image" --timeout 1 -- sh -c 'sleep 60 & sleep 60' || true)
    expect_eq "$name ($m): a timeout kills the call" "true 124" "$(jf timed_out <<<"$j") $(jf exit_code <<<"$j")"
  done
  # The timed-out call left nothing running in the kept per_run sandbox.
  left=$(docker exec "$(docker ps -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" \
    --filter "label=io.sandman.run=any-$name")" sh -c 'ps -o args | grep -c "[s]leep 60"' 2>&1 || true)
  expect_eq "$name: no process of the timed-out call is left" 0 "$left"
done
it_done
