// The TypeScript client against a real runner and engine: execute (argv,
// command, stdin, env), a call sent to the background and its handle,
// leases, sandboxes, worker tokens (derived like `sandman token derive`); a
// signal aborted before a call rejects it and leaves the process running.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client, SandmanClient, SandmanError, deriveWorkerToken } from "../dist/index.js";
import { startRunner } from "./runner.mjs";

let runner;
before(async () => {
  runner = await startRunner();
});
after(async () => {
  await runner?.stop();
});

test("health", async () => {
  const h = await runner.client.health();
  assert.equal(h.status, "ok");
  assert.equal(h.mode, "per_run");
});

test("the Python client's names work here too", async () => {
  assert.equal(Client, SandmanClient);
  assert.equal((await runner.client.healthz()).status, "ok");
  const r = await runner.client.execute({ command: "true", run_id: "ts-names" });
  assert.equal(r.ok, true);
  assert.equal(typeof runner.client.kill, "function");
  assert.equal(typeof runner.client.killHandle, "function");
});

test("execute: argv, command, stdin, env, failures", async () => {
  const c = runner.client;
  const r = await c.execute({ tool: "shell", command: "echo $GREETING; cat", stdin: "from stdin\n", env: { GREETING: "hi" }, run_id: "ts-exec" });
  assert.equal(r.ok, true);
  assert.equal(r.stdout, "hi\nfrom stdin\n");
  assert.equal(r.mode, "per_run");
  const r2 = await c.execute({ argv: ["sh", "-c", "exit 7"], run_id: "ts-exec" });
  assert.equal(r2.ok, false);
  assert.equal(r2.exit_code, 7);
  assert.equal(r2.failure_kind, "tool");
  assert.equal(r2.reused, true);
  await assert.rejects(c.execute({ run_id: "ts-exec" }), (e) => e instanceof SandmanError && e.status === 400);
});

test("a call sent to the background, its handle", async () => {
  const c = runner.client;
  const r = await c.execute({ command: "echo started; sleep 30", run_id: "ts-bg", timeout_s: 0.5, background_on_timeout: true });
  assert.ok(r.handle, JSON.stringify(r));
  // Its output so far: wait for the first line (the machine may be slow).
  let h = await c.handle(r.handle);
  for (let i = 0; i < 300 && !/started/.test(h.stdout); i++) {
    await new Promise((res) => setTimeout(res, 100));
    h = await c.handle(r.handle);
  }
  assert.match(h.stdout, /started/);
  await c.killHandle(r.handle);
});

test("worker tokens", async () => {
  const w = SandmanClient.forWorker(runner.token, "w1", { address: runner.address });
  assert.equal(w.token, deriveWorkerToken(runner.token, "w1"));
  const r = await w.execute({ command: "echo mine", worker_key: "w1", mode: "per_worker" });
  assert.equal(r.stdout, "mine\n");
  await assert.rejects(w.sandboxes(), (e) => e instanceof SandmanError && e.status === 401);
  await assert.rejects(w.execute({ command: "true", worker_key: "w2", mode: "per_worker" }), (e) => e instanceof SandmanError && e.status === 401);
  const list = await runner.client.sandboxes();
  assert.ok(list.some((s) => s.worker_id === "w1"));
  assert.ok(list.some((s) => s.run_id === "ts-exec"));
});

test("leases need a credentials file", async () => {
  await assert.rejects(runner.client.createLease({ tool: "shell", services: ["github"] }), (e) => e instanceof SandmanError && e.status >= 400);
});

test("a signal aborted before the call: it rejects with the signal's reason and nothing else breaks", async () => {
  const c = runner.client;
  const ac = new AbortController();
  ac.abort(new Error("aborted before the call"));
  // A plain request and a WebSocket's opening (the sandbox need not exist:
  // nothing is sent). The request destroyed unsent emits its error a tick
  // later: an unheard one would end the process (it did before).
  await assert.rejects(c.listSnapshots({ signal: ac.signal }), /aborted before the call/);
  await assert.rejects(c.portWebSocket("no-such-sandbox", 8000, { signal: ac.signal }), /aborted before the call/);
  // A round trip to the runner takes longer than that tick: still running.
  assert.equal((await c.health()).status, "ok");
});
