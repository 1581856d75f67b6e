// The OpenAI Agents SDK adapter's session state and snapshot hooks against
// a real runner and engine, through the SDK's own runtime with a scripted
// model (run through tests/integration/test_ts_adapter_state.sh):
//
// - a run interrupted for an approval keeps its session; its RunState, as
//   text (no token in it), is taken up by new client objects (another
//   process, as far as the SDK can tell): the same sandbox, stopped in the
//   meantime, resumes by itself and holds the file the first run wrote;
// - a run with a sandman snapshot spec leaves a snapshot (owned by the
//   worker) named in its state; a run started from it sees the file, and
//   its writes do not reach the original; its state, once its own sandbox
//   is gone, is resumed on a fork of the snapshot it names;
// - another worker can neither start from that snapshot nor resume that
//   state: refused as missing ones are; a state whose sandbox is gone and
//   names no snapshot is refused too;
// - a worker's state resumed on its sandbox, frozen in between (the first
//   call thaws it); a named run's state whose sandbox was removed and made
//   again by a later call is refused (not the same sandbox).
// - a serialized state keeps no environment value; a state from JSON is
//   checked (names, mode, snapshot type); a remote snapshot store, and a
//   snapshot to start from with a runId, are refused.
// - a state whose own sandbox was swapped for a named run's (written by
//   someone else) is refused, and delete(state) leaves that sandbox alone.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Runner, RunState, tool } from "@openai/agents";
import {
  InMemoryRemoteSnapshotStore,
  SandboxAgent,
  SandboxConfigurationError,
  SandboxSnapshotNotRestorableError,
  SandboxUnsupportedFeatureError,
  shell,
} from "@openai/agents/sandbox";

import { SandmanClient } from "../dist/index.js";
import { SandmanSandboxClient, sandmanSnapshot } from "../dist/adapters/openai-agents.js";
import { startRunner } from "./runner.mjs";
import { call, message, ScriptedModel } from "./scripted-model.mjs";

let runner;
before(async () => {
  runner = await startRunner();
});
after(async () => {
  if (runner) {
    for (const sb of await runner.client.listSandboxes({ all: true }).catch(() => [])) await runner.client.deleteSandbox(sb.id).catch(() => {});
    for (const s of await runner.client.listSnapshots().catch(() => [])) await runner.client.deleteSnapshot(s.name).catch(() => {});
    await runner.stop();
  }
});

const run = (agent, input, sandbox) => new Runner({ tracingDisabled: true }).run(agent, input, { sandbox });

// A tool the model may call only once a person approves it: the run stops there.
const deploy = tool({
  name: "deploy",
  description: "deploys",
  parameters: { type: "object", properties: {}, required: [], additionalProperties: false },
  strict: true,
  needsApproval: true,
  execute: async () => "deployed",
});

function coder(turns) {
  const model = new ScriptedModel(turns);
  return { model, agent: new SandboxAgent({ name: "coder", instructions: "test", model, capabilities: [shell()], tools: [deploy] }) };
}

const notRestorable = (re) => (e) => e instanceof SandboxSnapshotNotRestorableError && re.test(e.message);

