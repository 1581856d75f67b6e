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
         answer of a missing sandbox; no token is 401; the Python client's
         port_request, create_preview and preview_request do the same; each opened
         connection is a port.opened audit row; after the sandbox is
         removed the route answers as for a missing one.

Prints "ok - ..." / "not ok - ..." and exits 0 only when everything passed
(77: no engine outside CI).
"""
import json
import os
import socket
import http.client
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_sandboxes as tsb  # noqa: E402
import test_server as ts  # noqa: E402
from sandman_client import Client, SandmanError, derive_worker_token  # noqa: E402

check = ts.check
# The tests' own build of sandman/general (its .sh wrapper sets it from
# scripts/test-images.sh), never a user's own tag of it.
IMAGE = os.environ.get("PORTS_IMAGE") or sys.exit(
    "PORTS_IMAGE is not set: run this through its .sh wrapper (scripts/test-images.sh)")


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
    return k1._call("POST", "/v1/terminals", {
        "sandbox_id": sid, "worker_key": "k1",
        "argv": ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1",
                 "--directory", "/workspace/www"]})["id"]


def kill_server(r, term):
    """Ends the server's terminal: the sandbox has no call in flight then."""
    st, _, body = raw(r, "DELETE", "/v1/terminals/" + term, r.token)
    check("the server's terminal is killed", st == 200, (st, body))


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
        rc = r.stop()
    log = r.read_log()
    check("the runner ends cleanly, no sanitizer report in its log", rc == 0 and
          "Sanitizer" not in log and "runtime error" not in log, (rc, log[-2000:]))


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
    st, h, body = raw(r, "HEAD", "/v1/sandboxes/%s/ports/8000/index.html" % sid, tok1, "k1")
    check("a HEAD is answered without a body", st == 200 and body == b"", (st, h, body))
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

    client_checks(r, k1, sid)

    rows = audit_rows(r, "port.opened")
    check("each opened connection is a port.opened audit row", len(rows) >= 2, rows[-3:])
    check("a failed one is a port.failed row", len(audit_rows(r, "port.failed")) >= 1)

    k1.delete_sandbox(sid, worker_key="k1")
    st, _, body = page(r, sid, tok1, "k1")
    check("after removal the route answers as for a missing sandbox", st == 404, (st, body))


def client_checks(r, k1, sid):
    """The Python client's port_request, create_preview and preview_request."""
    a = k1.port_request(sid, 8000, "/index.html", worker_key="k1")
    check("client: port_request gets the page", a.status == 200 and a.body == b"hello-port\n"
          and a.refusal is None and a.headers.get("content-type", "").startswith("text/html"), a)
    a = r.client.port_request(sid, 8000, "index.html?x=1")
    check("client: the control token, a relative path with a query", a.status == 200, a)
    a = k1.port_request(sid, 8999, "/x", method="POST", body="data", worker_key="k1")
    check("client: a port nothing serves is the runner's 502 refusal", a.status == 502 and
          a.refusal is not None and "nothing listens" in a.refusal["error"], (a, a.body))
    k2 = Client.for_worker(r.client.address, r.token, "k2")
    a = k2.port_request(sid, 8000, "/index.html", worker_key="k2")
    check("client: k2 on k1's sandbox is 404", a.status == 404 and b"hello" not in a.body, a)
    for bad in (0, 70000, "80", True):
        try:
            k1.port_request(sid, bad, worker_key="k1")
            check("client: port %r is refused before sending" % (bad,), False)
        except ValueError:
            pass
    pv = k1.create_preview(sid, 8000, ttl_s=600, worker_key="k1")
    check("client: create_preview answers the preview", pv.get("port") == 8000 and
          pv.get("sandbox_id") == sid and pv.get("path", "").startswith("/preview/"), pv)
    anon = Client(r.client.address, token="")
    a = anon.preview_request(pv, "index.html")
    check("client: preview_request (no token) gets the page", a.status == 200 and
          a.body == b"hello-port\n", a)
    a = anon.preview_request("/preview/" + "0" * 48 + "/")
    check("client: an unknown preview is a 404 refusal", a.status == 404 and a.refusal, a)
    try:
        k2.create_preview(sid, 8000, worker_key="k2")
        check("client: k2 cannot make a preview of k1's sandbox", False)
    except SandmanError as e:
        check("client: k2 cannot make a preview of k1's sandbox (404)", e.status == 404, e)
    try:
        anon.preview_request("/v1/execute")
        check("client: preview_request takes only a preview's path", False)
    except ValueError:
        pass


