#!/usr/bin/env bash
# The runner tried as an attacker would (issue 13, items 1 and 6): suite
# "owner" of test_runner_security.py (see its docstring).
source "$(dirname "$0")/lib.sh"
run_python_suite test_runner_security.py owner
