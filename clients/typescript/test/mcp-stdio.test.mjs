// `sandman mcp` with the official MCP TypeScript SDK's client over stdio:
// list the tools (schemas, annotations), run a command, write, edit and read
// back a file, drive terminals (a shell keeps its variable between two
// calls, a program reads what is typed, a closed one is gone),
// list/glob/grep, paths that leave the workspace refused, and
// the session's sandbox removed when the session ends. Needs SANDMAN_BIN and
// an engine (run through tests/integration/test_mcp_sdk.sh).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const bin = process.env.SANDMAN_BIN;
assert.ok(bin, "SANDMAN_BIN must name the sandman binary");

function sandboxes() {
  const out = execFileSync(bin, ["sandbox", "list", "--json"], { encoding: "utf8" });
  return JSON.parse(out);
}

function text(result) {
  return result.content.map((c) => c.text ?? "").join("");
}

// A terminal tool answers once the screen was quiet for a moment, which a
// slow machine can reach before the program has written all it will:
// read the terminal's screen again until re shows (a bounded poll, 60 s).
async function screenUntil(client, result, terminal, re) {
  const until = Date.now() + 60_000;
  while (!re.test(text(result)) && Date.now() < until)
    result = await client.callTool({ name: "terminal_screen", arguments: { terminal, wait_ms: 1000 } });
  return result;
}

