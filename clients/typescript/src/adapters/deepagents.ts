// A deepagents sandbox backend on sandman: `execute`, `uploadFiles` and
// `downloadFiles` go to the runner (execute and the files API); deepagents'
// BaseSandbox builds its ls, read, write, edit, glob and grep tools on them.
//
//   import { createDeepAgent } from "deepagents";
//   import { SandmanClient } from "sandman-client";
//   import { SandmanSandbox } from "sandman-client/deepagents";
//   const backend = new SandmanSandbox({ client: new SandmanClient(), runId: "task-42" });
//   const agent = createDeepAgent({ model, backend });
//
// File paths are those of the sandbox: /workspace/... (or relative to it).
import { BaseSandbox, type ExecuteResponse, type FileDownloadResponse, type FileUploadResponse } from "deepagents";

import { SandmanClient } from "../index.js";
import type { SandboxKey } from "../types.js";
import { fileErrorCode, workspacePath, type SandboxChoice } from "./common.js";

/** Exactly one of runId and workerKey. */
export interface SandmanSandboxOptions extends SandboxChoice {
  client: SandmanClient;
}

export class SandmanSandbox extends BaseSandbox {
  readonly id: string;
  readonly key: SandboxKey;
  private readonly client: SandmanClient;
  private readonly tool: string;
  private readonly timeoutS?: number;

  constructor(opts: SandmanSandboxOptions) {
    super();
    if (!opts.runId === !opts.workerKey) throw new Error("SandmanSandbox needs exactly one of runId and workerKey");
    this.client = opts.client;
    this.key = opts.runId
      ? { run_id: opts.runId, mode: "per_run", project: opts.project, agent: opts.agent }
      : { worker_key: opts.workerKey, mode: "per_worker", project: opts.project, agent: opts.agent };
    this.id = `sandman:${opts.runId ?? opts.workerKey}`;
    this.tool = opts.tool ?? "shell";
    this.timeoutS = opts.timeoutS;
  }

  async execute(command: string): Promise<ExecuteResponse> {
    const r = await this.client.execute({ ...this.key, tool: this.tool, command, timeout_s: this.timeoutS });
    const ran = r.failure_kind === null || r.failure_kind === "tool" || r.failure_kind === "timeout";
    const output = ran ? r.stdout + (r.stderr ? (r.stdout && !r.stdout.endsWith("\n") ? "\n" : "") + r.stderr : "") : `sandman: ${r.error ?? "the command could not run"}`;
    return {
      output,
      exitCode: ran ? r.exit_code : null,
      truncated: r.stdout_truncated || r.stderr_truncated,
    };
  }

  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    const out: FileUploadResponse[] = [];
    for (const [path, content] of files) {
      const p = workspacePath(path);
      if (p === null) {
        out.push({ path, error: "invalid_path" });
        continue;
      }
      try {
        await this.client.files.write(this.key, p, content, { parents: true });
        out.push({ path, error: null });
      } catch (e) {
        out.push({ path, error: fileErrorCode(e) });
      }
    }
    return out;
  }

  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    const out: FileDownloadResponse[] = [];
    for (const path of paths) {
      const p = workspacePath(path);
      if (p === null) {
        out.push({ path, content: null, error: "invalid_path" });
        continue;
      }
      try {
        const data = await this.client.files.read(this.key, p);
        out.push({ path, content: new Uint8Array(data.buffer, data.byteOffset, data.byteLength), error: null });
      } catch (e) {
        out.push({ path, content: null, error: fileErrorCode(e) });
      }
    }
    return out;
  }
}
