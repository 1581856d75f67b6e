# Shared by the shell integration tests (sourced). A real engine is
# required: outside CI a missing one skips (exit 77), in CI it fails.
set -euo pipefail

SANDMAN=${SANDMAN_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/sandman}
SRC_DIR=${SANDMAN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# The instance: ctest's launcher (launch.sh) sets it; run by hand, it is
# <SANDMAN_TEST_PREFIX, default it>-<test name> unless SANDMAN_INSTANCE says.
export SANDMAN_INSTANCE=${SANDMAN_INSTANCE:-${SANDMAN_TEST_PREFIX:-it}-$(basename "$0" .sh)}
export SANDMAN_STATE_DIR=${SANDMAN_STATE_DIR:-$(mktemp -d)}
mkdir -p "$SANDMAN_STATE_DIR"
IT_PASSED=0
IT_FAILED=0

it_pass() { IT_PASSED=$((IT_PASSED + 1)); echo "ok - $*"; }
it_fail() { IT_FAILED=$((IT_FAILED + 1)); echo "not ok - $*" >&2; }
# check "description" command...: passes when the command succeeds.
check() { local d=$1; shift; if "$@"; then it_pass "$d"; else it_fail "$d"; fi; }
# expect_eq "description" expected actual
expect_eq() { if [ "$2" == "$3" ]; then it_pass "$1"; else it_fail "$1: expected [$2], got [$3]"; fi; }
# expect_contains "description" needle haystack
expect_contains() { case "$3" in *"$2"*) it_pass "$1" ;; *) it_fail "$1: [$2] not in [$3]" ;; esac; }
expect_not_contains() { case "$3" in *"$2"*) it_fail "$1: [$2] found in [$3]" ;; *) it_pass "$1" ;; esac; }

