#!/usr/bin/env bash
# sandbox list / reap / rm / doctor against the real engine. Sandboxes are
# made with the docker CLI carrying the labels and names the sandbox module
# uses, so these tests do not depend on `sandman run`.
source "$(dirname "$0")/lib.sh"
require_engine

STATE=$SANDMAN_STATE_DIR
trap kill_pids_and_cleanup EXIT
cleanup_instance
rm -rf "${STATE:?}"/*

# mk MODE NAMEPART [LABEL=VALUE...]: a running sandbox and its volume, as
# the sandbox module makes them. Prints the container name.
mk() {
  local mode=$1 part=$2
  shift 2
  local name=sandman-$SANDMAN_INSTANCE-$part l labels=()
  for l in io.sandman.managed=true "io.sandman.instance=$SANDMAN_INSTANCE" "io.sandman.mode=$mode" \
    io.sandman.project=proj1 io.sandman.agent=coder io.sandman.scope-key=key-$part \
    io.sandman.config-hash=0123 "io.sandman.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$@"; do
    labels+=(--label "$l")
  done
  docker volume create "${labels[@]}" "$name-ws" >/dev/null
  docker run -d --network none --name "$name" "${labels[@]}" --label "io.sandman.volume=$name-ws" \
    -v "$name-ws:/workspace" sandman/minimal:latest sleep 3600 >/dev/null
  echo "$name"
}
exists() { docker container inspect "$1" >/dev/null 2>&1; }
vol_exists() { docker volume inspect "$1" >/dev/null 2>&1; }
# last_used NAME EPOCH: what the runner records after a call.
last_used() { mkdir -p "$STATE/last-used"; echo "$2" >"$STATE/last-used/$1"; }
now=$(date +%s)

# --- list --------------------------------------------------------------------
RUN=$(mk per_run per_run-aaa io.sandman.run=r1)
WRK=$(mk per_worker per_worker-bbb io.sandman.worker=w1)
TOOL=$(mk per_tool tool-ccc "io.sandman.owner=$(hostname):$$")
# Another instance's sandbox: never seen, never touched.
OTHER=sandman-other-$SANDMAN_INSTANCE-per_run-zzz
docker run -d --network none --name "$OTHER" --label io.sandman.managed=true \
  --label "io.sandman.instance=other-$SANDMAN_INSTANCE" --label io.sandman.mode=per_run \
  sandman/minimal:latest sleep 3600 >/dev/null
trap 'kill_pids_and_cleanup; docker rm -fv "$OTHER" >/dev/null 2>&1 || true' EXIT

out=$("$SANDMAN" sandbox list --json)
expect_eq "list --json: three sandboxes of this instance" 3 "$(json 'len(d)' <<<"$out")"
expect_eq "list --json: per_run fields" "per_run r1 None proj1 coder sandman/minimal:latest running False $RUN" \
  "$(json "' '.join(str(x[k]) for x in d if x['mode']=='per_run' for k in ('mode','run_id','worker_id','project','agent','image','status','busy','name'))" <<<"$out")"
expect_eq "list --json: per_worker fields" "per_worker None w1 $WRK" \
  "$(json "' '.join(str(x[k]) for x in d if x['mode']=='per_worker' for k in ('mode','run_id','worker_id','name'))" <<<"$out")"
expect_eq "list --json: per_tool fields" "per_tool $TOOL" \
  "$(json "' '.join(str(x[k]) for x in d if x['mode']=='per_tool' for k in ('mode','name'))" <<<"$out")"
expect_eq "list --json: ids are the engine's" "$(docker inspect -f '{{.Id}}' "$RUN")" \
  "$(json "[x['id'] for x in d if x['name']=='$RUN'][0]" <<<"$out")"
expect_eq "list --json: every contract field" "True" \
  "$(json "all(set(x)>={'id','name','mode','project','run_id','worker_id','agent','image','status','created_at','last_used_at','busy'} for x in d)" <<<"$out")"
expect_eq "list --json: last_used_at falls back to created_at" "True" \
  "$(json "all(x['last_used_at']==x['created_at'] for x in d)" <<<"$out")"
last_used "$RUN" "$((now - 7200))"
out=$("$SANDMAN" sandbox list --json)
expect_eq "list --json: recorded last_used_at" "$(date -u -d "@$((now - 7200))" +%Y-%m-%dT%H:%M:%SZ)" \
  "$(json "[x['last_used_at'] for x in d if x['name']=='$RUN'][0]" <<<"$out")"
table=$("$SANDMAN" sandbox list)
expect_contains "list: table heading" "SANDBOX        MODE         PROJECT   RUN   WORKER   AGENT   IMAGE" "$table"
expect_contains "list: last used in words" "2 hours ago" "$table"
expect_not_contains "list: other instances are not shown" "zzz" "$table"

# --- reap: dry run, idle only, busy, owner --------------------------------------
last_used "$WRK" "$now"
out=$("$SANDMAN" sandbox reap --older-than 0s --dry-run --json)
expect_eq "reap --dry-run: reports" "True 2" "$(json "str(d['dry_run'])+' '+str(len(d['removed']))" <<<"$out")"
check "reap --dry-run: changes nothing" exists "$RUN"
check "reap --dry-run: changes nothing (volume)" vol_exists "$RUN-ws"
check "reap --dry-run: keeps last-used" test -f "$STATE/last-used/$RUN"

out=$("$SANDMAN" sandbox reap --older-than 1h --json)
expect_eq "reap --older-than 1h: removes the idle one only" "$RUN" "$(json "' '.join(x['name'] for x in d['removed'])" <<<"$out")"
check "reap: idle sandbox gone" bash -c "! docker container inspect $RUN >/dev/null 2>&1"
check "reap: its volume gone" bash -c "! docker volume inspect $RUN-ws >/dev/null 2>&1"
check "reap: its state file gone" test ! -e "$STATE/last-used/$RUN"
check "reap: recently used one stays" exists "$WRK"
check "reap: per_tool with a live owner stays" exists "$TOOL"
check "reap: other instance untouched" exists "$OTHER"
expect_contains "reap: says why it spared" "ago (limit 1h)" \
  "$(json "[x['reason'] for x in d['spared'] if x['name']=='$WRK'][0]" <<<"$out")"

# A call in flight survives reap --older-than 0s; SIGKILL ends the call.
BUSY=$(mk per_run per_run-busy io.sandman.run=r2)
check "a call in flight on $BUSY (its busy lock held)" it_hold_busy "$BUSY"
holder=$IT_HOLDER
out=$("$SANDMAN" sandbox list --json)
expect_eq "list: busy shown" "True" "$(json "[x['busy'] for x in d if x['name']=='$BUSY'][0]" <<<"$out")"
out=$("$SANDMAN" sandbox reap --older-than 0s --json)
check "reap 0s: busy sandbox survives" exists "$BUSY"
expect_contains "reap 0s: spared as busy" "busy" "$(json "[x['reason'] for x in d['spared'] if x['name']=='$BUSY'][0]" <<<"$out")"
check "reap 0s: idle per_worker removed" bash -c "! docker container inspect $WRK >/dev/null 2>&1"
check "reap 0s: live-owner per_tool survives" exists "$TOOL"
set +e
"$SANDMAN" sandbox rm --no-wait "$BUSY" >/dev/null 2>&1
rc=$?
"$SANDMAN" sandbox rm --wait 1s "$BUSY" >/dev/null 2>&1
rc_waited=$?
set -e
expect_eq "rm --no-wait: busy refused without --force (exit 1)" 1 "$rc"
expect_eq "rm --wait 1s: still busy after the wait, refused (exit 1)" 1 "$rc_waited"
check "rm: busy one still there" exists "$BUSY"
kill -9 "$holder"
# The holder is this shell's child: once wait returns it is gone, and with
# it the lock. (Started in a $(...) subshell, as it was, it was not a child,
# wait returned at once, and under load reap still found the lock held.)
wait "$holder" 2>/dev/null || true
out=$("$SANDMAN" sandbox reap --older-than 0s --json)
expect_contains "reap after SIGKILL of the call: removed" "$BUSY" "$(json "' '.join(x['name'] for x in d['removed'])" <<<"$out")"
check "reap after SIGKILL: gone" bash -c "! docker container inspect $BUSY >/dev/null 2>&1"

# rm waits for a call in flight (bounded): the call ends during the wait
# and the sandbox is removed.
BUSY2=$(mk per_run per_run-busy2 io.sandman.run=r2b)
check "a call in flight on $BUSY2" it_hold_busy "$BUSY2"
holder=$IT_HOLDER
"$SANDMAN" sandbox rm --wait 120s "$BUSY2" >/dev/null 2>/dev/null &
rm_pid=$!
check "rm --wait: still waiting while the call runs" bash -c "sleep 0.3; kill -0 $rm_pid"
check "rm --wait: the sandbox still there meanwhile" exists "$BUSY2"
kill -9 "$holder"
wait "$holder" 2>/dev/null || true
set +e
wait "$rm_pid"
rc=$?
set -e
expect_eq "rm --wait: removed once the call ended (exit 0)" 0 "$rc"
check "rm --wait: gone" bash -c "! docker container inspect $BUSY2 >/dev/null 2>&1"

# A keyed sandbox being looked up or created holds keys/create-<name>
# (the sandbox module's creation lock) until its call holds the busy lock:
# reap leaves it alone.
SETUP=$(mk per_run per_run-setup io.sandman.run=r4)
mkdir -p "$STATE/keys"
(exec 9>"$STATE/keys/create-$SETUP.lock" && flock -x 9 && exec sleep 600) >/dev/null 2>&1 &
creator=$!
IT_PIDS+=("$creator")
held=0
for i in $(seq 1 600); do
  flock -x -n "$STATE/keys/create-$SETUP.lock" true 2>/dev/null || { held=1; break; }
  sleep 0.1
done
expect_eq "the creation lock of $SETUP is held" 1 "$held"
out=$("$SANDMAN" sandbox reap --older-than 0s --json)
check "reap 0s: a sandbox being set up survives" exists "$SETUP"
expect_contains "reap 0s: spared as being set up" "setting it up" \
  "$(json "[x['reason'] for x in d['spared'] if x['name']=='$SETUP'][0]" <<<"$out")"
kill -9 "$creator"
wait "$creator" 2>/dev/null || true
"$SANDMAN" sandbox reap --older-than 0s >/dev/null
check "reap 0s: removed once its creator is gone" bash -c "! docker container inspect $SETUP >/dev/null 2>&1"

# Owner gone (the per_tool owner process died): removed with no age limit.
sleep 0 &
deadpid=$!
wait $deadpid
GONE=$(mk per_tool tool-gone "io.sandman.owner=$(hostname):$deadpid")
out=$("$SANDMAN" sandbox reap --json)
expect_eq "reap: dead owner's per_tool removed" "$GONE" "$(json "' '.join(x['name'] for x in d['removed'])" <<<"$out")"
check "reap: live owner's per_tool stays" exists "$TOOL"

# Exited sandboxes go; orphaned volumes go.
EXITED=sandman-$SANDMAN_INSTANCE-per_run-exited
docker run --network none --name "$EXITED" --label io.sandman.managed=true \
  --label "io.sandman.instance=$SANDMAN_INSTANCE" --label io.sandman.mode=per_run \
  --label io.sandman.run=r3 sandman/minimal:latest true
ORPHAN=sandman-$SANDMAN_INSTANCE-per_run-orphan-ws
docker volume create --label io.sandman.managed=true --label "io.sandman.instance=$SANDMAN_INSTANCE" \
  --label io.sandman.mode=per_run "$ORPHAN" >/dev/null
table=$("$SANDMAN" sandbox list)
expect_not_contains "list: exited ones hidden without --all" "Exited" "$table"
expect_contains "list --all: exited ones shown" "Exited (0)" "$("$SANDMAN" sandbox list --all)"
out=$("$SANDMAN" sandbox reap --older-than 0s --json)
expect_contains "reap: exited sandbox removed" "not running (exited)" \
  "$(json "[x['reason'] for x in d['removed'] if x['name']=='$EXITED'][0]" <<<"$out")"
expect_eq "reap: orphaned volume removed" "volume" "$(json "[x['kind'] for x in d['removed'] if x['name']=='$ORPHAN'][0]" <<<"$out")"
check "reap: orphaned volume gone" bash -c "! docker volume inspect $ORPHAN >/dev/null 2>&1"
check "reap: volume of a live sandbox kept" vol_exists "$TOOL-ws"

# --- two reaps at once ----------------------------------------------------------
names=()
for i in 1 2 3 4 5 6; do names+=("$(mk per_run "per_run-par$i" "io.sandman.run=par$i")"); done
"$SANDMAN" sandbox reap --older-than 0s --json >"$STATE/reap1.json" 2>"$STATE/reap1.err" &
p1=$!
"$SANDMAN" sandbox reap --older-than 0s --json >"$STATE/reap2.json" 2>"$STATE/reap2.err" &
p2=$!
rc1=0 rc2=0
wait $p1 || rc1=$?
wait $p2 || rc2=$?
expect_eq "two reaps at once: both succeed" "0 0" "$rc1 $rc2"
left=$(for n in "${names[@]}"; do exists "$n" && echo "$n"; done || true)
expect_eq "two reaps at once: nothing left" "" "$left"
both=$(cat "$STATE/reap1.json" "$STATE/reap2.json" | python3 -c "
import json,sys
names=[x['name'] for line in sys.stdin for x in json.loads(line)['removed'] if 'par' in x['name']]
print(len(names), len(set(names)))")
expect_eq "two reaps at once: each removed once" "6 6" "$both"
check "two reaps at once: no errors" test ! -s "$STATE/reap1.err" -a ! -s "$STATE/reap2.err"

# --- rm -------------------------------------------------------------------------
A=$(mk per_run per_run-rm1 io.sandman.run=rmrun)
B=$(mk per_run per_run-rm2 io.sandman.run=rmrun)
C=$(mk per_worker per_worker-rm3 io.sandman.worker=rmw)
D=$(mk per_run per_run-rm4 io.sandman.run=other)
rc=0
out=$("$SANDMAN" sandbox rm rmrun 2>&1) || rc=$?
expect_eq "rm of a run id as a name: exit 1, nothing removed" "1 $A" "$rc $(docker inspect -f '{{.Name}}' "$A" | tr -d /)"
expect_contains "... the refusal names the flag meant" "it is a run id: \`sandman sandbox rm --run-id rmrun\`" "$out"
"$SANDMAN" sandbox rm --run-id rmrun >/dev/null
check "rm --run-id: both gone" bash -c "! docker container inspect $A >/dev/null 2>&1 && ! docker container inspect $B >/dev/null 2>&1"
check "rm --run-id: volumes gone" bash -c "! docker volume inspect $A-ws >/dev/null 2>&1"
check "rm --run-id: others stay" exists "$D"
"$SANDMAN" sandbox rm --worker-id rmw >/dev/null
check "rm --worker-id: gone" bash -c "! docker container inspect $C >/dev/null 2>&1"
id=$(docker inspect -f '{{.Id}}' "$D")
out=$("$SANDMAN" sandbox rm --json "${id:0:12}")
expect_eq "rm by id prefix" "$D" "$(json "d['removed'][0]['name']" <<<"$out")"
set +e
"$SANDMAN" sandbox rm no-such-sandbox >/dev/null 2>&1
rc=$?
"$SANDMAN" sandbox rm "$OTHER" >/dev/null 2>&1
rc2=$?
set -e
expect_eq "rm: unknown sandbox is exit 1" 1 "$rc"
expect_eq "rm: another instance's sandbox is not ours (exit 1)" 1 "$rc2"
check "rm: another instance's sandbox untouched" exists "$OTHER"
E=$(mk per_run per_run-rm5 io.sandman.run=forced)
check "a call in flight on $E (its busy lock held)" it_hold_busy "$E"
"$SANDMAN" sandbox rm --force "$E" >/dev/null
check "rm --force: busy one removed" bash -c "! docker container inspect $E >/dev/null 2>&1"
kill -9 "$IT_HOLDER" 2>/dev/null || true
wait "$IT_HOLDER" 2>/dev/null || true

# --- doctor ---------------------------------------------------------------------
set +e
out=$("$SANDMAN" sandbox doctor --json)
rc=$?
set -e
expect_eq "doctor: healthy with the engine up (exit 0)" 0 "$rc"
expect_eq "doctor --json: healthy" "True" "$(json "d['healthy']" <<<"$out")"
expect_eq "doctor --json: checks" "api_version cgroups disk_limits engine fallback image runtime_runc runtime_runsc socket state_dir storage_driver" \
  "$(json "' '.join(sorted(c['name'] for c in d['checks'] if set(c)>={'name','ok','detail'}))" <<<"$out")"
set +e
out=$("$SANDMAN" --host "unix:///tmp/nothing-$$.sock" sandbox doctor --json)
rc=$?
text=$("$SANDMAN" --host "unix:///tmp/nothing-$$.sock" sandbox doctor 2>&1)
set -e
expect_eq "doctor on a dead socket: exit 1" 1 "$rc"
expect_eq "doctor on a dead socket: unhealthy" "False" "$(json "d['healthy']" <<<"$out")"
expect_contains "doctor on a dead socket: says how to start an engine" "start an engine" \
  "$(json "[c['detail'] for c in d['checks'] if c['name']=='engine'][0]" <<<"$out")"
expect_contains "doctor text: how to start an engine" "dockerd" "$text"

# The fallback rule's decision, as run and worker start would take it.
out=$("$SANDMAN" sandbox doctor --json --mode per_run)
expect_contains "doctor: fallback keeps per_run with the engine up" "mode per_run would be used as asked" \
  "$(json "[c['detail'] for c in d['checks'] if c['name']=='fallback'][0]" <<<"$out")"
doc_cfg=$(mktemp)
printf 'version: 1\ndefaults:\n  mode: per_run\n' >"$doc_cfg"
set +e
out=$("$SANDMAN" --host "unix:///tmp/nothing-$$.sock" --config "$doc_cfg" sandbox doctor --json 2>/dev/null)
explicit=$("$SANDMAN" --host "unix:///tmp/nothing-$$.sock" sandbox doctor --json --mode per_run 2>/dev/null)
prod=$("$SANDMAN" --host "unix:///tmp/nothing-$$.sock" sandbox doctor --json --mode per_run \
  --project-environment production 2>/dev/null)
set -e
rm -f "$doc_cfg"
expect_contains "doctor: without an engine, development steps down to none" "mode none would be used instead of per_run" \
  "$(json "[c['detail'] for c in d['checks'] if c['name']=='fallback'][0]" <<<"$out")"
expect_contains "doctor: without an engine, an explicit --mode refuses" "refuses to run mode per_run" \
  "$(json "[c['detail'] for c in d['checks'] if c['name']=='fallback'][0]" <<<"$explicit")"
expect_eq "doctor: without an engine, production refuses" "False True" \
  "$(json "' '.join(str(c[k]) for c in d['checks'] if c['name']=='fallback' for k in ('ok','required'))" <<<"$prod")"

it_done
