#!/usr/bin/env bash
# The docker-in-docker CI path end to end, with compose/dind-ci.yml: an
# engine (sandman/dind) in its own container makes TLS certificates at first
# start and listens on tcp://docker:2376; a job container (sandman/sandman)
# reaches it with DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH, seeds
# it with the sandbox image offline, and runs `sandman run --workspace DIR`:
# files copied in, changed files copied back, no bind mount of the
# workspace. `down -v` leaves nothing behind.
#
# First it runs the one-machine recipe of docs/ci.md exactly as the page
# prints it (the lines are read from the page, so the two cannot drift),
# with the test's own image tags and compose project: the job's default
# image is built in the inner engine and the workspace is the mounted
# project (compose/ci-example), not the job container's /.
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

BUILT=()
cleanup() {
  "${COMPOSE[@]}" down -v --remove-orphans -t 20 >/dev/null 2>&1 || true
  cleanup_instance
  docker image rm -f "${SANDMAN_DIND_IMAGE:-}" "${SANDMAN_JOB_IMAGE:-}" "${BUILT[@]}" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# Both images under this test's own tags (the user's own builds of the
# dind and sandman images are never replaced); compose/dind-ci.yml takes them
# through SANDMAN_DIND_IMAGE and SANDMAN_JOB_IMAGE.
TEST_TAG=sandman-it/$(printf '%s' "$SANDMAN_INSTANCE" | tr -c 'a-z0-9._-' '-')
MAKE_IMAGE=""
export SANDMAN_DIND_IMAGE=$TEST_TAG/dind:1 SANDMAN_JOB_IMAGE=$TEST_TAG/sandman:1

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

# ---- docs/ci.md's recipe, as printed ----
# The first code block under "## On one machine". Each line runs as it is,
# from the checkout, but for what keeps a test apart from a user's things:
# `build/sandman image build NAME` gets this build's sandman and the tag
# $TEST_TAG/NAME:1 (compose takes the dind and sandman ones through
# SANDMAN_DIND_IMAGE and SANDMAN_JOB_IMAGE), `docker-compose -f
# compose/dind-ci.yml` this test's project name (and the unprivileged
# override where needed). A line of any other form fails the test.
recipe=$(awk '/^## On one machine/ { f = 1 } f && /^```/ { n++; if (n == 2) exit; next } f && n == 1' "$SRC_DIR/docs/ci.md")
check "docs/ci.md has the one-machine recipe" test -n "$recipe"
expect_eq "the page has the recipe's two image builds, up, the job and down" "5" "$(grep -c . <<<"$recipe")"
step=0
while IFS= read -r line; do
  line=${line%%#*}
  line=$(sed 's/[[:space:]]*$//' <<<"$line")
  [ -n "$line" ] || continue
  step=$((step + 1))
  case "$line" in
    "build/sandman image build "*)
      name=${line#build/sandman image build }
      case "$name" in dind) tag=$SANDMAN_DIND_IMAGE ;; sandman) tag=$SANDMAN_JOB_IMAGE ;; *) tag=$TEST_TAG/$name:1 ;; esac
      BUILT+=("$tag")
      cmd=("$SANDMAN" image build "$name" --tag "$tag") ;;
    "docker-compose -f compose/dind-ci.yml "*)
      read -ra words <<<"${line#docker-compose -f compose/dind-ci.yml }"
      cmd=("${COMPOSE[@]}" "${words[@]}") ;;
    *)
      it_fail "docs/ci.md's recipe has a line this test does not know how to run: $line"
      continue ;;
  esac
  rc=0
  (cd "$SRC_DIR" && "${cmd[@]}") </dev/null >"$WORK/recipe-$step.log" 2>&1 || rc=$?
  expect_eq "recipe step $step as printed: $line" 0 "$rc"
  [ "$rc" -eq 0 ] || tail -n 30 "$WORK/recipe-$step.log" | sed 's/^/#   /'
  case "$line" in
    *" run --rm job"*)
      log=$(cat "$WORK/recipe-$step.log")
      expect_contains "recipe: the job built its default image in the inner engine" "building minimal" "$log"
      expect_contains "recipe: the job ran in sandman/minimal:latest (present: built by the job)" \
        "in sandman/minimal:latest with /project" "$log"
      expect_contains "recipe: the workspace is the mounted project (compose/ci-example), copied into /workspace" \
        "ci-example: in /workspace as sandbox" "$log"
      expect_contains "recipe: the project's test passed" "ci-example: ok" "$log"
      expect_contains "recipe: the job ended well" "ci-job: ok" "$log" ;;
  esac
