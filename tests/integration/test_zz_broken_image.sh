#!/usr/bin/env bash
# DELIBERATELY BROKEN (issue 24 demonstration, to be removed): uses an image
# that neither scripts/setup.sh nor the test run builds.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_engine
trap cleanup_instance EXIT
out=$("$SANDMAN" run --image sandman-fresh/leftover:latest --mode per_tool -- echo hi 2>&1) || true
expect_eq "a call in a left-behind image" hi "$out"
it_done
