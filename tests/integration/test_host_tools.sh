#!/usr/bin/env bash
# Host tools end to end (issue 16): a sandbox with network none reaches the
# host only through the host-tool route and the broker. One per_run sandbox
# carries most checks: the agent's host tools are listed (not the others),
# one reads a file only the host has, a denied one is refused and audited,
# shell metacharacters and spaces stay one argument each, a rate limit, a
# timeout, and a process the call left behind is refused after the call.
# An argument value that starts with '-' never becomes an option of the
# host program (issue 25). Then the runner: an approval approved, one left
# to expire, a worker token and a made-up one refused on /v1/approvals
# with the generic 401. Then a loop left behind by another agent, and one
# left by a tool of the agent that from_tools excludes, ask the route while
# the agent's host-tool call runs: neither gets its identity (nothing in
# the audit trail, no approval asked in its name). Then the same list and
# call under gVisor.
source "$(dirname "$0")/lib.sh"

require_engine
it_runner_workdir
AUDIT=$WORK/audit.jsonl
HOSTFILE=$WORK/only-on-host.txt
echo "the host's own words $$" >"$HOSTFILE"
git init -q "$WORK/repo"
git -C "$WORK/repo" -c user.name=t -c user.email=t@example.invalid commit -q --allow-empty -m "first commit $$"
CFG=$WORK/sandman.yaml
cat >"$CFG" <<EOF
audit: {enabled: true, file: "$AUDIT"}
defaults:
  network: none
  image: sandman/minimal:latest
broker:
  tools:
    read_host:
      description: reads a file of the host
      input_schema: {type: object, properties: {path: {type: string}}, required: [path]}
      argv: [cat, "{path}"]
    echo_args:
      input_schema: {type: object, properties: {a: {type: string}, b: {type: string}}}
      argv: [printf, "[%s]\\\\n", "{a}", "{b}"]
    slow: {argv: [sleep, "30"], timeout: 1s}
    rated: {argv: ["true"], rate: 2}
    forbidden: {argv: ["true"]}
    gated: {argv: [echo, approved], approval: required, approval_timeout: 2m}
    gated_short: {argv: [echo, approved], approval: required, approval_timeout: 2s}
    show_ref:
      input_schema: {type: object, properties: {ref: {type: string}}, required: [ref]}
      argv: [git, -C, "$WORK/repo", log, --oneline, "{ref}"]
    count_lines:
      input_schema: {type: object, properties: {n: {type: integer}}, required: [n]}
      allow_dash: [n]
      argv: [printf, "%s\\n", "{n}"]
agents:
  coder:
    broker:
      allow: ["*"]
      deny: [forbidden]
      from_tools: [shell]
  other:
    broker:
      allow: [forbidden]
EOF
RUN=broker-$$
sm() { "$SANDMAN" --config "$CFG" run --agent coder --tool shell --mode per_run --run-id "$RUN" "$@"; }
# tool_call ARGS...: rc, out and err of one sandman-tools call in the run's sandbox
tool_call() {
  set +e
  out=$(sm -- sandman-tools "$@" 2>"$WORK/err")
  rc=$?
  set -e
  err=$(cat "$WORK/err")
}

check "config check accepts the broker section" "$SANDMAN" config check "$CFG"
explain=$("$SANDMAN" --config "$CFG" config explain --agent coder --tool shell --mode per_run --json)
expect_eq "explain: coder's shell gets the route" "True" "$(echo "$explain" | json 'd["host_tools"]["route"]')"
expect_eq "explain: the rule refusing forbidden" "agents.coder.broker.deny: forbidden matches forbidden" \
  "$(echo "$explain" | json '[t["rule"] for t in d["host_tools"]["tools"] if t["name"] == "forbidden"][0]')"

# --- the agent's list, and only its own
tool_call list
expect_eq "list: exit 0 ($err)" 0 "$rc"
expect_contains "list: read_host is listed" "read_host" "$out"
expect_contains "list: echo_args is listed" "echo_args" "$out"
expect_not_contains "list: the denied host tool is not listed" "forbidden" "$out"
set +e
other=$("$SANDMAN" --config "$CFG" run --agent other --tool shell --mode per_tool -- sandman-tools list 2>&1)
set -e
expect_contains "list: agent other sees its own host tool" "forbidden" "$other"
expect_not_contains "list: agent other does not see coder's" "read_host" "$other"

