#!/usr/bin/env python3
"""Code contexts next to execute, side by side in one run (docs/code.md):

  warm context   `1 + 1` in a warm code context through the runner
                 (POST /v1/contexts/default/run, NDJSON to its end event)
  execute        `python3 -c 'print(1+1)'` through POST /v1/execute in the
                 same sandbox
  execute true   `true` through /v1/execute: the floor of a call there

Rounds alternate between the three (ROUNDS each, default 50); the first
call of each is not counted. Then CREATES contexts are made and timed from
POST /v1/contexts to the first result of a run in it, and FRESH fresh
sandboxes from a run in a new run id (sandbox, driver, kernel) to its
result. Every client is a raw HTTP/1.1 request on the runner's unix socket
from this process. Prints a table and writes bench/results/code.{json,md}.
The machine's load is said with the figures.

  python3 bench/code/run.py [--rounds N] [--creates N] [--fresh N]
        [--image TAG] [--sandman build/sandman]
        [--base OTHER/sandman]

--base: a second build's runner (its own sandbox and state), whose warm
`1 + 1` is timed in the same rounds, each right after this build's: two
builds compared on a loaded machine (the row "warm context `1 + 1`, base
build").
"""
import argparse
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import images  # noqa: E402  bench/images.py

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


class Raw:
    """One request per connection (the runner closes each), over the socket."""

    def __init__(self, sock, token):
        self.sock, self.token = sock, token

    def post(self, path, body, method="POST"):
        data = json.dumps(body).encode() if body is not None else b""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.sock)
        s.sendall(b"%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" %
                  (method.encode(), path.encode(), self.token.encode(), len(data), data))
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        s.close()
        head, _, body = out.partition(b"\r\n\r\n")
        status = int(head.split()[1])
        if b"chunked" in head.lower():
            body = dechunk(body)
        return status, body


def dechunk(b):
    out, pos = b"", 0
    while True:
        nl = b.index(b"\r\n", pos)
        n = int(b[pos:nl], 16)
        if n == 0:
            return out
        out += b[nl + 2:nl + 2 + n]
        pos = nl + 4 + n


def end_of(body):
    for line in body.decode().splitlines():
        if '"event":"end"' in line:
            return json.loads(line)
    raise RuntimeError("no end event: %r" % body[:300])


