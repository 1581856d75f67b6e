// /mcp on a real runner with the official MCP TypeScript SDK's client over
// the streamable HTTP transport: list the tools, run a command, write, edit
// and read back a file, type into a terminal of the session; a worker
// token's session, another token refused the session; the session's
// sandbox removed when it ends (run through
// tests/integration/test_mcp_sdk.sh).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { deriveWorkerToken } from "../dist/index.js";
import { startRunner } from "./runner.mjs";

let runner;
before(async () => {
  runner = await startRunner([], { tcp: true });
});
after(async () => {
  await runner?.stop();
});

function text(result) {
  return result.content.map((c) => c.text ?? "").join("");
}

// A terminal tool answers once the screen was quiet for a moment, which a
// slow machine can reach before the program has written all it will:
// read the terminal's screen again until re shows (a bounded poll, 60 s).
async function screenUntil(client, result, terminal, re) {
  const until = Date.now() + 60_000;
  while (!re.test(text(result)) && Date.now() < until)
    result = await client.callTool({ name: "terminal_screen", arguments: { terminal, wait_ms: 1000 } });
  return result;
}

async function connect(token, query = "") {
  const transport = new StreamableHTTPClientTransport(new URL(`${runner.url}/mcp${query}`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "sandman-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

test("the runner's /mcp with the MCP SDK client", async () => {
  const { client, transport } = await connect(runner.token);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ["diff", "edit_file", "execute", "fork", "glob", "grep", "ls", "pause", "read_file", "resume", "rollback", "run_code", "snapshot", "terminal_close", "terminal_open", "terminal_screen", "terminal_send", "write_file"]);
  const run = await client.callTool({ name: "execute", arguments: { command: "echo hello; pwd" } });
  assert.equal(run.isError, false, text(run));
  assert.match(text(run), /hello\n\/workspace\n/);
  const w = await client.callTool({ name: "write_file", arguments: { path: "notes.md", content: "a\nb\n" } });
  assert.equal(w.isError, false, text(w));
  const e = await client.callTool({ name: "edit_file", arguments: { path: "notes.md", old_string: "b", new_string: "c" } });
  assert.equal(e.isError, false, text(e));
  assert.equal(text(await client.callTool({ name: "read_file", arguments: { path: "notes.md" } })), "a\nc\n");
  const out = await client.callTool({ name: "read_file", arguments: { path: "../etc/passwd" } });
  assert.equal(out.isError, true);
  // A terminal in the session's sandbox, through the runner: it sees the file the tools wrote.
  const sent = await client.callTool({ name: "terminal_send", arguments: { keys: "cat notes.md; echo t-$((40+2))\r" } });
  assert.equal(sent.isError, false, text(sent));
  const typed = await screenUntil(client, sent, sent.structuredContent.terminal, /t-42/);
  assert.match(text(typed), /t-42/);
  assert.match(typed.structuredContent.text, /^a$/m);

  // The session is the control token's: a worker token cannot use it.
  const sid = transport.sessionId;
  assert.ok(sid);
  const stolen = await fetch(`${runner.url}/mcp?worker_key=w9`, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${deriveWorkerToken(runner.token, "w9")}`,
      "Mcp-Session-Id": sid,
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": "2025-06-18",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" }),
  });
  assert.equal(stolen.status, 404);
  // A browser page must not reach a local runner: any Origin is refused.
  const page = await fetch(`${runner.url}/mcp`, {
    method: "POST",
    headers: { Authorization: `Bearer ${runner.token}`, Origin: "http://page.example", "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "p", version: "1" } } }),
  });
  assert.equal(page.status, 403);
  const before = (await runner.client.sandboxes()).filter((s) => (s.run_id ?? "").startsWith("mcp-")).length;
  assert.equal(before, 1);
  await transport.terminateSession();
  await client.close();
  const left = (await runner.client.sandboxes()).filter((s) => (s.run_id ?? "").startsWith("mcp-")).length;
  assert.equal(left, 0);
});

test("a worker token's MCP session uses that worker's sandbox", async () => {
  const { client } = await connect(deriveWorkerToken(runner.token, "mw1"), "?worker_key=mw1");
  const w = await client.callTool({ name: "write_file", arguments: { path: "mine.txt", content: "mw1\n" } });
  assert.equal(w.isError, false, text(w));
  await client.close();
  const r = await runner.client.files.readText({ worker_key: "mw1" }, "mine.txt");
  assert.equal(r, "mw1\n");
  await assert.rejects(connect(deriveWorkerToken(runner.token, "mw1"), "?worker_key=mw2"));
  // A worker's sandbox outlives its sessions by design: this test removes it.
  execFileSync(process.env.SANDMAN_BIN, ["sandbox", "rm", "--worker-id", "mw1"]);
});

test("the MCP Inspector's CLI lists the tools over HTTP", async () => {
  const out = execFileSync("node_modules/.bin/mcp-inspector", ["--cli", `${runner.url}/mcp`, "--transport", "http", "--header", `Authorization: Bearer ${runner.token}`, "--method", "tools/list"], { encoding: "utf8" });
  const names = JSON.parse(out).tools.map((t) => t.name).sort();
  assert.deepEqual(names, ["diff", "edit_file", "execute", "fork", "glob", "grep", "ls", "pause", "read_file", "resume", "rollback", "run_code", "snapshot", "terminal_close", "terminal_open", "terminal_screen", "terminal_send", "write_file"]);
});
