#!/usr/bin/env bash
# The runner tried as an attacker would (issue 13, item 8): suite
# "slow" of test_runner_security.py (see its docstring).
source "$(dirname "$0")/lib.sh"
require_engine
trap cleanup_instance EXIT
rc=0
python3 "$SRC_DIR/tests/integration/test_runner_security.py" slow || rc=$?
[ "$rc" -eq 77 ] && exit 77
if [ "$rc" -eq 0 ]; then it_pass "test_runner_security.py slow"; else it_fail "test_runner_security.py slow (exit $rc)"; fi
it_done
