#!/usr/bin/env bash
# Digest pins through `sandman run`: a matching pin runs (from the image Id),
# a different digest is refused as policy, a missing image is refused
# without stepping down to the host.
source "$(dirname "$0")/lib.sh"
export SANDMAN_INSTANCE="$SANDMAN_INSTANCE-$$"
require_engine
trap cleanup_instance EXIT

id=$(docker image inspect -f '{{.Id}}' sandman/minimal:latest)
out=$("$SANDMAN" run --json --mode per_tool --image "sandman/minimal@$id" -- sh -c 'echo pinned-ok') && rc=0 || rc=$?
expect_eq "matching pin runs" 0 "$rc"
expect_contains "matching pin output" '"stdout":"pinned-ok\n"' "$out"

zero=sha256:$(printf '0%.0s' $(seq 64))
out=$("$SANDMAN" run --json --mode per_tool --image "sandman/minimal@$zero" -- echo never) && rc=0 || rc=$?
expect_eq "different digest exits 125" 125 "$rc"
expect_contains "different digest is policy" '"failure_kind":"policy"' "$out"
expect_contains "error names the local digest" "$id" "$out"
expect_not_contains "nothing ran" 'never' "$(echo "$out" | grep -o '"stdout":"[^"]*"')"

# Development would step down for an unhealthy engine; never for an image.
out=$("$SANDMAN" run --json --mode per_run --run-id pin1 --project-environment development \
  --image sandman/no-such-image:latest -- echo never 2>/dev/null) && rc=0 || rc=$?
expect_eq "missing image exits 125" 125 "$rc"
expect_contains "missing image is a sandbox failure" '"failure_kind":"sandbox"' "$out"
expect_contains "missing image keeps the container mode" '"mode":"per_run"' "$out"
expect_eq "no container left" "" "$(docker ps -aq --filter label=io.sandman.instance=$SANDMAN_INSTANCE)"
it_done
