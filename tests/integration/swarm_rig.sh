# shellcheck shell=bash
# A real Docker Swarm on this machine, for the swarm backend's tests and
# bench/swarm: N engines (sandman/dind, unprivileged docker-in-docker) in
# containers on a network of their own, joined as one swarm (node 1 the
# manager), each listening on tcp://NODE_IP:2376 with mutual TLS from one CA
# made here, and the sandbox images loaded into every node offline. The
# shared host engine is never put into swarm mode: the swarm lives inside
# the node containers.
#
# Sourced:
#   source tests/integration/swarm_rig.sh
#   trap swarm_rig_down EXIT
#   swarm_rig_up || exit 1
# or run:  tests/integration/swarm_rig.sh up      (prints the rig's env file)
#          tests/integration/swarm_rig.sh down ENV_FILE
#
# Settings (environment, before swarm_rig_up):
#   SWARM_RIG_NODES    how many engines (3)
#   SWARM_RIG_IMAGES   images loaded into every node (sandman/minimal:latest)
#   SWARM_RIG_DIND     the engine image (default: scripts/test-images.sh's
#                      build of images/dind under the tests' own tag, built
#                      on first use; the swarm tests pass the same)
#   SWARM_RIG_DOCKERD_ARGS  the nodes' dockerd flags (--no-new-privileges:
#                      what docs/scale-out.md asks of every node)
#   SANDMAN_INSTANCE   labels everything the rig makes (io.sandman.instance)
#
# After swarm_rig_up (and in $SWARM_RIG_DIR/rig.env):
#   SWARM_RIG_DIR        temporary directory: certificates, logs, rig.env
#   SWARM_RIG_ID         the name prefix of everything made (smrig-...)
#   SWARM_RIG_NETWORK    the nodes' network on the host engine
#   SWARM_RIG_SUBNET     its subnet (a /24)
#   SWARM_RIG_HOST       the manager's engine, tcp://IP:2376
#   SWARM_RIG_CERTS      a DOCKER_CERT_PATH every node accepts (ca.pem, cert.pem, key.pem)
#   SWARM_RIG_NODE_NAMES the nodes' container names (= their swarm host names), space separated
#   SWARM_RIG_NODE_IPS   their addresses, same order
#   SWARM_RIG_OUTSIDE    address of a stand-in for "the outside": a container on
#                        the nodes' network answering "outside" on TCP 8080 and
#                        logging what reaches it (swarm_rig_outside_seen)
# Node labels: every node has node.labels.sandman.rig=1 and
# node.labels.sandman.zone=zN (N its number).

SWARM_RIG_DIR=${SWARM_RIG_DIR:-}

_RIG_OUTSIDE_PY='
import socket, threading
log = open("/tmp/seen.log", "a", buffering=1)
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 53))
    while True:
        data, addr = s.recvfrom(4096)
        log.write("udp53 from %s %d bytes\n" % (addr[0], len(data)))
def tcp():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 8080))
    s.listen(64)
    while True:
        c, addr = s.accept()
        log.write("tcp8080 from %s\n" % addr[0])
        try:
            c.sendall(b"outside\n")
        finally:
            c.close()
threading.Thread(target=udp, daemon=True).start()
tcp()
'

_rig_log() { printf 'swarm-rig: %s\n' "$*" >&2; }

# The CA and certificates: tls_engine.sh's helpers (_tls_ca, _tls_cert).
# shellcheck source=tls_engine.sh
. "$(dirname "${BASH_SOURCE[0]}")/tls_engine.sh"

# _rig_network: a bridge network with a /24 of its own on the host engine.
# A random subnet of $SWARM_RIG_SUBNET_PREFIX.0.0/16 (172.29; a fresh
# engine of scripts/test.sh gives its own range), tried again on a clash.
_rig_network() {
  local try x p=${SWARM_RIG_SUBNET_PREFIX:-172.29}
  for try in $(seq 1 20); do
    x=$((RANDOM % 200 + 20))
    if docker network create --driver bridge --subnet "$p.$x.0/24" \
      --label io.sandman.instance="$SANDMAN_INSTANCE" --label io.sandman.component=swarm-rig \
      --label io.sandman.swarm-rig="$SWARM_RIG_ID" "$SWARM_RIG_NETWORK" >/dev/null 2>"$SWARM_RIG_DIR/net.err"; then
      SWARM_RIG_SUBNET="$p.$x.0/24"
      return 0
    fi
    grep -qi 'overlap' "$SWARM_RIG_DIR/net.err" || break
  done
  _rig_log "could not create the network $SWARM_RIG_NETWORK: $(cat "$SWARM_RIG_DIR/net.err")"
  return 1
}

# _rig_in NODE CMD...: a docker command inside a node (its own unix socket).
_rig_in() { local n=$1; shift; docker exec "$n" docker "$@"; }

