#!/usr/bin/env bash
# The runner's file events (GET /v1/files/watch) against the real engine:
# suite "watch" of test_runner_watch.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_runner_watch.py watch
