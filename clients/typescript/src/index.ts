// A typed client for sandman's runner (`sandman worker start`), with Node's
// standard library only at run time. See docs/clients.md.
//
//   import { SandmanClient } from "sandman-client";
//   const runner = new SandmanClient({ address: "unix:/run/user/1000/sandman/sandman.sock", token });
//   const r = await runner.execute({ tool: "shell", command: "make test", run_id: "run-1" });
//   for await (const ev of runner.executeStream({ command: "make", run_id: "run-1" })) ...
//   await runner.files.write({ run_id: "run-1" }, "src/a.c", "int main;");
import { createHmac } from "node:crypto";
import type { Readable } from "node:stream";

import { Contexts, Execution, runCode, runCodeStream } from "./code.js";
import type { CodeEvent, RunCodeOptions } from "./code.js";
import { Terminals } from "./terminals.js";
import { FileWatch } from "./watch.js";
import { PortWebSocket, WS_MAX_MESSAGE, wsOpen } from "./websocket.js";
import { Body, defaultAddress, query, readAll, Transport } from "./transport.js";
import type {
  ExecuteRequest,
  ForkItem,
  RestReport,
  RestTier,
  Snapshot,
  SnapshotDiff,
  FileEntry,
  FileList,
  GrepResult,
  Health,
  Lease,
  LeaseRequest,
  Preview,
  ReapReport,
  RunResult,
  Sandbox,
  SandboxInfo,
  CreateSandboxRequest,
  SandboxKey,
  StreamEvent,
  TarStats,
  WriteResult,
} from "./types.js";

export * from "./types.js";
export * from "./code.js";
export { Terminals, TerminalConnection } from "./terminals.js";
export { FileWatch } from "./watch.js";
export { PortWebSocket, WebSocketTimeoutError, WS_MAX_MESSAGE } from "./websocket.js";
export type { FileEvent } from "./watch.js";
export type { Terminal, TerminalEvent, TerminalRequest, TerminalScreen } from "./terminals.js";
export { SandmanError, defaultAddress, parseAddress } from "./transport.js";

export const WORKER_TOKEN_PREFIX = "sandman-worker-token-v1";

/** hex(HMAC-SHA256(control token, "sandman-worker-token-v1" NUL worker_key)), as `sandman token derive`. */
export function deriveWorkerToken(controlToken: string, workerKey: string): string {
  return createHmac("sha256", controlToken).update(`${WORKER_TOKEN_PREFIX}\0${workerKey}`).digest("hex");
}

export interface ClientOptions {
  /** "unix:PATH", "tcp://HOST:PORT" or "http://HOST:PORT" (default: $SANDMAN_URL, else the runner's default socket). */
  address?: string;
  /** The control token or a worker's derived token (default: $SANDMAN_TOKEN). */
  token?: string;
  /** How long to wait for an answer's headers (default 10 minutes; 0: forever). */
  timeoutMs?: number;
}

export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

function executeBody(req: ExecuteRequest): Record<string, unknown> {
  const { stdin, ...rest } = req;
  const body: Record<string, unknown> = { ...rest };
  if (stdin !== undefined) body.stdin_b64 = Buffer.from(stdin).toString("base64");
  return body;
}

/** Options of the routes of one sandbox: a worker token names its key. */
export interface SandboxOptions extends CallOptions {
  workerKey?: string;
}

function sandboxPath(id: string, suffix: string, workerKey?: string): string {
  const q = workerKey ? `?worker_key=${encodeURIComponent(workerKey)}` : "";
  return `/v1/sandboxes/${encodeURIComponent(id)}${suffix}${q}`;
}

function snapshotPath(name: string, workerKey?: string): string {
  return `/v1/snapshots/${encodeURIComponent(name)}${query({ worker_key: workerKey })}`;
}

export class SandmanClient {
  readonly address: string;
  readonly token: string | undefined;
  readonly files: Files;
  /** The code contexts of keyed sandboxes (/v1/contexts). */
  readonly contexts: Contexts;
  /** Terminals in keyed sandboxes (/v1/terminals). */
  readonly terminals: Terminals;
  private readonly t: Transport;

