#!/usr/bin/env bash
# A running sandbox's snapshot read by its own agent (docs/state.md,
# Snapshots; `sandman-agent tar --stop`), against the real engine: 300
# files of known hashes, a path over 255 bytes, links absolute and
# relative; the snapshot says it was read by the agent, its manifest has
# every file by hash (nothing missing, nothing extra) and the links as
# links; a fork has the same files and links; a process left running by
# a call runs on after the snapshot (not left stopped), and after sandman
# is killed in the middle of the agent's read. Then what the
# agent cannot read or represent (a file its user may not read, a fifo)
# makes the snapshot fall back to the engine's read of the frozen sandbox:
# it still has every file, the unreadable one by its hash.
source "$(dirname "$0")/lib.sh"
require_engine

WORK=$(mktemp -d)
remove_images() {
  local ids
  ids=$(docker images -q --filter "label=io.sandman.snapshot.instance=$SANDMAN_INSTANCE" 2>/dev/null | sort -u)
  [ -n "$ids" ] && docker rmi -f $ids >/dev/null 2>&1 || true
}
trap 'kill_pids_and_cleanup; remove_images; rm -rf "$WORK"' EXIT
cleanup_instance
remove_images
rm -rf "${SANDMAN_STATE_DIR:?}"/*

call() {
  local run=$1
  shift
  "$SANDMAN" run --mode per_run --run-id "$run" --json "$@"
}
stdout_of() { python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["stdout"])'; }

LONG_DIR=$(printf 'd%.0s' $(seq 1 150))
LONG_FILE=$(printf 'f%.0s' $(seq 1 200))
GEN="mkdir -p t $LONG_DIR; i=0; while [ \$i -lt 300 ]; do d=t/d\$((i % 7)); mkdir -p \$d
echo \"file \$i \$((i * 7919 % 1000003))\" >\$d/f\$i; i=\$((i + 1)); done
echo long >$LONG_DIR/$LONG_FILE; ln -s /etc/passwd t/abs; ln -s ../t/d1/f1 t/d0/rel"
# Files: "sha  path"; links: "link path -> target"; sorted.
TREE='cd /workspace && { find . -type f -exec sha256sum {} +; find . -type l | while read -r l; do echo "link $l -> $(readlink "$l")"; done; } | sed "s| \./| |; s|^link \./|link |" | sort'
manifest_tree() { # NAME: the same lines from the snapshot's manifest
  local meta dir
  meta=$(grep -l "\"name\": *\"$1\"" "$SANDMAN_STATE_DIR"/snapshots/*/meta.json | head -1)
  dir=$(dirname "$meta")
  python3 -c '
import json, sys
for e in json.load(open(sys.argv[1]))["files"]:
    if e["type"] == "file": print("%s  %s" % (e["sha256"], e["path"]))
    elif e["type"] == "link": print("link %s -> %s" % (e["path"], e["target"]))
' "$dir/manifest.json" | sort
}
snapshot() { # RUN NAME: the snapshot with its debug log in $WORK/log
  "$SANDMAN" --log-level debug sandbox snapshot --run-id "$1" --name "$2" >"$WORK/out" 2>"$WORK/log"
}

R=snapagent-src-$$
out=$(call "$R" -- sh -c "cd /workspace && $GEN && echo made")
expect_eq "the tool wrote its files" "made" "$(stdout_of <<<"$out" | tr -d '\n')"
call "$R" -- sh -c "$TREE" | stdout_of >"$WORK/expected"
expect_eq "the tree: 301 files and 2 links" 303 "$(wc -l <"$WORK/expected")"
# A process a call leaves running (its own session), ticking in /tmp.
call "$R" -- sh -c 'setsid sh -c "i=0; while :; do i=\$((i + 1)); echo \$i >/tmp/tick; sleep 0.05; done" \
  </dev/null >/dev/null 2>&1 & echo started' >/dev/null
tick() { call "$R" -- cat /tmp/tick | stdout_of | tr -dc 0-9; }
check "the ticking process runs" it_counter_past 0 tick

# --- read by the agent ---------------------------------------------------------
check "snapshot of the running sandbox" snapshot "$R" by-agent
expect_contains "it was read by the sandbox's agent" "read (by agent)" "$(cat "$WORK/log")"
manifest_tree by-agent >"$WORK/manifest"
if diff -q "$WORK/expected" "$WORK/manifest" >/dev/null; then
  it_pass "its manifest: every file by hash and both links as links, nothing missing or extra"
