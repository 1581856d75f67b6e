#!/usr/bin/env bash
# docs/security.md is a list of promises, each with the tests that show it:
# every "shown by" reference must name a test file that exists and a check
# that file really has (a cmocka test function, or the text of an
# "ok - ..." line). No engine needed.
source "$(dirname "$0")/lib.sh"

out=$(python3 - "$SRC_DIR" <<'EOF'
import os
import re
import sys

src = sys.argv[1]


def templates(text):
    """Regexes of the quoted strings with a placeholder in a test file."""
    out = []
    for lit in re.findall(r'"((?:[^"\\\n]|\\.)*)"', text):
        if "%" not in lit and "$" not in lit:
            continue
        parts = re.split(r"(%[srd]|\$\{[^}]*\}|\$\w+)", lit)
        if sum(len(p) for p in parts[::2]) < 8:
            continue  # "$out", "%s: %s": too little text to name a check
        rx = "".join(".*" if i % 2 else re.escape(p) for i, p in enumerate(parts))
        out.append(re.compile(rx))
    return out

doc = open(os.path.join(src, "docs", "security.md")).read()
rows = [l for l in doc.splitlines() if re.match(r"^\| [A-Z][0-9]+ \|", l)]
print("rows %d" % len(rows))
seen = set()
for row in rows:
    cells = [c.strip() for c in row.strip().strip("|").split(" | ")]
    pid, shown = cells[0], cells[-1]
    if pid in seen:
        print("bad %s: the promise id is used twice" % pid)
    seen.add(pid)
    refs = re.findall(r"`([^`]+)`", shown)
    if not refs:
        print("bad %s: no test named" % pid)
    current = None
    for ref in refs:
        if ref.startswith("::"):
            path, name = current, ref[2:].strip()
        elif " :: " in ref:
            path, name = ref.split(" :: ", 1)
        else:
            path, name = ref, None
        if path is None:
            print("bad %s: '%s' follows no file" % (pid, ref))
            continue
        current = path
        full = os.path.join(src, "tests", path)
        if not os.path.isfile(full):
            print("bad %s: no file tests/%s" % (pid, path))
            continue
        if name is None:
            continue
        text = open(full, errors="replace").read()
        if name in text:
            continue
        # Checks written with a parameter ("... ($m)", "auth: %s -> %d"):
        # the name must match one of the file's quoted templates.
        if any(t.fullmatch(name) for t in templates(text)):
            continue
        print("bad %s: tests/%s has no check '%s'" % (pid, path, name))
EOF
)
rows=$(sed -n 's/^rows //p' <<<"$out")
check "docs/security.md has promise rows" test "${rows:-0}" -ge 20
bad=$(grep '^bad ' <<<"$out" || true)
expect_eq "every promise names tests that exist" "" "$bad"
it_done
