#!/usr/bin/env bash
# `sandman config check` over every fixture: broken files exit 2 with their
# golden message on stderr (after "sandman: error: "); ok_* files print
# "ok: FILE". Also `run` refuses to start on a broken file (exit 2). No
# engine needed: nothing may start.
source "$(dirname "$0")/lib.sh"

cd "$SRC_DIR/tests/fixtures/config"
for f in *.yaml; do
  set +e
  out=$("$SANDMAN" config check "$f" 2>&1); rc=$?
  set -e
  case $f in
    ok_*)
      expect_eq "$f: exit 0" 0 "$rc"
      expect_eq "$f: ok line" "ok: $f" "$out"
      ;;
    *)
      expect_eq "$f: exit 2" 2 "$rc"
      expect_eq "$f: golden message" "sandman: error: $(cat "${f%.yaml}.expected")" "$out"
      ;;
  esac
done

# --config with a broken file: run and explain stop before anything starts.
set +e
out=$("$SANDMAN" --config bad_size.yaml run --tool shell -- echo should-not-run 2>&1); rc=$?
set -e
expect_eq "run on a broken file exits 2" 2 "$rc"
expect_not_contains "the command did not run" "should-not-run" "$out"
set +e
"$SANDMAN" --config bad_enum.yaml config explain --agent a >/dev/null 2>&1; rc=$?
set -e
expect_eq "explain on a broken file exits 2" 2 "$rc"
# An explicitly named file that does not exist is an error too.
set +e
out=$("$SANDMAN" --config does-not-exist.yaml config explain 2>&1); rc=$?
set -e
expect_eq "missing --config file exits 2" 2 "$rc"
expect_contains "missing file is named" "does-not-exist.yaml" "$out"
# workers: what a worker token may lease, as explain shows it.
out=$("$SANDMAN" --config ok_workers.yaml config explain --worker-key agent-7 --json)
expect_eq "explain --worker-key: its services and every worker's" '["github","openai","status"]' \
  "$(jq -c .worker.services <<<"$out")"
out=$("$SANDMAN" --config ok_workers.yaml config explain --worker-key w3)
expect_contains "explain --worker-key: an entry without services gets only \"*\"'s" \
  "worker:      w3 may lease status" "$out"
out=$("$SANDMAN" --config ok_comment.yaml config explain --worker-key agent-7)
expect_contains "explain --worker-key: no entry, nothing" "may lease nothing" "$out"
# No file anywhere: built-in defaults.
EMPTY=$(mktemp -d)
set +e
out=$(cd "$EMPTY" && env -u SANDMAN_CONFIG XDG_CONFIG_HOME="$EMPTY" HOME="$EMPTY" "$SANDMAN" config check 2>&1); rc=$?
set -e
rmdir "$EMPTY"
expect_eq "no file: exit 0" 0 "$rc"
expect_contains "no file: built-in defaults" "built-in defaults" "$out"

it_done
