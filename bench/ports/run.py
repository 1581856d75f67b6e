#!/usr/bin/env python3
"""A forwarded port (`sandman sandbox port`, docs/ports.md) against the same
requests made inside the sandbox on its own loopback, side by side in one
run, in one per_run sandbox with network none:

  small request   a new connection, `GET /small HTTP/1.0` (a 13-byte file),
                  the whole answer read, from this host through the forward
                  vs from a python3 process in the sandbox to 127.0.0.1; the
                  two take turns in batches so the machine's changing load
                  weighs on both alike. The target: at most 2 ms added at
                  the median.
  100 MB download GET of a 100 MB file, read to its end, through the forward
                  and inside the sandbox: MB/s; and through the runner's
                  ports route (`sandman worker start`, the control token,
                  /v1/sandboxes/{id}/ports/8000/big, the answer streamed),
                  taking turns with the forward (3 rounds each, the median),
                  with the runner's largest RSS sampled during them.

The server is python3 -m http.server in the sandbox (sandman/general under
the tests' tag, scripts/test-images.sh). Prints the results and writes
bench/results/ports.{json,md}, with the machine's load.

  python3 bench/ports/run.py [--rounds N] [--runtime default|runsc]
"""
import argparse
import http.client
import json
import os
import select
import signal
import socket
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
SANDMAN = os.environ.get("SANDMAN_BIN", os.path.join(SRC, "build", "sandman"))
BATCH = 25
WARMUP = 20
BIG = 100 * 1024 * 1024

# The same client in the sandbox: N small requests (times in ms, one a
# line), or one download (seconds).
INSIDE = r'''
import socket, sys, time
def get(path):
    s = socket.create_connection(("127.0.0.1", 8000))
    s.sendall(b"GET " + path + b" HTTP/1.0\r\n\r\n")
    n = 0
    while True:
        d = s.recv(1 << 20)
        if not d:
            break
        n += len(d)
    s.close()
    return n
if sys.argv[1] == "small":
    for _ in range(int(sys.argv[2])):
        t = time.perf_counter()
        get(b"/small")
        print("%.4f" % ((time.perf_counter() - t) * 1000))
else:
    t = time.perf_counter()
    n = get(b"/big")
    print("%.4f %d" % (time.perf_counter() - t, n))
'''


def sandman(*args, stdin=None, check=True):
    p = subprocess.run([SANDMAN] + list(args), input=stdin, capture_output=True, timeout=600)
    if check and p.returncode != 0:
        sys.exit("sandman %s: %s" % (" ".join(args[:3]), p.stderr.decode()[-400:]))
    return p


def get(addr, path):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.sendall(b"GET " + path + b" HTTP/1.0\r\n\r\n")
    n = 0
    while True:
        d = s.recv(1 << 20)
        if not d:
            break
        n += len(d)
    s.close()
    return n


def route_get(sock, token, sid, path, pid):
    """A download through the runner's ports route: (bytes, the runner's
    largest RSS in KiB while it ran)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    c = http.client.HTTPConnection("localhost")
    c.sock = s
    c.request("GET", "/v1/sandboxes/%s/ports/8000%s" % (sid, path.decode()),
              headers={"Authorization": "Bearer " + token})
    r = c.getresponse()
    n, peak = 0, 0
    while True:
        d = r.read(1 << 20)
        if not d:
            break
        n += len(d)
        if n % (8 << 20) < (1 << 20):
            peak = max(peak, rss_kib(pid))
    c.close()
    return n, peak


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def start_runner(tmp):
    """A runner on a unix socket of its own (the same instance as the CLI's)."""
    token = os.urandom(24).hex()
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(token + "\n")
    os.chmod(os.path.join(tmp, "token"), 0o600)
    sock = os.path.join(tmp, "sandman.sock")
    p = subprocess.Popen([SANDMAN, "worker", "start", "--listen", "unix:" + sock, "--token-file",
                          os.path.join(tmp, "token")], stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(tmp, "runner.log"), "w"))
    deadline = time.time() + 60
    while time.time() < deadline and not os.path.exists(sock):
        time.sleep(0.1)
    return p, sock, token


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def summary(v):
    return {"n": len(v), "median_ms": round(statistics.median(v), 3),
            "p90_ms": round(pct(v, 90), 3), "p99_ms": round(pct(v, 99), 3)}


