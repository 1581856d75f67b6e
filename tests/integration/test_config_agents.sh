#!/usr/bin/env bash
# Two agents from one file, behaving as configured through `sandman run`:
#   personal: unrestricted, mode none (runs on the host)
#   family:   read-only tools only, mode per_tool (a fresh container per call)
# plus `config check` / `config explain` and a bad file that starts nothing.
source "$(dirname "$0")/lib.sh"

WORK=$(mktemp -d)
trap 'cleanup_instance; rm -rf "$WORK"' EXIT
CFG=$WORK/agents.yaml
cat >"$CFG" <<'YAML'
version: 1
project:
  id: itest
defaults:
  image: sandman/minimal:latest
  memory: 128m
  timeout: 60s
  tools:
    deny: [browser]
agents:
  personal:
    mode: none
  family:
    mode: per_tool
    scope: user_agent
    tools:
      allow: [group:fs_read]
YAML

jq_get() { jq -r "$1" <<<"$2"; }

# ---- config check ----
out=$("$SANDMAN" config check "$CFG"); rc=$?
expect_eq "config check exits 0" 0 "$rc"
expect_eq "config check prints ok" "ok: $CFG" "$out"

BAD=$WORK/bad.yaml
printf 'agents:\n  family:\n    mode: per_tool\n    memroy: 1g\n' >"$BAD"
set +e
out=$("$SANDMAN" config check "$BAD" 2>&1); rc=$?
set -e
expect_eq "bad file exits 2" 2 "$rc"
expect_contains "bad file names file:line:column and key" \
  "$BAD:4:5: agents.family.memroy: unknown key (did you mean 'memory'?)" "$out"

# ---- config explain ----
j=$("$SANDMAN" --config "$CFG" config explain --agent personal --tool shell --json)
expect_eq "personal shell allowed" true "$(jq_get .allowed "$j")"
expect_eq "personal shell not sandboxed" false "$(jq_get .sandboxed "$j")"
expect_eq "personal mode none" none "$(jq_get .settings.mode.value "$j")"
expect_eq "personal mode from agent" agent "$(jq_get .settings.mode.source "$j")"
expect_eq "memory from defaults" defaults "$(jq_get .settings.memory.source "$j")"
expect_eq "memory value" 134217728 "$(jq_get .settings.memory.value "$j")"
expect_eq "network built in" built_in "$(jq_get .settings.network.source "$j")"

j=$("$SANDMAN" --config "$CFG" config explain --agent family --tool read_file --user alice --json)
expect_eq "family read_file allowed" true "$(jq_get .allowed "$j")"
expect_eq "family read_file sandboxed" true "$(jq_get .sandboxed "$j")"
expect_eq "family mode per_tool from agent" "per_tool agent" \
  "$(jq_get '.settings.mode.value + " " + .settings.mode.source' "$j")"
expect_eq "family scope key (with the project)" "user_agent:itest:alice:family" "$(jq_get .scope_key "$j")"

j=$("$SANDMAN" --config "$CFG" config explain --agent family --tool shell --json)
expect_eq "family shell refused" false "$(jq_get .allowed "$j")"
expect_eq "refusal names the rule" "agents.family.tools.allow does not include shell" \
  "$(jq_get .rule "$j")"

j=$("$SANDMAN" --config "$CFG" config explain --agent personal --tool browser --json)
expect_eq "global deny applies to personal" "defaults.tools.deny: browser matches browser" \
  "$(jq_get .rule "$j")"

j=$("$SANDMAN" --config "$CFG" config explain --agent family --tool read_file --mode per_run --json)
expect_eq "flag beats agent" "per_run flag" \
  "$(jq_get '.settings.mode.value + " " + .settings.mode.source' "$j")"

txt=$("$SANDMAN" --config "$CFG" config explain --agent family --tool shell)
expect_contains "text explain shows refusal" "allowed:     NO (agents.family.tools.allow does not include shell)" "$txt"
expect_contains "text explain has the settings table" "SOURCE" "$txt"

# ---- sandman run: needs the engine from here on ----
require_engine

set +e
j=$("$SANDMAN" --config "$CFG" run --agent personal --tool shell --json -- sh -c 'echo personal-ok'); rc=$?
set -e
expect_eq "personal runs (exit 0)" 0 "$rc"
expect_eq "personal ran on the host" none "$(jq_get .mode "$j")"
expect_eq "personal output" "personal-ok" "$(jq_get .stdout "$j" | tr -d '\n')"
expect_eq "personal has no sandbox" "" "$(jq_get '.sandbox_id // ""' "$j")"

set +e
# cgroup v1 on this engine: the limit the file set (128m) is the container's.
j=$("$SANDMAN" --config "$CFG" run --agent family --tool read_file --user alice --json -- \
  cat /sys/fs/cgroup/memory/memory.limit_in_bytes); rc=$?
set -e
expect_eq "family read_file runs (exit 0)" 0 "$rc"
expect_eq "family ran per_tool" per_tool "$(jq_get .mode "$j")"
sid=$(jq_get '.sandbox_id // ""' "$j")
check "family ran in a container" test -n "$sid"
expect_eq "container has the configured memory limit" 134217728 \
  "$(jq_get .stdout "$j" | tr -d '\n')"

set +e
j=$("$SANDMAN" --config "$CFG" run --agent family --tool shell --json -- sh -c 'echo nope'); rc=$?
set -e
expect_eq "family shell refused with exit 125" 125 "$rc"
expect_eq "failure_kind policy" policy "$(jq_get .failure_kind "$j")"
expect_contains "error names the rule" "agents.family.tools.allow does not include shell" \
  "$(jq_get .error "$j")"
expect_not_contains "refused call printed nothing of the tool" "nope" "$(jq_get .stdout "$j")"

set +e
j=$("$SANDMAN" --config "$CFG" run --agent family --json -- echo plain); rc=$?
set -e
expect_eq "family plain command (exec) refused" 125 "$rc"
expect_contains "exec refusal names the rule" "does not include exec" "$(jq_get .error "$j")"

set +e
out=$("$SANDMAN" --config "$BAD" run --agent family --tool read_file -- echo x 2>&1); rc=$?
set -e
expect_eq "run with a bad file exits 2" 2 "$rc"
expect_contains "run with a bad file names the position" "$BAD:4:5:" "$out"
n=$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "per_tool and refused calls leave no containers" 0 "$n"

it_done
