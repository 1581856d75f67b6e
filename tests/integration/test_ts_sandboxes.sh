#!/usr/bin/env bash
# The TypeScript client's sandboxes (create, call by id, list by label, keep
# alive, delete) and MCP sessions over HTTP that leave no sandbox once the
# official SDK's client closes or an Inspector --cli call ends
# (clients/typescript/test/sandboxes.test.mjs), against a runner of its own
# and the real engine; reap() giving the idle lifecycle's moves (reap.test.mjs).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_lib.sh"
node_suite_setup
if node_tests sandboxes.test.mjs; then it_pass "TypeScript sandboxes, MCP sessions that end"; else it_fail "TypeScript sandboxes, MCP sessions that end"; fi
# After it, not beside it: its lifecycle would freeze the other file's sandboxes.
if node_tests reap.test.mjs; then it_pass "TypeScript reap(): the idle lifecycle's moves"; else it_fail "TypeScript reap(): the idle lifecycle's moves"; fi
it_done
