#!/usr/bin/env bash
# The TypeScript adapters with the real npm packages against a runner of its
# own and the real engine, no model and no network: deepagents' file tools
# and execute, an OpenAI Agents SDK SandboxAgent driven by a scripted model
# (clients/typescript/test/adapters.test.mjs).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_lib.sh"
node_suite_setup
if node_tests adapters.test.mjs; then it_pass "adapters: deepagents, OpenAI Agents SDK"; else it_fail "adapters: deepagents, OpenAI Agents SDK"; fi
it_done
