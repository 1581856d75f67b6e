// A sandbox client for the OpenAI Agents SDK on sandman: a SandboxAgent's
// shell (exec_command), filesystem (apply_patch) and memory capabilities
// run in a sandman per_run (or per_worker) sandbox through the runner.
//
//   import { Runner } from "@openai/agents";
//   import { SandboxAgent, shell, filesystem } from "@openai/agents/sandbox";
//   import { SandmanClient } from "sandman-client";
//   import { SandmanSandboxClient } from "sandman-client/openai-agents";
//   const agent = new SandboxAgent({ name: "coder", capabilities: [shell(), filesystem()] });
//   await new Runner().run(agent, "fix the tests", {
//     sandbox: { client: new SandmanSandboxClient(new SandmanClient()) },
//   });
//
// The workspace is the sandbox's /workspace (the SDK's default manifest root).
//
// codeInterpreterTool() is a function tool for any Agent: Python in a live
// interpreter of a sandman sandbox (a code context, docs/code.md), state
// kept between calls, figures returned to the model as images:
//
//   const agent = new Agent({ name: "analyst", tools: [codeInterpreterTool(new SandmanClient(), { runId: "r1" })] });
import { randomUUID } from "node:crypto";

import {
  applyDiff,
  tool,
  type ApplyPatchOperation,
  type ApplyPatchResult,
  type Editor,
  type FunctionTool,
  type ToolCallOutputContent,
} from "@openai/agents";
import {
  Manifest,
  normalizeSandboxClientCreateArgs,
  type ExecCommandArgs,
  type ListDirectoryArgs,
  type MaterializeEntryArgs,
  type ReadFileArgs,
  type SandboxClient,
  type SandboxClientCreateArgs,
  type SandboxDirectoryEntry,
  type SandboxExecResult,
  type SandboxSession,
  type SandboxSessionState,
} from "@openai/agents/sandbox";

import { SandmanClient } from "../index.js";
import { SandmanError } from "../transport.js";
import type { SandboxKey } from "../types.js";
import { WORKSPACE, workspacePath, type SandboxChoice } from "./common.js";

/** Without runId or workerKey, each session gets a run of its own. */
export interface SandmanSandboxClientOptions extends SandboxChoice {
  [key: string]: unknown;
}

export interface SandmanSandboxSessionState extends SandboxSessionState {
  runId?: string;
  workerKey?: string;
  project?: string;
  agent?: string;
  /** The sandbox the session made for itself (POST /v1/sandboxes): removed by close() and delete(). */
  sandboxId?: string;
}

/** Removes the session's own sandbox, once; one already gone is fine. */
async function deleteOwnSandbox(client: SandmanClient, state: SandmanSandboxSessionState): Promise<void> {
  const id = state.sandboxId;
  if (!id) return;
  try {
    await client.deleteSandbox(id);
  } catch (e) {
    if (!(e instanceof SandmanError && e.status === 404)) throw e;
  }
  state.sandboxId = undefined;
}

const BYTES_PER_TOKEN = 4;

function keyOf(state: SandmanSandboxSessionState): SandboxKey {
  return state.workerKey
    ? { worker_key: state.workerKey, mode: "per_worker", project: state.project, agent: state.agent }
    : { run_id: state.runId, mode: "per_run", project: state.project, agent: state.agent };
}

function quote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The files API's path for an SDK path (relative to /workspace, or absolute under it). */
function apiPath(path: string): string {
  const p = workspacePath(path);
  if (p === null) throw new Error(`${path}: sandman's sandboxes keep their files under ${WORKSPACE}`);
  return p;
}

function truncate(text: string, maxTokens?: number): { text: string; originalTokens?: number } {
  if (maxTokens === undefined) return { text };
  const max = Math.max(0, maxTokens) * BYTES_PER_TOKEN;
  const bytes = Buffer.byteLength(text);
  if (bytes <= max) return { text };
  const half = Math.floor(max / 2);
  const buf = Buffer.from(text);
  const head = buf.subarray(0, half).toString("utf8");
  const tail = buf.subarray(bytes - (max - half)).toString("utf8");
  return { text: `${head}\n…${Math.ceil(bytes / BYTES_PER_TOKEN)} tokens truncated…\n${tail}`, originalTokens: Math.ceil(bytes / BYTES_PER_TOKEN) };
}

