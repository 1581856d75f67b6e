// The TypeScript client's WebSockets to a server in a sandbox against a real
// runner and engine (run through tests/integration/test_ts_ports_ws.sh, which
// gives the image, sandman/general under the tests' tag, in PORTS_IMAGE): a
// WebSocket echo server (tests/integration/ports_server.py) runs in a
// per_run sandbox of worker k1 with network none (only its loopback), left
// running by a call (setsid). portWebSocket echoes text and a 1 MiB binary
// message (k1's token, the control token), gives the server's 101 status
// and headers, and iterates messages; another worker's token is exactly a
// missing sandbox's 404, no token 401; a message over maxMessage ends the
// connection with SandmanError 502; recv's timeout rejects with a
// TimeoutError; send after close throws. previewWebSocket (no token) echoes
// through a preview URL; an unknown and a mangled preview are the same 404;
// open WebSockets through the route and the preview are closed (recv gives
// null) when the sandbox is frozen, after which the preview is a 404.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { SandmanClient, SandmanError, WebSocketTimeoutError } from "../dist/index.js";
import { startRunner, until } from "./runner.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const SERVER = readFileSync(join(HERE, "../../../tests/integration/ports_server.py"), "utf8");
const PORT = 8000;

let runner;
before(async () => {
  const image = process.env.PORTS_IMAGE;
  if (!image) throw new Error("PORTS_IMAGE must name an image with python3 (sandman/general)");
  runner = await startRunner([], { image });
});
after(async () => {
  if (runner) await runner.stop();
});

async function echoes(ws, text = "hello-ts-ws") {
  ws.send(text);
  return (await ws.recv(60_000)) === text;
}

/** The refusal a WebSocket's opening rejects with: [status, body as JSON]. */
async function refusalOf(p) {
  try {
    (await p).close();
  } catch (e) {
    if (e instanceof SandmanError) return [e.status, JSON.stringify(e.body)];
    throw e;
  }
  return null;
}

test("WebSockets through the ports route and preview URLs", async () => {
  const k1 = SandmanClient.forWorker(runner.token, "k1", { address: runner.address });
  const k2 = SandmanClient.forWorker(runner.token, "k2", { address: runner.address });
  const anon = new SandmanClient({ address: runner.address, token: "" });
  const run = `tsws-${process.pid}`;
  const made = await k1.execute({ command: "cat > /workspace/srv.py && ls /sys/class/net", stdin: SERVER, run_id: run, worker_key: "k1", mode: "per_run" });
  assert.equal(made.exit_code, 0, JSON.stringify(made));
  assert.equal(made.stdout.trim(), "lo", "network none: the sandbox has its loopback only");
  const id = made.sandbox_id;
  const started = await k1.execute({
    command: `setsid python3 /workspace/srv.py ${PORT} </dev/null >/workspace/srv.log 2>&1 &`,
    sandbox_id: id,
    worker_key: "k1",
  });
  assert.equal(started.exit_code, 0, JSON.stringify(started));
  await until("the server", async () => (await k1.portRequest(id, PORT, { workerKey: "k1" })).text() === "up");

  // Through the route, k1's token.
  const ws = await k1.portWebSocket(id, PORT, { workerKey: "k1" });
  assert.equal(ws.status, 101);
  assert.equal(ws.headers["x-echo"], "ws", "the server's 101 headers are passed on");
  assert.ok(await echoes(ws), "a text message comes back as text");
  const blob = randomBytes(1 << 20);
  ws.send(blob);
  const back = await ws.recv(120_000);
  assert.ok(Buffer.isBuffer(back) && back.equals(blob), "a 1 MiB binary message comes back whole, as bytes");
  for (const m of ["a", "b", "c"]) ws.send(m);
  const got = [];
  for await (const m of ws) {
    got.push(m);
    if (got.length === 3) break;
  }
  assert.deepEqual(got, ["a", "b", "c"], "for await gives the messages in order");
  await assert.rejects(ws.recv(300), (e) => e instanceof WebSocketTimeoutError && e.name === "TimeoutError");
  ws.close();
  assert.equal(ws.closed, true);
  assert.equal(await ws.recv(), null, "a closed WebSocket gives null");
  assert.throws(() => ws.send("late"), /closed/);

  const ctl = await runner.client.portWebSocket(id, PORT, { path: "/x?y=1" });
  assert.ok(await echoes(ctl), "the control token reaches it too");
  ctl.close();

  // Refusals: another worker's token is a missing sandbox's answer; no token 401.
  const other = await refusalOf(k2.portWebSocket(id, PORT, { workerKey: "k2" }));
  const missing = await refusalOf(k2.portWebSocket("no-such-sandbox", PORT, { workerKey: "k2" }));
  assert.equal(other?.[0], 404);
  assert.deepEqual([other[0], other[1].replace(id, "X")], [missing[0], missing[1].replace("no-such-sandbox", "X")]);
  assert.equal((await refusalOf(anon.portWebSocket(id, PORT)))?.[0], 401);
  await assert.rejects(k1.portWebSocket(id, 0), /port must be a number from 1 to 65535/);

  // The cap on a message in: over maxMessage ends the connection (502).
  const small = await k1.portWebSocket(id, PORT, { workerKey: "k1", maxMessage: 1024 });
  assert.ok(await echoes(small, "x".repeat(1024)), "a message of exactly maxMessage comes in");
  small.send(Buffer.alloc(4096, 1));
  await assert.rejects(small.recv(60_000), (e) => e instanceof SandmanError && e.status === 502 && /too large/.test(e.message));
  assert.equal(await small.recv(), null, "and the connection is ended");

  // Through a preview URL, no token sent.
  const unknown = await refusalOf(anon.previewWebSocket("/preview/" + "0".repeat(48) + "/"));
  assert.equal(unknown?.[0], 404);
  const pv = await k1.createPreview(id, PORT, { workerKey: "k1", ttlS: 600 });
  const viaPv = await anon.previewWebSocket(pv);
  assert.equal(viaPv.status, 101);
  assert.ok(await echoes(viaPv), "previewWebSocket echoes through the preview");
  const viaPath = await k2.previewWebSocket(pv.path, { path: "/p" });
  assert.ok(await echoes(viaPath), "the preview's path alone is the capability; k2's token is not sent");
  viaPath.close();
  assert.deepEqual(await refusalOf(anon.previewWebSocket(pv.path.slice(0, -3) + "/")), unknown, "a mangled preview is an unknown one");
  await assert.rejects(anon.previewWebSocket("/v1/execute"), /preview must be/);

  // Frozen: the open ones end, and the preview is revoked.
  const viaRoute = await k1.portWebSocket(id, PORT, { workerKey: "k1" });
  assert.ok(await echoes(viaRoute));
  await k1.pauseSandbox(id, { workerKey: "k1", tier: "freeze" });
  assert.equal(await viaPv.recv(30_000), null, "freeze: the WebSocket through the preview is closed");
  assert.equal(await viaRoute.recv(30_000), null, "freeze: the WebSocket through the route is closed");
  assert.deepEqual(await refusalOf(anon.previewWebSocket(pv)), unknown, "freeze: the preview answers as an unknown one");
  await k1.resumeSandbox(id, { workerKey: "k1" });
  const again = await until("the server after the freeze", async () => {
    try {
      return await k1.portWebSocket(id, PORT, { workerKey: "k1" });
    } catch {
      return null;
    }
  });
  assert.ok(await echoes(again), "after resume a new WebSocket echoes (the server ran on)");
  again.close();
  await k1.deleteSandbox(id, { workerKey: "k1" });
});
