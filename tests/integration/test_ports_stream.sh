#!/usr/bin/env bash
# The runner's ports route and preview URLs against the real engine: suite
# "stream" of test_ports_ws.py (see its docstring), in sandman/general under
# the tests' tag.
source "$(dirname "$0")/lib.sh"
require_engine
PORTS_IMAGE=$(it_test_image general | tail -n 1) ||
  { it_fail "the test image general: scripts/test-images.sh failed"; it_done; exit 1; }
export PORTS_IMAGE
# Under AddressSanitizer its quarantine keeps up to 256 MB of freed memory
# by default, which a 100 MB stream fills; a small one keeps the runner's
# RSS bound meaningful (ignored by a plain build).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
run_python_suite test_ports_ws.py stream
