#!/usr/bin/env bash
# `sandman files watch` against the real engine: suite "cli" of
# test_runner_watch.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_runner_watch.py cli
