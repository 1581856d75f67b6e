#!/usr/bin/env bash
# A call cancelled before its process has started does not run on: `sandman mcp`
# gets a task-augmented `execute` and its tasks/cancel in one write, so the
# cancel lands while the call is being sent or before the wrapper reported
# its start. Before the fix the killer looked for the call's process before
# the agent had started it, the command then ran on (a cancelled
# `sleep 600` seen by the next calls for the ten seconds the call waited
# for its end), and a client that closed and killed its server a few
# seconds later (the MCP SDK's StdioClientTransport) left the sandbox
# behind. Each round polls `ps` in the sandbox for three seconds: the
# command may show for a moment (killed once its start is reported), never
# at the end.
. "$(dirname "$0")/lib.sh"
require_engine
trap cleanup_instance EXIT

out=$(SANDMAN="$SANDMAN" python3 - <<'EOF'
import json, os, select, subprocess, sys, time

p = subprocess.Popen([os.environ["SANDMAN"], "mcp"], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
answers = {}

def send(*msgs):
    p.stdin.write("".join(json.dumps(m) + "\n" for m in msgs))
    p.stdin.flush()

def answer(i, bound=120):
    deadline = time.time() + bound
    while i not in answers:
        left = deadline - time.time()
        if left <= 0 or not select.select([p.stdout], [], [], left)[0]:
            raise SystemExit("no answer to request %s" % i)
        line = p.stdout.readline()
        if not line:
            raise SystemExit("sandman mcp ended early")
        m = json.loads(line)
        if "id" in m:
            answers[m["id"]] = m
    return answers.pop(i)

def call(i, command, task=False):
    params = {"name": "execute", "arguments": {"command": command}}
    if task:
        params["task"] = {}
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}

send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
      "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                 "clientInfo": {"name": "cancel-early", "version": "1"}}})
answer(1)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send(call(2, "true"))  # the sandbox and its agent session, made before the rounds
print("first call", answer(2)["result"]["isError"])

n = 10
for r in range(5):
    marker = "sleep 60%d%d" % (r, 7)
    n += 1
    send(call(n, marker, task=True))
    # The cancel right behind the call: the task's id is known only from the
    # answer, so the call is sent as a task and cancelled at once.
    t = answer(n)["result"]["task"]["taskId"]
    n += 1
    send({"jsonrpc": "2.0", "id": n, "method": "tasks/cancel", "params": {"taskId": t}})
    status = answer(n)["result"]["status"]
    last = -1
    end = time.time() + 3
    while time.time() < end:
        n += 1
        send(call(n, "ps -o args | grep -c '[s]%s' || true" % marker[1:]))
        text = "".join(c.get("text", "") for c in answer(n)["result"]["content"])
        last = int(text.strip().splitlines()[0] or 0)
        time.sleep(0.3)
    print("round %d %s running at the end %d" % (r, status, last))
p.stdin.close()
try:
    rc = p.wait(120)
except subprocess.TimeoutExpired:
    p.kill()
    rc = "no exit"
print("exit", rc)
EOF
)
echo "$out"
expect_contains "the first call runs" "first call False" "$out"
for r in 0 1 2 3 4; do
  expect_contains "round $r: cancelled, and the command not running three seconds later" "round $r cancelled running at the end 0" "$out"
done
expect_contains "sandman mcp ends when its input ends" "exit 0" "$out"
left=$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "no sandbox left" 0 "$left"
it_done