def start_runner(a, tmp, sandman=None, env=None):
    tok = secrets.token_hex(24)
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(tok)
    os.chmod(os.path.join(tmp, "token"), 0o600)
    sock = os.path.join(tmp, "s.sock")
    log = open(os.path.join(tmp, "runner.log"), "w")
    proc = subprocess.Popen([sandman or a.sandman, "worker", "start", "--listen", "unix:" + sock,
                             "--token-file", os.path.join(tmp, "token"), "--sandbox-mode",
                             "per_run", "--sandbox-image", a.image, "--sandbox-network", "none",
                             "--sandbox-mem", "1g", "--project-environment", "development"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    for _ in range(600):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            return proc, Raw(sock, tok)
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the runner did not start")


def measure(a, raw, base=None):
    key = {"run_id": "bench-code"}
    code = lambda: raw.post("/v1/contexts/default/run", dict(key, code="1 + 1"))  # noqa: E731
    base_code = base and (lambda: base.post("/v1/contexts/default/run",  # noqa: E731
                                            dict(key, code="1 + 1")))
    py = lambda: raw.post("/v1/execute", dict(key, argv=["python3", "-c", "print(1+1)"]))  # noqa
    tru = lambda: raw.post("/v1/execute", dict(key, argv=["true"]))  # noqa: E731
    warm_up = (tru, py, code, tru, py, code) + ((base_code, base_code) if base else ())
    for fn in warm_up:  # the sandbox, the driver, the sessions
        st, body = fn()
        assert st == 200, body[:300]
    # Wait until the runner's agent sessions are parked (a background open).
    time.sleep(1.0)
    clients = [("warm context `1 + 1`", code), ("execute `python3 -c`", py),
               ("execute `true`", tru)]
    if base:
        clients.insert(1, ("warm context `1 + 1`, base build", base_code))
    rows = {name: [] for name, _ in clients}
    kernel_ms, server_ms = [], []
    for _ in range(a.rounds):
        for name, fn in clients:
            t = time.perf_counter()
            st, body = fn()
            rows[name].append((time.perf_counter() - t) * 1000.0)
            assert st == 200, body[:300]
            if fn is code:
                e = end_of(body)
                assert e["status"] == "ok" and "2" in body.decode(), body
                kernel_ms.append(e["duration_ms"])
                server_ms.append(e["total_ms"])
            elif fn is py:
                assert json.loads(body)["stdout"] == "2\n", body
            elif fn is base_code:
                assert end_of(body)["status"] == "ok", body
    creates = []
    for i in range(a.creates):
        t = time.perf_counter()
        st, body = raw.post("/v1/contexts", dict(key, name="c%d" % i))
        assert st == 201, body
        st, body = raw.post("/v1/contexts/c%d/run" % i, dict(key, code="1 + 1"))
        assert st == 200 and end_of(body)["status"] == "ok", body
        creates.append((time.perf_counter() - t) * 1000.0)
        st, body = raw.post("/v1/contexts/c%d?run_id=bench-code" % i, None, "DELETE")
        assert st == 200, body  # one kernel at a time beside the default one
    fresh = []
    for i in range(a.fresh):
        t = time.perf_counter()
        st, body = raw.post("/v1/contexts/default/run", {"run_id": "bench-fresh-%d" % i,
                                                          "code": "1 + 1"})
        assert st == 200 and end_of(body)["status"] == "ok", body
        fresh.append((time.perf_counter() - t) * 1000.0)
    return rows, kernel_ms, server_ms, creates, fresh


def report(a, rows, kernel_ms, server_ms, creates, fresh, load0, load1):
    res = {name: {"median_ms": round(statistics.median(v), 2), "p90_ms": round(pct(v, 90), 2),
                  "n": len(v)} for name, v in rows.items()}
    res["(in the runner: request to end event)"] = {
        "median_ms": round(statistics.median(server_ms), 2), "p90_ms": round(pct(server_ms, 90), 2),
        "n": len(server_ms)}
    res["(in the kernel: the cell)"] = {
        "median_ms": round(statistics.median(kernel_ms), 2), "p90_ms": round(pct(kernel_ms, 90), 2),
        "n": len(kernel_ms)}
    res["new context: create to first result"] = {
        "median_ms": round(statistics.median(creates), 1), "p90_ms": round(pct(creates, 90), 1),
        "n": len(creates)}
    res["new sandbox: first run to its result"] = {
        "median_ms": round(statistics.median(fresh), 1), "p90_ms": round(pct(fresh, 90), 1),
        "n": len(fresh)}
    warm = res["warm context `1 + 1`"]["median_ms"]
    targets = [
        ("warm `1 + 1` median <= 10 ms", warm, warm <= 10.0),
        ("warm `1 + 1` faster than execute `python3 -c`", warm,
         warm < res["execute `python3 -c`"]["median_ms"]),
        ("context create to first result median < 1500 ms",
         res["new context: create to first result"]["median_ms"],
         res["new context: create to first result"]["median_ms"] < 1500),
    ]
    out = {"image": a.image, "rounds": a.rounds, "host": platform.node(),
           "cpus": os.cpu_count(), "loadavg_before": [round(x, 2) for x in load0],
           "loadavg_after": [round(x, 2) for x in load1],
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": res,
           "targets": [{"target": t, "measured": m, "met": ok} for t, m, ok in targets]}
    lines = ["# Code contexts next to execute (bench/code/run.py)", "",
             "%s, %d CPUs, image %s, %d alternating rounds; load average %s before, %s after "
             "(a shared machine: other builds and tests ran meanwhile)." %
             (out["date"], os.cpu_count(), a.image, a.rounds,
              " ".join("%.2f" % x for x in load0), " ".join("%.2f" % x for x in load1)), "",
             "| client | median ms | p90 ms | n |", "|---|---|---|---|"]
    if a.base:
        out["base"] = a.base
        lines[-2:-2] = ["The base build: `%s` (its own runner and sandbox)." % a.base, ""]
    for name, v in res.items():
        lines.append("| %s | %.2f | %.2f | %d |" % (name, v["median_ms"], v["p90_ms"], v["n"]))
    lines += ["", "| target | measured | |", "|---|---|---|"]
    for t, m, ok in targets:
        lines.append("| %s | %.2f | %s |" % (t, m, "met" if ok else "**missed**"))
    return out, "\n".join(lines) + "\n"


def cleanup(instance, tmp):
    ids = subprocess.run(["docker", "ps", "-aq", "--filter", "label=io.sandman.instance=" +
                          instance], capture_output=True, text=True).stdout.split()
    if ids:
        subprocess.run(["docker", "rm", "-fv"] + ids, capture_output=True)
    vols = subprocess.run(["docker", "volume", "ls", "-q", "--filter",
                           "label=io.sandman.instance=" + instance], capture_output=True,
                          text=True).stdout.split()
    if vols:
        subprocess.run(["docker", "volume", "rm", "-f"] + vols, capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--creates", type=int, default=5)
    ap.add_argument("--fresh", type=int, default=3)
    ap.add_argument("--sandman", default=os.path.join(SRC, "build", "sandman"))
    ap.add_argument("--image", help="default: the tests' own build of sandman/general "
                    "(scripts/test-images.sh ensure general)")
    ap.add_argument("--out", default=os.path.join(SRC, "bench", "results"))
    ap.add_argument("--base", help="another build's sandman, timed beside this one")
    a = ap.parse_args()
    if a.image is None:
        a.image = images.general_image(a.sandman)
    instance = "bench-code-%d" % os.getpid()
    os.environ["SANDMAN_INSTANCE"] = instance
    tmp = tempfile.mkdtemp(prefix="smbench-code-")
    os.environ.setdefault("SANDMAN_STATE_DIR", os.path.join(tmp, "state"))
    proc = base_proc = base = None
    base_tmp = tempfile.mkdtemp(prefix="smbench-code-base-") if a.base else None
    base_env = dict(os.environ, SANDMAN_INSTANCE=instance + "-base",
                    SANDMAN_STATE_DIR=os.path.join(base_tmp, "state")) if a.base else None
    try:
        proc, raw = start_runner(a, tmp)
        if a.base:
            base_proc, base = start_runner(a, base_tmp, a.base, base_env)
        load0 = os.getloadavg()
        rows, kernel_ms, server_ms, creates, fresh = measure(a, raw, base)
        out, text = report(a, rows, kernel_ms, server_ms, creates, fresh, load0, os.getloadavg())
        print(text)
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "code.json"), "w") as f:
            json.dump(out, f, indent=2)
        with open(os.path.join(a.out, "code.md"), "w") as f:
            f.write(text)
    finally:
        for p in (proc, base_proc):
            if p:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=120)
        cleanup(instance, tmp)
        if base_tmp:
            cleanup(instance + "-base", base_tmp)


if __name__ == "__main__":
    main()
