#!/usr/bin/env bash
# Code contexts with the TypeScript client and the OpenAI Agents SDK's code
# interpreter tool (clients/typescript/test/code.test.mjs), against a runner
# of its own with sandman/general and the real engine; no model, no network.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_lib.sh"
. "$(dirname "$0")/code_image.sh"
node_suite_setup
trap code_image_cleanup EXIT
code_image
if node_tests code.test.mjs; then it_pass "TypeScript: runCode, contexts, code interpreter tool"; else it_fail "TypeScript: runCode, contexts, code interpreter tool"; fi
it_done
