#!/usr/bin/env python3
"""Structure checks of the library (issue 20), run as unit tests by ctest.

  check-structure.py exports LIBSANDMAN_SO INCLUDE_DIR
      The shared library exports exactly the functions declared with SM_API
      in include/sandman/*.h, and every function declared there has SM_API.
  check-structure.py functions SRC_DIR
      No function of the library or the tool is longer than 100 lines
      unless the comment right above it gives the reason ("Long because
      ..."): a long function usually holds several steps that want names.
  check-structure.py deps OBJECT_DIR
      Within one module of the library (src/lib/<module>/, with its files
      in src/shared/<module>/ that a static program compiles too), no two
      files use each other's functions, directly or through others (a
      cycle of files), and the modules themselves depend on each other in
      one direction only. The programs (src/cli, src/agent,
      src/egress_proxy) are not in the library's objects: each is a unit
      of its own, outside this graph.
      Measured on the compiled objects: file A depends on file B when A.o
      uses a symbol that B.o defines.
  check-structure.py names OBJECT_DIR INCLUDE_DIR SRC_DIR [KNOWN_FILE]
      One naming rule (issue 26). A public function (declared with SM_API
      in include/sandman/<h>.h) is named sm_<h> or sm_<h>_<what> (<h> or,
      for a plural header, its singular), unless it is in PUBLIC_KEPT (an
      exported name is contract). Every other global function of the
      library (the objects under OBJECT_DIR) carries its module's full name,
      <module>_<what>, the module being the folder under src/lib/ or
      src/shared/ (or src/, for a program's files): never the public sm_
      prefix, never a short form (ws_, bk_). No static function in SRC_DIR
      is named sm_*, nor is a type defined there that no public header
      names. Names listed in KNOWN_FILE (default scripts/names-known.txt;
      violations from before the rule, being renamed) are reported as known.

Exit 0 when the check holds, 1 with one line per problem when it does not.
"""
import collections
import os
import re
import subprocess
import sys


