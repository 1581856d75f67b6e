// WebSocket client (RFC 6455) on Node's own http upgrade, no dependency:
// the handshake for a path of the runner, masked frames out, messages
// reassembled in (at most maxMessage bytes each), pings answered, the close
// handshake. Shared by attached terminals (terminals.ts) and WebSockets to a
// server in a sandbox (PortWebSocket: portWebSocket, previewWebSocket).
import { createHash, randomBytes } from "node:crypto";
import * as http from "node:http";
import type { Duplex } from "node:stream";

import { requestOutcome, SandmanError, Transport } from "./transport.js";

/** The largest message taken in by default (as the Python client's). */
export const WS_MAX_MESSAGE = 64 * 1024 * 1024;
const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/** How much of a refusal's body is read (a server's own answer may be any size). */
const REFUSAL_MAX = 1 << 20;

export const WS_TEXT = 0x1;
export const WS_BINARY = 0x2;

/** recv() of a PortWebSocket found no message within its timeout. */
export class WebSocketTimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TimeoutError";
  }
}

/** An answered upgrade: the socket, what came after the 101's head, and the 101's status and headers. */
export interface WsUpgrade {
  socket: Duplex;
  head: Buffer;
  status: number;
  headers: http.IncomingHttpHeaders;
}

export interface WsOpenOptions {
  headers?: Record<string, string>;
  /** Send no token (a preview URL takes none). */
  noAuth?: boolean;
  /** How long to wait for the answer (default: the client's). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** The body of an answer other than 101, at most REFUSAL_MAX bytes of it, as SandmanError. */
async function refusal(res: http.IncomingMessage): Promise<SandmanError> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const c of res) {
    const b = Buffer.from(c);
    parts.push(b.subarray(0, Math.max(0, REFUSAL_MAX - size)));
    size += b.length;
    if (size >= REFUSAL_MAX) {
      res.destroy();
      break;
    }
  }
  const text = Buffer.concat(parts).toString("utf8");
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // text
  }
  const rid = res.headers["x-request-id"];
  return new SandmanError(res.statusCode ?? 0, body, typeof rid === "string" ? rid : null);
}

/**
 * GET path with an upgrade to a WebSocket: resolves with the 101's socket;
 * any other answer rejects with SandmanError and its status (and body), a
 * wrong Sec-WebSocket-Accept with SandmanError 502.
 */
export function wsOpen(t: Transport, path: string, opts: WsOpenOptions = {}): Promise<WsUpgrade> {
  const key = randomBytes(16).toString("base64");
  const headers: Record<string, string> = {
    ...(opts.headers ?? {}),
    Connection: "Upgrade",
    Upgrade: "websocket",
    "Sec-WebSocket-Key": key,
    "Sec-WebSocket-Version": "13",
  };
  return new Promise((resolve, reject) => {
    const req = http.request(t.requestOptions("GET", path, headers, opts.noAuth));
    const out = requestOutcome(req, reject, opts.timeoutMs ?? t.timeoutMs, opts.signal);
    if (out.settled) return; // aborted before it was sent
    // The timeout still runs while a refusal's body is read.
    req.on("response", (res) => {
      refusal(res).then(out.fail, out.fail);
    });
    req.on("upgrade", (res, socket, head) => {
      if (!out.answered()) {
        socket.destroy();
        return;
      }
      const want = createHash("sha1").update(key + WS_GUID).digest("base64");
      if (res.headers["sec-websocket-accept"] !== want) {
        socket.destroy();
        req.destroy();
        reject(new SandmanError(502, { error: "bad Sec-WebSocket-Accept", failure_kind: "sandbox" }, null));
        return;
      }
      resolve({ socket, head, status: res.statusCode ?? 101, headers: res.headers });
    });
    req.end();
  });
}

export interface WsHandlers {
  /** A whole message: its opcode (WS_TEXT, WS_BINARY) and bytes. */
  message(op: number, data: Buffer): void;
  /** The connection ended: closed by either side, or broken (error: why). */
  end(error?: Error): void;
}

/** The frames of one WebSocket: messages in to handlers, frames out. */
export class WsFramer {
  private buf: Buffer = Buffer.alloc(0);
  private parts: Buffer[] = [];
  private size = 0;
  private op = 0;
  private done = false;

  constructor(
    private readonly socket: Duplex,
    head: Buffer,
    private readonly maxMessage: number,
    private readonly on: WsHandlers,
  ) {
    socket.on("data", (d: Buffer) => this.onData(d));
    socket.on("close", () => this.finish());
    socket.on("error", () => this.finish());
    if (head.length) this.onData(head);
  }

  get closed(): boolean {
    return this.done;
  }

  /** One masked frame; false when the connection has ended. */
  send(op: number, payload: Buffer): boolean {
    if (this.done) return false;
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
    return true;
  }

  /** Our close frame, then the socket ends. */
  close(code = 1000): void {
    if (this.done) return;
    const p = Buffer.alloc(2);
    p.writeUInt16BE(code);
    this.send(0x8, p);
    this.socket.end();
    this.finish();
  }

  /** Ends the connection for a protocol error (the socket is destroyed). */
  fail(why: string): void {
    this.socket.destroy();
    this.finish(new SandmanError(502, { error: why }, null));
  }

