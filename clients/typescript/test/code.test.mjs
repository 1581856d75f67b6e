// Code contexts with the TypeScript client, and the OpenAI Agents SDK's
// code-interpreter tool, against a real runner and engine with a kernel
// image (SANDMAN_CODE_IMAGE; run through tests/integration/test_ts_code.sh).
// No model and no network: a scripted model drives the agent.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Agent, Runner } from "@openai/agents";

import { SandmanClient, SandmanError, deriveWorkerToken } from "../dist/index.js";
import { codeInterpreterTool } from "../dist/adapters/openai-agents.js";
import { startRunner } from "./runner.mjs";
import { call, message, ScriptedModel } from "./scripted-model.mjs";

const image = process.env.SANDMAN_CODE_IMAGE;
let runner;
before(async () => {
  if (!image) throw new Error("SANDMAN_CODE_IMAGE must name an image with a Jupyter kernel");
  runner = await startRunner(["--sandbox-image", image, "--sandbox-mem", "768m", "--sandbox-pids", "256"]);
});
after(async () => {
  await runner?.stop();
});

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

test("runCode: state between runs, an E2B-shaped Execution, callbacks", async () => {
  const key = { run_id: "ts-code" };
  const c = runner.client;
  await c.runCode(key, "x = 41");
  const out = [];
  const x = await c.runCode(key, "print('hi')\nx + 1", { onStdout: (t) => out.push(t) });
  assert.equal(x.text, "42");
  assert.deepEqual(x.logs.stdout, ["hi\n"]);
  assert.deepEqual(out, ["hi\n"]);
  assert.equal(x.results[0].isMainResult, true);
  assert.deepEqual(x.results[0].formats(), ["text"]);
  assert.equal(x.status, "ok");
  const f = await c.runCode(key, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()");
  const png = f.results.find((r) => r.png)?.png;
  assert.ok(png, JSON.stringify(f.results.map((r) => r.formats())));
  assert.deepEqual(Buffer.from(png, "base64").subarray(0, 8), PNG_SIGNATURE);
  let seenError;
  const e = await c.runCode(key, "raise KeyError('k')", { onError: (err) => (seenError = err) });
  assert.equal(e.error.name, "KeyError");
  assert.equal(e.status, "error");
  assert.equal(seenError.name, "KeyError");
  assert.match(e.error.traceback, /KeyError/);
});

test("contexts: create, list, restart, interrupt, delete; another worker's answers as missing", async () => {
  const key = { run_id: "ts-ctx" };
  const c = runner.client;
  const made = await c.contexts.create(key, "two", { env: { GREETING: "hello" } });
  assert.equal(made.name, "two");
  const g = await c.runCode(key, "import os\nos.environ['GREETING']", { context: "two" });
  assert.equal(g.text, "'hello'");
  assert.deepEqual((await c.contexts.list(key)).map((x) => x.name), ["two"]);
  await c.runCode(key, "y = 1", { context: "two" });
  await c.contexts.restart(key, "two");
  assert.equal((await c.runCode(key, "'y' in dir()", { context: "two" })).text, "False");
  const i = await c.contexts.interrupt(key, "two");
  assert.equal(i.interrupted, false);
  await c.contexts.delete(key, "two");
  await assert.rejects(c.contexts.get(key, "two"), (err) => err instanceof SandmanError && err.status === 404);

  const wa = new SandmanClient({ address: runner.address, token: deriveWorkerToken(runner.token, "ts-wa") });
  const wb = new SandmanClient({ address: runner.address, token: deriveWorkerToken(runner.token, "ts-wb") });
  await wa.contexts.create({ worker_key: "ts-wa" }, "mine");
  await assert.rejects(wb.contexts.get({ worker_key: "ts-wb" }, "mine"), (err) => err.status === 404);
  await assert.rejects(wb.contexts.get({ worker_key: "ts-wa" }, "mine"), (err) => err.status === 401);
});

test("OpenAI Agents SDK: the code interpreter tool keeps state and gives figures to the model as images", async () => {
  const model = new ScriptedModel([
    [call("c1", "code_interpreter", { code: "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})" })],
    [call("c2", "code_interpreter", { code: "import matplotlib.pyplot as plt\ndf.plot()\nplt.show()\nint(df['a'].sum())" })],
    [message("done")],
  ]);
  const tool = codeInterpreterTool(runner.client, { runId: "ts-agent-code" });
  const agent = new Agent({ name: "analyst", instructions: "test", model, tools: [tool] });
  const result = await new Runner({ tracingDisabled: true }).run(agent, "sum and plot");
  assert.equal(result.finalOutput, "done");
  const last = model.requests.at(-1).input;
  const outputs = last.filter((i) => i.type === "function_call_result" && i.callId === "c2");
  assert.equal(outputs.length, 1);
  const parts = outputs[0].output;
  assert.ok(Array.isArray(parts), JSON.stringify(outputs[0]).slice(0, 500));
  assert.deepEqual(parts.map((p) => p.type), ["input_text", "input_image"]);
  assert.match(parts[0].text, /Out: 6/);
  assert.match(parts[0].text, /\[ok\]$/);
  const m = /^data:image\/png;base64,(.+)$/.exec(parts[1].image);
  assert.ok(m, String(parts[1].image).slice(0, 80));
  assert.deepEqual(Buffer.from(m[1], "base64").subarray(0, 8), PNG_SIGNATURE);
});
