// Sandboxes as resources with the TypeScript client, and MCP sessions that
// leave nothing behind, against a real runner and engine (run through
// tests/integration/test_ts_sandboxes.sh): createSandbox, a call by
// sandbox_id, listSandboxes by label, keepAlive, deleteSandbox; the
// official MCP SDK's client.close() without terminateSession(), and an
// MCP Inspector --cli call: their sessions end after --mcp-session-idle
// and their sandboxes go.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { SandmanError } from "../dist/index.js";
import { startRunner } from "./runner.mjs";

let runner;
before(async () => {
  runner = await startRunner(["--mcp-session-idle", "2s", "--reap-interval", "1s"], { tcp: true });
});
after(async () => {
  await runner?.stop();
});

// A bounded poll for a condition (never a fixed sleep).
async function waitFor(cond, timeoutMs = 60_000) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 250));
  }
  return cond();
}

const mcpSandboxes = async () => (await runner.client.listSandboxes({ all: true })).filter((s) => (s.run_id ?? "").startsWith("mcp-"));

test("the TypeScript client: create, call by id, list by label, keep alive, delete", async () => {
  const c = runner.client;
  const sb = await c.createSandbox({ labels: { app: "ts" }, idle_timeout_s: 600 });
  assert.equal(sb.resource, true);
  assert.equal(sb.idle_timeout_s, 600);
  const r = await c.execute({ command: "echo ts > /workspace/t; cat /workspace/t", sandbox_id: sb.id });
  assert.equal(r.stdout, "ts\n");
  assert.equal(r.sandbox_id, sb.id);
  assert.equal(await c.files.readText({ sandbox_id: sb.id }, "t"), "ts\n");
  assert.deepEqual((await c.listSandboxes({ labels: { app: "ts" } })).map((s) => s.id), [sb.id]);
  assert.deepEqual(await c.listSandboxes({ labels: { app: "other" } }), []);
  assert.equal((await c.keepAlive(sb.id)).id, sb.id);
  assert.equal((await c.getSandbox(sb.name)).id, sb.id);
  assert.equal((await c.deleteSandbox(sb.id)).removed, true);
  await assert.rejects(c.getSandbox(sb.id), (e) => e instanceof SandmanError && e.status === 404);
});

test("an MCP SDK client that closes without ending its session leaves no sandbox", async () => {
  assert.deepEqual(await mcpSandboxes(), []);
  const transport = new StreamableHTTPClientTransport(new URL(`${runner.url}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${runner.token}` } },
  });
  const client = new Client({ name: "sandman-test", version: "1.0.0" });
  await client.connect(transport);
  const run = await client.callTool({ name: "execute", arguments: { command: "echo hi" } });
  assert.equal(run.isError, false);
  assert.equal((await mcpSandboxes()).length, 1);
  // close() only drops the connection: no DELETE reaches the runner.
  await client.close();
  assert.ok(await waitFor(async () => (await mcpSandboxes()).length === 0), "the session's sandbox is still there");
});

test("an MCP Inspector --cli call leaves no sandbox", async () => {
  const out = execFileSync("node_modules/.bin/mcp-inspector", ["--cli", `${runner.url}/mcp`, "--transport", "http", "--header", `Authorization: Bearer ${runner.token}`, "--method", "tools/call", "--tool-name", "execute", "--tool-arg", "command=echo from-inspector"], { encoding: "utf8" });
  assert.match(out, /from-inspector/);
  assert.ok(await waitFor(async () => (await mcpSandboxes()).length === 0), "the Inspector's session's sandbox is still there");
});
