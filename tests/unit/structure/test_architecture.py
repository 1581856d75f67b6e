#!/usr/bin/env python3
"""The architecture check fails on each kind of drift (issue 26).

  test_architecture.py CHECK_STRUCTURE OBJECT_DIR SRC_DIR DOC

Copies DOC (docs/architecture.md) into a scratch folder, checks that the
copy passes, then changes the copy in one way at a time (a module's row
gone, a row of a module that does not exist, a wrong dependency, a wrong
diagram, a reading-path step that names a missing function or file, a
missing path or file name, a file left out of its module's file table,
an empty hand-written column, a line count far off) and checks that each change fails with the message that names
it. Last, --write on a drifted copy gives a document that passes and keeps
the hand-written column.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

CHECK, OBJDIR, SRC, DOC = sys.argv[1:5]
failures = []


def run(doc, *extra):
    out = subprocess.run([sys.executable, CHECK, "architecture", OBJDIR, SRC, doc, *extra],
                         capture_output=True, text=True)
    return out.returncode, out.stdout + out.stderr


def row_of(text, module):
    m = re.search(r"^\| `" + re.escape(module) + r"` \|.*$", text, re.M)
    assert m, f"the document has no row for {module}"
    return m.group(0)


def expect_failure(name, text, change, message):
    """change(text) -> changed text; the check must fail saying message."""
    changed = change(text)
    if changed == text:
        failures.append(f"{name}: the change did not change the document (the test is stale)")
        return
    path = os.path.join(scratch, "architecture.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(changed)
    rc, out = run(path)
    if rc != 1 or message not in out:
        failures.append(f"{name}: expected exit 1 saying {message!r}, got {rc}:\n{out}")
    else:
        print(f"ok: {name} fails ({message})")


def replace_cell(row, index, value):
    cells = row.strip().strip("|").split("|")
    cells[index] = f" {value} "
    return "|" + "|".join(cells) + "|"


scratch = tempfile.mkdtemp(prefix="arch-check-")
try:
    text = open(DOC, encoding="utf-8").read()
    path = os.path.join(scratch, "architecture.md")
    shutil.copy(DOC, path)
    rc, out = run(path)
    if rc != 0:
        failures.append(f"the document as committed fails the check:\n{out}")

    audit_row = row_of(text, "audit")
    expect_failure("a module's row removed", text,
                   lambda t: t.replace(audit_row + "\n", ""), "`audit` (")
    expect_failure("a row for a module that is gone", text,
                   lambda t: t.replace(audit_row, audit_row + "\n" + audit_row.replace("`audit`", "`gone`", 1)),
                   "a row names `gone`")
    expect_failure("a wrong dependency in the table", text,
                   lambda t: t.replace(audit_row, replace_cell(audit_row, 5, "common, server")),
                   "`audit` depends on is")
    expect_failure("a wrong file count", text,
                   lambda t: t.replace(audit_row, replace_cell(audit_row, 3, "999")), "`audit` files is")
    expect_failure("a line count far off", text,
                   lambda t: t.replace(audit_row, replace_cell(audit_row, 4, "100,000")), "`audit` lines is")
    expect_failure("an empty hand-written column", text,
                   lambda t: t.replace(audit_row, replace_cell(audit_row, 6, "")), "`audit` says nothing")
    expect_failure("a wrong line in the diagram", text,
                   lambda t: re.sub(r"^(audit +-> )common$", r"\1common, server", t, count=1, flags=re.M),
                   "dependency diagram differs")
    expect_failure("the diagram's markers gone", text,
                   lambda t: t.replace("<!-- end of generated dependencies -->", ""),
                   "no generated block for the dependencies")
    step = re.search(r"`(src/[\w/.-]+)/([\w.-]+\.c):(\w+)`", text)
    assert step, "the document names no file:function step"
    folder, _, fn = step.groups()
    expect_failure("a reading-path step naming a missing function", text,
                   lambda t: t.replace(step.group(0), step.group(0).replace(":" + fn, ":no_such_function"), 1),
                   "defines no function no_such_function")
    expect_failure("a reading-path step naming a missing file", text,
                   lambda t: t.replace(step.group(0), f"`{folder}/gone.c:{fn}`", 1),
                   f"there is no {folder}/gone.c")
    expect_failure("a header step naming a function it does not declare", text,
                   lambda t: t + "\nSee `include/sandman/error.h:sm_no_such_function`.\n",
                   "declares no function sm_no_such_function")
    expect_failure("a src/ path that is gone", text,
                   lambda t: t + "\nSee src/no_such_module/.\n", "names src/no_such_module/")
    expect_failure("a module-relative path that is gone", text,
                   lambda t: t + "\nSee `engine/no_such_file.c`.\n", "names `engine/no_such_file.c`")
    expect_failure("a file left out of its module's file table", text,
                   lambda t: t.replace("`checkpoints.c`, `networks.c`", "`networks.c`", 1),
                   "the file table of module engine leaves out `checkpoints.c`")
    expect_failure("a file name that is gone", text,
                   lambda t: t + "\nSee `no_such_file.c`.\n", "names `no_such_file.c`")

    # A program added to the tree (a folder whose file defines main) needs
    # a row: a scratch checkout whose src/ has one more folder.
    root = os.path.join(scratch, "root")
    os.mkdir(root)
    for top in ("include", "tests", "scripts"):
        os.symlink(os.path.join(os.path.dirname(os.path.abspath(SRC)), top), os.path.join(root, top))
    shutil.copytree(SRC, os.path.join(root, "src"), symlinks=True)
    os.mkdir(os.path.join(root, "src", "newprog"))
    with open(os.path.join(root, "src", "newprog", "newprog.c"), "w", encoding="utf-8") as f:
        f.write("int main(void) { return 0; }\n")
    shutil.copy(DOC, path)
    out = subprocess.run([sys.executable, CHECK, "architecture", OBJDIR, os.path.join(root, "src"), path],
                         capture_output=True, text=True)
    if out.returncode != 1 or "`newprog` (`src/newprog/`) has no row" not in out.stdout:
        failures.append(f"a new program in src/: expected its missing row, got {out.returncode}:\n{out.stdout}")
    else:
        print("ok: a new program in src/ without a row fails")

    # --write repairs what is generated and keeps what is written by hand.
    # What it is compared with: the committed document regenerated, since
    # the check tolerates rounded line counts a --write brings up to date.
    shutil.copy(DOC, path)
    run(path, "--write")
    regenerated = open(path, encoding="utf-8").read()
    drifted = text.replace(audit_row + "\n", "")
    drifted = drifted.replace(row_of(text, "engine"), replace_cell(row_of(text, "engine"), 5, "server"))
    drifted = re.sub(r"^(audit +-> )common$", r"\1common, server", drifted, count=1, flags=re.M)
    with open(path, "w", encoding="utf-8") as f:
        f.write(drifted)
    rc, out = run(path, "--write")
    written = open(path, encoding="utf-8").read()
    if rc != 1 or "`audit` says nothing" not in out:
        failures.append(f"--write: expected it to ask for audit's hand-written column, got {rc}:\n{out}")
    elif written.replace(row_of(written, "audit") + "\n", "") != regenerated.replace(row_of(regenerated, "audit") + "\n", ""):
        failures.append("--write: the regenerated document differs from the committed one beyond audit's row")
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(written.replace(row_of(written, "audit"), audit_row))
        rc, out = run(path)
        if rc != 0:
            failures.append(f"--write, then the hand column written: expected a pass, got {rc}:\n{out}")
        else:
            print("ok: --write regenerates the table and the diagram and keeps the hand column")
finally:
    shutil.rmtree(scratch)

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
