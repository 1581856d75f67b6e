#!/usr/bin/env bash
# The idle lifecycle (docs/state.md#the-idle-lifecycle), against the real
# engine, with short times (freeze_after 2s, stop_after 5s, remove_after
# 9s; 20s for the runner): a keyed sandbox left unused goes running -> frozen -> stopped ->
# removed, each move an audit row ("lifecycle: ...") in that order; its
# 200 files are the same by hash after each move and a call into it just
# works ("resumed": "frozen", then "stopped"); a sandbox busy with a call
# (`sleep`) is never moved while the call runs, though it is unused for
# longer than remove_after; `sandbox list` says when it entered its state.
# Both ways it is applied: `sandman sandbox reap` (no runner) and the
# runner by itself (`worker start`, its periodic tick); the runner also
# reaps snapshots by itself (snapshots: {keep: 1}). A configuration
# that breaks the order is refused by both. Waits are bounded polls for a
# state, never fixed sleeps taken as results.
source "$(dirname "$0")/lib.sh"
require_engine
it_runner_workdir
# The snapshot images this test makes go too.
trap 'stop_worker; docker images -q --filter "label=io.sandman.snapshot.instance=$SANDMAN_INSTANCE" |
  sort -u | xargs -r docker rmi -f >/dev/null 2>&1; cleanup_instance; rm -rf "$WORK"' EXIT
