#!/usr/bin/env bash
# The swarm backend's benchmark: sandboxes created and calls per second on a
# one-node and a three-node swarm side by side, and the runner's memory with
# 300 idle sandboxes across three nodes (bench/swarm/swarm_bench.py says
# how). Writes bench/results/swarm.md and swarm.json.
#
#   bench/swarm/run.sh            the full run (~20 minutes here)
#   bench/swarm/run.sh --quick    a smoke run (a few minutes)
#
# Needs root, a local engine and scripts/setup.sh done (build/sandman,
# sandman/minimal:latest); builds sandman/dind if it is missing or old.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
"$ROOT/scripts/setup.sh" >/dev/null
export SANDMAN_BIN=${SANDMAN_BIN:-$ROOT/build/sandman}
STATE=$(mktemp -d /tmp/sm-swarm-bench-state.XXXXXX)
trap 'rm -rf "$STATE"' EXIT
export SANDMAN_STATE_DIR=${SANDMAN_STATE_DIR:-$STATE}
/usr/bin/python3 "$ROOT/bench/swarm/swarm_bench.py" "$@"
