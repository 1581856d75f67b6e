#!/usr/bin/env bash
# The command line as a new user meets it (issue 15 items 2, 3, 4): exit
# codes, messages that name the flag, "did you mean", `sandman help CMD`,
# usage errors as JSON with --json, `version` without an engine, the shell's
# own errors not dressed as sandman's, `rm` of an unknown name, and `sandbox
# list -q / --filter / --format` with warm-pool containers marked; completion
# of run ids from the engine.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
WORK=$(mktemp -d)
cleanup() { cleanup_instance; rm -rf "$WORK"; }
trap cleanup EXIT

# run_cli ARGS...: sets rc, out (stdout), err (stderr).
run_cli() {
  rc=0
  "$SANDMAN" "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  out=$(cat "$WORK/out")
  err=$(cat "$WORK/err")
}

# ---- usage errors: no engine needed ----
run_cli rnu -- true
expect_eq "an unknown command exits 2" 2 "$rc"
expect_contains "an unknown command suggests the nearest" "did you mean \`sandman run\`?" "$err"
run_cli rnu --json -- true
expect_contains "an unknown command with --json: a JSON object too" '"failure_kind":"usage"' "$out"
run_cli sandbox lsit
expect_contains "an unknown sub-command suggests the nearest" "did you mean \`sandman sandbox list\`?" "$err"
run_cli run --tiemout 5 -- true
expect_eq "an unknown flag exits 2" 2 "$rc"
expect_contains "an unknown flag suggests the nearest" "did you mean --timeout?" "$err"
run_cli run --timeout abc -- true
expect_eq "a bad value exits 2" 2 "$rc"
expect_contains "a bad value names its flag" "--timeout: 'abc' is not a duration" "$err"
for bad in "--mem lots" "--cpu -1" "--pids 0" "--mode per_turn" "--network wifi" "--sync both"; do
  # shellcheck disable=SC2086
  run_cli run $bad -- true
  expect_eq "run $bad exits 2" 2 "$rc"
  expect_contains "run $bad: the error names ${bad%% *}" "sandman: error: ${bad%% *}" "$err"
done
run_cli sandbox reap --older-than soon
expect_contains "reap --older-than names its flag" "--older-than: 'soon' is not a duration" "$err"
run_cli worker start --sandbox-pool-size 99
expect_contains "worker start names its flag" "--sandbox-pool-size: 99 is out of range" "$err"
run_cli run --timeout
expect_contains "a missing value says so" "--timeout needs a value (SECONDS)" "$err"
run_cli run --json --timeout abc -- true
expect_eq "with --json a usage error still exits 2" 2 "$rc"
expect_eq "with --json a usage error is a JSON object on stdout" \
  "False 2 usage --timeout: 'abc' is not a duration (use e.g. 90s, 10m, 2h, 7d)" \
  "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["ok"], d["exit_code"], d["failure_kind"], d["error"])' "$out" 2>&1)"
run_cli sandbox list --json --filter nope=1
expect_contains "sandbox list --json: a usage error as JSON" '"failure_kind":"usage"' "$out"
run_cli run --json
expect_contains "run --json without a command: JSON too" '"exit_code":2' "$out"
run_cli help sandbox list
expect_eq "sandman help CMD exits 0" 0 "$rc"
expect_contains "sandman help CMD prints that command's usage" "Usage: sandman sandbox list" "$out"
expect_eq "sandman help CMD is CMD --help" "$("$SANDMAN" sandbox list --help)" "$out"
run_cli help nosuch
expect_eq "help of an unknown command exits 2" 2 "$rc"
run_cli sandbox
expect_eq "a group alone exits 2 and lists its commands" "2 yes" "$rc $(grep -q 'reap' <<<"$err" && echo yes)"
run_cli completion tcsh
expect_contains "completion of an unknown shell names the shells" "'tcsh' is not one of bash, zsh or fish" "$err"

# ---- version: exit 1 without an engine, as docker version ----
run_cli --host unix:///nonexistent/docker.sock version
expect_eq "version without an engine exits 1" 1 "$rc"
expect_contains "version without an engine still prints sandman's version" "sandman 0." "$out"
expect_contains "... and says the engine is not reachable" "not reachable" "$out"
run_cli --host unix:///nonexistent/docker.sock version --json
expect_eq "version --json without an engine exits 1" 1 "$rc"
expect_contains "version --json without an engine has the error" '"error"' "$out"

require_engine
run_cli version
expect_eq "version with an engine exits 0" 0 "$rc"

# ---- the engine as docker finds it: DOCKER_CONTEXT, the current context ----
host=$("$SANDMAN" version --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["engine"]["host"])')
cfgdir=$WORK/docker-config
sha=$(printf %s sm-it-ctx | sha256sum | cut -c1-64)
mkdir -p "$cfgdir/contexts/meta/$sha"
printf '{"Name":"sm-it-ctx","Metadata":{},"Endpoints":{"docker":{"Host":"%s","SkipTLSVerify":false}}}' \
  "$host" >"$cfgdir/contexts/meta/$sha/meta.json"
