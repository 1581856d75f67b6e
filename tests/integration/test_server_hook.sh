#!/usr/bin/env bash
# The runner service (`sandman worker start`) against the real engine:
# suite "hook" of test_server.py (see its docstring).
source "$(dirname "$0")/lib.sh"
require_engine
trap cleanup_instance EXIT
rc=0
python3 "$SRC_DIR/tests/integration/test_server.py" hook || rc=$?
[ "$rc" -eq 77 ] && exit 77
if [ "$rc" -eq 0 ]; then it_pass "test_server.py hook"; else it_fail "test_server.py hook (exit $rc)"; fi
it_done