  constructor(opts: ClientOptions = {}) {
    this.address = opts.address ?? process.env.SANDMAN_URL ?? defaultAddress();
    this.token = opts.token ?? process.env.SANDMAN_TOKEN;
    this.t = new Transport(this.address, this.token, opts.timeoutMs ?? 600_000);
    this.files = new Files(this.t);
    this.contexts = new Contexts(this.t);
    this.terminals = new Terminals(this.t);
  }

  /**
   * Runs code in a code context of the keyed sandbox `key` (a live Jupyter
   * kernel: state stays between runs) and gathers the events into an
   * Execution (results, logs, error: E2B's shape). docs/code.md.
   */
  runCode(key: SandboxKey, code: string, opts: RunCodeOptions = {}): Promise<Execution> {
    return runCode(this.t, key, code, opts);
  }

  /** The run's NDJSON events as they come (breaking out early interrupts the cell). */
  runCodeStream(key: SandboxKey, code: string, opts: RunCodeOptions = {}): AsyncGenerator<CodeEvent, void, undefined> {
    return runCodeStream(this.t, key, code, opts);
  }

  /** A client holding a worker's derived token (it serves that worker key only). */
  static forWorker(controlToken: string, workerKey: string, opts: Omit<ClientOptions, "token"> = {}): SandmanClient {
    return new SandmanClient({ ...opts, token: deriveWorkerToken(controlToken, workerKey) });
  }

  health(opts: CallOptions = {}): Promise<Health> {
    return this.t.json<Health>({ method: "GET", path: "/healthz", ...opts });
  }

  /** The Python client's earlier name of health(). */
  healthz(opts: CallOptions = {}): Promise<Health> {
    return this.health(opts);
  }

  /** Runs one tool call and waits for its result. A tool that ran and failed is `ok: false`, not an error. */
  execute(req: ExecuteRequest, opts: CallOptions = {}): Promise<RunResult> {
    return this.t.json<RunResult>({
      method: "POST",
      path: "/v1/execute",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(executeBody(req)),
      ...opts,
    });
  }

  /**
   * Runs one tool call and yields its output as it arrives, then the result
   * (NDJSON events). Breaking out of the loop, or aborting `signal`, closes
   * the connection, and the runner cancels the call.
   */
  async *executeStream(req: ExecuteRequest, opts: CallOptions = {}): AsyncGenerator<StreamEvent, void, undefined> {
    const res = await this.t.open({
      method: "POST",
      path: "/v1/execute",
      headers: { "Content-Type": "application/json", Accept: "application/x-ndjson" },
      body: JSON.stringify({ ...executeBody(req), stream: true }),
      timeoutMs: 0,
      signal: opts.signal,
    });
    await this.t.check(res);
    let rest = "";
    try {
      for await (const chunk of res.body) {
        rest += chunk.toString("utf8");
        let nl: number;
        while ((nl = rest.indexOf("\n")) >= 0) {
          const line = rest.slice(0, nl).trim();
          rest = rest.slice(nl + 1);
          if (line) yield JSON.parse(line) as StreamEvent;
        }
      }
      if (rest.trim()) yield JSON.parse(rest) as StreamEvent;
    } finally {
      res.body.destroy();
    }
  }

  createLease(req: LeaseRequest, opts: CallOptions = {}): Promise<Lease> {
    return this.t.json<Lease>({
      method: "POST",
      path: "/v1/leases",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(req),
      ...opts,
    });
  }

  /** State and output so far of a call sent to the background. */
  handle(id: string, opts: CallOptions = {}): Promise<RunResult> {
    return this.t.json<RunResult>({ method: "GET", path: `/v1/handles/${encodeURIComponent(id)}`, ...opts });
  }

  killHandle(id: string, opts: CallOptions = {}): Promise<RunResult> {
    return this.t.json<RunResult>({ method: "DELETE", path: `/v1/handles/${encodeURIComponent(id)}`, ...opts });
  }

  /** The Python client's earlier name of killHandle(). */
  kill(id: string, opts: CallOptions = {}): Promise<RunResult> {
    return this.killHandle(id, opts);
  }

  /** The runner's sandboxes (control token only). */
  sandboxes(opts: CallOptions = {}): Promise<Sandbox[]> {
    return this.t.json<Sandbox[]>({ method: "GET", path: "/v1/sandboxes", ...opts });
  }

