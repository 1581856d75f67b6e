#!/usr/bin/env bash
# Keys are injective and names have one character set (issue 13, items 3
# and 10), written as the attack: a caller picks a project and run id that
# spell another project's key, or the same user id in another project, to
# land in a sandbox that is not theirs; or a name that carries a newline or
# a shell substitution into keys, labels and logs.
source "$(dirname "$0")/lib.sh"
require_engine
trap cleanup_instance EXIT

field() { sed -n "s/.*\"$1\": *\"\\([^\"]*\\)\".*/\\1/p"; }
label() { docker inspect -f "{{index .Config.Labels \"io.sandman.$2\"}}" "$1"; }

# Project a:b with run c and project a with run b:c were one key
# ("run:a:b:c"): the second call ran in the first one's sandbox.
one=$("$SANDMAN" run --json --mode per_run --project a:b --run-id c -- sh -c 'echo planted > /tmp/mark')
two=$("$SANDMAN" run --json --mode per_run --project a --run-id b:c -- sh -c 'cat /tmp/mark 2>/dev/null || echo clean')
id1=$(field sandbox_id <<<"$one")
id2=$(field sandbox_id <<<"$two")
check "project a:b run c has a sandbox" test -n "$id1"
check "project a run b:c gets another sandbox" test "$id1" != "$id2"
expect_contains "nothing of the first call reaches the second" '"stdout":"clean\n"' "$two"
expect_contains "the second call did not reuse a sandbox" '"reused":false' "$two"
expect_eq "labels keep the names readable (project)" "a:b" "$(label "$id1" project)"
expect_eq "labels keep the names readable (run)" "c" "$(label "$id1" run)"
expect_eq "the key label is the escaped key" "run:a%3Ab:c" "$(label "$id1" scope-key)"
again=$("$SANDMAN" run --json --mode per_run --project a:b --run-id c -- cat /tmp/mark)
expect_eq "the same names find the same sandbox" "$id1" "$(field sandbox_id <<<"$again")"

# Scopes include the project: the same user in two projects never shares.
cfg=$(mktemp)
printf 'version: 1\ndefaults:\n  mode: per_run\n  scope: user\n' >"$cfg"
p1=$("$SANDMAN" --config "$cfg" run --json --project p1 --user alice -- sh -c 'echo p1-secret > /tmp/mark')
p2=$("$SANDMAN" --config "$cfg" run --json --project p2 --user alice -- sh -c 'cat /tmp/mark 2>/dev/null || echo clean')
check "scope user: project p1 has a sandbox" test -n "$(field sandbox_id <<<"$p1")"
check "scope user: project p2 gets another" test "$(field sandbox_id <<<"$p1")" != "$(field sandbox_id <<<"$p2")"
expect_contains "scope user: p1's files do not reach p2" '"stdout":"clean\n"' "$p2"
explain=$("$SANDMAN" --config "$cfg" config explain --agent a --user alice --json)
expect_contains "config explain shows the project in the scope key" '"scope_key":"user:default:alice"' "$explain"
rm -f "$cfg"

# One character set, checked before anything starts.
before=$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
bad_names=($'r1\nINFO forged line' '$(id)' 'a b' '-x' '../x' '')
what=("a newline" "a shell substitution" "a space" "a leading dash" "a slash" "nothing in it")
for i in "${!bad_names[@]}"; do
  bad=${bad_names[$i]} ok=1
  for flag in --run-id --project --worker-id --agent --user --tool; do
    set +e
    err=$("$SANDMAN" run --mode per_run --run-id ok "$flag" "$bad" -- true 2>&1 >/dev/null)
    rc=$?
    set -e
    if [ "$rc" != 2 ]; then ok=0; echo "  $flag: exit $rc" >&2; fi
    case "$err" in *$'\n'*INFO*) ok=0; echo "  $flag: raw newline in [$err]" >&2 ;; esac
  done
  check "a name with ${what[$i]} is refused for every name flag (exit 2, no raw newline)" test "$ok" = 1
done
after=$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "a refused name starts no sandbox" "$before" "$after"
it_done
