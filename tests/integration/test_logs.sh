#!/usr/bin/env bash
# Logs a machine can read and nobody can forge (issue 15 item 6, issue 13
# item 9).
#  - The attack: a tool writes a file whose name holds a newline and a fake
#    log line, with the setuid bit so that the copy back logs its name. In
#    text logs the newline is escaped (no line starts with the forgery); in
#    JSON logs every line is one object and the name comes back intact.
#  - --log-format json: every line on stderr is JSON, the final error line
#    included, with fields: the call's start and end (tool, mode, sandbox,
#    exit_code, duration_ms, timed_out), sandbox create and remove, and in
#    the runner the request (request_id, route, status, duration_ms) and the
#    call's result.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_engine
WORK=$(mktemp -d)
WORKER_PID=""
cleanup() {
  [ -n "$WORKER_PID" ] && kill "$WORKER_PID" 2>/dev/null && wait "$WORKER_PID" 2>/dev/null
  cleanup_instance
  rm -rf "$WORK"
}
trap cleanup EXIT

FORGED='2099-01-01T00:00:00.000Z ERROR [admin] forged'
ATTACK='f="$(printf "evil\n%s" "$1")"; printf a >"$f"; chmod 4755 "$f"'

# ---- the attack, text logs ----
mkdir -p "$WORK/ws1" "$WORK/ws2"
"$SANDMAN" run --mode per_tool --workspace "$WORK/ws1" -- sh -c "$ATTACK" sh "$FORGED" \
  >/dev/null 2>"$WORK/text.log" || true
expect_eq "the tool's file came back (the attack ran)" 1 "$(find "$WORK/ws1" -name 'evil*' -printf x | wc -c)"
expect_contains "the name is logged (setuid dropped)" "setuid/setgid bits dropped" "$(cat "$WORK/text.log")"
expect_eq "text: no log line starts with the forgery" 0 "$(grep -c "^$FORGED" "$WORK/text.log" || true)"
expect_contains "text: the newline is written as backslash-n" "evil\\n$FORGED" "$(cat "$WORK/text.log")"

# ---- the attack, JSON logs ----
"$SANDMAN" --log-format json run --mode per_tool --workspace "$WORK/ws2" -- sh -c "$ATTACK" sh "$FORGED" \
  >/dev/null 2>"$WORK/json.log" || true
python3 - "$WORK/json.log" "$FORGED" >"$WORK/attack.txt" 2>&1 <<'EOF' || true
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
objs = []
for l in lines:
    try: objs.append(json.loads(l))
    except ValueError: print("not JSON:", l)
hit = [o for o in objs if "setuid" in o.get("msg", "")]
print("lines", len(lines), "json", len(objs))
print("name intact", bool(hit) and ("evil\n" + sys.argv[2]) in hit[0]["msg"])
EOF
expect_not_contains "json: every line is JSON" "not JSON" "$(cat "$WORK/attack.txt")"
expect_contains "json: the file name comes back intact inside the field" "name intact True" "$(cat "$WORK/attack.txt")"

# ---- JSON lines, field by field, for a CLI call ----
"$SANDMAN" --log-format json --log-level debug run --mode per_tool -- sh -c 'exit 3' \
  >/dev/null 2>"$WORK/call.log" || true
"$SANDMAN" --log-format json run --mode per_tool --image sandman-it/no-such-image:1 -- true \
  >/dev/null 2>"$WORK/fail.log" || true
python3 - "$WORK/call.log" "$WORK/fail.log" >"$WORK/fields.txt" 2>&1 <<'EOF' || true
import json, sys
def load(p):
    out = []
    for l in open(p).read().splitlines():
        try: out.append(json.loads(l))
        except ValueError: print("not JSON:", l)
    return out
call, fail = load(sys.argv[1]), load(sys.argv[2])
ev = {o.get("event"): o for o in call}
def show(name, keys):
    o = ev.get(name, {})
    print(name, " ".join(f"{k}={o.get(k)!r}" for k in keys))