  /** Makes a sandbox ahead of its calls; its description, with its `id` for `execute({sandbox_id})`. */
  createSandbox(req: CreateSandboxRequest = {}, opts: CallOptions = {}): Promise<SandboxInfo> {
    return this.t.json<SandboxInfo>({
      method: "POST",
      path: "/v1/sandboxes",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(req),
      ...opts,
    });
  }

  /** A sandbox's description (404 when it is missing, or another worker's). */
  getSandbox(id: string, opts: SandboxOptions = {}): Promise<SandboxInfo> {
    return this.t.json<SandboxInfo>({ method: "GET", path: sandboxPath(id, "", opts.workerKey), ...opts });
  }

  /** The sandboxes this token may see, with every label of `labels` (a value of null matches any). */
  listSandboxes(q: { labels?: Record<string, string | null>; all?: boolean; workerKey?: string } = {}, opts: CallOptions = {}): Promise<SandboxInfo[]> {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(q.labels ?? {})) query.append("label", v === null ? k : `${k}=${v}`);
    if (q.all) query.append("all", "1");
    if (q.workerKey) query.append("worker_key", q.workerKey);
    const qs = query.toString();
    return this.t.json<SandboxInfo[]>({ method: "GET", path: "/v1/sandboxes" + (qs ? "?" + qs : ""), ...opts });
  }

  /** Records a use now: the sandbox's idle timeout counts from here. */
  keepAlive(id: string, opts: SandboxOptions = {}): Promise<SandboxInfo> {
    return this.t.json<SandboxInfo>({ method: "POST", path: sandboxPath(id, "/keepalive", opts.workerKey), ...opts });
  }

  /** Removes the sandbox (calls in flight in it are killed). */
  deleteSandbox(id: string, opts: SandboxOptions = {}): Promise<{ id: string; name: string; removed: boolean }> {
    return this.t.json({ method: "DELETE", path: sandboxPath(id, "", opts.workerKey), ...opts });
  }

  /** Puts a keyed sandbox to rest (tier "freeze", the default, "stop" or "hibernate"); waits for calls in flight unless `noWait` (then 409). */
  pauseSandbox(id: string, opts: SandboxOptions & { tier?: RestTier; noWait?: boolean } = {}): Promise<RestReport> {
    const q = query({ tier: opts.tier, no_wait: opts.noWait || undefined, worker_key: opts.workerKey });
    return this.t.json<RestReport>({ method: "POST", path: `/v1/sandboxes/${encodeURIComponent(id)}/pause${q}`, signal: opts.signal, timeoutMs: opts.timeoutMs });
  }

  /** Back to running (a call into a resting sandbox does that too). */
  resumeSandbox(id: string, opts: SandboxOptions = {}): Promise<RestReport> {
    return this.t.json<RestReport>({ method: "POST", path: sandboxPath(id, "/resume", opts.workerKey), signal: opts.signal, timeoutMs: opts.timeoutMs });
  }

  /** Captures a keyed sandbox's writable layer and /workspace under `name` (default snap-<UTC time>-<4 hex>). */
  snapshotSandbox(id: string, opts: SandboxOptions & { name?: string; noWait?: boolean; memory?: boolean } = {}): Promise<Snapshot> {
    const q = query({ name: opts.name, no_wait: opts.noWait || undefined, memory: opts.memory || undefined, worker_key: opts.workerKey });
    return this.t.json<Snapshot>({ method: "POST", path: `/v1/sandboxes/${encodeURIComponent(id)}/snapshot${q}`, signal: opts.signal, timeoutMs: opts.timeoutMs });
  }

  /** Makes `count` (1 to 64) new per_run sandboxes from a snapshot; run ids `<prefix>-<8 hex>`. */
  forkSnapshot(snapshot: string, opts: SandboxOptions & { count?: number; prefix?: string } = {}): Promise<{ forks: ForkItem[] }> {
    const q = query({ snapshot, count: opts.count, prefix: opts.prefix, worker_key: opts.workerKey });
    return this.t.json({ method: "POST", path: `/v1/sandboxes/fork${q}`, signal: opts.signal, timeoutMs: opts.timeoutMs });
  }

  /** Returns the sandbox to snapshot `to` (the answer's `id` is its new container). */
  rollbackSandbox(id: string, to: string, opts: SandboxOptions = {}): Promise<RestReport> {
    const q = query({ snapshot: to, worker_key: opts.workerKey });
    return this.t.json<RestReport>({ method: "POST", path: `/v1/sandboxes/${encodeURIComponent(id)}/rollback${q}`, signal: opts.signal, timeoutMs: opts.timeoutMs });
  }

  /** What changed in the sandbox since `fromSnapshot`: added, modified, deleted. */
  diffSandbox(id: string, fromSnapshot: string, opts: SandboxOptions = {}): Promise<SnapshotDiff> {
    const q = query({ snapshot: fromSnapshot, worker_key: opts.workerKey });
    return this.t.json<SnapshotDiff>({ method: "GET", path: `/v1/sandboxes/${encodeURIComponent(id)}/diff${q}`, signal: opts.signal, timeoutMs: opts.timeoutMs });
  }

  /** The snapshots this token may see, newest first. */
  listSnapshots(opts: SandboxOptions = {}): Promise<Snapshot[]> {
    return this.t.json<Snapshot[]>({ method: "GET", path: `/v1/snapshots${query({ worker_key: opts.workerKey })}`, signal: opts.signal, timeoutMs: opts.timeoutMs });
  }

  getSnapshot(name: string, opts: SandboxOptions = {}): Promise<Snapshot> {
    return this.t.json<Snapshot>({ method: "GET", path: snapshotPath(name, opts.workerKey), signal: opts.signal, timeoutMs: opts.timeoutMs });
  }

  deleteSnapshot(name: string, opts: SandboxOptions = {}): Promise<{ name: string; removed: boolean }> {
    return this.t.json({ method: "DELETE", path: snapshotPath(name, opts.workerKey), signal: opts.signal, timeoutMs: opts.timeoutMs });
  }

  /**
   * POST /v1/sandboxes/reap: the configuration's idle lifecycle (its moves
   * in `moved`), then the reap, as `sandman sandbox reap`. Without
   * older_than_s, as `sandbox reap` without --older-than (a sandbox's own
   * idle timeout). Control token only.
   */
  reap(body: { older_than_s?: number; dry_run?: boolean; force?: boolean } = {}, opts: CallOptions = {}): Promise<ReapReport> {
    return this.t.json<ReapReport>({
      method: "POST",
      path: "/v1/sandboxes/reap",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      ...opts,
    });
  }

  /**
   * One HTTP request to a server on `port` of the sandbox's own loopback,
   * through /v1/sandboxes/{id}/ports/{port}/{path} (path may carry a query).
   * A worker token names its key in `workerKey`. Resolves to the server's own
   * answer (any status), or the runner's refusal (JSON with failure_kind:
   * 404 no such sandbox, 502 nothing listens, 504 no answer in 60 s).
   */
  async portRequest(id: string, port: number, opts: PortRequestOptions = {}): Promise<PortAnswer> {
    const headers = { ...(opts.headers ?? {}) };
    if (opts.workerKey !== undefined) headers["X-Sandman-Worker-Key"] = opts.workerKey;
    const route = sandboxPath(id, `/ports/${portNumber(port)}`) + relayedPath(opts.path);
    return this.portAnswer(route, opts, headers, false);
  }

  /**
   * A preview URL of the sandbox's port: anyone holding its path reaches that
   * port (and nothing else) until it expires (ttlS, 1 to 86400, default 3600)
   * or the sandbox is paused, snapshotted, rolled back or removed.
   */
  async createPreview(id: string, port: number, opts: SandboxOptions & { ttlS?: number } = {}): Promise<Preview> {
    const q = query({ port: portNumber(port), ttl_s: opts.ttlS, worker_key: opts.workerKey });
    return this.t.json<Preview>({ method: "POST", path: sandboxPath(id, "/previews") + q, signal: opts.signal, timeoutMs: opts.timeoutMs });
  }

  /** A request through a preview URL (createPreview's answer or its path), sending no token. */
  async previewRequest(preview: Preview | string, opts: Omit<PortRequestOptions, "workerKey"> = {}): Promise<PortAnswer> {
    return this.portAnswer(previewBase(preview) + relayedPath(opts.path), opts, { ...(opts.headers ?? {}) }, true);
  }

  /**
   * portRequest with the answer's body not read: a PortStream whose `body`
   * (a Node Readable) gives it as it comes, so a download of any size stays
   * in bounded memory. Destroy the body to end the connection early.
   */
  async portStream(id: string, port: number, opts: PortRequestOptions = {}): Promise<PortStream> {
    const headers = { ...(opts.headers ?? {}) };
    if (opts.workerKey !== undefined) headers["X-Sandman-Worker-Key"] = opts.workerKey;
    const route = sandboxPath(id, `/ports/${portNumber(port)}`) + relayedPath(opts.path);
    const res = await this.t.open({ method: opts.method ?? "GET", path: route, headers, body: opts.body, signal: opts.signal, timeoutMs: opts.timeoutMs });
    return new PortStream(res.status, res.headers, res.body as Readable);
  }

  /** previewRequest with the body streamed (no token sent): a PortStream. */
  async previewStream(preview: Preview | string, opts: Omit<PortRequestOptions, "workerKey"> = {}): Promise<PortStream> {
    const path = previewBase(preview) + relayedPath(opts.path);
    const res = await this.t.open({ method: opts.method ?? "GET", path, headers: { ...(opts.headers ?? {}) }, body: opts.body, signal: opts.signal, timeoutMs: opts.timeoutMs, noAuth: true });
    return new PortStream(res.status, res.headers, res.body as Readable);
  }

  /**
   * A WebSocket to the server on `port` of the sandbox's loopback, through
   * the ports route: a PortWebSocket once the server answered 101 (its
   * status and headers). A refusal (the runner's, or the server's own answer
   * other than 101) rejects with SandmanError and its status. A message in
   * over maxMessage bytes (default 64 MiB) ends it (SandmanError 502).
   */
  async portWebSocket(id: string, port: number, opts: PortWebSocketOptions = {}): Promise<PortWebSocket> {
    const headers = { ...(opts.headers ?? {}) };
    if (opts.workerKey !== undefined) headers["X-Sandman-Worker-Key"] = opts.workerKey;
    const route = sandboxPath(id, `/ports/${portNumber(port)}`) + relayedPath(opts.path);
    const up = await wsOpen(this.t, route, { headers, signal: opts.signal, timeoutMs: opts.timeoutMs });
    return new PortWebSocket(up, opts.maxMessage ?? WS_MAX_MESSAGE);
  }

  /**
   * A WebSocket through a preview URL (createPreview's answer or its path; no
   * token sent): a PortWebSocket; an unknown, expired or revoked preview
   * rejects with SandmanError 404.
   */
  async previewWebSocket(preview: Preview | string, opts: Omit<PortWebSocketOptions, "workerKey"> = {}): Promise<PortWebSocket> {
    const path = previewBase(preview) + relayedPath(opts.path);
    const up = await wsOpen(this.t, path, { headers: { ...(opts.headers ?? {}) }, noAuth: true, signal: opts.signal, timeoutMs: opts.timeoutMs });
    return new PortWebSocket(up, opts.maxMessage ?? WS_MAX_MESSAGE);
  }

  private async portAnswer(route: string, opts: PortRequestOptions, headers: Record<string, string>, noAuth: boolean): Promise<PortAnswer> {
    const res = await this.t.open({ method: opts.method ?? "GET", path: route, headers, body: opts.body, signal: opts.signal, timeoutMs: opts.timeoutMs, noAuth });
    return new PortAnswer(res.status, res.headers, await readAll(res.body));
  }

  metrics(opts: CallOptions = {}): Promise<string> {
    return this.t.open({ method: "GET", path: "/metrics", ...opts }).then(async (res) => {
      await this.t.check(res);
      return (await readAll(res.body)).toString("utf8");
    });
  }
}

