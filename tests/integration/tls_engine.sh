# Sourceable helper: a SECOND Docker engine that listens on
# tcp://127.0.0.1:<free port> with --tlsverify (and on its own unix socket),
# with its own CA, server and client certificates made by openssl.
#
#   source tests/integration/tls_engine.sh
#   trap tls_engine_stop EXIT
#   tls_engine_start || exit 1      # needs root, dockerd, openssl
#   DOCKER_HOST=$TLS_ENGINE_HOST DOCKER_TLS_VERIFY=1 \
#     DOCKER_CERT_PATH=$TLS_ENGINE_CLIENT_CERTS sandman version --json
#   tls_engine_load_image sandman/minimal:latest   # from the main engine
#
# After tls_engine_start:
#   TLS_ENGINE_DIR           the temporary directory holding everything
#   TLS_ENGINE_PORT          the TCP port
#   TLS_ENGINE_HOST          tcp://127.0.0.1:$TLS_ENGINE_PORT
#   TLS_ENGINE_SOCK          unix://$TLS_ENGINE_DIR/docker.sock (no TLS)
#   TLS_ENGINE_CLIENT_CERTS  a DOCKER_CERT_PATH that the engine accepts
#   TLS_ENGINE_OTHER_CERTS   a DOCKER_CERT_PATH whose client certificate
#                            comes from another CA (the engine refuses it)
#   TLS_ENGINE_LOG           the engine's log
# On failure tls_engine_start prints why on stderr and returns non-zero.

TLS_ENGINE_DIR=${TLS_ENGINE_DIR:-}
TLS_ENGINE_PID=

# _tls_ca DIR NAME: a self-signed CA in DIR/ca.pem, DIR/ca-key.pem.
_tls_ca() {
  mkdir -p "$1"
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 2 \
    -keyout "$1/ca-key.pem" -out "$1/ca.pem" -subj "/CN=$2" >/dev/null 2>&1
}

# _tls_cert CA_DIR OUT_DIR KIND(server|client) CN [SAN]: OUT_DIR/{cert,key}.pem
# signed by the CA, and the CA's ca.pem next to them. A server's names are
# SAN (default IP:127.0.0.1,DNS:localhost).
_tls_cert() {
  local ca=$1 out=$2 kind=$3 cn=$4 san=${5:-IP:127.0.0.1,DNS:localhost} ext
  mkdir -p "$out"
  ext="$out/ext.cnf"
  if [ "$kind" = server ]; then
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" >"$ext"
  else
    printf 'extendedKeyUsage=clientAuth\n' >"$ext"
  fi
  openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$out/key.pem" -out "$out/req.csr" \
    -subj "/CN=$cn" >/dev/null 2>&1 &&
    openssl x509 -req -in "$out/req.csr" -CA "$ca/ca.pem" -CAkey "$ca/ca-key.pem" \
      -CAcreateserial -days 2 -sha256 -extfile "$ext" -out "$out/cert.pem" >/dev/null 2>&1 &&
    cp "$ca/ca.pem" "$out/ca.pem" && rm -f "$out/req.csr" "$ext"
}

_tls_free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
  else
    echo $((20000 + RANDOM % 30000))
  fi
}

