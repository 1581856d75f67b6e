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
// Failures are the SDK's own typed errors (SandboxWorkspaceReadNotFoundError,
// SandboxPathResolutionError, SandboxExecTransportError, the apply_patch
// errors...), each with the runner's status and failure_kind in `details`;
// execCommand, which the shell tool calls, gives a command that could not
// run to the model as text. A command that ran and timed out is a result
// (exit code 124, with a line saying so), as one that failed.
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
  type ToolOutputImage,
} from "@openai/agents";
import {
  Manifest,
  normalizeSandboxClientCreateArgs,
  SandboxApplyPatchDiffError,
  SandboxApplyPatchFileNotFoundError,
  SandboxApplyPatchPathError,
  SandboxConfigurationError,
  SandboxError,
  SandboxExecTransportError,
  SandboxLifecycleError,
  SandboxPathResolutionError,
  SandboxProviderError,
  SandboxRuntimeError,
  SandboxSnapshotNotRestorableError,
  SandboxUnsupportedFeatureError,
  SandboxWorkspaceReadNotFoundError,
  type ExecCommandArgs,
  type ListDirectoryArgs,
  type MaterializeEntryArgs,
  type ReadFileArgs,
  type SandboxClient,
  type SandboxClientCreateArgs,
  type SandboxDirectoryEntry,
  type SandboxExecResult,
  type SandboxSession,
  type ViewImageArgs,
} from "@openai/agents/sandbox";

import { SandmanClient } from "../index.js";
import { SandmanError } from "../transport.js";
import type { SandboxKey } from "../types.js";
import { describeFailure, refusal, WORKSPACE, workspacePath, type SandboxChoice } from "./common.js";
import {
  findSandbox,
  forkFrom,
  keyOf,
  providerStateOf,
  SANDMAN_SNAPSHOT,
  snapshotSpecOf,
  stateFromProvider,
  takeSnapshot,
  type SandmanSandboxSessionState,
} from "./openai-agents-state.js";

export { sandmanSnapshot, SANDMAN_SNAPSHOT } from "./openai-agents-state.js";
export type { SandmanSandboxSessionState, SandmanSnapshotSpec } from "./openai-agents-state.js";

/** Without runId or workerKey, each session gets a run of its own. */
export interface SandmanSandboxClientOptions extends SandboxChoice {
  [key: string]: unknown;
}

/** Removes the session's own sandbox, once; one already gone is fine. */
async function deleteOwnSandbox(client: SandmanClient, state: SandmanSandboxSessionState): Promise<void> {
  const id = state.sandboxId;
  if (!id) return;
  try {
    await client.deleteSandbox(id, { workerKey: state.workerKey });
  } catch (e) {
    if (!(e instanceof SandmanError && e.status === 404))
      throw new SandboxLifecycleError(`sandman could not remove the session's sandbox ${id}: ${describeFailure(e, id)}`, detailsOf(e));
  }
  state.sandboxId = undefined;
}

const BYTES_PER_TOKEN = 4;

function quote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The files API's path for an SDK path (relative to /workspace, or absolute under it). */
function apiPath(path: string): string {
  const p = workspacePath(path);
  if (p === null || p.split("/").includes(".."))
    throw new SandboxPathResolutionError(`${path} is outside ${WORKSPACE}: sandman's sandboxes keep their files under ${WORKSPACE}`, { path });
  return p;
}

function detailsOf(e: unknown, path?: string): Record<string, unknown> {
  if (!(e instanceof SandmanError)) return { path, cause: e instanceof Error ? e.message : String(e) };
  return { path, status: e.status, failure_kind: e.failureKind, request_id: e.requestId };
}

/**
 * A failed files request as the SDK's typed error: a missing path, a path
 * sandman refuses (a link, outside the workspace), the configuration or
 * token refusing, the runner or sandbox unavailable, or the operation's own
 * failure in the sandbox.
 */
export function sdkFileError(e: unknown, path: string): SandboxError {
  if (e instanceof SandboxError) return e;
  const d = detailsOf(e, path);
  if (!(e instanceof SandmanError)) return new SandboxProviderError(`sandman's runner could not be reached for ${path}: ${d.cause}`, d);
  const words = describeFailure(e, path);
  if (e.status === 404) return new SandboxWorkspaceReadNotFoundError(`${path} not found`, d);
  if (e.status === 401 || refusal(e) === "configuration") return new SandboxConfigurationError(words, d);
  if (refusal(e) === "path") return new SandboxPathResolutionError(words, d);
  if (e.status === 503 || e.status >= 500) return new SandboxProviderError(words, d);
  return new SandboxRuntimeError(words, d);
}