export interface PortRequestOptions extends CallOptions {
  /** The server's path and query (default "/"). */
  path?: string;
  method?: string;
  body?: Body;
  headers?: Record<string, string>;
  workerKey?: string;
}

export interface PortWebSocketOptions extends CallOptions {
  /** The server's path and query (default "/"). */
  path?: string;
  headers?: Record<string, string>;
  workerKey?: string;
  /** The largest message taken in, in bytes (default 64 MiB). */
  maxMessage?: number;
}

/** A preview's path without its trailing slash, from createPreview's answer or the path itself. */
function previewBase(preview: Preview | string): string {
  const base = typeof preview === "string" ? preview : preview?.path;
  if (typeof base !== "string" || !base.startsWith("/preview/")) {
    throw new Error(`preview must be createPreview's answer or its path, not ${JSON.stringify(preview)}`);
  }
  return base.replace(/\/+$/, "");
}

function portNumber(port: number): number {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`port must be a number from 1 to 65535, not ${JSON.stringify(port)}`);
  return port;
}

/** The server's path (and query) as the route passes it on. */
function relayedPath(path = "/"): string {
  if (typeof path !== "string" || /[\r\n ]/.test(path)) throw new Error(`path must be a URL path without spaces or line breaks, not ${JSON.stringify(path)}`);
  return path.startsWith("/") ? path : "/" + path;
}

