#!/usr/bin/env bash
# The warm pool's size from the configuration file: a per_tool runner started
# with `defaults: {pool_size: 1}` and no flag keeps exactly one container
# ready; --sandbox-pool-size overrides the file; /metrics shows the pool.
source "$(dirname "$0")/lib.sh"
require_engine
it_runner_workdir
cat >"$WORK/sandman.yaml" <<'YAML'
version: 1
defaults:
  pool_size: 1
YAML

pool_ids() {
  docker ps -q --no-trunc --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" \
    --filter label=io.sandman.pool=true | sort
}
all_ids() { docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE"; }
count() { "$@" | grep -c . || true; }

metrics() {
  curl -sS --unix-socket "$SOCK" -H "Authorization: Bearer $(cat "$WORK/token")" \
    http://localhost/metrics
}
metric() { metrics | awk -v n="$1" '$1 == n { print $2 }'; }

# settled N: the runner reports a pool of size N, full (N ready), creating
# nothing and opening no agent session, so no further container (nor the
# session of the one made) is on its way (60 s bound).
settled() {
  local want=$1 i m
  for i in $(seq 1 300); do
    m=$(metrics)
    if printf '%s\n' "$m" | grep -qx "sandman_pool_size $want" &&
      printf '%s\n' "$m" | grep -qx "sandman_pool_ready $want" &&
      printf '%s\n' "$m" | grep -qx "sandman_pool_creating 0" &&
      printf '%s\n' "$m" | grep -qx "sandman_agent_sessions_preparing 0"; then
      return 0
    fi
    sleep 0.2
  done
  return 1
}

IT_WORKER_GLOBAL=(--config "$WORK/sandman.yaml")

# --- the file alone: pool_size 1 ---
check "runner starts with defaults.pool_size 1" it_start_worker
check "the pool settles full at size 1" settled 1
expect_eq "exactly one pool container is ready" 1 "$(count pool_ids)"
expect_eq "sandman_pool_size" 1 "$(metric sandman_pool_size)"
expect_eq "sandman_pool_ready" 1 "$(metric sandman_pool_ready)"
expect_eq "sandman_pool_configurations" 1 "$(metric sandman_pool_configurations)"
created=$(metric sandman_pool_created_total)
check "sandman_pool_created_total counts it" test "${created:-0}" -ge 1
m=$(metrics)
expect_contains "sandman_pool_ready is a gauge" "# TYPE sandman_pool_ready gauge" "$m"
expect_contains "sandman_pool_taken_total is a counter" \
  "# TYPE sandman_pool_taken_total counter" "$m"
expect_contains "existing metrics are still there" "sandman_engine_up 1" "$m"
# The pool's container has its agent session open: the call goes over it.
answer=$(curl -sS --unix-socket "$SOCK" -H "Authorization: Bearer $(cat "$WORK/token")" \
  -H 'Content-Type: application/json' -d '{"tool":"t","argv":["sh","-c","echo via-pool; id -u"]}' \
  http://localhost/v1/execute)
expect_contains "the pooled call answers" '"stdout": "via-pool\n1000\n"' \
  "$(printf '%s' "$answer" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), indent=0))')"
expect_eq "sandman_agent_calls_total counts it" 1 "$(metric sandman_agent_calls_total)"
opened=$(metric sandman_agent_sessions_opened_total)
check "sandman_agent_sessions_opened_total counts the pool's session" test "${opened:-0}" -ge 1
stop_worker
expect_eq "SIGTERM leaves no container" 0 "$(count all_ids)"

# --- the flag overrides the file ---
check "runner starts with --sandbox-pool-size 2 over the file's 1" it_start_worker \
  --sandbox-pool-size 2
check "the pool settles full at size 2" settled 2
expect_eq "two pool containers are ready" 2 "$(count pool_ids)"
stop_worker
expect_eq "nothing left" 0 "$(count all_ids)"

# --- the flag's 0 turns the file's pool off ---
check "runner starts with --sandbox-pool-size 0 over the file's 1" it_start_worker \
  --sandbox-pool-size 0
expect_eq "sandman_pool_size 0" 0 "$(metric sandman_pool_size)"
expect_eq "nothing pre-created" 0 "$(count pool_ids)"
stop_worker

# --- an agent may not size the pool: the runner refuses to start ---
printf 'agents:\n  bot:\n    pool_size: 1\n' >"$WORK/agent.yaml"
rc=0
"$SANDMAN" --config "$WORK/agent.yaml" worker start --listen "unix:$SOCK" \
  --token-file "$WORK/token" >/dev/null 2>"$WORK/err" || rc=$?
check "agents.bot.pool_size is refused" test "$rc" -ne 0
expect_contains "and the message points to defaults" "defaults.pool_size" "$(cat "$WORK/err")"
expect_eq "nothing created" 0 "$(count all_ids)"

if [ "$IT_FAILED" -gt 0 ]; then tail -40 "$WORK/runner.log" >&2; fi
it_done
