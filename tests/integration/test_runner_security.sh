#!/usr/bin/env bash
# The runner tried as an attacker would (issue 13, items 1 and 6): suite
# "owner" of test_runner_security.py (see its docstring).
source "$(dirname "$0")/lib.sh"
require_engine
trap cleanup_instance EXIT
rc=0
python3 "$SRC_DIR/tests/integration/test_runner_security.py" owner || rc=$?
[ "$rc" -eq 77 ] && exit 77
if [ "$rc" -eq 0 ]; then it_pass "test_runner_security.py owner"; else it_fail "test_runner_security.py owner (exit $rc)"; fi
it_done