# --- a file only the host can see
set +e
direct=$(sm -- cat "$HOSTFILE" 2>&1)
set -e
expect_not_contains "the sandbox cannot read the host file itself" "the host's own words" "$direct"
tool_call call read_host "path=$HOSTFILE"
expect_eq "read_host: exit 0 ($err)" 0 "$rc"
expect_eq "read_host: the host file's content" "the host's own words $$" "$out"

# --- a host tool the agent may not call: refused like an unknown one, audited
tool_call call forbidden
expect_eq "forbidden: refused (exit 3)" 3 "$rc"
expect_contains "forbidden: 404, no host tool" "no host tool 'forbidden'" "$err"
expect_not_contains "forbidden: the rule is not shown to the sandbox" "broker.deny" "$err"
row=$(python3 - "$AUDIT" "$RUN" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try: e = json.loads(line)
    except ValueError: continue
    u = e.get("unmapped", {})
    if u.get("event") == "host_tool.refused" and u.get("host_tool") == "forbidden" and u.get("run_id") == sys.argv[2]:
        print(u.get("agent"), u.get("reason"), u.get("rule"), e.get("disposition"))
PY
)
expect_eq "audit: host_tool.refused with agent, reason, rule, Blocked" \
  "coder not_found agents.coder.broker.deny: forbidden matches forbidden Blocked" "$row"

# --- shell metacharacters and spaces: one argument each, on the host
hostile='x; touch /tmp/pwned-$$ && $(id) `id` | cat *'
tool_call call echo_args "a=$hostile" "b=two words"
expect_eq "echo_args: exit 0 ($err)" 0 "$rc"
expect_eq "echo_args: each value is exactly one argument" "[$hostile]
[two words]" "$out"
check "echo_args: nothing ran through a shell on the host" test ! -e "/tmp/pwned-$$"

# --- a value starting with '-' is no option of the host program (issue 25)
tool_call call show_ref "ref=--output=$WORK/injected"
expect_eq "show_ref: a value starting with '-' is refused (exit 2)" 2 "$rc"
expect_contains "show_ref: it would be an option, says the refusal" "may not start with '-'" "$err"
check "show_ref: git wrote no file of the sandbox's choosing on the host" test ! -e "$WORK/injected"
tool_call call show_ref ref=HEAD
expect_contains "show_ref: a plain value runs" "first commit $$" "$out"
tool_call call count_lines n=-3
expect_eq "count_lines: allow_dash lets its argument start with '-'" "-3" "$out"

# --- a rate limit (2 a minute in this sandbox)
set +e
rates=$(sm -- sh -c 'for i in 1 2 3; do sandman-tools call rated 2>&1; echo "rc=$?"; done' 2>&1)
set -e
expect_contains "rated: the first two pass" "rc=0
rc=0
sandman-tools:" "$rates"
expect_contains "rated: the third is refused (exit 3)" "rc=3" "$rates"
expect_contains "rated: 429 with reason rate" "(rate) [rule: rate] (HTTP 429)" "$rates"

# --- a timeout: the host tool is killed
tool_call call slow
expect_eq "slow: exit 1 (the tool failed: timed out)" 1 "$rc"
expect_contains "slow: ran past its timeout" "ran past its timeout of 1s and was killed (timeout)" "$err"

# --- a process left behind by a one-shot call: its route went with the call
sm -- sh -c '(sleep 2; sandman-tools list >/tmp/late.out 2>&1; echo "rc=$?" >>/tmp/late.out) >/dev/null 2>&1 &' || true
# late_answer RUN: what the background process of run RUN wrote (bounded wait)
late_answer() {
  local box late=""
  box=$(docker ps -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "label=io.sandman.run=$1" | head -1)
  for _ in $(seq 1 600); do # waiting for the background process's answer, bounded (loaded CI)
    late=$(docker exec "$box" cat /tmp/late.out 2>/dev/null || true)
    case "$late" in *rc=*) break ;; esac
    sleep 0.1
  done
  echo "$late"
}
late=$(late_answer "$RUN")
expect_contains "background (run): refused after its call ended (exit 4)" "rc=4" "$late"
expect_not_contains "background (run): it got no list" "read_host" "$late"

