#!/usr/bin/env python3
"""`sandman sandbox port` against the real engine. Run by test_ports.sh,
which gives the image (sandman/general under the tests' tag) in
PORTS_IMAGE.

  cli   a per_run sandbox with network none (it has lo only, before and
        after): an HTTP server (python3 -m http.server) and a WebSocket echo
        server (ports_server.py, stdlib only) started in it are reached from
        this host through `sandman sandbox port`: a page, a 404, a 20 MB
        file by hash, eight downloads at once by hash, a client that does
        not read while another request is answered (backpressure stops its
        own connection only), 300 connections one after the other (more
        than the relay holds at once: each one's end frees its slot), WebSocket text and a 1 MiB binary message
        echoed; a port nothing listens on resets its connection and the
        forward goes on; SANDBOX by name; --listen on a non-loopback address
        is refused (2) and listens nowhere; interrupted it exits 0 and its
        port is closed; when the sandbox is removed under it, it exits 125.

  audit with a configuration that keeps an audit trail (audit.enabled,
        audit.file), every connection the forward accepts is a row:
        port.opened (via forward, dst_port, sandbox, run) for each served
        one, port.failed for one to a port nothing listens on.

Prints "ok - ..." / "not ok - ..." lines and "N passed, M failed".
"""
import base64
import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ports_server as ps  # noqa: E402
import test_server as ts  # noqa: E402

check = ts.check
GUARD = 120
# The tests' own build of sandman/general (its .sh wrapper sets it from
# scripts/test-images.sh), never a user's own tag of it.
IMAGE = os.environ.get("PORTS_IMAGE") or sys.exit(
    "PORTS_IMAGE is not set: run this through its .sh wrapper (scripts/test-images.sh)")

# The WebSocket echo server (ports_server.py, shared with test_ports_ws.py),
# sent into the sandbox; its framing serves this test's client too.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ports_server.py")) as f:
    WS_SERVER = f.read()


def sandman(*args, stdin=None):
    return subprocess.run([ts.SANDMAN] + list(args), input=stdin, capture_output=True, timeout=GUARD)


def background(*args):
    return subprocess.Popen([ts.SANDMAN] + list(args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def forward(*args):
    """`sandman sandbox port ARGS`: the process and the address it printed."""
    p = background("sandbox", "port", *args)
    r, _, _ = select.select([p.stdout], [], [], GUARD)
    line = p.stdout.readline().decode().strip() if r else ""
    return p, line


def get(addr, path, timeout=30):
    """(status, body) of GET http://addr/path; (None, error) when it fails."""
    try:
        with urllib.request.urlopen("http://%s%s" % (addr, path), timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, urllib.error.URLError) as e:
        return None, repr(e)


def until_served(addr):
    """Waits (bounded) until the server in the sandbox answers through addr."""
    deadline = time.time() + GUARD
    while time.time() < deadline:
        st, body = get(addr, "/index.html", 10)
        if st == 200:
            return st, body
        time.sleep(0.3)
    return get(addr, "/index.html", 10)


def sandbox_nets(run):
    p = sandman("exec", "--run-id", run, "--", "ls", "/sys/class/net")
    return p.stdout.split()


def ws_connect(addr):
    """A WebSocket to addr: (a ps.Conn on its socket, whether the upgrade was right)."""
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=30)
    key = base64.b64encode(os.urandom(16))
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + b"\r\n\r\n")
    head, _, rest = ps.read_head(s).partition(b"\r\n\r\n")
    want = base64.b64encode(hashlib.sha1(key + ps.GUID).digest())
    return ps.Conn(s, rest), head.startswith(b"HTTP/1.1 101") and want in head


def ws_send(r, op, data):
    r.c.sendall(ps.frame(op, data, os.urandom(4)))


def stop(p):
    """SIGINT, then the exit code (bounded)."""
    p.send_signal(signal.SIGINT)
    try:
        return p.wait(GUARD)
    except subprocess.TimeoutExpired:
        p.kill()
        return None


def port_closed(addr):
    host, port = addr.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        return False
    except OSError:
        return True


