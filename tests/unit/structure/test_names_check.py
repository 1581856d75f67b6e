#!/usr/bin/env python3
"""The names check (scripts/check-structure.py names) fails on a deliberate
violation: it compiles tests/fixtures/structure/names/ into a tree of its
own and runs the check on it, well-named code alone (it must pass), with
each kind of violation added (it must fail, naming each one), and with
known exceptions listed (they are tolerated, a new one is not).

  test_names_check.py CC CHECK_SCRIPT FIXTURE_DIR
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


def build(cc, tree):
    """Compiles every .c under tree/src into tree/obj/src/<same path>.c.o,
    as CMake lays out the library's objects."""
    for root, _, files in os.walk(os.path.join(tree, "src")):
        for f in files:
            if f.endswith(".c"):
                src = os.path.join(root, f)
                obj = os.path.join(tree, "obj", os.path.relpath(src, tree) + ".o")
                os.makedirs(os.path.dirname(obj), exist_ok=True)
                subprocess.run([cc, "-c", "-O0", "-o", obj, src], check=True)


def run_check(script, tree, known):
    out = subprocess.run([sys.executable, script, "names", os.path.join(tree, "obj"),
                          os.path.join(tree, "include", "sandman"), os.path.join(tree, "src"), known],
                         capture_output=True, text=True)
    return out.returncode, out.stdout + out.stderr


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    cc, script, fixture = argv[1:]
    with tempfile.TemporaryDirectory(prefix="names-check-") as tmp:
        tree = os.path.join(tmp, "tree")
        known = os.path.join(tmp, "known.txt")
        open(known, "w").write("# none\n")
        shutil.copytree(os.path.join(fixture, "good"), tree)
        build(cc, tree)
        rc, out = run_check(script, tree, known)
        check("well-named code passes", rc == 0, out)
        check("it counts the public and internal functions",
              "2 public functions" in out and "3 internal ones" in out, out)

        shutil.copytree(os.path.join(fixture, "bad"), tree, dirs_exist_ok=True)
        build(cc, tree)
        rc, out = run_check(script, tree, known)
        check("the deliberate violations fail the check (exit 1)", rc == 1, out)
        lines = [line for line in out.splitlines() if line]
        expected = {
            "internal sm_demo_helper has the public prefix sm_: name it demo_": "an internal sm_ name",
            "internal dm_count has no full module name: name it demo_": "a short module prefix",
            "internal demo_other_step has no full module name: name it other_": "src/lib/<module>/ layout",
            "oops.h:2: static sm_demo_inline has the public prefix sm_": "a static named sm_*",
            "extra.h: public sm_oops_run is not named sm_extra_": "a public name of no header",
            "oops.c:5: internal type sm_demo_state has the public prefix sm_": "an internal type sm_",
        }
        for text, what in expected.items():
            check(f"it names {what}", sum(text in line for line in lines) == 1, out)
        check("nothing else is reported", len(lines) == len(expected), out)

        open(known, "w").write("# known\nsm_demo_helper\ndm_count\ndemo_other_step  # moved\n"
                               "sm_demo_state\n")
        rc, out = run_check(script, tree, known)
        lines = [line for line in out.splitlines() if line]
        check("known exceptions are tolerated, the others still fail",
              rc == 1 and len(lines) == 2 and "sm_demo_inline" in out and "sm_oops_run" in out, out)
    print(f"{len(FAILED)} failed" if FAILED else "all passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
