#!/usr/bin/env python3
"""The runner's terminals against the real engine, with the Python client
(clients/python). Run by test_terminals*.sh; one suite per ctest entry:

  core    a shell on a terminal in a network-none sandbox: `stty size` shows
          the size given, then the new size after a resize (over the
          WebSocket and over HTTP); detach, attach again: the screen shows
          what was there; the screen as text; list, state, kill; a worker
          token reaches its own terminals only (another's answers exactly as
          a missing one, on every route and the attach); a lease or a
          workspace is refused; the audit trail has the create and the
          attach; a terminal's processes get no host-tool route identity,
          also while a call with the route runs beside them
  limits  the grace time ends a terminal nobody attached to (its processes
          killed in the sandbox); terminals per sandbox, per runner; the
          scrollback's cap
  python  python3 in sandman/general (built under this test's tag) keeps a
          variable across two attachments

Prints "ok - ..." / "not ok - ..." lines and "N passed, M failed".
"""
import json
import os
import secrets
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402
from sandman_client import Client, SandmanError, derive_worker_token  # noqa: E402

check = ts.check
GUARD = 120  # seconds: every wait below is a bounded poll for a condition


def runner_args(*extra, image="sandman/minimal:latest"):
    return ["--pool", "it-term", "--sandbox-mode", "per_run", "--sandbox-backend", "docker",
            "--sandbox-image", image, "--sandbox-network", "none", "--sandbox-cpu", "1",
            "--sandbox-mem", "256m", "--sandbox-pids", "128", "--sandbox-disk", "64m",
            "--project-environment", "development"] + list(extra)


class ConfiguredRunner(ts.Runner):
    """A runner started with --config FILE (test_server.Runner has none)."""

    def __init__(self, tmp, args, config):
        real = ts.SANDMAN
        wrapper = os.path.join(tmp, "sandman-with-config")
        with open(wrapper, "w") as f:
            f.write('#!/bin/sh\nexec "%s" --config "%s" "$@"\n' % (real, config))
        os.chmod(wrapper, 0o755)
        ts.SANDMAN = wrapper
        try:
            super().__init__(tmp, args, name="configured")
        finally:
            ts.SANDMAN = real


def error_of(fn):
    """(status, body) of a SandmanError fn raises, (None, None) when none."""
    try:
        fn()
    except SandmanError as e:
        return e.status, e.body
    return None, None


def read_screen_until(c, tid, text, timeout=GUARD):
    """The screen's text once it holds text (bounded poll), else the last one."""
    deadline = time.time() + timeout
    s = ""
    while time.time() < deadline:
        s = c.terminals.screen(tid, wait_ms=300, quiet_ms=50)["text"]
        if text in s:
            return s
    return s