/** The answer of a request through a port route or a preview URL. */
/**
 * A streamed answer through a port route or a preview URL: the server's
 * status and headers (Node's: set-cookie is an array), and its body as a
 * Node Readable (`for await (const piece of s.body)`).
 */
export class PortStream {
  constructor(
    readonly status: number,
    readonly headers: Record<string, string | string[] | undefined>,
    readonly body: Readable,
  ) {}
}

export class PortAnswer {
  constructor(
    readonly status: number,
    readonly headers: Record<string, string | string[] | undefined>,
    readonly body: Buffer,
  ) {}

  text(): string {
    return this.body.toString("utf8");
  }

  json(): unknown {
    return JSON.parse(this.text());
  }

  /**
   * The JSON of a refusal ({error, failure_kind}), the form of the runner's
   * own errors; null otherwise. The sandbox's server could answer the same
   * form: a hint for messages, never a proof of origin.
   */
  get refusal(): { error: string; failure_kind: string } | null {
    const type = this.headers["content-type"];
    if (this.status < 400 || typeof type !== "string" || !type.startsWith("application/json")) return null;
    try {
      const doc = JSON.parse(this.text());
      if (doc && typeof doc === "object" && "failure_kind" in doc && "error" in doc) return doc;
    } catch {
      // not JSON
    }
    return null;
  }
}

