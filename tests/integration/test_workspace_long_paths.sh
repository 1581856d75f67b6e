#!/usr/bin/env bash
# Issue 25.9 against the real engine, through `sandman run`: a tool makes a
# file 4,103 bytes deep in the workspace (longer than any path the engine
# or the sandbox's own tools can read back). It is not lost without a word:
# the first folder past the limit is in `refused` (path_too_long), the rest
# of the call applies, the next call still finds the file in the sandbox
# (nothing deletes it) and does not report it again.
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
echo a > "$WS/a.txt"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
json() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }
R=(--mode per_run --run-id longpaths --image sandman/minimal:latest)
run_json() {
  local out=$1
  shift
  RC=0
  "$SANDMAN" run --json --workspace "$WS" "${R[@]}" "$@" >"$out" 2>"$out.err" || RC=$?
}

# deep/ and 17 folders of 240 bytes; the file is at 4,103 bytes. The shell
# goes down in two relative steps: no call gets a path over 4,095 bytes.
DEEP='A=deep; for i in $(seq 1 15); do A=$A/$(printf "%0240d" $i); done
B=$(printf "%0240d" 16)/$(printf "%0240d" 17)'
run_json "$WORK/one.json" -- sh -c "$DEEP"'
mkdir -p $A && cd $A && mkdir -p $B && echo deep > $B/f && cd /workspace && echo b > a.txt'
expect_eq "the call succeeds" "0 True" "$RC $(json "$WORK/one.json" "r['ok']")"
expect_eq "the rest applies" "b" "$(cat "$WS/a.txt")"
expect_eq "one entry refused, as path_too_long" "1 path_too_long" \
  "$(json "$WORK/one.json" "str(len(r['refused'])) + ' ' + ' '.join(x['reason'] for x in r['refused'])")"
expect_eq "it is the first folder past 3072 bytes, under deep/" "3137 True" \
  "$(json "$WORK/one.json" "' '.join(str(x) for x in (len(r['refused'][0]['path']), r['refused'][0]['path'].startswith('deep/')))")"
expect_eq "nothing past the limit is on the host" "" \
  "$(find "$WS" | awk -v ws="$WS" 'length($0) - length(ws) > 3073 {print length($0)}' | head -1)"

run_json "$WORK/two.json" -- sh -c "$DEEP"'
cd $A && cat $B/f && cd /workspace && echo c > a.txt'
expect_eq "the next call finds the file in the sandbox" "0 deep" \
  "$RC $(json "$WORK/two.json" "r['stdout'].strip()")"
expect_eq "the refusal is not reported again" "[]" "$(json "$WORK/two.json" "r['refused']")"
expect_eq "and the rest applies" "c" "$(cat "$WS/a.txt")"

it_done
