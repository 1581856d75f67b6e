#!/usr/bin/env python3
"""A keystroke's echo round trip on a terminal, side by side in one run, in
the same sandbox (one per_run sandbox of the runner):

  runner terminal   a WebSocket attached to the runner's terminal
                    (/v1/terminals, the Python client): a byte typed, its
                    echo back
  sandman exec -it  the CLI on a pseudo-terminal (python's pty), through
                    sandman's agent, no runner
  docker exec -it   the docker CLI on a pseudo-terminal, the engine's own
                    terminal

Both the engine's default runtime and gVisor (runsc), each in a sandbox of
its own. The program is `cat` on the terminal: the echo is the terminal's own (its
line discipline in the sandbox), so every method measures the way in and
out, not a program. Each round types one byte and waits for it to come
back; every 50 bytes an Enter (not counted) empties the line. The methods
take turns keystroke by keystroke, so the machine's changing load weighs
on each alike. The first rounds warm up and are not counted. Prints a table of median, p90 and p99
in ms and writes bench/results/terminal.{json,md}, with the machine's load.

  python3 bench/terminal/run.py [--rounds N] [--runtimes default,runsc]
"""
import argparse
import json
import os
import platform
import pty
import secrets
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "clients", "python"))
from sandman_client import Client  # noqa: E402

WARMUP = 20


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


class PtyProgram:
    """A program on a pseudo-terminal of ours, driven byte by byte."""

    def __init__(self, argv, env=None):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            if env:
                os.environ.update(env)
            os.execvp(argv[0], argv)
        self.buf = b""

    def send(self, b):
        os.write(self.fd, b)

    def wait_for(self, b, timeout=30.0):
        deadline = time.perf_counter() + timeout
        while b not in self.buf:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError("no %r within %.0f s: %r" % (b, timeout, self.buf[-200:]))
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                self.buf += os.read(self.fd, 65536)
        self.buf = self.buf[self.buf.index(b) + len(b):]

    def settle(self):
        """Reads what is on its way until nothing comes for 300 ms."""
        while select.select([self.fd], [], [], 0.3)[0]:
            os.read(self.fd, 65536)
        self.buf = b""

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


class WsProgram:
    """The runner's terminal through an attached WebSocket."""

    def __init__(self, conn):
        self.c = conn
        self.buf = b""

    def send(self, b):
        self.c.send(b)

    def wait_for(self, b, timeout=30.0):
        deadline = time.perf_counter() + timeout
        while b not in self.buf:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError("no %r within %.0f s" % (b, timeout))
            ev = self.c.recv(left)
            if ev and ev[0] == "output":
                self.buf += ev[1]
        self.buf = self.buf[self.buf.index(b) + len(b):]

    def settle(self):
        """Reads what is on its way until nothing comes for 300 ms."""
        while True:
            ev = self.c.recv(0.3)
            if ev is None or ev[0] == "timeout":
                break
        self.buf = b""

    def close(self):
        self.c.close()


def rounds(progs, n):
    """n keystrokes' echo times in ms per program (after the warm-up), the
    programs taking turns keystroke by keystroke so that the machine's
    load (shared, changing) weighs on each alike."""
    times = [[] for _ in progs]
    letters = b"abcdefghijklmnopqrstuvwxyz"
    line = b""
    for p in progs:
        p.settle()
    for i in range(WARMUP + n):
        if i and i % 50 == 0:
            # Enter: its echo, then cat's copy of the line; then nothing is left.
            for p in progs:
                p.send(b"\r")
                p.wait_for(b"\r\n" + line + b"\r\n")
                p.settle()
            line = b""
        k = letters[i % 26:i % 26 + 1]
        for j, p in enumerate(progs):
            p.buf = b""
            t = time.perf_counter()
            p.send(k)
            p.wait_for(k)
            if i >= WARMUP:
                times[j].append((time.perf_counter() - t) * 1000.0)
        line += k
    return times


def summary(v):
    return {"median_ms": round(statistics.median(v), 2), "p90_ms": round(pct(v, 90), 2),
            "p99_ms": round(pct(v, 99), 2), "n": len(v)}


