// Rest, snapshots, fork, rollback and diff with the TypeScript client,
// against a real runner and engine (run through
// tests/integration/test_ts_snapshots.sh): pauseSandbox (freeze, stop),
// resumeSandbox, snapshotSandbox, listSnapshots, getSnapshot, forkSnapshot,
// execute({from_snapshot}), diffSandbox, rollbackSandbox, deleteSnapshot; another worker's token is
// answered 404 for a worker's sandbox and snapshot, and its list is empty.
// The MCP tools snapshot, diff, rollback, fork, pause and resume on a worker
// session's own sandbox over the runner's /mcp (the official MCP SDK
// client; pause and resume never reach another session's sandbox); another
// worker's session cannot roll back to, diff against or fork that snapshot
// (the same tool error as for a missing one); a preview URL of the
// session's sandbox ends with its MCP snapshot, as with the route's.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { SandmanClient, SandmanError } from "../dist/index.js";
import { startRunner } from "./runner.mjs";

let runner;
before(async () => {
  runner = await startRunner([], { tcp: true });
});
after(async () => {
  if (runner) {
    for (const s of await runner.client.listSnapshots().catch(() => [])) await runner.client.deleteSnapshot(s.name).catch(() => {});
    await runner.stop();
  }
});

const is404 = (e) => e instanceof SandmanError && e.status === 404;

test("the TypeScript client: pause, resume, snapshot, fork, diff, rollback, snapshots", async () => {
  const k1 = SandmanClient.forWorker(runner.token, "k1", { address: runner.address });
  const k2 = SandmanClient.forWorker(runner.token, "k2", { address: runner.address });
  const own = { workerKey: "k1" };
  const first = await k1.execute({ command: "echo kept > /workspace/note", mode: "per_worker", worker_key: "k1" });
  const id = first.sandbox_id;
  assert.ok(id, JSON.stringify(first));

  const frozen = await k1.pauseSandbox(id, { ...own, tier: "freeze" });
  assert.equal(frozen.state, "frozen");
  await assert.rejects(k2.pauseSandbox(id, { workerKey: "k2" }), is404);
  assert.equal((await k1.resumeSandbox(id, own)).state, "running");
  assert.equal((await k1.pauseSandbox(id, { ...own, tier: "stop" })).state, "stopped");
  assert.equal((await k1.resumeSandbox(id, own)).state, "running");

  const snap = await k1.snapshotSandbox(id, { ...own, name: "t1", noWait: true });
  assert.equal(snap.name, "t1");
  assert.equal(snap.owner, "worker:k1");
  assert.ok(snap.size.workspace > 0, JSON.stringify(snap));
  await assert.rejects(k2.snapshotSandbox(id, { workerKey: "k2", name: "t2" }), is404);
  assert.deepEqual((await k1.listSnapshots(own)).map((s) => s.name), ["t1"]);
  assert.deepEqual(await k2.listSnapshots({ workerKey: "k2" }), []);
  assert.equal((await k1.getSnapshot("t1", own)).name, "t1");
  await assert.rejects(k2.getSnapshot("t1", { workerKey: "k2" }), is404);
  await assert.rejects(k2.forkSnapshot("t1", { workerKey: "k2" }), is404);

  const { forks } = await k1.forkSnapshot("t1", { ...own, count: 2, prefix: "tf" });
  assert.equal(forks.length, 2);
  for (const f of forks) {
    assert.equal(f.error, null);
    assert.match(f.run_id, /^tf-/);
    const r = await k1.execute({ command: "cat /workspace/note", run_id: f.run_id, worker_key: "k1" });
    assert.equal(r.stdout, "kept\n");
    assert.notEqual(r.sandbox_id, id);
  }

  // execute({from_snapshot}) makes a new run's sandbox from it; another worker's token: 404, as a missing one.
  const fromSnap = await k1.execute({ command: "cat /workspace/note", mode: "per_run", run_id: "tx-1", from_snapshot: "t1", worker_key: "k1" });
  assert.equal(fromSnap.stdout, "kept\n", JSON.stringify(fromSnap));
  assert.notEqual(fromSnap.sandbox_id, id);
  await assert.rejects(k2.execute({ command: "true", mode: "per_run", run_id: "tx-2", from_snapshot: "t1", worker_key: "k2" }), is404);
  await runner.client.deleteSandbox(fromSnap.sandbox_id);

  await k1.execute({ command: "echo new > /workspace/added", sandbox_id: id, worker_key: "k1" });
  const d = await k1.diffSandbox(id, "t1", own);
  assert.deepEqual(d.added.map((x) => x.path), ["added"]);
  assert.deepEqual(d.modified, []);
  assert.deepEqual(d.deleted, []);
  await assert.rejects(k2.diffSandbox(id, "t1", { workerKey: "k2" }), is404);

  const back = await k1.rollbackSandbox(id, "t1", own);
  assert.equal(back.state, "running");
  const ls = await k1.execute({ command: "ls /workspace", sandbox_id: back.id, worker_key: "k1" });
  assert.equal(ls.stdout, "note\n");

  // The sandboxes made from the snapshot go first: its image is kept while one uses it.
  for (const f of forks) await runner.client.deleteSandbox(f.id);
  await runner.client.deleteSandbox(back.id);
  await assert.rejects(k2.deleteSnapshot("t1", { workerKey: "k2" }), is404);
  assert.equal((await k1.deleteSnapshot("t1", own)).removed, true);
  assert.deepEqual(await k1.listSnapshots(own), []);
  await assert.rejects(k1.getSnapshot("t1", own), is404);
});

