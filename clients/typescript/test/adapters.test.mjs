// The adapters with the real npm packages against a real runner and engine,
// no model and no network (run through tests/integration/test_ts_adapters.sh).
//
// deepagents: a deep agent (createDeepAgent) on the sandman backend, driven
// by a scripted chat model, calls its own tools (write_file, edit_file,
// read_file, ls, glob, grep, execute) as a model would: "/" is the sandbox's
// /workspace; a grep over a large tree ends with its truncation note; every
// failure (a missing file, a folder, '..', a planted link, a timeout, a tool
// refused by the configuration, a sandbox that cannot be made, a runner
// that is gone) comes back as the framework's own result, never a throw.
//
// OpenAI Agents SDK: a SandboxAgent driven by a scripted model runs shell
// commands and apply_patch in a sandman sandbox; the session's failures
// are the SDK's own typed errors.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, ToolMessage } from "@langchain/core/messages";
import { Runner } from "@openai/agents";
import {
  SandboxAgent,
  SandboxApplyPatchFileNotFoundError,
  SandboxApplyPatchPathError,
  SandboxConfigurationError,
  SandboxError,
  SandboxExecTransportError,
  SandboxPathResolutionError,
  SandboxProviderError,
  SandboxWorkspaceReadNotFoundError,
  filesystem,
  shell,
} from "@openai/agents/sandbox";
import { createDeepAgent } from "deepagents";

import { SandmanClient } from "../dist/index.js";
import { SandmanSandbox } from "../dist/adapters/deepagents.js";
import { SandmanSandboxClient } from "../dist/adapters/openai-agents.js";
import { startRunner } from "./runner.mjs";
import { call, message, ScriptedModel } from "./scripted-model.mjs";

// The runner's configuration: agent "locked" may use no tool at all, agent
// "broken" asks for a runtime the engine lacks (its sandbox cannot be made: 503).
const cfgDir = mkdtempSync(join(tmpdir(), "sandman-adapters-"));
writeFileSync(
  join(cfgDir, "sandman.yaml"),
  'version: 1\nagents:\n  locked:\n    tools:\n      deny: ["*"]\n  broken:\n    runtime: nosuch\n',
);
let runner;
before(async () => {
  process.env.SANDMAN_CONFIG = join(cfgDir, "sandman.yaml");
  runner = await startRunner();
});
after(async () => {
  await runner?.stop();
  rmSync(cfgDir, { recursive: true, force: true });
});

// ---- deepagents ----

// A chat model that answers from a script: each turn is one tool call (or
// the final text); what the tools answered is kept by tool call id.
class ScriptedChatModel extends BaseChatModel {
  constructor(turns) {
    super({});
    this.turns = turns;
    this.n = 0;
    this.results = new Map();
  }
  _llmType() {
    return "scripted";
  }
  bindTools() {
    return this;
  }
  async _generate(messages) {
    for (const m of messages) if (ToolMessage.isInstance(m)) this.results.set(m.tool_call_id, m);
    const turn = this.turns[this.n++];
    assert.ok(turn, "the agent asked the model more often than the script says");
    const message =
      typeof turn === "string"
        ? new AIMessage(turn)
        : new AIMessage({ content: "", tool_calls: [{ id: `c${this.n}`, name: turn.tool, args: turn.args, type: "tool_call" }] });
    return { generations: [{ text: typeof turn === "string" ? turn : "", message }] };
  }
  /** The text a tool call of the script got back. */
  answer(i) {
    const m = this.results.get(`c${i + 1}`);
    assert.ok(m, `no answer to turn ${i + 1}`);
    return typeof m.content === "string" ? m.content : JSON.stringify(m.content);
  }
}

/** Runs a deep agent on backend through the script; returns the model (answers by turn). */
async function drive(backend, turns) {
  const model = new ScriptedChatModel([...turns, "done"]);
  const agent = createDeepAgent({ model, backend });
  const out = await agent.invoke({ messages: [{ role: "user", content: "work in the sandbox" }] }, { recursionLimit: 200 });
  assert.equal(out.messages.at(-1).content, "done");
  return model;
}

