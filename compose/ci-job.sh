#!/bin/sh
# A CI job against a docker-in-docker engine (compose/dind-ci.yml, and the
# GitLab/GitHub examples in docs/ci.md): POSIX sh, runs in sandman/sandman.
# The engine comes from DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH.
#
#   1. waits until the engine answers over TLS;
#   2. seeds the empty engine with the sandbox image, offline
#      (`sandman image build minimal`, from the folder the sandman image carries);
#   3. makes a workspace in this container only, runs one tool call with
#      --workspace (copied in and the changes copied back as tar streams),
#      and checks the files that came back.
# Prints "ci-job: ok" at the end; any failure exits non-zero.
#
# Environment: CI_RUN_ID (dind-e2e) the run whose sandbox is used;
# CI_KEEP_SANDBOX=1 leaves it for inspection (default: removed);
# SANDMAN_IMAGE_REF (sandman/minimal:latest).
set -eu

RUN_ID=${CI_RUN_ID:-dind-e2e}
IMAGE=${SANDMAN_IMAGE_REF:-sandman/minimal:latest}

say() { echo "ci-job: $*"; }
fail() { echo "ci-job: FAILED: $*" >&2; exit 1; }

say "engine: DOCKER_HOST=${DOCKER_HOST:-} DOCKER_TLS_VERIFY=${DOCKER_TLS_VERIFY:-} DOCKER_CERT_PATH=${DOCKER_CERT_PATH:-}"
tries=0
until sandman version >/dev/null 2>&1; do
  tries=$((tries + 1))
  [ "$tries" -lt 60 ] || { sandman version; fail "no engine answers at ${DOCKER_HOST:-?}"; }
  sleep 2
done
sandman version

say "seeding $IMAGE in the engine (offline)"
sandman image build minimal --tag "$IMAGE" >/dev/null

ws=$(mktemp -d /tmp/ci-workspace.XXXXXX)
mkdir -p "$ws/src"
echo "input from the job" >"$ws/in.txt"
echo "line1" >"$ws/src/a.txt"

say "tool call with --workspace $ws (run $RUN_ID)"
rc=0
sandman run --json --mode per_run --run-id "$RUN_ID" --image "$IMAGE" --workspace "$ws" -- \
  sh -c 'cat in.txt; echo made-in-sandbox > out.txt; echo line2 >> src/a.txt' >"$ws.json" || rc=$?
[ "$rc" -eq 0 ] || { cat "$ws.json" >&2; fail "sandman run exited $rc"; }
echo "ci-job: result $(cat "$ws.json")"

grep -q '"stdout": *"input from the job' "$ws.json" || fail "the tool did not see in.txt"
[ "$(cat "$ws/out.txt" 2>/dev/null)" = made-in-sandbox ] || fail "out.txt did not come back"
[ "$(cat "$ws/src/a.txt")" = "line1
line2" ] || fail "src/a.txt was not updated"
say "files back: out.txt=$(cat "$ws/out.txt") src/a.txt=$(tr '\n' ' ' <"$ws/src/a.txt")"

if [ "${CI_KEEP_SANDBOX:-0}" != 1 ]; then
  sandman sandbox rm --run-id "$RUN_ID" >/dev/null
fi
rm -rf "$ws" "$ws.json"
say ok
