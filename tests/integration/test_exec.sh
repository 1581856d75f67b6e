#!/usr/bin/env bash
# `sandman exec` against the real engine: test_exec.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_exec.py exec
