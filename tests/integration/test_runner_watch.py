#!/usr/bin/env python3
"""The runner's file events (GET /v1/files/watch) against the real engine,
with the Python client (clients/python: Files.watch). Run by
test_runner_watch.sh.

  watch   a file created, appended, renamed and deleted by tool calls gives
          created, modified, moved (from/to) and deleted, in order; a tool
          writing thousands of files while the client reads nothing gives
          an "overflow" event and the watch goes on; a foreign token is
          refused (401; another worker's sandbox 404); a path leaving
          /workspace, through a link, or a link itself is refused (403);
          a link to a folder outside the workspace planted in the watched
          tree is never followed; caps per sandbox and per token (403); the
          stream ends with its reason when the sandbox is frozen or
          removed, and a client that goes away lets go of the sandbox.
  cli     `sandman files watch`: the events on stdout, SIGINT ends it (0), a
          link refused (1), a missing sandbox 125 and none made.

Uses test_server.py's helpers (check, Runner, cleanup).
"""
import json
import os
import queue
import signal
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402
from sandman_client import Client, derive_worker_token  # noqa: E402

check = ts.check
WAIT_S = 120


def runner_args(queue_len):
    return ["--pool", "it-watch", "--sandbox-mode", "per_run", "--sandbox-backend", "docker",
            "--sandbox-image", "sandman/minimal:latest", "--sandbox-network", "none",
            "--sandbox-cpu", "1", "--sandbox-mem", "256m", "--sandbox-pids", "128",
            "--sandbox-disk", "256m", "--project-environment", "development",
            "--watch-queue", str(queue_len), "--watches-per-sandbox", "2",
            "--watches-per-token", "3"]


