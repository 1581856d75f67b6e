#!/usr/bin/env bash
# Where `sandman run`'s mode comes from, and the bare command as root
# (issue 28 item 6), written as the attack: with no mode chosen anywhere
# (no flag, configuration or project environment) the built-in mode none
# would run the command on the host as its caller; for root that is
# refused (exit 125, nothing runs on the host) with a message naming
# `--mode per_tool` and `--mode none`. Any other caller still runs on the
# host with its one-line note. `--json` always says where the mode came
# from (`mode_source`: flag, agent, defaults, project_environment,
# built_in). A mistyped `--agent` warns with the nearest configured name.
source "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
trap 'cleanup_instance; rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
cfg() { printf "version: 1\n$1" >"$tmp/$2.yaml"; echo "$tmp/$2.yaml"; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin).get('$1'))"; }

# attempt DESC ARGS...: sandman ARGS -- touch MARKER; sets rc, out, err.
attempt() {
  local desc=$1
  shift
  rm -f "$tmp/ran"
  set +e
  out=$("$@" -- sh -c "touch '$tmp/ran'" 2>"$tmp/err")
  rc=$?
  set -e
  err=$(cat "$tmp/err")
  echo "# $desc: exit $rc"
}

# ---- root, no mode chosen: refused ----
if [ "$(id -u)" = 0 ]; then
  attempt "root, no mode" "$SANDMAN" run
  expect_eq "root, no mode chosen: exit 125" 125 "$rc"
  check "root, no mode chosen: nothing ran on the host" test ! -e "$tmp/ran"
  expect_contains "root, no mode chosen: says how to sandbox it" "--mode per_tool" "$err"
  expect_contains "root, no mode chosen: says how to run it on the host on purpose" "--mode none" "$err"
  attempt "root, no mode, --json" "$SANDMAN" run --json
  expect_eq "root, no mode chosen, --json: exit 125" 125 "$rc"
  check "root, no mode chosen, --json: nothing ran on the host" test ! -e "$tmp/ran"
  expect_eq "root, no mode chosen, --json: failure_kind policy" policy "$(field failure_kind <<<"$out")"
  expect_eq "root, no mode chosen, --json: mode_source built_in" built_in "$(field mode_source <<<"$out")"
  expect_contains "root, no mode chosen, --json: the error says what to do" "--mode none" \
    "$(field error <<<"$out")"
  # An empty configuration file chooses nothing either.
  attempt "root, a configuration without a mode" "$SANDMAN" --config "$(cfg 'defaults:\n  timeout: 30s\n' nomode)" run
  expect_eq "root, a configuration without a mode: exit 125" 125 "$rc"
  check "root, a configuration without a mode: nothing ran" test ! -e "$tmp/ran"
fi

# ---- a mode chosen on purpose runs, and says where it came from ----
attempt "--mode none" "$SANDMAN" run --json --mode none
expect_eq "--mode none: runs on the host (exit 0)" 0 "$rc"
check "--mode none: it ran" test -e "$tmp/ran"
expect_eq "--mode none: mode_source flag" "none flag" \
  "$(field mode <<<"$out") $(field mode_source <<<"$out")"
expect_eq "--mode none: no note" "" "$err"

attempt "defaults.mode none" "$SANDMAN" --config "$(cfg 'defaults:\n  mode: none\n' defaults)" run --json
expect_eq "defaults.mode none: runs (exit 0)" 0 "$rc"
check "defaults.mode none: it ran" test -e "$tmp/ran"
expect_eq "defaults.mode none: mode_source defaults" defaults "$(field mode_source <<<"$out")"

attempt "agent entry mode none" "$SANDMAN" --config "$(cfg 'agents:\n  solo:\n    mode: none\n' agent)" \
  run --json --agent solo
expect_eq "agents.solo.mode none: runs (exit 0)" 0 "$rc"
expect_eq "agents.solo.mode none: mode_source agent" agent "$(field mode_source <<<"$out")"

attempt "--project-environment development" "$SANDMAN" run --json --project-environment development
expect_eq "project environment development: runs (exit 0)" 0 "$rc"
expect_eq "project environment development: mode none from project_environment" "none project_environment" \
  "$(field mode <<<"$out") $(field mode_source <<<"$out")"