export interface ReadOptions extends CallOptions {
  offset?: number;
  length?: number;
}

export interface WriteOptions extends CallOptions {
  /** Permission bits, e.g. 0o644 (default: kept, or 0644 for a new file). */
  mode?: number;
  /** Make missing parent folders (default true). */
  parents?: boolean;
  /** Refuse when the file exists. */
  exclusive?: boolean;
}

/** The files of a keyed sandbox (per_run or per_worker): routes under /v1/files. */
export class Files {
  constructor(private readonly t: Transport) {}

  private path(route: string, key: SandboxKey, extra: Record<string, string | number | boolean | string[] | undefined>): string {
    return `/v1/files/${route}${query({ ...key, ...extra })}`;
  }

  /** The whole file (or offset/length of it) in memory. */
  async read(key: SandboxKey, path: string, opts: ReadOptions = {}): Promise<Buffer> {
    return readAll(await this.readStream(key, path, opts));
  }

  async readText(key: SandboxKey, path: string, opts: ReadOptions = {}): Promise<string> {
    return (await this.read(key, path, opts)).toString("utf8");
  }

  /** The file as a stream (never held whole in memory). */
  async readStream(key: SandboxKey, path: string, opts: ReadOptions = {}): Promise<Readable> {
    const res = await this.t.open({
      method: "GET",
      path: this.path("content", key, { path, offset: opts.offset, length: opts.length }),
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
    });
    await this.t.check(res);
    return res.body;
  }

