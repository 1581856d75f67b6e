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

# The broker behind the route over TLS (the same list and call as
# test_host_tools.sh): a host tool reads a file only this host has.
BK=$TLS_ENGINE_DIR/broker
mkdir -p "$BK"
echo "the TLS host's words $$" >"$BK/host-file"
cat >"$BK/sandman.yaml" <<EOF
defaults: {network: none, image: "sandman/minimal:latest"}
broker:
  tools:
    read_host:
      input_schema: {type: object, properties: {path: {type: string}}, required: [path]}
      argv: [cat, "{path}"]
agents: {coder: {broker: {allow: [read_host]}}}
EOF
tls_sandman() {
  env DOCKER_HOST="$TLS_ENGINE_HOST" DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH="$TLS_ENGINE_CLIENT_CERTS" \
    "$SANDMAN" --config "$BK/sandman.yaml" run --agent coder --tool shell --mode per_tool -- "$@" 2>&1 || true
}
expect_contains "broker over TLS: the agent's host tool is listed" "read_host" "$(tls_sandman sandman-tools list)"
expect_eq "broker over TLS: a host tool reads the host's file" "the TLS host's words $$" \
  "$(tls_sandman sandman-tools call read_host "path=$BK/host-file")"
left=$(docker -H "$TLS_ENGINE_SOCK" ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "no containers left in the TLS engine" 0 "$left"
left=$(docker -H "$TLS_ENGINE_SOCK" volume ls -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "no volumes left in the TLS engine" 0 "$left"

it_done
