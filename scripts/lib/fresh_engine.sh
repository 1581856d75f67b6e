# shellcheck shell=bash
# A brand-new Docker Engine for one test run (scripts/test.sh --fresh-engine,
# which CI uses): nothing in it but what scripts/setup.sh and the test run
# put there, so a test that needs something an earlier run or a person left
# behind fails. Sourced after common.sh; needs root and iproute2 (dockerd
# and iptables come with docker.io, which set-up installs).
#
# fresh_engine_prepare makes its place and exports what scripts/setup.sh
# reads to start it: DOCKER_HOST (its own socket), SANDMAN_DOCKERD,
# SANDMAN_DOCKERD_ARGS, SANDMAN_DOCKERD_LOG, SANDMAN_DOCKERD_PIDFILE and
# SANDMAN_DOCKER_DAEMON_JSON (its own daemon.json, where set-up registers
# gVisor as on any new machine). Once set-up has started it,
# fresh_engine_open_to_host lets the host reach its containers.
# fresh_engine_stop stops it and removes everything it had: call it on exit.
#
# It runs in a network namespace of its own (ip netns), so its bridges,
# docker0 and iptables rules are its own and the machine's engine never
# sees them (a second dockerd in the host's namespace either rewrites the
# engine's iptables chains or, with --iptables=false, loses the isolation
# the tests check). Its networks take 10.X.0.0/16 (X free on this machine),
# routed from the host through a veth pair, so the host reaches the engine's
# containers by address as it reaches its own engine's (the swarm tests do);
# nothing is routed further out. The data root is a fresh folder under
# $SANDMAN_FRESH_ENGINE_DIR (/var/tmp).

FRESH_DIR=""
FRESH_NS=""
FRESH_NET=""
FRESH_VETH=""

# A 10.X.0.0/16 no route or address of this machine uses, and its names.
_fresh_pick_net() {
  local n x
  for n in $(seq 0 49); do
    x=$((200 + (RANDOM + n) % 50))
    ip -4 route show | grep -q "^10\.$x\." && continue
    ip -4 addr show | grep -q "inet 10\.$x\." && continue
    ip netns list 2>/dev/null | grep -qw "smfresh$x" && continue
    FRESH_NET=10.$x
    FRESH_NS=smfresh$x
    FRESH_VETH=smf$x
    return 0
  done
  return 1
}

# A run killed before its exit trap (a session ended, SIGKILL) leaves its
# folder, namespace and route: removed here when its dockerd is gone, so
# the next run neither trips on them nor leaves the machine filling up
# (a folder younger than 5 minutes may be another run's engine starting).
_fresh_sweep_stale() {
  local dir pid x
  for dir in "${SANDMAN_FRESH_ENGINE_DIR:-/var/tmp}"/sm-fresh.*; do
    [ -d "$dir" ] || continue
    # Another run's engine may be starting (no pid yet): only old folders.
    [ -n "$(find "$dir" -maxdepth 0 -mmin +5 2>/dev/null)" ] || continue
    pid=$(cat "$dir/docker.pid" 2>/dev/null || true)
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ] && continue
    x=$(cat "$dir/net" 2>/dev/null || true)
    case "$x" in '' | *[!0-9]*) x="" ;; esac
    (
      FRESH_DIR=$dir
      if [ -n "$x" ]; then FRESH_NS=smfresh$x FRESH_NET=10.$x FRESH_VETH=smf$x; fi
      say fresh-engine "removing what a killed earlier run left: $dir${x:+ (namespace smfresh$x)}"
      fresh_engine_stop
    ) || true
  done
}