def next_event(ws, kind, timeout=GUARD):
    """The next event of that kind (output before it is passed over)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ev = ws.recv(max(0.1, deadline - time.time()))
        if ev is None or ev[0] == kind:
            return ev
    return None


def typed(ws, keys, until, timeout=GUARD):
    ws.send(keys)
    return ws.read_until(until, timeout).decode("utf-8", "replace")


# ---------------------------------------------------------------- core

def core_size_and_resize(c):
    t = c.terminals.create(run_id="term-core", rows=30, cols=100)
    tid = t["id"]
    check("create: 201 with the terminal's id and state running",
          len(tid) == 32 and t["state"] == "running" and t["rows"] == 30, t)
    check("create: the terminal runs in the run's sandbox", t["sandbox_id"] and t["run_id"] == "term-core", t)
    with c.terminals.attach(tid) as ws:
        hello = ws.recv(GUARD)
        check("attach: the first message says attached, with the size",
              hello and hello[0] == "attached" and hello[1]["rows"] == 30, hello)
        out = typed(ws, "stty size; echo mark-$((6*7))\r", "mark-42")
        check("stty size shows the size given (30 100)", "30 100" in out, out)
        ws.resize(40, 120)
        ev = next_event(ws, "resize")
        check("resize over the WebSocket: told back to the clients", ev and ev[0] == "resize", ev)
        out = typed(ws, "stty size; echo mark-$((6*8))\r", "mark-48")
        check("stty size shows the new size after a resize (40 120)", "40 120" in out, out)
        out = typed(ws, "tty; cat /sys/class/net/*/operstate 2>/dev/null | wc -l; id -u\r", "\n1000")
        check("the terminal is a pseudo-terminal in the sandbox, as the sandbox's user",
              "/dev/pts/" in out and "1000" in out, out)
    r = c.terminals.resize(tid, 20, 60)
    check("resize over HTTP: the state has the new size", r["rows"] == 20 and r["cols"] == 60, r)
    c.terminals.send(tid, "stty size; echo mark-$((7*7))\r")
    s = read_screen_until(c, tid, "mark-49")
    check("input over HTTP, and stty size shows the HTTP resize (20 60)", "20 60" in s, s)
    return tid


def core_detach_attach(c, tid):
    with c.terminals.attach(tid) as ws:
        ws.recv(GUARD)
        typed(ws, "echo before-$((1+1))-detach\r", "before-2-detach")
    # Detached: it runs on, and what it prints is on its screen.
    c.terminals.send(tid, "echo while-$((2+2))-detached\r")
    read_screen_until(c, tid, "while-4-detached")
    with c.terminals.attach(tid) as ws:
        hello = ws.recv(GUARD)
        redraw = ws.recv(GUARD)
        text = redraw[1].decode("utf-8", "replace") if redraw and redraw[0] == "output" else ""
        check("attach again: attached, then the screen as it is",
              hello[0] == "attached" and "before-2-detach" in text and "while-4-detached" in text,
              (hello, text[-400:]))
        out = typed(ws, "echo after-$((3+3))\r", "after-6")
        check("attach again: the shell goes on (same process, its history)", "after-6" in out, out)
    scr = c.terminals.screen(tid)
    check("screen: text, lines and cursor as a model reads them",
          "after-6" in scr["text"] and isinstance(scr["lines"], list) and
          set(scr["cursor"]) >= {"row", "col", "visible"} and scr["state"] == "running", scr)
    status, raw = c_raw(c, "GET", "/v1/terminals/%s/screen?format=text" % tid)
    check("screen as text/plain", status == 200 and b"after-6" in raw, (status, raw[-200:]))


def c_raw(c, method, path, body=None, token=None):
    conn = c._connection()
    conn.connect()
    h = {"Authorization": "Bearer " + (token or c.token)}
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def core_owners(r, c):
    ka, kb = "term-wa", "term-wb"
    a = Client("unix:" + r.sock, derive_worker_token(r.token, ka), timeout=300)
    b = Client("unix:" + r.sock, derive_worker_token(r.token, kb), timeout=300)
    t = a.terminals.create(worker_key=ka)
    tid = t["id"]
    check("a worker makes a terminal in its per_worker sandbox",
          t["mode"] == "per_worker" and t["worker_key"] == ka, t)
    missing = secrets.token_hex(16)
    routes = [("GET", "/v1/terminals/%s", None), ("GET", "/v1/terminals/%s/screen", None),
              ("POST", "/v1/terminals/%s/input", b"echo x\r"),
              ("POST", "/v1/terminals/%s/resize", b'{"rows":5,"cols":5}'),
              ("DELETE", "/v1/terminals/%s", None)]
    for method, path, body in routes:
        theirs = c_raw(b, method, path % tid, body)
        none = c_raw(b, method, path % missing, body)
        check("another worker's terminal answers exactly as a missing one: %s %s" %
              (method, path.replace("%s", "ID")),
              theirs == none and theirs[0] == 404, (theirs, none))
    st_theirs, body_theirs = error_of(lambda: b.terminals.attach(tid))
    st_none, body_none = error_of(lambda: b.terminals.attach(missing))
    check("another worker's attach answers exactly as a missing one (404)",
          st_theirs == st_none == 404 and body_theirs == body_none, (st_theirs, body_theirs, body_none))
    check("another worker's list does not show it",
          all(x["id"] != tid for x in b.terminals.list(worker_key=kb)), b.terminals.list(worker_key=kb))
    st, _ = error_of(lambda: b.terminals.list(worker_key=ka))
    check("a worker token cannot list another worker's terminals (401)", st == 401, st)
    check("the owner lists it, the control token too",
          any(x["id"] == tid for x in a.terminals.list(worker_key=ka)) and
          any(x["id"] == tid for x in c.terminals.list()), None)
    st, _ = error_of(lambda: b.terminals.create(worker_key=ka))
    check("a worker token cannot make a terminal in another worker's sandbox (401)", st == 401, st)
    with a.terminals.attach(tid) as ws:
        ws.recv(GUARD)
        out = typed(ws, "echo own-$((5*5))\r", "own-25")
        check("the owner attaches and types", "own-25" in out, out)
    a.terminals.kill(tid)


def core_by_sandbox_id(r, c):
    sb = c.create_sandbox(mode="per_run", run_id="term-made")
    t = c.terminals.create(sandbox_id=sb["id"])
    check("a terminal in a sandbox named by its id (POST /v1/sandboxes)",
          t["state"] == "running" and t["sandbox_id"] and sb["id"].startswith(t["sandbox_id"][:12]),
          (t, sb))
    c.terminals.kill(t["id"])
    b = Client("unix:" + r.sock, derive_worker_token(r.token, "term-wb"), timeout=300)
    st, body = error_of(lambda: b.terminals.create(sandbox_id=sb["id"], worker_key="term-wb"))
    check("another worker cannot open a terminal in a sandbox named by its id (404)",
          st == 404, (st, body))
    c.delete_sandbox(sb["id"])


def core_refusals(c):
    for field, value in (("lease_id", "0" * 32), ("workspace", "/tmp"), ("stdin_b64", "eA=="),
                         ("timeout_s", 5), ("tool", "shell")):
        st, body = error_of(lambda: c._call("POST", "/v1/terminals",
                                           {"run_id": "term-core", field: value}))
        check("a terminal refuses '%s' (400, nothing started)" % field,
              st == 400 and field in (body or {}).get("error", ""), (st, body))
    st, body = error_of(lambda: c.terminals.create(run_id="term-core", mode="per_tool"))
    check("a terminal refuses mode per_tool (400)", st == 400, (st, body))
    st, body = error_of(lambda: c.terminals.create(run_id="term-core", rows=0))
    check("a terminal refuses 0 rows (400)", st == 400, (st, body))


def core_audit(c, tid):
    events = c._call("GET", "/v1/audit?since=1h")
    rows = events.get("events", events) if isinstance(events, dict) else events
    names = [(e.get("unmapped", {}).get("event"), e.get("unmapped", {}).get("terminal")) for e in rows]
    check("audit: terminal.created with the terminal's id", ("terminal.created", tid) in names,
          names[-10:])
    check("audit: terminal.attached with the terminal's id", ("terminal.attached", tid) in names,
          names[-10:])


def core_kill(c, tid):
    k = c.terminals.kill(tid)
    check("kill: its last state says exited", k["state"] == "exited", k)
    st, _ = error_of(lambda: c.terminals.get(tid))
    check("kill: the terminal is gone (404)", st == 404, st)


def core_kill_sweeps(c):
    """A kill ends every process the terminal's program started, also one
    that left its session (setsid): the call's sweep, as a timeout's."""
    t = c.terminals.create(run_id="term-kill", argv=["sh", "-c", "setsid sleep 3219 & exec sleep 3220"])
    deadline = time.time() + GUARD
    ps = ""
    while time.time() < deadline and not ("sleep 3219" in ps and "sleep 3220" in ps):
        ps = sandbox_ps(c, "term-kill")
    check("kill: the program and a process it detached run in the sandbox",
          "sleep 3219" in ps and "sleep 3220" in ps, ps)
    c.terminals.kill(t["id"])
    ps = sandbox_ps(c, "term-kill")
    check("kill: the program is gone from the sandbox", "sleep 3220" not in ps, ps)
    check("kill: the process it detached (setsid) is gone from the sandbox", "sleep 3219" not in ps, ps)


def suite_core(tmp):
    r = ts.Runner(tmp, runner_args())
    c = r.client
    try:
        tid = core_size_and_resize(c)
        core_detach_attach(c, tid)
        core_refusals(c)
        core_by_sandbox_id(r, c)
        core_owners(r, c)
        core_audit(c, tid)
        core_kill(c, tid)
        core_kill_sweeps(c)
    finally:
        r.stop()
    audit_file = os.path.join(tmp, "audit.jsonl")
    route_identity(tmp)
    return audit_file


# ---- no host-tool route identity in a terminal

ROUTE_CONFIG = """audit: {enabled: true, file: "%(audit)s"}
defaults:
  network: none
  image: sandman/minimal:latest