if [ "${host#unix://}" != "$host" ]; then
  out=$(env -u DOCKER_HOST DOCKER_CONFIG="$cfgdir" DOCKER_CONTEXT=sm-it-ctx "$SANDMAN" sandbox doctor 2>&1 || true)
  expect_contains "doctor says it used DOCKER_CONTEXT" "from docker context sm-it-ctx (DOCKER_CONTEXT)) answers" "$out"
  printf '{"currentContext":"sm-it-ctx"}' >"$cfgdir/config.json"
  out=$(env -u DOCKER_HOST -u DOCKER_CONTEXT DOCKER_CONFIG="$cfgdir" "$SANDMAN" version 2>&1 || true)
  expect_contains "version uses the docker CLI's current context" \
    "(from docker context sm-it-ctx (the docker CLI's current context))" "$out"
  out=$(DOCKER_HOST=unix:///nonexistent.sock DOCKER_CONFIG="$cfgdir" "$SANDMAN" version 2>&1 || true)
  expect_contains "DOCKER_HOST still wins over the context" "(address from DOCKER_HOST)" "$out"
  rc=0; out=$(env -u DOCKER_HOST DOCKER_CONFIG="$cfgdir" DOCKER_CONTEXT=no-such-ctx "$SANDMAN" sandbox list 2>&1) || rc=$?
  expect_eq "a DOCKER_CONTEXT that does not exist is an error (exit 2, as a bad --host)" 2 "$rc"
  expect_contains "... and says so" "docker context 'no-such-ctx' (DOCKER_CONTEXT) does not exist" "$out"
fi

# ---- the shell inside the sandbox is not sandman ----
run_cli run --mode per_tool -- nosuchcmd-xyz
expect_eq "a missing command exits 127" 127 "$rc"
expect_not_contains "the sandbox shell's error is not printed as sandman's" "sandman:" "$err"
expect_contains "... it is the shell's" "nosuchcmd-xyz" "$err"
run_cli run --mode none -- nosuchcmd-xyz
expect_not_contains "mode none: the shell's error is not printed as sandman's" "sandman:" "$err"

# ---- rm of an unknown name ----
run_cli sandbox rm no-such-sandbox-xyz
expect_eq "rm of an unknown name exits 1" 1 "$rc"
expect_contains "rm of an unknown name says so plainly" "no-such-sandbox-xyz: no such sandbox in instance" "$out"
expect_contains "... and counts it as failed, not spared" "0 removed, 0 spared, 1 failed" "$out"

# ---- list: -q, --filter, --format, the pool marker ----
"$SANDMAN" run --mode per_run --run-id "cli-r1" --agent coder -- true >/dev/null
"$SANDMAN" run --mode per_run --run-id "cli-r2" --agent reviewer -- true >/dev/null
# A warm-pool container as the runner makes it (labels only; never used by a call here).
docker run -d --network none --label io.sandman.managed=true --label "io.sandman.instance=$SANDMAN_INSTANCE" \
  --label io.sandman.mode=per_tool --label io.sandman.pool=true --label io.sandman.project=default \
  sandman/minimal:latest sleep 600 >/dev/null
run_cli sandbox list -q
expect_eq "list -q prints one short id per sandbox" "3" "$(grep -cE '^[0-9a-f]{12}$' <<<"$out")"
run_cli sandbox list --filter run=cli-r1 --format '{{.run_id}} {{ .agent }}'
expect_eq "--filter run= and a --format template" "cli-r1 coder" "$out"
run_cli sandbox list --filter mode=per_run --filter agent=reviewer --format '{{.run_id}}'
expect_eq "several --filter all apply" "cli-r2" "$out"
run_cli sandbox list --filter label=io.sandman.run=cli-r2 --format '{{.agent}}'
expect_eq "--filter label=K=V" "reviewer" "$out"
run_cli sandbox list --filter pool=true --format '{{.mode}} {{.pool}}'
expect_eq "--filter pool=true finds the warm-pool container" "per_tool true" "$out"
run_cli sandbox list --format json --filter status=running
expect_eq "--format json is the --json array" "3" "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$out" 2>&1)"
run_cli sandbox list
expect_contains "the table marks warm-pool containers" "(pool)" "$out"
expect_eq "only the pool container is marked" "1" "$(grep -c '(pool)' <<<"$out")"
run_cli sandbox list --format '{{.nope}}'
expect_eq "an unknown template field exits 2" 2 "$rc"
expect_contains "... and names the fields" "unknown field 'nope'" "$err"
expect_contains "... every one of them, node included" ", node," "$err"
run_cli sandbox reap --help
expect_contains "sandbox reap --help says it covers the whole instance" "It covers the whole instance" "$out"
run_cli sandbox list --filter rnu=x
expect_contains "an unknown filter key suggests the nearest" "did you mean run?" "$err"

# Completion asks the engine for run ids (the script runs `sandman` from PATH).
"$SANDMAN" completion bash >"$WORK/c.bash"
ids=$(PATH="$(dirname "$SANDMAN"):$PATH" bash -c 'source "$1"; COMP_WORDS=(sandman sandbox rm --run-id cli-); COMP_CWORD=4; _sandman; echo "${COMPREPLY[*]}"' _ "$WORK/c.bash")
expect_eq "bash completes --run-id from the engine" "cli-r1 cli-r2" "$ids"

it_done
