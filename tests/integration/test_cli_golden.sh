#!/usr/bin/env bash
# The golden test of the command line: `--help` of every command, the man
# page (`sandman help --man`) and the bash, zsh and fish completion scripts
# list the same commands and the same flags for each (they are all rendered
# from one table, src/cli/commands.c, and this proves it); the bash script
# really completes (its function is run); docs/ mention every flag. No
# engine needed.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

"$SANDMAN" help --man >"$WORK/sandman.1"
for sh in bash zsh fish; do "$SANDMAN" completion "$sh" >"$WORK/completion.$sh"; done
check "the bash script parses (bash -n)" bash -n "$WORK/completion.bash"
if command -v zsh >/dev/null; then check "the zsh script parses (zsh -n)" zsh -n "$WORK/completion.zsh"; fi
if command -v fish >/dev/null; then check "the fish script parses (fish -n)" fish -n "$WORK/completion.fish"; fi
if command -v groff >/dev/null; then
  warnings=$(groff -man -Tutf8 -ww -z "$WORK/sandman.1" 2>&1 || true)
  expect_eq "the man page renders without groff warnings" "" "$warnings"
fi

# One line "COMMAND FLAG" per flag from each source; the sources must agree.
python3 - "$SANDMAN" "$WORK" >"$WORK/compare.txt" 2>&1 <<'EOF' || true
import re, subprocess, sys
sandman, work = sys.argv[1], sys.argv[2]

def run(*args):
    return subprocess.run([sandman, *args], capture_output=True, text=True).stdout

def help_commands(group):
    text = run(*(group.split() if group else []), "--help")
    cmds, on = [], False
    for line in text.splitlines():
        if line.startswith("Commands:"): on = True; continue
        if on:
            if not line.strip(): break
            if line.startswith("   "): continue  # a summary's wrapped line
            name, summary = line.split()[0], line.split(None, 1)[1] if len(line.split()) > 1 else ""
            cmds.append(((group + " " + name).strip(), summary))
    return cmds

def help_flags(cmd):
    text = run(*cmd.split(), "--help") if cmd else run("--help")
    flags = set()
    for line in text.splitlines():
        m = re.match(r"^  (?:-(\w), )?(?:    )?--([a-z0-9-]+)", line)
        if m:
            flags.add("--" + m.group(2))
            if m.group(1): flags.add("-" + m.group(1))
    return flags

# --help: walk groups.
help_map, aliases = {"": help_flags("")}, set()
todo = [""]
while todo:
    g = todo.pop()
    for name, summary in help_commands(g):
        if summary.startswith("alias of"): aliases.add(name); continue
        sub = help_commands(name)
        if sub: todo.append(name)
        else: help_map[name] = help_flags(name)

# man page: .SS "sandman NAME ARGS" sections, flags from .TP items.
man_map, cur = {"": set()}, ""
lines = open(f"{work}/sandman.1").read().splitlines()
section = None
for i, line in enumerate(lines):
    if line.startswith(".SH"): section = line[4:]; cur = "" if section == "OPTIONS" else None
    m = re.match(r'^\.SS "sandman (.*)"$', line)
    if m:
        words = m.group(1).replace("\\-", "-").split()
        name = []
        for w in words:
            if not re.match(r"^[a-z]+$", w): break
            name.append(w)
        cur = " ".join(name); man_map[cur] = set(); continue
    if cur is not None and i > 0 and lines[i - 1] == ".TP":
        for s, l in re.findall(r"\\fB\\-([A-Za-z])\\fR|\\fB\\-\\-([a-z0-9\\\-]+)\\fR", line):
            if s: man_map[cur].add("-" + s)
            if l: man_map[cur].add("--" + l.replace("\\-", "-"))

# bash and zsh: the _sandman_flags table.
def table(path, name):
    text, out, on = open(path).read(), {}, False
    for line in text.splitlines():
        if re.match(rf".*_sandman_{name}=\($", line): on = True; continue
        if on:
            if line == ")": break
            m = re.match(r'^  \["sandman ?(.*)"\]="(.*)"$', line)
            out[m.group(1)] = set(m.group(2).split())
    return out
bash_map = table(f"{work}/completion.bash", "flags")
zsh_map = table(f"{work}/completion.zsh", "flags")

# fish: complete -c sandman -n '__sandman_is "CMD"' [-s X] -l NAME
fish_map = {}
for line in open(f"{work}/completion.fish"):
    m = re.match(r"""^complete -c sandman -n '__sandman_is "([^"]*)"'(?: -s (\w))? -l ([a-z0-9-]+)""", line)
    if m:
        fish_map.setdefault(m.group(1), set()).add("--" + m.group(3))
        if m.group(2): fish_map[m.group(1)].add("-" + m.group(2))

def lines_of(mp, only=None):
    return sorted(f"{c or '(global)'} {f}" for c, fl in mp.items() for f in fl
                  if (only is None or c in only))
