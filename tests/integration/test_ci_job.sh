#!/usr/bin/env bash
# compose/ci-job.sh really waits for its engine (issue 15 item 2): started
# while nothing answers at DOCKER_HOST, it waits; once the engine appears
# there (a socket proxy to this machine's engine, opened after the job said
# it waits), it goes on, seeds nothing (CI_BUILD=), runs CI_COMMAND in the
# workspace and exits with the command's status. With no engine at all it
# gives up after CI_ENGINE_WAIT seconds and runs nothing. The same script
# runs against docker-in-docker in test_dind.sh.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_engine
WORK=$(mktemp -d)
PROXY_PID="" JOB_PID=""
cleanup() {
  [ -n "$JOB_PID" ] && kill "$JOB_PID" 2>/dev/null
  [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
  wait 2>/dev/null
  cleanup_instance
  rm -rf "$WORK"
}
trap cleanup EXIT

ENGINE=$("$SANDMAN" version --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["engine"]["host"])')
case $ENGINE in unix://*) ;; *) echo "SKIP: the engine is not on a unix socket ($ENGINE)"; exit 77 ;; esac
export PATH="$(dirname "$SANDMAN"):$PATH"
mkdir -p "$WORK/ws"
echo "from the workspace" >"$WORK/ws/in.txt"

# No engine at all: it gives up, and runs nothing.
rc=0
env DOCKER_HOST="unix://$WORK/never.sock" CI_ENGINE_WAIT=2 CI_BUILD= CI_IMAGE=sandman/minimal:latest \
  CI_WORKSPACE="$WORK/ws" CI_COMMAND='touch ran' sh "$SRC_DIR/compose/ci-job.sh" >"$WORK/none.log" 2>&1 || rc=$?
expect_eq "with no engine the job fails" 1 "$rc"
expect_contains "... and says where it waited" "no engine answers at unix://$WORK/never.sock after 2s" "$(cat "$WORK/none.log")"
check "... and ran nothing" test ! -e "$WORK/ws/ran"

# The engine appears while the job waits.
SOCK=$WORK/late.sock
env DOCKER_HOST="unix://$SOCK" CI_ENGINE_WAIT=120 CI_BUILD= CI_IMAGE=sandman/minimal:latest \
  CI_WORKSPACE="$WORK/ws" CI_RUN_ID="cijob-$$" CI_COMMAND='cat in.txt; echo back > out.txt; exit 3' \
  sh "$SRC_DIR/compose/ci-job.sh" >"$WORK/job.log" 2>&1 &
JOB_PID=$!
for _ in $(seq 1 100); do grep -q 'waiting for the engine' "$WORK/job.log" && break; sleep 0.1; done
expect_contains "the job waits while nothing answers" "waiting for the engine" "$(cat "$WORK/job.log")"
python3 - "$SOCK" "${ENGINE#unix://}" <<'EOF' &
import socket, sys, threading
listen, target = sys.argv[1], sys.argv[2]
srv = socket.socket(socket.AF_UNIX); srv.bind(listen); srv.listen(16)
def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d: break
            b.sendall(d)
    except OSError: pass
    finally:
        try: b.shutdown(socket.SHUT_WR)
        except OSError: pass
while True:
    c, _ = srv.accept()
    u = socket.socket(socket.AF_UNIX); u.connect(target)
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
EOF
PROXY_PID=$!
rc=0
wait "$JOB_PID" || rc=$?
JOB_PID=""
log=$(cat "$WORK/job.log")
expect_contains "the job went on once the engine answered" "the engine answered after" "$log"
expect_not_contains "... not after one try" "the engine answered after 1 tries" "$log"
expect_contains "the command ran in the workspace" "from the workspace" "$log"
expect_eq "its change came back" "back" "$(cat "$WORK/ws/out.txt" 2>&1)"
expect_eq "the job exits with the command's status" 3 "$rc"
expect_eq "the job removed its sandbox" "" \
  "$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "label=io.sandman.run=cijob-$$")"
it_done
