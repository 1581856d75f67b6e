#!/usr/bin/env bash
# Snapshots with their memory (`sandbox snapshot --memory`, docs/state.md),
# against the real engine. Under gVisor (--runtime runsc, the tests' own
# general image): a shell loop counts in a shell variable and a Python
# process keeps a random value it made and a count in its variables, both
# writing them to /tmp; after the memory snapshot the source goes on (the
# same processes, counting on); two forks and a rollback come back with
# those processes restored (the same pids, the Python value the same, the
# counts going on from where they were when the snapshot was taken, never
# from 1), the /workspace files the same by hash; the two forks are
# separate (new containers, names and run ids; a write in one is not in
# the other) and `snapshot inspect` says memory with the checkpoint's
# size. Under runc the memory snapshot is refused as hibernate is (exit
# 125, CRIU named) and the sandbox runs on untouched; a stopped sandbox
# has no memory to keep (exit 1). On an engine without checkpoints (its
# experimental mode off) the gVisor branch checks the refusal instead.
# Waits are bounded polls.
source "$(dirname "$0")/lib.sh"
require_engine

trap kill_pids_and_cleanup EXIT
cleanup_instance
rm -rf "${SANDMAN_STATE_DIR:?}"/*
WORK=$(mktemp -d)
remove_snapshot_images() {
  local ids
  ids=$(docker images -q --filter "label=io.sandman.snapshot.instance=$SANDMAN_INSTANCE" | sort -u)
  [ -z "$ids" ] || docker rmi -f $ids >/dev/null 2>&1 || true
}
trap 'kill_pids_and_cleanup; remove_snapshot_images; rm -rf "$WORK"' EXIT

GENERAL=$(it_test_image general) || { it_fail "the test image general: scripts/test-images.sh failed"; it_done; exit 1; }
experimental=$(docker info -f '{{.ExperimentalBuild}}')

GEN='mkdir -p t; i=0; while [ $i -lt 200 ]; do echo "file $i $((i * 7919 % 1000003))" >t/f$i; i=$((i + 1)); done'
TREE='cd /workspace && find t -type f -exec sha256sum {} + | sort -k 2 | sha256sum | cut -c1-64'
# The shell loop (its count in a variable) and the Python process (a
# random value it made and its count, in its variables).
LOOP="sh -c 'n=0; while :; do n=\$((n + 1)); echo \$n >/tmp/counter.new; mv -f /tmp/counter.new /tmp/counter; sleep 0.2; done' mem-loop \
>/dev/null 2>&1 & echo \$! >/tmp/loop.pid"
PY="python3 -c 'import os, time
v = os.urandom(8).hex(); n = 0
while True:
    n += 1; open(\"/tmp/py.new\", \"w\").write(\"%s %d\" % (v, n)); os.replace(\"/tmp/py.new\", \"/tmp/py\"); time.sleep(0.2)
' >/dev/null 2>&1 & echo \$! >/tmp/py.pid"

declare -A RUN_FLAGS=()
call() {
  local run=$1
  shift
  # shellcheck disable=SC2086 # the run's flags are words
  "$SANDMAN" run --mode per_run --run-id "$run" ${RUN_FLAGS[$run]:-} --json "$@"
}
stdout_of() { python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["stdout"])'; }
out_of() { call "$@" | stdout_of | tr -d '\n'; }
name_of() { docker ps -a --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" \
  --filter "label=io.sandman.run=$1" --format '{{.Names}}'; }
engine_state() { docker inspect -f '{{.State.Status}}' "$1" 2>/dev/null || echo gone; }
counter() { out_of "$1" -- cat /tmp/counter; }
py_value() { out_of "$1" -- cat /tmp/py; }
# "LOOP-PID PY-PID" when both processes still run (their command lines), else "gone".
pids() {
  out_of "$1" -- sh -c 'l=$(cat /tmp/loop.pid) && p=$(cat /tmp/py.pid) &&
    tr "\0" " " </proc/$l/cmdline | grep -q "mem-loo[p]" && tr "\0" " " </proc/$p/cmdline | grep -q "urando[m]" &&
    echo "$l $p" || echo gone'
}
wait_counter_past() { it_counter_past "$2" counter "$1"; }
setup() {
  local run=$1
  shift
  RUN_FLAGS[$run]="$*"
  expect_eq "$run: the tool wrote its files and left its processes" "made" \
    "$(out_of "$run" -- sh -c "cd /workspace && $GEN && $LOOP && $PY && echo made")"
  check "$run: the loop counts" wait_counter_past "$run" 5
}
listed() { "$SANDMAN" snapshot list --json | json "' '.join(sorted(x['name'] for x in d))"; }

# --- runc: refused as hibernate is; a stopped sandbox has no memory ------------
R1=memsnap-runc-$$
setup "$R1" --image "$GENERAL"
N1=$(name_of "$R1")
pids1=$(pids "$R1")
if "$SANDMAN" sandbox snapshot --run-id "$R1" --memory --name m-runc >"$WORK/out" 2>&1; then rc=0; else rc=$?; fi
if [ "$rc" -eq 0 ]; then
  it_pass "runc with a working CRIU on the engine's host: the memory snapshot is made"
else
  expect_eq "a memory snapshot under runc: refused (exit 125)" 125 "$rc"
  if [ "$experimental" = true ]; then
    expect_contains "it says what hibernate says: CRIU" "whose checkpoint needs a working CRIU" "$(cat "$WORK/out")"
  else
    expect_contains "it says the engine's experimental mode is off" "experimental mode is off" "$(cat "$WORK/out")"
  fi
  expect_eq "... no snapshot is listed" "" "$(listed)"
  expect_eq "... the sandbox runs on" "running" "$(engine_state "$N1")"
  expect_eq "... its processes too, the same" "$pids1" "$(pids "$R1")"
fi
"$SANDMAN" snapshot rm m-runc >/dev/null 2>&1 || true
"$SANDMAN" sandbox pause --run-id "$R1" --tier stop >/dev/null
if "$SANDMAN" sandbox snapshot --run-id "$R1" --memory --name m-stopped >"$WORK/out" 2>&1; then rc=0; else rc=$?; fi
expect_eq "a memory snapshot of a stopped sandbox: exit 1" 1 "$rc"
expect_contains "... it says there is no memory to keep" "no memory to keep" "$(cat "$WORK/out")"

# --- gVisor -----------------------------------------------------------------------
R2=memsnap-gv-$$
setup "$R2" --runtime runsc --image "$GENERAL"
N2=$(name_of "$R2")
expect_eq "the sandbox runs under runsc" "runsc" "$(docker inspect -f '{{.HostConfig.Runtime}}' "$N2")"
tree=$(out_of "$R2" -- sh -c "$TREE")
pids2=$(pids "$R2")
expect_eq "its two processes run" 2 "$(wc -w <<<"$pids2")"
if [ "$experimental" != true ]; then
  if "$SANDMAN" sandbox snapshot --run-id "$R2" --memory --name m1 >"$WORK/out" 2>&1; then rc=0; else rc=$?; fi
  expect_eq "a memory snapshot on an engine without checkpoints: refused (exit 125)" 125 "$rc"
  expect_contains "it says the engine's experimental mode is off" "experimental mode is off" "$(cat "$WORK/out")"
  expect_eq "... the sandbox runs on, its processes the same" "$pids2" "$(pids "$R2")"
  it_done
  exit
fi
c0=$(counter "$R2")
py0=$(py_value "$R2")
v0=${py0% *}
n0=${py0#* }
out=$("$SANDMAN" sandbox snapshot --run-id "$R2" --memory --name m1 --json)
expect_eq "the memory snapshot is made and says so" "m1 True" "$(json "d['name'], d['memory']" <<<"$out" | tr -d "(),'")"
check "its size counts the checkpoint" test "$(json "d['size']['checkpoint']" <<<"$out")" -gt 100000
echo "# the memory snapshot took $(json "d['duration_ms']" <<<"$out") ms, checkpoint $(json "d['size']['checkpoint']" <<<"$out") bytes"
out=$("$SANDMAN" snapshot inspect m1)
expect_eq "snapshot inspect says it has memory, with the checkpoint's size" "True True" \
  "$(json "d['memory'], d['size']['checkpoint'] > 100000" <<<"$out" | tr -d "(),'")"
check "... its folder holds the checkpoint" test -s "$(ls -d "$SANDMAN_STATE_DIR"/snapshots/*/checkpoint)/checkpoint.img"
c1=$(counter "$R2")
check "the source goes on counting after the snapshot ($c1, was $c0)" test "$c1" -ge "$c0"
expect_eq "... with the same processes" "$pids2" "$(pids "$R2")"
expect_eq "... and the same Python value" "$v0" "$(py_value "$R2" | cut -d' ' -f1)"
c_src=$(counter "$R2")

