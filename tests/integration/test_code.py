#!/usr/bin/env python3
"""Code contexts (docs/code.md) against the real engine, with sandman/general
(its image in SANDMAN_CODE_IMAGE: code_image.sh, scripts/test-images.sh's general).
Run by test_code.sh; one suite per ctest entry:

  runner  through the runner's /v1/contexts routes and the Python client:
          state kept between runs (a variable, an import, a DataFrame), a
          matplotlib figure as a valid PNG, an exception's name, value and
          traceback, a `while True` cell stopped by its timeout with the
          context still answering, a killed kernel reported and a fresh one
          started (state lost, said so), two contexts apart, interrupt,
          restart, delete, list; another worker's context answers as a
          missing one; a run with a lease refused; network none; the kernel
          on private Unix sockets (connection file 0600, no TCP listener),
          outside every call (no host-tool identity); the limits (output cap,
          queued runs, contexts) and an audit row per run; a context across
          its sandbox's tiers of rest (rest_tiers: kept across freeze, lost
          at stop and said so; rest_hibernate: kept across hibernate under
          gVisor, or refused on an engine without checkpoints)
  cli     `sandman code` against the engine: state between invocations,
          --json events, --save-images, exit statuses, --list and --delete;
          and the MCP tool run_code over `sandman mcp` (stdio): state kept, a
          figure as an image content block, an exception as a tool error;
          run_code as a task of MCP 2026-07-28 (requests from the spec)

Uses test_server.py's helpers (check, Runner, cleanup).
"""
import json
import os
import struct
import subprocess
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402
from sandman_client import Client, SandmanError, derive_worker_token  # noqa: E402

check = ts.check
IMAGE = os.environ["SANDMAN_CODE_IMAGE"]  # code_image.sh: the tests' own build of general


def runner_args(extra=()):
    return ["--pool", "it-code", "--sandbox-mode", "per_run", "--sandbox-backend", "docker",
            "--sandbox-image", IMAGE, "--sandbox-network", "none", "--sandbox-cpu", "1",
            "--sandbox-mem", "768m", "--sandbox-pids", "256", "--sandbox-disk", "256m",
            "--project-environment", "development"] + list(extra)


def png_size(b64):
    """(width, height) of a PNG whose every chunk's CRC holds and whose image
    data inflates to exactly the rows its header says; raises otherwise."""
    import base64
    data = base64.b64decode(b64)
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("no PNG signature")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise ValueError("bad CRC in chunk %r" % kind)
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        pos += 12 + n
    w, h, depth, color = header[0], header[1], header[2], header[3]
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
    row = 1 + (w * channels * depth + 7) // 8
    if len(zlib.decompress(idat)) != h * row:
        raise ValueError("image data of the wrong size")
    return w, h


def end_of(events):
    ends = [e for e in events if e.get("event") == "end"]
    return ends[-1] if ends else {}


def run(c, code, **kw):
    return list(c.run_code_stream(code, **kw))


def in_kernel(c, key, code, context=None):
    """The text of the cell's value (c.run_code)."""
    return c.run_code(code, context, **key).text


# ---------------------------------------------------------------- runner

