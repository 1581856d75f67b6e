#!/usr/bin/env bash
# The TypeScript client (clients/typescript) against a runner of its own and
# the real engine: clients/typescript/test/client.test.mjs, files-stream,
# terminals and ports (the ports route and preview URLs) .test.mjs.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_lib.sh"
node_suite_setup
if node_tests client.test.mjs files-stream.test.mjs terminals.test.mjs ports.test.mjs; then it_pass "TypeScript client (files, file events, streamed execute, terminals, ports and previews)"; else it_fail "TypeScript client (files, file events, streamed execute, terminals, ports and previews)"; fi
it_done