for o in call + fail:
    for k in ("time", "level", "msg"):
        if k not in o: print("missing", k, "in", o)
    if not o["time"].endswith("Z") or "T" not in o["time"]: print("bad time", o["time"])
show("call.start", ["level", "command", "mode"])
show("sandbox.create", ["mode", "image"])
s = ev.get("sandbox.create", {}).get("sandbox", "")
e = ev.get("call.end", {})
print("call.end", e.get("mode"), e.get("exit_code"), type(e.get("duration_ms")).__name__,
      e.get("timed_out"), e.get("oom_killed"), e.get("sandbox") == s and len(s) == 64)
print("sandbox.remove", "name" in ev.get("sandbox.remove", {}))
last = fail[-1] if fail else {}
print("last", last.get("level"), last.get("event"), "no-such-image" in last.get("msg", ""))
EOF
f=$(cat "$WORK/fields.txt")
expect_not_contains "json: every line of a call is JSON with time, level, msg" "not JSON" "$f"
expect_not_contains "json: no line lacks a field" "missing" "$f"
expect_contains "json: call.start has command and mode" "call.start level='debug' command='sh' mode='per_tool'" "$f"
expect_contains "json: sandbox.create has mode and image" "sandbox.create mode='per_tool' image='sandman/minimal:latest'" "$f"
expect_contains "json: call.end has mode, exit_code, a numeric duration, timed_out, oom_killed, the sandbox" \
  "call.end per_tool 3 float False False True" "$f"
expect_contains "json: sandbox.remove" "sandbox.remove True" "$f"
expect_contains "json: the final error line is JSON too" "last error cli.error True" "$f"

# ---- the runner: request and call lines ----
SOCK=$WORK/runner.sock
(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/token")
"$SANDMAN" --log-format json worker start --sandbox-mode per_tool --sandbox-pool-size 0 \
  --project-environment development --listen "unix:$SOCK" --token-file "$WORK/token" \
  >/dev/null 2>"$WORK/runner.log" &
WORKER_PID=$!
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
check "the runner listens" test -S "$SOCK"
curl -sS --unix-socket "$SOCK" -H "Authorization: Bearer $(cat "$WORK/token")" -H 'Content-Type: application/json' \
  -d '{"tool": "lister", "argv": ["sh", "-c", "exit 4"]}' http://localhost/v1/execute >"$WORK/answer.json" || true
kill "$WORKER_PID" && wait "$WORKER_PID" 2>/dev/null || true
WORKER_PID=""
python3 - "$WORK/runner.log" >"$WORK/runner.txt" 2>&1 <<'EOF' || true
import json, sys
objs = []
for l in open(sys.argv[1]).read().splitlines():
    try: objs.append(json.loads(l))
    except ValueError: print("not JSON:", l)
req = [o for o in objs if o.get("event") == "http.request" and o.get("route") == "execute"]
res = [o for o in objs if o.get("event") == "call.result"]
if req:
    r = req[0]
    print("request", r.get("method"), r.get("status"), type(r.get("duration_ms")).__name__, bool(r.get("request_id")))
if res:
    c = res[0]
    print("result", c.get("tool"), c.get("mode"), c.get("outcome"), c.get("exit_code"),
          type(c.get("duration_ms")).__name__, len(c.get("sandbox", "")) == 64,
          c.get("request_id") == (req[0].get("request_id") if req else None))
EOF
r=$(cat "$WORK/runner.txt")
expect_not_contains "runner: every line is JSON" "not JSON" "$r"
expect_contains "runner: the request line has method, status, duration and request id" "request POST 200 float True" "$r"
expect_contains "runner: the call's line has tool, mode, outcome, exit code, duration, sandbox, the same request id" \
  "result lister per_tool tool 4 float True True" "$r"
it_done