def state_and_results(c, key):
    x = c.run_code("x = 41", **key)
    check("a first run makes the default context and runs", x.status == "ok", vars(x))
    x = c.run_code("x + 1", **key)
    check("x = 41, then x + 1 answers 42 in the next run", x.text == "42" and
          x.execution_count == 2, vars(x))
    x = c.run_code("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\nprint('loaded')",
                   **key)
    check("an import and a DataFrame load", x.status == "ok" and x.logs.stdout == ["loaded\n"],
          vars(x))
    x = c.run_code("int(df['a'].sum()) + len(pd.__version__) * 0", **key)
    check("the import and the DataFrame stay for the next run", x.text == "6", vars(x))
    x = c.run_code("import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3), dpi=50)\n"
                   "plt.plot([1, 3, 2])\nplt.show()", **key)
    pngs = [r.png for r in x.results if r.png]
    size = None
    try:
        size = png_size(pngs[0]) if pngs else None
    except (ValueError, KeyError, zlib.error, struct.error) as e:
        size = repr(e)
    check("a matplotlib figure comes back as a valid PNG (signature, CRCs, inflated rows)",
          len(pngs) == 1 and isinstance(size, tuple) and size[0] > 50 and size[1] > 50,
          (size, [r.formats() for r in x.results]))
    check("the figure's display also has its text/plain", any(
        r.text and "Figure" in r.text for r in x.results), [r.text for r in x.results])
    x = c.run_code("1 / 0", **key)
    check("an exception gives its name, value and traceback",
          x.status == "error" and x.error is not None and x.error.name == "ZeroDivisionError" and
          x.error.value == "division by zero" and "1 / 0" in (x.error.traceback or "") and
          "\x1b[" not in x.error.traceback, vars(x))
    x = c.run_code("{'k': [1, 2]}", **key)
    check("a value's MIME bundle has its text", x.text == "{'k': [1, 2]}", vars(x))
    x = c.run_code("from IPython.display import HTML, display\ndisplay(HTML('<b>hi</b>'))", **key)
    check("a display's HTML comes as text/html", any(r.html == "<b>hi</b>" for r in x.results)
          and not any(r.is_main_result for r in x.results), [vars(r) for r in x.results])


def timeouts_and_death(c, key):
    t0 = time.monotonic()
    x = c.run_code("while True:\n    pass", timeout_s=2, **key)
    took = time.monotonic() - t0
    check("a while True cell is interrupted by its timeout, and says so",
          x.status == "timeout" and "timeout" in (x.message or "") and
          x.error is not None and x.error.name == "KeyboardInterrupt", (vars(x), took))
    check("after the timeout the context still answers, its state kept",
          in_kernel(c, key, "x * 2") == "82")
    # A client that goes away: the runner cancels its call (the relay is
    # killed with what the call started); the kernel, started by an
    # earlier call, is no process of it and keeps its state.
    gen = c.run_code_stream("import time\nfor i in range(600):\n    time.sleep(0.1)", **key)
    for ev in gen:
        if ev["event"] == "start":
            break
    gen.close()
    x = c.run_code("(x * 2, i < 599)", **key)
    check("a client that goes away: its cell stops and the context keeps its state",
          x.text == "(82, True)", vars(x))
    x = c.run_code("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", **key)
    check("a killed kernel is reported", x.status == "died" and "died" in (x.message or "") and
          x.error is not None and x.error.name == "KernelDied", vars(x))
    x = c.run_code("'x' in dir()", **key)
    check("the next run starts a fresh kernel and says the state was lost",
          x.text == "False" and x.state_lost and "died" in x.state_lost and x.status == "ok",
          vars(x))
    check("the fresh kernel goes on answering", in_kernel(c, key, "6 * 7") == "42")
    # The code driver itself killed (as `kill -9 -1` by a tool would): the
    # run in flight fails, the next one starts a new driver that knows the
    # sandbox's contexts and says their state was lost.
    c.run_code("y = 7", **key)
    try:
        c.run_code("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\n"
                   "time.sleep(30)", **key)
        died = None
    except SandmanError as e:
        died = e
    check("a killed code driver fails the run in flight", died is not None and
          died.status in (502, 503), repr(died))
    x = c.run_code("'y' in dir()", **key)
    check("after the driver was killed, the next run says the state was lost",
          x.text == "False" and x.state_lost and "driver" in x.state_lost, vars(x))


