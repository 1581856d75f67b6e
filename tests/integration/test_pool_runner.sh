#!/usr/bin/env bash
# The warm pool inside the runner service (`sandman worker start`): a per_tool
# runner fills its pool at start, a call takes a ready container (never one
# used before), the pool refills, the containers count in `sandbox list`, and
# SIGTERM leaves nothing behind. --sandbox-pool-size 0 pre-creates nothing.
source "$(dirname "$0")/lib.sh"
require_engine
it_runner_workdir

pool_ids() {
  docker ps -q --no-trunc --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" \
    --filter label=io.sandman.pool=true | sort
}
all_ids() { docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE"; }
volumes() { docker volume ls -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE"; }
count() { "$@" | grep -c . || true; }

# wait_for N FUNC: until FUNC lists N lines (60 s).
wait_for() {
  local want=$1 fn=$2 i
  for i in $(seq 1 300); do
    [ "$(count "$fn")" -eq "$want" ] && return 0
    sleep 0.2
  done
  return 1
}


execute() {
  curl -sS --unix-socket "$SOCK" -H "Authorization: Bearer $(cat "$WORK/token")" \
    -H 'Content-Type: application/json' -d "$1" http://localhost/v1/execute
}

json_field() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# --- a per_tool runner with a pool of 2 ---
check "runner starts" it_start_worker --sandbox-pool-size 2
check "two containers ready after start" wait_for 2 pool_ids
before=$(pool_ids)
n=$("$SANDMAN" sandbox list --all --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
expect_eq "pool containers count in sandbox list" 2 "$n"

ans=$(execute '{"argv": ["sh", "-c", "echo pooled; id -u"]}')
expect_eq "the call succeeds" "True" "$(printf '%s' "$ans" | json_field ok)"
expect_eq "its output" "pooled
1000" "$(printf '%s' "$ans" | json_field stdout | sed '/^$/d')"
used=$(printf '%s' "$ans" | json_field sandbox_id)
expect_contains "it ran in a container that was ready" "$used" "$before"

check "the pool refills to two" wait_for 2 pool_ids
gone() { docker ps -aq --no-trunc --filter "id=$used"; }
check "the used container is removed" wait_for 0 gone
expect_not_contains "the used container is not in the pool" "$used" "$(pool_ids)"

ans=$(execute '{"argv": ["true"]}')
second=$(printf '%s' "$ans" | json_field sandbox_id)
check "a second call gets another container" test "$second" != "$used"

stop_worker
expect_eq "SIGTERM leaves no container" 0 "$(count all_ids)"
expect_eq "SIGTERM leaves no volume" 0 "$(count volumes)"

# --- no pool ---
rm -f "$SOCK"
check "runner starts with --sandbox-pool-size 0" it_start_worker --sandbox-pool-size 0
sleep 2
expect_eq "nothing pre-created" 0 "$(count all_ids)"
ans=$(execute '{"argv": ["true"]}')
expect_eq "a call still works" "True" "$(printf '%s' "$ans" | json_field ok)"
stop_worker
expect_eq "nothing left" 0 "$(count all_ids)"
expect_eq "no volume left" 0 "$(count volumes)"

# --- a bad size is a usage error that starts nothing ---
rc=0
"$SANDMAN" worker start --sandbox-pool-size 65 --listen "unix:$SOCK" --token-file "$WORK/token" \
  >/dev/null 2>"$WORK/err" || rc=$?
expect_eq "--sandbox-pool-size 65 exits 2" 2 "$rc"
expect_contains "and says why" "sandbox-pool-size" "$(cat "$WORK/err")"

if [ "$IT_FAILED" -gt 0 ]; then tail -40 "$WORK/runner.log" >&2; fi
it_done
