// Terminals in keyed sandboxes (routes under /v1/terminals; docs/terminals.md):
// create, list, read the screen, type, resize, kill, and attach over a
// WebSocket (RFC 6455, written here on Node's own http upgrade: no
// dependency).
import { createHash, randomBytes } from "node:crypto";
import * as http from "node:http";
import type { Duplex } from "node:stream";

import { query, SandmanError, Transport } from "./transport.js";
import type { CallOptions } from "./index.js";

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
  attach(id: string, opts: { timeoutMs?: number } = {}): Promise<TerminalConnection> {
    const key = randomBytes(16).toString("base64");
    const headers: Record<string, string> = {
      Connection: "Upgrade",
      Upgrade: "websocket",
      "Sec-WebSocket-Key": key,
      "Sec-WebSocket-Version": "13",
    };
    if (this.t.token) headers.Authorization = `Bearer ${this.t.token}`;
    const ep = this.t.endpoint;
    const target = "socketPath" in ep ? { socketPath: ep.socketPath, host: "localhost" } : { host: ep.host, port: ep.port };
    return new Promise((resolve, reject) => {
      const req = http.request({ ...target, method: "GET", path: `/v1/terminals/${encodeURIComponent(id)}`, headers, agent: false });
      const timeout = opts.timeoutMs ?? this.t.timeoutMs;
      if (timeout > 0) req.setTimeout(timeout, () => req.destroy(new Error(`no answer from the runner within ${timeout} ms`)));
      req.on("error", reject);
      req.on("response", async (res) => {
        const parts: Buffer[] = [];
        for await (const c of res) parts.push(Buffer.from(c));
        const text = Buffer.concat(parts).toString("utf8");
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // text
        }
        const rid = res.headers["x-request-id"];
        reject(new SandmanError(res.statusCode ?? 0, body, typeof rid === "string" ? rid : null));
      });
      req.on("upgrade", (res, socket, head) => {
        req.setTimeout(0);
        const want = createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
        if (res.headers["sec-websocket-accept"] !== want) {
          socket.destroy();
          reject(new SandmanError(502, { error: "bad Sec-WebSocket-Accept", failure_kind: "sandbox" }, null));
          return;
        }
        resolve(new TerminalConnection(socket, head));
      });
      req.end();
    });
  }
}

const MAX_MESSAGE = 64 * 1024 * 1024;

/**
 * An attached terminal. `for await (const ev of conn)` gives its events
 * (TerminalEvent) until the connection closes; closing it detaches, and the
 * terminal lives on for the runner's grace time.
 */
export class TerminalConnection implements AsyncIterable<TerminalEvent> {
  exitCode: number | null = null;
  private buf: Buffer = Buffer.alloc(0);
  private message: Buffer[] = [];
  private messageOp = 0;
  private queue: TerminalEvent[] = [];
  private waiters: ((ev: TerminalEvent | null) => void)[] = [];
  private closed = false;

  constructor(private readonly socket: Duplex, head: Buffer) {
    socket.on("data", (d: Buffer) => this.onData(d));
    socket.on("close", () => this.end());
    socket.on("error", () => this.end());
    if (head.length) this.onData(head);
  }

  /** Types data. */
  send(data: string | Uint8Array): void {
    this.frame(0x2, typeof data === "string" ? Buffer.from(data) : Buffer.from(data));
  }

  resize(rows: number, cols: number): void {
    this.frame(0x1, Buffer.from(JSON.stringify({ type: "resize", rows, cols })));
  }

  /** Detaches (the terminal goes on). */
  close(): void {
    if (this.closed) return;
    const p = Buffer.alloc(2);
    p.writeUInt16BE(1000);
    this.frame(0x8, p);
    this.socket.end();
    this.end();
  }

  /** The next event, or null once closed (or after timeoutMs). */
  next(timeoutMs?: number): Promise<TerminalEvent | null> {
    const ev = this.queue.shift();
    if (ev) return Promise.resolve(ev);
    if (this.closed) return Promise.resolve(null);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const w = (e: TerminalEvent | null) => {
        if (timer) clearTimeout(timer);
        resolve(e);
      };
      this.waiters.push(w);
      if (timeoutMs !== undefined)
        timer = setTimeout(() => {
          this.waiters = this.waiters.filter((x) => x !== w);
          resolve(null);
        }, timeoutMs);
    });
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

  private frame(op: number, payload: Buffer): void {
    if (this.closed) return;
    const mask = randomBytes(4);
    const n = payload.length;
    const head = n < 126 ? Buffer.alloc(2) : n < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
    head[0] = 0x80 | op;
    if (n < 126) head[1] = 0x80 | n;
    else if (n < 65536) {
      head[1] = 0x80 | 126;
      head.writeUInt16BE(n, 2);
    } else {
      head[1] = 0x80 | 127;
      head.writeBigUInt64BE(BigInt(n), 2);
    }
    const body = Buffer.alloc(n);
    for (let i = 0; i < n; i++) body[i] = payload[i] ^ mask[i & 3];
    this.socket.write(Buffer.concat([head, mask, body]));
  }

  private push(ev: TerminalEvent | null): void {
    if (ev && ev.type === "exit") this.exitCode = ev.exit_code;
    const w = this.waiters.shift();
    if (w) w(ev);
    else if (ev) this.queue.push(ev);
  }

  private end(): void {
    if (this.closed) return;
    this.closed = true;
    for (const w of this.waiters.splice(0)) w(null);
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    for (;;) {
      if (this.buf.length < 2) return;
      let n = this.buf[1] & 0x7f;
      let at = 2;
      if (n === 126) {
        if (this.buf.length < 4) return;
        n = this.buf.readUInt16BE(2);
        at = 4;
      } else if (n === 127) {
        if (this.buf.length < 10) return;
        const big = this.buf.readBigUInt64BE(2);
        if (big > BigInt(MAX_MESSAGE)) return this.protocolError();
        n = Number(big);
        at = 10;
      }
      if (this.buf[1] & 0x80 || n > MAX_MESSAGE) return this.protocolError();
      if (this.buf.length < at + n) return;
      const fin = (this.buf[0] & 0x80) !== 0;
      const op = this.buf[0] & 0x0f;
      const payload = this.buf.subarray(at, at + n);
      this.buf = this.buf.subarray(at + n);
      this.onFrame(fin, op, Buffer.from(payload));
    }
  }

  private onFrame(fin: boolean, op: number, payload: Buffer): void {
    if (op === 0x9) return this.frame(0xa, payload);
    if (op === 0xa) return;
    if (op === 0x8) {
      this.frame(0x8, payload.subarray(0, 2));
      this.socket.end();
      return this.end();
    }
    if (op !== 0x0) this.messageOp = op;
    this.message.push(payload);
    if (!fin) return;
    const whole = Buffer.concat(this.message);
    this.message = [];
    if (this.messageOp === 0x2) return this.push({ type: "output", data: whole });
    this.push(JSON.parse(whole.toString("utf8")) as TerminalEvent);
  }

  private protocolError(): void {
    this.socket.destroy();
    this.end();
  }
}
