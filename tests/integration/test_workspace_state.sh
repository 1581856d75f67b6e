#!/usr/bin/env bash
# Issue 25.15 against the real engine: the state folder does not grow with
# calls (a per_tool call leaves no lock file; a per_run sandbox's files go
# when it is removed, by `sandman sandbox rm` or a reap), and a sandman
# killed (SIGKILL) during a copy out leaves a .sandman-stage-* folder in the
# user's workspace only until the next call's copy in.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_engine

WORK=$(mktemp -d)
export SANDMAN_STATE_DIR=$WORK/state
mkdir -p "$SANDMAN_STATE_DIR"
cleanup() {
  kill_pids_and_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
cleanup_instance

WS=$WORK/ws
mkdir -p "$WS"
echo a > "$WS/a.txt"
IMG=(--image sandman/minimal:latest)
state_files() { (cd "$SANDMAN_STATE_DIR" && find . -type f | sort | tr '\n' ' '); }
stages() { (cd "$WS" && find . -maxdepth 1 -name '.sandman-stage-*' | wc -l); }

# --- per_tool calls leave nothing behind ---
"$SANDMAN" run --mode per_tool "${IMG[@]}" --workspace "$WS" -- true >/dev/null
before=$(state_files)
for i in 1 2 3; do
  "$SANDMAN" run --mode per_tool "${IMG[@]}" --workspace "$WS" -- sh -c "echo $i > n.txt" >/dev/null
done
expect_eq "three more per_tool calls add no state file" "$before" "$(state_files)"
expect_eq "not even a busy lock" "" "$(cd "$SANDMAN_STATE_DIR" && find . -path '*busy*' -type f)"

# --- a per_run sandbox's files go with it ---
"$SANDMAN" run --mode per_run --run-id st1 "${IMG[@]}" --workspace "$WS" -- true >/dev/null
"$SANDMAN" run --mode per_run --run-id st1 "${IMG[@]}" --workspace "$WS" -- true >/dev/null
expect_contains "a per_run sandbox has its busy lock while it lives" "busy/" "$(state_files)"
"$SANDMAN" sandbox rm --run-id st1 >/dev/null
expect_eq "sandbox rm takes every state file of it along" "$before" "$(state_files)"
"$SANDMAN" run --mode per_run --run-id st2 "${IMG[@]}" --workspace "$WS" -- true >/dev/null
"$SANDMAN" sandbox reap --older-than 0s >/dev/null
expect_eq "a reap too (its own reap lock included)" "$before" "$(state_files)"

# --- a copy out killed half way: the next call removes its stage folder ---
R=(--mode per_run --run-id st3 "${IMG[@]}")
"$SANDMAN" run "${R[@]}" --workspace "$WS" -- true >/dev/null
# 256 MiB to bring back: the copy out stages it for a while.
"$SANDMAN" run "${R[@]}" --workspace "$WS" -- \
  sh -c 'dd if=/dev/zero of=big.bin bs=1048576 count=256 2>/dev/null' >/dev/null 2>&1 &
IT_PIDS+=($!)
run=$!
seen=0
for _ in $(seq 1 3000); do
  if [ "$(stages)" -gt 0 ]; then seen=1; break; fi
  kill -0 "$run" 2>/dev/null || break
  sleep 0.01
done
kill -9 "$run" 2>/dev/null || true
wait "$run" 2>/dev/null || true
expect_eq "sandman was killed during its copy out, its stage folder left behind" "1 1" \
  "$seen $(stages)"
check "nothing of the half-read copy was applied" test ! -e "$WS/big.bin"
"$SANDMAN" run "${R[@]}" --workspace "$WS" -- rm -f big.bin >/dev/null
expect_eq "the next call removed the stage folder" "0" "$(stages)"
"$SANDMAN" sandbox rm --run-id st3 >/dev/null
expect_eq "and the state folder is as before" "$before" "$(state_files)"

it_done
