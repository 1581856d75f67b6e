#!/usr/bin/env bash
# A runner SIGKILLed during a leased call, then restarted (issue 25, item 1):
# suite "crash" of test_lease_runner.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_lease_runner.py crash
