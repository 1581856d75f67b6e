#!/usr/bin/env bash
# The environment a tool gets from `sandman run` is the documented one
# (issue 13, item 6), written as the attack: the engine's address and the
# docker CLI's variables are in the host's environment, and a caller asks
# for them by glob (--env-passthrough 'DOCKER*', '*', env.passthrough in the
# configuration) or by name (-e DOCKER_HOST, -e DOCKER_HOST=...).
source "$(dirname "$0")/lib.sh"
require_engine
trap cleanup_instance EXIT

# sandman itself keeps using the engine it found: DOCKER_HOST names it.
export DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}
export DOCKER_CONFIG=/tmp/it-env-policy-docker-config
export DOCKER_ANYTHING=planted
export SANDMAN_PLANTED=planted
export ENV_POLICY_OK=fine

leaked() { grep -E '^(DOCKER_|SANDMAN_)' | grep -v '^SANDMAN_CALL=' | tr '\n' ' ' || true; }

for m in "--mode none" "--mode per_tool"; do
  out=$("$SANDMAN" run $m --env-passthrough 'DOCKER*' --env-passthrough 'ENV_POLICY_*' -- env)
  expect_eq "--env-passthrough 'DOCKER*' passes no DOCKER_ variable ($m)" "" "$(leaked <<<"$out")"
  expect_contains "--env-passthrough still passes ordinary names ($m)" "ENV_POLICY_OK=fine" "$out"
  out=$("$SANDMAN" run $m --env-passthrough '*' -- env)
  expect_eq "--env-passthrough '*' passes neither DOCKER_ nor SANDMAN_ ($m)" "" "$(leaked <<<"$out")"
done
out=$("$SANDMAN" run --mode per_tool --env-passthrough 'HOME' --env-passthrough 'XDG_*' -- sh -c 'echo $HOME $XDG_CONFIG_HOME')
expect_eq "a glob never moves HOME or the XDG directories" "/workspace /workspace/.config" "$out"

cfg=$(mktemp)
printf 'version: 1\ndefaults:\n  env:\n    passthrough: ["DOCKER_*", "SANDMAN_*"]\n' >"$cfg"
out=$("$SANDMAN" --config "$cfg" run --mode per_tool -- env)
expect_eq "env.passthrough in the configuration passes no DOCKER_/SANDMAN_ variable" "" "$(leaked <<<"$out")"
rm -f "$cfg"

before=$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
for e in "DOCKER_HOST=tcp://10.0.0.1:2375" "DOCKER_HOST" "DOCKER_CONFIG=/x" "SANDMAN_TOKEN=x"; do
  set +e
  err=$("$SANDMAN" run --mode per_tool -e "$e" -- env 2>&1 >/dev/null)
  rc=$?
  set -e
  expect_eq "-e $e refused as a usage error" 2 "$rc"
  expect_contains "-e $e: the error names the variable" "${e%%=*}" "$err"
done
after=$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "a refused -e starts no sandbox" "$before" "$after"

# -e may still set ordinary names and, being the caller's own choice, the
# home contract (a runner request's env may not: test_runner_security.py).
out=$("$SANDMAN" run --mode per_tool -e ENV_POLICY_SET=1 -e HOME=/tmp -- sh -c 'echo $ENV_POLICY_SET $HOME')
expect_eq "-e sets ordinary names and HOME" "1 /tmp" "$out"
it_done
