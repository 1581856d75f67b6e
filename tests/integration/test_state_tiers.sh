#!/usr/bin/env bash
# Sandboxes that keep their state (docs/state.md), against the real engine:
# a tool writes 1,000 files of known hashes and leaves a counting loop
# running; after freeze, stop and hibernate the tree is the same file by
# file (nothing missing, nothing extra, every hash), the loop is there where
# the tier promises it (freeze and hibernate: the same process, its counter
# gone on from where it was, not from 0; stop: gone), and a call into the
# resting sandbox just works and says "resumed". Freeze and stop under runc,
# hibernate and stop under gVisor. Hibernate needs the engine's checkpoints
# (its experimental mode, which scripts/setup.sh turns on): the test reads
# what the engine reports and, with them, hibernates the gVisor sandbox for
# real; without them it checks the refusal. Under runc hibernate is refused
# saying what is missing (CRIU; the engine's checkpoints) and the sandbox
# is left running, untouched. Calls in flight: a pause waits or, with
# --no-wait, is refused. Waits are bounded polls.
source "$(dirname "$0")/lib.sh"
require_engine

trap kill_pids_and_cleanup EXIT
cleanup_instance
rm -rf "${SANDMAN_STATE_DIR:?}"/*
WORK=$(mktemp -d)
trap 'kill_pids_and_cleanup; rm -rf "$WORK"' EXIT

# The files: 1,000 in ten folders, one to five lines each, their contents
# a function of their number (so the host knows every hash), and an empty
# one. POSIX sh: the same script writes them in the sandbox and here.
GEN='mkdir -p t; i=0; while [ $i -lt 1000 ]; do d=t/d$((i % 10)); mkdir -p $d; : >$d/f$i; j=0
while [ $j -le $((i % 5)) ]; do echo "file $i line $j $((i * 7919 % 1000003))" >>$d/f$i; j=$((j + 1)); done
i=$((i + 1)); done; : >t/empty'
# The loop: counts in a shell variable (its memory) and writes the count
# to /tmp, its pid to /tmp/loop.pid; "state-loop" (its $0) marks it.
LOOP="sh -c 'n=0; while :; do n=\$((n + 1)); echo \$n >/tmp/counter.new; mv -f /tmp/counter.new /tmp/counter; sleep 0.2; done' state-loop \
>/dev/null 2>&1 & echo \$! >/tmp/loop.pid"
# What the sandbox holds: every file's hash and every path, sorted.
TREE='cd /workspace && find t -type f -exec sha256sum {} + | sort -k 2 && find t | sort | sha256sum'

(cd "$WORK" && sh -c "$GEN" && { find t -type f -exec sha256sum {} + | sort -k 2; find t | sort | sha256sum; }) \
  >"$WORK/expected"
expect_eq "the expected tree: 1,001 files and its path list" 1002 "$(wc -l <"$WORK/expected")"

# call RUN [run flags...] -- CMD: a per_run call with the run's own flags
# (RUN_FLAGS_<run's setup name>: the same settings every time, so no call
# replaces the sandbox), its JSON answer on stdout.
declare -A RUN_FLAGS=()
call() {
  local run=$1
  shift
  # shellcheck disable=SC2086 # the run's flags are words
  "$SANDMAN" run --mode per_run --run-id "$run" ${RUN_FLAGS[$run]:-} --json "$@"
}
field() { json "d.get('$1')"; }
stdout_of() { python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["stdout"])'; }
name_of() { docker ps -a --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" \
  --filter "label=io.sandman.run=$1" --format '{{.Names}}'; }
engine_state() { docker inspect -f '{{.State.Status}}' "$1" 2>/dev/null || echo gone; }
listed_state() {
  "$SANDMAN" sandbox list --json | json "[x.get('state') for x in d if x.get('run_id')=='$1'] or ['none']" |
    tr -d "[]' "
}

# Checks that the tree of RUN is the expected one, file by file. The
# answer is kept in $WORK/last.json.
tree_same() {
  local what=$1 run=$2
  call "$run" -- sh -c "$TREE" >"$WORK/last.json" || true
  stdout_of <"$WORK/last.json" >"$WORK/tree"
  if diff -q "$WORK/expected" "$WORK/tree" >/dev/null; then
    it_pass "$what: the 1,001 files are the same, hash by hash, nothing missing or extra"
  else
    it_fail "$what: the tree differs: $(diff "$WORK/expected" "$WORK/tree" | head -5 | tr '\n' ' ')"
  fi
}

# The loop's pid (from its pid file) and whether that process is the loop
# (its command line, not only a pid a new process may have taken again):
# "PID alive", else "none".
loop_state() {
  call "$1" -- sh -c 'p=$(cat /tmp/loop.pid 2>/dev/null) &&
    tr "\0" " " </proc/$p/cmdline 2>/dev/null | grep -q "state-loo[p]" && echo "$p alive" || echo none' |
    stdout_of | tr -d '\n'
}
counter() { call "$1" -- cat /tmp/counter | stdout_of | tr -d '\n'; }

# wait_counter_past RUN N: a bounded poll until the loop counted past N.
wait_counter_past() { it_counter_past "$2" counter "$1"; }

# setup RUN [run flags...]: the files and the loop.
setup() {
  local run=$1
  shift
  RUN_FLAGS[$run]="$*"
  echo "# $(date -u +%T) $run: setting up"
  out=$(call "$run" -- sh -c "cd /workspace && $GEN && $LOOP && echo made")
  expect_eq "$run: the tool wrote its files and left its loop" "made" "$(stdout_of <<<"$out" | tr -d '\n')"
  check "$run: the loop counts" wait_counter_past "$run" 1
}

# --- freeze (runc) -----------------------------------------------------------
R1=state-freeze-$$
setup "$R1"
N1=$(name_of "$R1")
tree_same "before any rest" "$R1"
loop1=$(loop_state "$R1")
expect_contains "the loop runs" "alive" "$loop1"
c_before=$(counter "$R1")

out=$("$SANDMAN" sandbox pause --run-id "$R1" --json)
expect_eq "freeze: previous running, state frozen" "running frozen True" \
  "$(json "' '.join(str(x) for x in (d['previous'], d['state'], d['changed']))" <<<"$out")"
expect_eq "freeze: the engine has it paused" "paused" "$(engine_state "$N1")"
expect_eq "freeze: list says frozen" "frozen" "$(listed_state "$R1")"
out=$("$SANDMAN" sandbox list --json)
check "freeze: list has state_since" \
  test -n "$(json "[x['state_since'] for x in d if x.get('run_id')=='$R1'][0] or ''" <<<"$out")"
out=$("$SANDMAN" sandbox pause --run-id "$R1" --json)
expect_eq "freeze again: nothing changes" "frozen False" "$(json "d['state'], d['changed']" <<<"$out" | tr -d "(),'")"

# The first call into the frozen sandbox just works and says so.
out=$(call "$R1" -- sh -c 'echo hello')
expect_eq "a call into a frozen sandbox works" "0 hello" \
  "$(json "str(d['exit_code']) + ' ' + d['stdout'].strip()" <<<"$out")"
expect_eq "it says resumed: frozen" "frozen" "$(field resumed <<<"$out")"
expect_eq "the engine runs it again" "running" "$(engine_state "$N1")"
expect_eq "the same container" "$N1" "$(name_of "$R1")"
out=$(call "$R1" -- true)
expect_eq "the next call has no resumed" "None" "$(field resumed <<<"$out")"
tree_same "after freeze" "$R1"
expect_eq "after freeze: the same loop process runs" "$loop1" "$(loop_state "$R1")"
check "after freeze: its counter goes on from where it was (memory kept)" \
  wait_counter_past "$R1" "$c_before"

echo "# $(date -u +%T) busy"
# --- a call in flight: a pause waits for it or, --no-wait, refuses ---------------
it_hold_busy "$N1" || it_fail "the busy lock was not held"
if "$SANDMAN" sandbox pause --run-id "$R1" --no-wait >"$WORK/out" 2>&1; then rc=0; else rc=$?; fi
expect_eq "pause --no-wait with a call in flight: exit 1" 1 "$rc"
expect_contains "it says a call is in flight" "call in flight" "$(cat "$WORK/out")"
expect_eq "and nothing changed" "running" "$(engine_state "$N1")"
"$SANDMAN" sandbox pause --run-id "$R1" --wait 2m --json >"$WORK/waited" 2>&1 &
PAUSER=$!
IT_PIDS+=("$PAUSER")
# The pause waits while the call is in flight: nothing is frozen under it.
expect_eq "a waiting pause leaves the sandbox running while the call runs" "running" "$(engine_state "$N1")"
kill -9 "$IT_HOLDER"
wait "$IT_HOLDER" 2>/dev/null || true
if wait "$PAUSER"; then rc=0; else rc=$?; fi
expect_eq "once the call ended, the pause went on" "0 frozen" "$rc $(json "d['state']" <"$WORK/waited" 2>/dev/null)"
out=$("$SANDMAN" sandbox resume --run-id "$R1" --json)
expect_eq "resume: frozen -> running" "frozen running" "$(json "d['previous'] + ' ' + d['state']" <<<"$out")"
expect_eq "resume: the engine runs it" "running" "$(engine_state "$N1")"

echo "# $(date -u +%T) hibernate"
# --- hibernate: refused with what is missing; the sandbox untouched -----------
# Decided by what the engine reports, never skipped: with its experimental
# mode on the engine tries the runc checkpoint (CRIU) and sandman refuses
# when it fails; with it off sandman refuses before touching anything.
experimental=$(docker info -f '{{.ExperimentalBuild}}')
echo "# the engine reports experimental: $experimental"
check "the engine says whether it offers checkpoints (true or false)" \
  test "$experimental" = true -o "$experimental" = false
if [ "$experimental" = true ] && command -v criu >/dev/null && criu check >/dev/null 2>&1; then
  # A host with a working CRIU (not Debian 12's on these kernels): it works.
  out=$("$SANDMAN" sandbox pause --run-id "$R1" --tier hibernate --json)
  expect_eq "hibernate under runc with a working CRIU: hibernated" "hibernated" "$(json "d['state']" <<<"$out")"
  out=$("$SANDMAN" sandbox resume --run-id "$R1" --json)
  expect_eq "and resumed" "running" "$(json "d['state']" <<<"$out")"
else
  if "$SANDMAN" sandbox pause --run-id "$R1" --tier hibernate >"$WORK/out" 2>&1; then rc=0; else rc=$?; fi
  expect_eq "hibernate under runc: refused (exit 125)" 125 "$rc"
  msg=$(cat "$WORK/out")
  expect_contains "the refusal names runc" "runs under runc" "$msg"
  expect_contains "the refusal names CRIU" "CRIU" "$msg"
  expect_contains "the refusal says what to do instead" "freeze or stop" "$msg"
  if [ "$experimental" = false ]; then
    expect_contains "the refusal says the engine's experimental mode is off" "experimental mode is off" "$msg"
  elif ! command -v criu >/dev/null; then
    expect_contains "the refusal says CRIU is not installed" "CRIU is not installed" "$msg"
  fi
  expect_eq "after the refusal the sandbox still runs" "running" "$(engine_state "$N1")"
  expect_eq "after the refusal list says running" "running" "$(listed_state "$R1")"
  expect_eq "after the refusal no successor container is left" "" \
    "$(docker ps -a --filter "name=^/$N1-" --format '{{.Names}}')"
fi
expect_eq "after the refusal the loop still runs" "$loop1" "$(loop_state "$R1")"

echo "# $(date -u +%T) stop"
# --- stop (runc) --------------------------------------------------------------
out=$("$SANDMAN" sandbox pause --run-id "$R1" --tier stop --json)
expect_eq "stop: previous running, state stopped" "running stopped" "$(json "d['previous'] + ' ' + d['state']" <<<"$out")"
check "stop: it says how much /workspace it saved" test "$(json "d['workspace_bytes']" <<<"$out")" -gt 1000000
expect_eq "stop: the engine has it exited" "exited" "$(engine_state "$N1")"
expect_eq "stop: list says stopped" "stopped" "$(listed_state "$R1")"
if "$SANDMAN" sandbox pause --run-id "$R1" --tier freeze >"$WORK/out" 2>&1; then rc=0; else rc=$?; fi
expect_eq "freeze from stopped: refused (exit 1)" 1 "$rc"
expect_contains "it says resume first" "resume it first" "$(cat "$WORK/out")"
# A reap keeps a stopped sandbox (its engine state is "exited", which a
# reap removes otherwise): it was put to rest on purpose.
out=$("$SANDMAN" sandbox reap --json)
expect_eq "reap: the stopped sandbox is spared, not removed" "0 1" \
  "$(json "str(sum(1 for x in d['removed'] if x['name']=='$N1')) + ' ' + str(sum(1 for x in d['spared'] if x['name']=='$N1'))" <<<"$out")"
expect_contains "reap: it says why" "on purpose" "$(json "[x['reason'] for x in d['spared'] if x['name']=='$N1']" <<<"$out")"
expect_eq "after the reap the stopped sandbox is there" "exited" "$(engine_state "$N1")"
out=$(call "$R1" -- sh -c 'echo back')
expect_eq "a call into a stopped sandbox works" "0 back" \
  "$(json "str(d['exit_code']) + ' ' + d['stdout'].strip()" <<<"$out")"
expect_eq "it says resumed: stopped" "stopped" "$(field resumed <<<"$out")"
expect_eq "the same container" "$N1" "$(name_of "$R1")"
tree_same "after stop" "$R1"
expect_eq "after stop: the loop is gone (processes end)" "none" "$(loop_state "$R1")"

# Frozen, then stopped from there; then resumed by the command.
"$SANDMAN" sandbox pause --run-id "$R1" --json >/dev/null
out=$("$SANDMAN" sandbox pause --run-id "$R1" --tier stop --json)
expect_eq "stop from frozen" "frozen stopped" "$(json "d['previous'] + ' ' + d['state']" <<<"$out")"
out=$("$SANDMAN" sandbox resume --run-id "$R1" --json)
expect_eq "resume: stopped -> running" "stopped running" "$(json "d['previous'] + ' ' + d['state']" <<<"$out")"
tree_same "after frozen then stopped then resume" "$R1"

# A sandbox that is not keyed is refused.
if "$SANDMAN" sandbox pause no-such-sandbox-$$ >"$WORK/out" 2>&1; then rc=0; else rc=$?; fi
expect_eq "pause of a missing sandbox: exit 1" 1 "$rc"

# --- gVisor: stop, and hibernate's refusal without the engine's checkpoints ---
R2=state-gvisor-$$
setup "$R2" --runtime runsc
N2=$(name_of "$R2")
expect_eq "the gVisor sandbox runs under runsc" "runsc" "$(docker inspect -f '{{.HostConfig.Runtime}}' "$N2")"
tree_same "gVisor: before any rest" "$R2"
loop2=$(loop_state "$R2")
expect_contains "the gVisor sandbox's loop runs" "alive" "$loop2"
if [ "$experimental" = false ]; then
  if "$SANDMAN" sandbox pause --run-id "$R2" --tier hibernate >"$WORK/out" 2>&1; then rc=0; else rc=$?; fi
  expect_eq "hibernate under gVisor on an engine without experimental mode: refused (exit 125)" 125 "$rc"
  expect_contains "the refusal says the engine's experimental mode is off" "experimental mode is off" \
    "$(cat "$WORK/out")"
  expect_eq "after the refusal the gVisor sandbox runs" "running" "$(engine_state "$N2")"
  expect_eq "after the refusal its loop runs" "$loop2" "$(loop_state "$R2")"
else
  # The engine offers checkpoints (scripts/setup.sh's engine, the CI's):
  # hibernate for real. The counter is read in the very call that restores
  # the sandbox: it goes on from where it was, not from 0 (a loop started
  # again would show a small number; nothing starts it again anyway).
  check "gVisor: the loop has counted past 10" wait_counter_past "$R2" 10
  c2=$(counter "$R2")
  out=$("$SANDMAN" sandbox pause --run-id "$R2" --tier hibernate --json)
  expect_eq "hibernate: running -> hibernated" "running hibernated True" \
    "$(json "' '.join(str(x) for x in (d['previous'], d['state'], d['changed']))" <<<"$out")"
  check "hibernate: it says how much /workspace it saved" test "$(json "d['workspace_bytes']" <<<"$out")" -gt 1000000
  echo "# hibernate took $(json "d['duration_ms']" <<<"$out") ms"
  expect_eq "hibernate: list says hibernated" "hibernated" "$(listed_state "$R2")"
  expect_eq "hibernate: the engine has its container made, not running" "created" "$(engine_state "$N2")"
  out=$(call "$R2" -- cat /tmp/counter)
  expect_eq "a call into a hibernated sandbox works and says resumed: hibernated" "0 hibernated" \
    "$(json "str(d['exit_code']) + ' ' + str(d.get('resumed'))" <<<"$out")"
  c3=$(stdout_of <<<"$out" | tr -d '\n')
  check "after hibernate: the counter read by that call ($c3) is not below the one before ($c2): kept in memory" \
    test "${c3:-0}" -ge "$c2"
  expect_eq "after hibernate: the engine runs it" "running" "$(engine_state "$N2")"
  tree_same "gVisor: after hibernate" "$R2"
  expect_eq "after hibernate: the same loop process runs" "$loop2" "$(loop_state "$R2")"
  check "after hibernate: its counter goes on counting" wait_counter_past "$R2" "$c3"
  # A process listening on TCP (nc -l, waiting in accept): gVisor's
  # checkpoint cannot save it and, failing, ends the sandbox (its processes
  # and its /workspace would be lost). Refused before anything is touched.
  call "$R2" -- sh -c 'nc -l -p 8123 >/dev/null 2>&1 & echo $! >/tmp/nc.pid' >/dev/null
  if "$SANDMAN" sandbox pause --run-id "$R2" --tier hibernate >"$WORK/out" 2>&1; then rc=0; else rc=$?; fi
  expect_eq "hibernate with a TCP listener in the gVisor sandbox: refused (exit 125)" 125 "$rc"
  expect_contains "the refusal says a process listens on TCP" "listens on a TCP port" "$(cat "$WORK/out")"
  expect_eq "after the refusal the gVisor sandbox runs" "running" "$(engine_state "$N2")"
  expect_eq "after the refusal its loop runs" "$loop2" "$(loop_state "$R2")"
  tree_same "gVisor: after the refused hibernate" "$R2"
  call "$R2" -- sh -c 'kill $(cat /tmp/nc.pid)' >/dev/null
  # Frozen first, hibernated from there, brought back by the command.
  c4=$(counter "$R2")
  "$SANDMAN" sandbox pause --run-id "$R2" --json >/dev/null
  out=$("$SANDMAN" sandbox pause --run-id "$R2" --tier hibernate --json)
  expect_eq "hibernate from frozen" "frozen hibernated" "$(json "d['previous'] + ' ' + d['state']" <<<"$out")"
  out=$("$SANDMAN" sandbox resume --run-id "$R2" --json)
  expect_eq "resume: hibernated -> running" "hibernated running" "$(json "d['previous'] + ' ' + d['state']" <<<"$out")"
  echo "# restore took $(json "d['duration_ms']" <<<"$out") ms"
  c5=$(counter "$R2")
  check "after the second hibernate: the counter ($c5) is not below the one before ($c4)" test "${c5:-0}" -ge "$c4"
  tree_same "gVisor: after frozen, hibernated, resumed" "$R2"
  expect_eq "after the second hibernate: the same loop process runs" "$loop2" "$(loop_state "$R2")"
fi
out=$("$SANDMAN" sandbox pause --run-id "$R2" --tier stop --json)
expect_eq "gVisor stop: stopped" "stopped" "$(json "d['state']" <<<"$out")"
expect_eq "gVisor stop: the engine has it exited" "exited" "$(engine_state "$N2")"
out=$(call "$R2" -- sh -c 'echo back')
expect_eq "a call into a stopped gVisor sandbox says resumed: stopped" "stopped back" \
  "$(json "d.get('resumed') + ' ' + d['stdout'].strip()" <<<"$out")"
tree_same "gVisor: after stop" "$R2"
expect_eq "gVisor: after stop the loop is gone" "none" "$(loop_state "$R2")"

it_done
