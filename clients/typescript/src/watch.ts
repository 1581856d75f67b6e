// File events of a sandbox's folder (GET /v1/files/watch, NDJSON):
// `await client.files.watch(key, "src", { recursive: true })` resolves
// once the watches are in place, then `for await (const ev of watch)`
// yields events as they happen. close() (or leaving the loop) disconnects,
// which ends the watch on the runner.
import type { Readable } from "node:stream";

import { SandmanError } from "./transport.js";

export type FileEvent =
  | { event: "created" | "modified" | "deleted"; path: string; dir: boolean }
  | { event: "moved"; path: string; from: string; to: string; dir: boolean }
  /** Events were lost here: `dropped` by the runner's queue, null when the sandbox lost them. */
  | { event: "overflow"; dropped: number | null }
  /** The last event when the runner ends the watch: "deleted" (the folder went), "frozen", "stopped", "hibernated", "removed", "runner_stopping", "error". */
  | { event: "end"; reason: string; error?: string };

interface ReadyEvent {
  event: "ready";
  path: string;
  recursive: boolean;
  sandbox_id: string;
}

async function* lines(body: Readable): AsyncGenerator<Record<string, unknown>, void, undefined> {
  let rest = "";
  for await (const chunk of body) {
    rest += typeof chunk === "string" ? chunk : (chunk as Buffer).toString("utf8");
    let nl: number;
    while ((nl = rest.indexOf("\n")) >= 0) {
      const line = rest.slice(0, nl).trim();
      rest = rest.slice(nl + 1);
      if (line) yield JSON.parse(line) as Record<string, unknown>;
    }
  }
}

export class FileWatch implements AsyncIterable<FileEvent> {
  /** The "end" event, once it came. */
  ended?: FileEvent;

  private constructor(
    private readonly body: Readable,
    private readonly events: AsyncGenerator<Record<string, unknown>, void, undefined>,
    /** The sandbox's container id and the watched folder (relative to /workspace). */
    readonly sandboxId: string,
    readonly path: string,
  ) {}

  /** Reads the "ready" line of a 200 answer. */
  static async open(body: Readable): Promise<FileWatch> {
    const events = lines(body);
    const first = await events.next();
    const ready = first.done ? undefined : (first.value as unknown as ReadyEvent);
    if (!ready || ready.event !== "ready") {
      body.destroy();
      throw new SandmanError(502, { error: `the watch did not start: ${JSON.stringify(ready)}`, failure_kind: "sandbox" }, null);
    }
    return new FileWatch(body, events, ready.sandbox_id, ready.path);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<FileEvent, void, undefined> {
    try {
      while (this.ended === undefined) {
        const next = await this.events.next();
        if (next.done) break;
        const ev = next.value as unknown as FileEvent;
        if (ev.event === "end") this.ended = ev;
        yield ev;
      }
    } finally {
      this.close();
    }
  }

  close(): void {
    this.body.destroy();
  }
}
