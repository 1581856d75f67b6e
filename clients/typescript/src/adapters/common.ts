// What both adapters share: how a sandbox is chosen, and paths the
// frameworks hand over as the files API takes them (relative to /workspace,
// or absolute under it; anything else is refused here, before a request,
// with the framework's own error).
import { SandmanError } from "../transport.js";

export const WORKSPACE = "/workspace";

/** The files API's form of p, or null when it is outside /workspace. */
export function workspacePath(p: string): string | null {
  if (!p.startsWith("/")) return p;
  if (p === WORKSPACE || p === `${WORKSPACE}/`) return ".";
  if (p.startsWith(`${WORKSPACE}/`)) return p.slice(WORKSPACE.length + 1);
  return null;
}

export type FileErrorCode = "file_not_found" | "permission_denied" | "is_directory" | "invalid_path";

/** The framework's error code for a refused files call. */
export function fileErrorCode(e: unknown): FileErrorCode {
  if (!(e instanceof SandmanError)) throw e;
  const message = typeof e.body === "object" && e.body !== null ? String((e.body as Record<string, unknown>).error ?? "") : "";
  if (e.status === 404) return "file_not_found";
  if (/folder|directory/i.test(message) && e.status === 400) return "is_directory";
  if (e.status === 403 && /link|leaves the workspace|outside/i.test(message)) return "invalid_path";
  if (e.status === 403 || e.status === 401) return "permission_denied";
  return "invalid_path";
}

/** Which sandman sandbox an adapter works in, and how its commands are sent. */
export interface SandboxChoice {
  /** The per_run sandbox's run id. */
  runId?: string;
  /** The per_worker sandbox's worker key (instead of a run). */
  workerKey?: string;
  project?: string;
  agent?: string;
  /** The tool name commands carry (the configuration's tool policy): default "shell". */
  tool?: string;
  /** Timeout of one command, seconds (default: the runner's). */
  timeoutS?: number;
}
