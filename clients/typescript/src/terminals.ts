// Terminals in keyed sandboxes (routes under /v1/terminals; docs/terminals.md):
// create, list, read the screen, type, resize, kill, and attach over a
// WebSocket (websocket.ts: RFC 6455 on Node's own http upgrade, no
// dependency).
import { query, Transport } from "./transport.js";
import type { CallOptions } from "./index.js";
import { WS_BINARY, WS_MAX_MESSAGE, WS_TEXT, WS_TIMEOUT, WsFramer, wsOpen, WsQueue } from "./websocket.js";
import type { WsUpgrade } from "./websocket.js";

export interface TerminalRequest {
  /** What runs on it (default ["/bin/sh"]), or a shell command. */
  argv?: string[];
  command?: string;
  rows?: number;
  cols?: number;
  env?: Record<string, string>;
  /** Working directory in the sandbox (default /workspace). */
  cwd?: string;
  /** A sandbox named by its id (POST /v1/sandboxes), instead of the keys below. */
  sandbox_id?: string;
  run_id?: string;
  worker_key?: string;
  mode?: "per_run" | "per_worker";
  project?: string;
  agent?: string;
  user?: string;
  network?: "none" | "allowlist" | "bridge";
}

export interface Terminal {
  id: string;
  state: "starting" | "running" | "exited";
  exit_code: number | null;
  rows: number;
  cols: number;
  clients: number;
  error: string | null;
  command: string;
  mode: string;
  run_id: string | null;
  worker_key: string | null;
  project: string | null;
  agent: string | null;
  sandbox_id: string | null;
  created_at: string;
}

export interface TerminalScreen {
  id: string;
  state: string;
  exit_code: number | null;
  rows: number;
  cols: number;
  cursor: { row: number; col: number; visible: boolean };
  alt_screen: boolean;
  title: string;
  /** The visible rows joined with "\n", trailing empty rows dropped. */
  text: string;
  lines: string[];
  scrollback?: string[];
}

/** What an attached terminal sends. */
export type TerminalEvent =
  | { type: "output"; data: Buffer }
  | { type: "attached"; id: string; rows: number; cols: number; state: string }
  | { type: "resize"; rows: number; cols: number }
  | { type: "exit"; exit_code: number };

export class Terminals {
  constructor(private readonly t: Transport) {}

  /** Starts a terminal and resolves once its program runs. */
  create(req: TerminalRequest, opts: CallOptions = {}): Promise<Terminal> {
    return this.t.json<Terminal>({
      method: "POST",
      path: "/v1/terminals",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(req),
      ...opts,
    });
  }

  /** The terminals the token may see (a worker token: give its worker key). */
  async list(workerKey?: string, opts: CallOptions = {}): Promise<Terminal[]> {
    const r = await this.t.json<{ terminals: Terminal[] }>({
      method: "GET",
      path: `/v1/terminals${query({ worker_key: workerKey })}`,
      ...opts,
    });
    return r.terminals;
  }

  get(id: string, opts: CallOptions = {}): Promise<Terminal> {
    return this.t.json<Terminal>({ method: "GET", path: `/v1/terminals/${encodeURIComponent(id)}`, ...opts });
  }

  /** The screen as a model reads it; waitMs: first wait until it was quiet for quietMs. */
  screen(
    id: string,
    opts: CallOptions & { scrollback?: number; waitMs?: number; quietMs?: number } = {},
  ): Promise<TerminalScreen> {
    return this.t.json<TerminalScreen>({
      method: "GET",
      path: `/v1/terminals/${encodeURIComponent(id)}/screen${query({
        scrollback: opts.scrollback,
        wait_ms: opts.waitMs,
        quiet_ms: opts.quietMs,
      })}`,
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
    });
  }

  /** Types data into the terminal. */
  send(id: string, data: string | Uint8Array, opts: CallOptions = {}): Promise<{ bytes: number }> {
    return this.t.json({
      method: "POST",
      path: `/v1/terminals/${encodeURIComponent(id)}/input`,
      headers: { "Content-Type": "application/octet-stream" },
      body: typeof data === "string" ? Buffer.from(data) : data,
      ...opts,
    });
  }

  resize(id: string, rows: number, cols: number, opts: CallOptions = {}): Promise<Terminal> {
    return this.t.json<Terminal>({
      method: "POST",
      path: `/v1/terminals/${encodeURIComponent(id)}/resize`,
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ rows, cols }),
      ...opts,
    });
  }

  /** Kills its program and forgets it: its last state. */
  kill(id: string, opts: CallOptions = {}): Promise<Terminal> {
    return this.t.json<Terminal>({ method: "DELETE", path: `/v1/terminals/${encodeURIComponent(id)}`, ...opts });
  }

  /** A WebSocket to the terminal: its screen as it is, then its output as it comes. */
  async attach(id: string, opts: { timeoutMs?: number } = {}): Promise<TerminalConnection> {
    return new TerminalConnection(await wsOpen(this.t, `/v1/terminals/${encodeURIComponent(id)}`, { timeoutMs: opts.timeoutMs }));
  }
}

/**
 * An attached terminal. `for await (const ev of conn)` gives its events
 * (TerminalEvent) until the connection closes; closing it detaches, and the
 * terminal lives on for the runner's grace time.
 */
export class TerminalConnection implements AsyncIterable<TerminalEvent> {
  exitCode: number | null = null;
  private readonly queue = new WsQueue<TerminalEvent>();
  private readonly ws: WsFramer;

  constructor(up: WsUpgrade) {
    this.ws = new WsFramer(up.socket, up.head, WS_MAX_MESSAGE, {
      message: (op, data) => this.onMessage(op, data),
      end: () => this.queue.end(),
    });
  }

  /** Types data. */
  send(data: string | Uint8Array): void {
    this.ws.send(WS_BINARY, Buffer.from(typeof data === "string" ? Buffer.from(data) : data));
  }

  resize(rows: number, cols: number): void {
    this.ws.send(WS_TEXT, Buffer.from(JSON.stringify({ type: "resize", rows, cols })));
  }

  /** Detaches (the terminal goes on). */
  close(): void {
    this.ws.close(1000);
  }

  /** The next event, or null once closed (or after timeoutMs). */
  async next(timeoutMs?: number): Promise<TerminalEvent | null> {
    const ev = await this.queue.next(timeoutMs);
    return ev === WS_TIMEOUT ? null : ev;
  }

  /** Output until `pattern` appears (or timeoutMs passes, or the end): all of it. */
  async readUntil(pattern: string, timeoutMs = 30_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    let out = "";
    while (!out.includes(pattern)) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      const ev = await this.next(left);
      if (ev === null) break;
      if (ev.type === "output") out += ev.data.toString("utf8");
    }
    return out;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<TerminalEvent> {
    for (;;) {
      const ev = await this.next();
      if (ev === null) return;
      yield ev;
    }
  }

  private onMessage(op: number, data: Buffer): void {
    if (op === WS_BINARY) return this.queue.push({ type: "output", data });
    let ev: TerminalEvent;
    try {
      ev = JSON.parse(data.toString("utf8")) as TerminalEvent;
    } catch {
      return this.ws.fail("a terminal message that is not JSON");
    }
    if (ev.type === "exit") this.exitCode = ev.exit_code;
    this.queue.push(ev);
  }
}