# The engine's unix socket on this machine (DOCKER_HOST, else the default),
# for a container that must reach the same engine as the test; fails when
# the engine is not on a local socket.
it_engine_socket() {
  local h=${DOCKER_HOST:-unix:///var/run/docker.sock}
  case "$h" in
    unix://*) printf '%s\n' "${h#unix://}" ;;
    /*) printf '%s\n' "$h" ;;
    *) return 1 ;;
  esac
}

# it_test_image NAME: the tag of images/NAME built for the tests
# (scripts/test-images.sh: sandman-test/NAME:<inputs hash>, built on first
# use, reused while its inputs are unchanged). Never a user's sandman/*:latest.
it_test_image() {
  SANDMAN_BIN=$SANDMAN "$SRC_DIR/scripts/test-images.sh" ensure "$1"
}

# Prints the totals in the plain form CI reads and exits accordingly.
it_done() {
  echo "$IT_PASSED passed, $IT_FAILED failed"
  [ "$IT_FAILED" -eq 0 ]
}

require_engine() {
  if "$SANDMAN" version --json 2>/dev/null | grep -q '"api_version": *"1\.'; then return 0; fi
  if [ "${CI:-}" = "true" ]; then echo "FAIL: CI=true and no engine answers" >&2; exit 1; fi
  echo "SKIP: no engine answers"
  exit 77
}

# Removes every container and volume this test's instance made.
cleanup_instance() {
  local ids
  ids=$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" 2>/dev/null || true)
  [ -n "$ids" ] && docker rm -fv $ids >/dev/null 2>&1 || true
  ids=$(docker volume ls -q --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" 2>/dev/null || true)
  [ -n "$ids" ] && docker volume rm -f $ids >/dev/null 2>&1 || true
}

# run_python_suite FILE SUITE: runs suite SUITE of tests/integration/FILE
# (a Python test of the runner) against the real engine, as one check;
# its exit 77 is a skip. Cleans up this instance on exit.
run_python_suite() {
  require_engine
  trap cleanup_instance EXIT
  local rc=0
  python3 "$SRC_DIR/tests/integration/$1" "$2" || rc=$?
  [ "$rc" -eq 77 ] && exit 77
  if [ "$rc" -eq 0 ]; then it_pass "$1 $2"; else it_fail "$1 $2 (exit $rc)"; fi
  it_done
}

# Processes a test started in the background (sandman run calls, lock
# holders): killed on exit by kill_pids_and_cleanup, which also removes the
# instance's sandboxes. Use: `trap kill_pids_and_cleanup EXIT`.
IT_PIDS=()
kill_pids_and_cleanup() {
  local p
  for p in "${IT_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  cleanup_instance
}

# it_hold_busy NAME: a call in flight on sandbox NAME as the runner marks
# one (a shared lock on $SANDMAN_STATE_DIR/busy/NAME.lock), held by a
# background process of this shell whose pid is left in IT_HOLDER (and
# IT_PIDS). The lock dies with that process: `kill -9 "$IT_HOLDER"; wait
# "$IT_HOLDER"` ends the call, and once wait returns the lock is free.
# Returns 1 if the lock is not held within 60 s.
IT_HOLDER=
it_hold_busy() {
  local lock=$SANDMAN_STATE_DIR/busy/$1.lock i
  mkdir -p "$SANDMAN_STATE_DIR/busy"
  # The subshell takes the lock and becomes the sleep: one process holds it.
  (exec 9>"$lock" && flock -s 9 && exec sleep 600) >/dev/null 2>&1 &
  IT_HOLDER=$!
  IT_PIDS+=("$IT_HOLDER")
  for i in $(seq 1 600); do
    flock -x -n "$lock" true 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}

# json 'python expression over d' < JSON
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# A call in the per_run sandbox of run RUN (its JSON answer): it_call_per_run RUN ARGS...
it_call_per_run() {
  local run=$1
  shift
  "$SANDMAN" run --mode per_run --run-id "$run" --json "$@"
}
# The stdout of a call's JSON answer on stdin.
it_stdout() { python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["stdout"])'; }
# Removes the images of this instance's snapshots, and the images named
# as arguments (the test's own tags).
it_remove_snapshot_images() {
  local ids
  ids=$( (docker images -q --filter "label=io.sandman.snapshot.instance=$SANDMAN_INSTANCE"
    for ref in "$@"; do docker images -q "$ref"; done) 2>/dev/null | sort -u)
  [ -n "$ids" ] && docker rmi -f $ids >/dev/null 2>&1 || true
}

# it_counter_past N CMD [ARG...]: a bounded poll (60 s) until CMD prints a
# number greater than N (a loop in a sandbox that counts on); 1 if never.
it_counter_past() {
  local n=$1 i c
  shift
  for i in $(seq 1 300); do
    c=$("$@")
    [ -n "$c" ] && [ "$c" -gt "$n" ] && return 0
    sleep 0.2
  done
  return 1
}

# For a test that starts `sandman worker start` itself: it_runner_workdir
# makes WORK (a temporary folder), the token file $WORK/token and the socket
# path SOCK; on exit the worker (WORKER_PID) is stopped, the instance
# cleaned up and WORK removed.
WORKER_PID=
stop_worker() {
  if [ -n "$WORKER_PID" ] && kill -0 "$WORKER_PID" 2>/dev/null; then
    kill -TERM "$WORKER_PID"
    wait "$WORKER_PID" || true
  fi
  WORKER_PID=
}
it_runner_workdir() {
  WORK=$(mktemp -d)
  trap 'stop_worker; cleanup_instance; rm -rf "$WORK"' EXIT
  cleanup_instance
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/token"
  chmod 600 "$WORK/token"
  SOCK=$WORK/runner.sock
}
# it_start_worker [WORKER START FLAGS...]: a per_tool runner of this test on
# $SOCK with $WORK/token (it_runner_workdir), its log in $WORK/runner.log;
# IT_WORKER_GLOBAL holds global flags (--config ...). 0 once its socket is
# there, 1 if it never comes (10 s).
IT_WORKER_GLOBAL=()
it_start_worker() {
  rm -f "$SOCK"
  "$SANDMAN" --log-level debug "${IT_WORKER_GLOBAL[@]}" worker start --sandbox-mode per_tool \
    --sandbox-image sandman/minimal:latest --project-environment development \
    --listen "unix:$SOCK" --token-file "$WORK/token" "$@" >>"$WORK/runner.log" 2>&1 &
  WORKER_PID=$!
  local i
  for i in $(seq 1 100); do
    [ -S "$SOCK" ] && return 0
    sleep 0.1
  done
  return 1
}
