#!/usr/bin/env python3
"""The tiers of rest side by side in one run (docs/state.md, issue 29):

  freeze     the first call into a frozen per_run sandbox vs a call into the
             same sandbox running (`true` through the runner's
             POST /v1/execute): ROUNDS calls in a row into it running (the
             reference), then ROUNDS rounds of a call into it running (the
             first after the last round's resume), a freeze (the pause
             route, timed) and the first call into it frozen; the floor:
             the engine's own unpause (POST /containers/{id}/unpause on its
             local socket) of a container of the same image paused by hand
  stop       the first call into a stopped per_run sandbox (start,
             /workspace put back, the agent set up; through the runner) vs a
             container of the same image stopped by hand and brought back
             by `docker start` + `docker exec true` (two docker CLI
             processes), alternating, STOPS each; both hold the same 1,000
             small files in /workspace; the stop itself beside them
  hibernate  a gVisor per_run sandbox (--runtime runsc) holding a process
             with 0, 10 and 100 MB of random bytes: `sandman sandbox pause
             --tier hibernate` and `sandman sandbox resume`, their
             duration_ms (inside sandman) and the whole command's time, the
             checkpoint's size on disk; the process is checked alive after
             every restore

The runner's calls are raw HTTP/1.1 requests on its unix socket from this
process; the hibernate rows are `sandman` commands (the CLI). Prints a table
and writes bench/results/state.{json,md}, with the machine's load.

  python3 bench/state/run.py [--rounds N] [--stops N] [--hibernates N]
        [--image sandman/minimal:latest] [--general TAG]
        [--sandman build/sandman]
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
# 1,000 small files in ten folders (tests/integration/test_state_tiers.sh's).
GEN = ("mkdir -p t; i=0; while [ $i -lt 1000 ]; do d=t/d$((i % 10)); mkdir -p $d; : >$d/f$i; "
       "echo \"file $i $((i * 7919 % 1000003))\" >>$d/f$i; i=$((i + 1)); done")
HOLDER = ("import os, sys, time\n"
          "b = bytearray(os.urandom(int(sys.argv[1]) << 20))\n"
          "open('/tmp/holder.pid', 'w').write(str(os.getpid()))\n"
          "time.sleep(1e6)\n")


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def ms_since(t):
    return (time.perf_counter() - t) * 1000.0


class Raw:
    """One request per connection, over the runner's socket."""

    def __init__(self, sock, token):
        self.sock, self.token = sock, token

    def post(self, path, body):
        data = json.dumps(body).encode() if body is not None else b""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.sock)
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nConnection: close"
                  b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" %
                  (path.encode(), self.token.encode(), len(data), data))
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
        return status, json.loads(body)


def dechunk(b):
    out, pos = b"", 0
    while True:
        nl = b.index(b"\r\n", pos)
        n = int(b[pos:nl], 16)
        if n == 0:
            return out
        out += b[nl + 2:nl + 2 + n]
        pos = nl + 4 + n


