#!/usr/bin/env bash
# The engine client over TLS: a second engine with --tlsverify on
# 127.0.0.1, reached through DOCKER_HOST / DOCKER_TLS_VERIFY /
# DOCKER_CERT_PATH exactly as the docker CLI reads them. A client
# certificate from another CA is refused; exec with stdin works over TLS
# (the stdin half-close is a TLS close_notify).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/tls_engine.sh"

require_engine
BUILD_DIR=${SANDMAN_BUILD_DIR:-$(dirname "$SANDMAN")}
EXEC_TEST="$BUILD_DIR/tests/it_test_engine_exec_env"
AGENT_TEST="$BUILD_DIR/tests/it_test_agent"

trap tls_engine_stop EXIT
if ! tls_engine_start; then
  # The main engine answers, so a second one should start here too.
  echo "FAIL: the second (TLS) engine did not start" >&2
  exit 1
fi
echo "second engine at $TLS_ENGINE_HOST (dir $TLS_ENGINE_DIR)"

# The engine really is TLS-only on that port: a plain request is refused.
plain=$(curl -s --max-time 10 "http://127.0.0.1:$TLS_ENGINE_PORT/_ping" || true)
expect_contains "plain HTTP refused by the TLS port" "HTTPS" "$plain"

tls_env() { env DOCKER_HOST="$TLS_ENGINE_HOST" DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH="$1" "${@:2}"; }

out=$(tls_env "$TLS_ENGINE_CLIENT_CERTS" "$SANDMAN" version --json)
echo "$out"
expect_contains "version over TLS reports the API" '"api_version":"1.41"' "$(echo "$out" | tr -d ' \n')"
expect_contains "version over TLS names the host" "\"host\":\"$TLS_ENGINE_HOST\"" "$(echo "$out" | tr -d ' \n')"
expect_not_contains "no error over TLS" '"error"' "$out"

# --host wins over DOCKER_HOST; the TLS settings still come from the env.
out=$(env DOCKER_HOST=unix:///nonexistent.sock DOCKER_TLS_VERIFY=1 \
  DOCKER_CERT_PATH="$TLS_ENGINE_CLIENT_CERTS" "$SANDMAN" --host "$TLS_ENGINE_HOST" version --json)
expect_contains "--host over DOCKER_HOST" '"api_version":"1.41"' "$(echo "$out" | tr -d ' \n')"

# A client certificate from another CA: refused, with a clear error.
out=$(tls_env "$TLS_ENGINE_OTHER_CERTS" "$SANDMAN" version --json || true)
echo "$out"
expect_contains "other CA's client certificate refused" '"error"' "$out"
expect_contains "refusal is reported as TLS" "TLS" "$out"
expect_not_contains "no API version with the other CA" '"api_version":"1.41"' "$(echo "$out" | tr -d ' \n')"

# A client that does not trust the engine's CA refuses the engine.
mkdir -p "$TLS_ENGINE_DIR/wrong-ca"
cp "$TLS_ENGINE_DIR/other-ca/ca.pem" "$TLS_ENGINE_DIR/wrong-ca/ca.pem"
cp "$TLS_ENGINE_CLIENT_CERTS/cert.pem" "$TLS_ENGINE_CLIENT_CERTS/key.pem" "$TLS_ENGINE_DIR/wrong-ca/"
out=$(tls_env "$TLS_ENGINE_DIR/wrong-ca" "$SANDMAN" version --json || true)
expect_contains "engine certificate not trusted" '"error"' "$out"
expect_contains "untrusted engine reported as TLS" "TLS" "$out"

# Missing certificate files are named.
out=$(tls_env "$TLS_ENGINE_DIR/no-such-dir" "$SANDMAN" version --json || true)
expect_contains "missing ca.pem is named" "$TLS_ENGINE_DIR/no-such-dir/ca.pem" "$out"

# Without TLS the engine answers 400: the engine's message is passed on.
out=$(env DOCKER_HOST="$TLS_ENGINE_HOST" DOCKER_TLS_VERIFY= "$SANDMAN" version --json || true)
expect_contains "plain client against the TLS port fails" '"error"' "$out"

# Exec with stdin over TLS, through the library, in the second engine.
if tls_engine_load_image "$( [ -n "${ITEST_IMAGE:-}" ] && echo "$ITEST_IMAGE" || echo sandman/minimal:latest)"; then
  it_pass "image loaded into the TLS engine"
else
  it_fail "image loaded into the TLS engine"
fi
if [ -x "$EXEC_TEST" ]; then
  if tls_env "$TLS_ENGINE_CLIENT_CERTS" env SANDMAN_EXPECT_TLS=1 CI=true "$EXEC_TEST"; then
    it_pass "exec with stdin, stdout/stderr, exit codes and archive over TLS"
  else
    it_fail "exec with stdin, stdout/stderr, exit codes and archive over TLS"
  fi
else
  it_fail "exec test binary $EXEC_TEST not built"
fi
# The in-sandbox agent over TLS: its session is a hijacked exec stream kept
# open (TLS both ways); the agent test's differential cases in this engine.
if [ -x "$AGENT_TEST" ]; then
  if tls_env "$TLS_ENGINE_CLIENT_CERTS" env SANDMAN_AGENT_TEST_NO_GVISOR=1 CI=true "$AGENT_TEST"; then
    it_pass "agent sessions over TLS (differential against engine execs)"
  else
    it_fail "agent sessions over TLS (differential against engine execs)"
  fi
else
  it_fail "agent test binary $AGENT_TEST not built"
fi
# The engine's own view: nothing of ours left behind in it.
left=$(docker -H "$TLS_ENGINE_SOCK" ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "no containers left in the TLS engine" 0 "$left"

it_done
