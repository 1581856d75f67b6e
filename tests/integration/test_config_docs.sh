#!/usr/bin/env bash
# Every YAML example in docs/configuration.md passes `sandman config check`,
# and the worked examples behave as the page says (through config explain;
# no engine needed).
source "$(dirname "$0")/lib.sh"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
DOC=$SRC_DIR/docs/configuration.md

# Split the ```yaml blocks (possibly indented) into numbered files.
awk -v dir="$WORK" '
  /^ *```yaml *$/ { n++; inb = 1; match($0, /^ */); ind = RLENGTH; file = sprintf("%s/ex%02d.yaml", dir, n); next }
  inb && /^ *``` *$/ { inb = 0; close(file); next }
  inb { print substr($0, ind + 1) > file }
' "$DOC"
count=$(ls "$WORK"/ex*.yaml 2>/dev/null | wc -l)
check "the page has YAML examples" test "$count" -ge 5
for f in "$WORK"/ex*.yaml; do
  set +e
  out=$("$SANDMAN" config check "$f" 2>&1); rc=$?
  set -e
  expect_eq "example $(basename "$f") is valid ($out)" 0 "$rc"
done

explain() { "$SANDMAN" --config "$1" config explain --json "${@:2}"; }
field() { jq -r "$1"; }

# Find the worked examples by a line each contains.
ex_family=$(grep -l "scope: user_agent" "$WORK"/ex*.yaml | grep -v ex01 | head -1)
ex_work=$(grep -l 'deny: \[browser, "web_\*"\]' "$WORK"/ex*.yaml | head -1)
ex_public=$(grep -l "runtime: runsc" "$WORK"/ex*.yaml | head -1)

expect_eq "family: shell refused" "agents.family.tools.allow does not include shell" \
  "$(explain "$ex_family" --agent family --tool shell | field .rule)"
expect_eq "family: read_file sandboxed per_tool" "true per_tool" \
  "$(explain "$ex_family" --agent family --tool read_file | field '"\(.sandboxed) \(.settings.mode.value)"')"
expect_eq "personal: shell on the host" "true false" \
  "$(explain "$ex_family" --agent personal --tool shell | field '"\(.allowed) \(.sandboxed)"')"

expect_eq "work: browser refused" "agents.work.tools.deny: browser matches browser" \
  "$(explain "$ex_work" --agent work --tool browser | field .rule)"
expect_eq "work: web_search refused" "false" \
  "$(explain "$ex_work" --agent work --tool web_search | field .allowed)"
expect_eq "work: shell in the run's sandbox" "true true per_run" \
  "$(explain "$ex_work" --agent work --tool shell | field '"\(.allowed) \(.sandboxed) \(.settings.mode.value)"')"

expect_eq "public: python sandboxed in runsc" "true true runsc" \
  "$(explain "$ex_public" --agent public --tool python | field '"\(.allowed) \(.sandboxed) \(.settings.runtime.value)"')"
expect_eq "public: shell refused" "false" \
  "$(explain "$ex_public" --agent public --tool shell | field .allowed)"
expect_eq "public: no host variables" "[]" \
  "$(explain "$ex_public" --agent public --tool python | jq -c .settings.env_passthrough.value)"

it_done
