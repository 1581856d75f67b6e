#!/usr/bin/python3
"""The swarm backend's benchmark (run it through bench/swarm/run.sh).

One run, side by side, on real swarms of sandman/dind engines in containers
on this machine (tests/integration/swarm_rig.sh), a one-node swarm and a
three-node swarm, each driven by one runner (`worker start --sandbox-backend
swarm`, per_run) with the same clients:

  W1  sandboxes created per second: N per_run sandboxes, each made by its
      first call (`true`), C clients at once;
  W2  calls per second: M calls (`true`) over those N sandboxes, C clients
      at once (the second call on, through the in-sandbox agent);
  W3  the runner's resident memory with 300 idle sandboxes across the
      three-node swarm (each made by one call), against the same runner
      before its first sandbox.

All nodes share this machine's two cores: three nodes here show what the
swarm backend costs and how it spreads, not three hosts' capacity.
Writes bench/results/swarm.md and swarm.json.
"""
import argparse
import concurrent.futures
import json
import os
import platform
import shutil
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tests", "swarm"))
from swarmlib import Rig, Runner, ensure_dind_image, rig_env  # noqa: E402


def log(msg):
    print("swarm-bench: " + msg, file=sys.stderr, flush=True)


def pct(samples, q):
    s = sorted(samples)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def timed(fn):
    t = time.monotonic()
    r = fn()
    return r, (time.monotonic() - t) * 1000.0


def drive(client, jobs, concurrency):
    """jobs: run ids; returns (wall seconds, per-call ms, failures)."""
    def call(run_id):
        try:
            return client.execute(argv=["true"], run_id=run_id)
        except Exception as e:  # noqa: BLE001 - an HTTP error is a failed call here
            return {"ok": False, "error": str(e)[:300]}

    def one(run_id):
        return timed(lambda: call(run_id))

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as ex:
        results = list(ex.map(one, jobs))
    wall = time.monotonic() - t0
    fails = [r.get("error") for r, _ in results if not r.get("ok")]
    return wall, [ms for _, ms in results], fails


def runner_for(rig, tmp, name):
    env = rig_env(rig, tmp)
    token = os.path.join(tmp, "token")
    if not os.path.exists(token):
        with open(token, "w") as f:
            f.write("swarm-bench-" + os.urandom(16).hex())
        os.chmod(token, 0o600)
    args = ["--pool", "swarm-bench", "--sandbox-backend", "swarm", "--sandbox-mode", "per_run",
            "--sandbox-image", "sandman/minimal:latest", "--sandbox-network", "none",
            "--sandbox-cpu", "0.25", "--sandbox-mem", "64m", "--sandbox-pids", "64",
            "--sandbox-disk", "16m", "--project-environment", "development", "--threads", "16"]
    return Runner(tmp, name, env, token, args)


def one_swarm(nodes, n, m, conc, mem_n, out):
    tmp = tempfile.mkdtemp(prefix="sm-swarm-bench.")
    rig = Rig(nodes=nodes)
    runner = None
    try:
        runner = runner_for(rig, tmp, "r%d" % nodes)
        rss0 = rss_kb(runner.proc.pid)
        keys = ["b%d" % i for i in range(n)]
        log("%d node(s): creating %d sandboxes, %d clients" % (nodes, n, conc))
        wall, ms, fails = drive(runner.client, keys, conc)
        res = {"nodes": nodes, "create": {"n": n, "clients": conc, "wall_s": wall,
                                          "per_s": n / wall, "p50_ms": pct(ms, 0.5),
                                          "p95_ms": pct(ms, 0.95), "failed": len(fails),
                                          "errors": fails[:3]}}
        log("  %.2f sandboxes/s (p50 %.0f ms), %d failed" % (n / wall, pct(ms, 0.5), len(fails)))
        # Every sandbox once more first: the agent's session opens on a
        # sandbox's second call, not in the measured ones.
        drive(runner.client, keys, conc)
        jobs = [keys[i % n] for i in range(m)]
        log("%d node(s): %d calls over them" % (nodes, m))
        wall, ms, fails = drive(runner.client, jobs, conc)
        res["calls"] = {"n": m, "clients": conc, "wall_s": wall, "per_s": m / wall,
                        "p50_ms": pct(ms, 0.5), "p95_ms": pct(ms, 0.95), "failed": len(fails),
                        "errors": fails[:3]}
        log("  %.1f calls/s (p50 %.1f ms), %d failed" % (m / wall, pct(ms, 0.5), len(fails)))
        placed = {}
        for s in runner.client.sandboxes(all=True):
            placed[s.get("node")] = placed.get(s.get("node"), 0) + 1
        res["placement"] = placed
        if mem_n:
            more = ["idle%d" % i for i in range(mem_n - n)]
            log("%d node(s): %d idle sandboxes for the memory figure" % (nodes, mem_n))
            wall, _, fails = drive(runner.client, more, conc)
            listed = runner.client.sandboxes(all=True)
            res["memory"] = {"sandboxes": len(listed), "rss_before_kb": rss0,
                             "rss_kb": rss_kb(runner.proc.pid), "failed": len(fails),
                             "create_wall_s": wall}
            log("  runner RSS %.1f MB with %d sandboxes (%.1f MB before the first)" % (
                res["memory"]["rss_kb"] / 1024, len(listed), rss0 / 1024))
        out.append(res)
    finally:
        if runner:
            runner.stop()
        rig.down()
        shutil.rmtree(tmp, ignore_errors=True)