test("deepagents: its own tools, driven by the agent, work under /workspace", async () => {
  const sb = new SandmanSandbox({ client: runner.client, runId: "ts-deepagents", timeoutS: 5 });
  await runner.client.execute({ run_id: "ts-deepagents", command: "echo needle > /tmp/outside.txt" });
  const turns = [
    { tool: "write_file", args: { file_path: "/src/app.py", content: "def main():\n    return 'hello'\n" } },
    { tool: "edit_file", args: { file_path: "/src/app.py", old_string: "'hello'", new_string: "'goodbye'" } },
    { tool: "read_file", args: { file_path: "/src/app.py" } },
    { tool: "ls", args: { path: "/" } },
    { tool: "glob", args: { pattern: "**/*.py" } },
    { tool: "grep", args: { pattern: "goodbye" } },
    { tool: "execute", args: { command: "pwd; wc -l < src/app.py" } },
    { tool: "grep", args: { pattern: "needle" } },
  ];
  const m = await drive(sb, turns);
  assert.match(m.answer(0), /Successfully wrote to '\/src\/app\.py'/);
  assert.equal(await runner.client.files.readText({ run_id: "ts-deepagents" }, "src/app.py"), "def main():\n    return 'goodbye'\n");
  assert.match(m.answer(1), /Successfully replaced 1 occurrence/);
  assert.match(m.answer(2), /return 'goodbye'/);
  assert.match(m.answer(2), /@@ lines 1-2 of 2 @@/);
  assert.match(m.answer(3), /^\/src\/ \(directory\)$/m);
  assert.doesNotMatch(m.answer(3), /\/etc|\/proc|\/usr/); // the workspace, not the container's root
  assert.match(m.answer(4), /^\/src\/app\.py$/m);
  assert.match(m.answer(5), /\/src\/app\.py/);
  assert.match(m.answer(6), /^\/workspace\n2\n/);
  assert.match(m.answer(6), /\[Command succeeded with exit code 0\]/);
  // grep's default "/" is the workspace: /tmp/outside.txt is not searched.
  assert.match(m.answer(7), /No matches found/);
});

test("deepagents: a grep over a large tree ends with its truncation flag, within the match cap", async () => {
  const sb = new SandmanSandbox({ client: runner.client, runId: "ts-deepagents-big" });
  const made = await sb.execute("mkdir -p big && cd big && i=0; while [ $i -lt 3000 ]; do echo \"needle $i\" > f$i.txt; i=$((i+1)); done; ls | wc -l");
  assert.equal(made.output.trim(), "3000");
  const t0 = Date.now();
  const g = await sb.grep("needle", "/big");
  const ms = Date.now() - t0;
  assert.equal(g.truncated, true);
  assert.equal(g.matches.length, 1000);
  assert.ok(g.matches.every((x) => x.path.startsWith("/big/f")));
  console.log(`# grep over 3000 files: ${g.matches.length} matches, truncated, in ${ms} ms`);
  const m = await drive(sb, [{ tool: "grep", args: { pattern: "needle", path: "/big", max_count: 50 } }]);
  assert.match(m.answer(0), /the search stopped early/);
  assert.equal(m.answer(0).match(/needle \d+/g).length, 50);
  const gl = await sb.glob("**/*.txt", "/big");
  assert.equal(gl.files.length, 1000);
  assert.equal(gl.truncated, true);
});

