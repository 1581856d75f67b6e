#!/usr/bin/env bash
# A frozen sandbox's first call, whose thaw the engine fails: suite "thaw"
# of test_state_runner.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_state_runner.py thaw