export class SandmanSandboxSession implements SandboxSession<SandmanSandboxSessionState> {
  readonly state: SandmanSandboxSessionState;
  private readonly client: SandmanClient;
  private readonly tool: string;
  private readonly timeoutS?: number;

  constructor(client: SandmanClient, state: SandmanSandboxSessionState, opts: SandmanSandboxClientOptions = {}) {
    this.client = client;
    this.state = state;
    this.tool = opts.tool ?? "shell";
    this.timeoutS = opts.timeoutS;
  }

  private get key(): SandboxKey {
    return keyOf(this.state);
  }

  supportsPty(): boolean {
    return false;
  }

  async exec(args: ExecCommandArgs): Promise<SandboxExecResult> {
    let cmd = args.cmd;
    if (args.workdir) cmd = `cd ${quote(args.workdir.startsWith("/") ? args.workdir : `${WORKSPACE}/${args.workdir}`)} && ${cmd}`;
    const request = args.shell
      ? { argv: [args.shell, args.login ? "-lc" : "-c", cmd] }
      : { command: cmd };
    const start = Date.now();
    const r = await this.client.execute({ ...this.key, ...request, tool: this.tool, timeout_s: this.timeoutS, env: this.state.environment });
    const ran = r.failure_kind === null || r.failure_kind === "tool" || r.failure_kind === "timeout";
    const combined = ran ? r.stdout + r.stderr : `sandman: ${r.error ?? "the command could not run"}\n`;
    const t = truncate(combined, args.maxOutputTokens);
    return {
      output: t.text,
      stdout: r.stdout,
      stderr: ran ? r.stderr : combined,
      wallTimeSeconds: (Date.now() - start) / 1000,
      exitCode: ran ? r.exit_code : null,
      originalTokenCount: t.originalTokens,
    };
  }

  async execCommand(args: ExecCommandArgs): Promise<string> {
    const r = await this.exec(args);
    const lines = [`Wall time: ${r.wallTimeSeconds.toFixed(4)} seconds`];
    if (typeof r.exitCode === "number") lines.push(`Process exited with code ${r.exitCode}`);
    if (typeof r.originalTokenCount === "number") lines.push(`Original token count: ${r.originalTokenCount}`);
    lines.push("Output:", r.output);
    return lines.join("\n");
  }

  async readFile(args: ReadFileArgs): Promise<Uint8Array> {
    const length = args.maxBytes === undefined ? undefined : args.maxBytes + 1;
    const data = await this.client.files.read(this.key, apiPath(args.path), { length });
    if (args.maxBytes !== undefined && data.byteLength > args.maxBytes)
      throw new Error(`${args.path} is larger than ${args.maxBytes} bytes`);
    return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  }

  async listDir(args: ListDirectoryArgs): Promise<SandboxDirectoryEntry[]> {
    const l = await this.client.files.list(this.key, apiPath(args.path), { depth: 1 });
    return l.entries.map((e) => ({
      name: e.path.slice(e.path.lastIndexOf("/") + 1),
      path: `${WORKSPACE}/${e.path}`,
      type: e.type === "file" ? "file" : e.type === "dir" ? "dir" : "other",
    }));
  }

  private async stat(path: string): Promise<{ type: string } | null> {
    const p = workspacePath(path);
    if (p === null) return null;
    try {
      return await this.client.files.stat(this.key, p);
    } catch (e) {
      if (e instanceof SandmanError && (e.status === 404 || e.status === 403 || e.status === 400)) return null;
      throw e;
    }
  }

  async pathExists(path: string): Promise<boolean> {
    return (await this.stat(path)) !== null;
  }

  async directoryExists(path: string): Promise<boolean> {
    return (await this.stat(path))?.type === "dir";
  }