def setup(run, image, runtime):
    args = ["run", "--mode", "per_run", "--run-id", run, "--network", "none", "--image", image]
    if runtime != "default":
        args += ["--runtime", runtime]
    sandman(*args, "--", "true")
    sandman("exec", "-i", "--run-id", run, "--", "sh", "-c",
            "cat > /workspace/client.py; mkdir -p /workspace/www; "
            "echo hello-bench > /workspace/www/small; "
            "head -c %d /dev/zero > /workspace/www/big" % BIG, stdin=INSIDE.encode())
    server = subprocess.Popen([SANDMAN, "exec", "--run-id", run, "--", "python3", "-m",
                               "http.server", "8000", "--bind", "127.0.0.1", "--directory",
                               "/workspace/www"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    fwd = subprocess.Popen([SANDMAN, "sandbox", "port", "--run-id", run, "8000"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    r, _, _ = select.select([fwd.stdout], [], [], 120)
    addr = fwd.stdout.readline().decode().strip() if r else ""
    if not addr:
        sys.exit("the forward did not start: %s" % fwd.stderr.read().decode()[-400:])
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if get(addr, b"/small") > 0:
                break
        except OSError:
            time.sleep(0.2)
    return server, fwd, addr


def measure(run, addr, rounds, route):
    fwd, inside = [], []
    for _ in range(WARMUP):
        get(addr, b"/small")
    sandman("exec", "--run-id", run, "--", "python3", "/workspace/client.py", "small", str(WARMUP))
    while len(fwd) < rounds:
        for _ in range(BATCH):
            t = time.perf_counter()
            get(addr, b"/small")
            fwd.append((time.perf_counter() - t) * 1000)
        p = sandman("exec", "--run-id", run, "--", "python3", "/workspace/client.py", "small",
                    str(BATCH))
        inside += [float(x) for x in p.stdout.split()]
    fwd_mb, route_mb, peak, n = [], [], 0, 0
    base = rss_kib(route[3].pid)
    for _ in range(3):  # the forward and the route take turns
        t = time.perf_counter()
        n = get(addr, b"/big")
        fwd_mb.append(n / (time.perf_counter() - t) / 1e6)
        t = time.perf_counter()
        rn, rp = route_get(route[1], route[2], route[0], b"/big", route[3].pid)
        route_mb.append(rn / (time.perf_counter() - t) / 1e6)
        peak = max(peak, rp)
        if rn != BIG:
            sys.exit("the route's download came short: %d bytes" % rn)
    p = sandman("exec", "--run-id", run, "--", "python3", "/workspace/client.py", "big")
    in_s, in_n = p.stdout.split()
    return {"small_forwarded": summary(fwd), "small_inside": summary(inside),
            "added_median_ms": round(statistics.median(fwd) - statistics.median(inside), 3),
            "download_forwarded_mb_s": round(statistics.median(fwd_mb), 1),
            "download_route_mb_s": round(statistics.median(route_mb), 1),
            "download_inside_mb_s": round(int(in_n) / float(in_s) / 1e6, 1),
            "runner_rss_kib_before": base, "runner_rss_kib_peak": peak,
            "download_bytes": n}


def write(out_dir, res, meta):
    with open(os.path.join(out_dir, "ports.json"), "w") as f:
        json.dump({"meta": meta, "results": res}, f, indent=2)
        f.write("\n")
    s, i = res["small_forwarded"], res["small_inside"]
    md = ["# A forwarded port against the sandbox's own loopback (bench/ports/run.py)", "",
          "One per_run sandbox of %s, network none, runtime %s; python3 -m http.server in it; "
          "%d small requests each way (batches of %d taking turns) after %d of warm-up; "
          "2 CPUs, load %s before and %s after (the machine is shared with other builds and "
          "tests: timings are noisy), %s." % (meta["image"], meta["runtime"], s["n"], BATCH,
                                              WARMUP, meta["load_before"], meta["load_after"],
                                              meta["when"]), "",
          "| small request | median ms | p90 ms | p99 ms |", "|---|---|---|---|",
          "| through `sandman sandbox port` | %.2f | %.2f | %.2f |" % (
              s["median_ms"], s["p90_ms"], s["p99_ms"]),
          "| inside the sandbox (127.0.0.1) | %.2f | %.2f | %.2f |" % (
              i["median_ms"], i["p90_ms"], i["p99_ms"]), "",
          "Added at the median: **%.2f ms** (target: at most 2 ms)." % res["added_median_ms"], "",
          "| 100 MB download | MB/s |", "|---|---|",
          "| through `sandman sandbox port` | %.1f |" % res["download_forwarded_mb_s"],
          "| through the runner's ports route (streamed) | %.1f |" % res["download_route_mb_s"],
          "| inside the sandbox (127.0.0.1) | %.1f |" % res["download_inside_mb_s"], "",
          "The forward and the route took turns, 3 downloads each (the median). The "
          "runner's RSS: %d KiB before, %d KiB at most during the route's downloads." % (
              res["runner_rss_kib_before"], res["runner_rss_kib_peak"]), "",
          "Reproduce: `python3 bench/ports/run.py --rounds %d`." % s["n"], ""]
    with open(os.path.join(out_dir, "ports.md"), "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--runtime", default="default")
    ap.add_argument("--image", default=None)
    ap.add_argument("--out", default=os.path.join(SRC, "bench", "results"))
    a = ap.parse_args()
    os.environ["SANDMAN_INSTANCE"] = "bench-ports-%d" % os.getpid()
    image = a.image or subprocess.run(
        [os.path.join(SRC, "scripts", "test-images.sh"), "ensure", "general"],
        capture_output=True, text=True, env=dict(os.environ, SANDMAN_BIN=SANDMAN),
        check=True).stdout.split()[-1]
    run = "bench-ports-%d" % os.getpid()
    load_before = " ".join(open("/proc/loadavg").read().split()[:3])
    server = fwd = runner = None
    tmp = tempfile.mkdtemp(prefix="bench-ports-")
    try:
        server, fwd, addr = setup(run, image, a.runtime)
        runner, sock, token = start_runner(tmp)
        listing = json.loads(sandman("sandbox", "list", "--json").stdout or b"[]")
        sid = [x["id"] for x in listing if x.get("run_id") == run][0]
        res = measure(run, addr, a.rounds, (sid, sock, token, runner))
    finally:
        for p in (fwd, server, runner):
            if p is not None:
                p.send_signal(signal.SIGINT)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
        listing = sandman("sandbox", "list", "--all", "--json", check=False).stdout
        for s in json.loads(listing or b"[]"):
            sandman("sandbox", "rm", "--force", s["name"], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    meta = {"image": image, "runtime": a.runtime, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                          time.gmtime()),
            "load_before": load_before,
            "load_after": " ".join(open("/proc/loadavg").read().split()[:3])}
    write(a.out, res, meta)


if __name__ == "__main__":
    main()
