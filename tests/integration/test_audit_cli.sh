#!/usr/bin/env bash
# sandman audit: reads the trail oldest first (rotated files too), filters
# by --since, --agent, --run and --denied, prints text or --json lines,
# follows new events, skips a cut line with a note, and refuses bad flags.
source "$(dirname "$0")/lib.sh"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
TRAIL=$WORK/audit/audit.jsonl
mkdir -p "$WORK/audit"
CFG=$WORK/sandman.yaml
printf 'audit:\n  file: %s\n  keep: 2\n' "$TRAIL" >"$CFG"

now_ms=$(($(date +%s) * 1000))
old_ms=$((now_ms - 7200 * 1000))
# event NAME TIME_MS AGENT RUN DISPOSITION_ID
event() {
  local disp=""
  [ -n "${5:-}" ] && disp=",\"disposition_id\":$5,\"disposition\":\"$([ "$5" = 2 ] && echo Blocked || echo Allowed)\""
  printf '{"time":%s,"time_dt":"t%s","class_uid":4001%s,"unmapped":{"event":"%s","agent":"%s","run_id":"%s","rule":"r-%s"}}\n' \
    "$2" "$2" "$disp" "$1" "$3" "$4" "$1"
}
event call.allowed "$old_ms" bot r0 1 >"$TRAIL.1"
{
  event call.refused "$now_ms" bot r1 2
  event egress.denied "$now_ms" coder r1 2
  printf '{"time": 17000'   # a line cut short by a crash
  printf '\n'
  event sandbox.created "$now_ms" coder r2 ""
} >"$TRAIL"

sm() { "$SANDMAN" --config "$CFG" audit "$@"; }
set +e
out=$(sm --json 2>"$WORK/err"); rc=$?
set -e
expect_eq "audit exits 0" 0 "$rc"
expect_eq "four events, oldest (rotated) first" \
  "call.allowed call.refused egress.denied sandbox.created" \
  "$(jq -r '.unmapped.event' <<<"$out" | tr '\n' ' ' | sed 's/ $//')"
expect_contains "the cut line is reported" "1 line(s)" "$(cat "$WORK/err")"
expect_eq "--denied" "call.refused egress.denied" "$(sm --json --denied 2>/dev/null | jq -r '.unmapped.event' | tr '\n' ' ' | sed 's/ $//')"
expect_eq "--agent" "egress.denied sandbox.created" "$(sm --json --agent coder 2>/dev/null | jq -r '.unmapped.event' | tr '\n' ' ' | sed 's/ $//')"
expect_eq "--run" "call.refused egress.denied" "$(sm --json --run r1 2>/dev/null | jq -r '.unmapped.event' | tr '\n' ' ' | sed 's/ $//')"
expect_eq "--since 1h drops the old one" "3" "$(sm --json --since 1h 2>/dev/null | wc -l)"
expect_eq "--agent bot --denied" "call.refused" "$(sm --json --agent bot --denied 2>/dev/null | jq -r '.unmapped.event')"
text=$(sm --denied 2>/dev/null)
expect_contains "text: one line per event with the rule" "egress.denied" "$text"
expect_contains "text: who" "agent=coder run=r1" "$text"
expect_contains "text: why" "(r-egress.denied)" "$text"

# --follow: prints what is appended, stops on SIGINT with 0.
"$SANDMAN" --config "$CFG" audit --json --follow --since 1h >"$WORK/follow" 2>/dev/null &
pid=$!
for _ in $(seq 1 100); do [ "$(wc -l <"$WORK/follow")" -ge 3 ] && break; sleep 0.1; done
event token.refused "$now_ms" "" "" 2 >>"$TRAIL"
for _ in $(seq 1 100); do grep -q token.refused "$WORK/follow" && break; sleep 0.1; done
kill -INT "$pid"
set +e
wait "$pid"; rc=$?
set -e
expect_eq "--follow exits 0 on SIGINT" 0 "$rc"
expect_contains "--follow printed the new event" token.refused "$(cat "$WORK/follow")"

set +e
sm --since yesterday >/dev/null 2>&1; rc=$?
expect_eq "bad --since is exit 2" 2 "$rc"
sm extra >/dev/null 2>&1; rc=$?
expect_eq "an argument is exit 2" 2 "$rc"
"$SANDMAN" --config "$CFG" audit --file "$WORK/none.jsonl" >"$WORK/none" 2>&1; rc=$?
set -e
expect_eq "a missing trail is empty" "0:" "$rc:$(cat "$WORK/none")"
it_done
