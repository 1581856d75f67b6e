#!/usr/bin/env python3
"""The runner (`sandman worker start`) tried as an attacker would, against the
real engine (issue 13, items 1, 6 and 8). Run by test_runner_security*.sh;
one suite per ctest entry:

  owner  a worker token opens only its own worker's things: the cross-worker
         chain (K1 plants a snooper in K2's run, K2 makes a leased call, K1
         reads the loot), two workers with one run id, a keyed sandbox that
         carries another worker's label, workspaces, leases and handles of
         another worker; the environment a runner call gets (globs, "HOME",
         names with NUL or "=", repeated keys)
  slow   slow and abusive clients: 300 connections sending a byte every few
         seconds while /healthz and the routes still answer; an over-cap
         chunked body; a request cannot learn whether a host path exists

Prints "ok - ..." / "not ok - ..." lines and "N passed, M failed"; exits 0
only when everything passed, 77 when no engine answers outside CI.
"""
import hashlib
import json
import os
import secrets
import shutil
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_server as ts  # noqa: E402
from test_server import Runner, check, docker, sandbox_args  # noqa: E402
from sandman_client import Client, SandmanError, derive_worker_token  # noqa: E402


RUNNERS = []


def start_runner(tmp, args):
    r = Runner(tmp, args)
    RUNNERS.append(r)
    return r


def error_of(fn):
    """(status, body) of a call expected to fail; (200, answer) otherwise."""
    try:
        return 200, fn()
    except SandmanError as e:
        return e.status, e.body