def two_contexts(c, key):
    info = c.contexts.create(key, "second")
    check("a second context is made", info["name"] == "second" and info["state"] == "idle" and
          info["kernel"] == "python3" and info["language"] == "python", info)
    c.run_code("shared = 'first'", **key)
    x = c.run_code("'shared' in dir()", "second", **key)
    check("two contexts do not share state", x.text == "False", vars(x))
    c.run_code("shared = 'second'", "second", **key)
    check("each keeps its own", in_kernel(c, key, "shared") == "'first'" and
          in_kernel(c, key, "shared", "second") == "'second'")
    names = sorted(x["name"] for x in c.contexts.list(key))
    check("list shows both", names == ["default", "second"], names)
    try:
        c.contexts.create(key, "second")
        status = 201
    except SandmanError as e:
        status = e.status
    check("making an existing context again is 409", status == 409, status)
    # Interrupt a sleeping cell from another request.
    out = {}
    t = threading.Thread(target=lambda: out.update(x=c.run_code(
        "import time\ntime.sleep(60)", "second", **key)))
    t.start()
    poll(lambda: c.contexts.get(key, "second")["state"] == "busy")
    r = c.contexts.interrupt(key, "second")
    t.join(60)
    check("interrupt stops the running cell", r["interrupted"] is True and
          out.get("x") is not None and out["x"].status == "interrupted",
          (r, vars(out["x"]) if out.get("x") is not None else "the run did not end in 60 s"))
    info = c.contexts.restart(key, "second")
    check("restart gives a fresh kernel", info["execution_count"] == 0 and
          in_kernel(c, key, "'shared' in dir()", "second") == "False", info)
    c.contexts.delete(key, "second")
    try:
        c.contexts.get(key, "second")
        status = 200
    except SandmanError as e:
        status = e.status
    check("a deleted context is gone (404)", status == 404, status)


def isolation(r, c):
    """Another worker's context answers as a missing one; a lease is refused."""
    wa, wb = Client("unix:" + r.sock, derive_worker_token(r.token, "wa"), timeout=300), \
        Client("unix:" + r.sock, derive_worker_token(r.token, "wb"), timeout=300)
    ka, kb = {"worker_key": "wa"}, {"worker_key": "wb"}
    wa.contexts.create(ka, "secret")
    wa.run_code("token = 'a-secret'", "secret", **ka)
    check("a worker reaches its own context", in_kernel(wa, ka, "token", "secret") == "'a-secret'")

    def err(fn):
        try:
            fn()
            return None
        except SandmanError as e:
            return (e.status, e.body.get("error") if isinstance(e.body, dict) else e.body)
    missing = err(lambda: wb.contexts.get(kb, "nosuch"))
    other = err(lambda: wb.contexts.get(kb, "secret"))
    check("another worker's context answers exactly as a missing one",
          other is not None and other[0] == 404 and
          other[1].replace("secret", "X") == missing[1].replace("nosuch", "X"), (other, missing))
    ran = err(lambda: wb.run_code("token", "secret", **kb))
    check("another worker cannot run code in it (404)", ran is not None and ran[0] == 404, ran)
    check("another worker's token naming this worker is refused (401)",
          err(lambda: wb.contexts.get(ka, "secret")) == (401, "missing or invalid token"))
    # Same run id, two workers: two sandboxes.
    wa.run_code("mine = 1", run_id="same", worker_key="wa")
    x = wb.run_code("'mine' in dir()", run_id="same", worker_key="wb")
    check("two workers naming one run id get two sandboxes", x.text == "False", vars(x))
    leased = err(lambda: c.run_code("1", run_id="code-1", lease_id="0" * 32))
    check("a run with a lease is refused with a clear error",
          leased is not None and leased[0] == 403 and "leased credentials" in leased[1], leased)


