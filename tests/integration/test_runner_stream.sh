#!/usr/bin/env bash
# The runner's streamed execute against the real engine: suite "stream" of
# test_runner_files.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_runner_files.py stream