else
  it_fail "its manifest differs: $(diff "$WORK/expected" "$WORK/manifest" | head -5 | tr '\n' ' ')"
fi
n=$(tick)
check "the ticking process runs on after the snapshot (not left stopped)" it_counter_past "$n" tick
states=$(call "$R" -- sh -c 'for s in /proc/[0-9]*/stat; do sed "s/.*) //" "$s" | cut -c1; done' | stdout_of | sort -u | tr -d '\n')
expect_not_contains "no process of the sandbox is left stopped" "T" "$states"

F=$("$SANDMAN" sandbox fork --from-snapshot by-agent --count 1 --prefix snapagent-fork)
call "$F" -- sh -c "$TREE" | stdout_of >"$WORK/fork"
if diff -q "$WORK/expected" "$WORK/fork" >/dev/null; then
  it_pass "a fork of it has every file by hash and both links as links"
else
  it_fail "the fork's tree differs: $(diff "$WORK/expected" "$WORK/fork" | head -5 | tr '\n' ' ')"
fi

# --- sandman killed while the agent reads -----------------------------------------
# 40 MB more, so the tar outlasts the pipes: sandman is stopped (SIGSTOP)
# once the agent runs, so the agent blocks writing with the sandbox's
# processes stopped, then killed. The agent sees its connection end and
# lets the processes go on; no half snapshot is listed.
call "$R" -- sh -c 'head -c 41943040 /dev/zero >/workspace/big' >/dev/null
N=$(docker ps -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "label=io.sandman.run=$R")
"$SANDMAN" sandbox snapshot --run-id "$R" --name killed >/dev/null 2>&1 &
sp=$!
IT_PIDS+=("$sp")
for _ in $(seq 1 300); do
  docker top "$N" -o pid,stat,args 2>/dev/null | grep -q 'tar /workspace --stop' && break
  kill -0 "$sp" 2>/dev/null || break
  sleep 0.05
done
kill -STOP "$sp" 2>/dev/null || true
expect_contains "the agent's tar runs, the ticking process stopped" "T" \
  "$(docker top "$N" -o pid,stat,args | grep 'sleep 0.05\|i + 1' | awk '{print $2}' | tr -d '\n')"
kill -9 "$sp" 2>/dev/null || true
wait "$sp" 2>/dev/null || true
n=$(tick)
check "sandman killed mid-read: the ticking process runs on" it_counter_past "$n" tick
expect_eq "... and no half snapshot is listed" "by-agent" \
  "$("$SANDMAN" snapshot list --json | json "' '.join(sorted(x['name'] for x in d))")"
call "$R" -- rm -f /workspace/big >/dev/null

# --- what the agent cannot read: the engine's read instead ----------------------
call "$R" -- sh -c 'echo secret >/workspace/unreadable && chmod 000 /workspace/unreadable' >/dev/null
check "snapshot with a file its user may not read" snapshot "$R" fell-back
expect_contains "the agent gave up, saying why" "cannot open './unreadable'" "$(cat "$WORK/log")"
expect_contains "... and the engine read the frozen sandbox" "read (by engine)" "$(cat "$WORK/log")"
{ cat "$WORK/expected"; echo "$(printf 'secret\n' | sha256sum | cut -d' ' -f1)  unreadable"; } | sort >"$WORK/expected2"
manifest_tree fell-back >"$WORK/manifest2"
if diff -q "$WORK/expected2" "$WORK/manifest2" >/dev/null; then
  it_pass "its manifest has every file by hash, the unreadable one too"
else
  it_fail "its manifest differs: $(diff "$WORK/expected2" "$WORK/manifest2" | head -5 | tr '\n' ' ')"
fi
n=$(tick)
check "the ticking process runs on after that snapshot too" it_counter_past "$n" tick

call "$R" -- sh -c 'rm -f /workspace/unreadable && mkfifo /workspace/fifo' >/dev/null
check "snapshot with a fifo" snapshot "$R" with-fifo
expect_contains "the agent gave up on the fifo" "not a file, folder or link: './fifo'" "$(cat "$WORK/log")"
expect_contains "... and the engine read it" "read (by engine)" "$(cat "$WORK/log")"
it_done
