#!/usr/bin/env bash
# compose/workstation.yml with Debian's docker-compose (v1), offline: the
# runner comes up from the locally built sandman/sandman image, a tool call
# goes through its API on the unix socket in the named volume with the
# token from the secret file, and `down -v` leaves nothing behind. The same
# commands as docs/compose.md.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_engine
if ! command -v docker-compose >/dev/null; then
  [ "${CI:-}" = true ] && { echo "FAIL: CI=true and docker-compose is not installed" >&2; exit 1; }
  echo "SKIP: docker-compose is not installed (apt-get install docker-compose)"
  exit 77
fi

# One cache for the plain and the sanitizer builds: debootstrap once per machine.
export SANDMAN_IMAGE_CACHE=${SANDMAN_IMAGE_CACHE:-$SRC_DIR/build/image-cache}
WORK=$(mktemp -d)
PROJECT=sm$(printf '%s' "$SANDMAN_INSTANCE" | tr -c 'a-z0-9' '_' | tr -s '_')$$
COMPOSE=(docker-compose -p "$PROJECT" -f "$SRC_DIR/compose/workstation.yml")
export SANDMAN_TOKEN_FILE=$WORK/token
export SANDMAN_MODE=per_tool
# The runner in its container reaches the engine this test runs against.
SANDMAN_DOCKER_SOCKET=$(it_engine_socket) || { echo "SKIP: the engine is not on a local unix socket"; exit 77; }
export SANDMAN_DOCKER_SOCKET

cleanup() {
  "${COMPOSE[@]}" down -v --remove-orphans -t 60 >/dev/null 2>&1 || true
  cleanup_instance
  [ -n "${SANDMAN_RUNNER_IMAGE:-}" ] && docker image rm -f "$SANDMAN_RUNNER_IMAGE" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The images compose runs: built offline beforehand, as the docs say, under
# this test's own tag (a user's sandman/sandman:latest is never replaced).
TEST_TAG=sandman-it/$(printf '%s' "$SANDMAN_INSTANCE" | tr -c 'a-z0-9._-' '-')
export SANDMAN_RUNNER_IMAGE=$TEST_TAG/sandman:1
check "image build sandman (the runner's image, as $SANDMAN_RUNNER_IMAGE)" \
  bash -c "cd '$SRC_DIR' && '$SANDMAN' image build sandman --tag '$SANDMAN_RUNNER_IMAGE' >'$WORK/build.log' 2>&1"
check "the sandbox image sandman/minimal:latest is present" \
  bash -c "docker image inspect sandman/minimal:latest >/dev/null"

(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$SANDMAN_TOKEN_FILE")
TOKEN=$(cat "$SANDMAN_TOKEN_FILE")

check "compose/workstation.yml is valid for docker-compose $(docker-compose version --short)" \
  bash -c "$(printf '%q ' "${COMPOSE[@]}") config -q"
if "${COMPOSE[@]}" up -d >"$WORK/up.log" 2>&1; then
  it_pass "docker-compose up -d"
else
  it_fail "docker-compose up -d: $(cat "$WORK/up.log")"
fi

CONTAINER=$("${COMPOSE[@]}" ps -q runner 2>/dev/null || true)
VOLUME=${PROJECT}_run
SOCK=$(docker volume inspect -f '{{.Mountpoint}}' "$VOLUME" 2>/dev/null || true)/sandman.sock
# Up: the socket appears in the volume (the engine is local, so its
# volumes are this machine's directories), or the runner exits.
up=0
for _ in $(seq 1 60); do
  if [ -S "$SOCK" ]; then up=1; break; fi
  state=$(docker inspect -f '{{.State.Status}}' "$CONTAINER" 2>/dev/null || echo gone)
  [ "$state" = running ] || [ "$state" = created ] || [ "$state" = restarting ] || break
  sleep 1
done
if [ "$up" = 1 ]; then
  it_pass "the runner listens on the unix socket in volume $VOLUME"
else
  it_fail "the runner did not come up: $(docker logs --tail 30 "$CONTAINER" 2>&1)"
fi

api() { curl -sS --max-time 120 --unix-socket "$SOCK" "$@"; }
json_get() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d'"$1"')'; }

if [ "$up" = 1 ]; then
  health=$(api http://sandman/healthz 2>&1 || true)
  expect_contains "GET /healthz answers without a token" '"status"' "$health"

  code=$(api -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
    -d '{"argv": ["echo", "no"]}' http://sandman/v1/execute || true)
  expect_eq "POST /v1/execute without the token is 401" 401 "$code"

  out=$(api -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"argv": ["sh", "-c", "echo hello-from-compose; id -u"]}' http://sandman/v1/execute || true)
  expect_eq "a tool call through the API runs in a sandbox" "hello-from-compose
1000" "$(printf '%s' "$out" | json_get '["stdout"].strip()' 2>&1)"
  expect_eq "the call ran per_tool" "per_tool" "$(printf '%s' "$out" | json_get '["mode"]' 2>&1)"
  expect_eq "the call's exit code is 0" "0" "$(printf '%s' "$out" | json_get '["exit_code"]' 2>&1)"

  # The runner made the sandbox on the host's engine and removes it after
  # the per_tool call: in the background, off the caller's time, so give it
  # a few seconds. (Warm-pool containers waiting for the next call stay.)
  sid=$(printf '%s' "$out" | json_get '["sandbox_id"]' 2>&1)
  gone=no
  for _ in $(seq 1 50); do
    docker container inspect "$sid" >/dev/null 2>&1 || { gone=yes; break; }
    sleep 0.2
  done
  expect_eq "the per_tool sandbox ($sid) is gone after the call" "yes" "$gone"
fi

if "${COMPOSE[@]}" down -v -t 60 >"$WORK/down.log" 2>&1; then
  it_pass "docker-compose down -v"
else
  it_fail "docker-compose down -v: $(cat "$WORK/down.log")"
fi
expect_eq "down leaves no container of the project" "" \
  "$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")"
expect_eq "down -v leaves no volume of the project" "" \
  "$(docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT")"
expect_eq "down leaves no network of the project" "" \
  "$(docker network ls -q --filter "label=com.docker.compose.project=$PROJECT")"
expect_eq "down leaves no managed container of this instance" "" \
  "$(docker ps -aq --filter label=io.sandman.managed=true --filter "label=io.sandman.instance=$SANDMAN_INSTANCE")"
expect_eq "down leaves no managed volume of this instance" "" \
  "$(docker volume ls -q --filter label=io.sandman.managed=true --filter "label=io.sandman.instance=$SANDMAN_INSTANCE")"

# docs/compose.md names every variable the compose files read.
for var in $(grep -ho '\${[A-Z_]*' "$SRC_DIR"/compose/*.yml | tr -d '${' | sort -u); do
  expect_contains "docs/compose.md documents \$$var" "$var" "$(cat "$SRC_DIR/docs/compose.md")"
done

it_done
