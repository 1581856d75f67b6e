#!/bin/sh
# The CI job of docs/ci.md (GitLab CI, GitHub Actions) and of
# compose/dind-ci.yml: POSIX sh, runs in sandman/sandman (or anywhere
# sandman is on PATH). The engine comes from DOCKER_HOST / DOCKER_TLS_VERIFY
# / DOCKER_CERT_PATH, as for the docker CLI.
#
#   1. waits until the engine answers (`sandman version` exits 0 only
#      then), up to CI_ENGINE_WAIT seconds;
#   2. seeds the engine, offline: loads CI_IMAGES (`docker save` tars,
#      space-separated; how images reach a CI engine with no registry),
#      then builds the image folders named in CI_BUILD;
#   3. runs CI_COMMAND in a sandbox of CI_IMAGE with the workspace
#      CI_WORKSPACE copied in, and the changes copied back (never a bind
#      mount: the engine runs elsewhere), with a suite's limits;
#   4. removes the run's sandbox and exits with the command's own status.
#
# Environment (defaults):
#   CI_COMMAND     make test
#   CI_IMAGE       sandman/general:latest (an image that has make) when
#                  CI_IMAGES are loaded, else sandman/minimal:latest (the
#                  image CI_BUILD builds by default)
#   CI_IMAGES      none: `docker save` tars to load first
#   CI_BUILD       minimal when CI_IMAGES is unset, else none: image folders to build
#   CI_WORKSPACE   $CI_PROJECT_DIR, else $GITHUB_WORKSPACE, else the current
#                  directory (refused when that is /: name the project)
#   CI_TIMEOUT 30m, CI_MEM 4g, CI_CPU 2, CI_PIDS 4096, CI_DISK 4g   the sandbox's limits
#   CI_ENGINE_WAIT 120   seconds to wait for the engine
#   CI_RUN_ID      ci-<job id>: the run whose sandbox is used
#   CI_KEEP_SANDBOX=1    leave the sandbox for inspection
set -eu

say() { echo "ci-job: $*"; }
fail() { echo "ci-job: FAILED: $*" >&2; exit 1; }

COMMAND=${CI_COMMAND:-make test}
IMAGES=${CI_IMAGES:-}
# The default image is one this job has: loaded (general, as docs/ci.md
# saves it) or built here (minimal).
if [ -n "$IMAGES" ]; then IMAGE=${CI_IMAGE:-sandman/general:latest}; else IMAGE=${CI_IMAGE:-sandman/minimal:latest}; fi
if [ -z "${CI_BUILD+set}" ]; then
  if [ -z "$IMAGES" ]; then BUILD=minimal; else BUILD=; fi
else
  BUILD=$CI_BUILD
fi
WORKSPACE=${CI_WORKSPACE:-${CI_PROJECT_DIR:-${GITHUB_WORKSPACE:-$(pwd)}}}
RUN_ID=${CI_RUN_ID:-ci-${CI_JOB_ID:-${GITHUB_RUN_ID:-$$}}}
WAIT=${CI_ENGINE_WAIT:-120}

say "engine: DOCKER_HOST=${DOCKER_HOST:-} DOCKER_TLS_VERIFY=${DOCKER_TLS_VERIFY:-} DOCKER_CERT_PATH=${DOCKER_CERT_PATH:-}"
# `sandman version` exits 1 while no engine answers, so this really waits.
start=$(date +%s)
tries=1
until sandman version >/dev/null 2>&1; do
  [ "$tries" -gt 1 ] || say "waiting for the engine (up to ${WAIT}s)"
  if [ $(($(date +%s) - start)) -ge "$WAIT" ]; then
    sandman version >&2 || true
    fail "no engine answers at ${DOCKER_HOST:-the default address} after ${WAIT}s"
  fi
  tries=$((tries + 1))
  sleep 1
done
say "the engine answered after $tries tries"
sandman version

for tar in $IMAGES; do
  say "loading $tar into the engine (offline)"
  sandman image load "$tar"
done
for name in $BUILD; do
  say "building $name in the engine (offline)"
  sandman image build "$name" >/dev/null
done

[ -d "$WORKSPACE" ] || fail "the workspace $WORKSPACE is not a directory"
[ "$(cd "$WORKSPACE" && pwd -P)" != / ] ||
  fail "the workspace is / (the job's whole file system): set CI_WORKSPACE to the project's folder"
say "running '$COMMAND' in $IMAGE with $WORKSPACE (run $RUN_ID)"
rc=0
sandman run --mode per_run --run-id "$RUN_ID" --image "$IMAGE" --workspace "$WORKSPACE" \
  --timeout "${CI_TIMEOUT:-30m}" --mem "${CI_MEM:-4g}" --cpu "${CI_CPU:-2}" \
  --pids "${CI_PIDS:-4096}" --disk "${CI_DISK:-4g}" -- sh -c "$COMMAND" || rc=$?

if [ "${CI_KEEP_SANDBOX:-0}" != 1 ]; then
  sandman sandbox rm --run-id "$RUN_ID" >/dev/null || true
fi
if [ "$rc" -eq 0 ]; then say ok; else say "'$COMMAND' exited $rc"; fi
exit "$rc"
