#!/usr/bin/env bash
# reap and rm remove several sandboxes at once (a bounded pool of workers):
# the report is still complete and in a stable order, a busy sandbox still
# survives, --dry-run still changes nothing, and two reaps at once both
# succeed and together remove each sandbox exactly once.
source "$(dirname "$0")/lib.sh"
require_engine

STATE=$SANDMAN_STATE_DIR
trap kill_pids_and_cleanup EXIT
cleanup_instance
rm -rf "${STATE:?}"/*

# mk NAMEPART [LABEL=VALUE...]: an idle per_run sandbox and its volume, as
# the sandbox module makes them. Prints the container name.
mk() {
  local part=$1
  shift
  local name=sandman-$SANDMAN_INSTANCE-per_run-$part l labels=()
  for l in io.sandman.managed=true "io.sandman.instance=$SANDMAN_INSTANCE" io.sandman.mode=per_run \
    io.sandman.project=proj1 io.sandman.agent=coder "io.sandman.scope-key=key-$part" \
    io.sandman.config-hash=0123 "io.sandman.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$@"; do
    labels+=(--label "$l")
  done
  docker volume create "${labels[@]}" "$name-ws" >/dev/null
  docker run -d --network none --name "$name" "${labels[@]}" --label "io.sandman.volume=$name-ws" \
    -v "$name-ws:/workspace" sandman/minimal:latest sleep 3600 >/dev/null
  echo "$name"
}
# mk_many N PREFIX [LABEL=VALUE...]: N sandboxes; prints their names sorted.
mk_many() {
  local n=$1 prefix=$2 i
  shift 2
  for i in $(seq -w 1 "$n"); do mk "$prefix$i" "$@"; done | sort
}
count_ours() { docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l | tr -d ' '; }
count_vols() { docker volume ls -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l | tr -d ' '; }
# --- one reap over 20, one of them busy ---------------------------------------
NAMES=$(mk_many 20 a)
BUSY=$(mk busy1)
check "a call in flight on $BUSY (its busy lock held)" it_hold_busy "$BUSY"
expect_eq "setup: 21 sandboxes" 21 "$(count_ours)"

out=$("$SANDMAN" sandbox reap --older-than 0s --dry-run --json)
expect_eq "dry run: would remove 20" 20 "$(json "len(d['removed'])" <<<"$out")"
expect_eq "dry run: changes nothing" "21 21" "$(count_ours) $(count_vols)"

out=$("$SANDMAN" sandbox reap --older-than 0s --json)
rc=$?
expect_eq "reap: exit 0" 0 "$rc"
expect_eq "reap: reports 20 removed" 20 "$(json "len(d['removed'])" <<<"$out")"
expect_eq "reap: each of the 20 exactly once" "$(echo $NAMES)" \
  "$(json "' '.join(sorted(x['name'] for x in d['removed']))" <<<"$out")"
expect_eq "reap: the busy one spared, as busy" "$BUSY busy" \
  "$(json "' '.join(x['name']+' '+x['reason'].split(':')[0] for x in d['spared'])" <<<"$out")"
expect_eq "reap: no failures" "0" "$(json "sum(1 for x in d['spared'] if x.get('failed'))" <<<"$out")"
expect_eq "reap: only the busy one and its volume are left" "1 1" "$(count_ours) $(count_vols)"
out2=$("$SANDMAN" sandbox reap --older-than 0s --json)
expect_eq "reap again: the same report order for what is left" "$BUSY" \
  "$(json "' '.join(x['name'] for x in d['spared'])" <<<"$out2")"

for p in "${IT_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
IT_PIDS=()
cleanup_instance

# --- two reaps at once over 20 ------------------------------------------------
NAMES=$(mk_many 20 b)
"$SANDMAN" sandbox reap --older-than 0s --json >"$STATE/r1.json" 2>"$STATE/r1.err" &
p1=$!
"$SANDMAN" sandbox reap --older-than 0s --json >"$STATE/r2.json" 2>"$STATE/r2.err" &
p2=$!
wait "$p1"; rc1=$?
wait "$p2"; rc2=$?
expect_eq "concurrent reaps: both exit 0" "0 0" "$rc1 $rc2"
both=$(python3 - "$STATE/r1.json" "$STATE/r2.json" <<'PY'
import json, sys
names = []
failed = 0
for f in sys.argv[1:]:
    d = json.load(open(f))
    names += [x['name'] for x in d['removed']]
    failed += sum(1 for x in d['spared'] if x.get('failed'))
print(len(names), len(set(names)), failed, ' '.join(sorted(names)))
PY
)
expect_eq "concurrent reaps: together remove each exactly once, no failures" "20 20 0 $(echo $NAMES)" "$both"
expect_eq "concurrent reaps: nothing left" "0 0" "$(count_ours) $(count_vols)"

# --- rm of several --------------------------------------------------------------
NAMES=$(mk_many 6 c io.sandman.run=rpar)
out=$("$SANDMAN" sandbox rm --run-id rpar --json)
expect_eq "rm --run-id: exit 0" 0 "$?"
expect_eq "rm --run-id: removes all six" "$(echo $NAMES)" \
  "$(json "' '.join(sorted(x['name'] for x in d['removed']))" <<<"$out")"
expect_eq "rm --run-id: nothing left" "0 0" "$(count_ours) $(count_vols)"

it_done
