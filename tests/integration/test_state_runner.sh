#!/usr/bin/env bash
# Sandboxes that keep their state, on the runner: suite "owners" of
# test_state_runner.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_state_runner.py owners
