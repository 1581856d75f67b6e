#!/usr/bin/env python3
"""The error policy (docs/architecture.md, "Errors"; issue 26), counted and checked:

  scripts/error-counts.py bare [DIR...]     `return SM_E...;` (a negative code
      with no message), each with its function and the rule that accepts it,
      if one does (below)
  scripts/error-counts.py release [DIR...]  functions that release the same
      local by hand (free, json_object_put, close, common_buf_dispose...) on two
      or more paths: candidates for a cleanup attribute (common/cleanup.h)
  scripts/error-counts.py check KNOWN [BARE_DIR... --release RELEASE_DIR...]
      fails (exit 1) on a bare return no rule accepts or on a function that
      releases by hand on several paths, unless KNOWN lists it
      ("path:function  reason", one a line); also fails on a KNOWN line that
      no longer matches anything, so the list only shrinks. Defaults: src,
      and src/lib/sandbox src/lib/server for the release rule.

A bare return is accepted by rule when its function is
  mapper    named ..._code and takes no sm_error *: it turns one code (an
            errno's name, a failure kind) into another, and its caller puts
            the result in err with a message (sm_error_set(err, x_code(...)...));
  callback  static, takes `void *ud` first and is passed by address in its
            file: its type is fixed by what it is registered with, and the
            code it returns only stops the caller, which fills err;
  filled    takes an sm_error * and one of the three lines above the return
            fills it as a statement of its own (sm_error_set..., sm_error_wrap,
            err->code =), not in a return of another path;
  mcp       fills an sm_mcp_result (an MCP tool's answer, where a refusal goes
            with isError) and returns SM_ENOMEM or SM_ECANCELLED: the
            server's own failure, which the session answers as a JSON-RPC
            error with the code's message (mcp/tool_calls.c, run_tool).
Everything else fills err on every negative return, or is a predicate
(returns bool, named ..._is_.../..._has_.../..._valid).

It reads the text, not the compiler's view: a function it cannot parse is
missed. Prints one line per finding and a total on stderr.
"""
import os
import re
import sys

FN = re.compile(r'^(?:static\s+)?[A-Za-z_][\w \*]*?\b([A-Za-z_]\w*)\s*\(([^;{}]*?)\)\s*\{\n(.*?)^\}',
                re.M | re.S)
BARE = re.compile(r'return\s+SM_E[A-Z]+\s*;')
FILLS = re.compile(r'sm_error_set|sm_error_wrap|\berr->code\s*=')
RELEASE = re.compile(r'\b(free|json_object_put|close|fclose|closedir|common_buf_dispose|'
                     r'curl_easy_cleanup|archive_\w*free)\((&?\w+)\);')


def sources(dirs):
    for root in dirs:
        for dp, _, fs in sorted(os.walk(root)):
            for f in sorted(fs):
                if f.endswith('.c'):
                    p = os.path.join(dp, f)
                    yield p, open(p, errors='replace').read()


def rule_of(s, fn, ret_pos, ret_text):
    """The rule that accepts a bare return at ret_pos inside fn (a FN match), or None."""
    name, params = fn.group(1), fn.group(2)
    has_err = 'sm_error *' in params
    if name.endswith('_code') and not has_err:
        return 'mapper'
    rest = s[:fn.start()] + s[fn.end():]
    if (fn.group(0).startswith('static') and re.match(r'\s*void\s*\*\s*ud\b', params)
            and re.search(r'\b' + name + r'\b(?!\s*\()', rest)):
        return 'callback'
    if has_err:
        body_start = s.index('{', fn.start() + len(fn.group(1)) + len(params)) + 1
        line_start = s.rfind('\n', 0, ret_pos) + 1
        above = s[body_start:line_start].split('\n')[-4:]
        # A fill that is itself a return belongs to another path.
        if any(FILLS.search(x) and not re.search(r'\breturn\b', x) for x in above):
            return 'filled'
    if 'sm_mcp_result *' in params and re.search(r'SM_E(NOMEM|CANCELLED)\b', ret_text):
        return 'mcp'
    return None


