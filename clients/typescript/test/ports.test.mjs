// The TypeScript client's ports route and preview URLs against a real
// runner and engine (run through tests/integration/test_ts_client.sh):
// portRequest reaches busybox's httpd on the sandbox's loopback (a page, the
// server's 404, a query), a port nothing serves is the runner's 502 refusal,
// another worker's token gets a missing sandbox's 404; createPreview and
// previewRequest (no token sent) reach the page, an unknown token and
// another worker's preview are 404, the preview ends with the sandbox;
// portStream and previewStream give an 8 MiB file as it comes (its bytes
// counted and hashed against the sandbox's sha256sum).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, test } from "node:test";

import { SandmanClient, SandmanError } from "../dist/index.js";
import { startRunner, until } from "./runner.mjs";

let runner;
before(async () => {
  runner = await startRunner();
});
after(async () => {
  if (runner) await runner.stop();
});

test("ports and previews through the TypeScript client", async () => {
  const k1 = SandmanClient.forWorker(runner.token, "k1", { address: runner.address });
  const k2 = SandmanClient.forWorker(runner.token, "k2", { address: runner.address });
  const made = await k1.execute({
    command: "mkdir -p /workspace/www && echo hello-ts-port > /workspace/www/index.html && " +
      "head -c 8388608 /dev/urandom > /workspace/www/big && sha256sum /workspace/www/big",
    mode: "per_worker",
    worker_key: "k1",
  });
  assert.equal(made.exit_code, 0, JSON.stringify(made));
  const id = made.sandbox_id;
  assert.ok(id, JSON.stringify(made));
  const term = await k1.terminals.create({
    argv: ["httpd", "-f", "-p", "127.0.0.1:8000", "-h", "/workspace/www"],
    sandbox_id: id,
    worker_key: "k1",
  });
  try {
    const page = await until("the server", async () => {
      const a = await k1.portRequest(id, 8000, { path: "/index.html", workerKey: "k1" });
      return a.status === 200 ? a : null;
    });
    assert.equal(page.text(), "hello-ts-port\n");
    assert.equal(page.refusal, null);
    const query = await runner.client.portRequest(id, 8000, { path: "index.html?x=1" });
    assert.equal(query.status, 200, "the control token and a relative path with a query");
    const missing = await k1.portRequest(id, 8000, { path: "/missing", workerKey: "k1" });
    assert.equal(missing.status, 404, "the server's own 404 is passed on");
    const nothing = await k1.portRequest(id, 8999, { method: "POST", body: "data", workerKey: "k1" });
    assert.equal(nothing.status, 502);
    assert.ok(nothing.refusal && /nothing listens/.test(nothing.refusal.error), nothing.text());
    const other = await k2.portRequest(id, 8000, { path: "/index.html", workerKey: "k2" });
    const none = await k2.portRequest("no-such-sandbox", 8000, { path: "/index.html", workerKey: "k2" });
    assert.equal(other.status, 404);
    assert.equal(other.text().replace(id, "X"), none.text().replace("no-such-sandbox", "X"));
    await assert.rejects(k1.portRequest(id, 0), /port must be a number from 1 to 65535/);
    await assert.rejects(k1.portRequest(id, 8000, { path: "/a b" }), /without spaces/);

    const pv = await k1.createPreview(id, 8000, { workerKey: "k1", ttlS: 600 });
    assert.equal(pv.port, 8000);
    assert.equal(pv.sandbox_id, id);
    assert.ok(pv.path.startsWith("/preview/"), JSON.stringify(pv));
    const anon = new SandmanClient({ address: runner.address, token: "" });
    const viaPreview = await anon.previewRequest(pv, { path: "/index.html" });
    assert.equal(viaPreview.status, 200);
    assert.equal(viaPreview.text(), "hello-ts-port\n");
    const viaPath = await k2.previewRequest(pv.path, { path: "index.html" });
    assert.equal(viaPath.text(), "hello-ts-port\n", "the path alone is the capability; k2's token is not sent");
    const unknown = await anon.previewRequest("/preview/" + "0".repeat(48) + "/");
    assert.equal(unknown.status, 404);
    assert.ok(unknown.refusal, unknown.text());
    await assert.rejects(
      k2.createPreview(id, 8000, { workerKey: "k2" }),
      (e) => e instanceof SandmanError && e.status === 404,
    );
    await assert.rejects(anon.previewRequest("/v1/execute"), /preview must be/);

    const want = made.stdout.split(/\s+/)[0];
    for (const s of [
      await k1.portStream(id, 8000, { path: "/big", workerKey: "k1" }),
      await anon.previewStream(pv, { path: "/big" }),
    ]) {
      assert.equal(s.status, 200);
      assert.equal(s.headers["content-length"], "8388608");
      const h = createHash("sha256");
      let n = 0;
      for await (const piece of s.body) {
        h.update(piece);
        n += piece.length;
      }
      assert.equal(n, 8388608, "the streamed body comes whole");
      assert.equal(h.digest("hex"), want, "and by hash");
    }
  } finally {
    await k1.terminals.kill(term.id).catch(() => {});
  }
  const pv = await k1.createPreview(id, 8000, { workerKey: "k1" });
  await k1.deleteSandbox(id, { workerKey: "k1" });
  const gone = await new SandmanClient({ address: runner.address, token: "" }).previewRequest(pv);
  assert.equal(gone.status, 404, "the preview ends with its sandbox");
});