out=$("$SANDMAN" sandbox fork --from-snapshot m1 --count 2 --prefix memfork --json)
mapfile -t FORKS < <(json "'\n'.join(x['run_id'] for x in d if x.get('id'))" <<<"$out")
expect_eq "two forks are made" 2 "${#FORKS[@]}"
for f in "${FORKS[@]}"; do
  RUN_FLAGS[$f]="--runtime runsc --image $GENERAL"
  expect_eq "fork $f: its processes are restored (the same pids)" "$pids2" "$(pids "$f")"
  py=$(py_value "$f")
  expect_eq "fork $f: the Python process keeps its value" "$v0" "${py% *}"
  check "fork $f: the Python count goes on from where it was (${py#* } >= $n0), not from 1" test "${py#* }" -ge "$n0"
  check "fork $f: the shell count goes on ($(counter "$f") >= $c0)" test "$(counter "$f")" -ge "$c0"
  expect_eq "fork $f: its files are the same by hash" "$tree" "$(out_of "$f" -- sh -c "$TREE")"
done
if [ "${#FORKS[@]}" -eq 2 ]; then
  a=${FORKS[0]} b=${FORKS[1]}
  na=$(name_of "$a") nb=$(name_of "$b")
  check "the forks are new containers with names of their own" test -n "$na" -a -n "$nb" -a "$na" != "$nb" -a "$na" != "$N2"
  out_of "$a" -- sh -c 'echo only-a >/workspace/a-only && echo only-a >/tmp/a-only' >/dev/null
  expect_eq "a write in one fork is not in the other" "no no" \
    "$(out_of "$b" -- sh -c 'w=no; t=no; test -e /workspace/a-only && w=yes; test -e /tmp/a-only && t=yes; echo "$w $t"')"
  expect_eq "... nor in the source" "no" "$(out_of "$R2" -- sh -c 'test -e /workspace/a-only && echo yes || echo no')"