def preview(r, sid, token, key, port=8000, ttl=None):
    """POST /v1/sandboxes/{sid}/previews: (status, answer dict or body)."""
    q = "port=%d" % port + ("&worker_key=" + key if key else "") + \
        ("&ttl_s=%d" % ttl if ttl else "")
    st, _, body = raw(r, "POST", "/v1/sandboxes/%s/previews?%s" % (sid, q), token)
    try:
        return st, json.loads(body)
    except ValueError:
        return st, body


def visit(r, path, sub="index.html"):
    st, _, body = raw(r, "GET", path + sub)
    return st, body


def rest_verb(r, sid, verb, tier=None):
    q = "?tier=" + tier if tier else ""
    st, _, body = raw(r, "POST", "/v1/sandboxes/%s/%s%s" % (sid, verb, q), r.token)
    return st, body


def fresh(r, sid, tok1):
    st, pv = preview(r, sid, tok1, "k1")
    check("k1 makes a preview of port 8000 (201)", st == 201 and "token" in pv, (st, pv))
    return pv.get("path", "/preview/none/") if isinstance(pv, dict) else "/preview/none/"


def preview_checks(r):
    tok1 = derive_worker_token(r.token, "k1")
    tok2 = derive_worker_token(r.token, "k2")
    k1 = Client.for_worker(r.client.address, r.token, "k1")
    run = "preview-pv-%d" % os.getpid()
    k1.execute(command="true", run_id=run, worker_key="k1", mode="per_run")
    sid = [x for x in k1.list_sandboxes(worker_key="k1") if x.get("run_id") == run][0]["id"]
    term = serve(k1, sid)
    tsb.wait_for(lambda: page(r, sid, tok1, "k1")[0] == 200, 60, 0.3)
    unknown = visit(r, "/preview/" + "0" * 48 + "/")
    check("an unknown preview token is 404", unknown[0] == 404, unknown)

    path = fresh(r, sid, tok1)
    st, body = visit(r, path)
    check("the page through the preview URL, no other token", st == 200 and body ==
          b"hello-port\n", (st, body))
    rows = [x for x in audit_rows(r, "port.opened") if '"preview"' in json.dumps(x)]
    check("the preview's connection is a port.opened row (via preview)", len(rows) >= 1)
    st, pv = preview(r, sid, tok1, "k1", port=8001)
    st2, body = visit(r, pv.get("path", "/x/") if isinstance(pv, dict) else "/x/")
    check("a preview of port 8001 does not reach port 8000", st == 201 and st2 == 502 and
          b"hello" not in body, (st, st2, body))
    check("a mangled token is exactly an unknown one", visit(r, path[:-3] + "/") == unknown)
    st, pv = preview(r, sid, tok2, "k2")
    miss = preview(r, "no-such-sandbox", tok2, "k2")
    check("k2 cannot make a preview of k1's sandbox (a missing one's 404)", st == 404 and
          miss[0] == 404, (st, pv, miss))
    st, pv = preview(r, sid, tok2, "k1")
    check("k2's token naming k1's key is refused (401)", st == 401, (st, pv))
    st, _ = preview(r, sid, tok1, "k1", ttl=100000)
    check("a ttl over the cap is refused (400)", st == 400, st)

    # Frozen through the runner: revoked, exactly as unknown; resumed: still revoked.
    # (The server's terminal is a call in flight, which a pause waits for:
    # it goes first, and the preview then answers 502, not as unknown.)
    kill_server(r, term)
    check("with its server gone the preview is still valid (502)", visit(r, path)[0] == 502)
    st, body = rest_verb(r, sid, "pause", "freeze")
    check("the runner freezes the sandbox", st == 200, (st, body))
    check("after freeze the preview answers as an unknown one", visit(r, path) == unknown)
    rest_verb(r, sid, "resume")
    check("after resume the old preview stays revoked", visit(r, path) == unknown)
    # Revoked by the freeze itself, not only when used while frozen.
    path = fresh(r, sid, tok1)
    check("a preview of the sandbox is valid (502: no server)", visit(r, path)[0] == 502)
    rest_verb(r, sid, "pause", "freeze")
    rest_verb(r, sid, "resume")
    check("frozen and resumed without a use between: the preview is revoked",
          visit(r, path) == unknown)

    # Paused behind the runner's back (the engine itself): refused on use.
    path = fresh(r, sid, tok1)
    subprocess.run(["docker", "pause", sid], check=True, capture_output=True)
    check("paused by the engine directly: the preview is refused as unknown",
          visit(r, path) == unknown)
    subprocess.run(["docker", "unpause", sid], check=True, capture_output=True)
    check("unpaused: that preview stays revoked", visit(r, path) == unknown)

    # Stopped through the runner.
    path = fresh(r, sid, tok1)
    check("a preview of a sandbox with no server is valid (502)", visit(r, path)[0] == 502)
    st, body = rest_verb(r, sid, "pause", "stop")
    check("the runner stops the sandbox", st == 200, (st, body))
    check("after stop the preview answers as an unknown one", visit(r, path) == unknown)
    st, body = rest_verb(r, sid, "resume")
    check("the sandbox resumes", st == 200, (st, body))
    term = serve(k1, sid)
    tsb.wait_for(lambda: page(r, sid, tok1, "k1")[0] == 200, 60, 0.3)

    # Expiry.
    st, pv = preview(r, sid, tok1, "k1", ttl=1)
    p1 = pv.get("path", "/x/") if isinstance(pv, dict) else "/x/"
    check("an expiring preview is made", st == 201, (st, pv))
    check("it expires", tsb.wait_for(lambda: visit(r, p1) == unknown, 30, 0.3))

    # A snapshot (what a fork is made from) revokes the sandbox's previews;
    # the server's terminal goes first (a snapshot waits for calls in flight).
    path = fresh(r, sid, tok1)
    check("a new preview serves", visit(r, path)[0] == 200)
    kill_server(r, term)
    check("with its server gone that preview is still valid (502)", visit(r, path)[0] == 502)
    st, _, body = raw(r, "POST", "/v1/sandboxes/%s/snapshot?name=preview-snap-%d" %
                      (sid, os.getpid()), r.token)
    check("the runner snapshots the sandbox", st == 200, (st, body))
    check("after a snapshot the preview answers as an unknown one", visit(r, path) == unknown)
    raw(r, "DELETE", "/v1/snapshots/preview-snap-%d" % os.getpid(), r.token)

    # Removal.
    path = fresh(r, sid, tok1)
    check("a preview before removal is valid (502)", visit(r, path)[0] == 502)
    k1.delete_sandbox(sid, worker_key="k1")
    check("after removal the preview answers as an unknown one", visit(r, path) == unknown)


def suite_preview(tmp):
    r = tsb.runner(tmp, base=ts.sandbox_args(image=IMAGE))
    try:
        preview_checks(r)
    finally:
        rc = r.stop()
    log = r.read_log()
    check("the runner ends cleanly, no sanitizer report in its log", rc == 0 and
          "Sanitizer" not in log and "runtime error" not in log, (rc, log[-2000:]))


def main():
    ts.run_suites({"route": suite_route, "preview": suite_preview}, "route", "preview-ports")


if __name__ == "__main__":
    main()
