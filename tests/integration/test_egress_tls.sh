#!/usr/bin/env bash
# Network allowlist on a remote engine over TCP+TLS (issue 25, finding 3):
# a second engine on this machine that only speaks TLS to sandman
# (tests/integration/tls_engine.sh: its own bridge, iptables off, as many a
# docker-in-docker engine runs), reached through DOCKER_HOST /
# DOCKER_TLS_VERIFY / DOCKER_CERT_PATH. sandman makes the proxy's image
# there from its embedded binary; a stand-in allowed.test is reached through
# the proxy; listeners of the test's own on every address this host holds
# (that engine's bridge among them) get nothing from the sandbox, TCP or
# UDP (tests/integration/egress_probe.sh).
#
# The stand-in shares the proxy's network namespace (the proxy's outbound
# network is none, allowed.test is pinned to 127.0.0.1 and that address is
# listed): containers on one bridge of an engine without iptables cannot
# talk here, the host's bridge netfilter drops what the main engine's rules
# do not accept.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/tls_engine.sh"
source "$(dirname "${BASH_SOURCE[0]}")/egress_probe.sh"

require_engine
INST=$SANDMAN_INSTANCE
IMG=sandman-test/egress-world:$INST
WORK=$(mktemp -d)
REAL_SANDMAN=$SANDMAN
cleanup() {
  egress_listen_stop
  tls_engine_stop
  docker image rm -f "$IMG" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
"$SANDMAN" image build "$SRC_DIR/tests/fixtures/egress-world" --tag "$IMG" >/dev/null
tls_engine_start_minimal
trap cleanup EXIT
check "the stand-in's image loaded into the TLS engine" tls_engine_load_image "$IMG"
TD=(docker -H "$TLS_ENGINE_SOCK")

# ---- the configuration, the certificates ----
printf 'subjectAltName=DNS:allowed.test\n' >"$WORK/ext.cnf"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=sandman test CA" \
  -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=allowed.test -keyout "$WORK/srv.key" -out "$WORK/srv.csr" 2>/dev/null
openssl x509 -req -in "$WORK/srv.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial -days 2 \
  -extfile "$WORK/ext.cnf" -out "$WORK/srv.pem" 2>/dev/null
CA_PEM=$(cat "$WORK/ca.pem")
CFG=$WORK/sandman.yaml
cat >"$CFG" <<EOF
defaults:
  network: allowlist
  image: $IMG
agents:
  coder:
    egress:
      allow: ["allowed.test:443", "127.0.0.1/32"]
egress_proxy:
  network: none
  hosts:
    allowed.test: 127.0.0.1
EOF

# Every sandman call of this test goes to the TLS engine.
cat >"$WORK/sandman-tls" <<EOF
#!/bin/sh
exec env DOCKER_HOST="$TLS_ENGINE_HOST" DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH="$TLS_ENGINE_CLIENT_CERTS" \\
  "$REAL_SANDMAN" "\$@"
EOF
chmod +x "$WORK/sandman-tls"
SANDMAN=$WORK/sandman-tls

# The first call makes the proxy; the stand-in then joins its namespace.
out=$("$SANDMAN" --config "$CFG" run --mode per_run --agent coder --run-id r1 -- echo made 2>&1 || true)
expect_contains "tls: an allowlist sandbox on the TLS engine" "made" "$out"
"${TD[@]}" run -d --name "$INST-allowed" --label "io.sandman.instance=$INST" \
  --network "container:sandman-egress-$INST" -u 0:0 -e NAME=allowed.test -e "CERT_PEM=$(cat "$WORK/srv.pem")" \
  -e "KEY_PEM=$(cat "$WORK/srv.key")" "$IMG" python3 -c "$(cat "$SRC_DIR/tests/fixtures/egress-world/server.py")" \
  >/dev/null
listening() {
  "${TD[@]}" exec "$INST-allowed" python3 -c "import socket; socket.create_connection(('127.0.0.1', 443), timeout=2)" \
    >/dev/null 2>&1
}
for _ in $(seq 1 100); do listening && break; sleep 0.1; done
check "tls: the stand-in listens (in the proxy's namespace)" listening
out=$("$SANDMAN" --config "$CFG" run --mode per_run --agent coder --run-id r1 -e "CA_PEM=$CA_PEM" -- \
  sh -c "printf '%s' \"\$CA_PEM\" > /tmp/ca.pem; curl -fsS --max-time 20 --cacert /tmp/ca.pem https://allowed.test/" 2>&1 || true)
expect_contains "tls: the allowed name through the proxy" "hello from allowed.test" "$out"
out=$("$SANDMAN" --config "$CFG" run --mode per_run --agent coder --run-id r1 -- \
  python3 -c "import socket; socket.create_connection(('127.0.0.1', 443), timeout=5)" 2>&1 || true)
expect_contains "tls: the sandbox's own loopback is not the proxy's" "refused" "$out"

egress_listen_start "$WORK/listen"
egress_probe "tls (runc)" --mode per_run --agent coder --run-id r1
egress_listen_stop

sb=$("${TD[@]}" ps -q --filter "label=io.sandman.instance=$INST" --filter "label=io.sandman.run=r1")
expect_eq "tls: the sandbox has network mode none" "none" "$("${TD[@]}" inspect -f '{{.HostConfig.NetworkMode}}' $sb 2>&1)"
expect_eq "tls: its relay is on the TLS engine, in its network namespace" "container:$("${TD[@]}" inspect -f '{{.Id}}' $sb)" \
  "$("${TD[@]}" inspect -f '{{.HostConfig.NetworkMode}}' "$("${TD[@]}" inspect -f '{{.Name}}' $sb | tr -d /)-egress" 2>&1)"

it_done