fresh_engine_prepare() {
  local c
  sm_is_root || die "--fresh-engine starts a second dockerd: run as root"
  for c in ip nsenter unshare; do
    command -v "$c" >/dev/null || die "--fresh-engine needs $c (apt-get install iproute2 util-linux)"
  done
  _fresh_sweep_stale
  _fresh_pick_net || die "no free 10.X.0.0/16 (X in 200-249) for the fresh engine's networks"
  # Short: the unix sockets under it must fit in 108 bytes.
  FRESH_DIR=$(mktemp -d "${SANDMAN_FRESH_ENGINE_DIR:-/var/tmp}/sm-fresh.XXXXXX")
  # X of 10.X.0.0/16, for the sweep of a later run should this one be killed.
  echo "${FRESH_NET#10.}" >"$FRESH_DIR/net"
  local h=${FRESH_VETH}h n=${FRESH_VETH}n
  ip netns add "$FRESH_NS" &&
    ip link add "$h" type veth peer name "$n" &&
    ip link set "$n" netns "$FRESH_NS" &&
    ip addr add "$FRESH_NET.254.1/30" dev "$h" && ip link set "$h" up &&
    ip -n "$FRESH_NS" addr add "$FRESH_NET.254.2/30" dev "$n" &&
    ip -n "$FRESH_NS" link set "$n" up && ip -n "$FRESH_NS" link set lo up &&
    ip -n "$FRESH_NS" route add default via "$FRESH_NET.254.1" &&
    ip route add "$FRESH_NET.0.0/16" via "$FRESH_NET.254.2" ||
    die "could not make the fresh engine's network namespace $FRESH_NS"

  export DOCKER_HOST="unix://$FRESH_DIR/docker.sock"
  unset DOCKER_TLS_VERIFY DOCKER_TLS DOCKER_CERT_PATH DOCKER_CONTEXT
  export SANDMAN_DOCKERD="nsenter --net=/run/netns/$FRESH_NS unshare --mount --propagation slave
    bash $SM_ROOT/scripts/lib/fresh-dockerd.sh $FRESH_DIR"
  export SANDMAN_DOCKERD_ARGS="--config-file $FRESH_DIR/daemon.json --data-root $FRESH_DIR/data
    --exec-root $FRESH_DIR/exec --pidfile $FRESH_DIR/docker.pid --bip $FRESH_NET.255.1/24
    --default-address-pool base=$FRESH_NET.0.0/16,size=24 --cgroup-parent sandman-$FRESH_NS"
  export SANDMAN_DOCKERD_LOG=$FRESH_DIR/dockerd.log
  export SANDMAN_DOCKERD_PIDFILE=$FRESH_DIR/docker.pid
  export SANDMAN_DOCKER_DAEMON_JSON=$FRESH_DIR/daemon.json
  # engine_heal_bridge looks for its bridge there.
  export SM_ENGINE_NETNS=$FRESH_NS
  # The swarm rig's network, in the range the host routes to this engine.
  export SWARM_RIG_SUBNET_PREFIX=$FRESH_NET
  say fresh-engine "a new engine for this run: data root $FRESH_DIR/data, socket $DOCKER_HOST, network namespace $FRESH_NS ($FRESH_NET.0.0/16)"
}

# The engine's FORWARD policy is DROP with only its published ports open:
# connections the host opens to its containers (as to the machine's own
# engine's, where they are not forwarded) are let in, in DOCKER-USER, the
# chain the engine leaves to its user (it makes it when it starts).
fresh_engine_open_to_host() {
  ip netns exec "$FRESH_NS" iptables -I DOCKER-USER 1 -i "${FRESH_VETH}n" -j ACCEPT ||
    die "could not open the fresh engine's namespace $FRESH_NS to the host (iptables)"
}

# Stops the engine (its containers with it), then removes its namespace,
# route, folder and cgroups. Safe to call twice, or before it started.
fresh_engine_stop() {
  [ -n "$FRESH_DIR" ] || return 0
  # Clean up as much as can be, whatever fails (an exit trap under set -e).
  local -
  set +e
  local pid="" i
  [ -r "$FRESH_DIR/docker.pid" ] && pid=$(cat "$FRESH_DIR/docker.pid" 2>/dev/null)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
    kill -TERM "$pid" 2>/dev/null
    # dockerd stops its containers first (up to --shutdown-timeout, 15 s, each).
    for i in $(seq 1 600); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && { warn "the fresh engine ($pid) did not stop in 60 s: killed"; kill -KILL "$pid"; }
  fi
  # Whatever is left in its namespace (shims, containers) is this run's.
  if [ -n "$FRESH_NS" ] && ip netns list 2>/dev/null | grep -qw "$FRESH_NS"; then
    for pid in $(ip netns pids "$FRESH_NS" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$FRESH_NS" 2>/dev/null || warn "could not remove the network namespace $FRESH_NS"
  fi
  ip route del "$FRESH_NET.0.0/16" 2>/dev/null
  ip link del "${FRESH_VETH}h" 2>/dev/null
    # dockerd ran in a mount namespace of its own (fresh-dockerd.sh): its
  # mounts went with it; none is left under the folder in ours.
  if grep -q " $FRESH_DIR/" /proc/self/mounts; then
    warn "mounts are left under $FRESH_DIR; not removing it"
  else
    rm -rf --one-file-system "$FRESH_DIR"
  fi
  local cg
  for cg in /sys/fs/cgroup/*/"sandman-$FRESH_NS" /sys/fs/cgroup/"sandman-$FRESH_NS"; do
    [ -d "$cg" ] || continue
    # Containers of an engine that was killed outlive it: theirs to end.
    [ -n "$FRESH_NS" ] && find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null |
      while read -r pid; do kill -KILL "$pid" 2>/dev/null; done
    for i in $(seq 1 50); do
      find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
      [ -d "$cg" ] || break
      sleep 0.1
    done
  done
  say fresh-engine "stopped and removed (data root, namespace $FRESH_NS, route $FRESH_NET.0.0/16)"
  FRESH_DIR=""
}