def write_report(a, by_runtime, load_before):
    load = os.getloadavg()
    report = {"rounds": a.rounds, "image": a.image, "host": platform.node(),
              "cpus": os.cpu_count(), "loadavg_before": [round(x, 2) for x in load_before],
              "loadavg_after": [round(x, 2) for x in load],
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "results": by_runtime}
    lines = ["# A keystroke's echo round trip (bench/terminal/run.py)", "",
             "`cat` on a terminal in one per_run sandbox of %s per runtime, %d keystrokes per "
             "method after %d of warm-up, %d CPUs, load %s before and %s after (compare the "
             "methods within a run: on a shared machine the timings are noisy), %s." %
             (a.image, a.rounds, WARMUP, os.cpu_count(),
              " ".join("%.2f" % x for x in load_before), " ".join("%.2f" % x for x in load),
              report["date"]), ""]
    for runtime, results in by_runtime.items():
        lines += ["## runtime %s" % runtime, "", "| method | median ms | p90 ms | p99 ms |",
                  "|---|---|---|---|"]
        for name, v in results.items():
            lines.append("| %s | %.2f | %.2f | %.2f |" % (name, v["median_ms"], v["p90_ms"],
                                                          v["p99_ms"]))
        lines.append("")
    text = "\n".join(lines)
    print(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "terminal.json"), "w") as f:
        json.dump(report, f, indent=2)
    with open(os.path.join(a.out, "terminal.md"), "w") as f:
        f.write(text)


def cleanup(instance):
    ids = subprocess.run(["docker", "ps", "-aq", "--filter", "label=io.sandman.instance=" + instance],
                         capture_output=True, text=True).stdout.split()
    if ids:
        subprocess.run(["docker", "rm", "-fv"] + ids, capture_output=True)
    vols = subprocess.run(["docker", "volume", "ls", "-q", "--filter",
                           "label=io.sandman.instance=" + instance],
                          capture_output=True, text=True).stdout.split()
    if vols:
        subprocess.run(["docker", "volume", "rm", "-f"] + vols, capture_output=True)


def measure(a, tmp, runtime):
    """The three methods in one sandbox of a runner with that runtime."""
    tok = secrets.token_hex(24)
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(tok)
    os.chmod(os.path.join(tmp, "token"), 0o600)
    sock = os.path.join(tmp, "s-%s.sock" % (runtime or "default"))
    log = open(os.path.join(tmp, "runner.log"), "a")
    args = [a.sandman, "worker", "start", "--listen", "unix:" + sock, "--token-file",
            os.path.join(tmp, "token"), "--sandbox-mode", "per_run", "--sandbox-image", a.image,
            "--sandbox-network", "none", "--project-environment", "development"]
    if runtime:
        args += ["--sandbox-runtime", runtime]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    c = Client("unix:" + sock, tok)
    progs = []
    run = "bench-" + (runtime or "default")
    try:
        for _ in range(300):
            try:
                c.healthz()
                break
            except OSError:
                time.sleep(0.1)
        r = c.execute(command="true", run_id=run)  # makes the sandbox
        cid = r["sandbox_id"]
        t = c.terminals.create(run_id=run, argv=["cat"])
        ws = WsProgram(c.terminals.attach(t["id"]))
        exec_cli = PtyProgram([a.sandman, "exec", "-it", "--run-id", run, "--", "cat"],
                              {"SANDMAN_STATE_DIR": os.environ["SANDMAN_STATE_DIR"]})
        docker = PtyProgram(["docker", "exec", "-it", "-u", "1000:1000", cid, "cat"])
        progs = [ws, exec_cli, docker]
        names = ["runner terminal (WebSocket)", "sandman exec -it", "docker exec -it"]
        times = rounds(progs, a.rounds)
        return {name: summary(v) for name, v in zip(names, times)}
    finally:
        for p in progs:
            p.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--sandman", default=os.path.join(SRC, "build", "sandman"))
    ap.add_argument("--image", default="sandman/minimal:latest")
    ap.add_argument("--runtimes", default="default,runsc",
                    help="comma-separated: default (the engine's) and/or engine runtimes")
    ap.add_argument("--out", default=os.path.join(SRC, "bench", "results"))
    a = ap.parse_args()

    instance = "bench-term-%d" % os.getpid()
    os.environ["SANDMAN_INSTANCE"] = instance
    tmp = tempfile.mkdtemp(prefix="smbench-term-")
    os.environ["SANDMAN_STATE_DIR"] = os.path.join(tmp, "state")
    try:
        load_before = os.getloadavg()
        by_runtime = {}
        for rt in a.runtimes.split(","):
            name = rt.strip()
            by_runtime[name] = measure(a, tmp, "" if name == "default" else name)
        write_report(a, by_runtime, load_before)
    finally:
        cleanup(instance)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
