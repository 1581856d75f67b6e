// Code contexts of a keyed sandbox (/v1/contexts, docs/code.md): a live
// interpreter (a Jupyter kernel) whose variables, imports and data stay
// between runs. runCode gathers a run's events into an Execution shaped
// like E2B's code interpreter (results, logs, error).
import { StringDecoder } from "node:string_decoder";

import { query, SandmanError, Transport } from "./transport.js";
import type { SandboxKey } from "./types.js";

/** One NDJSON event of a run, as the runner streams it. */
export type CodeEvent =
  | { event: "start" }
  | { event: "restarted"; reason: string; state_lost: true }
  | { event: "stdout" | "stderr"; text: string }
  | { event: "display"; data: MimeBundle }
  | { event: "result"; data: MimeBundle; execution_count: number | null }
  | { event: "error"; name: string; value: string; traceback: string }
  | { event: "truncated" }
  | { event: "notice"; message: string }
  | {
      event: "end";
      status: "ok" | "error" | "timeout" | "interrupted" | "died" | "cancelled";
      execution_count: number | null;
      duration_ms: number;
      truncated: boolean;
      message?: string;
      queued_ms?: number;
      total_ms?: number;
    };

/** text/plain, text/html, text/markdown, text/latex, image/png and image/jpeg (base64), image/svg+xml, application/json, application/javascript, application/pdf (base64). */
export type MimeBundle = Record<string, unknown>;

const FIELDS: Array<[string, keyof ResultFormats]> = [
  ["text/plain", "text"],
  ["text/html", "html"],
  ["text/markdown", "markdown"],
  ["text/latex", "latex"],
  ["image/png", "png"],
  ["image/jpeg", "jpeg"],
  ["image/svg+xml", "svg"],
  ["application/json", "json"],
  ["application/javascript", "javascript"],
  ["application/pdf", "pdf"],
];

interface ResultFormats {
  text?: string;
  html?: string;
  markdown?: string;
  latex?: string;
  png?: string;
  jpeg?: string;
  svg?: string;
  json?: unknown;
  javascript?: string;
  pdf?: string;
}

/** A display or the cell's value (isMainResult), its MIME bundle as fields. */
export class Result implements ResultFormats {
  text?: string;
  html?: string;
  markdown?: string;
  latex?: string;
  png?: string;
  jpeg?: string;
  svg?: string;
  json?: unknown;
  javascript?: string;
  pdf?: string;
  readonly data: MimeBundle;
  readonly isMainResult: boolean;

  constructor(data: MimeBundle, isMainResult: boolean) {
    this.data = { ...data };
    this.isMainResult = isMainResult;
    const self = this as unknown as Record<string, unknown>;
    for (const [mime, field] of FIELDS) if (mime in data) self[field] = data[mime];
  }

  /** The fields this result has ("text", "png", ...). */
  formats(): string[] {
    return FIELDS.filter(([mime]) => mime in this.data).map(([, field]) => field);
  }
}

export interface ExecutionError {
  name: string;
  value: string;
  traceback: string;
}

export interface Logs {
  stdout: string[];
  stderr: string[];
}

/** A run's outcome (E2B's Execution, plus how the run ended). */
export class Execution {
  results: Result[] = [];
  logs: Logs = { stdout: [], stderr: [] };
  error?: ExecutionError;
  executionCount?: number;
  /** "ok", "error", "timeout", "interrupted", "died", "cancelled". */
  status?: string;
  durationMs?: number;
  truncated = false;
  /** Why the context's earlier state is gone (a fresh kernel was started), or undefined. */
  stateLost?: string;
  message?: string;

  /** The text of the cell's value. */
  get text(): string | undefined {
    return this.results.find((r) => r.isMainResult)?.text;
  }

  /** Adds one event. */
  add(ev: CodeEvent): void {
    switch (ev.event) {
      case "stdout":
      case "stderr":
        this.logs[ev.event].push(ev.text);
        break;
      case "display":
      case "result":
        this.results.push(new Result(ev.data ?? {}, ev.event === "result"));
        break;
      case "error":
        this.error = { name: ev.name, value: ev.value, traceback: ev.traceback };
        break;
      case "restarted":
        this.stateLost = ev.reason;
        break;
      case "truncated":
        this.truncated = true;
        break;
      case "end":
        this.status = ev.status;
        this.executionCount = ev.execution_count ?? undefined;
        this.durationMs = ev.duration_ms;
        this.truncated = this.truncated || ev.truncated;
        this.message = ev.message;
        break;
      default:
        break;
    }
  }
}

export interface CodeContext {
  name: string;
  kernel: string;
  language: string;
  cwd: string;
  state: "idle" | "busy" | "dead" | "stopped";
  execution_count: number;
  created_at: number;
  last_run_at: number | null;
  queued: number;
  sandbox_id?: string | null;
}

