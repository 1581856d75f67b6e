#!/usr/bin/env python3
"""A tiny MCP server over stdio for tests/unit/mcp/test_client.c.

Usage: fake_mcp_server.py [MODE]   MODE: normal (default) | oldproto | silent

Tools (listed two per page, so that the client must follow nextCursor):
  echo {text}        the text back (and structuredContent {"echo": text})
  env                the environment and the open file descriptors, as JSON
  slow               never answers; a notifications/cancelled for it is recorded
  cancelled          the request ids whose cancellation arrived
  die                the server exits at once, answering nothing
  big {bytes}        an answer of that many bytes on one line
  ask                sends the client a request (roots/list) and returns the
                     error code of its answer
  fails              a tool error (isError)
Unknown tools are a JSON-RPC error. Before initialize and
notifications/initialized, tools/* are an error. Every answer is preceded by
a line that is not JSON (a stray log line), which the client must skip.
"""
import json
import os
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "normal"
TOOLS = ["echo", "env", "slow", "cancelled", "die", "big", "ask", "fails"]
state = {"initialized": False, "cancelled": [], "asked": None, "ask_id": None}


def send(obj):
    sys.stdout.write("log line that is not JSON\n")
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def answer(rid, result):
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def error(rid, code, message):
    send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})


def text(rid, t, is_error=False, structured=None):
    r = {"content": [{"type": "text", "text": t}], "isError": is_error}
    if structured is not None:
        r["structuredContent"] = structured
    answer(rid, r)


def tool_list(rid, params):
    start = int(params.get("cursor", "0") or "0")
    page = TOOLS[start:start + 2]
    r = {"tools": [{"name": n, "description": "test tool " + n,
                    "inputSchema": {"type": "object"}} for n in page]}
    if start + 2 < len(TOOLS):
        r["nextCursor"] = str(start + 2)
    answer(rid, r)


def call(rid, params):
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo":
        text(rid, args.get("text", ""), structured={"echo": args.get("text", "")})
    elif name == "env":
        text(rid, json.dumps({"env": dict(os.environ), "fds": sorted(os.listdir("/proc/self/fd"))}))
    elif name == "slow":
        pass  # never answered
    elif name == "cancelled":
        text(rid, json.dumps(state["cancelled"]))
    elif name == "die":
        os._exit(3)
    elif name == "big":
        text(rid, "x" * int(args.get("bytes", 1000)))
    elif name == "ask":
        state["asked"] = rid
        state["ask_id"] = "srv-1"
        send({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list", "params": {}})
    elif name == "fails":
        text(rid, "it failed", is_error=True)
    else:
        error(rid, -32602, "unknown tool: %s" % name)


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        if method is None:  # a response: the client's answer to our request
            if rid == state["ask_id"] and state["asked"] is not None:
                code = (msg.get("error") or {}).get("code")
                text(state["asked"], str(code))
                state["asked"] = None
            continue
        if method == "initialize":
            if MODE == "silent":
                continue
            version = "1999-01-01" if MODE == "oldproto" else params.get("protocolVersion")
            answer(rid, {"protocolVersion": version, "capabilities": {"tools": {}},
                         "serverInfo": {"name": "fake", "version": "1"}})
        elif method == "notifications/initialized":
            state["initialized"] = True
        elif method == "notifications/cancelled":
            state["cancelled"].append(params.get("requestId"))
        elif not state["initialized"]:
            if rid is not None:
                error(rid, -32002, "not initialized")
        elif method == "tools/list":
            tool_list(rid, params)
        elif method == "tools/call":
            call(rid, params)
        elif rid is not None:
            error(rid, -32601, "method not found")


main()