# --- the runner: approvals
IT_WORKER_GLOBAL=(--config "$CFG")
check "runner started" it_start_worker
TOKEN=$(cat "$WORK/token")
api() { curl -s --unix-socket "$SOCK" -H "Authorization: Bearer $TOKEN" "$@"; }
execute_gated() { # TOOL
  api -X POST http://sandman/v1/execute -d \
    "{\"agent\": \"coder\", \"tool\": \"shell\", \"run_id\": \"$RUN-r\", \"mode\": \"per_run\", \"argv\": [\"sandman-tools\", \"call\", \"$1\"]}"
}
# a process left behind by a runner call: the runner's route still answers, and refuses it
api -X POST http://sandman/v1/execute -d "{\"agent\": \"coder\", \"tool\": \"shell\", \"run_id\": \"$RUN-bg\", \"mode\": \"per_run\", \"argv\": [\"sh\", \"-c\", \"(sleep 2; sandman-tools list >/tmp/late.out 2>&1; echo rc=\$? >>/tmp/late.out) >/dev/null 2>&1 &\"]}" >/dev/null
late=$(late_answer "$RUN-bg")
expect_contains "background (runner): refused after its call ended (exit 4)" "rc=4" "$late"
expect_contains "background (runner): no active call" "no active call" "$late"
expect_not_contains "background (runner): it got no list" "read_host" "$late"
execute_gated gated >"$WORK/approved.json" &
call_pid=$!
id=""
for _ in $(seq 1 1200); do # waiting for the call to ask, bounded (loaded CI)
  id=$(api http://sandman/v1/approvals | json 'd["approvals"][0]["id"] if d["approvals"] else ""')
  [ -n "$id" ] && break
  sleep 0.05
done
check "approvals: the waiting call is listed" test -n "$id"
wtoken=$("$SANDMAN" token derive --worker-key w1 --token-file "$WORK/token" 2>/dev/null || true)
wstatus=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" -H "Authorization: Bearer $wtoken" http://sandman/v1/approvals)
expect_eq "approvals: a worker token is refused" 401 "$wstatus"
made_up=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
mbody=$(curl -s --unix-socket "$SOCK" -H "Authorization: Bearer $made_up" http://sandman/v1/approvals)
wbody=$(curl -s --unix-socket "$SOCK" -H "Authorization: Bearer $wtoken" http://sandman/v1/approvals)
xbody=$(curl -s --unix-socket "$SOCK" -H "Authorization: Bearer x" http://sandman/v1/approvals)
expect_eq "approvals: a made-up 64-character token gets the generic 401 of a bad token" "$xbody" "$mbody"
expect_eq "approvals: so does a worker token (the same answer)" "$xbody" "$wbody"
answer=$(api -X POST "http://sandman/v1/approvals/$id" -d '{"approve": true}')
expect_contains "approvals: approved" '"approved":true' "$answer"
wait "$call_pid" || true
expect_eq "approvals: the approved call ran on the host" "approved" \
  "$(json 'd["stdout"].strip()' <"$WORK/approved.json")"
execute_gated gated_short >"$WORK/expired.json"
expect_eq "approvals: nobody answers: refused at approval_timeout (exit 1)" 1 \
  "$(json 'd["exit_code"]' <"$WORK/expired.json")"
expect_contains "approvals: the refusal says so" "no operator approved host tool 'gated_short' within 2s" \
  "$(json 'd["stderr"]' <"$WORK/expired.json")"
gone=$(api -o /dev/null -w '%{http_code}' -X POST "http://sandman/v1/approvals/$id" -d '{"approve": true}')
expect_eq "approvals: an answered id is gone (404)" 404 "$gone"
# --- issue 25: a loop left behind asks the route while coder's call runs
# execute AGENT TOOL RUN SCRIPT: the runner's answer
execute() {
  api -X POST http://sandman/v1/execute -d "$(python3 -c 'import json,sys
print(json.dumps({"agent": sys.argv[1], "tool": sys.argv[2], "run_id": sys.argv[3], "mode": "per_run",
                  "argv": ["sh", "-c", sys.argv[4]]}))' "$@")"
}
# boxes RUN: the containers of run RUN
boxes() { docker ps -q --no-trunc --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "label=io.sandman.run=$1"; }
# in_box_wait RUN FILE: waits (bounded) until FILE exists in a container of RUN; prints its id
in_box_wait() {
  local b
  for _ in $(seq 1 1200); do # bounded (loaded CI); ends as soon as it is there
    for b in $(boxes "$1"); do
      if docker exec "$b" test -e "$2" 2>/dev/null; then echo "$b"; return 0; fi
    done
    sleep 0.1
  done
  return 1
}
LOOP='while [ ! -e /tmp/go ]; do sleep 0.1; done
(/.sandman/bin/sandman-tools call gated >/tmp/gated.out 2>&1; touch /tmp/gated-done) &
for i in 1 2 3; do /.sandman/bin/sandman-tools call read_host "path='"$HOSTFILE"'" >>/tmp/loop.out 2>&1; echo "rc=$?" >>/tmp/loop.out; done
touch /tmp/loop-done'
CODER='touch /tmp/coder-in; i=0; while [ ! -e /tmp/release ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done'
# leftover NAME AGENT TOOL RUN: a loop left by AGENT's TOOL asks the route
# (three read_host, one gated) while coder's shell call of run RUN runs.
# Sets LBOX (the loop's sandbox) and CBOX (coder's call's).
leftover() {
  local name=$1 run=$4 pending="" loop coder_pid
  LBOX=$(execute "$2" "$3" "$run" "($LOOP) </dev/null >/dev/null 2>&1 &" | json 'd["sandbox_id"]')
  execute coder shell "$run" "$CODER" >"$WORK/coder-$name.json" &
  coder_pid=$!
  CBOX=$(in_box_wait "$run" /tmp/coder-in || true)
  check "$name: coder's host-tool call is running" test -n "$CBOX"
  docker exec "$LBOX" touch /tmp/go
  for _ in $(seq 1 1200); do # bounded: until the loop is through
    docker exec "$LBOX" test -e /tmp/loop-done 2>/dev/null && break
    sleep 0.1
  done
  for _ in $(seq 1 1200); do # bounded: until its gated call is answered, or asks an operator
    pending=$(api http://sandman/v1/approvals | json '" ".join(a["agent"] + ":" + a["tool"] for a in d["approvals"])')
    [ -n "$pending" ] && break
    docker exec "$LBOX" test -e /tmp/gated-done 2>/dev/null && break
    sleep 0.1
  done
  loop=$(docker exec "$LBOX" cat /tmp/loop.out 2>/dev/null || true)
  for b in $(boxes "$run"); do docker exec "$b" touch /tmp/release; done
  wait "$coder_pid" || true
  expect_eq "$name: the loop asked the route three times while coder's call ran" 3 "$(grep -c '^rc=' <<<"$loop")"
  expect_not_contains "$name: the loop never read the host file with coder's identity" "the host's own words" "$loop"
  expect_not_contains "$name: no request of the loop was answered" "rc=0" "$loop"
  expect_eq "$name: no approval is asked of the operator in coder's name" "" "$pending"
  expect_eq "$name: the audit trail has no host-tool call or approval of coder's run" "0" "$(python3 - "$AUDIT" "$run" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    try: u = json.loads(line).get("unmapped", {})
    except ValueError: continue
    if u.get("run_id") == sys.argv[2] and u.get("event") in ("host_tool.call", "host_tool.allowed", "host_tool.approval"):
        n += 1
print(n)
PY
)"
}
leftover "another agent" reviewer shell "$RUN-rev"
check "another agent: coder's call runs in a sandbox of its own, not reviewer's" test "$LBOX" != "$CBOX"
leftover "excluded tool" coder notes "$RUN-ex"
check "excluded tool: the agent's tools share its sandbox" test "$LBOX" = "$CBOX"
refused=$(python3 - "$AUDIT" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]):
    try: u = json.loads(line).get("unmapped", {})
    except ValueError: continue
    if u.get("event") == "host_tool.refused" and u.get("reason") == "no_active_call" and u.get("peer_pid"):
        n += 1
print(n)
PY
)
check "excluded tool: the loop's requests are refused as no active call, with the asking process's pid" test "$refused" -ge 3

stop_worker
outcomes=$(python3 - "$AUDIT" <<'PY'
import json, sys
seen = []
for line in open(sys.argv[1]):
    try: u = json.loads(line).get("unmapped", {})
    except ValueError: continue
    if u.get("event") == "host_tool.approval":
        seen.append("%s/%s" % (u.get("outcome"), u.get("approved_by") or "-"))
print(" ".join(seen))
PY
)
expect_eq "audit: the approvals, requested then answered by control, then expired" \
  "requested/- approved/control requested/- expired/-" "$outcomes"
inactive=$(grep -c '"reason":"no_active_call"' "$AUDIT" || true)
check "audit: the background process's request is a host_tool.refused (no_active_call)" test "$inactive" -ge 1

# --- the same list and call under gVisor
if docker info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then
  set +e
  g=$("$SANDMAN" --config "$CFG" run --agent coder --tool shell --mode per_tool --runtime runsc -- \
    sandman-tools call read_host "path=$HOSTFILE" 2>&1)
  set -e
  expect_eq "gVisor: read_host through the route" "the host's own words $$" "$g"
elif [ "${CI:-}" = "true" ]; then
  it_fail "gVisor: runsc is not registered with the engine"
fi

secrets=$(grep -c "the host's own words" "$AUDIT" || true)
expect_eq "audit: no tool output in the trail" 0 "$secrets"
it_done
