#!/usr/bin/env python3
"""Runs the unit tier with one allocation failing (issue 26 item 3).

Every unit test program is linked with the allocator wrapped
(tests/support/alloc_fail.h; libgit2's strict-alloc and curl's torture
tests are the model): SANDMAN_ALLOC_FAIL_AT=N makes the Nth allocation of
the program fail, once. A run may fail (an allocation failed: that is the
point: the library answers SM_ENOMEM, the test's own checked allocations
say so and exit), but it must end and say so; a crash (a signal, a
sanitizer report, cmocka's "exception") or a hang is a defect.

  scripts/alloc-fail.py [--build DIR] [--jobs J] [--timeout S]
                        [--budget S] [--seed K] [-R REGEX] [N ...]

With N given: every unit program runs once for each N. Without (the
sweep, what ctest's unit/alloc_fail runs): each program runs with N = 1,
2, ... 8, then N growing by about half each step (an offset drawn from
the seed), until a run no longer reaches its Nth allocation (the program
makes fewer: it has been swept to the end) or the program's runs have
taken --budget seconds (default 4). The seed (default 0, so that CI is
repeatable; give another to try other N) is printed; the same seed on
the same build gives the same N, apart from where a slower machine stops
a program's sweep earlier. Prints one line per crash or hang with the
command that repeats it, then a summary; exit status 1 when anything
crashed or hung. In the sanitizer tree (-DSANDMAN_SANITIZE=
'address;undefined') a bad access on a failure path is a crash too, and
so is a leak in a run whose tests all passed; a test that failed an
assertion leaves its own fixtures behind, so a leak there is not counted.
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

CRASH_WORDS = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "exception:",
               "Segmentation fault", "Aborted")
# A test said it failed (cmocka's summary, xalloc.h's own allocations).
FAILED_WORDS = ("[  FAILED  ]", "Test setup failed", "the test stops here")
FIRST_EVERY = 8  # the sweep tries every N up to this one
# Each run gets a /tmp of its own (a tmpfs in a mount namespace: root),
# gone when the run ends: a test stopped by an allocation failure never
# removes the temporary folders it made.
PRIVATE_TMP = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs -o size=1g tmpfs /tmp && exec "$0" "$@"']


def private_tmp_works():
    try:
        return subprocess.run(PRIVATE_TMP + ["true"], capture_output=True).returncode == 0
    except OSError:
        return False


def unit_programs(build, regex):
    """(name, command, environment) of the unit tests that are programs of
    their own (not the structure checks, the fuzz replays or this sweep)."""
    out = subprocess.run(["ctest", "--test-dir", build, "-L", "unit", "--show-only=json-v1"],
                         check=True, capture_output=True, text=True).stdout
    tests = []
    for t in json.loads(out)["tests"]:
        cmd = t.get("command") or []
        if not cmd or not os.path.basename(cmd[0]).startswith("unit_"):
            continue
        if t["name"].startswith("unit/structure/"):  # built without the wrapped allocator
            continue
        if regex and not re.search(regex, t["name"]):
            continue
        env = {}
        for p in t.get("properties", []):
            if p["name"] == "ENVIRONMENT":
                for kv in p["value"]:
                    k, _, v = kv.partition("=")
                    env[k] = v
        tests.append((t["name"], cmd, env))
    return tests


def run_one(test, n, timeout, prefix, scratch):
    """One run with allocation n failing: (outcome, why, reached, seconds).
    reached is whether the program's own process got to allocation n."""
    name, cmd, extra = test
    with tempfile.NamedTemporaryFile(dir=scratch, delete=False) as f:
        report = f.name
    env = dict(os.environ, **extra, SANDMAN_ALLOC_FAIL_AT=str(n),
               SANDMAN_ALLOC_FAIL_REPORT=report)
    start = time.monotonic()
    try:
        p = subprocess.Popen(prefix + cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, errors="replace", start_new_session=True)
        try:
            text, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.communicate()
            return "hung", f"no end within {timeout:.0f} s", True, time.monotonic() - start
        with open(report) as r:
            reports = [l.split() for l in r if l.strip()]
    finally:
        os.unlink(report)
    took = time.monotonic() - start
    own = [l for l in reports if l[0] == str(p.pid)]
    # No line: it made no allocation, or ended without exit() (a signal).
    reached = own[0][1] == "1" if own else p.returncode < 0
    lines = text.splitlines()
    if any(w in text for w in FAILED_WORDS):
        lines = [l for l in lines if "LeakSanitizer" not in l and "leaked in" not in l]
    hits = [l for l in lines if any(w in l for w in CRASH_WORDS)]
    if p.returncode < 0 or hits:
        return "crashed", (hits[0] if hits else f"signal {-p.returncode}")[:300], reached, took
    return ("passed" if p.returncode == 0 else "failed"), "", reached, took


