#!/usr/bin/env bash
# MCP over the host-tool route, against the real engine: a Python MCP client
# written for the test (tests/integration/hostmcp_client.py: streamable HTTP
# over the unix socket /.sandman/tools.sock, with http.client) runs inside a
# `network: none` sandbox of sandman/general (the tests' own build,
# scripts/test-images.sh) and lists and calls host tools
# at /mcp: it sees only what its agent's policy allows, a tool it may not use
# is refused (JSON-RPC -32602, audited), and a real MCP server on the host
# (@modelcontextprotocol/server-everything from the npm registry, pinned in
# clients/typescript's lockfile) is relayed in through broker.mcp_servers,
# filtered by policy (echo allowed, get-sum denied and not listed); its
# environment is scrubbed. One `sandman run` in a per_run sandbox; then,
# under the runner (one broker for every sandbox), a session belongs to the
# sandbox that made it (404 in another) and serves its later calls. Both
# brokers stop their host MCP server. (The caller of each request and an
# inactive caller: tests/unit/broker/test_route_mcp.c.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_lib.sh"
require_engine
require_node
SERVER_JS=$TS_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js
if [ ! -f "$SERVER_JS" ]; then
  [ "${CI:-}" = "true" ] && { echo "FAIL: CI=true and $SERVER_JS is missing (scripts/setup.sh installs it)" >&2; exit 1; }
  echo "SKIP: $SERVER_JS is missing (scripts/setup.sh installs it)"
  exit 77
fi

GENERAL=$(it_test_image general) || { echo "FAIL: the test image general: scripts/test-images.sh failed" >&2; exit 1; }
WORK=$(mktemp -d /tmp/hostmcp-it-XXXXXX)
WORKER_PID=
cleanup() {
  if [ -n "$WORKER_PID" ]; then kill -TERM "$WORKER_PID" 2>/dev/null || true; wait "$WORKER_PID" 2>/dev/null || true; fi
  cleanup_instance
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

echo "only the host has this: hostmcp-7f3a" >"$WORK/only-on-host.txt"
AUDIT=$WORK/audit.jsonl
cat >"$WORK/sandman.yaml" <<EOF
audit:
  enabled: true
  file: $AUDIT
broker:
  tools:
    host_file:
      description: the content of a file only the host has
      argv: [cat, "$WORK/only-on-host.txt"]
    host_echo:
      description: echoes its text on the host
      input_schema: {type: object, properties: {text: {type: string}}, required: [text]}
      argv: [echo, "{text}"]
    host_forbidden:
      description: a host tool this agent may not use
      argv: ["true"]
  mcp_servers:
    everything:
      command: [node, "$SERVER_JS", stdio]
      tools: [echo, get-sum, get-env]
      prefix: ev_
      timeout: 60s
agents:
  hostmcp-agent:
    broker:
      allow: [host_file, host_echo, "ev_*"]
      deny: [ev_get-sum]
EOF

# The host's environment has a value the relayed server must not see.
export HOSTMCP_HOST_SECRET=never-relayed-5c1d
CLIENT=$SRC_DIR/tests/integration/hostmcp_client.py
run_client() { # run_client RUN_ID PLAN: the client's JSON report on stdout
  "$SANDMAN" --config "$WORK/sandman.yaml" run --agent hostmcp-agent --tool shell \
    --image "$GENERAL" --mode per_run --run-id "$1" --network none -i \
    -- python3 - "$2" <"$CLIENT"
}
# step N EXPR: python expression over the report's step d (parsed JSON)
step() { python3 -c "import json,sys; r=json.load(open('$WORK/report.json')); d=r[$1]; print($2)"; }

plan='[{"op":"init"},{"op":"list"},
 {"op":"call","name":"host_file"},
 {"op":"call","name":"host_echo","arguments":{"text":"a b; $(id) > x"}},
 {"op":"call","name":"ev_echo","arguments":{"message":"hello from the sandbox"}},
 {"op":"call","name":"ev_get-env"},
 {"op":"call","name":"ev_get-sum","arguments":{"a":1,"b":2}},
 {"op":"call","name":"host_forbidden"},
 {"op":"get"},{"op":"delete"},{"op":"list"}]'
if run_client hostmcp-r1 "$plan" >"$WORK/report.json" 2>"$WORK/run.err"; then
  it_pass "the MCP client ran in a network: none sandbox"
else
  it_fail "the MCP client ran: $(tail -n 5 "$WORK/run.err") $(head -c 500 "$WORK/report.json")"
fi

expect_eq "initialize: 200 with a session id" "200 True" "$(step 0 'd["status"], bool(d["session"])')"
expect_eq "notifications/initialized: 202" 202 "$(step 0 'd["initialized_status"]')"
expect_eq "initialize: sandman's host tools server" "sandman-host-tools" \
  "$(step 0 'd["body"]["result"]["serverInfo"]["name"]')"
expect_eq "tools/list: only what the policy allows (no host_forbidden, no ev_get-sum, no unexported tool)" \
  "ev_echo ev_get-env host_echo host_file" \
  "$(step 1 '" ".join(sorted(t["name"] for t in d["body"]["result"]["tools"]))')"
expect_eq "tools/list: a relayed tool keeps its server's schema" "message" \
  "$(step 1 '[t for t in d["body"]["result"]["tools"] if t["name"]=="ev_echo"][0]["inputSchema"]["required"][0]')"
