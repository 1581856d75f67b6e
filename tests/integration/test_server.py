#!/usr/bin/env python3
"""Integration tests of `sandman worker start` against the real engine, with
the Python client. Run by test_server*.sh; one suite per ctest entry:

  core  auth matrix, errors and limits, leases (and where their values do
        not go), sandbox listing, background handles, clean stop
  load  100 concurrent calls over 10 run ids; SIGTERM with calls in flight
  hook  .sandman/worker-env.sh in the general image

Prints "ok - ..." / "not ok - ..." lines and "N passed, M failed"; exits 0
only when everything passed, 77 when no engine answers outside CI.
"""
import concurrent.futures
import hashlib
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("SANDMAN_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(SRC, "clients", "python"))
from sandman_client import Client, SandmanError, derive_worker_token  # noqa: E402

SANDMAN = os.environ.get("SANDMAN_BIN", os.path.join(SRC, "build", "sandman"))
INSTANCE = os.environ.setdefault("SANDMAN_INSTANCE", "%s-server-%d" % (
    os.environ.get("SANDMAN_TEST_PREFIX") or "it", os.getpid()))
os.environ.setdefault("SANDMAN_STATE_DIR", tempfile.mkdtemp(prefix="sm-state-"))
IN_CI = os.environ.get("CI") in ("true", "1")

PASSED = 0
FAILED = 0


def check(desc, cond, detail=""):
    global PASSED, FAILED
    if cond:
        PASSED += 1
        print("ok - %s" % desc, flush=True)
    else:
        FAILED += 1
        print("not ok - %s%s" % (desc, (": " + str(detail)[:2000]) if detail else ""), flush=True)
    return cond


def docker(*args):
    return subprocess.run(["docker"] + list(args), capture_output=True, text=True)


def instance_containers(extra_filter=None):
    args = ["ps", "-aq", "--filter", "label=io.sandman.instance=" + INSTANCE]
    if extra_filter:
        args += ["--filter", extra_filter]
    return [x for x in docker(*args).stdout.split() if x]


def cleanup_instance():
    ids = instance_containers()
    if ids:
        docker("rm", "-fv", *ids)
    vols = [x for x in docker("volume", "ls", "-q", "--filter",
                              "label=io.sandman.instance=" + INSTANCE).stdout.split() if x]
    if vols:
        docker("volume", "rm", "-f", *vols)


def require_engine():
    p = subprocess.run([SANDMAN, "version", "--json"], capture_output=True, text=True)
    try:
        if json.loads(p.stdout)["engine"]["api_version"]:
            return
    except (ValueError, KeyError, TypeError):
        pass
    if IN_CI:
        print("FAIL: CI=true and no engine answers", file=sys.stderr)
        sys.exit(1)
    print("SKIP: no engine answers")
    sys.exit(77)


class Runner:
    """A `sandman worker start` process on a private unix socket."""

    def __init__(self, tmp, args, name="runner"):
        self.tmp = tmp
        self.sock = os.path.join(tmp, name, "sandman.sock")
        self.log_path = os.path.join(tmp, name + ".log")
        self.token = open(os.path.join(tmp, "token")).read().strip()
        cmd = [SANDMAN, "worker", "start", "--listen", "unix:" + self.sock,
               "--token-file", os.path.join(tmp, "token")] + args
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.client = Client("unix:" + self.sock, self.token, timeout=300)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("runner exited with %s: %s" % (self.proc.returncode,
                                                                  self.read_log()))
            try:
                self.client.healthz()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("runner did not answer: " + self.read_log())

    def read_log(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=180):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def raw(self, method, path, body=b"", headers=None):
        """A request with exact bytes: (status, body bytes)."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(120)
        s.connect(self.sock)
        conn = http.client.HTTPConnection("localhost")
        conn.sock = s
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, data


def sandbox_args(image="sandman/minimal:latest", mode="per_run"):
    return ["--pool", "it", "--sandbox-mode", mode, "--sandbox-backend", "docker",
            "--sandbox-image", image, "--sandbox-network", "none", "--sandbox-cpu", "1",
            "--sandbox-mem", "256m", "--sandbox-pids", "128", "--sandbox-disk", "64m",
            "--project-environment", "development"]


def status_of(fn):
    try:
        fn()
        return 200
    except SandmanError as e:
        return e.status


# ---------------------------------------------------------------- core

def suite_core(tmp):
    value = "ghp_it_" + secrets.token_hex(16)
    creds = os.path.join(tmp, "creds.json")
    with open(creds, "w") as f:
        json.dump({"github": {"GH_TOKEN": value}, "other": {"OTHER_KEY": "other-secret-xyz"}}, f)
    os.chmod(creds, 0o644)
    ws = os.path.join(tmp, "ws")
    os.makedirs(os.path.join(ws, "agent-a"))
    args = sandbox_args() + ["--credentials-file", creds, "--workspaces-root", ws]

    # A credentials file others can read: refused at start, clearly.
    p = subprocess.run([SANDMAN, "worker", "start", "--listen",
                        "unix:" + os.path.join(tmp, "x", "s.sock"), "--token-file",
                        os.path.join(tmp, "token")] + args, capture_output=True, text=True,
                       timeout=60)
    check("credentials file with mode 0644 refuses to start", p.returncode != 0 and
          "chmod 600" in p.stderr, p.stderr)
    os.chmod(creds, 0o600)

    r = Runner(tmp, args)
    c = r.client
    st = os.stat(r.sock)
    check("socket mode 0600", (st.st_mode & 0o777) == 0o600, oct(st.st_mode))
    check("socket directory mode 0700", (os.stat(os.path.dirname(r.sock)).st_mode & 0o777) == 0o700)
    h = c.healthz()
    check("healthz ok", h.get("status") == "ok" and h.get("mode") == "per_run" and
          h["engine"]["reachable"] is True, h)

    # --- the auth matrix
    body = {"argv": ["sh", "-c", "echo hi"], "run_id": "auth", "worker_key": "w1"}
    w1 = derive_worker_token(r.token, "w1")
    w2 = derive_worker_token(r.token, "w2")
    d = subprocess.run([SANDMAN, "token", "derive", "--worker-key", "w1", "--token-file",
                        os.path.join(tmp, "token")], capture_output=True, text=True)
    check("sandman token derive matches HMAC-SHA256 computed in Python",
          d.returncode == 0 and d.stdout.strip() == w1, (d.stdout, d.stderr))
    results = {}
    for name, tok in (("none", None), ("wrong", "wrong-token-0123456789abcdef"),
                      ("control", r.token), ("worker own key", w1), ("worker other key", w2)):
        cl = Client("unix:" + r.sock, tok, timeout=300)
        cl.token = tok
        status, parsed, _ = cl.request("POST", "/v1/execute", body)
        results[name] = (status, parsed)
    for name, want in (("none", 401), ("wrong", 401), ("control", 200),
                       ("worker own key", 200), ("worker other key", 401)):
        check("auth: %s -> %d" % (name, want), results[name][0] == want, results[name])
    check("auth: control and worker calls ran", all(
        results[n][1].get("stdout") == "hi\n" for n in ("control", "worker own key")))
    bodies = {json.dumps(results[n][1], sort_keys=True) for n in ("none", "wrong",
                                                                  "worker other key")}
    check("auth: one generic 401 answer whatever was wrong", len(bodies) == 1, bodies)
    check("auth: worker token cannot read metrics",
          status_of(lambda: Client("unix:" + r.sock, w1).metrics()) == 401)

    # --- errors and limits; the runner stays up
    st, data = r.raw("POST", "/v1/execute", b'{"argv": [', {"Authorization": "Bearer " + r.token})
    check("malformed JSON -> 400", st == 400 and b"failure_kind" in data, (st, data))
    big = b'{"argv":["' + b"a" * (10 * 1024 * 1024) + b'"]}'
    try:
        st, data = r.raw("POST", "/v1/execute", big, {"Authorization": "Bearer " + r.token})
    except (BrokenPipeError, ConnectionResetError) as e:
        st, data = 0, str(e).encode()
    check("10 MiB body -> 413", st == 413, (st, data[:200]))
    st, data = r.raw("GET", "/v1/nothing", b"", {"Authorization": "Bearer " + r.token})
    check("unknown route -> 404", st == 404, (st, data))
    st, data = r.raw("GET", "/v1/handles/" + "ab" * 16, b"",
                     {"Authorization": "Bearer " + r.token})
    check("unknown handle -> 404", st == 404 and b"failure_kind" in data, (st, data))
    check("runner still up after bad requests", r.proc.poll() is None and
          c.execute(argv=["echo", "still"], run_id="auth")["stdout"] == "still\n")
    try:
        c.execute(argv=["echo"], env={"SANDMAN_TOKEN": "x"})
        check("env naming SANDMAN_* refused", False)
    except SandmanError as e:
        check("env naming SANDMAN_* refused", e.status == 400, e)

    # --- leases
    want_hash = hashlib.sha256(value.encode()).hexdigest()
    script = 'printf %s "$GH_TOKEN" | sha256sum; echo "v=$GH_TOKEN"; echo "e=$GH_TOKEN" >&2'
    lease = c.create_lease(tool="shell", services=["github"])
    check("lease created", len(lease.get("lease_id", "")) == 32 and lease["max_uses"] == 1 and
          lease.get("expires_at"), lease)
    res = c.execute(tool="shell", argv=["sh", "-c", script], run_id="lease",
                    lease_id=lease["lease_id"])
    check("lease: the value reaches the tool's environment",
          res["ok"] and want_hash in res["stdout"], res)
    check("lease: the value is scrubbed from the answer",
          value not in json.dumps(res) and "v=[REDACTED]" in res["stdout"] and
          "e=[REDACTED]" in res["stderr"], res)
    answers = [res]
    for desc, fn in (
            ("replay", lambda: c.execute(tool="shell", argv=["sh", "-c", script],
                                         run_id="lease", lease_id=lease["lease_id"])),
            ("other tool", lambda: c.execute(
                tool="shell", argv=["sh", "-c", script], run_id="lease",
                lease_id=c.create_lease(tool="python", services=["github"])["lease_id"])),
            ("unknown lease", lambda: c.execute(tool="shell", argv=["true"], run_id="lease",
                                                lease_id="0" * 32))):
        try:
            fn()
            check("lease: %s refused" % desc, False)
        except SandmanError as e:
            check("lease: %s -> 403 lease invalid or expired" % desc,
                  e.status == 403 and e.error == "lease invalid or expired" and
                  e.failure_kind == "policy", e.body)
    short = c.create_lease(tool="shell", services=["github"], ttl_s=1)
    time.sleep(2.5)
    try:
        c.execute(tool="shell", argv=["true"], run_id="lease", lease_id=short["lease_id"])
        check("lease: expired refused", False)
    except SandmanError as e:
        check("lease: expired -> 403", e.status == 403 and e.error == "lease invalid or expired")
    try:
        c.create_lease(tool="shell", services=["nope"])
        check("lease: unknown service refused", False)
    except SandmanError as e:
        check("lease: unknown service -> 400", e.status == 400, e.body)
    twice = c.create_lease(tool="shell", services=["github"], max_uses=2)
    ok2 = [c.execute(tool="shell", argv=["sh", "-c", script], run_id="lease",
                     lease_id=twice["lease_id"]) for _ in range(2)]
    answers += ok2
    check("lease: max_uses 2 serves two calls", all(want_hash in a["stdout"] for a in ok2))
    after = c.execute(tool="shell", argv=["sh", "-c", 'echo "x=$GH_TOKEN"'], run_id="lease")
    answers.append(after)
    check("lease: the next call in the same sandbox does not see it",
          after["stdout"] == "x=\n", after)
    sid = res["sandbox_id"]
    insp = docker("inspect", sid)
    check("lease: not in the container's own environment (docker inspect)",
          insp.returncode == 0 and value not in insp.stdout and "GH_TOKEN" not in insp.stdout,
          insp.stderr)
    metrics = c.metrics()
    check("lease: not in /metrics", value not in metrics and
          'sandman_leases_total{event="consumed"} 3' in metrics, metrics[-600:])
    check("lease: not in any answer", all(value not in json.dumps(a) for a in answers))

    # --- through the runner (agent sessions on): a snooper an earlier call
    # left reads every process's environment; it catches a plain call's
    # variable, and nothing of a leased call's.
    snoop = ("setsid sh -c 'while :; do for f in /proc/[0-9]*/environ; do "
             "tr \"\\\\000\" \"\\\\n\" < $f 2>/dev/null | grep -E \"^(GH_TOKEN|PLAIN_X)=\"; done; done "
             ">> /tmp/loot' </dev/null >/dev/null 2>&1 &")
    c.execute(tool="shell", argv=["sh", "-c", snoop], run_id="snoop")
    def plain_call(mark):
        return c.execute(tool="shell", env={"PLAIN_X": mark}, run_id="snoop", argv=[
            "sh", "-c", "i=0; while ! grep -q PLAIN_X=%s /tmp/loot && [ $i -lt 400 ]; do "
            "sleep 0.05; i=$((i+1)); done; grep -q PLAIN_X=%s /tmp/loot && echo caught" % (mark, mark)])
    plain = plain_call("before")
    check("lease, snooper: it catches a plain call's variable", plain["stdout"] == "caught\n", plain)
    lease = c.create_lease(tool="shell", services=["github"])
    res = c.execute(tool="shell", argv=["sh", "-c", "sleep 1; echo ${#GH_TOKEN}"], run_id="snoop",
                    lease_id=lease["lease_id"])
    check("lease, snooper: the leased call ran", res["ok"] and res["stdout"] == "%d\n" % len(value),
          res)
    plain = plain_call("after")
    check("lease, snooper: it runs on after the leased call", plain["stdout"] == "caught\n", plain)
    loot = c.execute(tool="shell", run_id="snoop", argv=["sh", "-c", "sort -u /tmp/loot"])
    check("lease, snooper: it got nothing of the leased call",
          "PLAIN_X=after" in loot["stdout"] and "GH_TOKEN" not in loot["stdout"] and
          value not in loot["stdout"], loot)

    # --- listing and admin routes
    sbs = c.sandboxes()
    check("sandboxes lists this instance's per_run sandboxes",
          any(s["id"] == sid and s["mode"] == "per_run" for s in sbs), sbs)
    check("metrics by tool, mode and outcome", 'sandman_calls_total{tool="shell",mode="per_run",'
          'outcome="ok"}' in metrics and "sandman_call_duration_seconds_bucket" in metrics and
          'sandman_sandboxes{mode="per_run"}' in metrics and "sandman_failures_total" in metrics)
    # The buckets docs/http-api.md lists are those /metrics has.
    served = sorted({float(v) for v in re.findall(
        r'sandman_call_duration_seconds_bucket\{[^}]*le="([0-9.e+-]+)"', metrics)})
    with open(os.path.join(SRC, "docs", "http-api.md")) as f:
        row = next((l for l in f if l.startswith("| `sandman_call_duration_seconds`")), "")
    listed = sorted(float(v) for v in re.findall(r"[0-9.]+", row.split("buckets", 1)[-1]))
    check("docs/http-api.md lists the histogram's buckets", served and served == listed,
          (served, listed))

    # --- workspaces
    res = c.execute(argv=["sh", "-c", "echo made > out.txt; pwd"], run_id="ws",
                    workspace="agent-a")
    check("workspace call syncs back", res["ok"] and
          open(os.path.join(ws, "agent-a", "out.txt")).read() == "made\n", res)
    for bad in ("..", "/etc", "agent-a/../.."):
        check("workspace %r refused" % bad,
              status_of(lambda: c.execute(argv=["true"], workspace=bad)) in (400, 403))

    # --- a leased value is masked in every field of the answer and of a
    # handle: a file named after it (files_changed), the handle's output so
    # far and its final result.
    lease = c.create_lease(tool="shell", services=["github"])
    res = c.execute(tool="shell", argv=["sh", "-c", 'touch "f-$GH_TOKEN"; echo "$GH_TOKEN"'],
                    run_id="ws", workspace="agent-a", lease_id=lease["lease_id"])
    check("lease: masked in files_changed", res["ok"] and value not in json.dumps(res) and
          "f-[REDACTED]" in res["files_changed"], res)
    lease = c.create_lease(tool="shell", services=["github"])
    res = c.execute(tool="shell", command='echo "a=$GH_TOKEN"; sleep 3; touch "g-$GH_TOKEN"; '
                    'echo "b=$GH_TOKEN"', run_id="ws", workspace="agent-a", timeout_s=1,
                    background_on_timeout=True, lease_id=lease["lease_id"])
    seen = [res]
    hid = res.get("handle")
    for _ in range(150):
        if not hid:
            break
        seen.append(c.handle(hid))
        if seen[-1]["state"] != "running":
            break
        time.sleep(0.2)
    final = seen[-1].get("result") or {}
    check("lease: masked in a handle's output and result", hid and
          seen[-1]["state"] == "finished" and "b=[REDACTED]" in seen[-1]["stdout"] and
          "g-[REDACTED]" in final.get("files_changed", []) and
          all(value not in json.dumps(x) for x in seen), seen[-1])
    if hid:
        c.kill(hid)

    # --- background handles
    res = c.execute(tool="shell", command="echo start; sleep 60; echo never", run_id="bg",
                    timeout_s=2, background_on_timeout=True)
    hid = res.get("handle")
    check("a call that outlives its timeout returns a handle", hid and res["state"] == "running",
          res)
    if hid:
        st = None
        for _ in range(50):
            st = c.handle(hid)
            if "start" in st["stdout"]:
                break
            time.sleep(0.2)
        check("handle: running with output so far", st["state"] == "running" and
              "start" in st["stdout"], st)
        check("handle: another worker's token is refused",
              status_of(lambda: Client("unix:" + r.sock, w2).handle(hid)) == 401)
        k = c.kill(hid)
        check("handle: DELETE kills it", k["state"] == "killed", k)
        check("handle: gone afterwards", status_of(lambda: c.handle(hid)) == 404)
        ps = docker("top", res["sandbox_id"] if res.get("sandbox_id") else
                    c.execute(argv=["true"], run_id="bg")["sandbox_id"])
        check("handle: the killed tool no longer runs in its sandbox", "sleep 60" not in ps.stdout,
              ps.stdout)

    log = r.read_log()
    code = r.stop()
    check("SIGTERM: runner exits 0", code == 0, code)
    log = r.read_log()
    check("lease: not in the runner's log", value not in log and "other-secret-xyz" not in log)
    check("control token not in the runner's log", r.token not in log)
    check("request ids in log lines", "[" in log and "POST execute -> 200" in log, log[-500:])
    check("socket removed at stop", not os.path.exists(r.sock))


# ---------------------------------------------------------------- load

def suite_load(tmp):
    r = Runner(tmp, sandbox_args() + ["--threads", "16"])
    c = r.client

    def one(i):
        try:
            return i, c.execute(argv=["sh", "-c", "echo call-%d" % i], run_id="run-%d" % (i % 10))
        except Exception as e:  # noqa: BLE001
            return i, {"error": repr(e)}

    with concurrent.futures.ThreadPoolExecutor(max_workers=100) as pool:
        results = list(pool.map(one, range(100)))
    good = [i for i, res in results if res.get("ok") and res.get("stdout") == "call-%d\n" % i]
    check("100 concurrent calls: 100 correct answers", len(good) == 100,
          [res for i, res in results if i not in good][:3])
    by_run = {}
    for i, res in results:
        by_run.setdefault(i % 10, set()).add(res.get("sandbox_id"))
    check("one sandbox per run id", all(len(v) == 1 for v in by_run.values()), by_run)
    ids = {next(iter(v)) for v in by_run.values()}
    check("10 run ids -> 10 sandboxes", len(ids) == 10, ids)
    live = instance_containers("label=io.sandman.mode=per_run")
    check("the engine has 10 per_run sandboxes", len(live) == 10, live)

    # SIGTERM with calls in flight: per_tool and per_run.
    calls = [("per_tool", i) for i in range(4)] + [("per_run", i) for i in range(2)]
    out = {}

    def slow(mode, i):
        try:
            out[(mode, i)] = c.execute(argv=["sh", "-c", "sleep 4; echo done-%s-%d" % (mode, i)],
                                       mode=mode, run_id="term-%d" % i)
        except Exception as e:  # noqa: BLE001
            out[(mode, i)] = {"error": repr(e)}

    threads = [threading.Thread(target=slow, args=a) for a in calls]
    for t in threads:
        t.start()
    # Wait until every call is running before the signal.
    deadline = time.time() + 60
    while time.time() < deadline:
        m = c.metrics()
        if "sandman_calls_in_flight %d" % len(calls) in m:
            break
        time.sleep(0.2)
    r.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    refused = False
    try:
        Client("unix:" + r.sock, r.token, timeout=5).healthz()
    except OSError:
        refused = True
    check("SIGTERM: no new connections", refused)
    for t in threads:
        t.join(180)
    check("SIGTERM: calls in flight complete", all(
        out.get(k, {}).get("stdout") == "done-%s-%d\n" % k for k in calls), out)
    code = r.stop()
    check("SIGTERM: runner exits 0", code == 0, (code, r.read_log()[-1500:]))
    left = instance_containers("label=io.sandman.mode=per_tool")
    check("SIGTERM: no per_tool container remains", not left, left)


# ---------------------------------------------------------------- hook

def wait_until(cond, timeout, step=0.2):
    """Polls cond until it holds (True) or timeout seconds pass (False)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(step)
    return False


def hook_sleeping(run_id):
    """True when the sandbox of run_id runs the slow hook's sleep."""
    for cid in instance_containers("label=io.sandman.run=" + run_id):
        if "sleep 60" in docker("top", cid, "-o", "args").stdout:
            return True
    return False


def suite_hook(tmp):
    # sandman/general as the tests build it (scripts/test-images.sh: their
    # own tag, reused while its inputs are unchanged), never the user's
    # own build of it, which may be missing or stale.
    b = subprocess.run([os.path.join(SRC, "scripts", "test-images.sh"), "ensure", "general"],
                       capture_output=True, text=True, timeout=1800,
                       env=dict(os.environ, SANDMAN_BIN=SANDMAN))
    image = b.stdout.strip()
    if b.returncode != 0 or not image:
        check("the test image general (scripts/test-images.sh)", False, b.stderr[-1000:])
        return
    ws = os.path.join(tmp, "ws")
    hooks = {
        "good": 'export HOOK_VALUE="from hook"\nexport HOME=/elsewhere\nPLAIN=1\n'
                'echo noise\ncd /tmp\n',
        "broken": 'echo about to fail >&2\nexit 3\n',
        "slow": 'sleep 60\n',
    }
    for name, text in hooks.items():
        os.makedirs(os.path.join(ws, name, ".sandman"))
        with open(os.path.join(ws, name, ".sandman", "worker-env.sh"), "w") as f:
            f.write(text)
    os.makedirs(os.path.join(ws, "plain"))
    r = Runner(tmp, sandbox_args(image=image) + ["--workspaces-root", ws])
    c = r.client
    cmd = 'echo "$HOOK_VALUE|$HOME|${PLAIN-unset}|$(pwd)"'
    res = c.execute(tool="shell", command=cmd, run_id="hook-good", workspace="good")
    check("hook: exported values arrive, sandman's own are set again",
          res["ok"] and res["stdout"] == "from hook|/workspace|unset|/workspace\n", res)
    check("hook: its output is not the tool's", "noise" not in res["stdout"] and
          "sandman-hook" not in res["stderr"], res)
    res = c.execute(tool="python", argv=["python3", "-c",
                                         "import os; print(os.environ.get('HOOK_VALUE'))"],
                    run_id="hook-good", workspace="good")
    check("hook: python calls get it too", res["stdout"] == "from hook\n", res)
    res = c.execute(tool="read_file", argv=["sh", "-c", 'echo "${HOOK_VALUE-unset}"'],
                    run_id="hook-good", workspace="good")
    check("hook: other tools do not", res["stdout"] == "unset\n", res)

    res = c.execute(tool="shell", command="echo tool-ran", run_id="hook-broken",
                    workspace="broken")
    check("hook: a failing hook fails its call as a tool failure",
          not res["ok"] and res["failure_kind"] == "tool" and
          ".sandman/worker-env.sh" in (res["error"] or "") and "tool-ran" not in res["stdout"],
          res)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        fs = pool.submit(c.execute, tool="shell", command="echo tool-ran", run_id="hook-slow",
                         workspace="slow", timeout_s=60)
        # The other call starts once the slow hook runs (its sleep is in the
        # sandbox), not after a fixed time a loaded machine can outrun.
        check("hook: the slow hook is running",
              wait_until(lambda: fs.done() or hook_sleeping("hook-slow"), 120), fs.done())
        fg = pool.submit(c.execute, tool="shell", command=cmd, run_id="hook-good",
                         workspace="good")
        slow, good = fs.result(), fg.result()
    check("hook: a slow hook times out and fails its call",
          not slow["ok"] and slow["failure_kind"] == "tool" and
          "timed out" in (slow["error"] or "") and "worker-env.sh" in slow["error"], slow)
    check("hook: other calls meanwhile are unaffected", good["ok"] and
          good["stdout"].startswith("from hook|"), good)
    res = c.execute(tool="shell", command="echo fine", run_id="hook-plain", workspace="plain")
    check("hook: a workspace without a hook", res["ok"] and res["stdout"] == "fine\n", res)
    code = r.stop()
    check("runner exits 0", code == 0, code)


def main():
    run_suites({"core": suite_core, "load": suite_load, "hook": suite_hook}, "core", "smsrv-")


def run_suites(suites, default, prefix):
    """Runs the suite named by argv[1] (else default) with a token in a
    folder of its own, then cleans up and exits with the result."""
    suite = sys.argv[1] if len(sys.argv) > 1 else default
    require_engine()
    tmp = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(secrets.token_hex(24) + "\n")
    os.chmod(os.path.join(tmp, "token"), 0o600)
    try:
        suites[suite](tmp)
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        check("suite %s ran to the end" % suite, False, repr(e))
    finally:
        cleanup_instance()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (PASSED, FAILED))
    sys.exit(0 if FAILED == 0 else 1)


if __name__ == "__main__":
    main()