def nm(path, *flags):
    out = subprocess.run(["nm", *flags, path], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def check_exports(so, include_dir):
    problems = []
    declared = set()
    for name in sorted(os.listdir(include_dir)):
        if not name.endswith(".h"):
            continue
        path = os.path.join(include_dir, name)
        text = open(path, encoding="utf-8").read()
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        lines = text.split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            start = i
            i += 1
            if not line or line[0] in " \t#}{" or "(" not in line:
                continue
            if re.match(r"(typedef|extern \"C\"|struct|enum|union)\b", line):
                continue
            decl = line
            while ";" not in decl and "{" not in decl and i < len(lines):
                decl += " " + lines[i]
                i += 1
            m = re.match(r"[^(]*?\b(\w+)\s*\(", decl)
            if not m:
                continue
            fn = m.group(1)
            if not decl.startswith("SM_API "):
                problems.append(f"{path}:{start + 1}: {fn} is declared without SM_API (not exported)")
            declared.add(fn)
    exported = set()
    for line in nm(so, "-D", "--defined-only"):
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TW":
            exported.add(parts[2])
    for fn in sorted(exported - declared):
        problems.append(f"{so}: exports {fn}, which no header in {include_dir} declares")
    for fn in sorted(declared - exported):
        problems.append(f"{so}: does not export {fn}, declared in {include_dir}")
    if not problems:
        print(f"exports: {len(exported)} functions exported, all declared in {include_dir} with SM_API")
    return problems


def sccs(nodes, edges):
    """Tarjan's strongly connected components with more than one node."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in nodes:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(100000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


# Cycles that were there before this check and are being taken apart (issue
# 20); each entry is the exact set of files. A cycle that is not listed, or
# a listed one that grew, fails. Remove an entry when its cycle is gone.
KNOWN_CYCLES = [
]


def library_file(name):
    """<module>/<file>.c of an object's source path under src/: the library's
    files are in lib/<module>/ or, when a static program compiles them too,
    in shared/<module>/; both count as the module's."""
    for root in ("lib/", "shared/"):
        if name.startswith(root):
            return name[len(root):]
    return name


def check_deps(objdir):
    defs, uses = {}, collections.defaultdict(set)
    for root, _, files in os.walk(objdir):
        for f in files:
            path = os.path.join(root, f)
            if not f.endswith(".c.o") or "/src/" not in path:
                continue
            name = library_file(path.split("/src/", 1)[1][: -len(".o")])
            for line in nm(path):
                parts = line.split()
                if len(parts) == 3 and parts[1] in "TDBRCVWG":
                    defs[parts[2]] = name
                elif len(parts) == 2 and parts[0] == "U":
                    uses[name].add(parts[1])
    if not defs:
        return [f"{objdir}: no objects of src/ found (build first)"]
    edges = collections.defaultdict(set)
    for a, syms in uses.items():
        for s in syms:
            b = defs.get(s)
            if b and b != a:
                edges[a].add(b)
    files = set(defs.values()) | set(uses)
    modules = collections.defaultdict(set)
    for f in files:
        modules[f.split("/")[0]].add(f)
    problems = []
    for mod, members in sorted(modules.items()):
        inner = {a: {b for b in edges[a] if b in members} for a in members}
        for comp in sccs(members, inner):
            if set(comp) in KNOWN_CYCLES:
                print(f"known cycle in src/{mod} (being taken apart): {' '.join(comp)}")
                continue
            why = [f"{a} -> {b}" for a in comp for b in sorted(inner[a]) if b in comp]
            problems.append(f"cycle in src/{mod}: {' '.join(comp)} ({'; '.join(why)})")
    medges = collections.defaultdict(set)
    for a, bs in edges.items():
        for b in bs:
            ma, mb = a.split("/")[0], b.split("/")[0]
            if ma != mb:
                medges[ma].add(mb)
    for comp in sccs(set(modules), medges):
        problems.append(f"cycle between modules: {' '.join(comp)}")
    if not problems:
        for m in sorted(modules):
            print(f"{m} -> {' '.join(sorted(medges[m])) or '(nothing)'}")
        print(f"deps: {len(files)} files in {len(modules)} modules, no new cycle")
    return problems


FUNCTION_LIMIT = 100
LONG_REASON = "Long because"
# Functions that were over the limit before this check (issue 20), each
# "file:function"; they are being split. A listed one that is gone is fine.
KNOWN_LONG: set = set()


def function_spans(path):
    """(name, first line, length) of each top-level function definition:
    from the line that names it to its closing brace in column 0."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        starts = line[:1] not in ("", " ", "\t", "#", "/", "}", "{", "*") and "(" in line
        if starts and not re.match(r"(typedef|struct \w+ \{|enum|union)\b", line):
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith(("{", ";")):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{") and "=" not in line.split("(")[0]:
                m = re.search(r"(\w+)\s*\(", line)
                k = j + 1
                while k < len(lines) and lines[k] != "}":
                    k += 1
                if m and k < len(lines):
                    above, c = [], i - 1
                    while c >= 0 and lines[c].lstrip().startswith(("/*", "*", "//")):
                        above.append(lines[c])
                        c -= 1
                    out.append((m.group(1), i + 1, k + 1 - i, "\n".join(above)))
                    i = k
        i += 1
    return out


def check_functions(src_dir):
    problems, n_long = [], 0
    for root, _, files in sorted(os.walk(src_dir)):
        for f in sorted(files):
            if not f.endswith(".c"):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src_dir)
            for name, line, length, comment in function_spans(path):
                if length <= FUNCTION_LIMIT:
                    continue
                n_long += 1
                if LONG_REASON in comment:
                    continue
                if f"{rel}:{name}" in KNOWN_LONG:
                    print(f"known long function (being split): {rel}:{line} {name}, {length} lines")
                    continue
                problems.append(f"{path}:{line}: {name} is {length} lines (over {FUNCTION_LIMIT}): "
                                f"split it, or say why above it (\"{LONG_REASON} ...\")")
    if not problems:
        print(f"functions: none over {FUNCTION_LIMIT} lines without a reason ({n_long} long in all)")
    return problems

# Exported names from before the naming rule (issue 26): an exported name is
# contract (renaming it breaks users), so these keep their names although
# their header is another. A new public function follows the rule.
PUBLIC_KEPT = {
    # config.h
    "sm_resolved_to_json", "sm_run_request_from_config", "sm_setting_source_name",
    # engine.h: the exec stream of an engine exec
    "sm_exec_stream_close", "sm_exec_stream_pump", "sm_exec_stream_quiet",
    "sm_exec_stream_set_wake", "sm_exec_stream_shutdown",
    # error.h
    "sm_failure_kind_name",
    # files.h
    "sm_grep_result_dispose", "sm_watch_event_to_json",
    # keep.h: sandboxes at rest, snapshots, tiers
    "sm_rest_report_to_json", "sm_run_keyed_sandbox", "sm_runner_set_state_hook",
    "sm_sandbox_diff", "sm_sandbox_fork", "sm_sandbox_pause", "sm_sandbox_rest_state",
    "sm_sandbox_resume", "sm_sandbox_rollback", "sm_sandbox_snapshot", "sm_snapshot_get",
    "sm_snapshot_list_dispose", "sm_snapshot_manifest", "sm_snapshot_reap", "sm_snapshot_remove",
    "sm_snapshot_to_json", "sm_snapshots_list", "sm_tier_name", "sm_tier_parse", "sm_tier_state",
    # run.h, sandbox.h: the sync mode of a run, the list type of the settings
    "sm_sync_mode_parse", "sm_string_list_add",
    # server.h
    "sm_token_derive", "sm_token_equal", "sm_token_load",
    # terminal.h
    "sm_tty_end_input", "sm_tty_free", "sm_tty_new", "sm_tty_on_start", "sm_tty_resize",
    "sm_tty_size", "sm_tty_write",
    # util.h: small parsers and helpers
    "sm_edit_distance", "sm_format_size", "sm_format_time", "sm_glob_match", "sm_monotonic_ms",
    "sm_now", "sm_parse_double", "sm_parse_duration", "sm_parse_int", "sm_parse_size",
    "sm_parse_time", "sm_random_hex",
}

NAMES_KNOWN_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "names-known.txt")


def names_module_of(rel):
    """The module of a source path relative to src/: the folder under lib/
    or shared/ (src/lib/<module>/..., src/shared/<module>/...), else the
    folder under src/ (src/<module>/...)."""
    parts = rel.split("/")
    if parts[0] in ("lib", "shared") and len(parts) > 2:
        return parts[1]
    return parts[0] if len(parts) > 1 else ""


def names_public(include_dir):
    """{function: header name without .h} of what include_dir declares with SM_API."""
    public = {}
    for name in sorted(os.listdir(include_dir)):
        if not name.endswith(".h"):
            continue
        text = open(os.path.join(include_dir, name), encoding="utf-8").read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)
        for m in re.finditer(r"\bSM_API\b[^;{]*?\b(\w+)\s*\(", text):
            public[m.group(1)] = name[: -len(".h")]
    return public


def names_public_ok(fn, header):
    stems = [header] + ([header[:-1]] if header.endswith("s") else [])
    return any(fn == "sm_" + h or fn.startswith("sm_" + h + "_") for h in stems)


def names_globals(objdir):
    """{function: module} of the global functions the objects under objdir
    (compiled from src/) define."""
    out = {}
    for root, _, files in os.walk(objdir):
        for f in sorted(files):
            path = os.path.join(root, f)
            if not f.endswith(".c.o") or "/src/" not in path:
                continue
            module = names_module_of(path.split("/src/", 1)[1])
            for line in nm(path, "--defined-only"):
                parts = line.split()
                if len(parts) == 3 and parts[1] in "TW":
                    out[parts[2]] = (module, path.split("/src/", 1)[1][: -len(".o")])
    return out


def names_statics(src_dir):
    """(path, line, name) of each static function in src_dir named sm_*."""
    head = re.compile(r"^(?:__attribute__\(\(.*?\)\)\s*)?static\b[^=;(]*?\b(sm_\w+)\s*\(")
    out = []
    for root, _, files in sorted(os.walk(src_dir)):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                path = os.path.join(root, f)
                for i, line in enumerate(open(path, encoding="utf-8"), 1):
                    m = head.match(line)
                    if m:
                        out.append((path, i, m.group(1)))
    return out


def names_types(src_dir, include_dir):
    """(path, line, name) of each type src_dir defines named sm_* (a typedef
    name, or a struct, enum or union tag) that no public header names."""
    public_words = set()
    for name in os.listdir(include_dir):
        if name.endswith(".h"):
            public_words.update(re.findall(r"\w+", open(os.path.join(include_dir, name),
                                                         encoding="utf-8").read()))
    pats = [re.compile(r"\}\s*(sm_\w+)\s*;"),
            re.compile(r"\btypedef\s+(?:struct|enum|union)\s+\w+\s+(sm_\w+)\s*;"),
            re.compile(r"\btypedef\b[^;(]*\(\s*\*\s*(sm_\w+)\s*\)"),
            re.compile(r"\b(?:struct|enum|union)\s+(sm_\w+)\s*\{")]
    out, seen = [], set()
    for root, _, files in sorted(os.walk(src_dir)):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                path = os.path.join(root, f)
                text = open(path, encoding="utf-8").read()
                for pat in pats:
                    for m in pat.finditer(text):
                        name = m.group(1)
                        if name not in public_words and (path, name) not in seen:
                            seen.add((path, name))
                            out.append((path, text.count("\n", 0, m.start(1)) + 1, name))
    return sorted(out)


def names_known(path):
    if not os.path.exists(path):
        return set()
    lines = (line.split("#", 1)[0].strip() for line in open(path, encoding="utf-8"))
    return {line for line in lines if line}


def check_names(objdir, include_dir, src_dir, known_file=NAMES_KNOWN_FILE):
    public = names_public(include_dir)
    funcs = names_globals(objdir)
    if not funcs:
        return [f"{objdir}: no objects of src/ found (build first)"]
    known = names_known(known_file)
    problems, n_known, n_internal = [], 0, 0
    for fn, header in sorted(public.items()):
        if names_public_ok(fn, header) or fn in PUBLIC_KEPT:
            continue
        problems.append(f"{include_dir}/{header}.h: public {fn} is not named sm_{header}_...: "
                        f"declare it in the header of its module")
    for fn, (module, where) in sorted(funcs.items()):
        if fn in public:
            continue
        n_internal += 1
        if fn.startswith(module + "_"):
            continue
        if fn in known:
            n_known += 1
            n_internal -= 1
            continue
        why = "the public prefix sm_" if fn.startswith("sm_") else "no full module name"
        problems.append(f"src/{where}: internal {fn} has {why}: name it {module}_...")
    for path, line, fn in names_statics(src_dir):
        if fn in known:
            n_known += 1
            continue
        problems.append(f"{path}:{line}: static {fn} has the public prefix sm_")
    for path, line, name in names_types(src_dir, include_dir):
        if name in known:
            n_known += 1
            continue
        problems.append(f"{path}:{line}: internal type {name} has the public prefix sm_")
    if not problems:
        print(f"names: {len(public)} public functions named sm_<header>_... "
              f"({len(PUBLIC_KEPT)} kept from before the rule), {n_internal} internal ones "
              f"named <module>_...; {n_known} known exceptions (being renamed), "
              f"listed in {os.path.relpath(known_file)}")
    return problems


def main(argv):
    if len(argv) == 4 and argv[1] == "exports":
        problems = check_exports(argv[2], argv[3])
    elif len(argv) == 3 and argv[1] == "functions":
        problems = check_functions(argv[2])
    elif len(argv) == 3 and argv[1] == "deps":
        problems = check_deps(argv[2])
    elif len(argv) in (5, 6) and argv[1] == "names":
        problems = check_names(*argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
