#!/usr/bin/env bash
# Workspace copy in and out over TCP+TLS: the round trip of
# test_workspace.c run against a second engine that only speaks TLS
# (tests/integration/tls_engine.sh), reached through DOCKER_HOST /
# DOCKER_TLS_VERIFY / DOCKER_CERT_PATH.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/tls_engine.sh"

require_engine
BUILD_DIR=${SANDMAN_BUILD_DIR:-$(dirname "$SANDMAN")}

tls_engine_start_minimal
tls_engine_run "workspace round trip over TLS" "$BUILD_DIR/tests/it_test_workspace" \
  WS_IT_ONLY=test_round_trip
left=$(docker -H "$TLS_ENGINE_SOCK" ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "no containers left in the TLS engine" 0 "$left"
left=$(docker -H "$TLS_ENGINE_SOCK" volume ls -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "no volumes left in the TLS engine" 0 "$left"

it_done