done <<<"$recipe"
expect_eq "recipe: compose/ci-example is as it was" "" "$(git -C "$SRC_DIR" status --porcelain -- compose/ci-example 2>&1)"
expect_eq "recipe: down -v left no container of the project" "" \
  "$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")"
expect_eq "recipe: down -v left no volume of the project" "" \
  "$(docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT")"

# ---- the pieces, one by one ----

# The suite's image, as a CI without a registry gets it: built elsewhere
# (here: sandman/minimal plus this machine's make and the libraries it
# needs), saved with `docker save`, loaded into the job's engine by
# ci-job.sh (`sandman image load`).
# COPY only, no RUN: the build needs no container (nor the engine's bridge).
mkdir -p "$WORK/make-image/lib" "$WORK/make-image/lib64" "$WORK/ws/src"
cp /usr/bin/make "$WORK/make-image/make"
for lib in $(ldd /usr/bin/make | grep -o '/[^ ]*'); do cp "$lib" "$WORK/make-image/lib/"; done
ln -s /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$WORK/make-image/lib64/ld-linux-x86-64.so.2"
{
  echo "FROM sandman/minimal:latest"
  echo "COPY lib/ /lib/x86_64-linux-gnu/"
  echo "COPY lib64/ /lib64/"
  echo "COPY make /usr/bin/make"
} >"$WORK/make-image/Dockerfile"
MAKE_IMAGE=$TEST_TAG/make:1
check "image build of a small image with make (as $MAKE_IMAGE)" \
  bash -c "'$SANDMAN' image build '$WORK/make-image' --tag '$MAKE_IMAGE' >'$WORK/build-make.log' 2>&1"
docker save "$MAKE_IMAGE" -o "$WORK/images.tar"
docker image rm -f "$MAKE_IMAGE" >/dev/null 2>&1 || true
# The project the job tests: `make test` reads a file, writes one, changes one.
printf 'test:\n\tcat in.txt\n\techo made-in-sandbox > out.txt\n\techo line2 >> src/a.txt\n' >"$WORK/ws/Makefile"
echo "input from the job" >"$WORK/ws/in.txt"
echo "line1" >"$WORK/ws/src/a.txt"

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

# The job itself, exactly as docs/ci.md runs it: wait, seed (load the saved
# image, build sandman/minimal), `make test` in the workspace, files back.
rc=0
job -e CI_KEEP_SANDBOX=1 -e CI_RUN_ID="$RUN_ID" -e CI_IMAGES=/images.tar -e CI_BUILD=minimal \
  -e CI_IMAGE="$MAKE_IMAGE" -e CI_COMMAND='make test' -e CI_WORKSPACE=/ws -e CI_MEM=256m -e CI_DISK=64m \
  -v "$WORK/images.tar:/images.tar:ro" -v "$WORK/ws:/ws" job >"$WORK/job.log" 2>&1 || rc=$?
expect_eq "the CI job (compose/ci-job.sh) succeeds" 0 "$rc"
log=$(cat "$WORK/job.log")
expect_contains "the job loaded the saved image (no registry)" "Loaded image: $MAKE_IMAGE" "$log"
expect_contains "the job seeded the engine with sandman/minimal offline" "building minimal" "$log"
expect_contains "make test ran in the sandbox and saw the file copied in" "input from the job" "$log"
expect_eq "changed files came back to the job's workspace" "made-in-sandbox|line1 line2" \
  "$(cat "$WORK/ws/out.txt" 2>&1)|$(tr '\n' ' ' <"$WORK/ws/src/a.txt" | sed 's/ $//')"