def inside(c, key):
    """The kernel's place in the sandbox, seen from a run."""
    probe = c.run_code(
        "import os, json, stat\n"
        "def ppid(p):\n"
        "    return int(open('/proc/%d/stat' % p).read().rsplit(')', 1)[1].split()[1])\n"
        "drv = os.getppid()\n"
        "import glob\n"
        "cf = glob.glob('/tmp/.sandman-code/*/c/default/kernel.json')[0]\n"
        "conn = json.load(open(cf))\n"
        "listen = [l.split()[1] for f in ('/proc/net/tcp', '/proc/net/tcp6')\n"
        "          if os.path.exists(f) for l in open(f).read().splitlines()[1:]\n"
        "          if l.split()[3] == '0A']\n"
        "wide = [a for a in listen if not (a.startswith('0100007F:') or\n"
        "        a.startswith('00000000000000000000000001000000:'))]\n"
        "print(json.dumps({'mode': oct(stat.S_IMODE(os.stat(cf).st_mode)),\n"
        "  'dir': oct(stat.S_IMODE(os.stat(os.path.dirname(os.path.dirname(\n"
        "      os.path.dirname(os.path.dirname(cf))))).st_mode)),\n"
        "  'transport': conn['transport'], 'scheme': conn['signature_scheme'],\n"
        "  'keylen': len(conn['key']), 'tcp_wide': wide,\n"
        "  'driver_parent': ppid(drv), 'nets': sorted(os.listdir('/sys/class/net')),\n"
        "  'sandman_env': sorted(k for k in os.environ if k.startswith('SANDMAN_')),\n"
        "  'ipython_in_ws': os.path.exists('/workspace/.ipython'), 'uid': os.getuid()}))",
        **key)
    try:
        p = json.loads("".join(probe.logs.stdout))
    except ValueError:
        p = {}
    check("the connection file is 0600 in a 0700 folder, signed with a 64-digit key",
          p.get("mode") == "0o600" and p.get("dir") == "0o700" and p.get("scheme") ==
          "hmac-sha256" and p.get("keylen") == 64, (p, vars(probe)))
    check("the kernel's channels are Unix sockets, and nothing listens beyond the sandbox's own loopback",
          p.get("transport") == "ipc" and p.get("tcp_wide") == [], p)
    check("network none: the sandbox has only loopback", p.get("nets") == ["lo"], p)
    check("the kernel is no process of a call: its driver's parent is the sandbox's init, and no SANDMAN_ variable (the call marker) reaches it",  # noqa: E501
          p.get("driver_parent") == 1 and p.get("sandman_env") == [], p)
    check("the kernel runs as the sandbox's user and writes nothing of its own to /workspace",
          p.get("uid") == 1000 and p.get("ipython_in_ws") is False, p)


def by_sandbox_id(r, c):
    """A sandbox made ahead (POST /v1/sandboxes) is named by its id."""
    sb = c.create_sandbox(template="py")
    key = {"sandbox_id": sb["id"]}
    c.run_code("v = 3", **key)
    x = c.run_code("v * 2", **key)
    check("a context in a sandbox named by its sandbox_id keeps its state", x.text == "6", vars(x))
    names = [x["name"] for x in c.contexts.list(key)]
    check("its contexts are listed by sandbox_id", names == ["default"], names)
    wb = Client("unix:" + r.sock, derive_worker_token(r.token, "wb"), timeout=300)
    try:
        wb.run_code("v", sandbox_id=sb["id"], worker_key="wb")
        st = 200
    except SandmanError as e:
        st = e.status
    check("another worker naming that sandbox_id is told it does not exist (404)", st == 404, st)
    c.delete_sandbox(sb["id"])


def rest_tiers(r, c):
    """A context across its sandbox's tiers of rest (docs/state.md): kept
    across freeze, lost at stop and said so."""
    sb = c.create_sandbox(template="py")
    key = {"sandbox_id": sb["id"]}
    path = "/v1/sandboxes/" + sb["id"]
    c.run_code("x = 41", **key)
    c.contexts.create(key, "kept")
    c.run_code("k = 'named'", "kept", **key)
    p = c._call("POST", path + "/pause?tier=freeze")
    check("the context's sandbox is frozen", p.get("state") == "frozen" and
          c.get_sandbox(sb["id"]).get("state") == "frozen", p)
    x = c.run_code("x + 1", **key)
    check("a context survives a freeze and resume of its sandbox: x + 1 answers 42 (the run "
          "resumes the frozen sandbox)", x.status == "ok" and x.text == "42" and
          not x.state_lost and c.get_sandbox(sb["id"]).get("state") == "running", vars(x))
    check("a named context survives the freeze too", in_kernel(c, key, "k", "kept") == "'named'")
    p = c._call("POST", path + "/pause?tier=stop")
    check("the context's sandbox is stopped", p.get("state") == "stopped", p)
    x = c.run_code("'x' in dir()", **key)
    check("after a stop the next run says the state was lost (the run resumes the sandbox)",
          x.status == "ok" and x.text == "False" and x.state_lost and
          "stopped" in x.state_lost, vars(x))
    check("after the stop the default context works again", in_kernel(c, key, "6 * 7") == "42")
    try:
        c.run_code("k", "kept", **key)
        gone = None
    except SandmanError as e:
        gone = (e.status, e.error)
    check("after the stop a named context is gone (404, no context)", gone is not None and
          gone[0] == 404 and "no context" in gone[1], gone)
    # Stopped, then brought back by the resume route before the run: the run
    # has a fresh kernel; it never answers from the old state.
    c._call("POST", path + "/pause?tier=stop")
    p = c._call("POST", path + "/resume")
    x = c.run_code("'x' in dir()", **key)
    check("stopped and resumed by the route: the next run has none of the old state",
          p.get("state") == "running" and x.status == "ok" and x.text == "False", (p, vars(x)))
    c.delete_sandbox(sb["id"])