test("a RunState taken up by new client objects resumes the same sandbox, stopped in between", async () => {
  const first = coder([[call("c1", "exec_command", { cmd: "echo 'first run' > /workspace/kept.txt" })], [call("c2", "deploy", {})]]);
  const r1 = await run(first.agent, "write and deploy", { client: new SandmanSandboxClient(runner.client) });
  assert.equal(r1.interruptions.length, 1);
  const text = r1.state.toString();
  assert.ok(!text.includes(runner.token), "the run state holds the runner's token");
  const saved = JSON.parse(text).sandbox.sessionState.providerState;
  assert.ok(saved.sandboxId, text);
  assert.deepEqual(Object.keys(saved).sort(), ["runId", "sandboxId", "snapshotSpec"]);
  const [made] = (await runner.client.listSandboxes()).filter((s) => s.run_id === saved.runId);
  assert.equal(made.id, saved.sandboxId);
  assert.equal((await runner.client.pauseSandbox(saved.sandboxId, { tier: "stop" })).state, "stopped");

  // Another process: new objects from the text alone.
  const client = new SandmanClient({ address: runner.address, token: runner.token });
  const second = coder([[call("c3", "exec_command", { cmd: "cat /workspace/kept.txt; hostname" })], [message("done")]]);
  const state = await RunState.fromString(second.agent, text);
  state.approve(state.getInterruptions()[0]);
  const r2 = await run(second.agent, state, { client: new SandmanSandboxClient(client) });
  assert.equal(r2.finalOutput, "done");
  const seen = second.model.lastInput();
  assert.match(seen, /deployed/);
  assert.match(seen, /first run\\n/);
  // The SDK ended the session it resumed: the sandbox went with it.
  await assert.rejects(runner.client.getSandbox(saved.sandboxId), (e) => e.status === 404);

  // Its state again, now that the sandbox is gone and no snapshot was asked for: refused.
  const adapter = new SandmanSandboxClient(client);
  const again = await adapter.deserializeSessionState({ ...saved, manifest: {} });
  await assert.rejects(adapter.resume(again), notRestorable(/was not found and its state names no snapshot/));
});

test("a completed run's own sandbox, without a snapshot spec, leaves no state to resume", async () => {
  const { agent } = coder([[message("done")]]);
  const r = await run(agent, "nothing", { client: new SandmanSandboxClient(runner.client) });
  assert.equal(r.finalOutput, "done");
  assert.equal(JSON.parse(r.state.toString()).sandbox, undefined);
});

