#!/usr/bin/env bash
# The runner's files routes against the real engine: suite "files" of
# test_runner_files.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_runner_files.py files
