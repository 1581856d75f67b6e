// The TypeScript client's reap() against a real runner and engine (run
// through tests/integration/test_ts_sandboxes.sh): the runner starts with
// the idle lifecycle freeze_after 1s and its own tick an hour apart, so
// POST /v1/sandboxes/reap alone applies it; a dry run lists the freeze in
// `moved` and leaves the sandbox running, a reap freezes it and says so
// (state, reason, kind, the sandbox's id), and a call into it just works.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { startRunner } from "./runner.mjs";

let runner;
before(async () => {
  runner = await startRunner(["--reap-interval", "1h"], {
    config: "version: 1\ndefaults:\n  lifecycle: {freeze_after: 1s}\n",
  });
});
after(async () => {
  await runner?.stop();
});

// reap(body) until its report lists the sandbox named name in `moved` (a bounded poll).
async function reapUntilMoved(body, name, timeoutMs = 60_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const report = await runner.client.reap(body);
    const item = report.moved.find((m) => m.name === name);
    if (item) return { report, item };
    if (Date.now() > end) throw new Error(`no reap listed ${name} in moved: ${JSON.stringify(report)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const stateOf = async (id) => (await runner.client.listSandboxes({ all: true })).find((s) => s.id === id)?.state;

test("reap(): the idle lifecycle's moves in `moved`", async () => {
  const c = runner.client;
  const run = `tsreap-${process.pid}`;
  const first = await c.execute({ command: "echo kept > /workspace/note", run_id: run, mode: "per_run" });
  assert.equal(first.exit_code, 0, JSON.stringify(first));
  const info = (await c.listSandboxes({ all: true })).find((s) => s.run_id === run);
  assert.ok(info, "the run's sandbox is listed");

  const dry = await reapUntilMoved({ dry_run: true }, info.name);
  assert.equal(dry.report.dry_run, true);
  assert.equal(dry.item.state, "frozen");
  assert.match(dry.item.reason, /^lifecycle: .*\(freeze_after 1s\)$/);
  assert.equal(await stateOf(info.id), "running", "a dry run moves nothing");

  const done = await reapUntilMoved({}, info.name);
  assert.equal(done.report.dry_run, false);
  assert.deepEqual([done.item.state, done.item.kind, done.item.id], ["frozen", "sandbox", info.id]);
  assert.ok(Array.isArray(done.report.removed) && Array.isArray(done.report.spared));
  assert.equal(await stateOf(info.id), "frozen");

  const again = await c.execute({ command: "cat /workspace/note", run_id: run, mode: "per_run" });
  assert.equal(again.stdout, "kept\n", "a call into the frozen sandbox just works");
  assert.equal(again.resumed, "frozen");
  await c.deleteSandbox(info.id);
});