  private finish(error?: Error): void {
    if (this.done) return;
    this.done = true;
    this.on.end(error);
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    while (!this.done && this.buf.length >= 2) {
      let n = this.buf[1] & 0x7f;
      let at = 2;
      if (n === 126) {
        if (this.buf.length < 4) return;
        n = this.buf.readUInt16BE(2);
        at = 4;
      } else if (n === 127) {
        if (this.buf.length < 10) return;
        const big = this.buf.readBigUInt64BE(2);
        if (big > BigInt(this.maxMessage)) return this.fail("a bad or too large frame");
        n = Number(big);
        at = 10;
      }
      if (this.buf[1] & 0x80 || n > this.maxMessage) return this.fail("a bad or too large frame");
      if (this.buf.length < at + n) return;
      const fin = (this.buf[0] & 0x80) !== 0;
      const op = this.buf[0] & 0x0f;
      const payload = Buffer.from(this.buf.subarray(at, at + n));
      this.buf = this.buf.subarray(at + n);
      this.onFrame(fin, op, payload);
    }
  }

  private onFrame(fin: boolean, op: number, payload: Buffer): void {
    if (op === 0x9) {
      this.send(0xa, payload);
      return;
    }
    if (op === 0xa) return;
    if (op === 0x8) {
      this.send(0x8, payload.subarray(0, 2));
      this.socket.end();
      return this.finish();
    }
    if (op !== 0x0) this.op = op;
    this.size += payload.length;
    if (this.size > this.maxMessage) return this.fail(`a message over ${this.maxMessage} bytes`);
    this.parts.push(payload);
    if (!fin) return;
    const whole = Buffer.concat(this.parts);
    this.parts = [];
    this.size = 0;
    this.on.message(this.op, whole);
  }
}

/** What WsQueue.next gives when its timeout passed first. */
export const WS_TIMEOUT: unique symbol = Symbol("timeout");

/** Items in their order of arrival for whoever waits; null once ended (an end's error is given once, to the next taker). */
export class WsQueue<T> {
  private items: T[] = [];
  private waiters: { resolve: (v: T | null | typeof WS_TIMEOUT) => void; reject: (e: Error) => void }[] = [];
  private ended = false;
  private error: Error | null = null;

  push(v: T): void {
    const w = this.waiters.shift();
    if (w) w.resolve(v);
    else this.items.push(v);
  }

  end(error?: Error): void {
    if (this.ended) return;
    this.ended = true;
    this.error = error ?? null;
    for (const w of this.waiters.splice(0)) this.settleEnded(w);
  }

  next(timeoutMs?: number): Promise<T | null | typeof WS_TIMEOUT> {
    if (this.items.length) return Promise.resolve(this.items.shift() as T);
    return new Promise((resolve, reject) => {
      if (this.ended) return this.settleEnded({ resolve, reject });
      let timer: NodeJS.Timeout | undefined;
      const w = {
        resolve: (v: T | null | typeof WS_TIMEOUT) => {
          if (timer) clearTimeout(timer);
          resolve(v);
        },
        reject: (e: Error) => {
          if (timer) clearTimeout(timer);
          reject(e);
        },
      };
      this.waiters.push(w);
      if (timeoutMs !== undefined)
        timer = setTimeout(() => {
          this.waiters = this.waiters.filter((x) => x !== w);
          resolve(WS_TIMEOUT);
        }, timeoutMs);
    });
  }

  private settleEnded(w: { resolve: (v: null) => void; reject: (e: Error) => void }): void {
    const e = this.error;
    this.error = null;
    if (e) w.reject(e);
    else w.resolve(null);
  }
}

/**
 * A WebSocket to a server in a sandbox, through the ports route or a preview
 * URL (portWebSocket, previewWebSocket). status and headers: the server's
 * 101 answer. send(string) sends text, send(bytes) binary; recv(timeoutMs)
 * gives the next message (a string for text, a Buffer for binary), null
 * once the connection is closed (by the server, or by the runner when the
 * preview is revoked or the sandbox put to rest), and rejects with
 * WebSocketTimeoutError when timeoutMs passes first, with SandmanError 502
 * for a message over maxMessage bytes (the connection is then ended).
 * `for await (const m of ws)` gives the messages until it closes.
 */
export class PortWebSocket implements AsyncIterable<string | Buffer> {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  private readonly queue = new WsQueue<string | Buffer>();
  private readonly ws: WsFramer;

  constructor(up: WsUpgrade, maxMessage = WS_MAX_MESSAGE) {
    this.status = up.status;
    this.headers = up.headers;
    this.ws = new WsFramer(up.socket, up.head, maxMessage, {
      message: (op, data) => this.queue.push(op === WS_TEXT ? data.toString("utf8") : data),
      end: (error) => this.queue.end(error),
    });
  }

  get closed(): boolean {
    return this.ws.closed;
  }

  /** Text for a string, binary for bytes; throws once the connection has ended. */
  send(data: string | Uint8Array): void {
    const ok = typeof data === "string" ? this.ws.send(WS_TEXT, Buffer.from(data)) : this.ws.send(WS_BINARY, Buffer.from(data));
    if (!ok) throw new Error("the WebSocket is closed");
  }

  async recv(timeoutMs?: number): Promise<string | Buffer | null> {
    const m = await this.queue.next(timeoutMs);
    if (m === WS_TIMEOUT) throw new WebSocketTimeoutError(`no message in ${timeoutMs} ms`);
    return m;
  }

  /** Our close frame (code, default 1000), then the connection ends. */
  close(code = 1000): void {
    this.ws.close(code);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<string | Buffer> {
    for (;;) {
      const m = await this.recv();
      if (m === null) return;
      yield m;
    }
  }
}