tls_engine_start() {
  local why=""
  command -v dockerd >/dev/null 2>&1 || why="dockerd is not installed"
  command -v openssl >/dev/null 2>&1 || why="openssl is not installed"
  [ "$(id -u)" = 0 ] || why="a second dockerd needs root (running as uid $(id -u))"
  if [ -n "$why" ]; then
    echo "tls_engine: cannot start a second engine: $why" >&2
    return 1
  fi
  # Short path: the unix sockets under it must fit in 108 bytes.
  TLS_ENGINE_DIR=$(mktemp -d /tmp/sm-tls.XXXXXX)
  local d=$TLS_ENGINE_DIR
  _tls_ca "$d/ca" "sandman test CA" &&
    _tls_cert "$d/ca" "$d/server" server localhost &&
    _tls_cert "$d/ca" "$d/client" client sandman-client &&
    _tls_ca "$d/other-ca" "another CA" &&
    _tls_cert "$d/other-ca" "$d/other" client intruder || {
    echo "tls_engine: openssl could not make the certificates" >&2
    return 1
  }
  # The client that holds the other CA's certificate still trusts the
  # engine's CA: only its own certificate is wrong.
  cp "$d/ca/ca.pem" "$d/other/ca.pem"
  echo '{}' >"$d/daemon.json"
  TLS_ENGINE_PORT=$(_tls_free_port)
  TLS_ENGINE_HOST="tcp://127.0.0.1:$TLS_ENGINE_PORT"
  TLS_ENGINE_SOCK="unix://$d/docker.sock"
  TLS_ENGINE_CLIENT_CERTS="$d/client"
  TLS_ENGINE_OTHER_CERTS="$d/other"
  TLS_ENGINE_LOG="$d/dockerd.log"
  export TLS_ENGINE_DIR TLS_ENGINE_PORT TLS_ENGINE_HOST TLS_ENGINE_SOCK \
    TLS_ENGINE_CLIENT_CERTS TLS_ENGINE_OTHER_CERTS TLS_ENGINE_LOG
  # Its own bridge: a second engine started with --bridge=none deletes the
  # host engine's docker0 as it starts (seen on 20.10), breaking every
  # container of the main engine that uses the default network. No traffic
  # crosses this bridge: the tests' containers use network none.
  TLS_ENGINE_BRIDGE="smtls$((RANDOM % 10000))"
  export TLS_ENGINE_BRIDGE
  ip link add "$TLS_ENGINE_BRIDGE" type bridge &&
    ip addr add 172.31.254.1/24 dev "$TLS_ENGINE_BRIDGE" &&
    ip link set "$TLS_ENGINE_BRIDGE" up || {
    echo "tls_engine: could not create the bridge $TLS_ENGINE_BRIDGE (iproute2)" >&2
    return 1
  }
  dockerd --config-file "$d/daemon.json" \
    --data-root "$d/data" --exec-root "$d/exec" --pidfile "$d/docker.pid" \
    -H "$TLS_ENGINE_SOCK" -H "$TLS_ENGINE_HOST" \
    --tlsverify --tlscacert "$d/ca/ca.pem" --tlscert "$d/server/cert.pem" \
    --tlskey "$d/server/key.pem" \
    --bridge="$TLS_ENGINE_BRIDGE" --iptables=false --ip-masq=false --cgroup-parent "sandman-tls-$$" \
    >"$TLS_ENGINE_LOG" 2>&1 &
  TLS_ENGINE_PID=$!
  local i
  for i in $(seq 1 120); do
    if docker -H "$TLS_ENGINE_SOCK" version >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$TLS_ENGINE_PID" 2>/dev/null; then
      echo "tls_engine: the second dockerd exited; its log says:" >&2
      tail -n 20 "$TLS_ENGINE_LOG" >&2
      return 1
    fi
    sleep 0.5
  done
  echo "tls_engine: the second dockerd did not answer within 60 s; its log says:" >&2
  tail -n 20 "$TLS_ENGINE_LOG" >&2
  return 1
}

# tls_engine_load_image REF: copies an image from the main engine.
tls_engine_load_image() {
  docker save "$1" | docker -H "$TLS_ENGINE_SOCK" load >/dev/null
}

# For a test that runs one of its C tests against the TLS engine: starts it
# (stopped on exit) with sandman/minimal loaded, or fails the test.
tls_engine_start_minimal() {
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
}

# tls_engine_run WHAT BINARY VAR=VALUE...: runs the C test BINARY (with the
# assignments, CI=true) against the TLS engine: a pass or a fail named WHAT.
tls_engine_run() {
  local what=$1 bin=$2
  shift 2
  if [ ! -x "$bin" ]; then
    it_fail "test binary $bin not built"
  elif env DOCKER_HOST="$TLS_ENGINE_HOST" DOCKER_TLS_VERIFY=1 \
    DOCKER_CERT_PATH="$TLS_ENGINE_CLIENT_CERTS" CI=true "$@" "$bin"; then
    it_pass "$what"
  else
    it_fail "$what"
  fi
}

tls_engine_stop() {
  local d=$TLS_ENGINE_DIR
  [ -n "$d" ] && [ -d "$d" ] || return 0
  if [ -n "$TLS_ENGINE_PID" ] && kill -0 "$TLS_ENGINE_PID" 2>/dev/null; then
    docker -H "$TLS_ENGINE_SOCK" rm -f $(docker -H "$TLS_ENGINE_SOCK" ps -aq 2>/dev/null) \
      >/dev/null 2>&1 || true
    kill -TERM "$TLS_ENGINE_PID" 2>/dev/null || true
    local i
    for i in $(seq 1 60); do
      kill -0 "$TLS_ENGINE_PID" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "$TLS_ENGINE_PID" 2>/dev/null || true
    wait "$TLS_ENGINE_PID" 2>/dev/null || true
  fi
  # Anything still mounted below the directory (overlay layers, shm).
  local m
  for m in $(awk -v d="$d" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf "$d"
  [ -n "${TLS_ENGINE_BRIDGE:-}" ] && ip link del "$TLS_ENGINE_BRIDGE" 2>/dev/null || true
  TLS_ENGINE_DIR=
  TLS_ENGINE_PID=
}
