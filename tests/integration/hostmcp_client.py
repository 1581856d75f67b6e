#!/usr/bin/env python3
"""An MCP client written for tests/integration/test_host_mcp.sh, run INSIDE a
sandbox: it speaks MCP's streamable HTTP transport (2025-06-18) to sandman's
host-tool route over the unix socket /.sandman/tools.sock with http.client
(no network).

Usage: hostmcp_client.py PLAN
PLAN is a JSON list of steps, done in order:
  {"op": "init"}                       initialize + notifications/initialized
  {"op": "use", "session": ID}         use an existing session id from now on
  {"op": "list"}                       tools/list
  {"op": "call", "name": N, "arguments": {...}}   tools/call
  {"op": "get"}                        GET /mcp (no server stream: 405)
  {"op": "delete"}                     DELETE /mcp (ends the session)
Prints one JSON list: per step {"op", "status", "session", "body"} (body
parsed when it is JSON; for an SSE answer, its one event's data).
"""
import http.client
import json
import socket
import sys

SOCKET = "/.sandman/tools.sock"  # the route's fixed place (docs/host-tools.md)
PROTOCOL = "2025-06-18"


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=60)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(60)
        s.connect(self.path)
        self.sock = s


class Client:
    def __init__(self):
        self.session = None
        self.next_id = 1

    def http(self, method, body=None):
        conn = UnixConnection(SOCKET)
        headers = {"Accept": "application/json, text/event-stream"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
            headers["MCP-Protocol-Version"] = PROTOCOL
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, "/mcp", body=data, headers=headers)
        r = conn.getresponse()
        raw = r.read().decode("utf-8", "replace")
        sid = r.getheader("Mcp-Session-Id")
        ctype = r.getheader("Content-Type") or ""
        conn.close()
        parsed = None
        if ctype.startswith("text/event-stream"):
            for line in raw.splitlines():
                if line.startswith("data: "):
                    parsed = json.loads(line[6:])
        elif raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw
        return r.status, sid, parsed

    def request(self, method, params):
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.next_id += 1
        return self.http("POST", msg)

    def step(self, s):
        op = s["op"]
        if op == "init":
            status, sid, body = self.request("initialize", {
                "protocolVersion": PROTOCOL, "capabilities": {},
                "clientInfo": {"name": "hostmcp-test-client", "version": "1"}})
            if sid:
                self.session = sid
            note_status, _, _ = self.http("POST", {"jsonrpc": "2.0",
                                                  "method": "notifications/initialized"})
            return {"op": op, "status": status, "session": self.session, "body": body,
                    "initialized_status": note_status}
        if op == "use":
            self.session = s["session"]
            return {"op": op, "status": 0, "session": self.session, "body": None}
        if op == "list":
            status, _, body = self.request("tools/list", {})
        elif op == "call":
            status, _, body = self.request("tools/call", {"name": s["name"],
                                                          "arguments": s.get("arguments", {})})
        elif op == "get":
            status, _, body = self.http("GET")
        elif op == "delete":
            status, _, body = self.http("DELETE")
        else:
            raise SystemExit("unknown step " + op)
        return {"op": op, "status": status, "session": self.session, "body": body}


def main():
    plan = json.loads(sys.argv[1])
    c = Client()
    print(json.dumps([c.step(s) for s in plan]))


main()