test("a sandman snapshot through the SDK: a run starts from it, its writes stay its own; another worker cannot use it", async () => {
  const k1 = SandmanClient.forWorker(runner.token, "sdk-k1", { address: runner.address });
  const k2 = SandmanClient.forWorker(runner.token, "sdk-k2", { address: runner.address });
  const own = { worker_key: "sdk-k1", mode: "per_worker" };

  // A worker's run with a snapshot spec: the SDK serializes the session at its end, and that takes the snapshot.
  const base = coder([[call("c1", "exec_command", { cmd: "echo base > /workspace/base.txt" })], [message("done")]]);
  const r1 = await run(base.agent, "write", { client: new SandmanSandboxClient(k1, { workerKey: "sdk-k1" }), snapshot: sandmanSnapshot({ name: "sdk-base" }) });
  assert.equal(r1.finalOutput, "done");
  const s1 = JSON.parse(r1.state.toString()).sandbox.sessionState;
  assert.deepEqual(s1.snapshot, { id: "sdk-base", type: "sandman" });
  const [perWorker] = await k1.listSandboxes({ workerKey: "sdk-k1" });
  assert.equal(s1.providerState.boundSandboxId, perWorker.id);
  const [snap] = await k1.listSnapshots({ workerKey: "sdk-k1" });
  assert.equal(snap.name, "sdk-base");
  assert.equal(snap.owner, "worker:sdk-k1");

  // A run started from the snapshot: a fork, which sees the file; what it writes stays in it.
  const fork = coder([
    [call("c1", "exec_command", { cmd: "cat /workspace/base.txt && echo fork > /workspace/base.txt && echo mine > /workspace/fork.txt" })],
    [message("done")],
  ]);
  const r2 = await run(fork.agent, "change", { client: new SandmanSandboxClient(k1, { workerKey: "sdk-k1" }), snapshot: sandmanSnapshot({ from: "sdk-base" }) });
  assert.equal(r2.finalOutput, "done");
  assert.match(fork.model.lastInput(), /Output:\\nbase\\n/);
  assert.equal(await k1.files.readText(own, "base.txt"), "base\n");
  await assert.rejects(k1.files.stat(own, "fork.txt"), (e) => e.status === 404);
  // Its state names the fork's own snapshot (taken at its end: the runner's default name); the fork went with the session.
  const s2 = JSON.parse(r2.state.toString()).sandbox.sessionState;
  assert.equal(s2.snapshot.type, "sandman");
  assert.match(s2.snapshot.id, /^snap-/);
  await assert.rejects(k1.getSandbox(s2.providerState.sandboxId, { workerKey: "sdk-k1" }), (e) => e.status === 404);

  // That state resumed: its sandbox is gone, so the session starts again on a fork of its snapshot.
  const mine = new SandmanSandboxClient(k1, { workerKey: "sdk-k1" });
  const restored = await mine.resume(await mine.deserializeSessionState({ ...s2.providerState, manifest: s2.manifest, snapshot: s2.snapshot }));
  assert.notEqual(restored.state.sandboxId, s2.providerState.sandboxId);
  assert.equal(Buffer.from(await restored.readFile({ path: "fork.txt" })).toString(), "mine\n");
  assert.equal(Buffer.from(await restored.readFile({ path: "base.txt" })).toString(), "fork\n");
  // Serialized again: the new snapshot replaces the one the state named (as the SDK's providers replace theirs).
  await mine.serializeSessionState(restored.state);
  assert.notEqual(restored.state.snapshot.id, s2.snapshot.id);
  const names = (await k1.listSnapshots({ workerKey: "sdk-k1" })).map((s) => s.name).sort();
  assert.deepEqual(names, ["sdk-base", restored.state.snapshot.id].sort());
  await restored.close();

  // Another worker: the snapshot and the states are answered as missing ones.
  const theirs = new SandmanSandboxClient(k2, { workerKey: "sdk-k2" });
  const errorOf = (p) => p.then(() => assert.fail("not refused"), (e) => e);
  const refused = await errorOf(theirs.create({ snapshot: sandmanSnapshot({ from: "sdk-base" }) }));
  const missing = await errorOf(theirs.create({ snapshot: sandmanSnapshot({ from: "sdk-none" }) }));
  assert.ok(refused instanceof SandboxSnapshotNotRestorableError, String(refused));
  assert.equal(refused.message.replace("sdk-base", "X"), missing.message.replace("sdk-none", "X"));
  await assert.rejects(theirs.resume(await theirs.deserializeSessionState({ ...s2.providerState, snapshot: s2.snapshot })), notRestorable(/not found/));
  const s1state = await theirs.deserializeSessionState({ ...s1.providerState, snapshot: s1.snapshot });
  await assert.rejects(theirs.resume(s1state), notRestorable(/snapshot 'sdk-base' not found/));
  // Through the SDK's runtime: worker 2's run given worker 1's session state is refused before the model is asked.
  const other = coder([]);
  const given = await theirs.deserializeSessionState({ ...s1.providerState, manifest: s1.manifest, snapshot: s1.snapshot });
  await assert.rejects(run(other.agent, "go", { client: theirs, sessionState: given }), notRestorable(/snapshot 'sdk-base' not found/));
  assert.equal(other.model.requests.length, 0);
  assert.deepEqual(await k2.listSandboxes({ workerKey: "sdk-k2" }), []);
  assert.equal(await k1.files.readText(own, "base.txt"), "base\n");
});

