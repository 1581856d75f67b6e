#!/usr/bin/env python3
"""Runs the unit tier with one allocation failing (issue 26 item 3).

Every unit test program is linked with the allocator wrapped
(tests/support/alloc_fail.h; libgit2's strict-alloc and curl's torture
tests are the model): SANDMAN_ALLOC_FAIL_AT=N makes the Nth allocation of
the program fail, once. For each N given, every unit test program runs so.
A test may fail (an allocation failed: that is the point), but it must end
and say so; a crash (a signal, a sanitizer report, cmocka's "exception")
or a hang is a defect.

  scripts/alloc-fail.py [--build DIR] [--jobs J] [N ...]

Default N: 1 2 3 5 10 20 50 100 200 500 1000 2000. Prints one line per
crash and a summary per N; exit status 1 when anything crashed or hung.
Run it in the sanitizer tree (-DSANDMAN_SANITIZE='address;undefined') to
have AddressSanitizer say where.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

CRASH_WORDS = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "exception:",
               "Segmentation fault", "Aborted")


def unit_programs(build):
    """(name, command, environment) of the unit tests that are programs of
    their own (not the structure checks or the fuzz replays)."""
    out = subprocess.run(["ctest", "--test-dir", build, "-L", "unit", "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    tests = []
    for t in json.loads(out)["tests"]:
        cmd = t.get("command") or []
        if not cmd or not os.path.basename(cmd[0]).startswith("unit_"):
            continue
        env = {}
        for p in t.get("properties", []):
            if p["name"] == "ENVIRONMENT":
                for kv in p["value"]:
                    k, _, v = kv.partition("=")
                    env[k] = v
        tests.append((t["name"], cmd, env))
    return tests


def run_one(test, n, timeout):
    name, cmd, extra = test
    env = dict(os.environ, **extra, SANDMAN_ALLOC_FAIL_AT=str(n))
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace",
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return name, "hung", ""
    text = p.stdout + p.stderr
    if p.returncode < 0 or any(w in text for w in CRASH_WORDS):
        lines = [l for l in text.splitlines() if any(w in l for w in CRASH_WORDS)]
        return name, "crashed", (lines[0] if lines else f"signal {-p.returncode}")[:300]
    return name, "passed" if p.returncode == 0 else "failed", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("n", nargs="*", type=int,
                    default=[1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 2000])
    a = ap.parse_args()
    tests = unit_programs(a.build)
    bad = 0
    for n in a.n:
        counts = {"passed": 0, "failed": 0, "crashed": 0, "hung": 0}
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            for name, outcome, why in pool.map(lambda t: run_one(t, n, a.timeout), tests):
                counts[outcome] += 1
                if outcome in ("crashed", "hung"):
                    bad += 1
                    print(f"N={n} {name}: {outcome}: {why}")
        print(f"N={n}: {len(tests)} programs: {counts['passed']} passed, {counts['failed']} "
              f"failed and said so, {counts['crashed']} crashed, {counts['hung']} hung",
              flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