attempt "project.environment in the file" \
  "$SANDMAN" --config "$(cfg 'project:\n  id: p\n  environment: development\n' projenv)" run --json
expect_eq "project.environment development in the file: mode_source project_environment" \
  "0 project_environment" "$rc $(field mode_source <<<"$out")"

# Precedence unchanged: the flag beats the file.
require_engine
attempt "--mode per_tool over defaults.mode none" \
  "$SANDMAN" --config "$tmp/defaults.yaml" run --json --mode per_tool
expect_eq "--mode per_tool over defaults.mode none: a container, mode_source flag" "per_tool flag" \
  "$(field mode <<<"$out") $(field mode_source <<<"$out")"
check "--mode per_tool: the touch ran in the container, not on the host" test ! -e "$tmp/ran"

# ---- any other caller: on the host with its note, mode_source built_in ----
# A copy of the binary the other user can reach (the build tree may not be).
mkdir -p "$tmp/bin" "$tmp/home"
cp -L "$SANDMAN" "$tmp/bin/sandman"
cp -L "$(dirname "$SANDMAN")/libsandman.so.0" "$tmp/bin/" 2>/dev/null || true
chmod -R a+rX "$tmp/bin"
chown 65534:65534 "$tmp/home"
if [ "$(id -u)" = 0 ]; then
  as_nobody() {
    setpriv --reuid=65534 --regid=65534 --clear-groups \
      env -i PATH=/usr/bin:/bin HOME="$tmp/home" LD_LIBRARY_PATH="$tmp/bin" \
      SANDMAN_STATE_DIR="$tmp/home/state" SANDMAN_INSTANCE="$SANDMAN_INSTANCE" "$@"
  }
  rm -f "$tmp/home/ran"
  set +e
  out=$(as_nobody "$tmp/bin/sandman" run --json -- sh -c "touch '$tmp/home/ran'; id -u" 2>"$tmp/err")
  rc=$?
  set -e
  expect_eq "a non-root caller, no mode chosen: runs on the host as itself" "0 65534" \
    "$rc $(python3 -c 'import json,sys; print(json.load(sys.stdin)["stdout"].strip())' <<<"$out")"
  expect_eq "a non-root caller, no mode chosen: mode_source built_in" built_in "$(field mode_source <<<"$out")"
  expect_contains "a non-root caller, no mode chosen: the one-line note" \
    "running on the host (mode none): no mode was chosen" "$(cat "$tmp/err")"
  expect_eq "a non-root caller, no mode chosen: one line" 1 "$(wc -l <"$tmp/err")"
else
  attempt "non-root, no mode" "$SANDMAN" run --json
  expect_eq "no mode chosen (not root): runs on the host, mode_source built_in" "0 built_in" \
    "$rc $(field mode_source <<<"$out")"
  expect_contains "no mode chosen (not root): the one-line note" \
    "running on the host (mode none): no mode was chosen" "$err"
fi

# ---- a mistyped --agent warns with the nearest configured name ----
agents=$(cfg 'defaults:\n  mode: none\nagents:\n  family:\n    mode: none\n  research:\n    mode: none\n' typo)
"$SANDMAN" --config "$agents" run --agent famliy -- true 2>"$tmp/err"
expect_contains "--agent famliy: warns and suggests family" \
  "agent 'famliy' has no entry in the configuration, so the defaults apply; did you mean 'family'?" \
  "$(cat "$tmp/err")"
"$SANDMAN" --config "$agents" run --agent family -- true 2>"$tmp/err"
expect_eq "--agent family (configured): no warning" "" "$(cat "$tmp/err")"
"$SANDMAN" --config "$agents" run --agent ci-bot -- true 2>"$tmp/err"
expect_eq "--agent ci-bot (near no configured name): no warning, the defaults apply" "" "$(cat "$tmp/err")"
out=$("$SANDMAN" --config "$agents" config explain --agent reserch)
expect_contains "config explain --agent reserch: suggests research" "did you mean 'research'?" "$out"
it_done