def http_checks(addr, big_hash):
    st, body = until_served(addr)
    check("port: the HTTP server in a network none sandbox answers through the forward",
          st == 200 and body == b"hello-port\n", (st, body))
    st, _ = get(addr, "/missing")
    check("port: its 404 comes back as it is", st == 404, st)
    got = [get(addr, "/index.html") for _ in range(300)]
    check("port: 300 connections one after the other, each ended and its slot freed",
          all(r == (200, b"hello-port\n") for r in got),
          sum(1 for r in got if r != (200, b"hello-port\n")))
    st, body = get(addr, "/big")
    check("port: a 20 MB file comes through whole (by hash)",
          st == 200 and hashlib.sha256(body).hexdigest() == big_hash, (st, len(body)))
    import concurrent.futures as cf
    with cf.ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda _: get(addr, "/big", 60), range(8)))
    check("port: eight downloads at once, each whole",
          all(st == 200 and hashlib.sha256(b).hexdigest() == big_hash for st, b in got),
          [(st, len(b)) for st, b in got])
    # A client that asks for the big file and never reads: its window fills
    # and its connection waits; the others go on.
    host, port = addr.rsplit(":", 1)
    idle = socket.create_connection((host, int(port)), timeout=30)
    idle.sendall(b"GET /big HTTP/1.0\r\n\r\n")
    st, body = get(addr, "/index.html")
    check("port: a client that does not read holds up no other connection",
          st == 200 and body == b"hello-port\n", (st, body))
    got = 0
    idle.settimeout(30)
    while True:
        d = idle.recv(1 << 20)
        if not d:
            break
        got += len(d)
    idle.close()
    check("port: and once it reads, it gets all of it", got > 20 * 1024 * 1024, got)


def ws_checks(addr):
    r, ok = ws_connect(addr)
    check("port: a WebSocket upgrade passes through the forward", ok)
    ws_send(r, 1, b"hello-ws")
    op, data = ps.read_frame(r)
    check("port: a WebSocket text message is echoed", op == 1 and data == b"hello-ws", (op, data))
    blob = os.urandom(1 << 20)
    ws_send(r, 2, blob)
    op, data = ps.read_frame(r)
    check("port: a 1 MiB binary message goes in and comes back whole", op == 2 and data == blob,
          (op, len(data)))
    ws_send(r, 8, b"")
    r.c.close()


def start_servers(run):
    p = sandman("exec", "-i", "--run-id", run, "--", "sh", "-c",
                "cat > /workspace/ws_echo.py; mkdir -p /workspace/www; "
                "echo hello-port > /workspace/www/index.html; "
                "head -c 20971520 /dev/urandom > /workspace/www/big; "
                "sha256sum /workspace/www/big", stdin=WS_SERVER.encode())
    if not check("the servers' files are in the sandbox", p.returncode == 0, p):
        return None, []
    big_hash = p.stdout.split()[0].decode()
    procs = [background("exec", "--run-id", run, "--", "python3", "-m", "http.server", "8000",
                        "--bind", "127.0.0.1", "--directory", "/workspace/www"),
             background("exec", "--run-id", run, "--", "python3", "/workspace/ws_echo.py", "8001")]
    return big_hash, procs


def refusals(run, name):
    p = sandman("sandbox", "port", "--run-id", run, "--listen", "0.0.0.0:0", "8000")
    check("port: --listen on a non-loopback address is refused (2)",
          p.returncode == 2 and b"loopback" in p.stderr, p)
    p = sandman("sandbox", "port", "--run-id", run, "--listen", "[::]:0", "8000")
    check("port: --listen on [::] is refused (2)", p.returncode == 2, p)
    p = sandman("sandbox", "port", "--run-id", run, "70000")
    check("port: a port past 65535 is refused (2)", p.returncode == 2, p)
    p = sandman("sandbox", "port", "--run-id", "no-such-run-%d" % os.getpid(), "8000")
    check("port: a missing sandbox is 125", p.returncode == 125, p)
    fwd, addr = forward(name, "8009")
    host, port = addr.rsplit(":", 1) if addr else ("127.0.0.1", "1")
    data = b"x"
    try:
        c = socket.create_connection((host, int(port)), timeout=30)
        c.settimeout(30)
        c.sendall(b"GET / HTTP/1.0\r\n\r\n")
        data = c.recv(100)
    except OSError:
        data = b""
    check("port: a port nothing listens on ends its connection, nothing comes back", data == b"",
          data)
    check("port: the forward goes on after it", fwd.poll() is None)
    check("port: interrupted, it exits 0", stop(fwd) == 0)
    check("port: and its port is closed then", addr != "" and port_closed(addr), addr)


