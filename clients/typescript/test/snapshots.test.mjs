// Rest, snapshots, fork, rollback and diff with the TypeScript client,
// against a real runner and engine (run through
// tests/integration/test_ts_snapshots.sh): pauseSandbox (freeze, stop),
// resumeSandbox, snapshotSandbox, listSnapshots, getSnapshot, forkSnapshot,
// diffSandbox, rollbackSandbox, deleteSnapshot; another worker's token is
// answered 404 for a worker's sandbox and snapshot, and its list is empty.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { SandmanClient, SandmanError } from "../dist/index.js";
import { startRunner } from "./runner.mjs";

let runner;
before(async () => {
  runner = await startRunner();
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

  for (const f of forks) await runner.client.deleteSandbox(f.id);
  await assert.rejects(k2.deleteSnapshot("t1", { workerKey: "k2" }), is404);
  assert.equal((await k1.deleteSnapshot("t1", own)).removed, true);
  assert.deepEqual(await k1.listSnapshots(own), []);
  await assert.rejects(k1.getSnapshot("t1", own), is404);
  await runner.client.deleteSandbox(back.id);
});