expect_contains "tools/call host_file: the host file's content comes back" "hostmcp-7f3a" \
  "$(step 2 'd["body"]["result"]["content"][0]["text"]')"
expect_eq "tools/call host_echo: metacharacters and spaces stay one argument" 'a b; $(id) > x' \
  "$(step 3 'd["body"]["result"]["content"][0]["text"].strip()')"
expect_eq "tools/call ev_echo: relayed to the host MCP server, its text comes back" \
  "Echo: hello from the sandbox" "$(step 4 'd["body"]["result"]["content"][0]["text"]')"
envtext=$(step 5 'd["body"]["result"]["content"][0]["text"]')
expect_not_contains "the host MCP server's environment is scrubbed (no host variable it was not given)" \
  "never-relayed-5c1d" "$envtext"
expect_eq "tools/call ev_get-sum (denied by policy): unknown tool, -32602" -32602 \
  "$(step 6 'd["body"]["error"]["code"]')"
expect_eq "tools/call host_forbidden (not allowed): unknown tool, -32602" -32602 \
  "$(step 7 'd["body"]["error"]["code"]')"
expect_eq "GET /mcp: 405 (no server stream)" 405 "$(step 8 'd["status"]')"
expect_eq "DELETE /mcp ends the session (204), which is then unknown (404)" "204 404" \
  "$(step 9 'd["status"]') $(step 10 'd["status"]')"

# Under the runner one broker serves every sandbox: a session belongs to the
# sandbox that made it (another sandbox's request with its id is 404) and
# serves that sandbox's later calls, each answered for its own caller.
SOCK=$WORK/runner.sock
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/token"
chmod 600 "$WORK/token"
"$SANDMAN" --config "$WORK/sandman.yaml" worker start --sandbox-mode per_run \
  --sandbox-image "$GENERAL" --listen "unix:$SOCK" --token-file "$WORK/token" \
  >>"$WORK/runner.log" 2>&1 &
WORKER_PID=$!
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
check "the runner started" test -S "$SOCK"
CLIENT_B64=$(base64 -w0 <"$CLIENT")
runner_client() { # runner_client RUN_ID PLAN: the client's report, through POST /v1/execute
  local body
  body=$(python3 -c 'import json,sys; print(json.dumps({"agent": "hostmcp-agent", "tool": "shell",
    "run_id": sys.argv[1], "argv": ["python3", "-", sys.argv[2]], "stdin_b64": sys.argv[3]}))' "$1" "$2" "$CLIENT_B64")
  curl -sS --unix-socket "$SOCK" -X POST -H "Authorization: Bearer $(cat "$WORK/token")" \
    -H 'Content-Type: application/json' -d "$body" http://localhost/v1/execute |
    python3 -c 'import json,sys; d=json.load(sys.stdin); sys.stdout.write(d.get("stdout") or json.dumps(d))'
}
runner_client w1 '[{"op":"init"},{"op":"list"}]' >"$WORK/report.json"
expect_eq "runner: a sandbox's call makes a session and lists its tools" "200 200" \
  "$(step 0 'd["status"]') $(step 1 'd["status"]')"
sid=$(step 0 'd["session"]')
runner_client w2 "[{\"op\":\"use\",\"session\":\"$sid\"},{\"op\":\"list\"}]" >"$WORK/report.json"
expect_eq "runner: another sandbox's request with the session id is 404" 404 "$(step 1 'd["status"]')"
runner_client w1 "[{\"op\":\"use\",\"session\":\"$sid\"},{\"op\":\"call\",\"name\":\"ev_echo\",\"arguments\":{\"message\":\"again\"}},{\"op\":\"delete\"}]" >"$WORK/report.json"
expect_eq "runner: the same sandbox's next call uses its session (ev_echo), then ends it (204)" \
  "Echo: again 204" "$(step 1 'd["body"]["result"]["content"][0]["text"]') $(step 2 'd["status"]')"
kill -TERM "$WORKER_PID"
wait "$WORKER_PID" || true
WORKER_PID=

# The audit trail: the relayed call and the refusals, with who asked.
rows() { python3 -c "
import json
def find(o, k):
    if isinstance(o, dict):
        if k in o: return o[k]
        for v in o.values():
            f = find(v, k)
            if f is not None: return f
    return None
for l in open('$AUDIT'):
    r = json.loads(l)
    ev, tool, agent = find(r, 'event') or '', find(r, 'host_tool'), find(r, 'agent')
    if ev.startswith('host_tool.') and tool == '$1': print(ev, tool, agent)
"; }
expect_contains "audited: the relayed call (host_tool.call ev_echo, agent hostmcp-agent)" \
  "host_tool.call ev_echo hostmcp-agent" "$(rows ev_echo)"
expect_contains "audited: the denied relayed tool's refusal" "host_tool.refused ev_get-sum hostmcp-agent" \
  "$(rows ev_get-sum)"
expect_contains "audited: the forbidden tool's refusal" "host_tool.refused host_forbidden hostmcp-agent" \
  "$(rows host_forbidden)"
left=$(pgrep -f "$SERVER_JS" | wc -l || true)
expect_eq "the host MCP servers stopped with their brokers (sandman run's, the runner's)" 0 "$left"
it_done
