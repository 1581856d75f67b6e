#!/usr/bin/env python3
"""Many frozen sandboxes (docs/state.md, issue 29): does the machine still
answer with N per_run sandboxes frozen?

One runner (per_run, the minimal image, network none). Before and after N
sandboxes are made (one call each) and frozen through the pause route, in
one run, side by side:
  - the engine's GET /_ping on its local socket,
  - the runner's GET /healthz,
  - a call (`true`) into a running per_run sandbox through POST /v1/execute,
  - GET /v1/sandboxes (the listing then holds N more),
  - the runner's resident memory (VmRSS) and the engine's (dockerd's);
then the first call into the first of the frozen sandboxes (and whether
it went over the agent session parked before its freeze, from the
runner's /metrics). Every sandbox the
run made is removed at the end. Prints a table and writes
bench/results/state-many.{json,md}, with the machine's load.

  python3 bench/state/many.py [--count 200] [--samples 30] [--sandman build/sandman]
"""
import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import tempfile
import time

import run as state  # bench/state/run.py: the runner, raw requests, cleanup

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def get(sock_path, path, token=None):
    """One GET over a unix socket: (status, body bytes, ms)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    auth = b"Authorization: Bearer %s\r\n" % token.encode() if token else b""
    t = time.perf_counter()
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n" % (path.encode(), auth))
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    took = state.ms_since(t)
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    return int(head.split()[1]), body, took


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def dockerd_pid():
    out = subprocess.run(["pidof", "dockerd"], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else None


def sample(a, proc, raw, phase, rows, mem):
    """The answers' times and the memory, a.samples of each."""
    for _ in range(a.samples):
        st, _, ms = get("/var/run/docker.sock", "/_ping")
        assert st == 200, st
        rows["engine GET /_ping, " + phase].append(ms)
        st, _, ms = get(raw.sock, "/healthz")
        assert st == 200, st
        rows["runner GET /healthz, " + phase].append(ms)
        rows["a call into a running sandbox, " + phase].append(
            state.execute(raw, "many-running", ["true"])[0])
    for _ in range(max(3, a.samples // 10)):
        st, body, ms = get(raw.sock, "/v1/sandboxes", raw.token)
        assert st == 200, (st, body[:200])
        rows["runner GET /v1/sandboxes, " + phase].append(ms)
    listed = len(json.loads(body))
    mem[phase] = {"runner_rss_kb": rss_kb(proc.pid),
                  "dockerd_rss_kb": rss_kb(dockerd_pid()) if dockerd_pid() else -1,
                  "sandboxes_listed": listed}


def agent_calls(raw):
    """The runner's count of calls made over an agent session (/metrics)."""
    st, body, _ = get(raw.sock, "/metrics", raw.token)
    assert st == 200, st
    for line in body.decode().splitlines():
        if line.startswith("sandman_agent_calls_total "):
            return int(float(line.split()[1]))
    return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--sandman", default=os.path.join(SRC, "build", "sandman"))
    ap.add_argument("--image", default="sandman/minimal:latest")
    ap.add_argument("--out", default=os.path.join(SRC, "bench", "results"))
    a = ap.parse_args()
    a.sandman = os.path.abspath(a.sandman)
    instance = os.environ.setdefault("SANDMAN_INSTANCE", "bench-many-%d" % os.getpid())
    tmp = tempfile.mkdtemp(prefix="sm-bench-many-")
    load0 = os.getloadavg()
    rows = {}
    for phase in ("0 frozen", "%d frozen" % a.count):
        for what in ("engine GET /_ping", "runner GET /healthz", "a call into a running sandbox",
                     "runner GET /v1/sandboxes"):
            rows["%s, %s" % (what, phase)] = []
    mem, made = {}, {}
    proc, raw = state.start_runner(a, tmp)
    try:
        for _ in range(3):
            state.execute(raw, "many-running", ["true"])
        sample(a, proc, raw, "0 frozen", rows, mem)
        t0 = time.perf_counter()
        for i in range(a.count):
            _, d = state.execute(raw, "many-%d" % i, ["true"])
            state.pause(raw, d["sandbox_id"], "freeze")
            made[i] = d["sandbox_id"]
            if (i + 1) % 50 == 0:
                print("# %d made and frozen (%.0f s)" % (i + 1, time.perf_counter() - t0), flush=True)
        make_s = time.perf_counter() - t0
        paused = subprocess.run(["docker", "ps", "-q", "--filter", "status=paused", "--filter",
                                 "label=io.sandman.instance=" + instance],
                                capture_output=True, text=True).stdout.split()
        assert len(paused) == a.count, ("paused", len(paused))
        sample(a, proc, raw, "%d frozen" % a.count, rows, mem)
        calls0 = agent_calls(raw)
        first = state.execute(raw, "many-0", ["true"], resumed="frozen")[0]
        over_agent = agent_calls(raw) == calls0 + 1
    finally:
        proc.terminate()
        proc.wait()
        state.cleanup(instance, tmp)
    load1 = os.getloadavg()
    res = {k: state.row(v) for k, v in rows.items()}
    out = {"count": a.count, "samples": a.samples, "image": a.image, "host": platform.node(),
           "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "loadavg_before": [round(x, 2) for x in load0],
           "loadavg_after": [round(x, 2) for x in load1], "results": res, "memory": mem,
           "make_and_freeze_s": round(make_s, 1), "first_call_into_a_frozen_one_ms": round(first, 2),
           "first_call_over_the_agent": over_agent}
    lines = ["# Many frozen sandboxes (bench/state/many.py)", "",
             "%s, %d CPUs, image %s; %d per_run sandboxes made (one call each) and frozen in "
             "%.0f s; %d samples of each; load average %s before, %s after." %
             (out["date"], os.cpu_count(), a.image, a.count, make_s, a.samples,
              " ".join("%.2f" % x for x in load0), " ".join("%.2f" % x for x in load1)), "",
             "Command: `python3 bench/state/many.py --count %d`" % a.count, "",
             "| step | median ms | p90 ms | n |", "|---|---|---|---|"]
    for k, v in res.items():
        lines.append("| %s | %.2f | %.2f | %d |" % (k, v["median_ms"], v["p90_ms"], v["n"]))
    lines += ["", "| | runner RSS | dockerd RSS | sandboxes listed |", "|---|---|---|---|"]
    for phase, m in mem.items():
        lines.append("| %s | %.1f MB | %.1f MB | %d |" % (phase, m["runner_rss_kb"] / 1024.0,
                                                         m["dockerd_rss_kb"] / 1024.0,
                                                         m["sandboxes_listed"]))
    lines += ["", "The first call into one of the %d frozen sandboxes (the first made and "
              "frozen): %.2f ms, %s." % (a.count, first, "over the agent session parked before "
                                         "its freeze" if over_agent else "over an engine exec "
                                         "(no parked agent session)")]
    md = "\n".join(lines) + "\n"
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "state-many.json"), "w") as f:
        json.dump(out, f, indent=2)
    with open(os.path.join(a.out, "state-many.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
