// HTTP to the runner over its unix socket or TCP, with Node's standard
// library only. Every request opens its own connection (the runner closes
// idle ones after 60 s), so one client may be used from many places at once.
import * as http from "node:http";
import { Readable } from "node:stream";

/** The runner refused or failed a request (HTTP status >= 400). */
export class SandmanError extends Error {
  readonly status: number;
  readonly failureKind: string | null;
  readonly body: unknown;
  readonly requestId: string | null;

  constructor(status: number, body: unknown, requestId: string | null) {
    const o = typeof body === "object" && body !== null ? (body as Record<string, unknown>) : {};
    const error = typeof o.error === "string" ? o.error : typeof body === "string" ? body : "";
    const kind = typeof o.failure_kind === "string" ? o.failure_kind : null;
    super(`HTTP ${status}: ${error}${kind ? ` (${kind})` : ""}`);
    this.name = "SandmanError";
    this.status = status;
    this.failureKind = kind;
    this.body = body;
    this.requestId = requestId;
  }
}

/** Where the runner listens: "unix:PATH", "unix://PATH", "tcp://HOST:PORT" or "http://HOST:PORT". */
export type Endpoint = { socketPath: string } | { host: string; port: number };

export function parseAddress(address: string): Endpoint {
  if (address.startsWith("unix://")) return { socketPath: address.slice("unix://".length) };
  if (address.startsWith("unix:")) return { socketPath: address.slice("unix:".length) };
  const m = /^(?:tcp|http):\/\/(\[[^\]]+\]|[^:/]+)(?::(\d+))?\/?$/.exec(address);
  if (m) return { host: m[1].replace(/^\[|\]$/g, ""), port: m[2] ? Number(m[2]) : 80 };
  throw new Error(`address must be unix:PATH or tcp://HOST:PORT, not ${JSON.stringify(address)}`);
}

/** The runner's default unix socket, as `sandman worker start` picks it. */
export function defaultAddress(): string {
  const uid = typeof process.getuid === "function" ? process.getuid() : -1;
  if (uid === 0) return "unix:/run/sandman/sandman.sock";
  const xdg = process.env.XDG_RUNTIME_DIR;
  if (xdg && xdg.startsWith("/")) return `unix:${xdg}/sandman/sandman.sock`;
  return `unix:/tmp/sandman-${uid}/sandman.sock`;
}

export type Body = undefined | string | Uint8Array | Readable | AsyncIterable<Uint8Array>;

export interface RequestOptions {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: Body;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** Send no token (a preview URL takes none). */
  noAuth?: boolean;
}

/** A response whose body has not been read yet. */
export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  requestId: string | null;
  body: http.IncomingMessage;
}

/** The one outcome of a request to the runner (see requestOutcome). */
export interface RequestOutcome {
  /** Rejects the request's promise (the first outcome only) and destroys the request. */
  fail(e: unknown): void;
  /** The answer is in: the timeout and the abort no longer act; false when the request has already failed. */
  answered(): boolean;
  /** Failed or answered already. */
  readonly settled: boolean;
}

/**
 * Settles req's promise (through reject) once: the request's error, its
 * timeout (ms, 0 for none) or the signal's abort fail it until answered()
 * takes the answer. A signal aborted already fails it at once (settled is
 * then true); its error is listened for all the same, since a request
 * destroyed unsent emits one a tick later (unheard, it ends the process).
 */
export function requestOutcome(req: http.ClientRequest, reject: (e: unknown) => void, timeoutMs: number, signal?: AbortSignal): RequestOutcome {
  let settled = false;
  const fail = (e: unknown) => {
    if (settled) return;
    settled = true;
    req.destroy();
    reject(e);
  };
  if (timeoutMs > 0) req.setTimeout(timeoutMs, () => fail(new Error(`no answer from the runner within ${timeoutMs} ms`)));
  const onAbort = () => fail(signal?.reason ?? new Error("aborted"));
  if (signal?.aborted) onAbort();
  else signal?.addEventListener("abort", onAbort, { once: true });
  req.on("error", fail);
  return {
    fail,
    answered() {
      signal?.removeEventListener("abort", onAbort);
      req.setTimeout(0);
      if (settled) return false;
      settled = true;
      return true;
    },
    get settled() {
      return settled;
    },
  };
}