swarm_rig_up() {
  local nodes=${SWARM_RIG_NODES:-3} dind=${SWARM_RIG_DIND:-}
  if [ -z "$dind" ]; then
    dind=$("$(dirname "${BASH_SOURCE[0]}")/../../scripts/test-images.sh" ensure dind | tail -n 1) ||
      { echo "swarm rig: could not build the dind image (scripts/test-images.sh ensure dind)" >&2; return 1; }
  fi
  local images=${SWARM_RIG_IMAGES:-sandman/minimal:latest}
  local why="" i
  command -v openssl >/dev/null 2>&1 || why="openssl is not installed"
  docker image inspect "$dind" >/dev/null 2>&1 || why="the engine image $dind is missing (sandman image build dind)"
  if [ -n "$why" ]; then _rig_log "cannot build the rig: $why"; return 1; fi
  : "${SANDMAN_INSTANCE:=default}"
  SWARM_RIG_DIR=$(mktemp -d /tmp/sm-rig.XXXXXX)
  SWARM_RIG_ID=smrig-$(printf '%s' "$SANDMAN_INSTANCE" | tr -c 'a-z0-9' '-' | cut -c1-20)-$$
  SWARM_RIG_NETWORK=$SWARM_RIG_ID
  local d=$SWARM_RIG_DIR
  _rig_network || return 1
  local base=${SWARM_RIG_SUBNET%.0/24}

  # One CA for every node; the client certificate sandman presents to all.
  _tls_ca "$d/ca" "sandman swarm rig CA" && _tls_cert "$d/ca" "$d/client" client sandman-client ||
    { _rig_log "openssl could not make the CA and the client certificate"; return 1; }

  SWARM_RIG_NODE_NAMES=""
  SWARM_RIG_NODE_IPS=""
  local name ip
  for i in $(seq 1 "$nodes"); do
    name=$SWARM_RIG_ID-n$i
    ip=$base.$((10 + i))
    _tls_cert "$d/ca" "$d/node$i/server" server "$name" "IP:$ip,DNS:$name,DNS:localhost,IP:127.0.0.1" ||
      { _rig_log "openssl: server certificate of $name"; return 1; }
    # Unprivileged docker-in-docker (a privileged container cannot start on
    # every engine): compose/dind-ci.unprivileged.yml's settings.
    if ! docker create --name "$name" --hostname "$name" --network "$SWARM_RIG_NETWORK" --ip "$ip" \
      --cap-add ALL --cap-drop SYS_RESOURCE --security-opt seccomp=unconfined \
      --security-opt apparmor=unconfined --device-cgroup-rule 'a *:* rwm' \
      --label io.sandman.instance="$SANDMAN_INSTANCE" --label io.sandman.component=swarm-rig \
      --label io.sandman.swarm-rig="$SWARM_RIG_ID" -e DOCKER_TLS_CERTDIR=/certs \
      "$dind" ${SWARM_RIG_DOCKERD_ARGS---no-new-privileges} >/dev/null 2>"$d/create.err"; then
      _rig_log "could not create $name: $(cat "$d/create.err")"
      return 1
    fi
    docker cp "$d/node$i/." "$name:/certs" >/dev/null &&
      docker start "$name" >/dev/null 2>"$d/start.err" ||
      { _rig_log "could not start $name: $(cat "$d/start.err")"; return 1; }
    SWARM_RIG_NODE_NAMES="$SWARM_RIG_NODE_NAMES${SWARM_RIG_NODE_NAMES:+ }$name"
    SWARM_RIG_NODE_IPS="$SWARM_RIG_NODE_IPS${SWARM_RIG_NODE_IPS:+ }$ip"
  done

  # The stand-in for "the outside": reachable from every node, never from a
  # sandbox. It answers "outside" on TCP 8080 and records every TCP
  # connection and every UDP datagram on 53 (a DNS query) in /tmp/seen.log.
  SWARM_RIG_OUTSIDE=$base.200
  docker run -d --name "$SWARM_RIG_ID-outside" --network "$SWARM_RIG_NETWORK" --ip "$SWARM_RIG_OUTSIDE" \
    --label io.sandman.instance="$SANDMAN_INSTANCE" --label io.sandman.component=swarm-rig \
    --label io.sandman.swarm-rig="$SWARM_RIG_ID" --entrypoint python3 "$dind" -c "$_RIG_OUTSIDE_PY" \
    >/dev/null 2>"$d/outside.err" ||
    { _rig_log "could not start the outside stand-in: $(cat "$d/outside.err")"; return 1; }

  # Every engine up (its TLS port included).
  local n ok
  for n in $SWARM_RIG_NODE_NAMES; do
    ok=""
    for i in $(seq 1 240); do
      if _rig_in "$n" version >/dev/null 2>&1; then ok=1; break; fi
      [ "$(docker inspect -f '{{.State.Running}}' "$n" 2>/dev/null)" = true ] || break
      sleep 0.5
    done
    if [ -z "$ok" ]; then
      _rig_log "the engine in $n did not come up; its log says:"
      docker logs --tail 20 "$n" >&2 2>&1
      return 1
    fi
    case "$(docker logs "$n" 2>&1)" in
      *'using the server certificates'*) ;;
      *)
        _rig_log "$n made certificates of its own instead of using the rig's: $dind predates" \
          "images/dind's support for them (rebuild it: sandman image build dind)"
        return 1
        ;;
    esac
  done

  # The swarm: node 1 manages, the others join as workers. Every sandbox with
  # network none has an overlay network of its own: /26 subnets give 1024.
  local first_ip=${SWARM_RIG_NODE_IPS%% *} first=${SWARM_RIG_NODE_NAMES%% *} token
  _rig_in "$first" swarm init --advertise-addr "$first_ip" --listen-addr "$first_ip:2377" \
    --default-addr-pool 10.232.0.0/16 --default-addr-pool-mask-length 26 >/dev/null 2>"$d/init.err" ||
    { _rig_log "swarm init failed: $(cat "$d/init.err")"; return 1; }
  token=$(_rig_in "$first" swarm join-token -q worker) || { _rig_log "no join token"; return 1; }
  local k=0
  set -- $SWARM_RIG_NODE_IPS
  for n in $SWARM_RIG_NODE_NAMES; do
    k=$((k + 1))
    if [ "$n" != "$first" ]; then
      _rig_in "$n" swarm join --token "$token" --advertise-addr "$(eval echo "\${$k}")" \
        "$first_ip:2377" >/dev/null 2>"$d/join.err" ||
        { _rig_log "$n could not join the swarm: $(cat "$d/join.err")"; return 1; }
    fi
    _rig_in "$first" node update --label-add sandman.rig=1 --label-add "sandman.zone=z$k" "$n" \
      >/dev/null 2>"$d/label.err" || { _rig_log "node labels of $n: $(cat "$d/label.err")"; return 1; }
  done

  # The sandbox images, offline: saved once from the host engine, loaded into every node.
  local img f
  for img in $images; do
    f="$d/image-$(printf '%s' "$img" | tr -c 'a-zA-Z0-9' '_').tar"
    docker save "$img" >"$f" || { _rig_log "could not save $img from the host engine"; return 1; }
    for n in $SWARM_RIG_NODE_NAMES; do
      docker exec -i "$n" docker load <"$f" >/dev/null 2>"$d/load.err" ||
        { _rig_log "could not load $img into $n: $(cat "$d/load.err")"; return 1; }
    done
    rm -f "$f"
  done

  SWARM_RIG_HOST=tcp://$first_ip:2376
  SWARM_RIG_CERTS=$d/client
  export SWARM_RIG_DIR SWARM_RIG_ID SWARM_RIG_NETWORK SWARM_RIG_SUBNET SWARM_RIG_HOST \
    SWARM_RIG_CERTS SWARM_RIG_NODE_NAMES SWARM_RIG_NODE_IPS SWARM_RIG_OUTSIDE
  {
    for v in SWARM_RIG_DIR SWARM_RIG_ID SWARM_RIG_NETWORK SWARM_RIG_SUBNET SWARM_RIG_HOST \
      SWARM_RIG_CERTS SWARM_RIG_NODE_NAMES SWARM_RIG_NODE_IPS SWARM_RIG_OUTSIDE; do
      printf '%s=%q\n' "$v" "${!v}"
    done
  } >"$d/rig.env"
  # Every node ready in the manager's view.
  for i in $(seq 1 120); do
    [ "$(_rig_in "$first" node ls --format '{{.Status}}' 2>/dev/null | grep -c '^Ready$')" = "$nodes" ] && return 0
    sleep 0.5
  done
  _rig_log "not every node is ready: $(_rig_in "$first" node ls 2>&1)"
  return 1
}

