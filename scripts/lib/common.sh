# shellcheck shell=bash
# Shared by scripts/*.sh (sourced, never run). Bash only.
#
# The engine address is read the way the docker CLI reads it: DOCKER_HOST
# (unix:// or tcp://), DOCKER_TLS_VERIFY / DOCKER_TLS and DOCKER_CERT_PATH.

SM_ROOT=${SM_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
SM_DEFAULT_SOCK=/var/run/docker.sock
# What scripts/setup.sh builds: the only images a test may use without
# building them itself or through scripts/test-images.sh.
SM_SETUP_IMAGES="sandman/minimal:latest"
SM_SCRIPT=${SM_SCRIPT:-$(basename "$0" .sh)}

# The Debian python3, not a user's pyenv/venv shim, so that set-up works on a
# fresh machine whatever PATH says.
if [ -x /usr/bin/python3 ]; then SM_PY=/usr/bin/python3; else SM_PY=python3; fi

# say STEP MESSAGE: one line per step, the form the user reads.
say() { local step=$1; shift; printf '%s: %s\n' "$step" "$*"; }
warn() { printf '%s: warning: %s\n' "$SM_SCRIPT" "$*" >&2; }
die() { printf '%s: error: %s\n' "$SM_SCRIPT" "$*" >&2; exit 1; }

sm_is_root() { [ "$(id -u)" -eq 0 ]; }

engine_host() { printf '%s\n' "${DOCKER_HOST:-unix://$SM_DEFAULT_SOCK}"; }

# The socket path when the engine address is a unix socket, else nothing.
engine_socket() {
  local h
  h=$(engine_host)
  case "$h" in
    unix://*) printf '%s\n' "${h#unix://}" ;;
    /*) printf '%s\n' "$h" ;;
    *) return 1 ;;
  esac
}

engine_is_local() { engine_socket >/dev/null; }

# engine_curl PATH [CURL ARGS...]: one request to the engine, on whatever
# transport DOCKER_HOST names. Prints the body; curl's status is returned.
engine_curl() {
  local path=$1; shift
  local h sock certs hostport
  h=$(engine_host)
  certs=${DOCKER_CERT_PATH:-$HOME/.docker}
  case "$h" in
    unix://* | /*)
      sock=${h#unix://}
      curl -sS --unix-socket "$sock" "$@" "http://localhost$path"
      ;;
    tcp://*)
      hostport=${h#tcp://}
      hostport=${hostport%%/*}
      if [ -n "${DOCKER_TLS_VERIFY:-}" ]; then
        case "$hostport" in *:*) ;; *) hostport=$hostport:2376 ;; esac
        curl -sS --cacert "$certs/ca.pem" --cert "$certs/cert.pem" --key "$certs/key.pem" \
          "$@" "https://$hostport$path"
      elif [ -n "${DOCKER_TLS:-}" ]; then
        case "$hostport" in *:*) ;; *) hostport=$hostport:2376 ;; esac
        local client=()
        [ -f "$certs/cert.pem" ] && client=(--cert "$certs/cert.pem" --key "$certs/key.pem")
        curl -sS -k "${client[@]}" "$@" "https://$hostport$path"
      else
        case "$hostport" in *:*) ;; *) hostport=$hostport:2375 ;; esac
        curl -sS "$@" "http://$hostport$path"
      fi
      ;;
    *)
      echo "unsupported engine address '$h' (use unix:// or tcp://)" >&2
      return 2
      ;;
  esac
}

# True when the engine answers /_ping with OK.
engine_ping() {
  local out
  out=$(engine_curl /_ping --max-time 5 2>/dev/null) || return 1
  [ "$out" = "OK" ]
}

# engine_json PATH EXPR: evaluates a Python expression over the engine's JSON
# answer `d`, e.g. engine_json /version 'd["Version"]'.
engine_json() {
  local body
  body=$(engine_curl "$1" --max-time 10 2>/dev/null) || return 1
  printf '%s' "$body" | "$SM_PY" -c '
import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1])
print(" ".join(v) if isinstance(v, (list, tuple)) else v)' "$2" 2>/dev/null
}

# sha256 of a file, hex only.
sm_sha256() { sha256sum "$1" | cut -d' ' -f1; }

# elapsed time since SECONDS-style start, e.g. "3s" or "2m05s".
sm_elapsed() {
  local s=$(($(date +%s) - $1))
  if [ "$s" -ge 60 ]; then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

# A dockerd started with --bridge=none deletes the host's docker0 when it
# starts (a second, private engine, as some tests start, does exactly that),
# and the system engine then fails every container start on the default
# bridge ("could not find bridge docker0"). Recreates the bridge the local
# engine's `bridge` network names, with its gateway address. Prints what it
# did; nothing when the bridge is there or the engine is not local.
engine_heal_bridge() {
  engine_is_local && sm_is_root && command -v ip >/dev/null || return 0
  # An engine in a network namespace of its own (scripts/test.sh
  # --fresh-engine) has its bridge there.
  local ipc=(ip)
  [ -n "${SM_ENGINE_NETNS:-}" ] && ipc=(ip -n "$SM_ENGINE_NETNS")
  local spec name addr
  spec=$(engine_json /networks/bridge '"%s %s" % (d["Options"]["com.docker.network.bridge.name"],
    (lambda c, ip: c.get("Gateway", str(next(ip.ip_network(c["Subnet"]).hosts())))
       + "/" + str(ip.ip_network(c["Subnet"]).prefixlen))(d["IPAM"]["Config"][0], __import__("ipaddress")))') ||
    return 0
  read -r name addr <<<"$spec"
  [ -n "$name" ] && [ -n "$addr" ] || return 0
  "${ipc[@]}" link show "$name" >/dev/null 2>&1 && return 0
  if "${ipc[@]}" link add "$name" type bridge && "${ipc[@]}" addr add "$addr" dev "$name" &&
    "${ipc[@]}" link set "$name" up; then
    say engine "the default bridge $name was missing (deleted by a dockerd started with --bridge=none): recreated it with $addr"
  else
    warn "the default bridge $name is missing and could not be recreated: containers on the default network will not start"
  fi
}
