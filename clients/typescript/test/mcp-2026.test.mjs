// MCP's 2026-07-28 revision beside the initialize era, against `sandman mcp`
// (stdio) and the runner's /mcp (streamable HTTP):
//   - the official SDK v2 client (@modelcontextprotocol/client), pinned to
//     2026-07-28 (no initialize: a server/discover probe, then requests
//     carrying their _meta) and in its default mode (initialize);
//   - requests written from the specification's text where the SDK has no
//     API (the tasks extension) or to see the wire: server/discover, a
//     tools/call with _meta and no session, a missing or unsupported
//     protocol version, headers that do not match the body, tasks made,
//     polled, cancelled, and another principal's task answered as unknown;
//   - the v1 SDK (1.32.2)'s experimental tasks of 2025-11-25.
// Needs SANDMAN_BIN and an engine (run through tests/integration/test_mcp_sdk.sh).
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as StdioV1 } from "@modelcontextprotocol/sdk/client/stdio.js";

import { deriveWorkerToken } from "../dist/index.js";
import { startRunner } from "./runner.mjs";

const bin = process.env.SANDMAN_BIN;
assert.ok(bin, "SANDMAN_BIN must name the sandman binary");
const V = "2026-07-28";
const TASKS = "io.modelcontextprotocol/tasks";
const TOOLS = ["diff", "edit_file", "execute", "fork", "glob", "grep", "ls", "pause", "read_file", "resume", "rollback", "run_code", "snapshot", "terminal_close", "terminal_open", "terminal_screen", "terminal_send", "write_file"];

function meta(tasks = false) {
  return {
    "io.modelcontextprotocol/protocolVersion": V,
    "io.modelcontextprotocol/clientInfo": { name: "spec-test", version: "1.0.0" },
    "io.modelcontextprotocol/clientCapabilities": tasks ? { extensions: { [TASKS]: {} } } : {},
  };
}

function text(result) {
  return result.content.map((c) => c.text ?? "").join("");
}

