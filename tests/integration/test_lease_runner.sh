#!/usr/bin/env bash
# Leases through the runner (issue 25, items 14 and 16): suite "runner" of
# test_lease_runner.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_lease_runner.py runner
