#!/usr/bin/env bash
# The TypeScript client's WebSockets to a server in a sandbox
# (portWebSocket, previewWebSocket: clients/typescript/test/ports-ws.test.mjs)
# against a runner of its own and the real engine: a WebSocket echo server
# (ports_server.py) in a network-none sandbox of sandman/general under the
# tests' tag, given in PORTS_IMAGE.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_lib.sh"
node_suite_setup
PORTS_IMAGE=$(it_test_image general | tail -n 1) ||
  { it_fail "the test image general: scripts/test-images.sh failed"; it_done; exit 1; }
export PORTS_IMAGE
if node_tests ports-ws.test.mjs; then it_pass "TypeScript client: WebSockets through the ports route and preview URLs"; else it_fail "TypeScript client: WebSockets through the ports route and preview URLs"; fi
it_done
