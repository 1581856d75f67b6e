#!/usr/bin/env bash
# An isolation asked for explicitly is never weakened (issue 13, item 5),
# written as the attack: the call is one that must not run on the host
# (`touch` of a file on the host stands for it), and what it asked for
# cannot be had: a runtime the engine lacks, an engine that is down, an
# image that is missing, sandbox_tools.always. Each must refuse (exit 125)
# and leave no trace on the host; only a mode from the configuration's
# defaults steps down, outside production, with its WARN.
source "$(dirname "$0")/lib.sh"
require_engine
trap 'cleanup_instance; rm -rf "$tmp"' EXIT
tmp=$(mktemp -d)
dead="unix://$tmp/no-engine.sock"
cfg() { printf "version: 1\n$1" >"$tmp/cfg.yaml"; echo "$tmp/cfg.yaml"; }

# run_refused DESC ARGS...: exit 125 and the marker never written on the host.
run_refused() {
  local desc=$1 rc
  shift
  rm -f "$tmp/ran"
  set +e
  out=$("$@" -- sh -c "touch '$tmp/ran'" 2>"$tmp/err")
  rc=$?
  set -e
  err=$(cat "$tmp/err")
  expect_eq "$desc: exit 125" 125 "$rc"
  check "$desc: nothing ran on the host" test ! -e "$tmp/ran"
}

run_refused "--runtime nosuch --mode per_tool" "$SANDMAN" run --mode per_tool --runtime nosuch
expect_contains "--runtime nosuch: the error names the runtime" "runtime 'nosuch'" "$err"
expect_contains "--runtime nosuch: says how to register it" "daemon.json" "$err"
run_refused "--runtime nosuch with the mode from the defaults (development)" \
  "$SANDMAN" --config "$(cfg 'defaults:\n  mode: per_tool\n')" run \
  --project-environment development --runtime nosuch
run_refused "--mode per_tool with no engine" "$SANDMAN" --host "$dead" run --json --mode per_tool
expect_contains "no engine: failure_kind engine" '"failure_kind":"engine"' "$out"
expect_contains "no engine: the error says what to do" "start the engine" "$out"
run_refused "--mode per_run with no engine (development)" \
  "$SANDMAN" --host "$dead" run --mode per_run --run-id r1 --project-environment development
run_refused "an agent entry's mode with no engine" \
  "$SANDMAN" --host "$dead" --config "$(cfg 'agents:\n  a:\n    mode: per_tool\n')" \
  run --agent a
run_refused "sandbox_tools.always with no engine" \
  "$SANDMAN" --host "$dead" --config "$(cfg 'defaults:\n  sandbox_tools:\n    always: [exec]\n')" \
  run
run_refused "--mode per_tool with a missing image" \
  "$SANDMAN" run --mode per_tool --image "sandman/it-missing-$$:none"
run_refused "--runtime runsc with no engine" "$SANDMAN" --host "$dead" run --mode per_tool \
  --runtime runsc
run_refused "--runtime runsc where the mode would be none (development)" "$SANDMAN" run \
  --runtime runsc --project-environment development
expect_contains "--runtime with mode none: says to add --mode" "add --mode per_tool" "$err"

# The step-down stays for a mode from the configuration's defaults, outside
# production, with a WARN per step.
rm -f "$tmp/ran"
"$SANDMAN" --host "$dead" --config "$(cfg 'defaults:\n  mode: per_tool\n')" \
  run --project-environment development -- sh -c "touch '$tmp/ran'" 2>"$tmp/err"
check "defaults.mode with no engine (development): stepped down and ran" test -e "$tmp/ran"
expect_contains "defaults.mode with no engine: WARN per step" "stepping down to none" "$(cat "$tmp/err")"
run_refused "defaults.mode with no engine in production" \
  "$SANDMAN" --host "$dead" --config "$(cfg 'defaults:\n  mode: per_tool\n')" \
  run --project-environment production

# A tool the configuration does not name is sandboxed under a container mode.
out=$("$SANDMAN" run --json --mode per_tool --tool pytest -- sh -c 'hostname; id -u')
expect_contains "an unknown tool (pytest) under --mode per_tool runs in a container" '"mode":"per_tool"' "$out"
expect_contains "pytest ran in the sandbox (its host name, not the host's)" '"stdout":"sandbox\n1000\n"' "$out"
out=$("$SANDMAN" config explain --tool pytest --mode per_tool --json)
expect_contains "config explain: pytest is sandboxed" '"sandboxed":true' "$out"
expect_contains "config explain: the mode flag is explicit" '"mode_explicit":true' "$out"

# On the host because nothing chose a mode: refused for root, one line on
# stderr for anyone else (test_run_mode.sh). Chosen on purpose: no note.
"$SANDMAN" run --mode none -- true 2>"$tmp/err"
expect_eq "--mode none: no note" "" "$(cat "$tmp/err")"

# The runner refuses to start with an explicit mode it cannot have.
(umask 077 && echo 0123456789abcdef0123456789abcdef >"$tmp/token")
set +e
out=$(timeout 60 "$SANDMAN" --host "$dead" worker start --listen "unix:$tmp/r/s.sock" \
  --token-file "$tmp/token" --sandbox-mode per_tool \
  --project-environment development 2>&1)
rc=$?
set -e
expect_eq "worker start --sandbox-mode per_tool with no engine: exit 125" 125 "$rc"
expect_contains "worker start: says it refuses" "refusing to start" "$out"
it_done