def engine_checkpoints():
    """What the engine reports: does it offer checkpoints (its experimental
    mode)? Never guessed: a docker that does not answer fails the test."""
    out = subprocess.run(["docker", "info", "-f", "{{.ExperimentalBuild}}"], capture_output=True,
                         text=True, check=True).stdout.strip()
    check("the engine says whether it offers checkpoints", out in ("true", "false"), out)
    return out == "true"


def rest_hibernate(r, c):
    """A context across hibernate (docs/code.md, docs/state.md), in a gVisor
    sandbox (template pyg, runtime runsc): on an engine with checkpoints the
    kernel is written to disk and restored with its variables, imports and
    data; without them hibernate is refused (409) and the context answers."""
    sb = c.create_sandbox(template="pyg")
    key = {"sandbox_id": sb["id"]}
    path = "/v1/sandboxes/" + sb["id"]
    x = c.run_code("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\nx = 41", **key)
    check("gVisor: a context runs", x.status == "ok", vars(x))
    c.contexts.create(key, "kept")
    c.run_code("k = 'named'", "kept", **key)
    if engine_checkpoints():
        p = c._call("POST", path + "/pause?tier=hibernate")
        check("the context's sandbox is hibernated", p.get("state") == "hibernated" and
              c.get_sandbox(sb["id"]).get("state") == "hibernated", p)
        x = c.run_code("x + 1 + int(df.a.sum())", **key)
        check("a context survives hibernate and restore of its sandbox (x and a DataFrame)",
              x.status == "ok" and x.text == "48" and not x.state_lost and
              c.get_sandbox(sb["id"]).get("state") == "running", vars(x))
        check("a named context survives hibernate too", in_kernel(c, key, "k", "kept") == "'named'")
        x = c.run_code("import subprocess\nsubprocess.run(['echo', 'from a child'])", **key)
        check("after the restore a child process's output still comes back",
              x.status == "ok" and "from a child" in "".join(x.logs.stdout), vars(x))
    else:
        try:
            c._call("POST", path + "/pause?tier=hibernate")
            st = 200
        except SandmanError as e:
            st = (e.status, e.error)
        check("hibernate on an engine without checkpoints: refused (409, experimental mode)",
              st != 200 and st[0] == 409 and "experimental" in st[1], st)
        check("after the refusal the context still answers", in_kernel(c, key, "x + 1") == "42")
    c.delete_sandbox(sb["id"])


def suite_runner(tmp):
    cfg = os.path.join(tmp, "sandman.yaml")
    with open(cfg, "w") as f:
        f.write("version: 1\ntemplates:\n  py:\n    image: %s\n    memory: 768m\n"
                "  pyg:\n    image: %s\n    memory: 768m\n    runtime: runsc\n"
                "defaults:\n  templates: [py, pyg]\n" % (IMAGE, IMAGE))
    os.environ["SANDMAN_CONFIG"] = cfg
    r = ts.Runner(tmp, runner_args(["--code-queue", "3", "--code-max-contexts", "3"]))
    c = r.client
    key = {"run_id": "code-1"}
    try:
        t0 = time.monotonic()
        state_and_results(c, key)
        print("# state and results took %.1f s" % (time.monotonic() - t0))
        timeouts_and_death(c, key)
        two_contexts(c, key)
        inside(c, key)
        isolation(r, c)
        limits(r, c)
        by_sandbox_id(r, c)
        rest_tiers(r, c)
        rest_hibernate(r, c)
        audit(r, c)
    finally:
        code = r.stop()
    check("runner exits 0", code == 0, code)


