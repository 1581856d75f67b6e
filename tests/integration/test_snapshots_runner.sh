#!/usr/bin/env bash
# Snapshots on the runner: suites "owners", "client", "leased" and "crash" of
# test_snapshots_runner.py (see its docstring).
source "$(dirname "$0")/lib.sh"
require_engine
trap cleanup_instance EXIT
cleanup_instance
rm -rf "${SANDMAN_STATE_DIR:?}"/*
for suite in owners client leased crash; do
  rc=0
  python3 "$SRC_DIR/tests/integration/test_snapshots_runner.py" "$suite" || rc=$?
  [ "$rc" -eq 77 ] && exit 77
  if [ "$rc" -eq 0 ]; then it_pass "test_snapshots_runner.py $suite"; else it_fail "test_snapshots_runner.py $suite (exit $rc)"; fi
  cleanup_instance
  rm -rf "${SANDMAN_STATE_DIR:?}"/*
done
it_done