  /** apply_patch: V4A diffs applied here, files written through the files API. */
  createEditor(): Editor {
    const key = () => this.key;
    const client = this.client;
    const done = (output: string): ApplyPatchResult => ({ status: "completed", output });
    return {
      async createFile(op: Extract<ApplyPatchOperation, { type: "create_file" }>): Promise<ApplyPatchResult> {
        const content = applyDiff("", op.diff, "create");
        await client.files.write(key(), apiPath(op.path), content, { parents: true });
        return done(`created ${op.path}`);
      },
      async updateFile(op: Extract<ApplyPatchOperation, { type: "update_file" }>): Promise<ApplyPatchResult> {
        const old = (await client.files.read(key(), apiPath(op.path))).toString("utf8");
        await client.files.write(key(), apiPath(op.path), applyDiff(old, op.diff));
        return done(`updated ${op.path}`);
      },
      async deleteFile(op: Extract<ApplyPatchOperation, { type: "delete_file" }>): Promise<ApplyPatchResult> {
        await client.files.delete(key(), apiPath(op.path));
        return done(`deleted ${op.path}`);
      },
    };
  }

  /** Files and folders of a manifest (other entry kinds are not supported here). */
  async materializeEntry(args: MaterializeEntryArgs): Promise<void> {
    const entry = args.entry;
    const path = apiPath(args.path.startsWith("/") ? args.path : `${WORKSPACE}/${args.path}`);
    if (entry.type === "file") {
      await this.client.files.write(this.key, path, entry.content, { parents: true });
    } else if (entry.type === "dir") {
      await this.client.files.mkdir(this.key, path, { parents: true });
      for (const [name, child] of Object.entries(entry.children ?? {}))
        await this.materializeEntry({ path: `${path}/${name}`, entry: child, runAs: args.runAs });
    } else {
      throw new Error(`manifest entry ${args.path}: sandman's sandbox client takes file and dir entries, not ${entry.type}`);
    }
  }

  async applyManifest(manifest: Manifest): Promise<void> {
    for (const [path, entry] of Object.entries(manifest.entries)) await this.materializeEntry({ path, entry });
  }

  /** The whole workspace as a tar. */
  async persistWorkspace(): Promise<Uint8Array> {
    const chunks: Buffer[] = [];
    for await (const c of await this.client.files.downloadTar(this.key, ["."])) chunks.push(Buffer.from(c));
    const all = Buffer.concat(chunks);
    return new Uint8Array(all.buffer, all.byteOffset, all.byteLength);
  }

  async hydrateWorkspace(data: string | ArrayBuffer | Uint8Array): Promise<void> {
    const bytes = typeof data === "string" ? Buffer.from(data, "base64") : data instanceof Uint8Array ? data : new Uint8Array(data);
    await this.client.files.uploadTar(this.key, ".", bytes);
  }

  async running(): Promise<boolean> {
    return true;
  }

  /** Ends the session: a sandbox it made for itself goes; a named run's or worker's stays. */
  async close(): Promise<void> {
    await deleteOwnSandbox(this.client, this.state);
  }
}

/** The SDK's sandbox client: one sandman sandbox per session. */
export class SandmanSandboxClient implements SandboxClient<SandmanSandboxClientOptions, SandmanSandboxSessionState> {
  readonly backendId = "sandman";
  readonly supportsDefaultOptions = true;

  constructor(
    private readonly client: SandmanClient,
    private readonly defaults: SandmanSandboxClientOptions = {},
  ) {}

