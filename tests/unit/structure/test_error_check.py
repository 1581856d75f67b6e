#!/usr/bin/env python3
"""The error-policy check (scripts/error-counts.py check) fails on a
deliberate violation: it runs the check on tests/fixtures/structure/errors/
copied into a tree of its own, the good file alone (it must pass), with a
bare return or a by-hand release added (it must fail, naming the function),
with that violation listed as known (tolerated), and with a known line that
matches nothing (it must fail: the list only shrinks).

  test_error_check.py CHECK_SCRIPT FIXTURE_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile

FAILED = []


def check(what, cond, detail=""):
    print(f"{'ok' if cond else 'not ok'} - {what}")
    if not cond:
        FAILED.append(what)
        if detail:
            print("  " + detail.replace("\n", "\n  "))


def run(script, tmp, files, known_lines):
    tree = os.path.join(tmp, "src")
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(tree)
    for f in files:
        shutil.copy(os.path.join(FIXTURE, f), tree)
    known = os.path.join(tmp, "known.txt")
    with open(known, "w") as k:
        k.write("# fixture\n" + "".join(line + "\n" for line in known_lines))
    out = subprocess.run([sys.executable, script, "check", known, "src", "--release", "src"],
                         cwd=tmp, capture_output=True, text=True)
    return out.returncode, out.stdout + out.stderr


def main(argv):
    global FIXTURE
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    script, FIXTURE = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    with tempfile.TemporaryDirectory(prefix="error-check-") as tmp:
        rc, out = run(script, tmp, ["good.c"], [])
        check("code that keeps the policy passes (filled, mapper, callback, predicate)",
              rc == 0 and "0 problems" in out, out)
        rc, out = run(script, tmp, ["good.c", "bare.c"], [])
        check("a bare return fails, named", rc == 1 and "bare.c:7: fixture_copy" in out, out)
        check("a fill in another path's return does not excuse the next return",
              "bare.c:14: fixture_check" in out, out)
        rc, out = run(script, tmp, ["good.c", "release.c"], [])
        check("a by-hand release on two paths fails, named",
              rc == 1 and "fixture_make: releases free(p)" in out, out)
        rc, out = run(script, tmp, ["good.c", "bare.c", "release.c"],
                      ["src/bare.c:fixture_copy  fixture", "src/bare.c:fixture_check  fixture",
                       "src/release.c:fixture_make  fixture"])
        check("known exceptions are tolerated", rc == 0, out)
        rc, out = run(script, tmp, ["good.c"], ["src/good.c:fixture_gone  fixture"])
        check("a known line that matches nothing fails", rc == 1 and "fixture_gone" in out, out)
    print(f"{'FAILED: ' + ', '.join(FAILED) if FAILED else 'all passed'}")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
