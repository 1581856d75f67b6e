#!/usr/bin/env bash
# The runner's /mcp session table cannot be taken by one token (issue 25,
# finding 6): 64 `initialize` with one worker's token get 8 sessions (the
# default of --mcp-sessions-per-token) and 503 past them, and the control
# token and another worker still get theirs. With
# --mcp-sessions-per-token 3, a token gets 3. No sandbox is made: a
# session's sandbox comes with its first tool call.
source "$(dirname "$0")/lib.sh"

require_engine
it_runner_workdir
TOKEN=$(cat "$WORK/token")
W1=$("$SANDMAN" token derive --worker-key w1 --token-file "$WORK/token")
W2=$("$SANDMAN" token derive --worker-key w2 --token-file "$WORK/token")
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}'
# init TOKEN [QUERY]: the HTTP status of one initialize
init() {
  curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" -X POST \
    -H "Authorization: Bearer $1" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -d "$INIT" "http://sandman/mcp${2:-}"
}
# fill TOKEN QUERY N: the statuses of N initialize, counted ("200:8 503:56")
fill() {
  local i codes=""
  for i in $(seq 1 "$3"); do codes="$codes $(init "$1" "$2")"; done
  tr ' ' '\n' <<<"$codes" | grep . | sort | uniq -c | awk '{printf "%s%s:%s", (NR>1?" ":""), $2, $1}'
}

check "runner started" it_start_worker
expect_eq "one worker's 64 initialize: 8 sessions, the rest refused (503)" "200:8 503:56" \
  "$(fill "$W1" "?worker_key=w1" 64)"
expect_eq "the control token still gets a session" 200 "$(init "$TOKEN")"
expect_eq "another worker still gets a session" 200 "$(init "$W2" "?worker_key=w2")"
stop_worker

check "runner started with --mcp-sessions-per-token 3" it_start_worker --mcp-sessions-per-token 3
expect_eq "--mcp-sessions-per-token 3: 3 sessions for the token" "200:3 503:2" \
  "$(fill "$W1" "?worker_key=w1" 5)"
expect_eq "... and the control token gets its own" 200 "$(init "$TOKEN")"
stop_worker
it_done
