#!/usr/bin/env bash
# The runner tried as an attacker would (issue 13, item 8): suite
# "slow" of test_runner_security.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_runner_security.py slow