def limits(r, c):
    key = {"run_id": "code-limits"}
    evs = run(c, "print('x' * 300000)", max_output=100000, **key)
    got = sum(len(e.get("text", "")) for e in evs if e["event"] == "stdout")
    check("a run's output is capped at its max_output and the cap is said",
          got <= 100000 and any(e["event"] == "truncated" for e in evs) and
          end_of(evs).get("truncated") is True and end_of(evs).get("status") == "ok",
          (got, [e["event"] for e in evs]))
    for name in ("c2", "c3"):
        c.contexts.create(key, name)
    try:
        c.contexts.create(key, "c4")
        status = 201
    except SandmanError as e:
        status = (e.status, e.error)
    check("the sandbox's limit of contexts (--code-max-contexts 3) holds", status[0] == 429 and
          "limit" in status[1], status)
    # Three runs at once hold the sandbox's queue (--code-queue 3): a fourth
    # waits for none. The cells wait until the test lets them go (a file
    # made by an execute call, which the code queue does not count).
    started = threading.Barrier(4)
    results = []

    def held(ctx):
        started.wait()
        results.append(c.run_code(hold_cell("/tmp/go-limit"), ctx, **key).status)
    threads = [threading.Thread(target=held, args=(n,)) for n in ("default", "c2", "c3")]
    for t in threads:
        t.start()
    started.wait()
    busy = poll(lambda: sum(1 for x in c.contexts.list(key) if x["state"] == "busy") == 3)
    status = None
    if busy:
        try:
            c.run_code("1", "default", **key)
            status = 200
        except SandmanError as e:
            status = e.status
    release(c, key, "/tmp/go-limit")
    for t in threads:
        t.join(300)
    check("a sandbox's runs are limited (--code-queue 3): the fourth is 429", busy and
          status == 429 and results == ["ok"] * 3, (busy, status, results))
    # Runs of one context go in order: the first holds the context; each
    # next one is sent once the runner counts the one before it as queued.
    order = []
    lock = threading.Lock()

    def nth(i, code):
        x = c.run_code(code, "c2", **key)
        with lock:
            order.append((x.execution_count, x.text))
    ts_ = [threading.Thread(target=nth, args=(0, hold_cell("/tmp/go-order") + "\n0"))]
    ts_[0].start()
    arrived = poll(lambda: c.contexts.get(key, "c2")["state"] == "busy")
    for i in (1, 2):
        t = threading.Thread(target=nth, args=(i, str(i)))
        t.start()
        ts_.append(t)
        arrived = arrived and poll(lambda: c.contexts.get(key, "c2")["queued"] == i)
    check("a context's queued runs are counted", arrived)
    release(c, key, "/tmp/go-order")
    for t in ts_:
        t.join(300)
    order.sort()
    check("runs of one context are served in the order they came",
          [v for _, v in order] == ["0", "1", "2"], order)


def hold_cell(path):
    """A cell that waits (at most 300 s) until path exists."""
    return ("import os, time\nfor _ in range(3000):\n    if os.path.exists(%r):\n"
            "        break\n    time.sleep(0.1)" % path)


def release(c, key, path):
    """Lets hold_cell(path) go: an execute call in the same sandbox."""
    out = c.execute(command="touch " + path, **key)
    check("execute in the sandbox lets the held cells go", out.get("exit_code") == 0, out)


