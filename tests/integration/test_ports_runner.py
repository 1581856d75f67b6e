#!/usr/bin/env python3
"""The runner's ports route (docs/ports.md#the-runners-route) against the
real engine. Run by test_ports_runner.sh, which gives the image
(sandman/general under the tests' tag) in PORTS_IMAGE.

  route  a per_run sandbox of worker k1 with network none; an HTTP server
         (python3 -m http.server, started on a runner terminal) in it is
         reached through /v1/sandboxes/{id}/ports/8000/...: a page, a 404,
         a POST's body to a port nothing serves (502), a query passed on;
         the worker's own token with X-Sandman-Worker-Key reaches it;
         another worker's token (its own key, or k1's key) gets exactly the
         answer of a missing sandbox; no token is 401; each opened
         connection is a port.opened audit row; after the sandbox is
         removed the route answers as for a missing one.

Prints "ok - ..." / "not ok - ..." and exits 0 only when everything passed
(77: no engine outside CI).
"""
import json
import os
import socket
import http.client
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_sandboxes as tsb  # noqa: E402
import test_server as ts  # noqa: E402
from sandman_client import Client, derive_worker_token  # noqa: E402

check = ts.check
IMAGE = os.environ.get("PORTS_IMAGE", "sandman/general:latest")


def raw(r, method, path, token=None, key=None, body=None):
    """(status, headers dict, body bytes) of one request on the runner's socket."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(120)
    s.connect(r.sock)
    conn = http.client.HTTPConnection("localhost")
    conn.sock = s
    h = {}
    if token:
        h["Authorization"] = "Bearer " + token
    if key:
        h["X-Sandman-Worker-Key"] = key
    conn.request(method, path, body=body, headers=h)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), data


def serve(k1, sid):
    """A python3 http.server on 127.0.0.1:8000 in the sandbox, on a terminal."""
    out = k1.execute(command="mkdir -p /workspace/www && echo hello-port >/workspace/www/index.html",
                     sandbox_id=sid, worker_key="k1")
    check("the page is written in the sandbox", out.get("exit_code") == 0, out)
    k1._call("POST", "/v1/terminals", {
        "sandbox_id": sid, "worker_key": "k1",
        "argv": ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1",
                 "--directory", "/workspace/www"]})


def page(r, sid, token, key, path="/index.html"):
    return raw(r, "GET", "/v1/sandboxes/%s/ports/8000%s" % (sid, path), token, key)


def audit_rows(r, name):
    st, _, data = raw(r, "GET", "/v1/audit?limit=1000", r.token)
    rows = [json.loads(x) for x in data.decode().splitlines() if x.strip().startswith("{")]
    if st == 200 and len(rows) == 1 and isinstance(rows[0].get("events"), list):
        rows = rows[0]["events"]
    return [x for x in rows if json.dumps(x).find('"%s"' % name) >= 0]


def suite_route(tmp):
    r = tsb.runner(tmp, base=ts.sandbox_args(image=IMAGE))
    try:
        route_checks(r)
    finally:
        r.stop()


def route_checks(r):
    k1 = Client.for_worker(r.client.address, r.token, "k1")
    tok1 = derive_worker_token(r.token, "k1")
    tok2 = derive_worker_token(r.token, "k2")
    run = "preview-route-%d" % os.getpid()
    out = k1.execute(command="true", run_id=run, worker_key="k1", mode="per_run")
    check("k1's per_run sandbox runs a call", out.get("exit_code") == 0, out)
    sbs = [x for x in k1.list_sandboxes(worker_key="k1") if x.get("run_id") == run]
    if not check("k1's sandbox is listed", len(sbs) == 1, sbs):
        return
    sid = sbs[0]["id"]
    serve(k1, sid)
    ok = tsb.wait_for(lambda: page(r, sid, tok1, "k1")[0] == 200, 60, 0.3)
    st, h, body = page(r, sid, tok1, "k1")
    check("the page through the route with k1's token", ok and body == b"hello-port\n",
          (st, body))
    check("its Content-Type is passed on", h.get("content-type", "").startswith("text/html"), h)
    st, _, body = page(r, sid, r.token, None, "/index.html?x=1&y=a%20b")
    check("the control token reaches it too, a query passed on", st == 200 and body ==
          b"hello-port\n", (st, body))
    st, _, _ = page(r, sid, tok1, "k1", "/missing")
    check("the server's 404 is passed on", st == 404, st)
    st, _, body = raw(r, "POST", "/v1/sandboxes/%s/ports/8999/x" % sid, tok1, "k1", b"data")
    check("a port nothing serves is 502", st == 502 and b"nothing listens" in body, (st, body))

    # Another worker: exactly the answer of a missing sandbox.
    miss = page(r, "no-such-sandbox", tok1, "k1")
    check("a missing sandbox is 404", miss[0] == 404, miss)
    other = page(r, sid, tok2, "k2")
    check("k2's token on k1's sandbox: exactly a missing sandbox's answer",
          other[0] == miss[0] and other[2].replace(sid.encode(), b"X") ==
          miss[2].replace(b"no-such-sandbox", b"X"), (other, miss))
    st, _, body = page(r, sid, tok2, "k1")
    check("k2's token naming k1's key is refused", st == 401 and b"hello" not in body, (st, body))
    st, _, body = page(r, sid, None, None)
    check("no token is 401", st == 401 and b"hello" not in body, (st, body))

    rows = audit_rows(r, "port.opened")
    check("each opened connection is a port.opened audit row", len(rows) >= 2, rows[-3:])
    check("a failed one is a port.failed row", len(audit_rows(r, "port.failed")) >= 1)

    k1.delete_sandbox(sid, worker_key="k1")
    st, _, body = page(r, sid, tok1, "k1")
    check("after removal the route answers as for a missing sandbox", st == 404, (st, body))


def main():
    ts.run_suites({"route": suite_route}, "route", "preview-ports")


if __name__ == "__main__":
    main()
