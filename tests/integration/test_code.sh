#!/usr/bin/env bash
# Code contexts through the runner against the real engine: suite "runner"
# of test_code.py (see its docstring).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/code_image.sh"
require_engine
trap code_image_cleanup EXIT
code_image
rc=0
python3 "$SRC_DIR/tests/integration/test_code.py" runner || rc=$?
[ "$rc" -eq 77 ] && exit 77
if [ "$rc" -eq 0 ]; then it_pass "test_code.py runner"; else it_fail "test_code.py runner (exit $rc)"; fi
it_done
