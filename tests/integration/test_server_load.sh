#!/usr/bin/env bash
# The runner service (`sandman worker start`) against the real engine:
# suite "load" of test_server.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_server.py load
