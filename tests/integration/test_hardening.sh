#!/usr/bin/env bash
# Smaller hardening (issue 13, item 10), each written as what it stops: a
# device or setuid file in /workspace (the mount is nosuid,nodev, seen from
# inside); gVisor with a low --pids (it failed every call: gVisor's own
# threads counted against the limit); the runtime's own error text passed
# off as the tool's stderr (a sandbox at its process limit).
source "$(dirname "$0")/lib.sh"
require_engine
trap cleanup_instance EXIT
GENERAL=$(it_test_image general) || { it_fail "the test image general: scripts/test-images.sh failed"; it_done; exit 1; }

field() { python3 -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print("" if v is None else v, end="")' "$1"; }

for m in per_tool per_run; do
  opts=$("$SANDMAN" run --mode "$m" --run-id mounts -- sh -c "grep ' /workspace ' /proc/mounts")
  expect_contains "/workspace is mounted nosuid ($m, seen from inside)" nosuid "$opts"
  expect_contains "/workspace is mounted nodev ($m, seen from inside)" nodev "$opts"
done

if docker info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then
  # gVisor with --pids 64: calls work, the limit holds inside, the sandbox lives on.
  j=$("$SANDMAN" run --json --mode per_run --run-id gv64 --runtime runsc --pids 64 -- echo ok)
  expect_eq "runsc --pids 64: a call works" "ok" "$(field stdout <<<"$j" | tr -d '\n')"
  j=$("$SANDMAN" run --json --mode per_run --run-id gv64 --runtime runsc --pids 64 -- \
    sh -c 'for i in $(seq 20); do sleep 30 >/dev/null 2>&1 & done; ls -d /proc/[0-9]* | wc -l; kill $(jobs -p)')
  expect_eq "runsc --pids 64: 20 processes at once work" 0 "$(field exit_code <<<"$j")"
  j=$("$SANDMAN" run --json --mode per_tool --runtime runsc --pids 64 --timeout 60 -- \
    sh -c 'for i in $(seq 80); do sleep 30 >/dev/null 2>&1 & done' || true)
  expect_contains "runsc --pids 64: the 65th process is refused inside the sandbox" "can't fork" \
    "$(field stderr <<<"$j")"
  expect_eq "runsc --pids 64: that is the tool's failure, not the sandbox's" tool "$(field failure_kind <<<"$j")"
  j=$("$SANDMAN" run --json --mode per_run --run-id gv64 --runtime runsc --pids 64 -- echo still)
  expect_eq "runsc --pids 64: the sandbox still serves calls" "still" "$(field stdout <<<"$j" | tr -d '\n')"
elif [ "${CI:-}" = true ]; then
  it_fail "runsc is not registered with the engine (scripts/setup.sh registers it)"
else
  echo "# runsc not registered: gVisor checks skipped"
fi

# A process of an earlier call keeps every process slot taken. Under runc a
# new exec joins the cgroup after it is created (the pids limit stops forks,
# not joins), so the call starts and what it cannot fork is its own failure.
# gVisor's kernel refuses the exec itself: the runtime's words are then
# sandman's error, not the tool's stderr.
filler='import os,time
if os.fork(): raise SystemExit
os.setsid()
for fd in (0, 1, 2): os.close(fd)
end = time.time() + 120
while time.time() < end:
    try:
        if os.fork() == 0:
            time.sleep(300)
            os._exit(0)
    except OSError:
        time.sleep(0.01)'
gen=(--image "$GENERAL" --mode per_run --run-id full --pids 12)
"$SANDMAN" run "${gen[@]}" -- python3 -c "$filler"
# Wait until the filler holds every slot (not a sleep: a condition). Under
# runc the exec's own start forks too: when the filler took the last slot
# first, the runtime refuses the exec, a "sandbox" failure with nothing in
# the tool's stderr (a race with the filler, retried); when the call
# started, what it cannot fork is its own failure.
runtime_refusals=0 mixed=""
for _ in $(seq 100); do
  j=$("$SANDMAN" run --json "${gen[@]}" --timeout 20 -- sh -c 'true | true' || true)
  if [ "$(field failure_kind <<<"$j")" = sandbox ]; then
    runtime_refusals=$((runtime_refusals + 1))
    [ -z "$(field stderr <<<"$j")" ] || mixed="$j"
    continue
  fi
  [ "$(field exit_code <<<"$j")" != 0 ] && break
done
echo "# a full sandbox (runc): $runtime_refusals call(s) the runtime refused before one started"
expect_eq "a full sandbox (runc): a call that cannot fork is the tool's failure" tool \
  "$(field failure_kind <<<"$j")"
expect_eq "a full sandbox (runc): a call the runtime refused has nothing in the tool's stderr" "" \
  "$mixed"
expect_contains "a full sandbox (runc): the tool's stderr says why" "fork" "$(field stderr <<<"$j")"
"$SANDMAN" sandbox rm --run-id full >/dev/null

if docker info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then
  gen=(--image "$GENERAL" --mode per_run --run-id full --runtime runsc --pids 12)
  "$SANDMAN" run "${gen[@]}" -- python3 -c "$filler"
  for _ in $(seq 100); do
    j=$("$SANDMAN" run --json "${gen[@]}" --timeout 20 -- echo hi || true)
    [ "$(field failure_kind <<<"$j")" = sandbox ] && break
  done
  expect_eq "a full sandbox: failure_kind sandbox" sandbox "$(field failure_kind <<<"$j")"
  expect_eq "a full sandbox: exit 125" 125 "$(field exit_code <<<"$j")"
  expect_contains "a full sandbox: the runtime's words are the error" "runtime could not start the call" "$(field error <<<"$j")"
  expect_not_contains "a full sandbox: the wrapper script is left out of the error" "sandman-call" "$(field error <<<"$j")"
  expect_eq "a full sandbox: the tool's stderr is empty (nothing of the runtime's)" "" "$(field stderr <<<"$j")"
  "$SANDMAN" sandbox rm --run-id full >/dev/null
fi
it_done
