#!/usr/bin/env python3
"""Counts for the error policy (docs/architecture.md, "Errors"; issue 26):

  scripts/error-counts.py bare [DIR...]     `return SM_E...;` (a negative code
      with no message), each with its function and whether that function
      has an sm_error * (then the message should be in it)
  scripts/error-counts.py release [DIR...]  functions that release the same
      local by hand (free, json_object_put, close, common_buf_dispose...) on two
      or more paths: candidates for a cleanup attribute (common/cleanup.h)

A measure for reports, not a check: it reads the text, not the compiler's
view, so a function it cannot parse is missed. Prints one line per finding
and a total on stderr.
"""
import os
import re
import sys

FN = re.compile(r'^(?:static\s+)?[A-Za-z_][\w \*]*?\b([A-Za-z_]\w*)\s*\(([^;{}]*?)\)\s*\{\n(.*?)^\}',
                re.M | re.S)
RELEASE = re.compile(r'\b(free|json_object_put|close|fclose|closedir|common_buf_dispose|'
                     r'curl_easy_cleanup|archive_\w*free)\((&?\w+)\);')


def sources(dirs):
    for root in dirs:
        for dp, _, fs in os.walk(root):
            for f in sorted(fs):
                if f.endswith('.c'):
                    p = os.path.join(dp, f)
                    yield p, open(p, errors='replace').read()


def bare(dirs):
    total = with_err = 0
    for p, s in sources(dirs):
        fns = [(m.start(), m.group(1), m.group(2)) for m in FN.finditer(s)]
        for m in re.finditer(r'return\s+SM_E[A-Z]+\s*;', s):
            enc = [x for x in fns if x[0] < m.start()]
            name, params = (enc[-1][1], enc[-1][2]) if enc else ('?', '')
            has = 'sm_error *' in params
            total += 1
            with_err += has
            print(f"{p}:{s.count(chr(10), 0, m.start()) + 1}: {name}{' [has err]' if has else ''}")
    print(f"bare returns: {total}, in functions with an sm_error *: {with_err}", file=sys.stderr)


def release(dirs):
    total = 0
    for p, s in sources(dirs):
        for m in FN.finditer(s):
            counts = {}
            for fn, x in RELEASE.findall(m.group(3)):
                counts[f'{fn}({x})'] = counts.get(f'{fn}({x})', 0) + 1
            multi = {k: v for k, v in counts.items() if v >= 2}
            if multi:
                total += 1
                print(f"{p}:{s.count(chr(10), 0, m.start()) + 1}: {m.group(1)} {multi}")
    print(f"functions releasing a local by hand on several paths: {total}", file=sys.stderr)


if __name__ == '__main__':
    if len(sys.argv) < 2 or sys.argv[1] not in ('bare', 'release'):
        sys.exit(__doc__)
    dirs = sys.argv[2:] or (['src'] if sys.argv[1] == 'bare' else ['src/lib/sandbox', 'src/lib/server'])
    (bare if sys.argv[1] == 'bare' else release)(dirs)
