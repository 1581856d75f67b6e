#!/usr/bin/env bash
# Sandboxes as resources on the runner: suite "api" of test_sandboxes.py
# (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_sandboxes.py api
