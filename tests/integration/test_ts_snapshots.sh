#!/usr/bin/env bash
# The TypeScript client's rest, snapshot, fork, rollback and diff methods
# and another worker's token refused (404) on a worker's sandbox and
# snapshot (clients/typescript/test/snapshots.test.mjs), against a runner
# of its own and the real engine. Every snapshot image of this test's
# instance is removed at the end.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_lib.sh"
node_suite_setup
node_remove_snapshot_images_on_exit
if node_tests snapshots.test.mjs; then it_pass "TypeScript snapshots, fork, rollback, diff, rest"; else it_fail "TypeScript snapshots, fork, rollback, diff, rest"; fi
it_done
