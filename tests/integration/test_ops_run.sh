#!/usr/bin/env bash
# list / reap with sandboxes made by real `sandman run` calls: fields for
# each mode, a call in flight survives `reap --older-than 0s`, SIGKILL of
# `sandman run` (per_run and in the middle of a per_tool call) leaves
# nothing managed once a reap has run.
source "$(dirname "$0")/lib.sh"
require_engine

trap kill_pids_and_cleanup EXIT
cleanup_instance

exists() { docker container inspect "$1" >/dev/null 2>&1; }
count_managed() {
  local c v
  c=$(docker ps -aq --filter label=io.sandman.managed=true --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
  v=$(docker volume ls -q --filter label=io.sandman.managed=true --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
  echo "$((c + v))"
}
# wait_busy MODE: until a sandbox of that mode is listed busy (bounded wait,
# not a timing assertion). Prints its name.
wait_busy() {
  local i name
  for i in $(seq 1 600); do
    name=$("$SANDMAN" sandbox list --json | json "' '.join(x['name'] for x in d if x['mode']=='$1' and x['busy'])")
    if [ -n "$name" ]; then
      echo "$name"
      return 0
    fi
    sleep 0.1
  done
  return 1
}

if ! "$SANDMAN" run --help >/dev/null 2>&1; then
  echo "SKIP: this build has no working \`sandman run\`"
  exit 77
fi

# --- list shows each mode with its fields ---------------------------------------
"$SANDMAN" run --mode per_run --run-id ops-r1 --agent coder --project p1 -- true >/dev/null
"$SANDMAN" run --mode per_worker --worker-id ops-w1 --agent coder --project p1 -- true >/dev/null
out=$("$SANDMAN" sandbox list --json)
expect_eq "list: per_run from a real run" "per_run ops-r1 None p1 coder running False" \
  "$(json "' '.join(str(x[k]) for x in d if x['mode']=='per_run' for k in ('mode','run_id','worker_id','project','agent','status','busy'))" <<<"$out")"
expect_eq "list: per_worker from a real run" "per_worker None ops-w1 p1 coder" \
  "$(json "' '.join(str(x[k]) for x in d if x['mode']=='per_worker' for k in ('mode','run_id','worker_id','project','agent'))" <<<"$out")"
expect_eq "list: last use recorded after the call" "True" \
  "$(json "all(x['last_used_at']>=x['created_at'] for x in d)" <<<"$out")"

"$SANDMAN" run --mode per_tool --agent coder --project p1 -- sleep 600 >/dev/null 2>&1 &
tool_pid=$!
IT_PIDS+=("$tool_pid")
tool=$(wait_busy per_tool) || true
check "list: a per_tool sandbox in flight is listed busy" test -n "$tool"

# --- a call in flight survives reap 0s; SIGKILL ends it ----------------------
"$SANDMAN" run --mode per_run --run-id ops-busy -- sleep 600 >/dev/null 2>&1 &
run_pid=$!
IT_PIDS+=("$run_pid")
busy=$(wait_busy per_run) || true
check "a per_run call is in flight" test -n "$busy"
out=$("$SANDMAN" sandbox reap --older-than 0s --json)
check "reap 0s: the busy per_run sandbox survives" exists "$busy"
check "reap 0s: the per_tool call in flight survives" exists "$tool"
expect_contains "reap 0s: says busy" "busy" "$(json "[x['reason'] for x in d['spared'] if x['name']=='$busy'][0]" <<<"$out")"
expect_eq "reap 0s: the idle ones went" "2" "$(json "len([x for x in d['removed'] if x['kind']=='sandbox'])" <<<"$out")"

kill -9 "$run_pid"
wait "$run_pid" 2>/dev/null || true
"$SANDMAN" sandbox reap --older-than 0s >/dev/null
check "after SIGKILL of sandman run, the next reap removes its sandbox" \
  bash -c "! docker container inspect $busy >/dev/null 2>&1"

# --- SIGKILL in the middle of a per_tool call ---------------------------------
kill -9 "$tool_pid"
wait "$tool_pid" 2>/dev/null || true
check "the killed per_tool call left its container behind" exists "$tool"
out=$("$SANDMAN" sandbox reap --json)
expect_contains "reap: the dead owner's per_tool sandbox goes" "is gone" \
  "$(json "[x['reason'] for x in d['removed'] if x['name']=='$tool'][0]" <<<"$out")"
expect_eq "after SIGKILL mid per_tool call and a reap, nothing managed remains" 0 "$(count_managed)"

it_done
