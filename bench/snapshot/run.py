#!/usr/bin/env python3
"""Snapshots and forks of a keyed sandbox (docs/state.md#snapshots), side by
side in one run, with the CLI (no runner), each step a whole process timed
from here:

  sandman snapshot   `sandman sandbox snapshot` of a per_run sandbox whose
                     /workspace holds FILES files of SIZE MB in all and
                     whose writable layer LAYER MB (a writable root)
  by hand            `docker commit` of the same container and `docker cp`
                     of its /workspace to a tar on disk (not fsync'd: the
                     snapshot's is), what the snapshot keeps, done with the
                     docker CLI; the two alternate which goes first
  fork to 1st call   `sandman sandbox fork --count 1` then `sandman run` of
                     `true` in the fork (issue 29's target: under 1 s)
  10 forks           `sandman sandbox fork --count 10` (target: under 5 s)

The rounds alternate the methods so the machine's changing load weighs on
each alike, and every timed step starts after a sync: the disk's writeback
of what the steps before it wrote (the forks' restored workspaces, 1.1 GB a
round) is charged to none of them. Writes bench/results/snapshot.{json,md} with the machine's
load. Everything made (sandboxes, volumes, images, the state directory) is
removed at the end.

  python3 bench/snapshot/run.py [--rounds N] [--files N] [--size-mb N] [--layer-mb N]
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
SANDMAN = os.environ.get("SANDMAN_BIN", os.path.join(SRC, "build", "sandman"))
INSTANCE = os.environ.get("SANDMAN_INSTANCE", "snap-bench")


def run(argv, env, check=True):
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(argv[:4]), p.returncode,
                                                    p.stderr.decode()[-500:]))
    return p.stdout.decode()


def timed(argv, env):
    t0 = time.monotonic()
    out = run(argv, env)
    return (time.monotonic() - t0) * 1000.0, out


def container_of(env, run_id):
    return run(["docker", "ps", "-aq", "--no-trunc", "--filter", "label=io.sandman.instance=" + INSTANCE,
                "--filter", "label=io.sandman.run=" + run_id], env).split()[0]


def cleanup(env):
    ids = run(["docker", "ps", "-aq", "--filter", "label=io.sandman.instance=" + INSTANCE], env, False).split()
    if ids:
        run(["docker", "rm", "-fv"] + ids, env, False)
    vols = run(["docker", "volume", "ls", "-q", "--filter", "label=io.sandman.instance=" + INSTANCE],
               env, False).split()
    if vols:
        run(["docker", "volume", "rm", "-f"] + vols, env, False)
    imgs = set(run(["docker", "images", "-q", "--filter", "label=io.sandman.snapshot.instance=" + INSTANCE],
                   env, False).split())
    imgs |= set(run(["docker", "images", "-q", "sandman-snap-bench/hand"], env, False).split())
    if imgs:
        run(["docker", "rmi", "-f"] + sorted(imgs), env, False)


def fill(env, src_run, files, size_mb, layer_mb):
    per = max(1, size_mb * 1024 * 1024 // files)
    script = ("cd /workspace && i=0; while [ $i -lt %d ]; do d=d$((i %% 100)); mkdir -p $d; "
              "head -c %d /dev/urandom >$d/f$i; i=$((i + 1)); done; "
              "head -c %d /dev/urandom >/var/tmp/layer.bin; echo made"
              % (files, per, layer_mb * 1024 * 1024))
    out = run([SANDMAN, "run", "--mode", "per_run", "--run-id", src_run, "--disk", "1g",
               "--timeout", "600", "--", "sh", "-c", script], env)
    if "made" not in out:
        raise RuntimeError("the files were not written: " + out)


def stats(v):
    return {"median_ms": round(statistics.median(v), 1), "min_ms": round(min(v), 1),
            "max_ms": round(max(v), 1), "n": len(v)}


def rounds(env, src_run, n, tmp):
    res = {"sandman snapshot": [], "docker commit + docker cp": [], "fork to first call": [],
           "10 forks": []}
    cid = container_of(env, src_run)
    loads = []

    def ours(i):
        os.sync()
        ms, _ = timed([SANDMAN, "sandbox", "snapshot", "--run-id", src_run, "--name", "bench-%d" % i], env)
        res["sandman snapshot"].append(ms)

    def by_hand(i):
        tar = os.path.join(tmp, "hand-%d.tar" % i)
        os.sync()
        t0 = time.monotonic()
        run(["docker", "commit", cid, "sandman-snap-bench/hand:%d" % i], env)
        with open(tar, "wb") as f:
            subprocess.run(["docker", "cp", cid + ":/workspace", "-"], stdout=f, check=True)
        res["docker commit + docker cp"].append((time.monotonic() - t0) * 1000.0)
        os.unlink(tar)
        run(["docker", "rmi", "-f", "sandman-snap-bench/hand:%d" % i], env, False)

    for i in range(n):
        loads.append(os.getloadavg()[0])
        # Which goes first alternates, so neither always finds the other's
        # pages in the cache.
        for step in ((ours, by_hand) if i % 2 == 0 else (by_hand, ours)):
            step(i)
        os.sync()
        t0 = time.monotonic()
        ids = run([SANDMAN, "sandbox", "fork", "--from-snapshot", "bench-%d" % i, "--count", "1",
                   "--prefix", "bench-one-%d" % i], env).split()
        run([SANDMAN, "run", "--mode", "per_run", "--run-id", ids[0], "--", "true"], env)
        res["fork to first call"].append((time.monotonic() - t0) * 1000.0)
        os.sync()
        ms, out = timed([SANDMAN, "sandbox", "fork", "--from-snapshot", "bench-%d" % i, "--count", "10",
                         "--prefix", "bench-ten-%d" % i], env)
        if len(out.split()) != 10:
            raise RuntimeError("10 forks printed: " + out)
        res["10 forks"].append(ms)
        # The forks go before the next round, not the source.
        forks = run(["docker", "ps", "-aq", "--filter", "label=io.sandman.instance=" + INSTANCE,
                     "--filter", "label=io.sandman.snapshot"], env).split()
        if forks:
            run(["docker", "rm", "-fv"] + forks, env, False)
        run([SANDMAN, "snapshot", "rm", "bench-%d" % i], env)
    return res, loads


def write(results, args, load, loads):
    out = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_before": load[0],
                       "load_after": load[1], "load_per_round": [round(x, 2) for x in loads]},
           "workspace": {"files": args.files, "size_mb": args.size_mb, "layer_mb": args.layer_mb},
           "rounds": args.rounds, "results": {k: stats(v) for k, v in results.items()}}
    rdir = os.path.join(SRC, "bench", "results")
    with open(os.path.join(rdir, "snapshot.json"), "w") as f:
        json.dump(out, f, indent=2)
    lines = ["# Snapshots and forks (bench/snapshot/run.py)", "",
             "%d files, %d MB in /workspace, %d MB in the writable layer; %d rounds (the snapshot "
             "and the by-hand copy alternate which goes first); load %s -> %s, %s to %s at the "
             "rounds' starts (1-minute average, %d CPUs)."
             % (args.files, args.size_mb, args.layer_mb, args.rounds, load[0], load[1],
                round(min(loads), 2), round(max(loads), 2), os.cpu_count()), "",
             "| step | median ms | min | max |", "|---|---|---|---|"]
    for k, s in out["results"].items():
        lines.append("| %s | %.0f | %.0f | %.0f |" % (k, s["median_ms"], s["min_ms"], s["max_ms"]))
    with open(os.path.join(rdir, "snapshot.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--layer-mb", type=int, default=50)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sandman-bench-snapshot-")
    env = dict(os.environ, SANDMAN_INSTANCE=INSTANCE, SANDMAN_STATE_DIR=os.path.join(tmp, "state"))
    cfg = os.path.join(tmp, "sandman.yaml")
    with open(cfg, "w") as f:
        f.write("defaults:\n  read_only_root: false\n")
    env["SANDMAN_CONFIG"] = cfg
    cleanup(env)
    try:
        src_run = "bench-src"
        fill(env, src_run, args.files, args.size_mb, args.layer_mb)
        load0 = os.getloadavg()[0]
        res, loads = rounds(env, src_run, args.rounds, tmp)
        write(res, args, (round(load0, 2), round(os.getloadavg()[0], 2)), loads)
    finally:
        cleanup(env)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