async function mcpSession(workerKey) {
  const token = SandmanClient.forWorker(runner.token, workerKey, { address: runner.address }).token;
  const transport = new StreamableHTTPClientTransport(new URL(`${runner.url}/mcp?worker_key=${workerKey}`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "sandman-test", version: "1.0.0" });
  await client.connect(transport);
  const call = (name, args) => client.callTool({ name, arguments: args });
  return { client, transport, call };
}

const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");

test("MCP tools: a session snapshots, diffs, rolls back, forks, pauses and resumes its own sandbox; another worker's cannot use it", async () => {
  const m1 = await mcpSession("m1");
  const m2 = await mcpSession("m2");
  try {
    assert.equal((await m1.call("execute", { command: "echo kept > note" })).isError, false);
    // A preview URL of the session's sandbox (no server: 502) ends with the MCP snapshot, as with the route's.
    const [own] = await runner.client.listSandboxes({ workerKey: "m1" });
    const m1token = SandmanClient.forWorker(runner.token, "m1").token;
    const pv = await fetch(`${runner.url}/v1/sandboxes/${own.id}/previews?port=8000&worker_key=m1`, { method: "POST", headers: { Authorization: `Bearer ${m1token}` } });
    assert.equal(pv.status, 201, await pv.clone().text());
    const pvPath = (await pv.json()).path;
    const visit = async (path) => (await fetch(`${runner.url}${path}index.html`)).status;
    assert.equal(await visit(pvPath), 502);
    const unknown = await visit("/preview/" + "0".repeat(48) + "/");
    assert.equal(unknown, 404);
    const snap = await m1.call("snapshot", { name: "ms1" });
    assert.equal(snap.isError, false, text(snap));
    assert.equal(await visit(pvPath), unknown, "the preview outlived the MCP snapshot");
    assert.equal(snap.structuredContent.name, "ms1");
    assert.equal(snap.structuredContent.owner, "worker:m1");
    await m1.call("execute", { command: "echo new > added" });
    const d = await m1.call("diff", { snapshot: "ms1" });
    assert.equal(d.isError, false, text(d));
    assert.deepEqual(d.structuredContent.added.map((x) => x.path), ["added"]);
    assert.equal(d.structuredContent.truncated, false);

    // Another worker's session: the snapshot is not found, exactly as a missing one.
    assert.equal((await m2.call("execute", { command: "echo theirs > mine" })).isError, false);
    for (const [tool, extra] of [["rollback", {}], ["diff", {}], ["fork", { count: 1 }]]) {
      const got = await m2.call(tool, { snapshot: "ms1", ...extra });
      const miss = await m2.call(tool, { snapshot: "nosuch", ...extra });
      assert.equal(got.isError, true, `${tool}: ${text(got)}`);
      assert.equal(text(got).replaceAll("ms1", "X"), text(miss).replaceAll("nosuch", "X"), tool);
    }
    assert.equal(text(await m2.call("execute", { command: "ls" })), "mine\n[exit code 0]");
    assert.deepEqual((await runner.client.listSnapshots()).map((s) => s.name), ["ms1"]);

    // pause and resume act on the session's own sandbox only.
    const stateOf = async (key) => (await runner.client.listSandboxes({ workerKey: key }))[0].state;
    const p1 = await m1.call("pause", { tier: "stop" });
    assert.equal(p1.isError, false, text(p1));
    assert.equal(p1.structuredContent.state, "stopped");
    assert.equal(p1.structuredContent.previous, "running");
    assert.equal(await stateOf("m1"), "stopped");
    const p2 = await m2.call("pause", {});
    assert.equal(p2.isError, false, text(p2));
    assert.equal(p2.structuredContent.state, "frozen");
    assert.equal(await stateOf("m2"), "frozen");
    assert.equal(await stateOf("m1"), "stopped", "another session's pause reached this one's sandbox");
    assert.equal((await m2.call("pause", { tier: "sleep" })).isError, true);
    const r1 = await m1.call("resume", {});
    assert.equal(r1.isError, false, text(r1));
    assert.equal(r1.structuredContent.previous, "stopped");
    assert.equal(r1.structuredContent.state, "running");
    assert.equal(await stateOf("m2"), "frozen", "this session's resume reached another's sandbox");
    // A frozen one comes back by itself with the next call.
    assert.equal(text(await m2.call("execute", { command: "ls" })), "mine\n[exit code 0]");
    assert.equal(await stateOf("m2"), "running");

    const back = await m1.call("rollback", { snapshot: "ms1" });
    assert.equal(back.isError, false, text(back));
    assert.equal(back.structuredContent.state, "running");
    assert.equal(text(await m1.call("execute", { command: "ls" })), "note\n[exit code 0]");

    const f = await m1.call("fork", { snapshot: "ms1", count: 1, prefix: "mf" });
    assert.equal(f.isError, false, text(f));
    const [fork] = f.structuredContent.forks;
    assert.match(fork.run_id, /^mf-/);
    const k1 = SandmanClient.forWorker(runner.token, "m1", { address: runner.address });
    const r = await k1.execute({ command: "cat /workspace/note", run_id: fork.run_id, worker_key: "m1" });
    assert.equal(r.stdout, "kept\n");
    await runner.client.deleteSandbox(fork.id);
  } finally {
    for (const m of [m1, m2]) {
      await m.transport.terminateSession().catch(() => {});
      await m.client.close();
    }
    for (const sb of await runner.client.listSandboxes({ all: true })) await runner.client.deleteSandbox(sb.id).catch(() => {});
    await runner.client.deleteSnapshot("ms1").catch(() => {});
  }
});