def poll(cond, limit_s=120):
    """A bounded poll: True once cond() holds, False after limit_s."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


def audit(r, c):
    events = c._call("GET", "/v1/audit?limit=10000")["events"]
    runs = [e for e in events if e.get("unmapped", {}).get("event") == "code.run"]
    refused = [e for e in events if e.get("unmapped", {}).get("event") == "code.refused"]
    check("every run is an audit row (code.run, with its context and status)",
          len(runs) >= 20 and all(e["unmapped"].get("context") and e["unmapped"].get("status")
                                  for e in runs), (len(runs), runs[:2]))
    check("the refused lease and the full queue are audited (code.refused)",
          len(refused) >= 2, refused)


# ---------------------------------------------------------------- cli

def suite_cli(tmp):
    base = [ts.SANDMAN, "code", "--run-id", "code-cli", "--image", IMAGE, "--network", "none"]

    def code(*args, stdin=None):
        return subprocess.run(base + list(args), capture_output=True, text=True, input=stdin,
                              timeout=600)
    p = code("-c", "y = 5\nprint('set')")
    check("sandman code runs code (exit 0, stdout)", p.returncode == 0 and p.stdout == "set\n",
          (p.returncode, p.stdout, p.stderr))
    p = code("-c", "y * 2")
    check("the next invocation finds the state: the value on stdout", p.returncode == 0 and
          p.stdout == "10\n", (p.returncode, p.stdout, p.stderr))
    p = code("-", stdin="y + 1\n")
    check("code from standard input", p.stdout == "6\n", (p.stdout, p.stderr))
    p = code("-c", "raise ValueError('bad thing')")
    check("an exception: exit 1, the traceback on stderr", p.returncode == 1 and
          "ValueError: bad thing" in p.stderr and p.stdout == "", (p.returncode, p.stderr))
    imgs = os.path.join(tmp, "imgs")
    os.makedirs(imgs)
    p = code("--save-images", imgs, "-c", "import matplotlib.pyplot as plt\nplt.plot([1,2])\n"
             "plt.show()")
    files = sorted(os.listdir(imgs))
    size = None
    if files:
        import base64
        with open(os.path.join(imgs, files[0]), "rb") as f:
            try:
                size = png_size(base64.b64encode(f.read()))
            except (ValueError, zlib.error, struct.error) as e:
                size = repr(e)
    check("--save-images writes the figure as a valid PNG and says where",
          p.returncode == 0 and files == ["image-1.png"] and isinstance(size, tuple) and
          "image saved" in p.stderr, (p.returncode, files, size, p.stderr))
    p = code("--json", "-c", "print('a')\n3")
    evs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    check("--json prints the events", [e["event"] for e in evs] ==
          ["start", "stdout", "result", "end"] and evs[2]["data"]["text/plain"] == "3", evs)
    p = code("--timeout", "2", "-c", "while True: pass")
    check("a timeout: exit 124 and it says so", p.returncode == 124 and "timeout" in p.stderr,
          (p.returncode, p.stderr))
    p = code("--context", "other", "-c", "1")
    check("a named context that does not exist: exit 125 and why", p.returncode == 125 and
          "no context" in p.stderr, (p.returncode, p.stderr))
    p = code("--context", "other", "--create")
    p2 = code("--list", "--json")
    names = sorted(x["name"] for x in json.loads(p2.stdout or "[]"))
    check("--create and --list", p.returncode == 0 and names == ["default", "other"],
          (p.stderr, p2.stdout, p2.stderr))
    p = code("--context", "other", "--delete")
    p2 = code("--context", "other", "--info")
    check("--delete, then --info fails", p.returncode == 0 and p2.returncode == 125,
          (p.stderr, p2.stderr))
    p = subprocess.run([ts.SANDMAN, "code", "-c", "1"], capture_output=True, text=True)
    check("no keyed sandbox named: a usage error", p.returncode == 2 and "--run-id" in p.stderr,
          p.stderr)
    # A sandbox made ahead (`sandman sandbox create`), named by its id.
    made = subprocess.run([ts.SANDMAN, "sandbox", "create", "--image", IMAGE, "--mem", "768m",
                           "--network", "none"], capture_output=True, text=True, timeout=300)
    sid = made.stdout.strip()
    p = subprocess.run([ts.SANDMAN, "code", sid, "-c", "w = 'made'"], capture_output=True,
                       text=True, timeout=300)
    p2 = subprocess.run([ts.SANDMAN, "code", sid, "-c", "w"], capture_output=True, text=True,
                        timeout=300)
    check("SANDBOX: a sandbox made ahead, named by its id, keeps a context's state",
          made.returncode == 0 and p.returncode == 0 and p2.stdout == "'made'\n",
          (made.stderr, p.stderr, p2.stdout, p2.stderr))
    p = subprocess.run([ts.SANDMAN, "code", "nosuch-sandbox", "-c", "1"], capture_output=True,
                       text=True)
    check("SANDBOX that does not exist: exit 125", p.returncode == 125, (p.returncode, p.stderr))


def mcp_stdio(tmp):
    """run_code over `sandman mcp` (stdio): state kept, a figure as MCP image content."""
    p = subprocess.Popen([ts.SANDMAN, "mcp", "--mode", "per_run", "--run-id", "code-mcp",
                          "--image", IMAGE, "--network", "none"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ask(i, method, params):
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                  "params": params}) + "\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline())
    try:
        ask(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "it", "version": "1"}})
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        tools = ask(2, "tools/list", {})["result"]["tools"]
        rc = [t for t in tools if t["name"] == "run_code"]
        check("MCP: tools/list offers run_code", len(rc) == 1 and
              "code" in rc[0]["inputSchema"]["properties"], [t["name"] for t in tools])
        ask(3, "tools/call", {"name": "run_code", "arguments": {"code": "z = 20"}})
        r = ask(4, "tools/call", {"name": "run_code", "arguments": {"code": "z + 22"}})["result"]
        check("MCP: run_code keeps state; the value in the text", not r.get("isError") and
              "Out: 42" in r["content"][0]["text"] and
              r["structuredContent"]["results"][0]["text"] == "42", r)
        r = ask(5, "tools/call", {"name": "run_code", "arguments": {
            "code": "import matplotlib.pyplot as plt\nplt.plot([3, 1, 2])\nplt.show()"}})["result"]
        imgs = [b for b in r["content"] if b["type"] == "image"]
        size = None
        try:
            size = png_size(imgs[0]["data"]) if imgs else None
        except (ValueError, zlib.error, struct.error) as e:
            size = repr(e)
        check("MCP: a figure comes back as an image content block (a valid PNG)",
              len(imgs) == 1 and imgs[0]["mimeType"] == "image/png" and isinstance(size, tuple) and
              "image 1" in r["structuredContent"]["results"][0]["png"],
              (size, [b["type"] for b in r["content"]]))
        r = ask(6, "tools/call", {"name": "run_code", "arguments": {"code": "1/0"}})["result"]
        check("MCP: an exception is a tool error with its traceback", r.get("isError") is True and
              "ZeroDivisionError" in r["content"][0]["text"] and
              r["structuredContent"]["error"]["name"] == "ZeroDivisionError", r)
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
    check("MCP: sandman mcp exits 0 when stdin ends", p.returncode == 0, p.stderr.read()[-2000:])


def mcp_task(tmp):
    """run_code as a task of MCP 2026-07-28 (no initialize; the tasks
    extension declared in each request's _meta), written from the spec."""
    p = subprocess.Popen([ts.SANDMAN, "mcp", "--mode", "per_run", "--run-id", "code-mcp-task",
                          "--image", IMAGE, "--network", "none"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "it", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {
                "extensions": {"io.modelcontextprotocol/tasks": {}}}}
    n = [0]

    def ask(method, params):
        n[0] += 1
        params = dict(params, _meta=meta)
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n[0], "method": method,
                                  "params": params}) + "\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline())
    try:
        t = ask("tools/call", {"name": "run_code", "arguments": {
            "code": "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n6 * 7"}})
        task = t.get("result", {})
        done = task
        for _ in range(600):  # a bounded poll: until the task leaves "working"
            if done.get("status") != "working":
                break
            done = ask("tasks/get", {"taskId": task["taskId"]}).get("result", {})
            time.sleep(0.2)
        r = done.get("result", {})
        kinds = [b["type"] for b in r.get("content", [])]
        check("MCP 2026-07-28: run_code runs as a task and its result has the value and the image",
              task.get("resultType") == "task" and done.get("status") == "completed" and
              "Out: 42" in r["content"][0]["text"] and kinds.count("image") == 1,
              (task, done.get("status"), kinds))
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()


def suite_cli_and_mcp(tmp):
    suite_cli(tmp)
    mcp_stdio(tmp)
    mcp_task(tmp)


def main():
    ts.run_suites({"runner": suite_runner, "cli": suite_cli_and_mcp}, "runner", "smcode-")


if __name__ == "__main__":
    main()
