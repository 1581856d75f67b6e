#!/usr/bin/env bash
# sandman set-up, idempotent: Debian packages, gVisor registered as runtimes
# `runsc` and `runsc-net`, a Docker Engine answering, the build in build/, and the default
# sandbox image sandman/minimal:latest. A second run changes nothing.
#
# One line per step on stdout. Exit 0 when everything is in place.
# Environment (all optional; see docs/setup.md):
#   DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH   the engine, as the docker CLI reads them
#   SANDMAN_EXTRA_PACKAGES      more Debian packages to require
#   SANDMAN_DOCKER_DAEMON_JSON  daemon.json to register runsc in (/etc/docker/daemon.json)
#   SANDMAN_DOCKERD             the engine command started when none answers (dockerd)
#   SANDMAN_DOCKERD_ARGS        extra arguments for it
#   SANDMAN_DOCKERD_LOG         its log (/var/log/sandman-dockerd.log)
#   SANDMAN_DOCKERD_PIDFILE     where a running dockerd wrote its pid (/var/run/docker.pid)
#   SANDMAN_ENGINE_WAIT         seconds to wait for /_ping (60)
#   SANDMAN_SKIP_BUILD=1, SANDMAN_SKIP_IMAGE=1, SANDMAN_SKIP_NODE=1   leave those steps out
set -euo pipefail

SM_SCRIPT=setup
# shellcheck source=lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
cd "$SM_ROOT"

BUILD_DIR=$SM_ROOT/build
IMAGE=$SM_SETUP_IMAGES
IMAGE_LABEL=io.sandman.image-inputs
DAEMON_JSON=${SANDMAN_DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}
DOCKERD_LOG=${SANDMAN_DOCKERD_LOG:-/var/log/sandman-dockerd.log}
DOCKERD_PIDFILE=${SANDMAN_DOCKERD_PIDFILE:-/var/run/docker.pid}
ENGINE_WAIT=${SANDMAN_ENGINE_WAIT:-60}
RUNSC_PATH=/usr/bin/runsc
START=$(date +%s)

# --- packages ---------------------------------------------------------------
# Build tools: build-essential, or at least a compiler, make and libc headers.
PACKAGES=(cmake pkg-config libcurl4-openssl-dev libjson-c-dev libyaml-dev libarchive-dev
  libssl-dev libcmocka-dev libmicrohttpd-dev docker.io busybox-static musl-tools runsc openssl curl
  python3 iproute2 procps tar util-linux debootstrap docker-compose
  zsh fish python3-venv git libvterm-dev) # the completion scripts are checked in zsh and fish; test_install makes
                             # a venv; test_workspace_refusals commits to a git repository
# shellcheck disable=SC2206
PACKAGES+=(${SANDMAN_EXTRA_PACKAGES:-})
# Node and npm (the TypeScript client, its adapters and their tests): any
# Node 20 or newer already there will do; else Debian's.
if [ "${SANDMAN_SKIP_NODE:-0}" != 1 ] && { ! command -v node >/dev/null || ! command -v npm >/dev/null; }; then
  PACKAGES+=(nodejs npm)
fi

