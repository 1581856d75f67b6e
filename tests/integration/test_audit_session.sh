#!/usr/bin/env bash
# The audit trail end to end (docs/audit.md): a scripted runner session -
# calls, a tool the configuration refuses, a lease, the lease replayed, a
# bad token, an egress denial, a reap - produces exactly the expected events,
# in order, each a JSON object with its rule and sandbox; GET /v1/audit
# serves them to the control token only; no secret value (the control
# token, a leased credential, a whole lease id) is anywhere in the trail or
# the runner's log.
source "$(dirname "$0")/lib.sh"
require_engine
it_runner_workdir
# The egress proxy's internal network goes too (cleanup_instance leaves networks).
trap 'stop_worker; cleanup_instance; for n in $(docker network ls -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE"); do docker network rm "$n" >/dev/null 2>&1 || true; done; rm -rf "$WORK"' EXIT

TRAIL=$WORK/audit.jsonl
CFG=$WORK/sandman.yaml
cat >"$CFG" <<EOF
defaults:
  network: allowlist
  egress:
    allow: [allowed.test]
agents:
  bot:
    tools:
      deny: [web_fetch]
audit:
  enabled: true
  file: $TRAIL
EOF
SECRET=ghp_audit_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '{"github": {"GH_TOKEN": "%s"}}\n' "$SECRET" >"$WORK/creds.json"
chmod 600 "$WORK/creds.json"

"$SANDMAN" --log-level debug --config "$CFG" worker start --sandbox-mode per_run \
  --sandbox-image sandman/minimal:latest --listen "unix:$SOCK" --token-file "$WORK/token" \
  --credentials-file "$WORK/creds.json" >>"$WORK/runner.log" 2>&1 &
WORKER_PID=$!
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
TOKEN=$(cat "$WORK/token")
api() { # METHOD PATH [BODY] [TOKEN]
  curl -sS --unix-socket "$SOCK" -X "$1" -H "Authorization: Bearer ${4:-$TOKEN}" \
    -H 'Content-Type: application/json' ${3:+-d "$3"} "http://localhost$2"
}

# The session.
out=$(api POST /v1/execute '{"agent": "bot", "run_id": "r1", "argv": ["echo", "hi"]}')
expect_eq "a call runs" "hi" "$(jq -r .stdout <<<"$out" | tr -d '\n')"
out=$(api POST /v1/execute '{"agent": "bot", "run_id": "r1", "tool": "web_fetch", "command": "true"}')
expect_contains "a refused tool is refused" "refused" "$out"
lease=$(api POST /v1/leases '{"tool": "shell", "services": ["github"], "max_uses": 1}' | jq -r .lease_id)
check "a lease is made" [ -n "$lease" ] && [ "$lease" != null ]
body=$(jq -cn --arg l "$lease" '{agent: "bot", run_id: "r1", tool: "shell", command: "printf %s \"$GH_TOKEN\" | wc -c", lease_id: $l}')
out=$(api POST /v1/execute "$body")
expect_eq "the lease's credential reaches the call" "${#SECRET}" "$(jq -r .stdout <<<"$out" | tr -d ' \n')"
out=$(api POST /v1/execute "$body")
expect_contains "the replayed lease is refused" "lease invalid or expired" "$out"
out=$(api POST /v1/execute '{"argv": ["true"]}' "not-the-token-at-all-0123456789")
expect_contains "a bad token is refused" "missing or invalid token" "$out"
out=$(api POST /v1/execute '{"agent": "bot", "run_id": "r1", "argv": ["sh", "-c", "wget -q -O- http://denied.test/ 2>&1; echo rc=$?"]}')
expect_contains "an unlisted destination is refused by the proxy" "403" "$(jq -r .stdout <<<"$out")"
out=$(api POST /v1/sandboxes/reap '{"older_than_s": 0}')
expect_eq "the reap removes the run's sandbox" "1" "$(jq '.removed | length' <<<"$out")"

# The trail, through GET /v1/audit (it collects the proxy's decisions first).
got=$(api GET /v1/audit)
events=$(jq -r '.events[].unmapped.event' <<<"$got" | tr '\n' ' ' | sed 's/ $//')
expect_eq "exactly the expected events, in order" \
  "call.allowed sandbox.created call.refused lease.created lease.used call.allowed sandbox.created sandbox.removed lease.refused token.refused call.allowed sandbox.reaped egress.denied" \
  "$events"