  async create(
    args?: SandboxClientCreateArgs<SandmanSandboxClientOptions> | Manifest,
    manifestOptions?: SandmanSandboxClientOptions,
  ): Promise<SandmanSandboxSession> {
    const n = normalizeSandboxClientCreateArgs(args, manifestOptions);
    const o: SandmanSandboxClientOptions = { ...this.defaults, ...(n.options ?? {}) };
    if (n.manifest.root !== WORKSPACE)
      throw new Error(`sandman's sandboxes have their workspace at ${WORKSPACE}, not ${n.manifest.root}`);
    const state: SandmanSandboxSessionState = {
      manifest: n.manifest,
      runId: o.workerKey ? undefined : (o.runId ?? `openai-${randomUUID()}`),
      workerKey: o.workerKey,
      project: o.project,
      agent: o.agent,
      workspaceReady: true,
    };
    // A run of its own: made now, removed when the session ends.
    if (!o.workerKey && !o.runId) {
      const made = await this.client.createSandbox({ run_id: state.runId, project: o.project, agent: o.agent });
      state.sandboxId = made.id;
    }
    const session = new SandmanSandboxSession(this.client, state, o);
    try {
      await session.applyManifest(n.manifest);
    } catch (e) {
      await deleteOwnSandbox(this.client, state).catch(() => undefined);
      throw e;
    }
    return session;
  }

  /** Removes the sandbox a session made for itself (the SDK calls it for sessions it owns). */
  async delete(state: SandmanSandboxSessionState): Promise<void> {
    await deleteOwnSandbox(this.client, state);
  }

  async resume(state: SandmanSandboxSessionState): Promise<SandmanSandboxSession> {
    return new SandmanSandboxSession(this.client, state, this.defaults);
  }
}

export interface CodeInterpreterOptions extends SandboxChoice {
  /** The tool's name (default "code_interpreter"). */
  name?: string;
  /** The code context (default: the sandbox's default one). */
  context?: string;
  /** Most images of one run given to the model (default 4). */
  maxImages?: number;
}

/**
 * A code-interpreter function tool: the model's Python runs as a notebook
 * cell in a code context of a sandman sandbox (per_run by runId, per_worker
 * by workerKey; without either, a run of its own). The model reads the
 * output, the value, the traceback and how the run ended as text, and png or
 * jpeg figures as images.
 */
export function codeInterpreterTool(client: SandmanClient, opts: CodeInterpreterOptions = {}): FunctionTool {
  const key: SandboxKey = opts.workerKey
    ? { worker_key: opts.workerKey, mode: "per_worker", project: opts.project, agent: opts.agent }
    : { run_id: opts.runId ?? `openai-code-${randomUUID()}`, mode: "per_run", project: opts.project, agent: opts.agent };
  const maxImages = opts.maxImages ?? 4;
  return tool({
    name: opts.name ?? "code_interpreter",
    description:
      "Runs Python code in a live interpreter (a Jupyter kernel) in a sandbox, as a notebook cell: " +
      "variables, imports and loaded data stay for the next call. Returns the printed output, the last " +
      "expression's value, an exception's traceback, and matplotlib figures as images.",
    parameters: {
      type: "object",
      properties: { code: { type: "string", description: "The Python code of the cell" } },
      required: ["code"],
      additionalProperties: false,
    },
    strict: true,
    execute: async (input: unknown): Promise<ToolCallOutputContent[]> => {
      const code = String((input as { code?: unknown }).code ?? "");
      const x = await client.runCode(key, code, { context: opts.context, timeout_s: opts.timeoutS });
      const parts: string[] = [];
      if (x.stateLost) parts.push(`[a fresh kernel was started: the earlier state was lost (${x.stateLost})]`);
      parts.push(...x.logs.stdout, ...x.logs.stderr);
      for (const r of x.results) if (r.text !== undefined) parts.push(`${r.isMainResult ? "Out: " : ""}${r.text}\n`);
      if (x.error) parts.push(x.error.traceback || `${x.error.name}: ${x.error.value}`);
      parts.push(`[${x.status}${x.message ? `: ${x.message}` : ""}${x.truncated ? "; output truncated" : ""}]`);
      const out: ToolCallOutputContent[] = [{ type: "text", text: parts.join("") }];
      const images = x.results.flatMap((r) =>
        r.png
          ? [{ data: r.png.replace(/\s+/g, ""), mediaType: "image/png" }]
          : r.jpeg
            ? [{ data: r.jpeg.replace(/\s+/g, ""), mediaType: "image/jpeg" }]
            : [],
      );
      for (const img of images.slice(0, maxImages)) out.push({ type: "image", image: img });
      return out;
    },
  }) as unknown as FunctionTool;
}
