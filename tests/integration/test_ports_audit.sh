#!/usr/bin/env bash
# `sandman sandbox port` writes its audit rows: suite "audit" of test_ports.py (see its
# docstring), in sandman/general under the tests' tag (python3 serves).
source "$(dirname "$0")/lib.sh"
require_engine
PORTS_IMAGE=$(it_test_image general | tail -n 1) ||
  { it_fail "the test image general: scripts/test-images.sh failed"; it_done; exit 1; }
export PORTS_IMAGE
run_python_suite test_ports.py audit