rm -rf "${SANDMAN_STATE_DIR:?}"/*
IMAGE=sandman/minimal:latest

AUDIT=$WORK/audit.jsonl
CFG=$WORK/sandman.yaml
cat >"$CFG" <<EOF
version: 1
defaults:
  image: $IMAGE
  lifecycle: {freeze_after: 2s, stop_after: 5s, remove_after: 9s}
audit: {enabled: true, file: $AUDIT}
EOF
S() { "$SANDMAN" --config "$CFG" "$@"; }

# 200 files of known contents in ten folders; the host knows every hash.
GEN='mkdir -p t; i=0; while [ $i -lt 200 ]; do d=t/d$((i % 10)); mkdir -p $d
echo "file $i $((i * 7919 % 1000003))" >$d/f$i; i=$((i + 1)); done'
TREE='cd /workspace && find t -type f -exec sha256sum {} + | sort -k 2 && find t | sort | sha256sum'
(mkdir -p "$WORK/gen" && cd "$WORK/gen" && sh -c "$GEN" &&
  { find t -type f -exec sha256sum {} + | sort -k 2; find t | sort | sha256sum; }) >"$WORK/expected"
expect_eq "the expected tree: 200 files and its path list" 201 "$(wc -l <"$WORK/expected")"

call() { local run=$1; shift; S run --mode per_run --run-id "$run" --json "$@"; }
stdout_of() { python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin).get("stdout",""))'; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin).get('$1'))"; }
# The state `sandbox list --json` gives the sandbox of run RUN ("gone": none).
state_of() {
  S sandbox list --json | json "([x.get('state') for x in d if x.get('run_id')=='$1'] or ['gone'])[0]"
}
# until_state WANT RUN STEP: runs STEP (a reap, or nothing) and looks
# again until the sandbox of RUN is in state WANT; 0 then, 1 after 60 s.
until_state() {
  local want=$1 run=$2 step=$3 i
  for i in $(seq 1 240); do
    [ -n "$step" ] && $step >/dev/null 2>&1
    [ "$(state_of "$run")" = "$want" ] && return 0
    sleep 0.25
  done
  return 1
}
reap() { S sandbox reap --json; }
# The lifecycle's audit rows of sandbox NAME, in order: "frozen stopped reaped".
moves_of() {
  python3 - "$AUDIT" "$1" <<'PY'
import json, sys
out = []
for line in open(sys.argv[1]):
    e = json.loads(line)
    um = e.get("unmapped", {})
    if um.get("sandbox") != sys.argv[2] or "lifecycle" not in (e.get("message") or ""):
        continue
    out.append(um.get("event", "").replace("sandbox.", ""))
print(" ".join(out))
PY
}
tree_same() {
  local what=$1 run=$2
  call "$run" -- sh -c "$TREE" >"$WORK/last.json" || true
  stdout_of <"$WORK/last.json" >"$WORK/tree"
  if diff -q "$WORK/expected" "$WORK/tree" >/dev/null; then
    it_pass "$what: the 200 files are the same, hash by hash"
  else
    it_fail "$what: the tree differs: $(diff "$WORK/expected" "$WORK/tree" | head -3 | tr '\n' ' ') $(head -c 300 "$WORK/last.json")"
  fi
}
name_of() { docker ps -a --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" \
  --filter "label=io.sandman.run=$1" --format '{{.Names}}'; }

# ---- sandman sandbox reap (no runner) ----
check "sandbox reap: the first call writes the files" call l1 -- sh -c "$GEN" >/dev/null
NAME=$(name_of l1)
check "sandbox reap: the sandbox is there" test -n "$NAME"
check "sandbox reap: frozen once unused for freeze_after" until_state frozen l1 reap
out=$(S sandbox list)
expect_contains "sandbox list: the state and when it entered it" "(frozen " "$(grep "l1" <<<"$out")"
expect_contains "sandbox list --json: state_since is set" "True" \
  "$(S sandbox list --json | json "[x.get('state_since') is not None for x in d if x.get('run_id')=='l1']")"
tree_same "sandbox reap: after the freeze" l1
expect_eq "sandbox reap: the call into the frozen sandbox says so" frozen "$(field resumed <"$WORK/last.json")"
check "sandbox reap: stopped once unused for stop_after" until_state stopped l1 reap
tree_same "sandbox reap: after the stop" l1
expect_eq "sandbox reap: the call into the stopped sandbox says so" stopped "$(field resumed <"$WORK/last.json")"
check "sandbox reap: removed once unused for remove_after" until_state gone l1 reap
# Frozen (then a call); frozen, stopped (then a call); frozen, stopped,
# removed: every chain in the order running -> frozen -> stopped -> removed.
expect_eq "sandbox reap: the audit rows of the moves, in order" \
  "frozen frozen stopped frozen stopped reaped" "$(moves_of "$NAME")"
expect_contains "sandbox reap: the removal's reason" "remove_after 9s" \
  "$(grep "$NAME" "$AUDIT" | grep sandbox.reaped | tail -1)"

# A sandbox busy with a call is never moved, though unused for longer than
# remove_after: the call's sandbox lock is what reap and the lifecycle see.
check "busy: the first call" call l2 -- true >/dev/null
NAME2=$(name_of l2)
t0=$(date +%s)
call l2 -- sleep 14 >"$WORK/sleep.json" 2>&1 &
SLEEPER=$!
IT_PIDS+=("$SLEEPER")
busy=no
for i in $(seq 1 120); do
  [ "$(S sandbox list --json | json "[x.get('busy') for x in d if x.get('run_id')=='l2']")" = "[True]" ] && busy=yes && break
  sleep 0.25
done
expect_eq "busy: the sleep call holds the sandbox" yes "$busy"
moved=none
while kill -0 "$SLEEPER" 2>/dev/null && [ $(($(date +%s) - t0)) -lt 11 ]; do
  reap >/dev/null 2>&1 || true
  st=$(state_of l2)
  [ "$st" != running ] && moved=$st
done
expect_eq "busy: not moved while its call ran (unused for more than remove_after since its first call)" none "$moved"
check "busy: 11 s and more passed while the call ran" test $(($(date +%s) - t0)) -ge 11
wait "$SLEEPER" || true
expect_eq "busy: the sleep call ended well" 0 "$(json "d.get('exit_code')" <"$WORK/sleep.json")"
expect_eq "busy: no lifecycle row while busy" "" "$(moves_of "$NAME2")"
S sandbox rm --run-id l2 >/dev/null 2>&1 || true

# ---- the runner, by itself ----
RAUDIT=$WORK/runner-audit.jsonl
# remove_after longer here: the runner moves sandboxes on its own clock, and
# the call into the stopped sandbox must come before it is removed.
sed "s|$AUDIT|$RAUDIT|; s|remove_after: 9s|remove_after: 20s|" "$CFG" >"$WORK/runner.yaml"
echo "snapshots: {keep: 1}" >>"$WORK/runner.yaml"
IT_WORKER_GLOBAL=(--config "$WORK/runner.yaml")
check "runner: starts with the lifecycle" it_start_worker --reap-interval 1s
TOKEN=$(cat "$WORK/token")
rcall() {
  curl -s --unix-socket "$SOCK" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -X POST http://runner/v1/execute \
    -d "$(python3 -c 'import json,sys; print(json.dumps({"command": sys.argv[2], "mode": "per_run", "run_id": sys.argv[1]}))' "$1" "$2")"
}
rstate() {
  curl -s --unix-socket "$SOCK" -H "Authorization: Bearer $TOKEN" 'http://runner/v1/sandboxes?all=1' |
    json "([x.get('state') for x in d if x.get('run_id')=='$1'] or ['gone'])[0]"
}
runtil() {
  local want=$1 run=$2 i
  for i in $(seq 1 240); do
    [ "$(rstate "$run")" = "$want" ] && return 0
    sleep 0.25
  done
  return 1
}
expect_eq "runner: the first call writes the files" 0 "$(rcall r1 "$GEN" | field exit_code)"
RNAME=$(name_of r1)
check "runner: frozen by itself" runtil frozen r1
expect_contains "runner: GET /v1/sandboxes gives state_since" "True" \
  "$(curl -s --unix-socket "$SOCK" -H "Authorization: Bearer $TOKEN" http://runner/v1/sandboxes |
    json "[x.get('state_since') is not None for x in d if x.get('run_id')=='r1']")"
check "runner: stopped by itself" runtil stopped r1
rcall r1 "$TREE" >"$WORK/last.json"
stdout_of <"$WORK/last.json" >"$WORK/tree"
check "runner: after the stop the 200 files are the same, hash by hash" diff -q "$WORK/expected" "$WORK/tree"
expect_eq "runner: the call into the stopped sandbox says so" stopped "$(field resumed <"$WORK/last.json")"
check "runner: removed by itself" runtil gone r1
expect_eq "runner: its audit rows of the moves, in order" "frozen stopped frozen stopped reaped" \
  "$(AUDIT=$RAUDIT moves_of "$RNAME")"
expect_contains "runner: a log line for each move" "lifecycle: sandbox $RNAME running -> frozen" \
  "$(cat "$WORK/runner.log")"

# snapshots: {keep: 1}: the runner reaps snapshots by itself, keeping the
# newest of each owner.
rcall r2 "echo one > /workspace/f" >/dev/null
check "runner: a first snapshot" S sandbox snapshot --run-id r2 --name lc-s1
check "runner: a second snapshot" S sandbox snapshot --run-id r2 --name lc-s2
snaps=
for i in $(seq 1 120); do
  snaps=$(S snapshot list --json | json "' '.join(x['name'] for x in d)")
  [ "$snaps" = lc-s2 ] && break
  sleep 0.25
done
expect_eq "runner: snapshots reaped by itself, the newest kept (snapshots.keep 1)" lc-s2 "$snaps"
# The reap writes its log line once the removal is done, which the listing
# above may see first: a bounded wait for the line.
for i in $(seq 1 40); do
  grep -q "snapshot reap removed snapshot lc-s1" "$WORK/runner.log" && break
  sleep 0.25
done
expect_contains "runner: a log line for the snapshot it reaped" "snapshot reap removed snapshot lc-s1" \
  "$(cat "$WORK/runner.log")"
stop_worker
S sandbox rm --run-id r2 >/dev/null 2>&1 || true
S snapshot rm lc-s2 >/dev/null 2>&1 || true

# ---- a configuration that breaks the order is refused ----
printf 'version: 1\ndefaults:\n  lifecycle: {freeze_after: 10s, stop_after: 5s}\n' >"$WORK/bad.yaml"
rc=0
out=$("$SANDMAN" --config "$WORK/bad.yaml" sandbox reap 2>&1) || rc=$?
expect_eq "config error: sandbox reap refuses (exit 2)" 2 "$rc"
expect_contains "config error: says which value breaks the order" \
  "defaults.lifecycle.stop_after: freeze_after (10s, defaults.lifecycle) must be shorter than stop_after (5s, defaults.lifecycle)" "$out"
IT_WORKER_GLOBAL=(--config "$WORK/bad.yaml")
it_start_worker --reap-interval 1s || true
sleep_bound=0
while kill -0 "$WORKER_PID" 2>/dev/null && [ $sleep_bound -lt 100 ]; do sleep 0.1; sleep_bound=$((sleep_bound + 1)); done
check "config error: the runner does not start" test ! -S "$SOCK"
WORKER_PID=

it_done
