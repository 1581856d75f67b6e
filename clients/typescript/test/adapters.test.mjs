// The adapters with the real npm packages against a real runner and engine,
// no model and no network (run through tests/integration/test_ts_adapters.sh):
// deepagents' own file tools (BaseSandbox: ls, read, write, edit, glob, grep)
// and execute on the sandman backend; an OpenAI Agents SDK SandboxAgent,
// driven by a scripted model, runs shell commands (writing and reading a
// file) in a sandman sandbox.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Runner, Usage } from "@openai/agents";
import { SandboxAgent, shell } from "@openai/agents/sandbox";

import { SandmanSandbox } from "../dist/adapters/deepagents.js";
import { SandmanSandboxClient } from "../dist/adapters/openai-agents.js";
import { startRunner } from "./runner.mjs";

let runner;
before(async () => {
  runner = await startRunner();
});
after(async () => {
  await runner?.stop();
});

test("deepagents: its file tools and execute on the sandman backend", async () => {
  const sb = new SandmanSandbox({ client: runner.client, runId: "ts-deepagents" });
  const w = await sb.write("/workspace/src/app.py", "def main():\n    return 'hello'\n");
  assert.ok(!w.error, JSON.stringify(w));
  const e = await sb.edit("/workspace/src/app.py", "'hello'", "'goodbye'");
  assert.ok(!e.error, JSON.stringify(e));
  const r = await sb.read("/workspace/src/app.py");
  assert.ok(!r.error, JSON.stringify(r));
  assert.match(JSON.stringify(r), /goodbye/);
  const ls = await sb.ls("/workspace/src");
  assert.match(JSON.stringify(ls), /app\.py/);
  const g = await sb.glob("**/*.py", "/workspace");
  assert.match(JSON.stringify(g), /app\.py/);
  const gr = await sb.grep("goodbye", "/workspace");
  assert.match(JSON.stringify(gr), /app\.py/);
  const x = await sb.execute("cd /workspace && python3 -c 'print(1)' 2>/dev/null || wc -l src/app.py");
  assert.equal(x.exitCode, 0);
  assert.match(x.output, /^(1|2 src\/app\.py)\n?$/);
  const down = await sb.downloadFiles(["/workspace/src/app.py", "/etc/passwd"]);
  assert.match(Buffer.from(down[0].content).toString(), /goodbye/);
  assert.equal(down[1].content, null);
  assert.ok(down[1].error);
});

// A model that answers from a script: each turn returns the next items.
class ScriptedModel {
  constructor(turns) {
    this.turns = turns;
    this.requests = [];
  }
  async getResponse(request) {
    this.requests.push(request);
    const output = this.turns.shift();
    assert.ok(output, "the agent asked the model more often than the script says");
    return { usage: new Usage(), output, responseId: `r${this.requests.length}` };
  }
  async *getStreamedResponse() {
    throw new Error("not streamed");
  }
}

function call(id, name, args) {
  return { type: "function_call", callId: id, name, arguments: JSON.stringify(args), status: "completed" };
}

function message(text) {
  return { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] };
}

test("OpenAI Agents SDK: a scripted SandboxAgent runs commands in a sandman sandbox", async () => {
  const model = new ScriptedModel([
    [call("c1", "exec_command", { cmd: "echo 'from the agent' > /workspace/note.txt; id -un" })],
    [call("c2", "exec_command", { cmd: "cat /workspace/note.txt" })],
    [message("done")],
  ]);
  const agent = new SandboxAgent({ name: "coder", instructions: "test", model, capabilities: [shell()] });
  const client = new SandmanSandboxClient(runner.client, { runId: "ts-openai" });
  const result = await new Runner({ tracingDisabled: true }).run(agent, "write and read a note", { sandbox: { client } });
  assert.equal(result.finalOutput, "done");
  // What the tools answered is what the model saw next.
  const seen = JSON.stringify(model.requests.at(-1).input);
  assert.match(seen, /from the agent/);
  assert.match(seen, /sandbox\\n/); // id -un: sandman's sandbox user
  assert.equal(await runner.client.files.readText({ run_id: "ts-openai" }, "note.txt"), "from the agent\n");
});

test("OpenAI Agents SDK: a session's own sandbox is removed when the SDK closes the session", async () => {
  const own = async () => (await runner.client.listSandboxes({ all: true })).filter((s) => (s.run_id ?? "").startsWith("openai-"));
  assert.equal((await own()).length, 0);
  const model = new ScriptedModel([[call("c1", "exec_command", { cmd: "echo kept > /workspace/x; cat /workspace/x" })], [message("done")]]);
  const agent = new SandboxAgent({ name: "coder", instructions: "test", model, capabilities: [shell()] });
  const client = new SandmanSandboxClient(runner.client);
  const result = await new Runner({ tracingDisabled: true }).run(agent, "go", { sandbox: { client } });
  assert.equal(result.finalOutput, "done");
  assert.match(JSON.stringify(model.requests.at(-1).input), /kept/);
  // The runner made the session, so it ended it: close() deleted the sandbox.
  assert.deepEqual(await own(), []);

  // A session made and closed by hand, and the client's delete(state).
  const s1 = await client.create();
  assert.ok(s1.state.sandboxId);
  assert.equal((await own()).length, 1);
  await s1.close();
  await s1.close(); // once is enough; again is fine
  const s2 = await client.create();
  await client.delete(s2.state);
  assert.deepEqual(await own(), []);
  // A named run is the caller's: it stays.
  const s3 = await new SandmanSandboxClient(runner.client, { runId: "ts-openai-named" }).create();
  assert.equal((await s3.exec({ cmd: "true" })).exitCode, 0);
  await s3.close();
  assert.equal((await runner.client.listSandboxes()).filter((s) => s.run_id === "ts-openai-named").length, 1);
});