def start_runner(a, tmp):
    tok = secrets.token_hex(24)
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(tok)
    os.chmod(os.path.join(tmp, "token"), 0o600)
    sock = os.path.join(tmp, "s.sock")
    log = open(os.path.join(tmp, "runner.log"), "w")
    proc = subprocess.Popen([a.sandman, "worker", "start", "--listen", "unix:" + sock,
                             "--token-file", os.path.join(tmp, "token"), "--sandbox-mode",
                             "per_run", "--sandbox-image", a.image, "--sandbox-network", "none",
                             "--project-environment", "development"],
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            return proc, Raw(sock, tok)
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the runner did not start")


def execute(raw, run, argv, resumed=None):
    t = time.perf_counter()
    st, d = raw.post("/v1/execute", {"run_id": run, "argv": argv})
    took = ms_since(t)
    assert st == 200 and d.get("exit_code") == 0, d
    assert d.get("resumed") == resumed, ("resumed", resumed, d.get("resumed"))
    return took, d


def pause(raw, sid, tier):
    t = time.perf_counter()
    st, d = raw.post("/v1/sandboxes/%s/pause?tier=%s" % (sid, tier), None)
    took = ms_since(t)
    assert st == 200 and d.get("changed"), d
    return took


def engine_post(path):
    """POST to the engine's API on its local socket; the time in ms."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("/var/run/docker.sock")
    t = time.perf_counter()
    s.sendall(b"POST /v1.41%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    took = ms_since(t)
    s.close()
    assert out.split()[1] == b"204", out[:200]
    return took


def unpause_floor(a, rows):
    """The engine's own unpause of a container paused by hand: the floor
    under a call into a frozen sandbox."""
    name = "sandman-bench-state-floor-%d" % os.getpid()
    subprocess.run(["docker", "run", "-d", "--name", name, "--network", "none", a.image, "sleep",
                    "3600"], check=True, capture_output=True)
    try:
        for _ in range(a.rounds):
            engine_post("/containers/%s/pause" % name)
            rows["the engine's unpause alone (API, a container paused by hand)"].append(
                engine_post("/containers/%s/unpause" % name))
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def freeze_and_stop(a, raw, rows):
    run = "bench-state"
    _, d = execute(raw, run, ["sh", "-c", "cd /workspace && " + GEN])
    sid = d["sandbox_id"]
    for _ in range(3):
        execute(raw, run, ["true"])
    time.sleep(1.0)  # the runner's agent sessions parked (a background open)
    for _ in range(a.rounds):
        rows["a call into a running sandbox"].append(execute(raw, run, ["true"])[0])
    for _ in range(a.rounds):
        rows["a call into a running sandbox, the round's first"].append(execute(raw, run, ["true"])[0])
        rows["pause (freeze), the route"].append(pause(raw, sid, "freeze"))
        rows["the first call into a frozen sandbox"].append(
            execute(raw, run, ["true"], resumed="frozen")[0])
    hand = "sandman-bench-state-hand-%d" % os.getpid()
    subprocess.run(["docker", "run", "-d", "--name", hand, "--network", "none", a.image, "sh", "-c",
                    "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"],
                   check=True, capture_output=True)
    try:
        subprocess.run(["docker", "exec", hand, "sh", "-c", "mkdir -p /workspace && cd /workspace && "
                        + GEN], check=True, capture_output=True)
        for _ in range(a.stops):
            rows["pause (stop), the route"].append(pause(raw, sid, "stop"))
            rows["the first call into a stopped sandbox"].append(
                execute(raw, run, ["true"], resumed="stopped")[0])
            subprocess.run(["docker", "stop", "-t", "1", hand], check=True, capture_output=True)
            t = time.perf_counter()
            subprocess.run(["docker", "start", hand], check=True, capture_output=True)
            subprocess.run(["docker", "exec", hand, "true"], check=True, capture_output=True)
            rows["by hand: `docker start` + `docker exec true`"].append(ms_since(t))
        n = subprocess.run(["docker", "exec", hand, "sh", "-c", "find /workspace/t -type f | wc -l"],
                           capture_output=True, text=True, check=True).stdout.strip()
        assert n == "1000", n
    finally:
        subprocess.run(["docker", "rm", "-f", hand], capture_output=True)
    _, d = execute(raw, run, ["sh", "-c", "find /workspace/t -type f | wc -l"])
    assert d["stdout"].strip() == "1000", d


def sm_json(a, args):
    cut = args.index("--") if "--" in args else len(args)
    t = time.perf_counter()
    p = subprocess.run([a.sandman] + args[:cut] + ["--json"] + args[cut:], capture_output=True,
                       text=True)
    took = ms_since(t)
    if p.returncode != 0:
        raise RuntimeError("sandman %s: %s" % (" ".join(args), p.stderr.strip()))
    return took, json.loads(p.stdout)


def engine_root():
    return subprocess.run(["docker", "info", "-f", "{{.DockerRootDir}}"], capture_output=True,
                          text=True, check=True).stdout.strip()


def dir_bytes(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_size
            except OSError:
                pass
    return total


def hibernate_sizes(a, hib):
    root = engine_root()
    for mb in (0, 10, 100):
        run = "bench-state-hib-%d" % mb
        flags = ["--mode", "per_run", "--run-id", run, "--image", a.general, "--runtime", "runsc",
                 "--mem", "768m"]
        holder = "python3 -c \"$1\" %d >/dev/null 2>&1 &" % mb
        _, d = sm_json(a, ["run"] + flags + ["--", "sh", "-c", holder, "sh", HOLDER])
        for _ in range(300):
            _, d = sm_json(a, ["run"] + flags + ["--", "sh", "-c", "cat /tmp/holder.pid || true"])
            if d["stdout"].strip():
                break
            time.sleep(0.2)
        pid = d["stdout"].strip()
        assert pid, "the holder did not start"
        rows = {"pause": [], "pause_wall": [], "resume": [], "resume_wall": [], "bytes": []}
        for _ in range(a.hibernates):
            wall, p = sm_json(a, ["sandbox", "pause", "--run-id", run, "--tier", "hibernate"])
            assert p["state"] == "hibernated", p
            rows["pause"].append(p["duration_ms"])
            rows["pause_wall"].append(wall)
            rows["bytes"].append(dir_bytes(os.path.join(root, "containers", p["id"], "checkpoints")))
            wall, r = sm_json(a, ["sandbox", "resume", "--run-id", run])
            assert r["state"] == "running", r
            rows["resume"].append(r["duration_ms"])
            rows["resume_wall"].append(wall)
            _, d = sm_json(a, ["run"] + flags + ["--", "sh", "-c", "test -d /proc/%s && echo alive" % pid])
            assert d["stdout"].strip() == "alive", ("the holder did not survive", d)
        hib[mb] = rows


def row(v):
    return {"median_ms": round(statistics.median(v), 2), "p90_ms": round(pct(v, 90), 2), "n": len(v)}


def report(a, rows, hib, load0, load1):
    res = {name: row(v) for name, v in rows.items()}
    hres = {}
    for mb, r in hib.items():
        hres["%d MB" % mb] = {
            "hibernate_ms": row(r["pause"]), "hibernate_command_ms": row(r["pause_wall"]),
            "restore_ms": row(r["resume"]), "restore_command_ms": row(r["resume_wall"]),
            "checkpoint_bytes": int(statistics.median(r["bytes"]))}
    running = res["a call into a running sandbox"]["median_ms"]
    frozen = res["the first call into a frozen sandbox"]["median_ms"]
    stopped = res["the first call into a stopped sandbox"]["median_ms"]
    hand = res["by hand: `docker start` + `docker exec true`"]["median_ms"]
    targets = [
        ("first call into a frozen sandbox at most 10 ms more than into a running one (median)",
         round(frozen - running, 2), frozen - running <= 10.0),
        ("first call into a stopped sandbox no slower than `docker start` + `docker exec` (median)",
         round(stopped - hand, 2), stopped <= hand),
    ]
    out = {"image": a.image, "general_image": a.general, "rounds": a.rounds, "stops": a.stops,
           "hibernates": a.hibernates, "host": platform.node(), "cpus": os.cpu_count(),
           "loadavg_before": [round(x, 2) for x in load0],
           "loadavg_after": [round(x, 2) for x in load1],
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": res,
           "hibernate": hres,
           "targets": [{"target": t, "measured_difference_ms": m, "met": ok} for t, m, ok in targets]}
    lines = ["# The tiers of rest side by side (bench/state/run.py)", "",
             "%s, %d CPUs, image %s (freeze, stop)%s; %d freeze "
             "rounds, %d stop rounds, %d hibernations per size; load average %s before, %s after "
             "(on a shared machine other builds and tests weigh on the figures)." %
             (out["date"], os.cpu_count(), a.image,
              ", %s under runsc (hibernate)" % a.general if a.hibernates else "",
              a.rounds, a.stops, a.hibernates,
              " ".join("%.2f" % x for x in load0), " ".join("%.2f" % x for x in load1)), "",
             "Command: `python3 bench/state/run.py %s`" % " ".join(sys.argv[1:]), "",
             "| step | median ms | p90 ms | n |", "|---|---|---|---|"]
    for name, v in res.items():
        lines.append("| %s | %.2f | %.2f | %d |" % (name, v["median_ms"], v["p90_ms"], v["n"]))
    if hres:
        lines += ["", "Hibernate (gVisor), a process holding N MB of random bytes; medians:", "",
                  "| memory held | hibernate ms (in sandman) | the command | restore ms (in sandman) "
                  "| the command | checkpoint on disk |", "|---|---|---|---|---|---|"]
    for name, h in hres.items():
        lines.append("| %s | %.0f | %.0f | %.0f | %.0f | %.1f MB |" % (
            name, h["hibernate_ms"]["median_ms"], h["hibernate_command_ms"]["median_ms"],
            h["restore_ms"]["median_ms"], h["restore_command_ms"]["median_ms"],
            h["checkpoint_bytes"] / 1048576.0))
    lines += ["", "| target | difference (ms) | |", "|---|---|---|"]
    for t, m, ok in targets:
        lines.append("| %s | %+.2f | %s |" % (t, m, "met" if ok else "**missed**"))
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
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--stops", type=int, default=10)
    ap.add_argument("--hibernates", type=int, default=3)
    ap.add_argument("--sandman", default=os.path.join(SRC, "build", "sandman"))
    ap.add_argument("--image", default="sandman/minimal:latest")
    ap.add_argument("--general", help="default: the tests' own build of sandman/general "
                    "(scripts/test-images.sh ensure general)")
    ap.add_argument("--out", default=os.path.join(SRC, "bench", "results"))
    a = ap.parse_args()
    if a.general is None and a.hibernates > 0:
        a.general = images.general_image(a.sandman)
    instance = "bench-state-%d" % os.getpid()
    os.environ["SANDMAN_INSTANCE"] = instance
    tmp = tempfile.mkdtemp(prefix="smbench-state-")
    os.environ["SANDMAN_STATE_DIR"] = os.path.join(tmp, "state")
    proc = None
    rows = {name: [] for name in (
        "a call into a running sandbox", "a call into a running sandbox, the round's first",
        "pause (freeze), the route",
        "the first call into a frozen sandbox",
        "the engine's unpause alone (API, a container paused by hand)", "pause (stop), the route",
        "the first call into a stopped sandbox", "by hand: `docker start` + `docker exec true`")}
    hib = {}
    try:
        proc, raw = start_runner(a, tmp)
        load0 = os.getloadavg()
        freeze_and_stop(a, raw, rows)
        unpause_floor(a, rows)
        if a.hibernates > 0:  # --hibernates 0: the freeze and stop rounds only
            hibernate_sizes(a, hib)
        out, text = report(a, rows, hib, load0, os.getloadavg())
        print(text)
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "state.json"), "w") as f:
            json.dump(out, f, indent=2)
        with open(os.path.join(a.out, "state.md"), "w") as f:
            f.write(text)
    finally:
        if proc:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
        cleanup(instance, tmp)


if __name__ == "__main__":
    main()