def report(results, args):
    lines = ["# The swarm backend: one node against three, side by side", "",
             "`bench/swarm/run.sh%s`, %s, %d cores, load average %.0f at the start and %.0f at "
             "the end; every node a sandman/dind engine in a container on this machine (they "
             "share its cores)." % (
                 " --quick" if args.quick else "", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 os.cpu_count(), args.load_start, os.getloadavg()[0]), "",
             "| | " + " | ".join("%d node%s" % (r["nodes"], "s" if r["nodes"] > 1 else "")
                                 for r in results) + " |",
             "|---|" + "---|" * len(results)]

    def row(name, fmt, get):
        lines.append("| %s | %s |" % (name, " | ".join(fmt % get(r) for r in results)))

    row("W1 sandboxes created per second (%d, %d clients)" % (args.sandboxes, args.clients),
        "%.2f", lambda r: r["create"]["per_s"])
    row("W1 one creation, p50 / p95 (ms)", "%s",
        lambda r: "%.0f / %.0f" % (r["create"]["p50_ms"], r["create"]["p95_ms"]))
    row("W2 calls per second (%d calls, %d clients)" % (args.calls, args.clients), "%.1f",
        lambda r: r["calls"]["per_s"])
    row("W2 one call, p50 / p95 (ms)", "%s",
        lambda r: "%.1f / %.1f" % (r["calls"]["p50_ms"], r["calls"]["p95_ms"]))
    row("failed calls", "%d", lambda r: r["create"]["failed"] + r["calls"]["failed"])
    row("placement (sandboxes per node)", "%s",
        lambda r: ", ".join("%d" % v for v in sorted(r["placement"].values(), reverse=True)))
    mem = [r for r in results if "memory" in r]
    if mem:
        m = mem[0]["memory"]
        lines += ["", "W3: the runner's resident memory with %d idle sandboxes across %d nodes: "
                  "**%.1f MB** (%.1f MB before its first sandbox; %d creations failed)." % (
                      m["sandboxes"], mem[0]["nodes"], m["rss_kb"] / 1024,
                      m["rss_before_kb"] / 1024, m["failed"])]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(SRC, "bench", "results"))
    args = ap.parse_args()
    args.sandboxes = 6 if args.quick else 24
    args.calls = 60 if args.quick else 480
    args.clients = 6
    args.load_start = os.getloadavg()[0]
    mem_n = 30 if args.quick else 300
    os.environ.setdefault("SANDMAN_INSTANCE", "bench-swarm-%d" % os.getpid())
    if not ensure_dind_image(lambda d, ok, detail: ok or log("%s failed: %s" % (d, detail))):
        return 1
    results = []
    one_swarm(1, args.sandboxes, args.calls, args.clients, 0, results)
    one_swarm(3, args.sandboxes, args.calls, args.clients, mem_n, results)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "swarm.json"), "w") as f:
        json.dump({"machine": platform.node(), "cpus": os.cpu_count(), "quick": args.quick,
                   "results": results}, f, indent=1)
    md = report(results, args)
    with open(os.path.join(args.out, "swarm.md"), "w") as f:
        f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
