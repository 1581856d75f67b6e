#!/usr/bin/env bash
# Issue 25.12 against the real engine, through `sandman run --json`: the
# user edits the file F on the host while the tool turns F into a folder
# F/ with F/x. The host keeps its F; the tool's folder lands beside it as
# F.sandman-conflict/ (F/x in it), and the answer lists it in `conflicts`.
#
# The tool waits on its standard input (a fifo the test holds) after it
# marks that it runs, so the host's edit falls inside the call: the test
# polls for the mark (bounded), edits F, then lets the tool go on.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_engine

WORK=$(mktemp -d)
cleanup() {
  exec 9>&- 2>/dev/null || true
  kill_pids_and_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
cleanup_instance

WS=$WORK/ws
mkdir -p "$WS"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
json() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }
R=(--mode per_run --run-id conflicts --image sandman/minimal:latest)

echo "host v1" > "$WS/F"
out=$("$SANDMAN" run --json --workspace "$WS" "${R[@]}" -- true)
expect_eq "a first call makes the sandbox" "True" \
  "$("$PY" -c "import json,sys; print(json.load(sys.stdin)['ok'])" <<<"$out")"
box=$("$PY" -c "import json,sys; print(json.load(sys.stdin)['sandbox_id'])" <<<"$out")

mkfifo "$WORK/go"
"$SANDMAN" run --json --stdin --workspace "$WS" "${R[@]}" -- sh -c \
  'touch /tmp/started; read line; rm F && mkdir F && echo "tool x" > F/x' \
  <"$WORK/go" >"$WORK/call.json" 2>"$WORK/call.err" &
IT_PIDS+=($!)
call=$!
exec 9>"$WORK/go"
started=0
for _ in $(seq 1 600); do
  if docker exec "$box" test -e /tmp/started 2>/dev/null; then started=1; break; fi
  sleep 0.1
done
expect_eq "the tool runs and waits" "1" "$started"
echo "host v2" > "$WS/F"
echo go >&9
exec 9>&-
rc=0
wait "$call" || rc=$?
expect_eq "the call succeeds" "0 True" "$rc $(json "$WORK/call.json" "r['ok']")"
expect_eq "the host keeps its edit of F" "host v2" "$(cat "$WS/F" 2>&1)"
expect_eq "the tool's F/x is kept beside it" "tool x" "$(cat "$WS/F.sandman-conflict/x" 2>&1)"
expect_eq "--json lists the conflict copy in conflicts" "['F.sandman-conflict']" \
  "$(json "$WORK/call.json" "r.get('conflicts')")"
expect_contains "and in files_changed" "F.sandman-conflict/x" \
  "$(json "$WORK/call.json" "r['files_changed']")"

# The next copy in brings the host's F and the conflict copy to the sandbox.
out=$("$SANDMAN" run --json --workspace "$WS" "${R[@]}" -- sh -c 'cat F F.sandman-conflict/x')
expect_eq "the sandbox then has both" "host v2|tool x" \
  "$("$PY" -c "import json,sys; print('|'.join(json.load(sys.stdin)['stdout'].split(chr(10))[:2]))" <<<"$out")"
expect_eq "a call without conflicts answers conflicts: []" "[]" \
  "$("$PY" -c "import json,sys; print(json.load(sys.stdin)['conflicts'])" <<<"$out")"

it_done