broker:
  tools:
    read_host:
      input_schema: {type: object, properties: {path: {type: string}}, required: [path]}
      argv: [cat, "{path}"]
agents:
  coder:
    broker:
      allow: ["*"]
"""


def route_identity(tmp):
    audit = os.path.join(tmp, "route-audit.jsonl")
    hostfile = os.path.join(tmp, "only-on-host.txt")
    with open(hostfile, "w") as f:
        f.write("the host's own words %d\n" % os.getpid())
    cfg = os.path.join(tmp, "route.yaml")
    with open(cfg, "w") as f:
        f.write(ROUTE_CONFIG % {"audit": audit})
    r = ConfiguredRunner(tmp, runner_args(), cfg)
    c = r.client
    try:
        run = "term-route"
        first = c.execute(argv=["sandman-tools", "call", "read_host", "path=" + hostfile],
                          tool="shell", agent="coder", run_id=run)
        check("route: a call of coder's reads the host file through its route",
              "the host's own words" in first.get("stdout", ""), first)
        t = c.terminals.create(run_id=run, agent="coder")
        check("route: the terminal runs in coder's sandbox", t["sandbox_id"] == first["sandbox_id"],
              (t, first["sandbox_id"]))
        # A call with the route runs beside the terminal while it asks: the
        # terminal waits for the call's mark, then asks.
        import threading
        bg = threading.Thread(target=lambda: c.execute(
            argv=["sh", "-c", "touch /tmp/route-call-runs; sleep 8"], tool="shell",
            agent="coder", run_id=run))
        bg.start()
        with c.terminals.attach(t["id"]) as ws:
            ws.recv(GUARD)
            out = typed(ws, "while [ ! -e /tmp/route-call-runs ]; do sleep 0.1; done; "
                        "/.sandman/bin/sandman-tools call read_host path=%s; echo rc=$?-$((100+1))end\r"
                        % hostfile, "-101end")
        bg.join(GUARD)
        check("route: a terminal's process gets no identity (no active call, exit 4)",
              "no active call" in out and "rc=4-101end" in out, out)
        check("route: the terminal never read the host file", "the host's own words" not in out, out)
        c.terminals.kill(t["id"])
    finally:
        r.stop()
    rows = [json.loads(line) for line in open(audit) if line.strip()]
    host_calls = [e for e in rows if e.get("unmapped", {}).get("event") in
                  ("host_tool.allowed", "host_tool.call") and
                  e.get("unmapped", {}).get("run_id") == run]
    check("route: the audit trail has the one host-tool call of coder's call, none of the terminal",
          len([e for e in host_calls if e["unmapped"].get("event") == "host_tool.allowed"]) == 1,
          host_calls)


# ---------------------------------------------------------------- limits

def wait_gone(c, tid, timeout=GUARD):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if all(x["id"] != tid for x in c.terminals.list()):
            return True
        time.sleep(0.5)
    return False


def sandbox_ps(c, run_id):
    return c.execute(argv=["ps", "-o", "args"], run_id=run_id, tool="shell")["stdout"]


def limits_grace(c):
    t = c.terminals.create(run_id="term-grace", argv=["sh", "-c", "setsid sleep 3218 & exec sleep 3217"])
    tid = t["id"]
    # Attached while the sandbox is looked at (a slow call must not outlast
    # the 2 s grace time first), then left alone.
    with c.terminals.attach(tid) as ws:
        ws.recv(GUARD)
        check("grace: the program runs in the sandbox", "sleep 3217" in sandbox_ps(c, "term-grace"))
    check("grace: a terminal nobody is attached to is ended after the grace time",
          wait_gone(c, tid))
    ps = sandbox_ps(c, "term-grace")
    check("grace: its program was killed in the sandbox", "sleep 3217" not in ps, ps)
    check("grace: a process its program detached (setsid) was killed too", "sleep 3218" not in ps, ps)
    # One that stays attached outlives the grace time.
    t = c.terminals.create(run_id="term-grace")
    with c.terminals.attach(t["id"]) as ws:
        ws.recv(GUARD)
        deadline = time.time() + 6  # three grace times of 2 s
        while time.time() < deadline:
            ws.recv(0.5)
        out = typed(ws, "echo still-$((9*9))\r", "still-81")
        check("grace: an attached terminal is never ended", "still-81" in out, out)
    c.terminals.kill(t["id"])


def limits_caps(c):
    made = [c.terminals.create(run_id="term-caps") for _ in range(2)]
    conns = [c.terminals.attach(t["id"]) for t in made]  # attached: never idle
    try:
        st, body = error_of(lambda: c.terminals.create(run_id="term-caps"))
        check("caps: a third terminal in one sandbox is refused (403, --terminals-per-sandbox 2)",
              st == 403 and "terminals" in body.get("error", ""), (st, body))
        other = c.terminals.create(run_id="term-caps-2")
        check("caps: another sandbox still gets one", other["state"] == "running", other)
        st, body = error_of(lambda: c.terminals.create(run_id="term-caps-3"))
        check("caps: past the runner's --max-terminals 3: 503", st == 503, (st, body))
        c.terminals.kill(other["id"])
        # The scrollback keeps at most its cap.
        ws = conns[0]
        ws.recv(GUARD)
        typed(ws, "i=0; while [ $i -lt 400 ]; do echo line-$i-xxxxxxxxxxxxxxxxxxxx; "
              "i=$((i+1)); done; echo done-$((1+1))\r", "done-2")
        scr = c.terminals.screen(made[0]["id"], scrollback=100000)
        kept = sum(len(x.encode()) + 1 for x in scr["scrollback"])
        check("caps: the scrollback keeps at most its cap (2k) and the newest lines",
              0 < kept <= 2048 and any("line-3" in x for x in scr["scrollback"][-3:]),
              (kept, scr["scrollback"][-3:]))
    finally:
        for ws in conns:
            ws.close()
        for t in made:
            c.terminals.kill(t["id"])


def suite_limits(tmp):
    r = ts.Runner(tmp, runner_args("--terminal-grace", "2s", "--terminals-per-sandbox", "2",
                                   "--max-terminals", "3", "--terminal-scrollback", "2k"))
    try:
        limits_grace(r.client)
        limits_caps(r.client)
    finally:
        r.stop()


# ---------------------------------------------------------------- python

def suite_python(tmp):
    tag = "sandman-it/%s/general:1" % "".join(
        ch if ch.isalnum() or ch in "._-" else "-" for ch in ts.INSTANCE.lower())
    env = dict(os.environ)
    env.setdefault("SANDMAN_IMAGE_CACHE", os.path.join(ts.SRC, "build", "image-cache"))
    p = subprocess.run([ts.SANDMAN, "image", "build", "general", "--tag", tag], cwd=ts.SRC,
                       capture_output=True, text=True, env=env)
    if not check("sandman/general built under this test's tag", p.returncode == 0, p.stderr[-800:]):
        return
    r = ts.Runner(tmp, runner_args(image=tag))
    c = r.client
    try:
        t = c.terminals.create(run_id="term-py", argv=["python3", "-q"])
        tid = t["id"]
        with c.terminals.attach(tid) as ws:
            ws.recv(GUARD)
            ws.read_until(">>> ", GUARD)
            typed(ws, "answer = 6 * 7\r", ">>> ")
        # Detached in between; the interpreter keeps its state.
        with c.terminals.attach(tid) as ws:
            ws.recv(GUARD)
            redraw = ws.recv(GUARD)
            check("python: attaching again shows what was typed",
                  redraw and b"answer = 6 * 7" in redraw[1], redraw)
            out = typed(ws, "print('value', answer)\r", "value 42")
            check("python: the variable is kept across two attachments", "value 42" in out, out)
            ws.send("exit()\r")
            code = None
            deadline = time.time() + GUARD
            while code is None and time.time() < deadline:
                ev = ws.recv(5)
                if ev is None:
                    break
                if ev[0] == "exit":
                    code = ev[1]
            check("python: exit() ends it; the client is told the exit code 0", code == 0, code)
        st = c.terminals.get(tid)
        check("python: its state says exited with 0", st["state"] == "exited" and st["exit_code"] == 0, st)
    finally:
        r.stop()
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)


if __name__ == "__main__":
    ts.run_suites({"core": suite_core, "limits": suite_limits, "python": suite_python}, "core",
                  "smterm-")