function mcpSandboxes() {
  const out = execFileSync(bin, ["sandbox", "list", "--json"], { encoding: "utf8" });
  return JSON.parse(out).filter((s) => (s.run_id ?? "").startsWith("mcp-"));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The sandboxes of `sandman mcp` processes are removed as they end; a
// client's close() may return before its process has ended (a bounded
// poll, 60 s).
/* `sandbox rm` spares a busy sandbox: the runner may still hold the worker's
 * sandbox for a moment after the session's last request (its agent
 * session parked in the background). A bounded poll, then the last error. */
async function removeWorkerSandbox(key) {
  for (let i = 0; ; i++) {
    try {
      execFileSync(bin, ["sandbox", "rm", "--worker-id", key]);
      return;
    } catch (e) {
      if (i >= 50) throw e;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function noneLeft() {
  const start = Date.now();
  while (mcpSandboxes().length > 0) {
    assert.ok(Date.now() - start < 60000, `left: ${JSON.stringify(mcpSandboxes())}`);
    await sleep(200);
  }
}

// Polls tasks/get (through get) until the task leaves "working", at most
// 120 s; honours the server's pollIntervalMs.
async function untilDone(get) {
  const start = Date.now();
  for (;;) {
    const t = await get();
    if (t.status !== "working") return t;
    assert.ok(Date.now() - start < 120000, "the task did not end");
    await sleep(Math.min(t.pollIntervalMs ?? 500, 1000));
  }
}

// The cancelled `sleep 600` is killed in the sandbox (a bounded poll: the
// kill reaches the sandbox after the task says cancelled). Waiting for it
// also lets the call end before the client closes: a client that kills
// its server a few seconds after closing its stdin (the v1 SDK) would
// otherwise stop it while the cancelled call settles, before it removes
// its sandbox.
async function commandGone(execute) {
  const start = Date.now();
  for (;;) {
    const r = await execute("ps | grep '[s]leep 600' || echo none");
    if (/^none\n/.test(text(r))) return;
    assert.ok(Date.now() - start < 30000, `the cancelled command still runs: ${text(r)}`);
    await sleep(200);
  }
}

// `sandman mcp` spoken to line by line.
function rawStdio() {
  const proc = spawn(bin, ["mcp"], { stdio: ["pipe", "pipe", "inherit"], env: { ...process.env } });
  const waiting = new Map();
  const lines = createInterface({ input: proc.stdout });
  lines.on("line", (line) => {
    const msg = JSON.parse(line);
    const w = waiting.get(JSON.stringify(msg.id));
    if (w) {
      waiting.delete(JSON.stringify(msg.id));
      w(msg);
    }
  });
  let next = 1;
  return {
    send(method, params, id = next++) {
      const body = { jsonrpc: "2.0", id, method };
      if (params !== undefined) body.params = params;
      const answer = new Promise((r) => waiting.set(JSON.stringify(id), r));
      proc.stdin.write(JSON.stringify(body) + "\n");
      return answer;
    },
    async close() {
      const done = new Promise((r) => proc.once("exit", r));
      proc.stdin.end();
      return done;
    },
  };
}

test("SDK v2 pinned to 2026-07-28 over stdio: discover, tools, files kept between stateless requests", async () => {
  const transport = new StdioClientTransport({ command: bin, args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
  const client = new Client({ name: "sandman-test", version: "1.0.0" }, { versionNegotiation: { mode: { pin: V } } });
  await client.connect(transport);
  try {
    assert.equal(client.getProtocolEra(), "modern");
    const discover = client.getDiscoverResult();
    assert.equal(discover.supportedVersions[0], V);
    assert.ok(discover.supportedVersions.includes("2025-11-25"));
    assert.ok(discover.capabilities.tools);
    assert.ok(discover.capabilities.extensions[TASKS], "the tasks extension is advertised");
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
    const run = await client.callTool({ name: "execute", arguments: { command: "echo modern; pwd" } });
    assert.equal(run.isError, false, text(run));
    assert.match(text(run), /modern\n\/workspace\n/);
    const w = await client.callTool({ name: "write_file", arguments: { path: "era.txt", content: "2026\n" } });
    assert.equal(w.isError, false, text(w));
    assert.equal(text(await client.callTool({ name: "read_file", arguments: { path: "era.txt" } })), "2026\n");
    const out = await client.callTool({ name: "read_file", arguments: { path: "../etc/passwd" } });
    assert.equal(out.isError, true);
  } finally {
    await client.close();
  }
  await noneLeft(); // the process's sandbox is removed when it ends
});

test("SDK v2 in its default mode (initialize) over stdio: the 2025-11-25 era", async () => {
  const transport = new StdioClientTransport({ command: bin, args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
  const client = new Client({ name: "sandman-test", version: "1.0.0" });
  await client.connect(transport);
  try {
    assert.equal(client.getProtocolEra(), "legacy");
    assert.equal(client.getDiscoverResult(), undefined);
    const run = await client.callTool({ name: "execute", arguments: { command: "echo legacy" } });
    assert.match(text(run), /legacy\n/);
  } finally {
    await client.close();
  }
  await noneLeft();
});

test("2026-07-28 over stdio from the specification: discover, _meta, refusals, tasks", async () => {
  const s = rawStdio();
  try {
    const d = await s.send("server/discover", { _meta: meta() });
    assert.equal(d.result.resultType, "complete");
    assert.deepEqual(d.result.supportedVersions, [V, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]);
    assert.equal(d.result._meta["io.modelcontextprotocol/serverInfo"].name, "sandman");
    assert.equal(typeof d.result.ttlMs, "number");
    assert.equal(d.result.cacheScope, "private");

    // A tool call with no initialize before it.
    const c = await s.send("tools/call", { name: "execute", arguments: { command: "echo no-handshake" }, _meta: meta() });
    assert.equal(c.result.resultType, "complete");
    assert.match(text(c.result), /no-handshake\n/);

    // A missing version (or capabilities): invalid params; an unknown one:
    // the versions spoken; removed methods: not found.
    assert.equal((await s.send("tools/list", {})).error.code, -32602);
    assert.equal((await s.send("tools/list")).error.code, -32602);
    const noCaps = await s.send("tools/list", { _meta: { "io.modelcontextprotocol/protocolVersion": V } });
    assert.equal(noCaps.error.code, -32602);
    const future = await s.send("tools/list", { _meta: { ...meta(), "io.modelcontextprotocol/protocolVersion": "2099-01-01" } });
    assert.equal(future.error.code, -32022);
    assert.equal(future.error.data.requested, "2099-01-01");
    assert.ok(future.error.data.supported.includes(V));
    assert.equal((await s.send("ping", { _meta: meta() })).error.code, -32601);
    assert.equal((await s.send("logging/setLevel", { level: "info", _meta: meta() })).error.code, -32601);

    // A client that declares the tasks extension gets a task for execute.
    const t = await s.send("tools/call", { name: "execute", arguments: { command: "sleep 1; echo from-a-task" }, _meta: meta(true) });
    assert.equal(t.result.resultType, "task");
    assert.equal(t.result.status, "working");
    assert.match(t.result.taskId, /^[0-9a-f]{32}$/);
    assert.equal(typeof t.result.ttlMs, "number");
    const done = await untilDone(async () => (await s.send("tasks/get", { taskId: t.result.taskId, _meta: meta(true) })).result);
    assert.equal(done.status, "completed");
    assert.equal(done.resultType, "complete");
    assert.match(text(done.result), /from-a-task\n/);
    assert.equal(done.result.structuredContent.exit_code, 0);
    // Without the extension on the request: refused (-32021); unknown ids: -32602.
    const noExt = await s.send("tasks/get", { taskId: t.result.taskId, _meta: meta() });
    assert.equal(noExt.error.code, -32021);
    assert.ok(noExt.error.data.requiredCapabilities.extensions[TASKS]);
    const unknown = await s.send("tasks/get", { taskId: "0".repeat(32), _meta: meta(true) });
    assert.equal(unknown.error.code, -32602);

    // A long command cancelled as a task: the task ends cancelled.
    const long = await s.send("tools/call", { name: "execute", arguments: { command: "sleep 600" }, _meta: meta(true) });
    assert.equal(long.result.resultType, "task");
    const ack = await s.send("tasks/cancel", { taskId: long.result.taskId, _meta: meta(true) });
    assert.equal(ack.result.resultType, "complete");
    const cancelled = await untilDone(async () => (await s.send("tasks/get", { taskId: long.result.taskId, _meta: meta(true) })).result);
    assert.equal(cancelled.status, "cancelled");
    await commandGone(async (command) => (await s.send("tools/call", { name: "execute", arguments: { command }, _meta: meta() })).result);
  } finally {
    await s.close();
  }
  assert.equal(mcpSandboxes().length, 0); // the process has exited: nothing may be left
});

test("the v1 SDK's 2025-11-25 tasks over stdio: a task-augmented execute, listed, its result, a cancel", async () => {
  const transport = new StdioV1({ command: bin, args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
  const client = new ClientV1({ name: "sandman-test", version: "1.0.0" });
  await client.connect(transport);
  try {
    assert.ok(client.getServerCapabilities().tasks?.requests?.tools?.call, "the tasks capability of 2025-11-25");
    const { tools } = await client.listTools();
    assert.equal(tools.find((t) => t.name === "execute").execution.taskSupport, "optional");
    const seen = [];
    let result;
    for await (const m of client.experimental.tasks.callToolStream({ name: "execute", arguments: { command: "sleep 1; echo v1-task" } })) {
      seen.push(m.type);
      if (m.type === "result") result = m.result;
      if (m.type === "error") throw m.error;
    }
    assert.equal(seen[0], "taskCreated");
    assert.ok(seen.includes("taskStatus"));
    assert.match(text(result), /v1-task\n/);

    const stream = client.experimental.tasks.callToolStream({ name: "execute", arguments: { command: "sleep 600" } });
    const first = await stream.next();
    assert.equal(first.value.type, "taskCreated");
    const id = first.value.task.taskId;
    const listed = await client.experimental.tasks.listTasks();
    assert.ok(listed.tasks.some((t) => t.taskId === id));
    const c = await client.experimental.tasks.cancelTask(id);
    assert.equal(c.status, "cancelled");
    assert.equal((await client.experimental.tasks.getTask(id)).status, "cancelled");
    await stream.return();
    await commandGone((command) => client.callTool({ name: "execute", arguments: { command } }));
  } finally {
    await client.close();
  }
  await noneLeft();
});

// ---- the runner's /mcp ----

let runner;
before(async () => {
  runner = await startRunner([], { tcp: true });
});
after(async () => {
  await runner?.stop();
});

async function post(body, { token = runner.token, query = "", headers = {} } = {}) {
  const h = {
    Authorization: `Bearer ${token}`,
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": V,
    "Mcp-Method": body.method,
  };
  const name = body.params?.name ?? body.params?.taskId;
  if (name !== undefined) h["Mcp-Name"] = name;
  const res = await fetch(`${runner.url}/mcp${query}`, { method: "POST", headers: { ...h, ...headers }, body: JSON.stringify(body) });
  return { status: res.status, session: res.headers.get("mcp-session-id"), body: res.status === 202 ? null : await res.json() };
}

test("SDK v2 pinned to 2026-07-28 over the runner's /mcp, and in its default mode", async () => {
  const connect = async (mode, token, query = "") => {
    const transport = new StreamableHTTPClientTransport(new URL(`${runner.url}/mcp${query}`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    const client = new Client({ name: "sandman-test", version: "1.0.0" }, mode ? { versionNegotiation: { mode } } : {});
    await client.connect(transport);
    client.end = async () => {
      await transport.terminateSession(); /* sends nothing when no session was made */
      await client.close();
    };
    return client;
  };
  const modern = await connect({ pin: V }, runner.token);
  assert.equal(modern.getProtocolEra(), "modern");
  const { tools } = await modern.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS);
  const w = await modern.callTool({ name: "write_file", arguments: { path: "http.txt", content: "stateless\n" } });
  assert.equal(w.isError, false, text(w));
  assert.equal(text(await modern.callTool({ name: "read_file", arguments: { path: "http.txt" } })), "stateless\n");
  await modern.end();

  // A worker token's requests run in that worker's sandbox.
  const worker = await connect({ pin: V }, deriveWorkerToken(runner.token, "mw26"), "?worker_key=mw26");
  const ww = await worker.callTool({ name: "write_file", arguments: { path: "mine.txt", content: "mw26\n" } });
  assert.equal(ww.isError, false, text(ww));
  await worker.end();
  assert.equal(await runner.client.files.readText({ worker_key: "mw26" }, "mine.txt"), "mw26\n");
  await removeWorkerSandbox("mw26");

  const legacy = await connect(null, runner.token);
  assert.equal(legacy.getProtocolEra(), "legacy");
  const r = await legacy.callTool({ name: "execute", arguments: { command: "echo legacy-http" } });
  assert.match(text(r), /legacy-http\n/);
  await legacy.end();
});

test("2026-07-28 over the runner's /mcp from the specification: no session, headers, refusals", async () => {
  const d = await post({ jsonrpc: "2.0", id: 1, method: "server/discover", params: { _meta: meta() } });
  assert.equal(d.status, 200);
  assert.equal(d.session, null, "no Mcp-Session-Id is minted");
  assert.equal(d.body.result.supportedVersions[0], V);
  const c = await post({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "execute", arguments: { command: "echo over-http" }, _meta: meta() } });
  assert.equal(c.status, 200);
  assert.equal(c.session, null);
  assert.match(text(c.body.result), /over-http\n/);

  // Headers that do not say what the body says: 400, HeaderMismatch.
  const call = { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "execute", arguments: { command: "true" }, _meta: meta() } };
  for (const headers of [{ "Mcp-Name": "read_file" }, { "Mcp-Method": "tools/list" }, { "MCP-Protocol-Version": "2025-11-25" }]) {
    const m = await post(call, { headers });
    assert.equal(m.status, 400);
    assert.equal(m.body.error.code, -32020);
    assert.equal(m.body.id, 3);
  }
  const b64 = await post(call, { headers: { "Mcp-Name": `=?base64?${Buffer.from("execute").toString("base64")}?=` } });
  assert.equal(b64.status, 200);
  // Missing capabilities, an unknown version, an unknown method.
  const bad = await post({ jsonrpc: "2.0", id: 4, method: "tools/list", params: { _meta: { "io.modelcontextprotocol/protocolVersion": V } } });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.code, -32602);
  const fut = await post(
    { jsonrpc: "2.0", id: 5, method: "tools/list", params: { _meta: { ...meta(), "io.modelcontextprotocol/protocolVersion": "2099-01-01" } } },
    { headers: { "MCP-Protocol-Version": "2099-01-01" } },
  );
  assert.equal(fut.status, 400);
  assert.equal(fut.body.error.code, -32022);
  assert.ok(fut.body.error.data.supported.includes(V));
  const nf = await post({ jsonrpc: "2.0", id: 6, method: "ping", params: { _meta: meta() } });
  assert.equal(nf.status, 404);
  assert.equal(nf.body.error.code, -32601);
  // Without the runner's token nothing is answered.
  const anon = await fetch(`${runner.url}/mcp`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "server/discover", params: { _meta: meta() } }) });
  assert.equal(anon.status, 401);
});

test("tasks over the runner's /mcp: made, polled, cancelled; another principal's task is unknown", async () => {
  const t = await post({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "execute", arguments: { command: "sleep 1; echo http-task" }, _meta: meta(true) } });
  assert.equal(t.status, 200);
  assert.equal(t.body.result.resultType, "task");
  const id = t.body.result.taskId;
  const get = (token, query) => post({ jsonrpc: "2.0", id: 2, method: "tasks/get", params: { taskId: id, _meta: meta(true) } }, { token, query });

  // A worker's token, on its own key, names the control token's task: unknown,
  // and its cancel does nothing.
  const wtoken = deriveWorkerToken(runner.token, "thief");
  const stolen = await get(wtoken, "?worker_key=thief");
  assert.equal(stolen.status, 200);
  assert.equal(stolen.body.error.code, -32602);
  assert.match(stolen.body.error.message, /not found/i);
  const cancelByOther = await post({ jsonrpc: "2.0", id: 3, method: "tasks/cancel", params: { taskId: id, _meta: meta(true) } }, { token: wtoken, query: "?worker_key=thief" });
  assert.equal(cancelByOther.body.error.code, -32602);

  const done = await untilDone(async () => (await get()).body.result);
  assert.equal(done.status, "completed");
  assert.match(text(done.result), /http-task\n/);

  const long = await post({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "execute", arguments: { command: "sleep 600" }, _meta: meta(true) } });
  const lid = long.body.result.taskId;
  const ack = await post({ jsonrpc: "2.0", id: 5, method: "tasks/cancel", params: { taskId: lid, _meta: meta(true) } });
  assert.equal(ack.status, 200);
  assert.equal(ack.body.result.resultType, "complete");
  const c = await untilDone(async () => (await post({ jsonrpc: "2.0", id: 6, method: "tasks/get", params: { taskId: lid, _meta: meta(true) } })).body.result);
  assert.equal(c.status, "cancelled");
});

test("the runner's stateless context ends with the runner, and its sandbox with it", async () => {
  const runs = (await runner.client.sandboxes()).map((s) => s.run_id ?? "").filter((r) => r.startsWith("mcp-"));
  assert.equal(runs.length, 1, `one context for the control token, one sandbox: ${runs}`);
  await runner.stop();
  runner = null;
  assert.deepEqual(mcpSandboxes().filter((s) => runs.includes(s.run_id)), []);
});
