#!/usr/bin/env bash
# A change of state cut short (docs/state.md, Safety; issue 29 item 5),
# against the real engine: `sandman sandbox pause --tier freeze|stop|
# hibernate`, `sandbox resume` of each, `sandbox snapshot --memory` and the
# runner's pause route are SIGKILLed between two of their engine steps;
# then the sandbox answers a call with its files the same by hash and its
# counting loop where the tier promises it (the same process when the
# change was undone or for freeze and hibernate; gone after a stop that
# was finished), `sandbox list` says a true state, and nothing half-made is
# left: no saved tar in <state>/rest nothing owns, no successor, keeper or
# set-aside container, no checkpoint, no half snapshot listed, the engine
# and the record agreeing on running.
#
# Where the kill lands is deterministic: sandman talks to the engine
# through a gate (engine_gate.py) that holds one chosen request, before
# the engine sees it, once the engine has answered it, or half way
# through its answer, and says so in a file; a bounded poll on that file,
# then SIGKILL. No fixed sleeps, no timed assertions.
source "$(dirname "$0")/lib.sh"
require_engine

WORK=$(mktemp -d)
remove_snapshot_images() {
  local ids
  ids=$(docker images -q --filter "label=io.sandman.snapshot.instance=$SANDMAN_INSTANCE" | sort -u)
  [ -z "$ids" ] || docker rmi -f $ids >/dev/null 2>&1 || true
}
trap 'stop_worker; kill_pids_and_cleanup; remove_snapshot_images; rm -rf "$WORK"' EXIT
cleanup_instance
rm -rf "${SANDMAN_STATE_DIR:?}"/*
GATE=$SRC_DIR/tests/integration/engine_gate.py
ENGINE_SOCK=$(it_engine_socket) || { it_fail "the engine is not on a local socket"; it_done; exit 1; }
experimental=$(docker info -f '{{.ExperimentalBuild}}')

# 200 files of known hashes and one of 2 MB (so that reading /workspace
# takes more than the gate lets through in "part"); POSIX sh, run here and
# in the sandbox.
GEN='mkdir -p t; i=0; while [ $i -lt 200 ]; do echo "file $i $((i * 7919 % 1000003))" >t/f$i; i=$((i + 1)); done
head -c 2000000 /dev/zero >t/big'
TREE='cd /workspace && find t -type f -exec sha256sum {} + | sort -k 2 && find t | sort | sha256sum'
(cd "$WORK" && sh -c "$GEN" && { find t -type f -exec sha256sum {} + | sort -k 2; find t | sort | sha256sum; }) \
  >"$WORK/expected"
expect_eq "the expected tree: 201 files and its path list" 202 "$(wc -l <"$WORK/expected")"
LOOP="sh -c 'n=0; while :; do n=\$((n + 1)); echo \$n >/tmp/counter.new; mv -f /tmp/counter.new /tmp/counter; sleep 0.2; done' crash-loop \
>/dev/null 2>&1 & echo \$! >/tmp/loop.pid"

declare -A RUN_FLAGS=()
call() {
  local run=$1
  shift
  # shellcheck disable=SC2086 # the run's flags are words
  "$SANDMAN" run --mode per_run --run-id "$run" ${RUN_FLAGS[$run]:-} --json "$@"
}
stdout_of() { python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin).get("stdout") or "")'; }
# The sandbox's own container (not a successor, set-aside or keeper).
name_of() { docker ps -a --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" \
  --filter "label=io.sandman.run=$1" --format '{{.Names}}' | grep -v -E -- '-(next|hib|keep)$' | head -1; }
engine_state() { docker inspect -f '{{.State.Status}}' "$1" 2>/dev/null || echo gone; }
listed_state() {
  "$SANDMAN" sandbox list --json | json "[x.get('state') for x in d if x.get('run_id')=='$1'] or ['none']" |
    tr -d "[]' "
}
# The loop's pid and whether it is that loop: "PID alive", else "none".
loop_state() {
  call "$1" -- sh -c 'p=$(cat /tmp/loop.pid 2>/dev/null) &&
    tr "\0" " " </proc/$p/cmdline 2>/dev/null | grep -q "crash-loo[p]" && echo "$p alive" || echo none' |
    stdout_of | tr -d '\n'
}
counter() { call "$1" -- cat /tmp/counter | stdout_of | tr -d '\n'; }
wait_counter_past() { it_counter_past "$2" counter "$1"; }
new_loop() {
  call "$1" -- sh -c "$LOOP" >/dev/null || true
  wait_counter_past "$1" 1 || it_fail "$1: the loop does not count"
  LOOP_PID=$(loop_state "$1")
}

# crash_at WHAT WHEN METHOD PATH_REGEX NTH CMD...: CMD (sandman) through the
# gate, SIGKILLed once the gate holds its NTH request METHOD PATH_REGEX
# (WHEN: before the engine has it, after the engine answered, part: half
# way through the answer). Fails when CMD ended without getting there.
crash_at() {
  local what=$1 when=$2 method=$3 re=$4 nth=$5 i n=${#IT_PIDS[@]}
  shift 5
  rm -f "$WORK/gate.sock" "$WORK/gate.mark"
  DOCKER_HOST=unix://$ENGINE_SOCK python3 "$GATE" "$WORK/gate.sock" "$WORK/gate.mark" \
    "$when" "$method" "$re" "$nth" &
  local gp=$!
  IT_PIDS+=("$gp")
  for i in $(seq 1 200); do [ -S "$WORK/gate.sock" ] && break; sleep 0.05; done
  DOCKER_HOST=unix://$WORK/gate.sock "$@" >"$WORK/killed.out" 2>&1 &
  local sp=$!
  IT_PIDS+=("$sp")
  for i in $(seq 1 2400); do
    [ -f "$WORK/gate.mark" ] && break
    kill -0 "$sp" 2>/dev/null || break
    sleep 0.05
  done
  if [ -f "$WORK/gate.mark" ]; then
    it_pass "$what: killed $when $(cut -d' ' -f1,2 <"$WORK/gate.mark" | sed 's,/v1\.[0-9]*,,; s,[0-9a-f]\{64\},ID,g')"
  else
    it_fail "$what: sandman never got to $when $method $re: $(tail -c 300 "$WORK/killed.out")"
  fi
  kill -9 "$sp" 2>/dev/null || true
  wait "$sp" 2>/dev/null || true
  kill "$gp" 2>/dev/null || true
  wait "$gp" 2>/dev/null || true
  IT_PIDS=("${IT_PIDS[@]:0:$n}") # both waited for: their pids are no longer ours
}

tree_same() {
  local what=$1 run=$2
  call "$run" -- sh -c "$TREE" >"$WORK/last.json" || true
  stdout_of <"$WORK/last.json" >"$WORK/tree"
  if diff -q "$WORK/expected" "$WORK/tree" >/dev/null; then
    it_pass "$what: the call answers, its 201 files the same by hash, nothing missing or extra"
  else
    it_fail "$what: the tree differs: $(head -c 300 "$WORK/last.json") $(diff "$WORK/expected" "$WORK/tree" | head -3 | tr '\n' ' ')"
  fi
}

# settled WHAT RUN: after a call, nothing of the change cut short is left.
settled() {
  local what=$1 run=$2 n id rec
  n=$(name_of "$run")
  id=$(docker inspect -f '{{.Id}}' "$n" 2>/dev/null || echo none)
  expect_eq "$what: listed running, the engine running" "running running" \
    "$(listed_state "$run") $(engine_state "$n")"
  rec=$SANDMAN_STATE_DIR/rest/$n.json
  if [ -f "$rec" ]; then
    expect_eq "$what: its record says running, nothing pending, its container" "running  $id" \
      "$(json "' '.join((d.get('state',''), d.get('pending',''), d.get('id','')))" <"$rec")"
  else
    it_pass "$what: no record (never at rest)"
  fi
  expect_eq "$what: nothing but records in <state>/rest (no saved tar, no half-written one)" "" \
    "$(cd "$SANDMAN_STATE_DIR/rest" 2>/dev/null && ls -A | grep -v '\.json$' || true)"
  expect_eq "$what: no successor, set-aside or keeper container left" "" \
    "$(docker ps -a --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --format '{{.Names}}' |
      grep -E -- "^$n-(next|hib|keep)$" || true)"
  expect_eq "$what: no checkpoint left on its container" "" \
    "$(curl -s --unix-socket "$ENGINE_SOCK" "http://engine/containers/$id/checkpoints" | tr -d ' \n' |
      grep -v -x -E '\[\]|null' || true)"
}

# whole WHAT RUN LOOP: the files (a call), the loop (LOOP: "same", the
# very process counting on; "none", gone with a stop) and settled.
whole() {
  local what=$1 run=$2 want=$3 before
  before=$(cat "$WORK/counter.$run" 2>/dev/null || echo 0)
  tree_same "$what" "$run"
  if [ "$want" = same ]; then
    expect_eq "$what: the loop is the same process, alive" "$LOOP_PID" "$(loop_state "$run")"
    check "$what: its count went on from $before" test "$(counter "$run")" -ge "$before"
  else
    expect_eq "$what: the loop ended with the stop" none "$(loop_state "$run")"
  fi
  settled "$what" "$run"
}
# Remembers the loop's count before a kill.
mark_count() { counter "$1" >"$WORK/counter.$1"; }

setup() {
  local run=$1
  shift
  RUN_FLAGS[$run]="$*"
  out=$(call "$run" -- sh -c "cd /workspace && $GEN && echo made") || true
  expect_eq "$run: the tool wrote its files" made "$(stdout_of <<<"$out" | tr -d '\n')"
  new_loop "$run"
  expect_contains "$run: its loop runs" alive "$LOOP_PID"
}
ID='[0-9a-f]{64}'
quiet() { "$@" >/dev/null; }
S=$SANDMAN

# ---- freeze and its resume (runc) -------------------------------------------
R1=crash-runc-$$
setup "$R1"
N1=$(name_of "$R1")
mark_count "$R1"
crash_at "freeze" before POST "^/containers/$ID/pause$" 1 "$S" sandbox pause --run-id "$R1"
expect_eq "freeze killed before the engine's pause: listed running, the engine running" "running running" \
  "$(listed_state "$R1") $(engine_state "$N1")"
whole "freeze killed before the engine's pause" "$R1" same

# (A call thaws a frozen sandbox: the count is read before.)
mark_count "$R1"
crash_at "freeze" after POST "^/containers/$ID/pause$" 1 "$S" sandbox pause --run-id "$R1"
expect_eq "freeze killed after the engine's pause: listed frozen, the engine paused" "frozen paused" \
  "$(listed_state "$R1") $(engine_state "$N1")"
crash_at "resume of frozen" before POST "^/containers/$ID/unpause$" 1 "$S" sandbox resume --run-id "$R1"
expect_eq "resume killed before the engine's unpause: listed frozen, the engine paused" "frozen paused" \
  "$(listed_state "$R1") $(engine_state "$N1")"
crash_at "resume of frozen" after POST "^/containers/$ID/unpause$" 1 "$S" sandbox resume --run-id "$R1"
expect_eq "resume killed after the engine's unpause: listed running, the engine running" "running running" \
  "$(listed_state "$R1") $(engine_state "$N1")"
whole "freeze and resume killed" "$R1" same

# ---- stop and its resume (runc) ---------------------------------------------
mark_count "$R1"
crash_at "stop" part GET "^/containers/$ID/archive\\?" 1 "$S" sandbox pause --tier stop --run-id "$R1"
expect_eq "stop killed half way through reading /workspace: listed frozen, the engine paused" "frozen paused" \
  "$(listed_state "$R1") $(engine_state "$N1")"
whole "stop killed half way through reading /workspace (undone)" "$R1" same

mark_count "$R1"
crash_at "stop" before POST "^/containers/$ID/kill" 1 "$S" sandbox pause --tier stop --run-id "$R1"
whole "stop killed before the engine's kill (undone)" "$R1" same

crash_at "stop" after POST "^/containers/$ID/kill" 1 "$S" sandbox pause --tier stop --run-id "$R1"
expect_eq "stop killed after the engine's kill: listed stopped" stopped "$(listed_state "$R1")"
expect_eq "stop killed after the engine's kill: the next call says resumed stopped" stopped \
  "$(call "$R1" -- true | json "d.get('resumed')")"
whole "stop killed after the engine's kill (finished)" "$R1" none

check "$R1 stopped" quiet "$S" sandbox pause --tier stop --run-id "$R1"
crash_at "resume of stopped" before POST "^/containers/$ID/start" 1 "$S" sandbox resume --run-id "$R1"
expect_eq "resume killed before the engine's start: listed stopped, the engine exited" "stopped exited" \
  "$(listed_state "$R1") $(engine_state "$N1")"
"$S" sandbox reap --json >"$WORK/reap.json" || true
expect_eq "resume killed before the engine's start: a reap keeps it (spared, not removed)" "0 1" \
  "$(json "' '.join(str(len([x for x in d[k] if '$N1' in json.dumps(x)])) for k in ('removed', 'spared'))" <"$WORK/reap.json")"
whole "resume of stopped killed before the engine's start" "$R1" none

check "$R1 stopped" quiet "$S" sandbox pause --tier stop --run-id "$R1"
# Its /workspace goes back through the agent's unpacker (docs/state.md,
# "Who fills /workspace"), over an agent session: killed before the first
# exec after the start (that session's: the agent stayed in its volume
# through the stop; else its install), /workspace not yet put back.
crash_at "resume of stopped" before POST "^/containers/$ID/exec$" 1 "$S" sandbox resume --run-id "$R1"
whole "resume of stopped killed before /workspace was put back" "$R1" none

# ---- hibernate and its resume (gVisor) --------------------------------------
if [ "$experimental" != true ]; then
  echo "# the engine has no checkpoints (experimental mode off): hibernate cannot be cut short here"
else
  R2=crash-gvisor-$$
  setup "$R2" --runtime runsc
  N2=$(name_of "$R2")
  mark_count "$R2"
  crash_at "hibernate" before POST "^/containers/$ID/checkpoints$" 1 "$S" sandbox pause --tier hibernate --run-id "$R2"
  whole "hibernate killed before the engine's checkpoint (undone)" "$R2" same

  mark_count "$R2"
  crash_at "hibernate" after POST "^/containers/create\\?name=$N2-next$" 1 "$S" sandbox pause --tier hibernate --run-id "$R2"
  whole "hibernate killed once its successor was made, before its id was written (undone)" "$R2" same

  mark_count "$R2"
  crash_at "hibernate" after POST "^/containers/$ID/checkpoints$" 1 "$S" sandbox pause --tier hibernate --run-id "$R2"
  expect_eq "hibernate killed once the checkpoint was written: the next call says resumed hibernated" hibernated \
    "$(call "$R2" -- true | json "d.get('resumed')")"
  whole "hibernate killed once the checkpoint was written (finished)" "$R2" same

  mark_count "$R2"
  crash_at "hibernate" before POST "^/containers/$ID/rename\\?" 2 "$S" sandbox pause --tier hibernate --run-id "$R2"
  expect_eq "hibernate killed between its two renames: listed once, hibernated" hibernated "$(listed_state "$R2")"
  expect_eq "hibernate killed between its two renames: resume says hibernated -> running" "hibernated running" \
    "$("$S" sandbox resume --run-id "$R2" --json | json "d['previous'] + ' ' + d['state']")"
  whole "hibernate killed between its two renames (finished)" "$R2" same

  check "$R2 hibernated" quiet "$S" sandbox pause --tier hibernate --run-id "$R2"
  crash_at "resume of hibernated" before POST "^/containers/$ID/start\\?.*checkpoint=" 1 "$S" sandbox resume --run-id "$R2"
  expect_eq "resume killed before the engine's restore: listed hibernated" hibernated "$(listed_state "$R2")"
  whole "resume of hibernated killed before the engine's restore" "$R2" same

  mark_count "$R2"
  check "$R2 hibernated" quiet "$S" sandbox pause --tier hibernate --run-id "$R2"
  crash_at "resume of hibernated" after POST "^/containers/$ID/start\\?.*checkpoint=" 1 "$S" sandbox resume --run-id "$R2"
  whole "resume of hibernated killed after the engine's restore" "$R2" same

  # ---- snapshot --memory ----------------------------------------------------
  # A memory snapshot cut short leaves its folder (.tmp-) and, past its
  # commit, its image: its maker gone (the folder held by no process),
  # `snapshot reap` removes both at once.
  half_made_reaped() {
    local what=$1 snaps=$SANDMAN_STATE_DIR/snapshots
    expect_eq "$what: its half-made folder is left" 1 "$(ls -A "$snaps" | grep -c '^\.tmp-' || true)"
    "$S" snapshot reap >/dev/null || true
    expect_eq "$what: snapshot reap removes its half-made folder and image at once" "0 0" \
      "$(ls -A "$snaps" | grep -c '^\.tmp-' || true) $(docker images -q \
        --filter "label=io.sandman.snapshot.instance=$SANDMAN_INSTANCE" | wc -l)"
  }
  mark_count "$R2"
  crash_at "snapshot --memory" before POST "^/commit\\?" 1 "$S" sandbox snapshot --memory --name crash-mem1 --run-id "$R2"
  expect_eq "snapshot --memory killed before its commit: no snapshot listed" "" \
    "$("$S" snapshot list --json | json "' '.join(x['name'] for x in d)")"
  half_made_reaped "snapshot --memory killed before its commit"
  whole "snapshot --memory killed before its commit" "$R2" same

  mark_count "$R2"
  crash_at "snapshot --memory" before POST "^/containers/$ID/start\\?.*checkpoint=" 1 "$S" sandbox snapshot --memory --name crash-mem2 --run-id "$R2"
  expect_eq "snapshot --memory killed before the sandbox's restore: no snapshot listed" "" \
    "$("$S" snapshot list --json | json "' '.join(x['name'] for x in d)")"
  expect_eq "snapshot --memory killed before the sandbox's restore: its image was committed" 1 \
    "$(docker images -q --filter "label=io.sandman.snapshot.instance=$SANDMAN_INSTANCE" | wc -l)"
  half_made_reaped "snapshot --memory killed before the sandbox's restore"
  whole "snapshot --memory killed before the sandbox's restore" "$R2" same
  out=$("$S" sandbox snapshot --memory --name crash-mem3 --run-id "$R2" --json) || true
  expect_eq "a memory snapshot after them works" "crash-mem3 True" "$(json "d['name'] + ' ' + str(d.get('memory'))" <<<"$out")"
fi

# ---- the runner's pause route, the runner killed and started again ----------
TOKEN_FILE=$WORK/token
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TOKEN_FILE"
chmod 600 "$TOKEN_FILE"
SOCK=$WORK/runner.sock
runner() {
  rm -f "$SOCK"
  exec "$S" worker start --sandbox-mode per_run --sandbox-image sandman/minimal:latest \
    --project-environment development --listen "unix:$SOCK" --token-file "$TOKEN_FILE" \
    >>"$WORK/runner.log" 2>&1
}
rcall() {
  curl -s --max-time 120 --unix-socket "$SOCK" -H "Authorization: Bearer $(cat "$TOKEN_FILE")" \
    -H 'Content-Type: application/json' -X "$1" "http://runner$2" ${3:+-d "$3"}
}
wait_sock() {
  local i
  for i in $(seq 1 200); do [ -S "$SOCK" ] && return 0; sleep 0.05; done
  return 1
}
new_loop "$R1"
mark_count "$R1"
ID1=$(docker inspect -f '{{.Id}}' "$N1")
# The route's pause, held at the engine's kill: the runner is SIGKILLed.
crash_runner() {
  wait_sock || return 1
  rcall POST "/v1/sandboxes/$ID1/pause?tier=stop" >"$WORK/route.out" || true
}
crash_runner &
helper=$!
crash_at "the runner's pause?tier=stop" before POST "^/containers/$ID/kill" 1 runner
wait "$helper" || true # its call ended with the runner
WORKER_PID=
rm -f "$SOCK" # the killed runner's
runner &
WORKER_PID=$!
check "the runner starts again" wait_sock
expect_eq "the runner started again: GET /v1/sandboxes lists it frozen (paused, its stop cut short)" frozen \
  "$(rcall GET /v1/sandboxes | json "([x.get('state') for x in d if x.get('run_id')=='$R1'] or ['none'])[0]")"
out=$(rcall POST /v1/execute "$(python3 -c 'import json,sys; print(json.dumps({"command": sys.argv[1], "sandbox_id": sys.argv[2]}))' "$TREE" "$ID1")")
stdout_of <<<"$out" >"$WORK/tree"
check "the runner's call answers, the 201 files the same by hash" diff -q "$WORK/expected" "$WORK/tree"
stop_worker
whole "the runner's stop killed before the engine's kill (undone)" "$R1" same

# The runner's own way into a frozen sandbox: a call thaws the container
# its cache holds, by id; the runner is killed once the engine has thawed
# it, before the record says so.
mark_count "$R1"
thaw_in_call() {
  wait_sock || return 1
  rcall POST "/v1/sandboxes/$ID1/pause" >"$WORK/route.out" || true
  rcall POST /v1/execute "{\"command\": \"true\", \"sandbox_id\": \"$ID1\"}" >/dev/null || true
}
rcall_warm() { # the runner's cache holds the sandbox: one call before the freeze
  wait_sock && rcall POST /v1/execute "{\"command\": \"true\", \"sandbox_id\": \"$ID1\"}" >/dev/null
}
rm -f "$SOCK"
( rcall_warm && thaw_in_call ) &
helper=$!
crash_at "a runner's call into a frozen sandbox" after POST "^/containers/$ID/unpause$" 1 runner
wait "$helper" || true
expect_eq "the runner froze it before (its route answered)" frozen "$(json "d.get('state')" <"$WORK/route.out")"
rm -f "$SOCK"
runner &
WORKER_PID=$!
check "the runner starts again" wait_sock
expect_eq "the runner started again: GET /v1/sandboxes lists it running (the engine thawed it)" running \
  "$(rcall GET /v1/sandboxes | json "([x.get('state') for x in d if x.get('run_id')=='$R1'] or ['none'])[0]")"
out=$(rcall POST /v1/execute "$(python3 -c 'import json,sys; print(json.dumps({"command": sys.argv[1], "sandbox_id": sys.argv[2]}))' "$TREE" "$ID1")")
stdout_of <<<"$out" >"$WORK/tree"
check "the runner's call answers, the 201 files the same by hash" diff -q "$WORK/expected" "$WORK/tree"
stop_worker
whole "the runner killed in a call's thaw" "$R1" same

# ---- a reap in a hibernate's rename window (gVisor) --------------------------
# A sandbox past its limit whose hibernate was cut short between its two
# renames: the reap removes it whole, its successor (holding the
# checkpoint) too; nothing of it is left.
if [ "$experimental" = true ]; then
  mark_count "$R2"
  crash_at "hibernate before a reap" before POST "^/containers/$ID/rename\\?" 2 "$S" sandbox pause --tier hibernate --run-id "$R2"
  NEXT2=$(json "d.get('next_id') or ''" <"$SANDMAN_STATE_DIR/rest/$N2.json")
  expect_eq "a reap in the rename window: listed hibernated, its successor recorded" "hibernated yes" \
    "$(listed_state "$R2") $([ -n "$NEXT2" ] && echo yes || echo no)"
  "$S" sandbox reap --older-than 0s --json >"$WORK/reap.json" || true
  expect_eq "a reap in the rename window: it is removed, reported once" "1" \
    "$(json "len([x for x in d['removed'] if '$N2' in json.dumps(x)])" <"$WORK/reap.json")"
  expect_eq "a reap in the rename window: no container of it left (old, successor, keeper)" "" \
    "$(docker ps -a --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "label=io.sandman.run=$R2" --format '{{.Names}}')"
  expect_eq "a reap in the rename window: its successor (and so its checkpoint) gone" gone \
    "$(docker inspect "$NEXT2" >/dev/null 2>&1 && echo there || echo gone)"
  expect_eq "a reap in the rename window: no volume of it left" "" \
    "$(docker volume ls -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | grep -F -- "$N2" || true)"
  expect_eq "a reap in the rename window: nothing of it in <state>/rest (record, tar)" "" \
    "$(cd "$SANDMAN_STATE_DIR/rest" 2>/dev/null && ls -A | grep -F -- "$N2" || true)"
fi

it_done
