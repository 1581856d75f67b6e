#!/usr/bin/env bash
# The OpenAI Agents SDK adapter's session state and snapshot hooks through
# the SDK's own runtime with a scripted model, against a runner of its own
# and the real engine (clients/typescript/test/adapter-state.test.mjs): a
# RunState resumed by new client objects on the same (stopped) sandbox; a
# sandman snapshot taken by the SDK's serialization, a run started from it
# (a fork) whose writes stay its own; another worker's snapshot and state
# refused as missing ones. Every snapshot image of this test's instance is
# removed at the end.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_lib.sh"
node_suite_setup
node_remove_snapshot_images_on_exit
if node_tests adapter-state.test.mjs; then it_pass "OpenAI Agents SDK adapter: session state, resume, snapshots"; else it_fail "OpenAI Agents SDK adapter: session state, resume, snapshots"; fi
it_done