def suite_cli(tmp):
    run = "ports-%d" % os.getpid()
    p = sandman("run", "--mode", "per_run", "--run-id", run, "--network", "none", "--image",
                IMAGE, "--", "true")
    if not check("a per_run sandbox with network none", p.returncode == 0, p):
        return
    check("the sandbox has no network but lo", sandbox_nets(run) == [b"lo"], sandbox_nets(run))
    big_hash, servers = start_servers(run)
    try:
        if big_hash is None:
            return
        fwd, addr = forward("--run-id", run, "8000")
        check("port: prints the loopback address it listens on", addr.startswith("127.0.0.1:"),
              addr)
        http_checks(addr, big_hash)
        wfwd, waddr = forward("--run-id", run, "--listen", "127.0.0.1:0", "8001")
        ws_checks(waddr)
        check("the sandbox still has no network but lo", sandbox_nets(run) == [b"lo"],
              sandbox_nets(run))
        check("port: both forwards exit 0 when interrupted", stop(fwd) == 0 and stop(wfwd) == 0)
        listing = json.loads(sandman("sandbox", "list", "--json").stdout or b"[]")
        names = [s["name"] for s in listing if s.get("run_id") == run]
        refusals(run, names[0] if names else run)
        fwd, addr = forward(names[0] if names else run, "8000")
        st, _ = until_served(addr)
        check("port SANDBOX: by its name", st == 200, st)
        sandman("sandbox", "rm", "--force", names[0] if names else run)
        try:
            code = fwd.wait(GUARD)
        except subprocess.TimeoutExpired:
            fwd.kill()
            code = None
        check("port: the sandbox removed under it, it exits 125", code == 125,
              (code, fwd.stderr.read()[-400:] if code is not None else ""))
    finally:
        for s in servers:
            s.kill()
            s.wait()


def audit_rows(path, name):
    try:
        with open(path) as f:
            rows = [json.loads(x) for x in f if x.strip()]
    except OSError:
        return []
    return [x for x in rows if json.dumps(x).find('"%s"' % name) >= 0]


def suite_audit(tmp):
    trail = os.path.join(tmp, "audit.jsonl")
    cfg = os.path.join(tmp, "config.yaml")
    with open(cfg, "w") as f:
        f.write("audit:\n  enabled: true\n  file: %s\n" % trail)
    os.environ["SANDMAN_CONFIG"] = cfg  # every command of the suite alike
    run = "ports-audit-%d" % os.getpid()
    p = sandman("run", "--mode", "per_run", "--run-id", run, "--network", "none", "--image",
                IMAGE, "--", "sh", "-c",
                "mkdir -p /workspace/www && echo hi > /workspace/www/index.html")
    if not check("a per_run sandbox with network none", p.returncode == 0, p):
        return
    server = background("exec", "--run-id", run, "--", "python3", "-m", "http.server", "8000",
                        "--bind", "127.0.0.1", "--directory", "/workspace/www")
    try:
        before = len(audit_rows(trail, "port.opened"))
        fwd, addr = forward("--run-id", run, "8000")
        st, _ = until_served(addr)
        check("audit: the forward serves", st == 200, st)
        for _ in range(3):
            get(addr, "/index.html")
        opened = audit_rows(trail, "port.opened")[before:]
        check("audit: every connection accepted is a port.opened row (at least the 4 served)",
              len(opened) >= 4, len(opened))
        row = json.dumps(opened[-1]) if opened else ""
        check("audit: the row names the forward, the port and the run",
              '"forward"' in row and "8000" in row and run in row, row)
        stop(fwd)
        fwd, addr = forward("--run-id", run, "8009")
        host, port = addr.rsplit(":", 1) if addr else ("127.0.0.1", "1")
        try:
            c = socket.create_connection((host, int(port)), timeout=30)
            c.settimeout(30)
            c.sendall(b"GET / HTTP/1.0\r\n\r\n")
            c.recv(100)
            c.close()
        except OSError:
            pass
        ok = ts_wait(lambda: any("8009" in json.dumps(x) for x in audit_rows(trail, "port.failed")))
        check("audit: a connection to a port nothing listens on is a port.failed row", ok,
              audit_rows(trail, "port.failed"))
        stop(fwd)
    finally:
        server.kill()
        server.wait()
        sandman("sandbox", "rm", "--force", "--run-id", run)


def ts_wait(cond, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return cond()


if __name__ == "__main__":
    ts.run_suites({"cli": suite_cli, "audit": suite_audit}, "cli", "smports-")