export class Transport {
  readonly endpoint: Endpoint;
  readonly token: string | undefined;
  readonly timeoutMs: number;

  constructor(address: string, token: string | undefined, timeoutMs: number) {
    this.endpoint = parseAddress(address);
    this.token = token;
    this.timeoutMs = timeoutMs;
  }

  /**
   * http.request's options for method and path at the runner: its socket or
   * host and port, a connection of its own, the headers with the token
   * (unless noAuth or they carry an Authorization of their own).
   */
  requestOptions(method: string, path: string, headers: Record<string, string>, noAuth = false): http.RequestOptions {
    const h: Record<string, string> = { ...headers };
    if (this.token && !noAuth && h.Authorization === undefined) h.Authorization = `Bearer ${this.token}`;
    const ep = this.endpoint;
    const target = "socketPath" in ep ? { socketPath: ep.socketPath, host: "localhost" } : { host: ep.host, port: ep.port };
    return { ...target, method, path, headers: h, agent: false };
  }

  /** Sends a request and resolves once the answer's headers are in. */
  open(opts: RequestOptions): Promise<RawResponse> {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    let body = opts.body;
    if (typeof body === "string") body = Buffer.from(body);
    if (body instanceof Uint8Array) headers["Content-Length"] = String(body.byteLength);
    return new Promise<RawResponse>((resolve, reject) => {
      const req = http.request(this.requestOptions(opts.method, opts.path, headers, opts.noAuth));
      const out = requestOutcome(req, reject, opts.timeoutMs ?? this.timeoutMs, opts.signal);
      if (out.settled) return; // aborted before it was sent
      req.on("response", (res) => {
        if (!out.answered()) {
          res.destroy();
          return;
        }
        // Later aborts end the body (a streamed call is cancelled by closing it).
        opts.signal?.addEventListener("abort", () => res.destroy(), { once: true });
        const id = res.headers["x-request-id"];
        resolve({ status: res.statusCode ?? 0, headers: res.headers, requestId: typeof id === "string" ? id : null, body: res });
      });
      if (body === undefined) {
        req.end();
      } else if (body instanceof Uint8Array) {
        req.end(body);
      } else {
        const source = body instanceof Readable ? body : Readable.from(body);
        source.on("error", out.fail);
        source.pipe(req);
      }
    });
  }

  /** A request whose answer is JSON; statuses >= 400 throw SandmanError. */
  async json<T>(opts: RequestOptions): Promise<T> {
    const res = await this.open({ ...opts, headers: { Accept: "application/json", ...(opts.headers ?? {}) } });
    const text = (await readAll(res.body)).toString("utf8");
    let parsed: unknown = text;
    try {
      parsed = text.length ? JSON.parse(text) : null;
    } catch {
      // not JSON: kept as text for the error
    }
    if (res.status >= 400) throw new SandmanError(res.status, parsed, res.requestId);
    return parsed as T;
  }

  /** Throws SandmanError for a refused request, reading its JSON body. */
  async check(res: RawResponse): Promise<void> {
    if (res.status < 400) return;
    const text = (await readAll(res.body)).toString("utf8");
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // text
    }
    throw new SandmanError(res.status, parsed, res.requestId);
  }
}

export async function readAll(stream: AsyncIterable<Uint8Array | string>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(typeof chunk === "string" ? Buffer.from(chunk) : Buffer.from(chunk));
  return Buffer.concat(parts);
}

/** A query string from defined values (booleans as 1/0, arrays repeated). */
export function query(params: Record<string, string | number | boolean | string[] | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null) continue;
    if (Array.isArray(v)) for (const item of v) q.append(k, item);
    else q.append(k, typeof v === "boolean" ? (v ? "1" : "0") : String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}
