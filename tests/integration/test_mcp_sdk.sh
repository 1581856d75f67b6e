#!/usr/bin/env bash
# `sandman mcp` with the official MCP TypeScript SDK's client over stdio
# (clients/typescript/test/mcp-stdio.test.mjs), the runner's /mcp over
# streamable HTTP (mcp-http.test.mjs, with the Inspector's CLI over HTTP
# too), the 2026-07-28 revision on both (mcp-2026.test.mjs: the SDK v2
# client pinned to it and in its default mode, requests written from the
# specification, tasks of both eras), and the MCP Inspector's command-line
# mode listing the tools.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/node_lib.sh"
node_suite_setup

if node_tests mcp-stdio.test.mjs mcp-http.test.mjs; then it_pass "MCP SDK client over stdio and the runner's /mcp (and the Inspector over HTTP)"; else it_fail "MCP SDK client over stdio and the runner's /mcp"; fi
# Alone: node runs test files at once, and these count the sandboxes of runs named mcp-*.
if node_tests mcp-2026.test.mjs; then it_pass "MCP 2026-07-28 and tasks: SDK v2, requests from the specification, v1's 2025-11-25 tasks"; else it_fail "MCP 2026-07-28 over stdio and the runner's /mcp"; fi

# The Inspector starts its server with a clean environment: pass the test's
# instance and state folder (and engine) so that its sandbox is this test's.
env_args=(-e "SANDMAN_INSTANCE=$SANDMAN_INSTANCE" -e "SANDMAN_STATE_DIR=$SANDMAN_STATE_DIR")
for v in DOCKER_HOST DOCKER_TLS_VERIFY DOCKER_CERT_PATH; do
  [ -n "${!v:-}" ] && env_args+=(-e "$v=${!v}")
done
out=$(cd "$TS_DIR" && node_modules/.bin/mcp-inspector --cli "${env_args[@]}" "$SANDMAN" mcp \
  --method tools/list 2>/dev/null) || true
tools=$(python3 -c 'import json,sys; print(" ".join(sorted(t["name"] for t in json.load(sys.stdin)["tools"])))' <<<"$out" 2>/dev/null || true)
expect_eq "MCP Inspector --cli lists the tools" "diff edit_file execute fork glob grep ls pause read_file resume rollback run_code snapshot terminal_close terminal_open terminal_screen terminal_send write_file" "$tools"
left=$(docker ps -aq --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" | wc -l)
expect_eq "no sandbox left after the sessions" 0 "$left"
it_done