fi

# A rollback of the source to the memory snapshot: its processes come back
# as they were then (its count back below where it had gone on to).
check "the source counted on past the snapshot" wait_counter_past "$R2" "$((c_src + 5))"
c_before=$(counter "$R2")
"$SANDMAN" sandbox rollback --to m1 --run-id "$R2" >/dev/null
c_back=$(counter "$R2")
check "after the rollback its count is the snapshot's again ($c0 <= $c_back < $c_before)" \
  test "$c_back" -ge "$c0" -a "$c_back" -lt "$c_before"
expect_eq "... with its processes restored" "$pids2" "$(pids "$R2")"
expect_eq "... and its Python value" "$v0" "$(py_value "$R2" | cut -d' ' -f1)"
expect_eq "... and its files" "$tree" "$(out_of "$R2" -- sh -c "$TREE")"

for f in "${FORKS[@]}"; do "$SANDMAN" sandbox rm "$(name_of "$f")" >/dev/null 2>&1 || true; done
"$SANDMAN" sandbox rm "$N2" >/dev/null 2>&1 || true
out=$("$SANDMAN" snapshot rm --json m1)
expect_eq "the memory snapshot is removed" "['m1']" "$(json "d['removed']" <<<"$out")"
check "... its folder and checkpoint with it" test -z "$(ls -A "$SANDMAN_STATE_DIR"/snapshots 2>/dev/null | grep -v '^\.' || true)"
it_done