/** A command that could not run (refused, the runner or sandbox unavailable) as the SDK's typed error. */
function sdkExecError(e: unknown, cmd: string): SandboxError {
  const d = { ...detailsOf(e), cmd };
  const words = describeFailure(e, cmd.slice(0, 80));
  if (e instanceof SandmanError && (e.status === 401 || e.status === 403)) return new SandboxConfigurationError(`sandman refused the command: ${words}`, d);
  return new SandboxExecTransportError(`sandman could not run the command: ${words}`, d);
}

const IMAGE_MAX = 10 * 1024 * 1024;

/** The image type of bytes by their first bytes (PNG, JPEG, GIF, WebP), or null. */
function imageType(b: Uint8Array): string | null {
  const starts = (sig: number[], at = 0) => sig.every((x, i) => b[at + i] === x);
  if (starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return "image/png";
  if (starts([0xff, 0xd8, 0xff])) return "image/jpeg";
  if (starts([0x47, 0x49, 0x46, 0x38])) return "image/gif";
  if (starts([0x52, 0x49, 0x46, 0x46]) && starts([0x57, 0x45, 0x42, 0x50], 8)) return "image/webp";
  return null;
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

  /**
   * Runs a command to its end (no PTY sessions). One that ran is a result,
   * whatever its exit; one that could not run throws the SDK's
   * SandboxConfigurationError (refused) or SandboxExecTransportError.
   */
  async exec(args: ExecCommandArgs): Promise<SandboxExecResult> {
    if (args.tty) throw new SandboxUnsupportedFeatureError("sandman's sandbox client runs commands without a TTY", { cmd: args.cmd });
    let cmd = args.cmd;
    if (args.workdir) cmd = `cd ${quote(args.workdir.startsWith("/") ? args.workdir : `${WORKSPACE}/${args.workdir}`)} && ${cmd}`;
    const request = args.shell
      ? { argv: [args.shell, args.login ? "-lc" : "-c", cmd] }
      : { command: cmd };
    const start = Date.now();
    let r;
    try {
      r = await this.client.execute({ ...this.key, ...request, tool: this.tool, timeout_s: this.timeoutS, env: this.state.environment });
    } catch (e) {
      throw sdkExecError(e, args.cmd);
    }
    const ran = r.failure_kind === null || r.failure_kind === "tool" || r.failure_kind === "timeout";
    if (!ran)
      throw new SandboxExecTransportError(`sandman could not run the command: ${r.error ?? "the sandbox failed"}`, {
        cmd: args.cmd,
        failure_kind: r.failure_kind,
      });
    let combined = r.stdout + r.stderr;
    if (r.timed_out || r.oom_killed) combined += `${combined && !combined.endsWith("\n") ? "\n" : ""}[sandman: ${r.error ?? "the command was killed"}]\n`;
    const t = truncate(combined, args.maxOutputTokens);
    return {
      output: t.text,
      stdout: r.stdout,
      stderr: r.stderr,
      wallTimeSeconds: (Date.now() - start) / 1000,
      exitCode: r.exit_code,
      originalTokenCount: t.originalTokens,
    };
  }

  /** What the shell tool shows the model: a command that could not run is said in words, not thrown. */
  async execCommand(args: ExecCommandArgs): Promise<string> {
    let r: SandboxExecResult;
    try {
      r = await this.exec(args);
    } catch (e) {
      if (!(e instanceof SandboxError)) throw e;
      return `Error (${e.code}): ${e.message}`;
    }
    const lines = [`Wall time: ${r.wallTimeSeconds.toFixed(4)} seconds`];
    if (typeof r.exitCode === "number") lines.push(`Process exited with code ${r.exitCode}`);
    if (typeof r.originalTokenCount === "number") lines.push(`Original token count: ${r.originalTokenCount}`);
    lines.push("Output:", r.output);
    return lines.join("\n");
  }

  /** The file, or its first maxBytes bytes (as the SDK's own sessions do). */
  async readFile(args: ReadFileArgs): Promise<Uint8Array> {
    const p = apiPath(args.path);
    try {
      const data = await this.client.files.read(this.key, p, { length: args.maxBytes });
      return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    } catch (e) {
      throw sdkFileError(e, args.path);
    }
  }

  /** Entries named relative to the workspace, as the SDK's own sessions name them. */
  async listDir(args: ListDirectoryArgs): Promise<SandboxDirectoryEntry[]> {
    const p = apiPath(args.path);
    try {
      const l = await this.client.files.list(this.key, p, { depth: 1 });
      return l.entries.map((e) => ({
        name: e.path.slice(e.path.lastIndexOf("/") + 1),
        path: e.path,
        type: e.type === "file" ? "file" : e.type === "dir" ? "dir" : "other",
      }));
    } catch (e) {
      throw sdkFileError(e, args.path);
    }
  }

  /** An image of the workspace for the filesystem capability's view_image (PNG, JPEG, GIF, WebP; 10 MB at most). */
  async viewImage(args: ViewImageArgs): Promise<ToolOutputImage> {
    const p = apiPath(args.path);
    let data: Buffer;
    try {
      data = await this.client.files.read(this.key, p, { length: IMAGE_MAX + 1 });
    } catch (e) {
      const err = sdkFileError(e, args.path);
      if (err instanceof SandboxWorkspaceReadNotFoundError) throw new SandboxWorkspaceReadNotFoundError(`Image file not found: ${args.path}`, err.details);
      if (/folder|directory/i.test(err.message)) throw new SandboxRuntimeError(`Image path is not a file: ${args.path}`, err.details);
      throw err;
    }
    if (data.byteLength > IMAGE_MAX) throw new SandboxRuntimeError(`Image file exceeds the 10 MB limit: ${args.path}`, { path: args.path });
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const mediaType = imageType(bytes);
    if (!mediaType) throw new SandboxRuntimeError(`Unsupported image format for view_image: ${args.path}`, { path: args.path });
    return { type: "image", image: { data: Uint8Array.from(bytes), mediaType } };
  }

  private async stat(path: string): Promise<{ type: string } | null> {
    const p = workspacePath(path);
    if (p === null) return null;
    try {
      return await this.client.files.stat(this.key, p);
    } catch (e) {
      if (e instanceof SandmanError && (e.status === 404 || e.status === 403 || e.status === 400)) return null;
      throw sdkFileError(e, path);
    }
  }

  async pathExists(path: string): Promise<boolean> {
    return (await this.stat(path)) !== null;
  }

  async directoryExists(path: string): Promise<boolean> {
    return (await this.stat(path))?.type === "dir";
  }

  /**
   * apply_patch: V4A diffs applied here, files written through the files
   * API; failures are the SDK's apply_patch errors (a path outside the
   * workspace, a file not found, a diff that does not apply) or its
   * workspace errors.
   */
  createEditor(): Editor {
    const key = () => this.key;
    const client = this.client;
    const done = (output: string): ApplyPatchResult => ({ status: "completed", output });
    const path = (p: string) => {
      try {
        return apiPath(p);
      } catch (e) {
        throw new SandboxApplyPatchPathError(e instanceof Error ? e.message : String(e), { path: p });
      }
    };
    const diff = (old: string, d: string, p: string, mode?: "create") => {
      try {
        return mode ? applyDiff(old, d, mode) : applyDiff(old, d);
      } catch (e) {
        throw new SandboxApplyPatchDiffError(`the diff for ${p} does not apply: ${e instanceof Error ? e.message : String(e)}`, { path: p });
      }
    };
    const files = async <T>(p: string, f: () => Promise<T>): Promise<T> => {
      try {
        return await f();
      } catch (e) {
        const err = sdkFileError(e, p);
        if (err instanceof SandboxWorkspaceReadNotFoundError) throw new SandboxApplyPatchFileNotFoundError(`${p} not found`, err.details);
        throw err;
      }
    };
    return {
      async createFile(op: Extract<ApplyPatchOperation, { type: "create_file" }>): Promise<ApplyPatchResult> {
        const p = path(op.path);
        const content = diff("", op.diff, op.path, "create");
        await files(op.path, () => client.files.write(key(), p, content, { parents: true }));
        return done(`created ${op.path}`);
      },
      async updateFile(op: Extract<ApplyPatchOperation, { type: "update_file" }>): Promise<ApplyPatchResult> {
        const p = path(op.path);
        const old = (await files(op.path, () => client.files.read(key(), p))).toString("utf8");
        await files(op.path, () => client.files.write(key(), p, diff(old, op.diff, op.path)));
        return done(`updated ${op.path}`);
      },
      async deleteFile(op: Extract<ApplyPatchOperation, { type: "delete_file" }>): Promise<ApplyPatchResult> {
        const p = path(op.path);
        await files(op.path, () => client.files.delete(key(), p));
        return done(`deleted ${op.path}`);
      },
    };
  }

  /** Files and folders of a manifest (other entry kinds are not supported here). */
  async materializeEntry(args: MaterializeEntryArgs): Promise<void> {
    const entry = args.entry;
    const path = apiPath(args.path.startsWith("/") ? args.path : `${WORKSPACE}/${args.path}`);
    if (entry.type === "file") {
      await this.client.files.write(this.key, path, entry.content, { parents: true }).catch((e) => {
        throw sdkFileError(e, args.path);
      });
    } else if (entry.type === "dir") {
      await this.client.files.mkdir(this.key, path, { parents: true }).catch((e) => {
        throw sdkFileError(e, args.path);
      });
      for (const [name, child] of Object.entries(entry.children ?? {}))
        await this.materializeEntry({ path: `${path}/${name}`, entry: child, runAs: args.runAs });
    } else {
      throw new SandboxUnsupportedFeatureError(`manifest entry ${args.path}: sandman's sandbox client takes file and dir entries, not ${entry.type}`, {
        path: args.path,
        type: entry.type,
      });
    }
  }

  async applyManifest(manifest: Manifest): Promise<void> {
    for (const [path, entry] of Object.entries(manifest.entries)) await this.materializeEntry({ path, entry });
  }

  /** The whole workspace as a tar. */
  async persistWorkspace(): Promise<Uint8Array> {
    const chunks: Buffer[] = [];
    try {
      for await (const c of await this.client.files.downloadTar(this.key, ["."])) chunks.push(Buffer.from(c));
    } catch (e) {
      throw sdkFileError(e, WORKSPACE);
    }
    const all = Buffer.concat(chunks);
    return new Uint8Array(all.buffer, all.byteOffset, all.byteLength);
  }

  async hydrateWorkspace(data: string | ArrayBuffer | Uint8Array): Promise<void> {
    const bytes = typeof data === "string" ? Buffer.from(data, "base64") : data instanceof Uint8Array ? data : new Uint8Array(data);
    await this.client.files.uploadTar(this.key, ".", bytes).catch((e) => {
      throw sdkFileError(e, WORKSPACE);
    });
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

  /**
   * A new session: a run of its own (made now, removed when the session
   * ends), a named run's or worker's sandbox, or with a sandman snapshot
   * spec naming `from`, a fork of that snapshot (the session's own).
   */
  async create(
    args?: SandboxClientCreateArgs<SandmanSandboxClientOptions> | Manifest,
    manifestOptions?: SandmanSandboxClientOptions,
  ): Promise<SandmanSandboxSession> {
    const n = normalizeSandboxClientCreateArgs(args, manifestOptions);
    const o: SandmanSandboxClientOptions = { ...this.defaults, ...(n.options ?? {}) };
    if (n.manifest.root !== WORKSPACE)
      throw new SandboxConfigurationError(`sandman's sandboxes have their workspace at ${WORKSPACE}, not ${n.manifest.root}`, {
        root: n.manifest.root,
      });
    const spec = snapshotSpecOf(n.snapshot);
    if (spec?.from && o.runId)
      throw new SandboxConfigurationError(`a session started from snapshot '${spec.from}' is a fork with a run of its own: runId cannot be given too`, {
        runId: o.runId,
        snapshot: spec.from,
      });
    const state: SandmanSandboxSessionState = {
      manifest: n.manifest,
      runId: o.workerKey ? undefined : (o.runId ?? `openai-${randomUUID()}`),
      workerKey: o.workerKey,
      project: o.project,
      agent: o.agent,
      workspaceReady: true,
      snapshotSpec: spec,
      snapshot: null,
    };
    if (spec?.from) {
      const f = await forkFrom(this.client, spec.from, o.workerKey);
      Object.assign(state, { runId: f.runId, sandboxId: f.sandboxId, mode: "per_run" });
    } else if (!o.workerKey && !o.runId) {
      const made = await this.client
        .createSandbox({ run_id: state.runId, project: o.project, agent: o.agent })
        .catch((e) => {
          throw sdkFileError(e, `the session's sandbox (run ${state.runId})`);
        });
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

  /**
   * Removes the sandbox a session made for itself (the SDK calls it for
   * sessions it owns). A state may come from storage: its sandbox is
   * removed only when it is the one the state's key reaches and one this
   * adapter made; another is left alone, as one already gone.
   */
  async delete(state: SandmanSandboxSessionState): Promise<void> {
    if (state.sandboxId && !(await findSandbox(this.client, state))) state.sandboxId = undefined;
    await deleteOwnSandbox(this.client, state);
  }

  /**
   * What the SDK keeps of a session (names of its sandbox and snapshot, no
   * token, no environment). With a sandman snapshot spec, the sandbox is
   * snapshotted first (the spec's name, or the runner's default) and the
   * state names that snapshot: a later resume whose sandbox is gone starts
   * from it. A named run's or worker's sandbox is recorded by its id, so a
   * resume finds that sandbox or none.
   */
  async serializeSessionState(state: SandmanSandboxSessionState): Promise<Record<string, unknown>> {
    let id = state.sandboxId;
    if (!id) {
      const named = { ...state, boundSandboxId: undefined };
      id = (await findSandbox(this.client, named)) ?? undefined;
      if (!id) {
        // No call has made it yet: one files call does, so the state names a sandbox.
        await this.client.files.stat(keyOf(state), ".").catch((e) => {
          throw sdkFileError(e, `the session's sandbox`);
        });
        id = (await findSandbox(this.client, named)) ?? undefined;
      }
      if (!id) throw new SandboxProviderError("sandman did not list the session's sandbox: its state cannot name it", keyOf(state) as Record<string, unknown>);
      state.boundSandboxId = id;
    }
    if (state.snapshotSpec) await takeSnapshot(this.client, state, id);
    return providerStateOf(state);
  }

  async deserializeSessionState(state: Record<string, unknown>): Promise<SandmanSandboxSessionState> {
    return stateFromProvider(state);
  }

  /** A session whose own sandbox goes when it closes is worth keeping only when a snapshot of it is taken. */
  canPersistOwnedSessionState(state: SandmanSandboxSessionState): boolean {
    return !state.sandboxId || !!state.snapshotSpec;
  }

  /**
   * The session again, in this process or another: on the very sandbox the
   * state names (a frozen or stopped one resumes by itself on the next
   * call), or when that one is gone, on a fork of the state's snapshot.
   * Otherwise SandboxSnapshotNotRestorableError: a sandbox that is gone, a
   * snapshot that is gone, and another worker's state (this client's
   * workerKey is not the state's), answered as missing ones.
   */
  async resume(state: SandmanSandboxSessionState): Promise<SandmanSandboxSession> {
    const s: SandmanSandboxSessionState = { ...state };
    const foreign = this.defaults.workerKey !== undefined && this.defaults.workerKey !== state.workerKey;
    if (foreign) s.workerKey = this.defaults.workerKey;
    if (s.environment === undefined && typeof s.manifest?.resolveEnvironment === "function") s.environment = await s.manifest.resolveEnvironment();
    const byId = s.sandboxId ?? s.boundSandboxId;
    if ((!foreign || byId) && (await findSandbox(this.client, s))) return new SandmanSandboxSession(this.client, s, this.defaults);
    if (s.snapshot?.type === SANDMAN_SNAPSHOT) {
      const f = await forkFrom(this.client, s.snapshot.id, s.workerKey);
      Object.assign(s, { runId: f.runId, sandboxId: f.sandboxId, boundSandboxId: undefined, mode: "per_run" });
      return new SandmanSandboxSession(this.client, s, this.defaults);
    }
    throw new SandboxSnapshotNotRestorableError(
      `the session's sandbox${byId ? ` ${byId.slice(0, 12)}` : ""} was not found and its state names no snapshot to start again from`,
      { sandbox: byId },
    );
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