step_packages() {
  command -v dpkg-query >/dev/null || die "dpkg-query not found: this script supports Debian 12 (bookworm)"
  local installed missing=() p
  # "pkg status" for every package dpkg knows; unknown ones are simply absent.
  installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' build-essential gcc make libc6-dev \
    "${PACKAGES[@]}" 2>/dev/null | awk '$2 == "installed" { print $1 }' || true)
  has() { grep -qx -- "$1" <<<"$installed"; }
  if ! has build-essential && ! { has gcc && has make && has libc6-dev; }; then
    missing+=(build-essential)
  fi
  for p in "${PACKAGES[@]}"; do has "$p" || missing+=("$p"); done
  if [ ${#missing[@]} -eq 0 ]; then
    say packages "all present (${#PACKAGES[@]} checked)"
    return
  fi
  if ! sm_is_root; then
    printf 'setup: missing Debian packages: %s\n' "${missing[*]}" >&2
    printf 'setup: install them as root, then run this script again:\n\n' >&2
    printf '    sudo apt-get update && sudo apt-get install -y --no-install-recommends %s\n\n' "${missing[*]}" >&2
    exit 1
  fi
  say packages "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed (is a Debian mirror reachable?)"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
    die "apt-get install ${missing[*]} failed"
  say packages "installed ${missing[*]}"
}

# --- gVisor -----------------------------------------------------------------
# Merges runtimes.runsc and runtimes.runsc-net, and "experimental": true
# (the engine's checkpoint/restore, which the hibernate tier needs:
# docs/state.md), into daemon.json keeping every other key. Prints "unchanged", "changed" or (with --check)
# "would-change". runsc has no network at all; runsc-net is gVisor on the
# container's own network namespace through the host's network stack
# (--network=host), for network mode allowlist: Debian's runsc cannot start
# its own stack (--network=sandbox) on Linux 6.11+ (docs/network.md#gvisor).
merge_daemon_json() {
  "$SM_PY" - "$DAEMON_JSON" "$RUNSC_PATH" "$@" <<'PY'
import json, os, sys, tempfile
path, runsc, check = sys.argv[1], sys.argv[2], "--check" in sys.argv[3:]
wants = {"runsc": {"path": runsc, "runtimeArgs": ["--network=none"]},
         "runsc-net": {"path": runsc, "runtimeArgs": ["--network=host"]}}
try:
    with open(path) as f:
        text = f.read()
    data = json.loads(text) if text.strip() else {}
except FileNotFoundError:
    data = {}
except ValueError as e:
    sys.exit(f"{path} is not valid JSON ({e}); fix it by hand, nothing was changed")
if not isinstance(data, dict) or not isinstance(data.get("runtimes", {}), dict):
    sys.exit(f"{path}: expected an object with an object 'runtimes'; nothing was changed")
if data.get("experimental") is True and \
        all(data.get("runtimes", {}).get(k) == v for k, v in wants.items()):
    print("unchanged")
    sys.exit(0)
if check:
    print("would-change")
    sys.exit(0)
data.setdefault("runtimes", {}).update(wants)
data["experimental"] = True
d = os.path.dirname(path) or "."
os.makedirs(d, exist_ok=True)
fd, tmp = tempfile.mkstemp(dir=d, prefix=".daemon.json.")
with os.fdopen(fd, "w") as f:
    json.dump(data, f, indent=2)
    f.write("\n")
os.chmod(tmp, 0o644)
os.replace(tmp, path)
print("changed")
PY
}

DAEMON_JSON_CHANGED=0
step_gvisor() {
  # A remote engine's daemon.json is not ours: step_engine only reports
  # whether it lists runsc.
  engine_is_local || return 0
  local r
  if [ ! -e "$DAEMON_JSON" ] && ! command -v "$SM_PY" >/dev/null 2>&1; then
    # No python and no file: a fresh file is all we can (and need to) write.
    sm_is_root || die "$DAEMON_JSON must register runsc; run this script as root"
    mkdir -p "$(dirname "$DAEMON_JSON")"
    printf '{\n  "experimental": true,\n  "runtimes": {\n    "runsc": {"path": "%s", "runtimeArgs": ["--network=none"]},\n    "runsc-net": {"path": "%s", "runtimeArgs": ["--network=host"]}\n  }\n}\n' \
      "$RUNSC_PATH" "$RUNSC_PATH" >"$DAEMON_JSON"
    r=changed
  else
    r=$(merge_daemon_json --check) || die "cannot register gVisor in $DAEMON_JSON"
    if [ "$r" = would-change ]; then
      sm_is_root || die "$DAEMON_JSON needs runtimes.runsc = {\"path\": \"$RUNSC_PATH\", \"runtimeArgs\": [\"--network=none\"]} and runtimes.runsc-net = {\"path\": \"$RUNSC_PATH\", \"runtimeArgs\": [\"--network=host\"]}; run: sudo $0"
      r=$(merge_daemon_json) || die "cannot register gVisor in $DAEMON_JSON"
    fi
  fi
  if [ "$r" = changed ]; then
    DAEMON_JSON_CHANGED=1
    say gvisor "registered runtimes runsc and runsc-net and experimental mode in $DAEMON_JSON"
  else
    say gvisor "runsc and runsc-net already registered in $DAEMON_JSON"
  fi
}

# --- engine -----------------------------------------------------------------
# The pid of the running dockerd: its pid file, else the only dockerd process.
dockerd_pid() {
  local pid comm found=()
  if [ -r "$DOCKERD_PIDFILE" ]; then
    pid=$(cat "$DOCKERD_PIDFILE" 2>/dev/null || true)
    if [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = dockerd ]; then
      echo "$pid"
      return 0
    fi
  fi
  for comm in /proc/[0-9]*/comm; do
    [ "$(cat "$comm" 2>/dev/null)" = dockerd ] && found+=("$(basename "$(dirname "$comm")")")
  done
  [ ${#found[@]} -eq 1 ] && echo "${found[0]}"
}

engine_runtimes() { engine_json /info 'sorted(d.get("Runtimes", {}))'; }
engine_describe() {
  local v
  v=$(engine_json /version '"Docker %s, API %s" % (d["Version"], d["ApiVersion"])' || true)
  printf '%s' "${v:-version unknown}"
}

# Waits until runsc and runsc-net show in /info Runtimes (after a start or
# a reload).
wait_runsc() {
  local rt
  for _ in $(seq 1 "${1:-15}"); do
    rt=" $(engine_runtimes || true) "
    case "$rt" in *" runsc "*) case "$rt" in *" runsc-net "*) return 0 ;; esac ;; esac
    sleep 1
  done
  return 1
}

reload_engine() {
  local pid
  pid=$(dockerd_pid || true)
  if [ -z "$pid" ]; then
    die "$DAEMON_JSON changed but no dockerd process was found to reload; restart your engine so it reads the file"
  fi
  sm_is_root || die "the engine must reload $DAEMON_JSON; run: sudo kill -HUP $pid"
  kill -HUP "$pid"
  wait_runsc 15 || die "sent SIGHUP to dockerd ($pid) but runsc is not in /info Runtimes; see $DOCKERD_LOG or the engine's log"
  say engine "reloaded dockerd ($pid): runtimes now $(engine_runtimes | tr ' ' ',')"
}

start_engine() {
  local sock=$1 cmd args=() log_from=1
  # shellcheck disable=SC2206
  cmd=(${SANDMAN_DOCKERD:-dockerd})
  [ "$sock" != "$SM_DEFAULT_SOCK" ] && args+=(-H "unix://$sock")
  # shellcheck disable=SC2206
  args+=(${SANDMAN_DOCKERD_ARGS:-})
  command -v "${cmd[0]}" >/dev/null || die "${cmd[0]} not found (apt-get install docker.io)"
  sm_is_root || die "no engine answers on $sock and starting dockerd needs root; run: sudo $0"
  local pid
  pid=$(dockerd_pid || true)
  if [ -n "$pid" ] && [ "$sock" = "$SM_DEFAULT_SOCK" ]; then
    # A dockerd is already coming up (or hung): a second one would only fail
    # on the pid file, so wait for this one.
    say engine "dockerd ($pid) is running but not answering yet; waiting up to ${ENGINE_WAIT}s"
  else
    mkdir -p "$(dirname "$DOCKERD_LOG")"
    log_from=$(($( { wc -l <"$DOCKERD_LOG"; } 2>/dev/null || echo 0) + 1))
    printf '\n== %s: started by sandman scripts/setup.sh: %s %s\n' "$(date -u +%FT%TZ)" \
      "${cmd[*]}" "${args[*]}" >>"$DOCKERD_LOG"
    # setsid + nohup: the engine outlives this script and its terminal or CI job.
    # 9>&-: the engine must not inherit (and hold forever) our set-up lock.
    setsid nohup "${cmd[@]}" "${args[@]}" >>"$DOCKERD_LOG" 2>&1 </dev/null 9>&- &
    pid=$!
    say engine "started ${cmd[*]} (pid $pid, log $DOCKERD_LOG); waiting up to ${ENGINE_WAIT}s for /_ping"
  fi
  local deadline=$(($(date +%s) + ENGINE_WAIT))
  # Only this start's part of the log, its last lines: usually the reason.
  log_tail() { tail -n "+$log_from" "$DOCKERD_LOG" 2>/dev/null | tail -n 25 | sed 's/^/    /' >&2; }
  while ! engine_ping; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "setup: error: the engine (pid $pid) exited without answering; last lines of $DOCKERD_LOG:" >&2
      log_tail
      exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "setup: error: no answer to /_ping on unix://$sock after ${ENGINE_WAIT}s (pid $pid still running); last lines of $DOCKERD_LOG:" >&2
      log_tail
      exit 1
    fi
    sleep 1
  done
  say engine "answering at unix://$sock ($(engine_describe)) after $(sm_elapsed "$START")"
}

step_engine() {
  local host sock
  host=$(engine_host)
  if ! sock=$(engine_socket); then
    # Remote (tcp://, docker-in-docker CI): never start one, just check it.
    if ! engine_ping; then
      local why
      why=$(engine_curl /_ping --max-time 5 2>&1 | tail -n 1 || true)
      die "no engine answers at $host (DOCKER_HOST${DOCKER_TLS_VERIFY:+, TLS with certificates from ${DOCKER_CERT_PATH:-~/.docker}}): ${why:-no answer}; start it, or unset DOCKER_HOST to use the local one"
    fi
    say engine "already running at $host ($(engine_describe))"
    if wait_runsc 1; then
      say gvisor "engine lists runtime runsc"
    else
      say gvisor "the engine at $host does not list runtimes runsc and runsc-net: gVisor sandboxes (--runtime runsc, runsc-net) will not work there"
    fi
    return
  fi
  if engine_ping; then
    say engine "already running at $host ($(engine_describe))"
    if [ "$DAEMON_JSON_CHANGED" = 1 ]; then reload_engine; fi
  elif [ -S "$sock" ] && ! [ -w "$sock" ] && ! sm_is_root; then
    die "$sock is not writable by $(id -un); run: sudo usermod -aG docker $(id -un) (then log in again)"
  else
    start_engine "$sock"
  fi
  if ! wait_runsc 1; then
    # Started elsewhere without our daemon.json, or reloaded without it.
    if sm_is_root && [ -n "$(dockerd_pid || true)" ] && [ "$DAEMON_JSON_CHANGED" = 0 ]; then
      DAEMON_JSON_CHANGED=1
      reload_engine
    else
      die "the engine at $host does not list runtimes runsc and runsc-net (Runtimes: $(engine_runtimes || echo '?')); it must read $DAEMON_JSON"
    fi
  fi
  say gvisor "engine lists runtimes runsc and runsc-net"
  # experimental is not reloaded by SIGHUP: an engine started before it
  # was set keeps running without it until it restarts.
  if [ "$(engine_json /info 'd.get("ExperimentalBuild")' || true)" = True ]; then
    say engine "experimental mode on (checkpoint/restore for --tier hibernate)"
  else
    say engine "experimental mode off: --tier hibernate is refused until the engine restarts and reads $DAEMON_JSON"
  fi
  engine_heal_bridge
}

# --- build ------------------------------------------------------------------
step_build() {
  local log=$BUILD_DIR/setup-build.log configured=""
  command -v cmake >/dev/null || die "cmake not found"
  if [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
    local home
    home=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD_DIR/CMakeCache.txt")
    if [ "$home" != "$SM_ROOT" ]; then
      # The checkout moved or build/ was copied: that cache cannot be reused.
      rm -rf "$BUILD_DIR/CMakeCache.txt" "$BUILD_DIR/CMakeFiles"
    fi
  fi
  mkdir -p "$BUILD_DIR"
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    # Under CI a new warning fails the build (docs/ci.md).
    local werror=OFF
    case "${CI:-}" in true | 1) werror=ON ;; esac
    cmake -S "$SM_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DSANDMAN_WERROR="$werror" >"$log" 2>&1 || {
      echo "setup: error: cmake configure failed; last lines of $log:" >&2
      tail -n 30 "$log" | sed 's/^/    /' >&2
      exit 1
    }
    configured="configured (RelWithDebInfo), "
  fi
  if ! cmake --build "$BUILD_DIR" -j"$(nproc)" >"$log" 2>&1; then
    echo "setup: error: the build failed; the errors (full log: $log):" >&2
    { grep -E ': (fatal )?error:|undefined reference|Error [0-9]+|No rule to make|CMake Error' "$log" | head -n 30 ||
      tail -n 30 "$log"; } | sed 's/^/    /' >&2
    exit 1
  fi
  local compiled linked
  compiled=$(grep -c 'Building C object' "$log" || true)
  linked=$(grep -cE 'Linking C (executable|shared library|static library)' "$log" || true)
  if [ -z "$configured" ] && [ "$compiled" -eq 0 ] && [ "$linked" -eq 0 ]; then
    say build "up to date ($BUILD_DIR/sandman)"
  else
    say build "${configured}compiled $compiled sources, linked $linked targets ($BUILD_DIR/sandman)"
  fi
}

# --- node: the TypeScript client ------------------------------------------
# Its npm packages (the MCP SDK and Inspector, deepagents, the OpenAI Agents
# SDK, TypeScript) come from the npm registry exactly as package-lock.json
# pins them, into clients/typescript/node_modules; then tsc builds dist/.
# Each step is skipped while what it was made from has not changed.
TS_DIR=$SM_ROOT/clients/typescript
step_node() {
  command -v node >/dev/null && command -v npm >/dev/null || die "node and npm are needed (apt-get install nodejs npm)"
  local major log=$BUILD_DIR/setup-node.log want stamp=$TS_DIR/node_modules/.sandman-lock
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge 20 ] || die "Node $(node --version) is too old: the TypeScript client needs Node 20 or newer"
  want=$(cat "$TS_DIR/package.json" "$TS_DIR/package-lock.json" | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    say node "npm packages up to date ($(node --version))"
  else
    (cd "$TS_DIR" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1 || {
      echo "setup: error: npm ci in $TS_DIR failed; last lines of $log:" >&2
      tail -n 20 "$log" | sed 's/^/    /' >&2
      exit 1
    }
    printf '%s\n' "$want" >"$stamp"
    say node "installed the npm packages of package-lock.json ($(node --version))"
  fi
  stamp=$TS_DIR/dist/.sandman-src
  want=$(find "$TS_DIR/src" "$TS_DIR/tsconfig.json" "$TS_DIR/package-lock.json" -type f | sort |
    xargs cat | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    say node "TypeScript client up to date ($TS_DIR/dist)"
    return
  fi
  (cd "$TS_DIR" && rm -rf dist && node_modules/.bin/tsc -p tsconfig.json) >"$log" 2>&1 || {
    echo "setup: error: building the TypeScript client failed; the errors (full log: $log):" >&2
    head -n 30 "$log" | sed 's/^/    /' >&2
    exit 1
  }
  printf '%s\n' "$want" >"$stamp"
  say node "built the TypeScript client ($TS_DIR/dist)"
}

# --- image ------------------------------------------------------------------
# The hash of everything the image is made from: rebuild when it changes.
image_inputs_hash() {
  {
    echo "rootfs.sh $(sm_sha256 images/minimal/rootfs.sh)"
    echo "Dockerfile $(sm_sha256 images/minimal/Dockerfile)"
    echo "busybox $(sm_sha256 /bin/busybox)"
  } | sha256sum | cut -d' ' -f1
}

image_label() {
  docker image inspect -f "{{ index .Config.Labels \"$IMAGE_LABEL\" }}" "$IMAGE" 2>/dev/null || true
}

step_image() {
  command -v docker >/dev/null || die "the docker client is not installed (apt-get install docker.io)"
  local want have ctx=$BUILD_DIR/images/minimal old_id
  want=sha256:$(image_inputs_hash)
  have=$(image_label)
  if [ "$have" = "$want" ]; then
    say "image $IMAGE" "up to date (inputs $want)"
    return
  fi
  old_id=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
  # The context: the Dockerfile (with the inputs label appended, so any
  # builder that takes a directory keeps it) and the root file system tar.
  rm -rf "$ctx"
  mkdir -p "$ctx"
  images/minimal/rootfs.sh --tar "$ctx/rootfs.tar"
  cp images/minimal/Dockerfile "$ctx/Dockerfile"
  printf 'LABEL %s="%s"\n' "$IMAGE_LABEL" "$want" >>"$ctx/Dockerfile"

  # THE IMAGE BUILD LINE: the one line that builds sandman/minimal. To use
  # sandman's own builder, replace it with
  #   build/sandman image build "$ctx" --tag "$IMAGE" >"$ctx/build.log" 2>&1 || {
  # (the DIR form on this prepared context keeps the inputs label above; the
  # NAME form, `image build minimal`, would not, and every run would rebuild).
  build/sandman image build "$ctx" --tag "$IMAGE" >"$ctx/build.log" 2>&1 || {
    echo "setup: error: building $IMAGE failed; last lines of $ctx/build.log:" >&2
    tail -n 20 "$ctx/build.log" | sed 's/^/    /' >&2
    exit 1
  }

  have=$(image_label)
  [ "$have" = "$want" ] || die "built $IMAGE but its $IMAGE_LABEL label is '$have', not '$want'"
  # The image it replaces, now untagged; still used by a container, it stays.
  if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]; then
    docker image rm "$old_id" >/dev/null 2>&1 || true
  fi
  say "image $IMAGE" "built from images/minimal (inputs $want)"
}

# --- main -------------------------------------------------------------------
# Two set-ups at once (two terminals, two test runs) would race on build/ and
# the image tag: the second waits for the first.
mkdir -p "$BUILD_DIR" 2>/dev/null || true
if [ -w "$BUILD_DIR" ] && command -v flock >/dev/null; then
  exec 9>"$BUILD_DIR/.setup.lock"
  flock -w 1800 9 || die "another scripts/setup.sh has held $BUILD_DIR/.setup.lock for 30 minutes"
fi

step_packages
step_gvisor
step_engine
if [ "${SANDMAN_SKIP_BUILD:-0}" != 1 ]; then step_build; fi
if [ "${SANDMAN_SKIP_NODE:-0}" != 1 ]; then step_node; fi
if [ "${SANDMAN_SKIP_IMAGE:-0}" != 1 ]; then step_image; fi
say setup "done in $(sm_elapsed "$START")"