sbname=$(jq -r '[.events[] | select(.unmapped.event == "sandbox.created")][0] | .unmapped.sandbox' <<<"$got")
leasebox=$(jq -r '[.events[] | select(.unmapped.event == "sandbox.created")][1] | .unmapped.sandbox' <<<"$got")
expect_contains "the leased call ran in a container of its own" "-lease-" "$leasebox"
expect_eq "... which went after it" "$leasebox" "$(jq -r '.events[] | select(.unmapped.event == "sandbox.removed") | .unmapped.sandbox' <<<"$got")"
pick() { jq -c --arg e "$1" '.events[] | select(.unmapped.event == $e)' <<<"$got" | head -1; }
expect_contains "call.refused names its rule" "agents.bot.tools.deny" "$(pick call.refused | jq -r .unmapped.rule)"
expect_eq "call.refused is Blocked" "2" "$(pick call.refused | jq -r .disposition_id)"
expect_eq "call.allowed names agent and run" "bot r1" "$(pick call.allowed | jq -r '.unmapped.agent + " " + .unmapped.run_id')"
expect_eq "the egress denial is the run's sandbox" "$sbname" "$(pick egress.denied | jq -r .unmapped.sandbox)"
expect_contains "the egress denial names its rule" "defaults.egress.allow does not include denied.test:80" \
  "$(pick egress.denied | jq -r .unmapped.rule)"
expect_eq "the reaped sandbox is the run's" "$sbname" "$(pick sandbox.reaped | jq -r .unmapped.sandbox)"
expect_eq "a lease is shown by its first characters only" "${lease:0:6}..." "$(pick lease.used | jq -r .unmapped.lease_id)"
expect_eq "the bad token's route" "execute" "$(pick token.refused | jq -r .unmapped.route)"

# Filters of GET /v1/audit; only the control token reads it.
expect_eq "?denied=1" "call.refused lease.refused token.refused egress.denied" \
  "$(api GET '/v1/audit?denied=1' | jq -r '.events[].unmapped.event' | tr '\n' ' ' | sed 's/ $//')"
expect_eq "?run_id=r1&limit=2: the newest two of the run" "call.allowed egress.denied" \
  "$(api GET '/v1/audit?run_id=r1&limit=2' | jq -r '.events[].unmapped.event' | tr '\n' ' ' | sed 's/ $//')"
worker_token=$("$SANDMAN" token derive --token-file "$WORK/token" --worker-key w1)
expect_contains "a worker token cannot read the trail" "missing or invalid token" "$(api GET /v1/audit "" "$worker_token")"
expect_contains "nor a bad one" "missing or invalid token" "$(api GET /v1/audit "" "0123456789abcdef0123456789abcdef")"
stop_worker

# sandman run and sandman sandbox rm record too when audit.enabled is true.
"$SANDMAN" --config "$CFG" run --mode per_run --network none --agent bot --run-id r2 -- true
"$SANDMAN" --config "$CFG" sandbox rm --run-id r2 >/dev/null
expect_eq "sandman run and sandbox rm: their events" "call.allowed sandbox.created sandbox.removed" \
  "$(tail -n 3 "$TRAIL" | jq -r .unmapped.event | tr '\n' ' ' | sed 's/ $//')"

# The file: every line a JSON object; no secret anywhere.
check "every line of the trail is a JSON object" jq -e 'type == "object"' "$TRAIL" >/dev/null
check "sandman audit reads it (--denied --run r1)" \
  [ "$("$SANDMAN" --config "$CFG" audit --json --denied --run r1 2>/dev/null | wc -l)" -ge 2 ]
for what in "control token:$TOKEN" "leased credential:$SECRET" "lease id:$lease"; do
  name=${what%%:*} value=${what#*:}
  if grep -qF -- "$value" "$TRAIL" "$WORK/runner.log"; then it_fail "the $name appears in the trail or the log"
  else it_pass "no $name in the trail or the log"; fi
done
it_done
