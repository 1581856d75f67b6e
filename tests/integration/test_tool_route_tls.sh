#!/usr/bin/env bash
# The host-tool route through a remote engine over TCP+TLS (the
# docker-in-docker case): test_tool_route.c's test_tls run against a second
# engine that only speaks TLS (tests/integration/tls_engine.sh), reached
# through DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH. The requests
# travel over sandman's own exec stream, never over a network.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/tls_engine.sh"

require_engine
BUILD_DIR=${SANDMAN_BUILD_DIR:-$(dirname "$SANDMAN")}
tls_engine_start_minimal
tls_engine_run "sandman-tools list through the route over TLS" "$BUILD_DIR/tests/it_test_tool_route" \
  ROUTE_IT_ONLY=test_tls
left=$(docker -H "$TLS_ENGINE_SOCK" ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "no containers left in the TLS engine" 0 "$left"
left=$(docker -H "$TLS_ENGINE_SOCK" volume ls -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "no volumes left in the TLS engine" 0 "$left"

it_done
