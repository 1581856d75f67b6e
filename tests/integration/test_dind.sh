#!/usr/bin/env bash
# The docker-in-docker CI path end to end, with compose/dind-ci.yml: an
# engine (sandman/dind) in its own container makes TLS certificates at first
# start and listens on tcp://docker:2376; a job container (sandman/sandman)
# reaches it with DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH, seeds
# it with the sandbox image offline, and runs `sandman run --workspace DIR`:
# files copied in, changed files copied back, no bind mount of the
# workspace. `down -v` leaves nothing behind.
#
# On an engine that cannot start privileged containers (its own capability
# bounding set lacks one: runc says "unable to apply caps"), the engine
# container runs with compose/dind-ci.unprivileged.yml instead; the test
# says so, and checks everything else the same way.
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
COMPOSE=(docker-compose -p "$PROJECT" -f "$SRC_DIR/compose/dind-ci.yml")
RUN_ID=dind-$$

cleanup() {
  "${COMPOSE[@]}" down -v --remove-orphans -t 20 >/dev/null 2>&1 || true
  cleanup_instance
  rm -rf "$WORK"
}
trap cleanup EXIT

for name in dind sandman; do
  old_id=$(docker image inspect -f '{{.Id}}' "sandman/$name:latest" 2>/dev/null || true)
  check "image build $name" bash -c "cd '$SRC_DIR' && '$SANDMAN' image build $name >'$WORK/build-$name.log' 2>&1"
  # The image it replaced goes when unused: test runs do not pile up images.
  if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect -f '{{.Id}}' "sandman/$name:latest" 2>/dev/null)" ]; then
    docker image rm "$old_id" >/dev/null 2>&1 || true
  fi
done

# Can this engine start a privileged container at all?
if docker run --rm --network none --privileged --user 0 \
  --label io.sandman.instance="$SANDMAN_INSTANCE" sandman/minimal:latest true >"$WORK/probe.log" 2>&1; then
  echo "# the engine runs privileged containers: compose/dind-ci.yml as it is"
else
  echo "# NOT TESTED HERE: privileged: true. This engine cannot start privileged containers:"
  sed 's/^/#   /' "$WORK/probe.log"
  echo "# (its capability bounding set: $(grep CapBnd /proc/self/status | awk '{print $2}'));"
  echo "# the engine container runs with compose/dind-ci.unprivileged.yml instead."
  COMPOSE+=(-f "$SRC_DIR/compose/dind-ci.unprivileged.yml")
fi

check "compose/dind-ci.yml is valid for docker-compose $(docker-compose version --short)" \
  bash -c "$(printf '%q ' "${COMPOSE[@]}") config -q"
if "${COMPOSE[@]}" up -d docker >"$WORK/up.log" 2>&1; then
  it_pass "docker-compose up -d docker (the engine)"
else
  it_fail "docker-compose up -d docker: $(cat "$WORK/up.log")"
fi
ENGINE=$("${COMPOSE[@]}" ps -q docker 2>/dev/null || true)
healthy=""
for _ in $(seq 1 120); do
  healthy=$(docker inspect -f '{{.State.Health.Status}}' "$ENGINE" 2>/dev/null || echo gone)
  [ "$healthy" = healthy ] || [ "$healthy" = gone ] && break
  [ "$(docker inspect -f '{{.State.Running}}' "$ENGINE" 2>/dev/null)" = true ] || break
  sleep 1
done
if [ "$healthy" = healthy ]; then
  it_pass "the engine in the container is up, with its certificates"
else
  it_fail "the engine in the container did not come up ($healthy): $(docker logs --tail 20 "$ENGINE" 2>&1)"
fi

in_engine() { docker exec "$ENGINE" "$@"; }
expect_eq "the certificates were made at first start in docker:dind's layout" \
  "ca.pem cert.pem key.pem" "$(in_engine sh -c 'cd /certs/client && echo $(ls)' 2>&1)"
expect_contains "the server certificate names the service 'docker'" "DNS:docker" \
  "$(in_engine openssl x509 -in /certs/server/cert.pem -noout -text 2>&1)"
expect_contains "the engine listens with TLS verification" "--tlsverify" \
  "$(docker inspect -f '{{.Path}} {{join .Args " "}}' "$ENGINE"; docker logs "$ENGINE" 2>&1 | grep 'starting dockerd')"

# The job's view: TLS from the environment, as the docker CLI reads it.
job() { "${COMPOSE[@]}" run --rm -T "$@"; }
out=$(job --entrypoint sandman job version 2>&1 || true)
expect_contains "the job reaches the engine at tcp://docker:2376" "tcp://docker:2376" "$out"
expect_contains "the job negotiated an API version over TLS" "api" "$out"
out=$(job -e DOCKER_CERT_PATH=/nonexistent --entrypoint sandman job sandbox list 2>&1) && rc=0 || rc=$?
check "without the client certificates the job is refused (exit $rc)" test "$rc" -ne 0
out=$(job -e DOCKER_TLS_VERIFY= --entrypoint sandman job sandbox list 2>&1) && rc=0 || rc=$?
check "plain HTTP to the TLS port fails (exit $rc)" test "$rc" -ne 0

# The job itself: seed, tool call with --workspace, files back.
rc=0
job -e CI_KEEP_SANDBOX=1 -e CI_RUN_ID="$RUN_ID" job >"$WORK/job.log" 2>&1 || rc=$?
expect_eq "the CI job (compose/ci-job.sh) succeeds" 0 "$rc"
log=$(cat "$WORK/job.log")
expect_contains "the job seeded the engine with sandman/minimal offline" "Successfully tagged sandman/minimal:latest" "$log"
expect_contains "the tool saw the file copied in" '"stdout":"input from the job' "$log"
expect_contains "changed files came back" "files back: out.txt=made-in-sandbox src/a.txt=line1 line2" "$log"
expect_contains "the result lists the changed files" '"files_changed":["out.txt","src/a.txt"]' "$log"
[ "$rc" -eq 0 ] || sed 's/^/#   /' "$WORK/job.log" | tail -n 30

# Inside the engine: the sandbox's /workspace is a volume, nothing bound.
sandbox=$(sed -n 's/.*"sandbox_id": *"\([0-9a-f]*\)".*/\1/p' "$WORK/job.log" | head -n 1)
check "the job's result names its sandbox" test -n "$sandbox"
if [ -n "$sandbox" ]; then
  mounts=$(in_engine docker inspect -f '{{json .Mounts}}' "$sandbox" 2>&1)
  expect_contains "the sandbox's /workspace is a volume in the inner engine" '"Destination":"/workspace"' "$mounts"
  expect_not_contains "the sandbox has no bind mount" '"Type":"bind"' "$mounts"
  expect_eq "the sandbox has no binds at all" "null" \
    "$(in_engine docker inspect -f '{{json .HostConfig.Binds}}' "$sandbox" 2>&1)"
  expect_eq "the sandbox carries this test's instance label" "$SANDMAN_INSTANCE" \
    "$(in_engine docker inspect -f '{{index .Config.Labels "io.sandman.instance"}}' "$sandbox" 2>&1)"
  check "sandbox rm --run-id removes it" job --entrypoint sandman job sandbox rm --run-id "$RUN_ID"
  expect_eq "nothing of the run is left in the inner engine" "" \
    "$(in_engine docker ps -aq --filter "label=io.sandman.run=$RUN_ID" 2>&1)"
fi

if "${COMPOSE[@]}" down -v -t 20 >"$WORK/down.log" 2>&1; then
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
expect_eq "nothing managed of this instance on the host engine" "" \
  "$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE")"

it_done