def raw_request(sock_path, data, timeout=60):
    """Sends exact bytes, returns (status, body bytes) of the answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock_path)
    s.sendall(data)
    buf = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        buf += chunk
    s.close()
    head, _, body = buf.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        status = 0
    return status, body


def post(path, token, body):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return (("POST %s HTTP/1.1\r\nHost: sandman\r\nAuthorization: Bearer %s\r\n"
             "Content-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n")
            % (path, token, len(data))).encode() + data


# ---------------------------------------------------------------- owner

# Detached (its own session, no marker): it outlives the call that planted it.
SNOOPER = ("setsid env -i sh -c 'while :; do for f in /proc/[0-9]*/environ; do "
           "tr \"\\000\" \"\\n\" < $f 2>/dev/null | grep GH_TOKEN >> /tmp/loot; done; "
           "sleep 0.1; done' </dev/null >/dev/null 2>&1 & echo planted")


def suite_owner(tmp):
    value = "ghp_owner_" + secrets.token_hex(16)
    creds = os.path.join(tmp, "creds.json")
    with open(creds, "w") as f:
        json.dump({"github": {"GH_TOKEN": value}, "other": {"OTHER_KEY": "other-" + value}}, f)
    os.chmod(creds, 0o600)
    cfg = os.path.join(tmp, "sandman.yaml")
    with open(cfg, "w") as f:
        f.write("version: 1\nworkers:\n  k2:\n    services: [github]\n")
    ws = os.path.join(tmp, "ws")
    for d in ("k1/proj", "k2/proj", "shared"):
        os.makedirs(os.path.join(ws, d))
    with open(os.path.join(ws, "k2", "proj", "secret.txt"), "w") as f:
        f.write("k2's work\n")
    # The runner's own environment holds the engine's address and the docker
    # CLI's variables; globs ask for them (item 6).
    os.environ["DOCKER_HOST"] = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    os.environ["DOCKER_CONFIG"] = "/tmp/planted-docker-config"
    os.environ["SANDMAN_PLANTED"] = "planted"
    os.environ["RUNNER_OK"] = "fine"
    os.environ["SANDMAN_CONFIG"] = cfg
    r = start_runner(tmp, sandbox_args() + [
        "--credentials-file", creds, "--workspaces-root", ws,
        "--env-passthrough", "DOCKER*", "--env-passthrough", "SANDMAN_*",
        "--env-passthrough", "HOME", "--env-passthrough", "XDG_*",
        "--env-passthrough", "RUNNER_*"])
    del os.environ["SANDMAN_CONFIG"]
    c = r.client
    k1 = Client("unix:" + r.sock, derive_worker_token(r.token, "k1"), timeout=300)
    k2 = Client("unix:" + r.sock, derive_worker_token(r.token, "k2"), timeout=300)
    k1_answers = []

    # --- the cross-worker chain. K2's run exists first.
    a2 = k2.execute(command="echo k2-run", run_id="run-k2", worker_key="k2")
    s2 = a2["sandbox_id"]
    # Step 1: K1 plants a snooper "in K2's run", naming K2's run id with its own key.
    a1 = k1.execute(command=SNOOPER, run_id="run-k2", worker_key="k1")
    k1_answers.append(a1)
    check("chain step 1: K1's call naming K2's run id never runs in K2's sandbox",
          a1["ok"] and a1["sandbox_id"] and a1["sandbox_id"] != s2, (a1, s2))
    top = docker("exec", s2, "ps", "-o", "args")
    check("chain step 1: no snooper in K2's sandbox", top.returncode == 0 and
          "/proc" not in top.stdout and "environ" not in top.stdout, top.stdout + top.stderr)
    mine = docker("exec", a1["sandbox_id"], "ps", "-o", "args").stdout
    print("# the snooper is alive in K1's own sandbox: %s" % ("environ" in mine), flush=True)
    labels = json.loads(docker("inspect", "--format", "{{json .Config.Labels}}", s2).stdout)
    check("K2's sandbox carries io.sandman.principal=worker:k2",
          labels.get("io.sandman.principal") == "worker:k2", labels)
    # K1 cannot name K2 either: its token opens worker k2 nothing.
    st, body = error_of(lambda: k1.execute(command=SNOOPER, run_id="run-k2", worker_key="k2"))
    check("chain step 1: K1 naming worker_key k2 -> 401", st == 401, (st, body))
    # Step 2: K2 makes a leased call in its run.
    lease = k2.create_lease(tool="shell", services=["github"], worker_key="k2")
    want = hashlib.sha256(value.encode()).hexdigest()
    a2 = k2.execute(tool="shell", command='printf %s "$GH_TOKEN" | sha256sum; sleep 1',
                    run_id="run-k2", worker_key="k2", lease_id=lease["lease_id"])
    check("chain step 2: K2's leased call ran in its own sandbox with the value",
          a2["ok"] and a2["sandbox_id"] == s2 and want in a2["stdout"], a2)
    # Step 3: K1 reads the loot.
    a1 = k1.execute(command="cat /tmp/loot 2>/dev/null; echo end", run_id="run-k2",
                    worker_key="k1")
    k1_answers.append(a1)
    check("chain step 3: K1's loot holds nothing of K2's call",
          a1["stdout"] == "end\n" and value not in json.dumps(a1), a1)

    # --- two workers, one run id: two sandboxes, and each is its own again.
    b1 = k1.execute(command="echo one > /tmp/mark; echo ok", run_id="same", worker_key="k1")
    b2 = k2.execute(command="cat /tmp/mark 2>/dev/null; echo ok", run_id="same",
                    worker_key="k2")
    b1again = k1.execute(command="cat /tmp/mark", run_id="same", worker_key="k1")
    k1_answers += [b1, b1again]
    check("two workers naming one run id get two sandboxes",
          b1["sandbox_id"] != b2["sandbox_id"] and b2["stdout"] == "ok\n", (b1, b2))
    check("a worker finds its own run again", b1again["sandbox_id"] == b1["sandbox_id"] and
          b1again["stdout"] == "one\n", b1again)
    bc = c.execute(command="cat /tmp/mark 2>/dev/null; echo ok", run_id="same")
    check("the control token's run of that id is a third sandbox",
          bc["sandbox_id"] not in (b1["sandbox_id"], b2["sandbox_id"]), bc)
    bc2 = c.execute(command="cat /tmp/mark", run_id="same", worker_key="k1")
    check("the control token naming worker_key k1 reaches k1's sandbox",
          bc2["sandbox_id"] == b1["sandbox_id"] and bc2["stdout"] == "one\n", bc2)

    # --- a keyed sandbox that carries another worker's label (a key collision,
    # or a container made by hand) is refused, never used.
    d1 = k1.execute(command="echo mine", run_id="planted", worker_key="k1")
    k1_answers.append(d1)
    name = docker("inspect", "--format", "{{.Name}}", d1["sandbox_id"]).stdout.strip().lstrip("/")
    docker("rm", "-f", d1["sandbox_id"])
    made = docker("run", "-d", "--name", name, "--network", "none",
                  "--label", "io.sandman.managed=true",
                  "--label", "io.sandman.instance=" + ts.INSTANCE,
                  "--label", "io.sandman.principal=worker:k2",
                  "sandman/minimal:latest", "sleep", "600")
    st, body = error_of(lambda: k1.execute(command="echo hijacked", run_id="planted",
                                           worker_key="k1"))
    check("a keyed sandbox labelled for another worker -> 403 policy",
          made.returncode == 0 and st == 403 and body.get("failure_kind") == "policy" and
          "hijacked" not in json.dumps(body), (made.stderr, st, body))
    check("... and it was neither used nor replaced",
          docker("inspect", "--format", "{{.Id}}", name).stdout.strip() == made.stdout.strip())

    # --- workspaces: a worker's own directory only; one answer for the rest.
    w = k1.execute(command="ls; echo k1 > mine.txt", run_id="ws", worker_key="k1",
                   workspace="k1/proj")
    check("a worker uses its own workspace", w["ok"] and
          open(os.path.join(ws, "k1", "proj", "mine.txt")).read() == "k1\n", w)
    answers = {}
    for path in ("k2/proj", "k2/missing", "k1/missing", "shared", "../../etc", "/etc",
                 "k1/../k2/proj"):
        st, body = error_of(lambda: k1.execute(command="cat secret.txt", run_id="ws",
                                               worker_key="k1", workspace=path))
        answers[path] = (st, body.get("failure_kind") if isinstance(body, dict) else None,
                         body.get("error", "").replace(path, "P") if isinstance(body, dict) else body)
    check("another worker's workspace, a missing one and one outside: one answer (403 policy)",
          len(set(answers.values())) == 1 and next(iter(answers.values()))[:2] == (403, "policy"),
          answers)
    st1, b1_ = error_of(lambda: c.execute(argv=["true"], workspace="../../etc"))
    st2, b2_ = error_of(lambda: c.execute(argv=["true"], workspace="../../no-such-dir-here"))
    check("control token: ../../etc and a missing path give the same answer",
          st1 == st2 == 403 and b1_["error"].replace("etc", "X") ==
          b2_["error"].replace("no-such-dir-here", "X"), (b1_, b2_))
    check("k2's file never reached k1",
          all("k2's work" not in json.dumps(a) for a in k1_answers))

    # --- leases: K1 cannot lease, nor use K2's lease; one answer as for a missing one.
    st_a, body_a = error_of(lambda: k1.create_lease(tool="shell", services=["github"],
                                                    worker_key="k1"))
    st_b, body_b = error_of(lambda: k1.create_lease(tool="shell", services=["nosuch"],
                                                    worker_key="k1"))
    check("K1 may lease no service: 403 for one that exists and one that does not",
          st_a == st_b == 403 and body_a["error"].replace("github", "S") ==
          body_b["error"].replace("nosuch", "S"), (body_a, body_b))
    l2 = k2.create_lease(tool="shell", services=["github"], worker_key="k2")
    st_a, body_a = error_of(lambda: k1.execute(tool="shell", command="echo $GH_TOKEN",
                                               run_id="run-k1", worker_key="k1",
                                               lease_id=l2["lease_id"]))
    st_b, body_b = error_of(lambda: k1.execute(tool="shell", command="echo $GH_TOKEN",
                                               run_id="run-k1", worker_key="k1",
                                               lease_id=secrets.token_hex(16)))
    check("K2's lease used by K1: the answer of a missing lease",
          st_a == st_b == 403 and body_a == body_b and value not in json.dumps(body_a),
          (body_a, body_b))
    ok = k2.execute(tool="shell", command='printf %s "$GH_TOKEN" | sha256sum', run_id="run-k2",
                    worker_key="k2", lease_id=l2["lease_id"])
    check("... and K1's attempt did not use K2's lease up", want in ok["stdout"], ok)

    # --- handles: another worker's handle answers as a missing one.
    bg = k2.execute(command="echo started; sleep 60", run_id="run-k2", worker_key="k2",
                    timeout_s=1, background_on_timeout=True)
    hid = bg.get("handle")
    st_a, body_a = error_of(lambda: k1.handle(hid))
    st_b, body_b = error_of(lambda: k1.handle(secrets.token_hex(16)))
    st_c, body_c = error_of(lambda: k1.kill(hid))
    check("K2's handle read or killed by K1: the answer of a missing handle",
          hid and st_a == st_b == st_c == 401 and body_a == body_b == body_c, (body_a, body_b))
    h = k2.handle(hid)
    check("... and K2's call still runs", h["state"] == "running", h)
    k2.kill(hid)

    # --- the environment of a runner call (item 6).
    e = c.execute(command="env", run_id="env")
    leaked = [l for l in e["stdout"].splitlines()
              if (l.startswith("DOCKER_") or l.startswith("SANDMAN_")) and
              not l.startswith("SANDMAN_CALL=")]
    check("runner globs 'DOCKER*' and 'SANDMAN_*' pass nothing of the kind", not leaked and
          "RUNNER_OK=fine" in e["stdout"], leaked or e["stdout"])
    check("runner globs 'HOME' and 'XDG_*' move neither",
          "HOME=/workspace\n" in e["stdout"] and "XDG_CONFIG_HOME=/workspace/.config" in e["stdout"],
          e["stdout"])
    st, body = error_of(lambda: c.execute(command="echo $HOME", run_id="env",
                                          env={"HOME": "/etc"}))
    check('"env": {"HOME": "/etc"} -> 400, the home contract holds', st == 400, (st, body))
    st, body = error_of(lambda: c.execute(command="env", run_id="env",
                                          env={"DOCKER_HOST": "tcp://10.0.0.1:2375"}))
    check('"env": {"DOCKER_HOST": ...} -> 400', st == 400, (st, body))
    for desc, raw in (
            ("an env name holding NUL", b'{"command":"env","env":{"A\\u0000B":"1"}}'),
            ("an env name holding =", b'{"command":"env","env":{"A=B":"1"}}'),
            ("a repeated key", b'{"command":"env","command":"id"}'),
            ("a repeated env key", b'{"command":"env","env":{"A":"1","\\u0041":"2"}}')):
        st, body = raw_request(r.sock, post("/v1/execute", r.token, raw))
        check("%s -> 400" % desc, st == 400 and b'"failure_kind":"policy"' in body, (st, body))
    st, body = raw_request(r.sock, post("/v1/execute", derive_worker_token(r.token, "k1"),
                                        b'{"worker_key":"k1","command":"a","command":"b"}'))
    check("a repeated key with a worker token -> 400 (after its token matched)", st == 400,
          (st, body))

    code = r.stop()
    check("runner exits 0", code == 0, code)
    log = r.read_log()
    check("no leased value in the runner's log", value not in log)


# ---------------------------------------------------------------- slow

class Trickler:
    """n connections that each send `prefix` at once, then one more byte of
    `data` every `period` seconds, and come back when the runner closes them
    (a slowloris)."""

    def __init__(self, sock_path, n, prefix, data, period):
        self.sock_path, self.n, self.period = sock_path, n, period
        self.prefix, self.data = prefix, data
        self.conns = []
        self.opened = self.closed_by_runner = self.refused = 0
        self.stop = False
        self.thread = None

    def open_one(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(self.sock_path)
        except BlockingIOError:
            pass
        except OSError:
            self.refused += 1
            s.close()
            return None
        self.opened += 1
        if self.prefix:
            try:
                s.setblocking(True)
                s.sendall(self.prefix)
                s.setblocking(False)
            except OSError:
                s.close()
                return None
        return [s, 0]

    def run(self):
        while len(self.conns) < self.n:
            c = self.open_one()
            if c:
                self.conns.append(c)
        while not self.stop:
            for i, c in enumerate(self.conns):
                if c is None:
                    self.conns[i] = self.open_one()
                    continue
                s, sent = c
                try:
                    if sent < len(self.data):
                        s.send(self.data[sent:sent + 1])
                        c[1] += 1
                    if s.recv(4096, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b"":
                        raise ConnectionResetError()
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    # The runner closed it (408 or 503 first): come back.
                    self.closed_by_runner += 1
                    s.close()
                    self.conns[i] = self.open_one()
            time.sleep(self.period)

    def start(self):
        import threading
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 60
        while len([c for c in self.conns if c]) < self.n and time.time() < deadline:
            time.sleep(0.05)

    def finish(self):
        self.stop = True
        self.thread.join(30)
        for c in self.conns:
            if c:
                c[0].close()


def timed(fn):
    t0 = time.monotonic()
    try:
        out = fn()
    except (SandmanError, OSError) as e:
        out = e
    return out, (time.monotonic() - t0) * 1000.0


def suite_slow(tmp):
    ws = os.path.join(tmp, "ws")
    os.makedirs(os.path.join(ws, "real"))
    r = start_runner(tmp, sandbox_args(mode="per_run") + ["--workspaces-root", ws,
                                                  "--max-body", "64k"])
    c = r.client
    k1 = Client("unix:" + r.sock, derive_worker_token(r.token, "k1"), timeout=60)
    quick = Client("unix:" + r.sock, r.token, timeout=10)  # a hang fails, slowness does not
    c.execute(command="true", run_id="slow")  # the sandbox exists before the attack

    def probe(label, rounds):
        lat, bad = [], []
        for _ in range(rounds):
            h, ms = timed(quick.healthz)
            lat.append(ms)
            if not (isinstance(h, dict) and h.get("status") == "ok"):
                bad.append(repr(h))
            time.sleep(0.5)
        lat.sort()
        print("# %s: /healthz latency ms: min %.1f, median %.1f, max %.1f (%d probes)" %
              (label, lat[0], lat[len(lat) // 2], lat[-1], len(lat)), flush=True)
        return lat, bad

    # 1. 300 connections trickling their request heads, one byte every 2 s.
    head = b"GET /healthz HTTP/1.1\r\nHost: sandman\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"
    t = Trickler(r.sock, 300, b"", head, 2.0)
    t.start()
    lat, bad = probe("300 slow heads", 24)  # over the 10 s head deadline
    check("300 slow request heads: /healthz answers every time", not bad and len(lat) == 24, bad)
    res, ms = timed(lambda: quick.execute(command="echo through", run_id="slow"))
    check("300 slow request heads: a call with the control token goes through",
          isinstance(res, dict) and res.get("stdout") == "through\n", res)
    print("# 300 slow heads: the call took %.1f ms" % ms, flush=True)
    res, _ = timed(lambda: k1.execute(command="echo worker", run_id="slow", worker_key="k1"))
    check("300 slow request heads: a worker token's call goes through",
          isinstance(res, dict) and res.get("stdout") == "worker\n", res)
    check("300 slow request heads: the runner closed the slow ones (head deadline)",
          t.closed_by_runner >= 300, (t.opened, t.closed_by_runner))
    m = quick.metrics()
    check("the runner counts them", 'sandman_http_connections_dropped_total{reason="head_timeout"}'
          in m and "sandman_http_connections{state=\"waiting\"}" in m, m[-800:])
    t.finish()

    # 2. 300 connections with complete heads trickling bodies (no valid
    # token): they may hold only their share of the runner's connections.
    body_head = (b"POST /v1/execute HTTP/1.1\r\nHost: sandman\r\nAuthorization: Bearer " +
                 b"0" * 64 + b"\r\nContent-Type: application/json\r\nContent-Length: 60000"
                 b"\r\n\r\n")
    t = Trickler(r.sock, 300, body_head, b"{" * 2000, 2.0)
    t.start()
    time.sleep(3)  # the heads are in; the bodies trickle
    lat, bad = probe("300 slow bodies", 10)
    check("300 slow bodies: /healthz answers every time", not bad and len(lat) == 10, bad)
    res, _ = timed(lambda: quick.execute(command="echo through", run_id="slow"))
    check("300 slow bodies: a call with the control token goes through",
          isinstance(res, dict) and res.get("stdout") == "through\n", res)
    m = quick.metrics()
    dropped = [l for l in m.splitlines() if l.startswith("sandman_http_connections_dropped_total"
                                                         '{reason="overloaded"}')]
    check("300 slow bodies: past their share they are refused (503), not queued",
          dropped and int(dropped[0].split()[-1]) > 0, m[-800:])
    t.finish()

    # 3. A chunked body over the cap gets 413, not a reset, with and without
    # "Expect: 100-continue".
    for expect in (True, False):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(r.sock)
        s.sendall(("POST /v1/execute HTTP/1.1\r\nHost: sandman\r\nAuthorization: Bearer %s\r\n"
                   "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n%s\r\n"
                   % (r.token, "Expect: 100-continue\r\n" if expect else "")).encode())
        got = b""
        if expect:
            got = s.recv(4096)
        chunk = b"a" * 16384
        try:
            for _ in range(20):  # 320 KiB, five times the cap
                s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            s.sendall(b"0\r\n\r\n")
            while True:
                part = s.recv(65536)
                if not part:
                    break
                got += part
            outcome = got
        except OSError as e:
            outcome = repr(e).encode() + b" after " + got[:200]
        s.close()
        final = outcome.split(b"HTTP/1.1 ")[-1]
        check("an over-cap chunked body%s -> 413, no reset" %
              (" with Expect: 100-continue" if expect else ""),
              final.startswith(b"413") and b"request body larger than" in final, outcome[:300])

    # 4. A request head past 32 KiB: 431, and the runner stays up.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(r.sock)
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nX-Big: " + b"b" * 40000 + b"\r\n\r\n")
        got = s.recv(4096)
    except OSError as e:
        got = repr(e).encode()
    s.close()
    check("a 40 KiB request head -> 431", got.startswith(b"HTTP/1.1 431"), got[:200])
    check("the runner still answers", quick.healthz()["status"] == "ok")
    code = r.stop()
    check("runner exits 0", code == 0, (code, r.read_log()[-1500:]))


# ---------------------------------------------------------------- main

def main():
    suite = sys.argv[1] if len(sys.argv) > 1 else "owner"
    ts.require_engine()
    tmp = tempfile.mkdtemp(prefix="smsec-", dir="/tmp")
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(secrets.token_hex(24) + "\n")
    os.chmod(os.path.join(tmp, "token"), 0o600)
    try:
        {"owner": suite_owner, "slow": suite_slow}[suite](tmp)
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        check("suite %s ran to the end" % suite, False, repr(e))
    finally:
        for r in RUNNERS:  # a suite that failed half-way left its runner up
            r.stop(timeout=60)
        ts.cleanup_instance()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (ts.PASSED, ts.FAILED))
    sys.exit(0 if ts.FAILED == 0 else 1)


if __name__ == "__main__":
    main()
