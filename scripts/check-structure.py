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
  check-structure.py architecture OBJECT_DIR SRC_DIR DOC [--write]
      DOC (docs/architecture.md) holds the module table and the module
      dependency diagram that the objects and src/ give (between its
      "generated" markers; the table's last column is written by hand), and
      each path (src/..., engine/conn.c), file name and `file:function` it
      names exists, and a module's table of files names each of its .c files.
      --write regenerates the two blocks in DOC, then checks.

Exit 0 when the check holds, 1 with one line per problem when it does not.
"""
import collections
import difflib
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


SRC_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def stale_object(path, src_dir=SRC_ROOT):
    """An object left in a build folder by a source file moved or removed
    since (an old build reconfigured): not part of the library any more."""
    return not os.path.isfile(os.path.join(src_dir, path.split("/src/", 1)[1][: -len(".o")]))


def check_deps(objdir):
    defs, uses = {}, collections.defaultdict(set)
    for root, _, files in os.walk(objdir):
        for f in files:
            path = os.path.join(root, f)
            if not f.endswith(".c.o") or "/src/" not in path or stale_object(path):
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


def names_globals(objdir, src_dir=SRC_ROOT):
    """{function: module} of the global functions the objects under objdir
    (compiled from src/) define."""
    out = {}
    for root, _, files in os.walk(objdir):
        for f in sorted(files):
            path = os.path.join(root, f)
            if not f.endswith(".c.o") or "/src/" not in path or stale_object(path, src_dir):
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
    funcs = names_globals(objdir, src_dir)
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


# ---- architecture: docs/architecture.md checked against the tree (issue 26)
#
# The module table and the dependency diagram of docs/architecture.md are
# generated between markers; the check regenerates them and fails when the
# document says something else. In the table only the last column ("what it
# is for") is written by hand: the check keeps it, and fails on a module
# without one. It also checks that each path, file name and reading-path
# step (`src/x/y.c:function`) the document names still exists.

ARCH_BEGIN = "<!-- generated by scripts/check-structure.py architecture ({what}): do not edit{hand} -->"
ARCH_END = "<!-- end of generated {what} -->"
ARCH_HAND = "; the last column is written by hand"
# A line count in the table may be this far off (a fraction of the count,
# at least ARCH_LINES_SLACK lines) before the check asks for a --write.
ARCH_LINES_FRACTION = 0.10
ARCH_LINES_SLACK = 300


ARCH_LIBRARY_ROOTS = ("lib", "shared")


def arch_unit_of(rel):
    """The module a path under src/ belongs to: src/lib/<m>/..., the files
    of it a static program compiles too (src/shared/<m>/...), and in the
    older layout src/<m>/... are module <m>."""
    parts = rel.split("/")
    if parts[0] in ARCH_LIBRARY_ROOTS and len(parts) > 2:
        parts = parts[1:]
    return parts[0]


def arch_object_edges(objdir, src_dir):
    """Module -> modules it uses, measured as the deps mode measures it (file
    A uses file B when A.o uses a symbol B.o defines); and the source files
    (under src/) of the library's objects."""
    defs, uses = {}, collections.defaultdict(set)
    paths = sorted(os.path.join(root, f) for root, _, files in os.walk(objdir) for f in files
                   if f.endswith(".c.o") and "/src/" in os.path.join(root, f))
    name = None
    for i in range(0, len(paths), 200):  # one nm for many objects ("\nPATH:" heads each)
        batch = paths[i:i + 200] + ["/dev/null"] * (len(paths[i:i + 200]) == 1)
        out = subprocess.run(["nm", *batch], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            if line.endswith(".c.o:") and "/src/" in line:
                name = line[:-1].split("/src/", 1)[1][: -len(".o")]
                if not os.path.isfile(os.path.join(src_dir, name)):
                    name = None  # an object left by a file moved or removed since
                continue
            if name is None:
                continue
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBRCVWG":
                defs[parts[2]] = name
            elif len(parts) == 2 and parts[0] == "U":
                uses[name].add(parts[1])
    objects = set(defs.values()) | set(uses)
    edges = collections.defaultdict(set)
    for a in objects:
        edges[arch_unit_of(a)]
    for a, syms in uses.items():
        for s in syms:
            b = defs.get(s)
            if b and arch_unit_of(a) != arch_unit_of(b):
                edges[arch_unit_of(a)].add(arch_unit_of(b))
    return edges, objects


def arch_folders(src_dir):
    """Each folder of src/ that holds files: its files, and whether one of
    them defines main (a program)."""
    out = {}
    for root, dirs, files in os.walk(src_dir):
        dirs.sort()
        rel = os.path.relpath(root, src_dir).replace(os.sep, "/")
        if rel == "." or not files:
            continue
        paths = [os.path.join(root, f) for f in sorted(files)]
        main = any(p.endswith(".c") and re.search(r"^int main\s*\(", open(p, encoding="utf-8").read(), re.M)
                   for p in paths)
        out[rel] = {"paths": paths, "program": main}
    return out


def arch_include_deps(paths, src_dir, unit_of_file):
    """The units whose files a program's files #include (looked up as the
    compiler does: under src/ and each library root), and include/sandman."""
    roots = [src_dir] + [os.path.join(src_dir, r) for r in ARCH_LIBRARY_ROOTS]
    deps = set()
    for p in paths:
        text = open(p, encoding="utf-8", errors="replace").read()
        for inc in re.findall(r'^#\s*include\s+[<"]([^>"]+)[>"]', text, re.M):
            if inc.startswith("sandman/"):
                deps.add("include/sandman")
                continue
            for r in [os.path.dirname(p)] + roots:
                unit = unit_of_file.get(os.path.normpath(os.path.join(r, inc)))
                if unit:
                    deps.add(unit)
                    break
    return deps


def arch_units(objdir, src_dir):
    """The table's rows: {name: folders, kind, files, lines, deps}. A library
    module is src/lib/<m>/ with src/shared/<m>/ (in the older layout
    src/<m>/, its subfolders included); a program is a folder whose files
    define main, named by its folder (with " (program)" when a module has
    that name)."""
    edges, objects = arch_object_edges(objdir, src_dir)
    if not edges:
        return None, None
    modules, programs = {}, {}
    for rel, f in sorted(arch_folders(src_dir).items()):
        parts = rel.split("/")
        if parts[0] in ARCH_LIBRARY_ROOTS and len(parts) > 1:
            key, table = parts[1], modules
        elif f["program"]:
            key, table = rel, programs
        else:
            key, table = parts[0], modules
        u = table.setdefault(key, {"folders": [], "paths": [], "program": table is programs})
        if not u["folders"] or not rel.startswith(u["folders"][-1][len("src/"):]):
            u["folders"].append(f"src/{rel}/")
        u["paths"] += f["paths"]
    units = dict(modules)
    for key, u in programs.items():
        if key not in units:
            units[key] = u
        elif any(os.path.relpath(p, src_dir) in objects for p in u["paths"]):
            # The older layout: a program's folder whose files are in the
            # library too is one unit.
            units[key]["folders"] = sorted(set(units[key]["folders"]) | set(u["folders"]))
            units[key]["paths"] = sorted(set(units[key]["paths"]) | set(u["paths"]))
            units[key]["program"] = True
        else:
            units[f"{key} (program)"] = u
    unit_of_file = {os.path.normpath(p): k for k, u in units.items() for p in u["paths"]}
    for name, u in units.items():
        lib = name in edges
        if u["program"]:
            u["kind"] = "program" + (", part in the library" if lib else "")
        else:
            u["kind"] = "library" if lib else "not built"
        u["files"] = len(u["paths"])
        u["lines"] = sum(open(p, "rb").read().count(b"\n") for p in u["paths"])
        deps = set(edges.get(name, ()))
        if u["program"]:
            deps |= arch_include_deps(u["paths"], src_dir, unit_of_file) - {name}
        u["deps"] = sorted(deps)
        u["folder"] = ", ".join(f"`{f}`" for f in u["folders"])
    return units, edges


def arch_round(n):
    return f"{int(round(n, -2)):,}" if n >= 100 else str(n)


def arch_table(units, hand):
    rows = ["| module | folder | kind | files | lines | depends on | what it is for |",
            "|---|---|---|---|---|---|---|"]
    for name in sorted(units, key=lambda n: (units[n]["program"], n)):
        u = units[name]
        deps = ", ".join(u["deps"]) or "—"
        rows.append(f"| `{name}` | {u['folder']} | {u['kind']} | {u['files']} | {arch_round(u['lines'])} | "
                    f"{deps} | {hand.get(name, '')} |")
    return rows


def arch_levels(edges):
    level = {}

    def of(m, seen=()):
        if m not in level:
            level[m] = 0 if m in seen else 1 + max((of(d, seen + (m,)) for d in edges.get(m, ()) if d in edges), default=-1)
        return level[m]

    for m in edges:
        of(m)
    return level


def arch_diagram(units, edges):
    """Modules from the bottom (each line's modules are on lines above it),
    then the programs."""
    level = arch_levels(edges)
    width = max(len(m) for m in units) + 1
    lines = ["```"]

    def emit(name, deps):
        text, pad = f"{name:<{width}}", " " * (width + 3)
        if not deps:
            lines.append(text.rstrip())
            return
        cur = text + "-> "
        for i, d in enumerate(deps):
            piece = d + ("," if i + 1 < len(deps) else "")
            if len(cur) + len(piece) + 1 > 78 and not cur.endswith("-> "):
                lines.append(cur.rstrip())
                cur = pad
            cur += piece + " "
        lines.append(cur.rstrip())

    for m in sorted(edges, key=lambda m: (level[m], m)):
        emit(m, sorted(edges[m]))
    lines.append("")
    lines.append("programs (what their #include lines name):")
    for name in sorted(n for n in units if units[n]["program"]):
        emit(name, units[name]["deps"])
    lines.append("```")
    return lines


def arch_block(lines, what):
    """(start, end) indexes of the lines between a generated block's markers."""
    begin = [i for i, l in enumerate(lines) if l.startswith("<!-- generated by scripts/check-structure.py architecture (" + what + ")")]
    end = [i for i, l in enumerate(lines) if l == ARCH_END.format(what=what)]
    if len(begin) != 1 or len(end) != 1 or end[0] < begin[0]:
        return None
    return begin[0] + 1, end[0]


def arch_read_table(rows):
    """{module: cells} of the table rows the document holds now."""
    out = {}
    for r in rows:
        cells = [c.strip() for c in r.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0].startswith("`"):
            out[cells[0].strip("`")] = cells
    return out


def arch_compare_table(units, doc_rows):
    problems = []
    have = arch_read_table(doc_rows)
    for name in sorted(set(have) - set(units)):
        problems.append(f"module table: a row names `{name}`, which is no module or program of src/ now")
    for name in sorted(set(units) - set(have)):
        problems.append(f"module table: `{name}` ({units[name]['folder']}) has no row")
    for name in sorted(set(units) & set(have)):
        u, cells = units[name], have[name]
        want = [u["folder"], u["kind"], str(u["files"]), None, ", ".join(u["deps"]) or "—"]
        for col, w, got in zip(("folder", "kind", "files", None, "depends on"), want, cells[1:6]):
            if col and w != got:
                problems.append(f"module table: `{name}` {col} is {got!r}, the tree says {w!r}")
        try:
            doc_lines = int(cells[4].replace(",", ""))
        except ValueError:
            doc_lines = -1
        slack = max(ARCH_LINES_SLACK, ARCH_LINES_FRACTION * u["lines"])
        if abs(doc_lines - u["lines"]) > slack:
            problems.append(f"module table: `{name}` lines is {cells[4]!r}, the tree has {u['lines']}")
        if not cells[6]:
            problems.append(f"module table: `{name}` says nothing in 'what it is for' (write it by hand)")
    return problems


def arch_function_defined(path, fn):
    """path defines fn (a .c file) or declares it (a header)."""
    text = open(path, encoding="utf-8").read()
    if path.endswith(".h"):
        return re.search(r"^[A-Za-z_][^;{}()]*\b" + re.escape(fn) + r"\s*\(", text, re.M) is not None
    return re.search(r"^[A-Za-z_][^;=(]*\b" + re.escape(fn) + r"\s*\([^;]*?\)\s*\{", text, re.M | re.S) is not None


def arch_check_names(doc_text, root):
    """Each src/ path, bare file name and `file:function` the document names
    exists."""
    problems = []
    for path, fn in sorted(set(re.findall(r"`((?:src|include)/[\w./-]+\.[ch]):(\w+)(?:\(\))?`", doc_text))):
        full = os.path.join(root, path)
        if not os.path.isfile(full):
            problems.append(f"names `{path}:{fn}`, but there is no {path}")
        elif not arch_function_defined(full, fn):
            problems.append(f"names `{path}:{fn}`, but {path} {'declares' if path.endswith('.h') else 'defines'} "
                            f"no function {fn}")
    # A path of this checkout: not one inside another's ("libgit2/src/...").
    for path in sorted(set(re.findall(r"(?<![\w/.-])((?:src|include)/[\w.-]+(?:/[\w.-]+)*/?)", doc_text))):
        path = path.rstrip(".")
        if not os.path.exists(os.path.join(root, path)):
            problems.append(f"names {path}, which does not exist")
    # A module-relative path (`engine/conn.c`), as an #include names it.
    for path in sorted(set(re.findall(r"`((?!src/|include/|tests/)[\w-]+/[\w./-]+\.[ch])`", doc_text))):
        if not any(os.path.isfile(os.path.join(root, r, path))
                   for r in ["src", "include"] + [os.path.join("src", d) for d in ARCH_LIBRARY_ROOTS]):
            problems.append(f"names `{path}`, which is no file under src/ (or a library root) or include/")
    # A module with a table of its files ("In `src/lib/engine/`, ...")
    # names each of its .c files.
    named = set(re.findall(r"`([\w-]+\.c)`", doc_text))
    for m in sorted(set(re.findall(r"\bIn `src/(?:lib/)?(\w+)/`,", doc_text))):
        for d in [os.path.join(root, "src", r, m) for r in ARCH_LIBRARY_ROOTS] + [os.path.join(root, "src", m)]:
            for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
                if f.endswith(".c") and f not in named:
                    problems.append(f"the file table of module {m} leaves out `{f}` "
                                    f"({os.path.relpath(os.path.join(d, f), root)}): give it a row")
    known = set()
    for top in ("src", "include", "tests", "scripts"):
        for _, _, files in os.walk(os.path.join(root, top)):
            known.update(files)
    for name in sorted(set(re.findall(r"`([\w-]+\.(?:c|h|py))`", doc_text))):
        if name not in known:
            problems.append(f"names `{name}`, which is no file of src/, include/, tests/ or scripts/")
    return problems


def arch_regenerate(lines, what, new_rows):
    span = arch_block(lines, what)
    return lines[: span[0]] + new_rows + lines[span[1]:]


def check_architecture(objdir, src_dir, doc, write=False):
    units, edges = arch_units(objdir, src_dir)
    if units is None:
        return [f"{objdir}: no objects of src/ found (build first)"]
    text = open(doc, encoding="utf-8").read()
    lines = text.split("\n")
    problems = []
    for what in ("modules", "dependencies"):
        if arch_block(lines, what) is None:
            problems.append(f"{doc}: no generated block for the {what}: put the lines\n  "
                            + ARCH_BEGIN.format(what=what, hand=ARCH_HAND if what == "modules" else "")
                            + "\n  " + ARCH_END.format(what=what) + "\nwhere it goes, then run --write")
    if problems:
        return problems
    span = arch_block(lines, "modules")
    hand = {n: cells[6] for n, cells in arch_read_table(lines[span[0]:span[1]]).items()}
    table, diagram = arch_table(units, hand), arch_diagram(units, edges)
    if write:
        lines = arch_regenerate(lines, "modules", table)
        lines = arch_regenerate(lines, "dependencies", diagram)
        new = "\n".join(lines)
        if new != text:
            open(doc, "w", encoding="utf-8").write(new)
            print(f"architecture: wrote the module table and the diagram into {doc}")
        text = new
    span = arch_block(lines, "modules")
    problems += arch_compare_table(units, lines[span[0]:span[1]])
    span = arch_block(lines, "dependencies")
    if lines[span[0]:span[1]] != diagram:
        diff = difflib.unified_diff(lines[span[0]:span[1]], diagram, "the document", "the objects", lineterm="", n=0)
        problems.append("dependency diagram differs from the objects:\n  " + "\n  ".join(list(diff)[2:]))
    if problems and not write:
        problems.append(f"regenerate with: python3 {sys.argv[0]} architecture {objdir} {src_dir} {doc} --write")
    root = os.path.dirname(os.path.abspath(src_dir.rstrip("/")))
    problems += [f"{doc}: {p} (fix the document by hand)" for p in arch_check_names(text, root)]
    if not problems:
        steps = len(re.findall(r"`(?:src|include)/[\w./-]+\.[ch]:\w+(?:\(\))?`", text))
        print(f"architecture: {doc} matches {len(units)} modules and programs; "
              f"the {steps} file:function steps and the paths it names exist")
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
    elif len(argv) in (5, 6) and argv[1] == "architecture" and argv[5:] in ([], ["--write"]):
        problems = check_architecture(argv[2], argv[3], argv[4], write=argv[5:] == ["--write"])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
