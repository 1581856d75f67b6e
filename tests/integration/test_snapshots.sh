#!/usr/bin/env bash
# Snapshots, forks, rollback and diff of keyed sandboxes (docs/state.md,
# Snapshots), against the real engine: a tool writes 1,000 files of known
# hashes (and one in its writable layer); after a snapshot and a fork, and after a rollback, the tree is
# the same file by file (nothing missing, nothing extra, every hash); two
# forks of one snapshot do not see each other's writes; diff lists exactly
# what changed; a snapshot while a call is in flight is refused with
# --no-wait; a crash's half-made folder is never listed; rm removes the
# snapshot's image; reap keeps each owner's newest and removes what a
# crash left (not what a snapshot being made has). Every image the test commits is removed at the end.
source "$(dirname "$0")/lib.sh"
require_engine

WORK=$(mktemp -d)
trap 'kill_pids_and_cleanup; it_remove_snapshot_images sandman-snap-test/leftover; rm -rf "$WORK"' EXIT
cleanup_instance
it_remove_snapshot_images sandman-snap-test/leftover
rm -rf "${SANDMAN_STATE_DIR:?}"/*

# The files: 1,000 in ten folders, their contents a function of their
# number (so the host knows every hash). POSIX sh, run here and in the sandbox.
GEN='mkdir -p t; i=0; while [ $i -lt 1000 ]; do d=t/d$((i % 10)); mkdir -p $d; : >$d/f$i; j=0
while [ $j -le $((i % 5)) ]; do echo "file $i line $j $((i * 7919 % 1000003))" >>$d/f$i; j=$((j + 1)); done
i=$((i + 1)); done; : >t/empty'
TREE='cd /workspace && find t -type f -exec sha256sum {} + | sort -k 2 && find t | sort | sha256sum'
(cd "$WORK" && sh -c "$GEN" && { find t -type f -exec sha256sum {} + | sort -k 2; find t | sort | sha256sum; }) \
  >"$WORK/expected"
expect_eq "the expected tree: 1,001 files and its path list" 1002 "$(wc -l <"$WORK/expected")"

# A writable root, so the writable layer holds what the tool writes there.
printf 'defaults:\n  read_only_root: false\n' >"$WORK/sandman.yaml"
export SANDMAN_CONFIG=$WORK/sandman.yaml
tree_same() {
  local what=$1 run=$2
  it_call_per_run "$run" -- sh -c "$TREE" | it_stdout >"$WORK/tree" || true
  if diff -q "$WORK/expected" "$WORK/tree" >/dev/null; then
    it_pass "$what: the 1,001 files are the same, hash by hash, nothing missing or extra"
  else
    it_fail "$what: the tree differs: $(diff "$WORK/expected" "$WORK/tree" | head -5 | tr '\n' ' ')"
  fi
}

R=snap-src-$$
out=$(it_call_per_run "$R" -- sh -c "cd /workspace && $GEN && echo layer >/var/tmp/in-layer && echo made")
expect_eq "the tool wrote its files" "made" "$(it_stdout <<<"$out" | tr -d '\n')"
tree_same "the source" "$R"

# --- snapshot ------------------------------------------------------------------
out=$("$SANDMAN" sandbox snapshot --run-id "$R" --name snap-one --json)
expect_eq "snapshot: its name, files and owner" "snap-one 1012 control" \
  "$(json "' '.join(str(x) for x in (d['name'], d['files'], d['owner']))" <<<"$out")"
image=$(json "d['image']" <<<"$out")
check "snapshot: its image is in sandman's snapshot namespace, labelled" \
  test "$(docker inspect -f '{{index .Config.Labels "io.sandman.snapshot.name"}}' "$image")" = snap-one
expect_contains "snapshot: the image's name" "sandman-snapshot/" "$image"
# The agent (and so its session) lives in a volume of the sandbox's own
# (/.sandman) the commit leaves out: a fork installs and opens its own.
NS=$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "label=io.sandman.run=$R")
expect_eq "the source's /.sandman (the agent's place) is a volume, not its layer" volume \
  "$(docker inspect -f '{{range .Mounts}}{{if eq .Destination "/.sandman"}}{{.Type}}{{end}}{{end}}' "$NS")"
expect_eq "the snapshot's image holds nothing of /.sandman" 0 \
  "$(docker run --rm --network none --entrypoint sh "$image" -c 'ls -A /.sandman 2>/dev/null | wc -l' | tr -d ' ')"
out=$("$SANDMAN" snapshot list --json)
expect_eq "list: the snapshot, with its sizes and age" "snap-one True True" \
  "$(json "' '.join(str(x) for x in (d[0]['name'], d[0]['size']['workspace'] > 100000, d[0]['age_s'] >= 0))" <<<"$out")"
rc=0; out=$("$SANDMAN" sandbox snapshot --run-id "$R" --name snap-one 2>&1) || rc=$?
expect_eq "a second snapshot of the same name is refused (exit 1)" 1 "$rc"
expect_contains "... saying so" "exists already" "$out"
rc=0; out=$("$SANDMAN" sandbox snapshot --run-id "$R" --name ../x 2>&1) || rc=$?
check "a name with a slash is refused" test "$rc" -ne 0

# A crash in the middle leaves a temporary folder: never listed.
mkdir -p "$SANDMAN_STATE_DIR/snapshots/.tmp-0000000000000000-abcdef"
expect_eq "a half-made snapshot is not listed" "snap-one" \
  "$("$SANDMAN" snapshot list --json | json "' '.join(x['name'] for x in d)")"

# A call in flight: --no-wait refuses, nothing is made.
N=$(docker ps -a --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "label=io.sandman.run=$R" \
  --format '{{.Names}}')
it_hold_busy "$N" || it_fail "the busy lock could not be held"
rc=0; out=$("$SANDMAN" sandbox snapshot --run-id "$R" --name snap-busy --no-wait 2>&1) || rc=$?
expect_eq "a snapshot with --no-wait while a call is in flight is refused (exit 1)" 1 "$rc"
kill -9 "$IT_HOLDER"
wait "$IT_HOLDER" 2>/dev/null || true
expect_eq "... and nothing was made" "snap-one" \
  "$("$SANDMAN" snapshot list --json | json "' '.join(x['name'] for x in d)")"

# --- fork ----------------------------------------------------------------------
ids=$("$SANDMAN" sandbox fork --from-snapshot snap-one --count 2 --prefix "snap-f$$")
expect_eq "fork --count 2 prints two run ids" 2 "$(wc -l <<<"$ids")"
F1=$(sed -n 1p <<<"$ids")
F2=$(sed -n 2p <<<"$ids")
tree_same "fork 1" "$F1"
tree_same "fork 2" "$F2"
expect_eq "a fork has the source's writable layer" "layer" \
  "$(it_call_per_run "$F1" -- cat /var/tmp/in-layer | it_stdout | tr -d '\n')"
src_id=$(it_call_per_run "$R" -- true | json "d['sandbox_id']")
f1_id=$(it_call_per_run "$F1" -- true | json "d['sandbox_id']")
check "a fork is a new container" test "$src_id" != "$f1_id"
it_call_per_run "$F1" -- sh -c 'echo one >/workspace/only-f1 && rm /workspace/t/d0/f0' >/dev/null
it_call_per_run "$F2" -- sh -c 'echo two >/workspace/only-f2' >/dev/null
expect_eq "fork 2 does not see fork 1's writes" "no yes" \
  "$(it_call_per_run "$F2" -- sh -c 'test -e /workspace/only-f1 && echo yes || echo no; test -e /workspace/t/d0/f0 && echo yes || echo no' | it_stdout | tr '\n' ' ' | sed 's/ $//')"
expect_eq "nor the source" "no no" \
  "$(it_call_per_run "$R" -- sh -c 'test -e /workspace/only-f1 && echo yes || echo no; test -e /workspace/only-f2 && echo yes || echo no' | it_stdout | tr '\n' ' ' | sed 's/ $//')"
R3=snap-run-$$
out=$(it_call_per_run "$R3" --from-snapshot snap-one -- sh -c 'ls /workspace/t | wc -l')
expect_eq "run --from-snapshot makes a sandbox from the snapshot" "11" "$(it_stdout <<<"$out" | tr -d ' \n')"
tree_same "run --from-snapshot" "$R3"
rc=0; out=$(it_call_per_run "$R" --from-snapshot snap-one -- true 2>&1) || rc=$?
check "run --from-snapshot into a sandbox not made from it is refused" test "$rc" -ne 0
expect_contains "... saying so" "not made from snapshot" "$out"

# --- diff ----------------------------------------------------------------------
it_call_per_run "$R" -- sh -c 'cd /workspace && echo new >t/added && echo changed >>t/d1/f1 && rm t/d2/f2' >/dev/null
out=$("$SANDMAN" sandbox diff --run-id "$R" --from-snapshot snap-one --json)
expect_eq "diff lists exactly what changed, with sizes" "t/added:4 | t/d1/f1:$(($(wc -c <"$WORK/t/d1/f1") + 8)) | t/d2/f2" \
  "$(json "' '.join(['|'.join(x['path']+':'+str(x['size']) for x in d['added']), '|', '|'.join(x['path']+':'+str(x['size']) for x in d['modified']), '|', '|'.join(x['path'] for x in d['deleted'])])" <<<"$out")"
out=$("$SANDMAN" sandbox diff --run-id "$F2" --from-snapshot snap-one)
expect_eq "diff of fork 2: its own file only" "A only-f2 (4 bytes)" "$out"

# --- rollback --------------------------------------------------------------------
out=$("$SANDMAN" sandbox rollback --run-id "$R" --to snap-one --json)
expect_eq "rollback: the sandbox runs again" "running" "$(json "d['state']" <<<"$out")"
tree_same "after rollback" "$R"
expect_eq "after rollback diff is empty" "0 0 0" \
  "$("$SANDMAN" sandbox diff --run-id "$R" --from-snapshot snap-one --json |
    json "' '.join(str(len(d[k])) for k in ('added', 'modified', 'deleted'))")"

# --- SIGKILL in the middle ------------------------------------------------------
# The kill lands wherever the work is (a bounded poll for the sandbox to be
# frozen, or the process's end); what must hold holds wherever it landed.
it_call_per_run "$R" -- sh -c 'head -c 60000000 /dev/zero >/workspace/big' >/dev/null
"$SANDMAN" sandbox snapshot --run-id "$R" --name snap-crash >/dev/null 2>&1 &
sp=$!
IT_PIDS+=("$sp")
for _ in $(seq 1 3000); do
  [ "$(docker inspect -f '{{.State.Paused}}' "$N" 2>/dev/null)" = true ] && break
  kill -0 "$sp" 2>/dev/null || break
  sleep 0.01
done
kill -9 "$sp" 2>/dev/null || true
wait "$sp" 2>/dev/null || true
names=$("$SANDMAN" snapshot list --json | json "' '.join(sorted(x['name'] for x in d))")
if [ "$names" = "snap-crash snap-one" ]; then
  expect_eq "SIGKILL during a snapshot (it had finished): the one listed is whole" 1013 \
    "$("$SANDMAN" snapshot inspect snap-crash | json "d['files']")"
  "$SANDMAN" snapshot rm snap-crash >/dev/null
else
  expect_eq "SIGKILL during a snapshot: no half snapshot listed" "snap-one" "$names"
fi
tree_same "SIGKILL during a snapshot: the sandbox answers" "$R"
it_call_per_run "$R" -- rm /workspace/big >/dev/null

"$SANDMAN" sandbox fork --from-snapshot snap-one --count 3 --prefix "snap-crashfork-$$" >/dev/null 2>&1 &
fp=$!
IT_PIDS+=("$fp")
for _ in $(seq 1 3000); do
  [ -n "$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter name=-forking-)" ] && break
  kill -0 "$fp" 2>/dev/null || break
  sleep 0.01
done
kill -9 "$fp" 2>/dev/null || true
wait "$fp" 2>/dev/null || true
named=0
for n in $(docker ps -a --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "label=io.sandman.snapshot" \
  --format '{{.Names}}' | grep "snap-crashfork\|per_run" || true); do
  case $n in *-forking-*) continue ;; esac
  run=$(docker inspect -f '{{index .Config.Labels "io.sandman.run"}}' "$n")
  case $run in snap-crashfork-$$-*) ;; *) continue ;; esac
  named=$((named + 1))
  tree_same "SIGKILL during a fork: fork $run under its name is whole" "$run"
done
echo "# SIGKILL during a fork: $named of 3 forks had their name"
check "SIGKILL during a fork: sandman answers after it" "$SANDMAN" snapshot list --json

# A rollback killed while its new container is being made (beside the old
# one): the sandbox answers, whole (the old container, or the new one if
# the rollback had finished), and a reap takes the one cut short.
before_id=$(it_call_per_run "$R" -- true | json "d['sandbox_id']")
"$SANDMAN" sandbox rollback --run-id "$R" --to snap-one >/dev/null 2>&1 &
rp=$!
IT_PIDS+=("$rp")
for _ in $(seq 1 3000); do
  [ -n "$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "name=$N-forking-")" ] && break
  kill -0 "$rp" 2>/dev/null || break
  sleep 0.01
done
kill -9 "$rp" 2>/dev/null || true
wait "$rp" 2>/dev/null || true
tree_same "SIGKILL during a rollback: the sandbox answers, whole" "$R"
after_id=$(it_call_per_run "$R" -- true | json "d['sandbox_id']")
if [ "$after_id" = "$before_id" ]; then
  echo "# SIGKILL during a rollback: it landed before the swap (the old container answers)"
else
  echo "# SIGKILL during a rollback: the rollback had finished"
fi
"$SANDMAN" sandbox reap >/dev/null 2>&1 || true
expect_eq "SIGKILL during a rollback: a reap removes the container cut short" "" \
  "$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "name=$N-forking-")"

# --- rm ------------------------------------------------------------------------
cleanup_instance
expect_eq "rm --json names what it removed" '["snap-one"]' \
  "$("$SANDMAN" snapshot rm --json snap-one | json "json.dumps(d['removed'])")"
expect_eq "rm: the snapshot is gone" "[]" "$("$SANDMAN" snapshot list --json | tr -d ' \n')"
rc=0; out=$("$SANDMAN" snapshot inspect snap-one 2>&1) || rc=$?
expect_eq "inspect of a removed snapshot: exit 1" 1 "$rc"
check "rm: its image is gone (no sandbox uses it)" test -z "$(docker images -q "$image")"

# --- reap ----------------------------------------------------------------------
R4=snap-reap-$$
it_call_per_run "$R4" -- sh -c 'echo x >/workspace/x' >/dev/null
for n in reap-a reap-b reap-c; do "$SANDMAN" sandbox snapshot --run-id "$R4" --name "$n" >/dev/null; done
img_a=$("$SANDMAN" snapshot inspect reap-a | json "d['image']")
expect_eq "reap --keep 1 --dry-run names the two older" "would remove reap-b would remove reap-a" \
  "$("$SANDMAN" snapshot reap --keep 1 --dry-run | tr '\n' ' ' | sed 's/ $//')"
expect_eq "... and removes nothing" "reap-a reap-b reap-c" \
  "$("$SANDMAN" snapshot list --json | json "' '.join(sorted(x['name'] for x in d))")"
# What a crash leaves: an image whose snapshot folder is gone (aa); a
# snapshot being made (bb: its temporary folder held, flock, by a live
# process, and its image); a snapshot whose maker is gone (cc: its fresh
# temporary folder no process holds, and its image).
N4=$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "label=io.sandman.run=$R4")
for k in 00000000000000aa 00000000000000bb 00000000000000cc; do
  docker commit --change "LABEL io.sandman.snapshot.instance=$SANDMAN_INSTANCE io.sandman.snapshot.key=$k" \
    "$N4" "sandman-snap-test/leftover:$k" >/dev/null
done
BB=$SANDMAN_STATE_DIR/snapshots/.tmp-00000000000000bb-x
mkdir -p "$BB" "$SANDMAN_STATE_DIR/snapshots/.tmp-00000000000000cc-x"
(exec 9<"$BB" && flock -x 9 && exec sleep 600) >/dev/null 2>&1 &
IT_PIDS+=("$!")
held() { ! flock -x -n "$BB" true 2>/dev/null; }
for _ in $(seq 1 200); do held && break; sleep 0.05; done
check "the folder of the snapshot being made is held" held
expect_eq "reap --keep 1 removes the two older" "reap-b reap-a" \
  "$("$SANDMAN" snapshot reap --keep 1 | tr '\n' ' ' | sed 's/ $//')"
expect_eq "... the newest is kept" "reap-c" "$("$SANDMAN" snapshot list --json | json "' '.join(x['name'] for x in d)")"
check "... the removed one's image is gone" test -z "$(docker images -q "$img_a")"
check "reap removes an image whose snapshot is gone" test -z "$(docker images -q sandman-snap-test/leftover:00000000000000aa)"
check "... not the image of a snapshot being made" test -n "$(docker images -q sandman-snap-test/leftover:00000000000000bb)"
check "... nor its temporary folder (held)" test -e "$BB"
check "... and removes at once a fresh temporary folder no process holds (its maker gone)" \
  test ! -e "$SANDMAN_STATE_DIR/snapshots/.tmp-00000000000000cc-x"
check "... and its image" test -z "$(docker images -q sandman-snap-test/leftover:00000000000000cc)"
it_done