[ "$rc" -eq 0 ] || sed 's/^/#   /' "$WORK/job.log" | tail -n 30
rc=0
job -e CI_RUN_ID="$RUN_ID-fail" -e CI_BUILD= -e CI_IMAGE="$MAKE_IMAGE" -e CI_WORKSPACE=/ws \
  -e CI_COMMAND='make no-such-target' -v "$WORK/ws:/ws" job >"$WORK/job-fail.log" 2>&1 || rc=$?
expect_eq "a failing suite fails the job with make's status" 2 "$rc"
rc=0
out=$(job -e CI_BUILD= -e CI_WORKSPACE=/ job 2>&1) || rc=$?
expect_eq "a workspace of / (the job's whole file system) is refused" 1 "$rc"
expect_contains "... saying to name the project's folder" "set CI_WORKSPACE to the project's folder" "$out"

# Inside the engine: the sandbox's /workspace is a volume, nothing bound.
sandbox=$(in_engine docker ps -aq --filter "label=io.sandman.run=$RUN_ID" 2>/dev/null | head -n 1)
check "the job's sandbox is kept (CI_KEEP_SANDBOX=1)" test -n "$sandbox"
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
expect_eq "the failed job removed its sandbox" "" \
  "$(in_engine docker ps -aq --filter "label=io.sandman.run=$RUN_ID-fail" 2>&1)"

# ---- network allowlist in the inner engine (issue 25, finding 3) ----
# The inner engine's host is the engine container, whose dockerd listens on
# 2376 on every address it holds (a service bound to 0.0.0.0, as the finding
# says). An allowlist sandbox of the inner engine reaches none of them, its
# gateway included (it has none); the proxy, made in the inner engine from
# sandman's embedded binary, answers it through its relay.
printf 'defaults:\n  network: allowlist\n  image: sandman/minimal:latest\n  egress:\n    allow: ["allowed.test"]\n' \
  >"$WORK/allow.yaml"
allow_run() { job -v "$WORK/allow.yaml:/allow.yaml:ro" --entrypoint sandman job --config /allow.yaml run "$@" 2>&1 || true; }
out=$(allow_run --mode per_run --run-id "$RUN_ID-allow" -- echo ready)
expect_contains "allowlist: a sandbox in the inner engine" "ready" "$out"
engine_addrs=$(in_engine hostname -I 2>/dev/null | tr ' ' '\n' | grep -v -e '^$' -e '^127\.' -e ':' | tr '\n' ' ')
check "allowlist: the engine container's addresses ($engine_addrs)" test -n "$engine_addrs"
out=$(allow_run --mode per_run --run-id "$RUN_ID-allow" -- sh -c \
  "for a in $engine_addrs; do if nc -w 3 \$a 2376 </dev/null; then echo reached \$a; else echo failed \$a; fi; done; echo probed")
expect_contains "allowlist: the probe ran" "probed" "$out"
expect_not_contains "allowlist: no address of the engine container answers on the engine's port" "reached" "$out"
out=$(allow_run --mode per_run --run-id "$RUN_ID-allow" -- sh -c 'echo devices: $(tail -n +3 /proc/net/dev | cut -d: -f1)')
expect_eq "allowlist: no network device but loopback" "devices: lo" "$(grep '^devices:' <<<"$out")"
out=$(allow_run --mode per_run --run-id "$RUN_ID-allow" -- wget -q -O- http://denied.test/)
expect_contains "allowlist: the proxy answers through the relay (and refuses an unlisted name)" "403" "$out"
check "allowlist: sandbox rm removes the sandbox" job --entrypoint sandman job sandbox rm --run-id "$RUN_ID-allow"
expect_eq "allowlist: ... and its relay" "" \
  "$(in_engine docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter label=io.sandman.egress=relay 2>&1)"

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