  /** Writes a whole file: appears whole or not at all. */
  write(key: SandboxKey, path: string, data: Body, opts: WriteOptions = {}): Promise<WriteResult> {
    return this.t.json<WriteResult>({
      method: "PUT",
      path: this.path("content", key, {
        path,
        perm: opts.mode === undefined ? undefined : opts.mode.toString(8).padStart(4, "0"),
        parents: opts.parents ?? true,
        exclusive: opts.exclusive || undefined,
      }),
      headers: { "Content-Type": "application/octet-stream" },
      body: data ?? new Uint8Array(0),
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
    });
  }

  delete(key: SandboxKey, path: string, opts: CallOptions & { recursive?: boolean } = {}): Promise<{ removed: number }> {
    return this.t.json({
      method: "DELETE",
      path: this.path("content", key, { path, recursive: opts.recursive || undefined }),
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
    });
  }

  mkdir(key: SandboxKey, path: string, opts: CallOptions & { mode?: number; parents?: boolean } = {}): Promise<FileEntry> {
    return this.t.json({
      method: "POST",
      path: this.path("mkdir", key, {
        path,
        perm: opts.mode === undefined ? undefined : opts.mode.toString(8).padStart(4, "0"),
        parents: opts.parents ?? true,
      }),
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
    });
  }

  /** A link is described, never followed. */
  stat(key: SandboxKey, path: string, opts: CallOptions = {}): Promise<FileEntry> {
    return this.t.json({ method: "GET", path: this.path("stat", key, { path }), ...opts });
  }

  /** depth 1: the folder's own entries; 0: every level. */
  list(key: SandboxKey, path = ".", opts: CallOptions & { depth?: number; max?: number } = {}): Promise<FileList> {
    return this.t.json({
      method: "GET",
      path: this.path("list", key, { path, depth: opts.depth, max: opts.max }),
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
    });
  }

  glob(key: SandboxKey, pattern: string, opts: CallOptions & { path?: string; max?: number } = {}): Promise<FileList> {
    return this.t.json({
      method: "GET",
      path: this.path("glob", key, { pattern, path: opts.path, max: opts.max }),
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
    });
  }

  grep(
    key: SandboxKey,
    pattern: string,
    opts: CallOptions & { path?: string; include?: string; ignoreCase?: boolean; fixed?: boolean; max?: number } = {},
  ): Promise<GrepResult> {
    return this.t.json({
      method: "GET",
      path: this.path("grep", key, {
        pattern,
        path: opts.path,
        include: opts.include,
        ignore_case: opts.ignoreCase || undefined,
        fixed: opts.fixed || undefined,
        max: opts.max,
      }),
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
    });
  }

  /** Extracts a tar stream under folder `path`: files and folders only. */
  uploadTar(key: SandboxKey, path: string, tar: Body, opts: CallOptions = {}): Promise<TarStats> {
    return this.t.json({
      method: "PUT",
      path: this.path("archive", key, { path }),
      headers: { "Content-Type": "application/x-tar" },
      body: tar,
      ...opts,
    });
  }

  /**
   * The file events of folder `path` (and with `recursive`, the folders
   * below it) as they happen: resolves once the watches are in place to a
   * FileWatch, an async iterable of events. A link on the path is refused
   * (403) as for every files call; paths in events are relative to /workspace.
   */
  async watch(key: SandboxKey, path = ".", opts: CallOptions & { recursive?: boolean } = {}): Promise<FileWatch> {
    const res = await this.t.open({
      method: "GET",
      path: this.path("watch", key, { path, recursive: opts.recursive || undefined }),
      headers: { Accept: "application/x-ndjson" },
      timeoutMs: 0,
      signal: opts.signal,
    });
    await this.t.check(res);
    return FileWatch.open(res.body);
  }

  /** E2B's name for watch. */
  watchDir(key: SandboxKey, path = ".", opts: CallOptions & { recursive?: boolean } = {}): Promise<FileWatch> {
    return this.watch(key, path, opts);
  }

  /** A tar stream of paths (folders with what they hold). */
  async downloadTar(key: SandboxKey, paths: string[], opts: CallOptions = {}): Promise<Readable> {
    const res = await this.t.open({ method: "GET", path: this.path("archive", key, { path: paths }), ...opts });
    await this.t.check(res);
    return res.body;
  }
}

export { readAll };
/** The Python client's name for the same class. */
export { SandmanClient as Client };
export type { Body };
