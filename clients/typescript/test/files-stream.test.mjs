// The TypeScript client's files API and streamed execute against a real
// runner and engine (run through tests/integration/test_ts_client.sh).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { after, before, test } from "node:test";

import { SandmanClient, SandmanError, readAll } from "../dist/index.js";
import { startRunner } from "./runner.mjs";

let runner;
before(async () => {
  runner = await startRunner();
});
after(async () => {
  await runner?.stop();
});

test("files: write, read, stat, list, glob, grep, delete, tar", async () => {
  const f = runner.client.files;
  const key = { run_id: "ts-files" };
  const data = randomBytes(3 * 1024 * 1024 + 7);
  const w = await f.write(key, "d/blob.bin", data);
  assert.equal(w.size, data.length);
  assert.ok((await f.read(key, "d/blob.bin")).equals(data));
  assert.ok((await f.read(key, "d/blob.bin", { offset: 5, length: 9 })).equals(data.subarray(5, 14)));
  await f.write(key, "d/s.txt", Readable.from([Buffer.from("needle "), Buffer.from("and hay\n")]), { mode: 0o600 });
  assert.equal(await f.readText(key, "d/s.txt"), "needle and hay\n");
  const st = await f.stat(key, "d/s.txt");
  assert.equal(st.type, "file");
  assert.equal(st.mode, "0600");
  const list = await f.list(key, "d");
  assert.deepEqual(list.entries.map((e) => e.path).sort(), ["d/blob.bin", "d/s.txt"]);
  assert.deepEqual((await f.glob(key, "**/*.txt", { path: "d" })).entries.map((e) => e.path), ["d/s.txt"]);
  const g = await f.grep(key, "needle", { path: "d", include: "*.txt" });
  assert.deepEqual(g.matches.map((m) => [m.path, m.line]), [["d/s.txt", 1]]);
  const tar = await readAll(await f.downloadTar(key, ["d/s.txt"]));
  const up = await f.uploadTar(key, "copy", tar);
  assert.equal(up.files, 1);
  assert.equal(await f.readText(key, "copy/d/s.txt"), "needle and hay\n");
  assert.deepEqual(await f.delete(key, "d/blob.bin"), { removed: 1 });
  await assert.rejects(f.read(key, "d/blob.bin"), (e) => e instanceof SandmanError && e.status === 404);
  await assert.rejects(f.read(key, "../etc/passwd"), (e) => e instanceof SandmanError && e.status === 403);
  const w2 = SandmanClient.forWorker(runner.token, "tw2", { address: runner.address });
  await assert.rejects(w2.files.read(key, "d/s.txt"), (e) => e instanceof SandmanError && e.status === 401);
});

test("executeStream: the output as it comes, then the result", async () => {
  const events = [];
  for await (const ev of runner.client.executeStream({ command: "echo one; echo two >&2; exit 4", run_id: "ts-stream" })) events.push(ev);
  const last = events.at(-1);
  assert.equal(last.event, "result");
  assert.equal(last.result.exit_code, 4);
  assert.equal(events.filter((e) => e.event === "stdout").map((e) => e.data).join(""), "one\n");
  assert.equal(events.filter((e) => e.event === "stderr").map((e) => e.data).join(""), "two\n");
});

test("executeStream: the first line before the command ends; leaving the loop cancels it", async () => {
  const c = runner.client;
  for await (const ev of c.executeStream({ command: "echo first; exec sleep 600", run_id: "ts-stream", timeout_s: 900 })) {
    assert.equal(ev.event, "stdout");
    assert.equal(ev.data, "first\n");
    break; // disconnects
  }
  // The runner sees the hang-up and kills the command: wait for it to go.
  let left = "1";
  for (let i = 0; i < 300 && left !== "0"; i++) {
    const r = await c.execute({ command: "ps -o args | grep -c '^sleep 600' || true", run_id: "ts-stream" });
    left = r.stdout.trim();
    if (left !== "0") await new Promise((res) => setTimeout(res, 200));
  }
  assert.equal(left, "0");
});

test("files.watch: created, modified, moved, deleted as tool calls make them; refusals", async () => {
  const c = runner.client;
  const key = { run_id: "ts-watch" };
  await c.execute({ command: "mkdir -p w && ln -sfn /etc lnk", ...key });
  const watch = await c.files.watch(key, "w", { recursive: true });
  assert.match(watch.sandboxId, /^[0-9a-f]{12,}$/);
  const seen = [];
  const it = watch[Symbol.asyncIterator]();
  // The next event that pred accepts (bounded: the test runner's timeout).
  const until = async (pred) => {
    for (;;) {
      const n = await it.next();
      if (n.done) return undefined;
      seen.push(n.value);
      if (pred(n.value)) return n.value;
    }
  };
  await c.execute({ command: "printf a > w/f.txt", ...key });
  assert.ok(await until((e) => e.event === "created" && e.path === "w/f.txt"), JSON.stringify(seen));
  await c.execute({ command: "printf b >> w/f.txt", ...key });
  assert.ok(await until((e) => e.event === "modified" && e.path === "w/f.txt"), JSON.stringify(seen));
  await c.execute({ command: "mv w/f.txt w/g.txt", ...key });
  const moved = await until((e) => e.event === "moved");
  assert.deepEqual([moved.from, moved.to, moved.path], ["w/f.txt", "w/g.txt", "w/g.txt"]);
  await c.execute({ command: "rm w/g.txt", ...key });
  assert.ok(await until((e) => e.event === "deleted" && e.path === "w/g.txt"), JSON.stringify(seen));
  await it.return(); // closes: the runner ends the watch
  await assert.rejects(c.files.watchDir(key, "lnk"), (e) => e instanceof SandmanError && e.status === 403);
  await assert.rejects(c.files.watch(key, "../etc"), (e) => e instanceof SandmanError && e.status === 403);
  const other = SandmanClient.forWorker(runner.token, "tw-watch", { address: runner.address });
  await assert.rejects(other.files.watch({ worker_key: "tw-other" }, "."), (e) => e instanceof SandmanError && e.status === 401);
});