test("deepagents: every failure is the framework's own result, with words a model can act on", async () => {
  const sb = new SandmanSandbox({ client: runner.client, runId: "ts-deepagents-fail", timeoutS: 3 });
  await sb.execute("mkdir -p src && echo x > src/a.txt && ln -s /etc planted");
  const turns = [
    { tool: "read_file", args: { file_path: "/nope.txt" } },
    { tool: "read_file", args: { file_path: "/src" } },
    { tool: "read_file", args: { file_path: "/../etc/passwd" } },
    { tool: "read_file", args: { file_path: "/workspace/src/a.txt" } },
    { tool: "write_file", args: { file_path: "/planted/evil", content: "x" } },
    { tool: "edit_file", args: { file_path: "/src/a.txt", old_string: "nothere", new_string: "y" } },
    { tool: "ls", args: { path: "/nope" } },
    { tool: "execute", args: { command: "echo started; sleep 30" } },
    { tool: "execute", args: { command: "exit 3" } },
  ];
  const m = await drive(sb, turns);
  assert.match(m.answer(0), /'\/nope\.txt' not found/);
  assert.match(m.answer(1), /'\/src' is a folder, not a file: list it with ls/);
  assert.match(m.answer(2), /refused: '\.\.' may not leave \/workspace/);
  assert.match(m.answer(3), /not found: the file tools' \/ is the sandbox's \/workspace.*try '\/src\/a\.txt'/);
  assert.match(m.answer(4), /Failed to write to '\/planted\/evil': '\/planted\/evil' is refused: .*link/);
  assert.match(m.answer(5), /String not found in file '\/src\/a\.txt': read it again/);
  assert.match(m.answer(6), /Error listing files: '\/nope' not found/);
  assert.match(m.answer(7), /started\n\[sandman: the tool ran longer than 3s and was killed; run long jobs in the background/);
  assert.match(m.answer(7), /exit code 124/);
  assert.match(m.answer(8), /\[Command failed with exit code 3\]/);

  // Refused by the configuration (403): the files tools and execute alike.
  const locked = new SandmanSandbox({ client: runner.client, runId: "ts-deepagents-locked", agent: "locked" });
  const lr = await locked.read("/a.txt");
  assert.match(lr.error, /refused by sandman's configuration/);
  const lw = await locked.write("/a.txt", "x");
  assert.match(lw.error, /refused by sandman's configuration/);
  const lx = await locked.execute("true");
  assert.equal(lx.exitCode, null);
  assert.match(lx.output, /sandman could not run the command: refused by sandman's configuration/);
  const lg = await locked.grep("x");
  assert.match(lg.error, /refused by sandman's configuration/);

  // A sandbox that cannot be made (503): a result that says to try again.
  const broken = new SandmanSandbox({ client: runner.client, runId: "ts-deepagents-broken", agent: "broken" });
  const br = await broken.ls("/");
  assert.match(br.error, /the sandbox is not available right now \(HTTP 503/);
  const bx = await broken.execute("true");
  assert.match(bx.output, /sandman could not run the command/);

  // A runner that is gone: the same shapes, no throw.
  const gone = new SandmanSandbox({ client: new SandmanClient({ address: `unix:${runner.dir}/no-such.sock`, token: "x" }), runId: "r" });
  assert.match((await gone.read("/a")).error, /could not be reached/);
  assert.match((await gone.glob("*")).error, /could not be reached/);
  assert.match((await gone.execute("true")).output, /could not be reached/);
  assert.deepEqual(await gone.downloadFiles(["/a"]), [{ path: "/a", content: null, error: "permission_denied" }]);
});

// ---- OpenAI Agents SDK ----

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

test("OpenAI Agents SDK: the session's failures are the SDK's own typed errors", async () => {
  const client = new SandmanSandboxClient(runner.client, { runId: "ts-openai-errors", timeoutS: 3 });
  const s = await client.create();
  await s.exec({ cmd: "mkdir -p d && echo hi > d/a.txt && ln -s /etc planted" });

  const rejects = async (p, cls, re) => {
    await assert.rejects(p, (e) => e instanceof cls && e instanceof SandboxError && (!re || re.test(e.message)));
  };
  await rejects(s.readFile({ path: "missing.txt" }), SandboxWorkspaceReadNotFoundError);
  await rejects(s.readFile({ path: "/etc/passwd" }), SandboxPathResolutionError, /outside \/workspace/);
  await rejects(s.readFile({ path: "planted/passwd" }), SandboxPathResolutionError, /link/);
  await rejects(s.listDir({ path: "nope" }), SandboxWorkspaceReadNotFoundError);
  assert.deepEqual((await s.listDir({ path: "d" })).map((e) => [e.name, e.path, e.type]), [["a.txt", "d/a.txt", "file"]]);
  assert.equal(Buffer.from(await s.readFile({ path: "d/a.txt", maxBytes: 1 })).toString(), "h");

  // apply_patch's editor: its own error classes.
  const ed = s.createEditor();
  await rejects(ed.updateFile({ type: "update_file", path: "nope.txt", diff: "@@\n-a\n+b\n" }), SandboxApplyPatchFileNotFoundError);
  await rejects(ed.createFile({ type: "create_file", path: "/etc/x", diff: "+x\n" }), SandboxApplyPatchPathError);

  // A command that ran is a result, a timeout included (with a line saying so).
  const slow = await s.exec({ cmd: "echo started; sleep 30" });
  assert.equal(slow.exitCode, 124);
  assert.match(slow.output, /started\n\[sandman: the tool ran longer than 3s and was killed\]/);

  // A command refused by the configuration: SandboxConfigurationError, and
  // the shell tool's text says so.
  const locked = await new SandmanSandboxClient(runner.client, { runId: "ts-openai-locked", agent: "locked" }).create();
  await rejects(locked.exec({ cmd: "true" }), SandboxConfigurationError, /refused/);
  assert.match(await locked.execCommand({ cmd: "true" }), /^Error \(configuration_error\): sandman refused the command/);
  // A sandbox that cannot be made: the transport error, retryable in kind.
  const broken = await new SandmanSandboxClient(runner.client, { runId: "ts-openai-broken", agent: "broken" }).create();
  await rejects(broken.exec({ cmd: "true" }), SandboxExecTransportError);
  await rejects(broken.readFile({ path: "a" }), SandboxProviderError);

  // view_image: an image of the workspace.
  const png = Buffer.from("89504e470d0a1a0a0000000d4948445200000001000000010806000000", "hex");
  await runner.client.files.write({ run_id: "ts-openai-errors" }, "img.png", png);
  const img = await s.viewImage({ path: "img.png" });
  assert.equal(img.image.mediaType, "image/png");
  await rejects(s.viewImage({ path: "d/a.txt" }), SandboxError, /Unsupported image format/);
  await s.close();
});

test("OpenAI Agents SDK: apply_patch through a SandboxAgent, its failure told to the model", async () => {
  const patch = (id, operation) => ({ type: "apply_patch_call", callId: id, status: "completed", operation });
  const model = new ScriptedModel([
    [patch("p1", { type: "create_file", path: "notes.md", diff: "+# Notes\n+one\n" })],
    [patch("p2", { type: "update_file", path: "missing.md", diff: "@@\n-a\n+b\n" })],
    [message("done")],
  ]);
  const agent = new SandboxAgent({ name: "writer", instructions: "test", model, capabilities: [filesystem()] });
  const client = new SandmanSandboxClient(runner.client, { runId: "ts-openai-patch" });
  const result = await new Runner({ tracingDisabled: true }).run(agent, "write notes", { sandbox: { client } });
  assert.equal(result.finalOutput, "done");
  assert.equal(await runner.client.files.readText({ run_id: "ts-openai-patch" }, "notes.md"), "# Notes\none");
  const seen = JSON.stringify(model.requests.at(-1).input);
  assert.match(seen, /missing\.md not found/);
});
