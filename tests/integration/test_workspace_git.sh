#!/usr/bin/env bash
# Issue 25.4 and 25.11 against the real engine, through `sandman run`, as
# the attacks: a tool makes a git directory under another name (sub/ with
# HEAD, objects, refs and a config naming an fsmonitor command), copies the
# workspace's .git to x/ with a pre-commit hook and a pager, builds one in
# half/ over two calls, and chmods .git wide open. On the host, `git
# status`, `git commit` and `git log` (on a terminal, for the pager) in
# each of them then run nothing of the tool's, and the .git keeps its
# permissions. Each tool command leaves a marker file where it runs.
#
# sandman/minimal (busybox) is enough: the tool writes git's files itself.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_engine

WORK=$(mktemp -d)
cleanup() {
  cleanup_instance
  rm -rf "$WORK"
}
trap cleanup EXIT
cleanup_instance

WS=$WORK/ws
mkdir -p "$WS"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
json() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }
refused() { json "$1" "','.join(x['path'] + '=' + x['reason'] for x in r['refused'])"; }
R=(--mode per_run --run-id gitdirs --image sandman/minimal:latest)
run_json() {
  local out=$1
  shift
  RC=0
  "$SANDMAN" run --json --workspace "$WS" "${R[@]}" "$@" >"$out" 2>"$out.err" || RC=$?
}
# Every marker a tool command would leave, anywhere in the workspace.
markers() { (cd "$WS" && find . -name '*-RAN' | sort | tr '\n' ' '); }
# git on the host as a user would run it, in folder $1; never fails the test.
host_git() {
  local dir=$1
  shift
  (cd "$WS/$dir" 2>/dev/null && git -c user.name=t -c user.email=t@t "$@") >/dev/null 2>&1 || true
}
# A terminal for git's pager.
host_git_tty() {
  (cd "$WS/$1" 2>/dev/null && script -qec "git log --oneline" /dev/null) >/dev/null 2>&1 || true
}

git init -q "$WS/repo"
git -C "$WS/repo" -c user.name=t -c user.email=t@t commit -q --allow-empty -m first
modes() { stat -c '%a' "$WS/repo/.git" "$WS/repo/.git/objects" "$WS/repo/.git/refs" | tr '\n' ' '; }
modes_before=$(modes)

# --- a repository under another name, and a copy of .git with a hook ---
run_json "$WORK/one.json" -- sh -c '
  mkdir -p sub/objects sub/refs/heads && echo "ref: refs/heads/master" > sub/HEAD &&
  printf "[core]\n\tbare = false\n\tworktree = ../repo\n\tfsmonitor = \"touch ../FSMON-RAN; false\"\n" > sub/config &&
  cp -r repo/.git x &&
  printf "#!/bin/sh\ntouch ../HOOK-RAN\n" > x/hooks/pre-commit && chmod +x x/hooks/pre-commit &&
  printf "[core]\n\tbare = false\n\tworktree = ../repo\n\tpager = \"touch ../PAGER-RAN; cat\"\n" >> x/config &&
  echo fine > fine.txt'
expect_eq "the call succeeds" "0" "$RC"
expect_contains "sub/ is refused as protected" "sub=protected" "$(refused "$WORK/one.json")"
expect_contains "sub/config is refused as protected" "sub/config=protected" "$(refused "$WORK/one.json")"
expect_contains "x/ is refused as protected" "x=protected" "$(refused "$WORK/one.json")"
expect_contains "x/hooks/pre-commit is refused as protected" "x/hooks/pre-commit=protected" \
  "$(refused "$WORK/one.json")"
expect_eq "the rest applies" "fine" "$(cat "$WS/fine.txt" 2>&1)"
check "neither sub/ nor x/ is on the host" test ! -e "$WS/sub" -a ! -e "$WS/x"
host_git sub status
host_git x status
host_git x commit -q --allow-empty -m second
host_git_tty x
expect_eq "git status, commit and log on the host in sub/ and x/ run nothing" "" "$(markers)"

# --- one built over two calls: HEAD and hooks first, objects and refs next ---
run_json "$WORK/half1.json" -- sh -c '
  mkdir -p half/hooks && echo "ref: refs/heads/master" > half/HEAD &&
  printf "#!/bin/sh\ntouch ../HALF-HOOK-RAN\n" > half/hooks/pre-commit && chmod +x half/hooks/pre-commit'
expect_eq "half: the first call succeeds" "0" "$RC"
run_json "$WORK/half2.json" -- sh -c '
  cp -r repo/.git/objects repo/.git/refs half/ &&
  printf "[core]\n\tbare = false\n\tworktree = ../repo\n" > half/config'
expect_contains "half: objects and refs that would finish a repository are refused" \
  "half/objects=protected" "$(refused "$WORK/half2.json")"
expect_contains "half: refs too" "half/refs=protected" "$(refused "$WORK/half2.json")"
check "half: the host's half/ is no repository" test ! -e "$WS/half/objects" -a ! -e "$WS/half/refs"
host_git half commit -q --allow-empty -m third
expect_eq "half: git commit on the host runs nothing" "" "$(markers)"

# --- chmod 0777 of .git, .git/objects, .git/refs ---
run_json "$WORK/chmod.json" -- sh -c 'chmod 0777 repo/.git repo/.git/objects repo/.git/refs'
expect_eq "chmod: each refused as protected" \
  "repo/.git=protected,repo/.git/objects=protected,repo/.git/refs=protected" \
  "$(refused "$WORK/chmod.json")"
expect_eq "chmod: the host's .git keeps its permissions" "$modes_before" "$(modes)"

# --- the host's own repository still works, and the tool's commits come back ---
run_json "$WORK/commit.json" -- sh -c 'echo more > repo/more.txt'
expect_eq "an ordinary change applies" "more" "$(cat "$WS/repo/more.txt" 2>&1)"
host_git repo add more.txt
host_git repo commit -q -m fourth
expect_eq "the host's repository commits" "fourth" "$(git -C "$WS/repo" log -1 --format=%s)"
expect_eq "and runs nothing of the tool's" "" "$(markers)"

it_done
