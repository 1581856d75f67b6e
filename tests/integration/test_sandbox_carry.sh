#!/usr/bin/env bash
# No call wipes a run's work (docs/modes.md, Reuse, changes and concurrency)
# with `sandman run`: a per_run call whose settings differ replaces the
# sandbox with its /workspace carried over (kept: the volume handed over;
# copied: new options), and what only the sandbox holds (excluded from a
# host workspace) survives the next copy in; what cannot be carried is
# refused with exit 125 naming --replace, and nothing is changed;
# --replace empties it; a sandbox that had stopped has nothing left; a
# sandbox made with `sandbox create` keeps its settings, with
# `sandbox inspect` and `sandbox rm`.
source "$(dirname "$0")/lib.sh"
require_engine
trap kill_pids_and_cleanup EXIT
cleanup_instance

WORK=$(mktemp -d /tmp/sm-carry-XXXXXX)
trap 'rm -rf "$WORK"; kill_pids_and_cleanup' EXIT
run() { "$SANDMAN" run --mode per_run --run-id carry --json "$@"; }
field() { json "$1"; }

# A host workspace with an excluded folder: what the tool puts there lives
# in the sandbox only.
mkdir -p "$WORK/ws"
echo host > "$WORK/ws/a.txt"
out=$(run --workspace "$WORK/ws" --exclude 'cache/**' --mem 256m -- sh -c 'mkdir -p cache; echo built > cache/x; echo in-box > /workspace/b.txt') || true
expect_eq "first call" "True" "$(echo "$out" | field 'd["ok"]')"

out=$(run --workspace "$WORK/ws" --exclude 'cache/**' --mem 200m -- sh -c 'cat cache/x a.txt') || true
expect_eq "memory changed: the volume is handed over" "kept" "$(echo "$out" | field 'd["replaced"]["workspace"]')"
expect_contains "what only the sandbox held survives the next copy in" "built" "$(echo "$out" | field 'd["stdout"]')"
expect_contains "and the host's files are there" "host" "$(echo "$out" | field 'd["stdout"]')"

out=$(run --workspace "$WORK/ws" --exclude 'cache/**' --mem 200m --disk 32m -- sh -c 'cat cache/x; stat -c %u cache/x') || true
expect_eq "disk changed: copied" "copied" "$(echo "$out" | field 'd["replaced"]["workspace"]')"
expect_eq "copied files are the sandbox user's" "built
1000" "$(echo "$out" | field 'd["stdout"].strip()')"
expect_contains "the reason names the disk" "disk" "$(echo "$out" | field 'd["replaced"]["because"]')"

run --mem 200m --disk 32m -- dd if=/dev/zero of=/workspace/big bs=1024 count=3072 >/dev/null 2>&1
rc=0
out=$(run --mem 200m --disk 1m -- ls /workspace 2>/dev/null) || rc=$?
expect_eq "too big for the new disk: refused, exit 125" "125" "$rc"
expect_eq "refused as policy" "policy" "$(echo "$out" | field 'd["failure_kind"]')"
expect_contains "the refusal names the flag" "--replace" "$(echo "$out" | field 'd["error"]')"
out=$(run --mem 200m --disk 32m -- cat cache/x) || true
expect_eq "nothing was changed" "built" "$(echo "$out" | field 'd["stdout"].strip()')"

out=$(run --mem 200m --disk 1m --replace -- ls -A /workspace) || true
expect_eq "--replace: replaced" "dropped" "$(echo "$out" | field 'd["replaced"]["workspace"]')"
expect_eq "--replace: an empty /workspace" "" "$(echo "$out" | field 'd["stdout"].strip()')"

# A sandbox that stopped: its tmpfs went with it; said so.
name=$("$SANDMAN" sandbox list --json | json "[x['name'] for x in d if x['run_id']=='carry'][0]")
docker stop -t 1 "$name" >/dev/null
out=$(run --mem 200m --disk 1m -- true) || true
expect_eq "a stopped sandbox is replaced: its workspace had gone" "gone" "$(echo "$out" | field 'd["replaced"]["workspace"]')"

# Made ahead: used as made by later calls, whatever their settings.
id=$("$SANDMAN" sandbox create --run-id made --mem 128m --label who=test --timeout 1h)
expect_eq "sandbox create prints the id" "64" "${#id}"
rc=0; "$SANDMAN" sandbox create --run-id made >/dev/null 2>&1 || rc=$?
expect_eq "a second one of that run: exit 1" "1" "$rc"
desc=$("$SANDMAN" sandbox inspect "${id:0:12}")
expect_eq "inspect: its life and labels" "3600.0 {'who': 'test'} True" "$(echo "$desc" | json 'd["timeout_s"], d["labels"], d["resource"]' | tr -d '(),')"
out=$("$SANDMAN" run --mode per_run --run-id made --mem 300m --json -- true) || true
expect_eq "a call with other settings uses it as made" "$id None" "$(echo "$out" | json 'd["sandbox_id"], d.get("replaced")' | tr -d "(),'")"
"$SANDMAN" sandbox rm "$id" >/dev/null
rc=0; "$SANDMAN" sandbox inspect "$id" >/dev/null 2>&1 || rc=$?
expect_eq "removed: inspect exits 1" "1" "$rc"
it_done
