#!/usr/bin/env bash
# The runner's terminals against the real engine: suite "python" of
# test_terminals.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_terminals.py python