export interface CreateContextOptions {
  /** A kernelspec name (default: the language's first kernel, python3 for Python). */
  kernel?: string;
  language?: string;
  /** The working directory (default /workspace). */
  cwd?: string;
  /** Variables of the kernel (SANDMAN_*, DOCKER_*, HOME and the XDG directories are refused). */
  env?: Record<string, string>;
}

export interface RunCodeOptions extends CreateContextOptions {
  /** The context (default: the sandbox's default context, made on first use with the options above). */
  context?: string;
  /** Seconds before the cell is interrupted (default: the configuration's). */
  timeout_s?: number;
  /** Bytes of output at most (the runner's --code-max-output caps it). */
  max_output?: number;
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  onResult?: (result: Result) => void;
  onError?: (error: ExecutionError) => void;
  /** Aborting disconnects, which interrupts the cell. */
  signal?: AbortSignal;
}

/** The streamed run: yields the events as they come. */
export async function* runCodeStream(
  t: Transport,
  key: SandboxKey,
  code: string,
  opts: RunCodeOptions = {},
): AsyncGenerator<CodeEvent, void, undefined> {
  const body = {
    ...key,
    kernel: opts.kernel,
    language: opts.language,
    cwd: opts.cwd,
    env: opts.env,
    timeout_s: opts.timeout_s,
    max_output: opts.max_output,
    code,
  };
  const { context, signal } = opts;
  const res = await t.open({
    method: "POST",
    path: `/v1/contexts/${encodeURIComponent(context ?? "default")}/run`,
    headers: { "Content-Type": "application/json", Accept: "application/x-ndjson" },
    body: JSON.stringify(body),
    timeoutMs: 0,
    signal,
  });
  await t.check(res);
  const dec = new StringDecoder("utf8");
  let rest = "";
  try {
    for await (const chunk of res.body) {
      rest += dec.write(chunk as Buffer);
      let nl: number;
      while ((nl = rest.indexOf("\n")) >= 0) {
        const line = rest.slice(0, nl).trim();
        rest = rest.slice(nl + 1);
        if (!line) continue;
        const ev = JSON.parse(line) as CodeEvent | { event: "fail"; error: string };
        if (ev.event === "fail") throw new SandmanError(502, ev, res.requestId);
        yield ev;
      }
    }
  } finally {
    res.body.destroy();
  }
}

/** Runs code and gathers its events into an Execution, calling the callbacks as events come. */
export async function runCode(t: Transport, key: SandboxKey, code: string, opts: RunCodeOptions = {}): Promise<Execution> {
  const x = new Execution();
  for await (const ev of runCodeStream(t, key, code, opts)) {
    x.add(ev);
    if (ev.event === "stdout") opts.onStdout?.(ev.text);
    else if (ev.event === "stderr") opts.onStderr?.(ev.text);
    else if ((ev.event === "display" || ev.event === "result") && opts.onResult) opts.onResult(x.results[x.results.length - 1]);
    else if (ev.event === "error" && x.error) opts.onError?.(x.error);
  }
  return x;
}

/** The code contexts of a keyed sandbox (per_run or per_worker). */
export class Contexts {
  constructor(private readonly t: Transport) {}

  private post<T>(path: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<T> {
    return this.t.json<T>({ method: "POST", path, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), signal });
  }

  create(key: SandboxKey, name: string, opts: CreateContextOptions = {}): Promise<CodeContext> {
    return this.post("/v1/contexts", { ...key, ...opts, name });
  }

  async list(key: SandboxKey): Promise<CodeContext[]> {
    const r = await this.t.json<{ contexts: CodeContext[] }>({ method: "GET", path: `/v1/contexts${query({ ...key })}` });
    return r.contexts;
  }

  get(key: SandboxKey, name: string): Promise<CodeContext> {
    return this.t.json({ method: "GET", path: `/v1/contexts/${encodeURIComponent(name)}${query({ ...key })}` });
  }

  delete(key: SandboxKey, name: string): Promise<{ context: string; deleted: boolean }> {
    return this.t.json({ method: "DELETE", path: `/v1/contexts/${encodeURIComponent(name)}${query({ ...key })}` });
  }

  /** Interrupts the running cell (as Ctrl-C). */
  interrupt(key: SandboxKey, name = "default"): Promise<{ context: string; interrupted: boolean }> {
    return this.post(`/v1/contexts/${encodeURIComponent(name)}/interrupt`, { ...key });
  }

  /** A fresh kernel: the context's state is dropped. */
  restart(key: SandboxKey, name = "default"): Promise<CodeContext> {
    return this.post(`/v1/contexts/${encodeURIComponent(name)}/restart`, { ...key });
  }
}
