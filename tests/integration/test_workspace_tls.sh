#!/usr/bin/env bash
# Workspace copy in and out over TCP+TLS: the round trip of
# test_workspace.c run against a second engine that only speaks TLS
# (tests/integration/tls_engine.sh), reached through DOCKER_HOST /
# DOCKER_TLS_VERIFY / DOCKER_CERT_PATH.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/tls_engine.sh"

require_engine
BUILD_DIR=${SANDMAN_BUILD_DIR:-$(dirname "$SANDMAN")}
WS_TEST="$BUILD_DIR/tests/it_test_workspace"

trap tls_engine_stop EXIT
if ! tls_engine_start; then
  echo "FAIL: the second (TLS) engine did not start" >&2
  exit 1
fi
echo "TLS engine at $TLS_ENGINE_HOST"
if tls_engine_load_image sandman/minimal:latest; then
  it_pass "image loaded into the TLS engine"
else
  it_fail "image loaded into the TLS engine"
fi

if [ -x "$WS_TEST" ]; then
  if env DOCKER_HOST="$TLS_ENGINE_HOST" DOCKER_TLS_VERIFY=1 \
    DOCKER_CERT_PATH="$TLS_ENGINE_CLIENT_CERTS" CI=true WS_IT_ONLY='test_round_trip' "$WS_TEST"; then
    it_pass "workspace round trip over TLS"
  else
    it_fail "workspace round trip over TLS"
  fi
else
  it_fail "workspace test binary $WS_TEST not built"
fi
left=$(docker -H "$TLS_ENGINE_SOCK" ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "no containers left in the TLS engine" 0 "$left"
left=$(docker -H "$TLS_ENGINE_SOCK" volume ls -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "no volumes left in the TLS engine" 0 "$left"

it_done