test("sandman mcp over stdio with the MCP SDK client", async () => {
  const before = sandboxes().length;
  const transport = new StdioClientTransport({
    command: bin,
    args: ["mcp"],
    env: { ...process.env },
    stderr: "inherit",
  });
  const client = new Client({ name: "sandman-test", version: "1.0.0" });
  await client.connect(transport);
  try {
    assert.equal(client.getServerVersion().name, "sandman");

    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name).sort();
    assert.deepEqual(names, ["diff", "edit_file", "execute", "fork", "glob", "grep", "ls", "pause", "read_file", "resume", "rollback", "run_code", "snapshot", "terminal_close", "terminal_open", "terminal_screen", "terminal_send", "write_file"]);
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    assert.equal(byName.read_file.annotations.readOnlyHint, true);
    assert.equal(byName.read_file.annotations.destructiveHint, false);
    assert.equal(byName.execute.annotations.destructiveHint, true);
    assert.equal(byName.execute.annotations.openWorldHint, false);
    assert.deepEqual(byName.edit_file.inputSchema.required, ["path", "old_string", "new_string"]);
    // Every tool says what its structured result holds (the SDK client checks
    // each structuredContent below against it).
    for (const t of tools) assert.equal(t.outputSchema?.type, "object", `${t.name} has an outputSchema`);
    assert.deepEqual(byName.read_file.outputSchema.properties.encoding.enum, ["utf-8", "base64"]);

    const run = await client.callTool({ name: "execute", arguments: { command: "echo hello from $(id -un); pwd" } });
    assert.equal(run.isError, false);
    assert.match(text(run), /hello from sandbox\n\/workspace\n/);
    assert.equal(run.structuredContent.exit_code, 0);
    const fails = await client.callTool({ name: "execute", arguments: { command: "echo oops >&2; exit 3" } });
    assert.equal(fails.isError, true);
    assert.equal(fails.structuredContent.exit_code, 3);
    assert.equal(fails.structuredContent.stderr, "oops\n");

    const w = await client.callTool({
      name: "write_file",
      arguments: { path: "notes/todo.md", content: "# Todo\n- write tests\n- ship it\n" },
    });
    assert.equal(w.isError, false, text(w));
    assert.deepEqual(w.structuredContent, { path: "notes/todo.md", size: 31 });
    const e = await client.callTool({
      name: "edit_file",
      arguments: { path: "/workspace/notes/todo.md", old_string: "- write tests", new_string: "- write more tests" },
    });
    assert.equal(e.isError, false, text(e));
    assert.equal(e.structuredContent.occurrences, 1);
    const twice = await client.callTool({ name: "edit_file", arguments: { path: "notes/todo.md", old_string: "-", new_string: "*" } });
    assert.equal(twice.isError, true);
    assert.match(text(twice), /occurs 2 times/);
    const r = await client.callTool({ name: "read_file", arguments: { path: "notes/todo.md" } });
    assert.equal(text(r), "# Todo\n- write more tests\n- ship it\n");
    assert.equal(r.structuredContent.encoding, "utf-8");
    assert.equal(r.structuredContent.total_lines, 3);
    const part = await client.callTool({ name: "read_file", arguments: { path: "notes/todo.md", offset: 1, limit: 1 } });
    assert.equal(text(part), "- write more tests\n");
    // The command sees what the file tools wrote, and the other way round.
    const cat = await client.callTool({ name: "execute", arguments: { command: "cat notes/todo.md | wc -l; echo made > made.txt" } });
    assert.match(text(cat), /^3\n/);
    assert.equal(text(await client.callTool({ name: "read_file", arguments: { path: "made.txt" } })), "made\n");

    // A terminal the model drives across its turns: a shell keeps its
    // variable between two calls, the screen reads as text.
    const first = await client.callTool({ name: "terminal_send", arguments: { keys: "x=41\r" } });
    assert.equal(first.isError, false, text(first));
    assert.match(text(first), /^\[terminal 1: running, 80x24/);
    const sent = await screenUntil(client, await client.callTool({ name: "terminal_send", arguments: { terminal: "1", keys: "echo v=$((x+1))\r" } }), "1", /v=42/);
    assert.match(text(sent), /v=42/);
    assert.equal(sent.structuredContent.state, "running");
    const scr = await client.callTool({ name: "terminal_screen", arguments: { terminal: "1" } });
    assert.match(scr.structuredContent.text, /v=42/);
    const opened = await client.callTool({ name: "terminal_open", arguments: { command: "read line; echo got-$line", rows: 10, cols: 40 } });
    assert.match(text(opened), /^\[terminal 2: running, 40x10/);
    const done = await screenUntil(client, await client.callTool({ name: "terminal_send", arguments: { terminal: "2", keys: "hi\r" } }), "2", /got-hi/);
    assert.match(text(done), /got-hi/);
    const closed = await client.callTool({ name: "terminal_close", arguments: { terminal: "1" } });
    assert.equal(closed.structuredContent.state, "exited");
    const gone = await client.callTool({ name: "terminal_screen", arguments: { terminal: "1" } });
    assert.equal(gone.isError, true);

    const ls = await client.callTool({ name: "ls", arguments: {} });
    assert.match(text(ls), /notes\//);
    assert.ok(ls.structuredContent.entries.some((x) => x.path === "made.txt" && x.type === "file"));
    const g = await client.callTool({ name: "glob", arguments: { pattern: "**/*.md" } });
    assert.deepEqual(g.structuredContent.entries.map((x) => x.path), ["notes/todo.md"]);
    const grep = await client.callTool({ name: "grep", arguments: { pattern: "ship", include: "**/*.md" } });
    assert.deepEqual(grep.structuredContent.matches, [{ path: "notes/todo.md", line: 3, text: "- ship it" }]);

    for (const path of ["../etc/passwd", "/etc/passwd"]) {
      const bad = await client.callTool({ name: "read_file", arguments: { path } });
      assert.equal(bad.isError, true, path);
      assert.match(text(bad), /workspace|outside/);
    }
    await client.callTool({ name: "execute", arguments: { command: "ln -s /etc/passwd pw; head -c 100 /dev/urandom > bin.dat" } });
    const link = await client.callTool({ name: "read_file", arguments: { path: "pw" } });
    assert.equal(link.isError, true);
    assert.match(text(link), /symbolic link/);
    // A binary file comes back whole, in base64, not refused.
    const bin2 = await client.callTool({ name: "read_file", arguments: { path: "bin.dat" } });
    assert.equal(bin2.isError, false, text(bin2));
    assert.match(text(bin2), /bin\.dat is a binary file \(100 bytes\), in base64/);
    assert.equal(bin2.structuredContent.encoding, "base64");
    assert.equal(bin2.structuredContent.size, 100);
    const sum = await client.callTool({ name: "execute", arguments: { command: "sha256sum bin.dat" } });
    const { createHash } = await import("node:crypto");
    const got = createHash("sha256").update(Buffer.from(bin2.structuredContent.content, "base64")).digest("hex");
    assert.equal(sum.structuredContent.stdout.split(" ")[0], got);
    const editBin = await client.callTool({ name: "edit_file", arguments: { path: "bin.dat", old_string: "a", new_string: "b" } });
    assert.equal(editBin.isError, true);
    assert.match(text(editBin), /binary file/);
    const unknownArg = await client.callTool({ name: "ls", arguments: { path: ".", recursive: true } });
    assert.equal(unknownArg.isError, true);

    // One sandbox for the session.
    assert.equal(sandboxes().length, before + 1);
  } finally {
    await client.close();
  }
  // The session's own sandbox goes with it.
  for (let i = 0; i < 50 && sandboxes().length !== before; i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal(sandboxes().length, before);
});

test("sandman mcp applies the configuration's tool policy and refuses modes without a lasting sandbox", async () => {
  const { mkdtempSync, writeFileSync, rmSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const dir = mkdtempSync(join(tmpdir(), "sandman-mcp-"));
  const cfg = join(dir, "sandman.yaml");
  writeFileSync(cfg, "agents:\n  reviewer:\n    tools:\n      deny: [write_file, edit_file]\n");
  const transport = new StdioClientTransport({
    command: bin,
    args: ["--config", cfg, "mcp", "--agent", "reviewer"],
    env: { ...process.env },
    stderr: "inherit",
  });
  const client = new Client({ name: "sandman-test", version: "1.0.0" });
  await client.connect(transport);
  try {
    const w = await client.callTool({ name: "write_file", arguments: { path: "x", content: "y" } });
    assert.equal(w.isError, true);
    assert.match(text(w), /refused by the configuration/);
    const run = await client.callTool({ name: "execute", arguments: { command: "ls -A /workspace | wc -l" } });
    assert.equal(text(run).split("\n")[0], "0");
  } finally {
    await client.close();
    rmSync(dir, { recursive: true, force: true });
  }
  for (const mode of ["per_tool", "none"]) {
    let code = 0;
    try {
      execFileSync(bin, ["mcp", "--mode", mode], { input: "", stdio: ["pipe", "pipe", "pipe"] });
    } catch (e) {
      code = e.status;
    }
    assert.equal(code, 2, `--mode ${mode}`);
  }
});