def bare_findings(dirs):
    """(path, line, function, has_err, rule) for each bare return."""
    for p, s in sources(dirs):
        fns = list(FN.finditer(s))
        for m in BARE.finditer(s):
            enc = [f for f in fns if f.start() < m.start() < f.end()]
            fn = enc[-1] if enc else None
            name = fn.group(1) if fn else '?'
            has = fn is not None and 'sm_error *' in fn.group(2)
            rule = rule_of(s, fn, m.start(), m.group(0)) if fn else None
            yield p, s.count('\n', 0, m.start()) + 1, name, has, rule


def release_findings(dirs):
    """(path, line, function, {release: count}) for each function releasing by hand twice."""
    for p, s in sources(dirs):
        for m in FN.finditer(s):
            counts = {}
            for fn, x in RELEASE.findall(m.group(3)):
                counts[f'{fn}({x})'] = counts.get(f'{fn}({x})', 0) + 1
            multi = {k: v for k, v in counts.items() if v >= 2}
            if multi:
                yield p, s.count('\n', 0, m.start()) + 1, m.group(1), multi


def bare(dirs):
    total = with_err = ruled = 0
    for p, line, name, has, rule in bare_findings(dirs):
        total += 1
        with_err += has
        ruled += rule is not None
        tags = (' [has err]' if has else '') + (f' [{rule}]' if rule else '')
        print(f"{p}:{line}: {name}{tags}")
    print(f"bare returns: {total}, in functions with an sm_error *: {with_err}, "
          f"accepted by a rule: {ruled}", file=sys.stderr)


def release(dirs):
    total = 0
    for p, line, name, multi in release_findings(dirs):
        total += 1
        print(f"{p}:{line}: {name} {multi}")
    print(f"functions releasing a local by hand on several paths: {total}", file=sys.stderr)


def load_known(path):
    known = {}
    for raw in open(path):
        line = raw.split('#', 1)[0].strip()
        if line:
            key, _, reason = line.partition(' ')
            known[key] = reason.strip()
    return known


def check(known_path, bare_dirs, release_dirs):
    known = load_known(known_path)
    used = set()
    bad = []
    n_bare = n_rel = 0
    for p, line, name, has, rule in bare_findings(bare_dirs):
        n_bare += 1
        key = f"{os.path.relpath(p)}:{name}"
        if rule:
            continue
        if key in known:
            used.add(key)
            continue
        bad.append(f"{p}:{line}: {name}: `return SM_E...;` with no message: fill err "
                   f"(return sm_error_set(err, ...)) or make it a predicate")
    for p, line, name, multi in release_findings(release_dirs):
        n_rel += 1
        key = f"{os.path.relpath(p)}:{name}"
        if key in known:
            used.add(key)
            continue
        bad.append(f"{p}:{line}: {name}: releases {', '.join(multi)} by hand on several paths: "
                   f"use a cleanup attribute and steal_pointer (common/cleanup.h)")
    for key in sorted(set(known) - used):
        bad.append(f"{known_path}: '{key}' is listed but no longer found: remove the line")
    for b in bad:
        print(b)
    print(f"error policy: {n_bare} bare returns, {n_rel} functions releasing by hand, "
          f"{len(known)} known exceptions, {len(bad)} problems", file=sys.stderr)
    return 1 if bad else 0


if __name__ == '__main__':
    mode = sys.argv[1] if len(sys.argv) > 1 else ''
    if mode == 'check' and len(sys.argv) >= 3:
        args = sys.argv[3:]
        cut = args.index('--release') if '--release' in args else len(args)
        bare_dirs = args[:cut] or ['src']
        release_dirs = args[cut + 1:] or ['src/lib/sandbox', 'src/lib/server']
        sys.exit(check(sys.argv[2], bare_dirs, release_dirs))
    if mode not in ('bare', 'release'):
        sys.exit(__doc__)
    dirs = sys.argv[2:] or (['src'] if mode == 'bare' else ['src/lib/sandbox', 'src/lib/server'])
    (bare if mode == 'bare' else release)(dirs)