canon = set(help_map)
ref = lines_of(help_map)
print("commands", len(help_map), "flags", len(ref))
print("aliases", " ".join(sorted(aliases)))
for label, mp in (("man", man_map), ("bash", bash_map), ("zsh", zsh_map), ("fish", fish_map)):
    got = lines_of(mp, canon)
    missing_cmds = sorted(canon - set(mp))
    print(f"{label} commands-missing: {' '.join(missing_cmds) or 'none'}")
    print(f"{label} only-help: {' '.join(sorted(set(ref) - set(got))) or 'none'}")
    print(f"{label} only-{label}: {' '.join(sorted(set(got) - set(ref))) or 'none'}")
    for a in sorted(aliases):
        if label in ("bash", "zsh", "fish"):
            t = {"serve": "worker start", "sandbox ls": "sandbox list", "sandbox remove": "sandbox rm"}.get(a)
            if t: print(f"{label} alias {a}: {'same' if mp.get(a) == mp.get(t) else 'DIFFERENT'}")
with open(f"{work}/flags.txt", "w") as fh:
    fh.write("\n".join(ref) + "\n")
EOF
cat "$WORK/compare.txt" | sed 's/^/# /'
n_flags=$(sed -n 's/^commands \([0-9]*\) flags \([0-9]*\)$/\2/p' "$WORK/compare.txt")
check "--help lists commands and flags (${n_flags:-0} flags)" test "${n_flags:-0}" -gt 60
for src in man bash zsh fish; do
  expect_eq "$src: every command of --help is there" "$src commands-missing: none" \
    "$(grep "^$src commands-missing:" "$WORK/compare.txt")"
  expect_eq "$src: no flag of --help is missing" "$src only-help: none" "$(grep "^$src only-help:" "$WORK/compare.txt")"
  expect_eq "$src: no flag that --help does not have" "$src only-$src: none" \
    "$(grep "^$src only-$src:" "$WORK/compare.txt")"
done
expect_not_contains "aliases complete like their commands" "DIFFERENT" "$(grep ' alias ' "$WORK/compare.txt")"

# The bash script completes for real: its function, as bash calls it.
complete_bash() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _sandman; echo "${COMPREPLY[*]}"' \
    _ "$WORK/completion.bash" "$@"
}
expect_contains "bash: commands" "sandbox" "$(complete_bash sandman sa)"
expect_eq "bash: commands of a group" "doctor list ls reap rm remove create inspect pause resume port snapshot fork rollback diff" "$(complete_bash sandman sandbox '')"
expect_eq "bash: flags by prefix" "--timeout" "$(complete_bash sandman run --tim)"
expect_eq "bash: enum values" "none per_tool per_run per_worker" "$(complete_bash sandman run --mode '')"
expect_eq "bash: after a global option with a value" "debug" "$(complete_bash sandman --log-level d)"
expect_eq "bash: an alias takes its command's flags" "--sandbox-mode --sandbox-mem" "$(complete_bash sandman serve --sandbox-m)"
expect_eq "bash: completion's shells" "bash zsh fish" "$(complete_bash sandman completion '')"
expect_not_contains "bash: the tool's own arguments are not sandman's flags" "--timeout" \
  "$(complete_bash sandman run -- ls --t)"

# fish completes for real too (`complete -C` asks fish what it would offer).
if command -v fish >/dev/null; then
  complete_fish() { fish -c "source '$WORK/completion.fish'; complete -C '$1'" 2>&1 | cut -f1 | tr '\n' ' ' | sed 's/ $//'; }
  expect_eq "fish: flags by prefix" "--timeout" "$(complete_fish 'sandman run --tim')"
  expect_eq "fish: commands of a group" "create diff doctor fork inspect list ls pause port reap remove resume rm rollback snapshot" "$(complete_fish 'sandman sandbox ')"
  expect_eq "fish: enum values, no file names" "none per_run per_tool per_worker" "$(complete_fish 'sandman run --mode ')"
  expect_eq "fish: an alias takes its command's flags" "--sandbox-mem --sandbox-mode" "$(complete_fish 'sandman serve --sandbox-m')"
elif [ "${CI:-}" = true ]; then
  it_fail "CI=true and fish is not installed (scripts/setup.sh installs it)"
fi
if ! command -v zsh >/dev/null && [ "${CI:-}" = true ]; then
  it_fail "CI=true and zsh is not installed (scripts/setup.sh installs it)"
fi

# docs/ document every flag (docs/run.md, docs/operations.md, ...).
missing=""
while read -r cmd flag; do
  case $flag in --*) ;; *) continue ;; esac
  [ "$flag" = --help ] && continue
  grep -rqF -- "$flag" "$SRC_DIR/docs" || missing="$missing $cmd:$flag"
done <"$WORK/flags.txt"
expect_eq "every flag is documented in docs/" "" "$missing"
it_done