def sweep_n(rng):
    """The sweep's N, in order: 1..FIRST_EVERY, then growing by about half."""
    yield from range(1, FIRST_EVERY + 1)
    n = FIRST_EVERY
    while True:
        step = max(1, n // 2)
        n += step // 2 + rng.randrange(step)
        yield n


def sweep_one(test, a, fixed):
    """Runs one program over its N: (runs, bad lines, counts, swept)."""
    rng = random.Random(f"{a.seed}:{test[0]}")
    counts = {"passed": 0, "failed": 0, "crashed": 0, "hung": 0}
    bad, spent, swept, last = [], 0.0, False, 0
    for n in (fixed or sweep_n(rng)):
        outcome, why, reached, took = run_one(test, n, a.timeout, a.prefix, a.scratch)
        spent += took
        last = n
        counts[outcome] += 1
        if outcome in ("crashed", "hung"):
            env = " ".join(f"{k}={v}" for k, v in test[2].items())
            bad.append(f"N={n} {test[0]}: {outcome}: {why}\n    repeat: {env} "
                       f"SANDMAN_ALLOC_FAIL_AT={n} {' '.join(test[1])}")
        if fixed:
            continue
        if not reached:
            swept = True
            break
        if spent >= a.budget:
            break
    return counts, bad, swept, last


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60, help="a run longer than this hung")
    ap.add_argument("--budget", type=float, default=4, help="seconds of runs per program")
    ap.add_argument("--seed", default="0")
    ap.add_argument("-R", dest="regex", help="only the programs whose test name matches")
    ap.add_argument("n", nargs="*", type=int)
    a = ap.parse_args()
    tests = unit_programs(a.build, a.regex)
    a.prefix = PRIVATE_TMP if private_tmp_works() else []
    if not a.prefix:
        print("alloc-fail: no mount namespace (not root?): the runs share /tmp, and a run "
              "that stopped early leaves its temporary folders there", flush=True)
    started = time.monotonic()
    if not a.n:
        print(f"alloc-fail: sweep of {len(tests)} programs, seed {a.seed}, "
              f"budget {a.budget:g} s each", flush=True)
    total = {"passed": 0, "failed": 0, "crashed": 0, "hung": 0}
    bad = swept = runs = 0
    # The runs' reports: outside /tmp, which each run has its own of.
    a.scratch = tempfile.mkdtemp(prefix="alloc-fail-", dir=os.path.abspath(a.build))
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for test, (counts, lines, done, last) in zip(
                tests, pool.map(lambda t: sweep_one(t, a, a.n), tests)):
            for line in lines:
                print(line, flush=True)
            bad += len(lines)
            swept += done
            runs += sum(counts.values())
            for k in total:
                total[k] += counts[k]
            if not a.n:
                print(f"  {test[0]}: {sum(counts.values())} runs up to N={last}, "
                      f"{'swept' if done else 'budget spent'}", flush=True)
    shutil.rmtree(a.scratch, ignore_errors=True)
    print(f"alloc-fail: {len(tests)} programs, {runs} runs: {total['passed']} passed, "
          f"{total['failed']} failed and said so, {total['crashed']} crashed, "
          f"{total['hung']} hung" + ("" if a.n else f"; {swept} swept to the end") +
          f" ({time.monotonic() - started:.0f} s)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