test("a named run's and a worker's state: the same sandbox, frozen in between; one made again since is not it", async () => {
  // A worker's sandbox, frozen: taken up by new objects, the first call thaws it.
  const k1 = () => SandmanClient.forWorker(runner.token, "sdk-k3", { address: runner.address });
  const made = await new SandmanSandboxClient(k1(), { workerKey: "sdk-k3" }).create();
  await made.exec({ cmd: "echo kept > /workspace/w.txt" });
  const adapter = new SandmanSandboxClient(k1(), { workerKey: "sdk-k3" });
  const saved = JSON.stringify(await adapter.serializeSessionState(made.state));
  const [own] = await k1().listSandboxes({ workerKey: "sdk-k3" });
  assert.equal(JSON.parse(saved).boundSandboxId, own.id);
  assert.equal((await k1().pauseSandbox(own.id, { workerKey: "sdk-k3", tier: "freeze" })).state, "frozen");
  const again = new SandmanSandboxClient(k1(), { workerKey: "sdk-k3" });
  const back = await again.resume(await again.deserializeSessionState(JSON.parse(saved)));
  assert.equal(back.state.sandboxId, undefined); // the worker's: not the session's to remove
  assert.equal((await back.exec({ cmd: "cat /workspace/w.txt" })).output, "kept\n");
  assert.equal((await k1().getSandbox(own.id, { workerKey: "sdk-k3" })).state, "running");
  await back.close();
  assert.equal((await k1().listSandboxes({ workerKey: "sdk-k3" })).length, 1);

  // A named run's state, its sandbox removed and made again by a later call: another sandbox, refused.
  const named = new SandmanSandboxClient(runner.client, { runId: "sdk-named" });
  const s = await named.create();
  await s.exec({ cmd: "echo one > /workspace/n.txt" });
  const state = JSON.parse(JSON.stringify(await named.serializeSessionState(s.state)));
  assert.equal(state.runId, "sdk-named");
  await runner.client.deleteSandbox(state.boundSandboxId);
  await runner.client.execute({ run_id: "sdk-named", command: "true" });
  await assert.rejects(named.resume(await named.deserializeSessionState(state)), notRestorable(/was not found and its state names no snapshot/));
});

test("a state is checked before it is used, and keeps no environment value; specs sandman cannot honour are refused", async () => {
  const adapter = new SandmanSandboxClient(runner.client, { runId: "sdk-checks" });
  const s = await adapter.create();
  s.state.environment = { API_KEY: "sk-do-not-keep" };
  const kept = JSON.stringify(await adapter.serializeSessionState(s.state));
  assert.ok(!kept.includes("sk-do-not-keep"), kept);
  const bad = async (raw, cls, re) => assert.rejects(adapter.deserializeSessionState(raw), (e) => e instanceof cls && re.test(e.message));
  await bad({ runId: "../x" }, SandboxConfigurationError, /runId must be a name/);
  await bad({ runId: "r", mode: "per_tool" }, SandboxConfigurationError, /mode must be per_run or per_worker/);
  await bad({ runId: "r", snapshot: { id: "/tmp/x", type: "local" } }, SandboxSnapshotNotRestorableError, /not a sandman snapshot/);
  const remote = { type: "remote", store: new InMemoryRemoteSnapshotStore() };
  await assert.rejects(adapter.create({ snapshot: remote }), (e) => e instanceof SandboxUnsupportedFeatureError && /type 'remote' is not supported/.test(e.message));
  await assert.rejects(adapter.create({ snapshot: sandmanSnapshot({ from: "x" }) }), (e) => e instanceof SandboxConfigurationError && /runId cannot be given/.test(e.message));
  assert.throws(() => sandmanSnapshot({ name: "a b" }), SandboxConfigurationError);
});

test("a state that points its own sandbox at another of the token's sandboxes is refused, and that sandbox stays", async () => {
  const adapter = new SandmanSandboxClient(runner.client);
  const keep = (await runner.client.execute({ run_id: "sdk-precious", command: "echo mine > /workspace/p.txt" })).sandbox_id;
  const s = await adapter.create();
  const saved = await adapter.serializeSessionState(s.state);
  await s.close();
  // Written by someone else: the session's sandbox swapped for a named run's, its run id too.
  for (const forged of [{ ...saved, sandboxId: keep }, { ...saved, sandboxId: keep, runId: "sdk-precious" }]) {
    const state = await adapter.deserializeSessionState(forged);
    await assert.rejects(adapter.resume(state), notRestorable(/was not found/));
    await adapter.delete(state).catch(() => {});
  }
  assert.equal(await runner.client.files.readText({ run_id: "sdk-precious" }, "p.txt"), "mine\n");
});
