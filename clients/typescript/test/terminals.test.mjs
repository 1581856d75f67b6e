// The TypeScript client's terminals against a real runner and engine:
// create, attach (the screen first, then output as it comes), stty size and
// a resize, detach and attach again, the screen, typing over HTTP, another
// worker refused as a missing terminal, kill.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, test } from "node:test";

import { SandmanClient, SandmanError, deriveWorkerToken } from "../dist/index.js";
import { startRunner } from "./runner.mjs";

let runner;
before(async () => {
  runner = await startRunner();
});
after(async () => {
  await runner?.stop();
});

async function nextOf(conn, type) {
  for (;;) {
    const ev = await conn.next(60_000);
    if (ev === null || ev.type === type) return ev;
  }
}

test("terminals: size, resize, detach and attach again, screen, kill", async () => {
  const c = runner.client;
  const t = await c.terminals.create({ run_id: "ts-term", rows: 30, cols: 100 });
  assert.equal(t.state, "running");
  assert.equal(t.id.length, 32);
  let conn = await c.terminals.attach(t.id);
  const hello = await conn.next(60_000);
  assert.equal(hello.type, "attached");
  assert.equal(hello.rows, 30);
  conn.send("stty size; echo mark-$((6*7))\r");
  let out = await conn.readUntil("mark-42", 60_000);
  assert.match(out, /30 100/);
  conn.resize(40, 120);
  const rs = await nextOf(conn, "resize");
  assert.equal(rs.cols, 120);
  conn.send("stty size; echo mark-$((6*8))\r");
  out = await conn.readUntil("mark-48", 60_000);
  assert.match(out, /40 120/);
  conn.close();
  await c.terminals.send(t.id, "echo typed-$((2+3))\r");
  let screen;
  // A bounded poll (120 s): the input reaches the shell asynchronously.
  for (const until = Date.now() + 120_000; Date.now() < until; ) {
    screen = await c.terminals.screen(t.id, { waitMs: 300, quietMs: 50 });
    if (screen.text.includes("typed-5")) break;
  }
  assert.match(screen.text, /typed-5/);
  assert.equal(typeof screen.cursor.row, "number");
  conn = await c.terminals.attach(t.id);
  assert.equal((await conn.next(60_000)).type, "attached");
  const redraw = await conn.next(60_000);
  assert.equal(redraw.type, "output");
  assert.match(redraw.data.toString("utf8"), /typed-5/);
  conn.close();
  const list = await c.terminals.list();
  assert.ok(list.some((x) => x.id === t.id));
  const k = await c.terminals.kill(t.id);
  assert.equal(k.state, "exited");
  await assert.rejects(c.terminals.get(t.id), (e) => e instanceof SandmanError && e.status === 404);
});

test("terminals: a worker reaches only its own", async () => {
  const a = SandmanClient.forWorker(runner.token, "ts-wa", { address: runner.address });
  const b = SandmanClient.forWorker(runner.token, "ts-wb", { address: runner.address });
  const t = await a.terminals.create({ worker_key: "ts-wa" });
  const missing = randomBytes(16).toString("hex");
  for (const id of [t.id, missing]) {
    await assert.rejects(b.terminals.get(id), (e) => e instanceof SandmanError && e.status === 404);
    await assert.rejects(b.terminals.attach(id), (e) => e instanceof SandmanError && e.status === 404);
  }
  assert.deepEqual((await b.terminals.list("ts-wb")).map((x) => x.id), []);
  await a.terminals.kill(t.id);
});

test("terminals: the exit code reaches an attached client", async () => {
  const c = runner.client;
  const t = await c.terminals.create({ run_id: "ts-term", argv: ["sh", "-c", "read x; exit 3"] });
  const conn = await c.terminals.attach(t.id);
  conn.send("go\r");
  const ev = await nextOf(conn, "exit");
  assert.equal(ev.exit_code, 3);
  assert.equal(conn.exitCode, 3);
});