# swarm_rig_outside_seen: what reached the outside stand-in, one line each.
swarm_rig_outside_seen() { docker exec "$SWARM_RIG_ID-outside" cat /tmp/seen.log 2>/dev/null || true; }

# swarm_rig_node_stop NAME: the node's engine dies at once (its containers with it).
swarm_rig_node_stop() { docker kill "$1" >/dev/null; }

# swarm_rig_down: removes the nodes (their data volumes too), the stand-in,
# the network and the directory: everything labelled with this rig's id.
swarm_rig_down() {
  [ -n "${SWARM_RIG_ID:-}" ] || return 0
  local ids
  ids=$(docker ps -aq --filter "label=io.sandman.swarm-rig=$SWARM_RIG_ID" 2>/dev/null || true)
  # shellcheck disable=SC2086
  [ -n "$ids" ] && docker rm -fv $ids >/dev/null 2>&1
  docker network rm "$SWARM_RIG_NETWORK" >/dev/null 2>&1 || true
  [ -n "${SWARM_RIG_DIR:-}" ] && rm -rf "$SWARM_RIG_DIR"
  SWARM_RIG_ID=
  SWARM_RIG_DIR=
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    up)
      swarm_rig_up || { swarm_rig_down; exit 1; }
      cat "$SWARM_RIG_DIR/rig.env"
      ;;
    down)
      [ -n "${2:-}" ] && [ -f "$2" ] || { echo "usage: $0 down ENV_FILE" >&2; exit 2; }
      # shellcheck disable=SC1090
      . "$2"
      swarm_rig_down
      ;;
    *) echo "usage: $0 up | down ENV_FILE" >&2; exit 2 ;;
  esac
fi
