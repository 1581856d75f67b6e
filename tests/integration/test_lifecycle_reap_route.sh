#!/usr/bin/env bash
# The idle lifecycle through the runner's route POST /v1/sandboxes/reap
# (docs/state.md#the-idle-lifecycle, docs/http-api.md), against the real
# engine: the runner's own tick is kept out of the way (--reap-interval 1h:
# it reaps once at start, before any sandbox), so only the route moves
# anything. With freeze_after 2s, stop_after 5s, remove_after 9s: a dry run
# lists the move it would make in "moved" and moves nothing; the route
# freezes, then stops, then removes a keyed sandbox left unused, each move
# in its answer ("moved" with state and reason; the removal in "removed"),
# an audit row of the runner in that order; a call into the frozen sandbox
# finds its file; a sandbox busy with a call is never moved, though unused
# for longer than remove_after; a worker token is refused (401) and moves
# nothing; the Python client's reap() gives "moved". Waits are bounded polls
# for a state, never fixed sleeps taken as results.
source "$(dirname "$0")/lib.sh"
require_engine
it_runner_workdir
trap 'stop_worker; kill_pids_and_cleanup; rm -rf "$WORK"' EXIT
rm -rf "${SANDMAN_STATE_DIR:?}"/*

AUDIT=$WORK/audit.jsonl
CFG=$WORK/sandman.yaml
cat >"$CFG" <<EOF
version: 1
defaults:
  image: sandman/minimal:latest
  lifecycle: {freeze_after: 2s, stop_after: 5s, remove_after: 9s}
audit: {enabled: true, file: $AUDIT}
EOF
IT_WORKER_GLOBAL=(--config "$CFG")
check "runner: starts with the lifecycle, its own tick an hour apart" it_start_worker --reap-interval 1h
TOKEN=$(cat "$WORK/token")
WTOKEN=$("$SANDMAN" token derive --token-file "$WORK/token" --worker-key w1)

api() { # METHOD PATH [BODY] [TOKEN]: the body, then the status on a line of its own
  curl -sS --unix-socket "$SOCK" -X "$1" -H "Authorization: Bearer ${4:-$TOKEN}" \
    -H 'Content-Type: application/json' ${3:+-d "$3"} -w '\n%{http_code}' "http://runner$2"
}
body() { sed '$d'; }
status() { tail -n 1; }
reap() { api POST /v1/sandboxes/reap "${1:-{\}}" | body; }
rcall() { # RUN COMMAND: a per_run call through the runner
  api POST /v1/execute "$(jq -cn --arg r "$1" --arg c "$2" '{command: $c, mode: "per_run", run_id: $r}')" | body
}
state_of() { # RUN: its sandbox's state as GET /v1/sandboxes says ("gone": none)
  api GET '/v1/sandboxes?all=1' | body |
    jq -r --arg r "$1" '([.[] | select(.run_id == $r) | .state] + ["gone"])[0]'
}
name_of() { docker ps -a --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" \
  --filter "label=io.sandman.run=$1" --format '{{.Names}}'; }
# reap_until WANT RUN: reaps until the sandbox of RUN is in state WANT; the
# last answer that listed $NAME in "moved" or "removed" is left in
# $WORK/hit. 0 then, 1 after 60 s.
reap_until() {
  local want=$1 run=$2 i out
  rm -f "$WORK/hit"
  for i in $(seq 1 240); do
    out=$(reap)
    if jq -e --arg n "$NAME" '[.moved[], .removed[]] | any(.name == $n)' <<<"$out" >/dev/null 2>&1; then
      printf '%s\n' "$out" >"$WORK/hit"
    fi
    [ "$(state_of "$run")" = "$want" ] && return 0
    sleep 0.25
  done
  return 1
}
# dry_until_listed: dry runs until one lists $NAME in "moved" (left in
# $WORK/hit); 0 then, 1 after 60 s.
dry_until_listed() {
  local i out
  for i in $(seq 1 240); do
    out=$(reap '{"dry_run": true}')
    if jq -e --arg n "$NAME" '.moved | any(.name == $n)' <<<"$out" >/dev/null 2>&1; then
      printf '%s\n' "$out" >"$WORK/hit"
      return 0
    fi
    sleep 0.25
  done
  return 1
}
hit() { cat "$WORK/hit" 2>/dev/null || echo '{"moved": [], "removed": []}'; }
moved_of() { # NAME < report: "state|reason|kind" of its move
  jq -r --arg n "$1" '.moved[] | select(.name == $n) | "\(.state)|\(.reason)|\(.kind)"'
}
# The runner's lifecycle audit rows of sandbox NAME, in order.
moves_of() {
  [ -f "$AUDIT" ] || return 0
  jq -r --arg n "$1" 'select(.unmapped.sandbox == $n and ((.message // "") | contains("lifecycle")))
    | .unmapped.event | sub("sandbox\\."; "")' "$AUDIT" | tr '\n' ' ' | sed 's/ $//'
}

expect_eq "q1: the first call writes a file" kept \
  "$(rcall q1 'echo kept >/workspace/note && cat /workspace/note' | jq -r .stdout | tr -d '\n')"
NAME=$(name_of q1)
check "q1: its sandbox is there" test -n "$NAME"

# A worker token: the route is the control token's (401), and nothing moves.
out=$(api POST /v1/sandboxes/reap '{}' "$WTOKEN")
expect_eq "worker token: refused" 401 "$(status <<<"$out")"

# A dry run: the move it would make, listed; nothing moved.
check "dry run: lists the freeze once unused for freeze_after" dry_until_listed
expect_eq "dry run: the answer says so" true "$(hit | jq -r .dry_run)"
expect_contains "dry run: moved names the sandbox, the state and the lifecycle's reason" \
  "frozen|lifecycle: unused for" "$(hit | moved_of "$NAME")"
expect_eq "dry run: the sandbox is still running" running "$(state_of q1)"
expect_eq "dry run: no audit row" "" "$(moves_of "$NAME")"

# The route applies the lifecycle: frozen, its move in the answer.
check "route: frozen once unused for freeze_after" reap_until frozen q1
expect_contains "route: moved says frozen, the reason and the kind" \
  "frozen|lifecycle: unused for" "$(hit | moved_of "$NAME")"
expect_contains "route: ... with the freeze_after it passed" "(freeze_after 2s)|sandbox" "$(hit | moved_of "$NAME")"
expect_eq "route: the moved item's id is the sandbox's" "$(docker inspect -f '{{.Id}}' "$NAME")" \
  "$(hit | jq -r --arg n "$NAME" '.moved[] | select(.name == $n) | .id')"
expect_eq "route: the engine has it paused" paused "$(docker inspect -f '{{.State.Status}}' "$NAME")"
out=$(rcall q1 'cat /workspace/note')
expect_eq "route: a call into the frozen sandbox finds its file" kept "$(jq -r .stdout <<<"$out" | tr -d '\n')"
expect_eq "route: ... and says it was frozen" frozen "$(jq -r .resumed <<<"$out")"

check "route: stopped once unused for stop_after" reap_until stopped q1
expect_contains "route: moved says stopped, with the stop_after it passed" \
  "stopped|lifecycle: unused for" "$(hit | moved_of "$NAME")"
expect_contains "route: ... (stop_after 5s)" "(stop_after 5s)" "$(hit | moved_of "$NAME")"
expect_eq "route: the engine has it exited" exited "$(docker inspect -f '{{.State.Status}}' "$NAME")"

check "route: removed once unused for remove_after" reap_until gone q1
expect_contains "route: removed lists it, with the remove_after it passed" "remove_after 9s" \
  "$(hit | jq -r --arg n "$NAME" '.removed[] | select(.name == $n) | .reason')"
check "route: the container is gone from the engine" test -z "$(name_of q1)"
expect_eq "route: the runner's audit rows of the moves, in order" "frozen frozen stopped reaped" \
  "$(moves_of "$NAME")"
expect_contains "route: a log line of the runner for the freeze" "lifecycle: sandbox $NAME running -> frozen" \
  "$(grep -F "lifecycle: sandbox $NAME" "$WORK/runner.log" | head -3)"

# A sandbox busy with a call is never moved by the route, though unused for
# longer than remove_after: the call's busy lock is what the lifecycle sees.
expect_eq "busy: the first call" 0 "$(rcall q2 true | jq -r .exit_code)"
NAME=$(name_of q2)
t0=$(date +%s)
rcall q2 'sleep 14' >"$WORK/sleep.json" 2>&1 &
SLEEPER=$!
IT_PIDS+=("$SLEEPER")
busy=no
for i in $(seq 1 120); do
  [ "$(api GET '/v1/sandboxes?all=1' | body | jq -c '[.[] | select(.run_id == "q2") | .busy]')" = "[true]" ] &&
    busy=yes && break
  sleep 0.25
done
expect_eq "busy: the sleep call holds the sandbox" yes "$busy"
moved=none
listed=none
while kill -0 "$SLEEPER" 2>/dev/null && [ $(($(date +%s) - t0)) -lt 11 ]; do
  out=$(reap)
  jq -e --arg n "$NAME" '[.moved[], .removed[]] | any(.name == $n)' <<<"$out" >/dev/null && listed=$out
  st=$(state_of q2)
  [ "$st" != running ] && moved=$st
done
expect_eq "busy: not moved while its call ran (unused for more than remove_after since its first call)" none "$moved"
expect_eq "busy: never in an answer's moved or removed" none "$listed"
check "busy: 11 s and more passed while the call ran" test $(($(date +%s) - t0)) -ge 11
wait "$SLEEPER" || true
expect_eq "busy: the sleep call ended well" 0 "$(jq -r .exit_code <"$WORK/sleep.json")"
expect_eq "busy: no lifecycle row while busy" "" "$(moves_of "$NAME")"

# The Python client's reap() gives the moves (here, the idle q2 frozen).
got=$(PYTHONPATH="$SRC_DIR/clients/python" python3 - "$SOCK" "$TOKEN" "$NAME" <<'PY'
import sys, time
from sandman_client import Client
c = Client("unix:" + sys.argv[1], sys.argv[2])
for _ in range(240):
    rep = c.reap()
    hit = [m for m in rep["moved"] if m["name"] == sys.argv[3]]
    if hit:
        print(hit[0]["state"])
        break
    time.sleep(0.25)
PY
)
expect_eq "Python client: reap() answers the move in moved" frozen "$got"

stop_worker
it_done