class Reader:
    """Reads a FileWatch on a thread of its own into a queue, so that the
    test waits for an event with a bound."""

    def __init__(self, watch):
        self.watch = watch
        self.q = queue.Queue()
        self.seen = []
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            for ev in self.watch:
                self.q.put(ev)
        except Exception as e:  # noqa: BLE001 (a closed connection ends it)
            self.q.put({"event": "reader-error", "error": repr(e)})
        self.q.put(None)

    def until(self, pred, timeout=WAIT_S):
        """Events up to the first that pred accepts (None if the stream
        ended or the bound passed first)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                ev = self.q.get(timeout=max(0.05, deadline - time.time()))
            except queue.Empty:
                break
            if ev is None:
                return None
            self.seen.append(ev)
            if pred(ev):
                return ev
        return None


def is_event(kind, path=None, **fields):
    def pred(ev):
        if ev.get("event") != kind or (path is not None and ev.get("path") != path):
            return False
        return all(ev.get(k) == v for k, v in fields.items())
    return pred


def status(fn):
    try:
        fn()
        return 200
    except ts.SandmanError as e:
        return e.status


def run(c, command, **key):
    res = c.execute(command=command, **key)
    if res.get("exit_code") != 0:
        raise RuntimeError("tool failed: %r" % res)
    return res


def events_in_order(c, key):
    # A link to a folder outside the workspace, there before the watch:
    # the watch's first walk of the tree never follows it.
    run(c, "mkdir -p /tmp/outside0 pre && ln -s /tmp/outside0 pre/out", **key)
    w = c.files.watch(key, ".", recursive=True)
    r = Reader(w)
    run(c, "printf s > /tmp/outside0/secret0 && printf t > pre/mark", **key)
    r.until(is_event("created", "pre/mark"))
    check("a link to a folder outside, there before the watch, is not followed",
          not any("secret0" in (e.get("path") or "") for e in r.seen), r.seen)
    run(c, "mkdir -p src && printf 'one\\n' > src/a.txt", **key)
    check("a file the tool created: created", r.until(is_event("created", "src/a.txt")) is not None,
          r.seen)
    run(c, "printf 'two\\n' >> src/a.txt", **key)
    check("appended: modified", r.until(is_event("modified", "src/a.txt")) is not None, r.seen)
    run(c, "mv src/a.txt src/b.txt", **key)
    ev = r.until(is_event("moved", "src/b.txt"))
    check("renamed: moved with from and to",
          ev is not None and ev.get("from") == "src/a.txt" and ev.get("to") == "src/b.txt", ev)
    run(c, "rm src/b.txt", **key)
    check("deleted: deleted", r.until(is_event("deleted", "src/b.txt")) is not None, r.seen)
    # A file in a folder made while the watch runs may be told created
    # twice (once by the folder's scan): the order of first mentions counts.
    firsts = []
    for e in r.seen:
        if e.get("path", "").startswith("src/") and e["event"] not in firsts:
            firsts.append(e["event"])
    check("in the order they happened", firsts == ["created", "modified", "moved", "deleted"],
          r.seen)
    # A link to a folder outside the workspace, planted in the watched
    # tree: its target's changes are never told (the link is not followed).
    run(c, "mkdir -p /tmp/outside && ln -s /tmp/outside src/out && "
        "printf s > /tmp/outside/secret && printf t > src/after-link", **key)
    r.until(is_event("created", "src/after-link"))
    check("a planted link to a folder is told as itself, not followed",
          any(e.get("path") == "src/out" and e.get("dir") is False for e in r.seen)
          and not any("secret" in (e.get("path") or "") for e in r.seen), r.seen)
    w.close()
    return w.sandbox_id


def overflow(c, key):
    run(c, "mkdir -p flood", **key)
    w = open_watch(c, key, "flood")
    # The client reads nothing while the tool writes: the runner's pipe to
    # it fills, then its queue (--watch-queue 16), then "overflow".
    name = "f" * 200
    run(c, "i=0; while [ $i -lt 4000 ]; do echo x > flood/%s-$i; i=$((i+1)); done" % name,
        **key)
    r = Reader(w)
    ov = r.until(is_event("overflow"))
    check("a tool writing faster than the queue: an overflow event", ov is not None,
          r.seen[-3:])
    check("the overflow says how many events the runner dropped",
          ov is not None and isinstance(ov.get("dropped"), int) and ov["dropped"] > 0, ov)
    # A file made while the queue is still full is lost too (told as the
    # overflow): once the client has caught up, new files are told again.
    told = None
    for i in range(20):
        run(c, "printf z > flood/after-overflow-%d" % i, **key)
        told = r.until(is_event("created", "flood/after-overflow-%d" % i), timeout=10)
        if told is not None:
            break
    check("the watch goes on after an overflow", told is not None, r.seen[-3:])
    w.close()


def refusals(c, token, key, sandbox_id):
    run(c, "ln -sfn /etc lnk && mkdir -p real", **key)
    for path, why in (("../etc", "'..'"), ("/etc", "an absolute path outside /workspace"),
                      ("lnk", "a link itself"), ("lnk/ssl", "a path through a link")):
        try:
            c.files.watch_dir(key, path).close()
            got = (200, None)
        except ts.SandmanError as e:
            got = (e.status, e.failure_kind)
        check("a watch of %s is refused (403 policy)" % why, got == (403, "policy"), got)
    run(c, "printf f > plain-file", **key)
    for path, want, why in (("no-such-folder", 404, "a missing folder"),
                            ("plain-file", 400, "a file")):
        try:
            c.files.watch(key, path).close()
            got = (200, None)
        except ts.SandmanError as e:
            got = (e.status, e.failure_kind)
        check("a watch of %s: %d (tool)" % (why, want), got == (want, "tool"), got)
    a = Client(c.address, derive_worker_token(token, "watch-a"), timeout=120)
    check("a worker token naming another worker's key: 401",
          status(lambda: a.files.watch({"worker_key": "watch-b", "mode": "per_worker"},
                                       ".").close()) == 401)
    check("a worker token naming the operator's sandbox by id: 404",
          status(lambda: a.files.watch({"worker_key": "watch-a", "sandbox_id": sandbox_id},
                                       ".").close()) == 404)


def caps(c, token):
    a = Client(c.address, derive_worker_token(token, "watch-caps"), timeout=120)
    k1 = {"worker_key": "watch-caps", "run_id": "cap-1"}
    k2 = {"worker_key": "watch-caps", "run_id": "cap-2"}
    held = [a.files.watch(k1, "."), a.files.watch(k1, ".")]
    try:
        a.files.watch(k1, ".").close()
        got = None
    except ts.SandmanError as e:
        got = (e.status, str(e))
    check("a third watch in one sandbox: 403 (--watches-per-sandbox 2)",
          got is not None and got[0] == 403 and "watches-per-sandbox" in got[1], got)
    held.append(open_watch(a, k2))
    try:
        a.files.watch(k2, ".").close()
        got = None
    except ts.SandmanError as e:
        got = (e.status, str(e))
    check("a fourth watch of one token: 403 (--watches-per-token 3)",
          got is not None and got[0] == 403 and "watches-per-token" in got[1], got)
    try:
        open_watch(c, {"run_id": "watch-1"}).close()
        other = 200
    except ts.SandmanError as e:
        other = e.status
    check("another token's watch is not counted against it", other == 200, other)
    for w in held:
        w.close()


def open_watch(c, key, path="."):
    """A watch, once the earlier ones (closed or refused in this test) have
    let go of their share: a watch counts until its call has ended."""
    deadline = time.time() + WAIT_S
    while True:
        try:
            return c.files.watch(key, path)
        except ts.SandmanError as e:
            if e.status != 403 or "watches-per-" not in e.error or time.time() > deadline:
                raise
            time.sleep(0.2)


def pause_no_wait(c, sandbox_id):
    path = "/v1/sandboxes/%s/pause?no_wait=1" % urllib.parse.quote(sandbox_id)
    st, body, _ = c.request("POST", path, {})
    return st, body


def folder_gone(c, key):
    run(c, "mkdir -p gone", **key)
    w = open_watch(c, key, "gone")
    r = Reader(w)
    run(c, "rm -r gone", **key)
    ev = r.until(is_event("end"))
    check("the watched folder removed: end, reason deleted",
          ev is not None and ev.get("reason") == "deleted", r.seen)


def ends(c, key, sandbox_id):
    # A client that goes away ends its watch: the sandbox can then be
    # frozen at once (no_wait), which a call in flight would refuse (409).
    w = open_watch(c, key)
    w.close()
    deadline, st = time.time() + WAIT_S, None
    while time.time() < deadline:
        st, body = pause_no_wait(c, sandbox_id)
        if st != 409:
            break
        time.sleep(0.2)
    check("a client gone lets go of the sandbox (a pause with no_wait succeeds)", st == 200, body)
    c.request("POST", "/v1/sandboxes/%s/resume" % sandbox_id, {})
    w = open_watch(c, key)
    r = Reader(w)
    st, body, _ = c.request("POST", "/v1/sandboxes/%s/pause" % sandbox_id, {})
    check("a sandbox with a watch can be frozen through the runner", st == 200, body)
    ev = r.until(is_event("end"))
    check("the watch's last event: end, reason frozen",
          ev is not None and ev.get("reason") == "frozen", r.seen)
    c.request("POST", "/v1/sandboxes/%s/resume" % sandbox_id, {})
    w = open_watch(c, key)
    r = Reader(w)
    st, body, _ = c.request("POST", "/v1/sandboxes/%s/pause?tier=stop" % sandbox_id, {})
    ev = r.until(is_event("end"))
    check("stopped through the runner: end, reason stopped",
          st == 200 and ev is not None and ev.get("reason") == "stopped", (st, body, r.seen))
    c.request("POST", "/v1/sandboxes/%s/resume" % sandbox_id, {})
    w = open_watch(c, key)
    r = Reader(w)
    c.delete_sandbox(sandbox_id)
    ev = r.until(is_event("end"))
    check("removed: end, reason removed", ev is not None and ev.get("reason") == "removed", r.seen)
    check("nothing after the end", r.until(lambda e: True, timeout=5) is None, r.seen[-2:])


def suite_watch(tmp):
    r = ts.Runner(tmp, runner_args(16))
    c = r.client
    key = {"run_id": "watch-1"}
    try:
        sandbox_id = events_in_order(c, key)
        overflow(c, key)
        refusals(c, r.token, key, sandbox_id)
        caps(c, r.token)
        folder_gone(c, key)
        ends(c, key, sandbox_id)
        # A watch running when the runner stops ends with its reason; under
        # the sanitizers a leak or an error is a non-zero exit.
        last = Reader(c.files.watch({"run_id": "watch-2"}, "."))
        rc = r.stop()
        ev = last.until(is_event("end"))
        check("the runner stopping: end, reason runner_stopping",
              ev is not None and ev.get("reason") == "runner_stopping", last.seen)
        check("the runner stops cleanly with its watches ended (exit 0)", rc == 0,
              r.read_log()[-3000:])
    finally:
        r.stop()


def suite_cli(tmp):
    """`sandman files watch`: the same events on stdout, against the engine."""
    import subprocess

    def sandman(*args):
        return subprocess.run([ts.SANDMAN] + list(args), capture_output=True, timeout=WAIT_S)

    made = sandman("run", "--run-id", "watch-cli", "--mode", "per_run", "--", "sh", "-c",
                   "mkdir -p w && ln -sfn /etc lnk")
    check("the sandbox is made by a call", made.returncode == 0, made.stderr)
    out_path = os.path.join(tmp, "events")
    with open(out_path, "w") as out:
        p = subprocess.Popen([ts.SANDMAN, "files", "watch", "--run-id", "watch-cli", "-r", "w"],
                             stdout=out, stderr=subprocess.PIPE)

    def lines():
        with open(out_path) as f:
            return [json.loads(x) for x in f if x.strip()]

    def wait_for(pred):
        deadline = time.time() + WAIT_S
        while time.time() < deadline and p.poll() is None:
            if any(pred(e) for e in lines()):
                return True
            time.sleep(0.1)
        return any(pred(e) for e in lines())
    try:
        check("files watch: ready once the watches are in place",
              wait_for(is_event("ready")), lines())
        sandman("run", "--run-id", "watch-cli", "--mode", "per_run", "--", "sh", "-c",
                "printf a > w/f && mv w/f w/g")
        check("files watch: created, then moved with from and to",
              wait_for(is_event("moved", "w/g", **{"from": "w/f"})) and
              wait_for(is_event("created", "w/f")), lines())
    finally:
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=WAIT_S)
    check("files watch: SIGINT ends it, exit 0", rc == 0, (rc, p.stderr.read()))
    r = sandman("files", "watch", "--run-id", "watch-cli", "lnk")
    check("files watch: a link as the folder is refused (exit 1)",
          r.returncode == 1 and b"symbolic link" in r.stderr, (r.returncode, r.stderr))
    sid = next((e.get("sandbox_id") for e in lines() if e.get("event") == "ready"), "")
    r = sandman("files", "watch", sid[:12], "lnk/ssl")
    check("files watch: SANDBOX by its id, a path through a link refused (exit 1)",
          len(sid) >= 12 and r.returncode == 1 and b"symbolic link" in r.stderr,
          (sid, r.returncode, r.stderr))
    r = sandman("files", "watch", "--run-id", "watch-cli-missing", ".")
    check("files watch: no such sandbox, exit 125, none made",
          r.returncode == 125 and not ts.instance_containers(
              "label=io.sandman.run=watch-cli-missing"), (r.returncode, r.stderr))


def main():
    ts.run_suites({"watch": suite_watch, "cli": suite_cli}, "watch", "smwatch-")


if __name__ == "__main__":
    main()
