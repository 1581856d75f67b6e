// What both adapters share: how a sandbox is chosen, paths the frameworks
// hand over as the files API takes them, and a failure in words a model can
// act on.
import { SandmanError } from "../transport.js";

export const WORKSPACE = "/workspace";

/** The files API's form of p (relative to /workspace, or absolute under it), or null when it is outside /workspace. */
export function workspacePath(p: string): string | null {
  if (!p.startsWith("/")) return p;
  if (p === WORKSPACE || p === `${WORKSPACE}/`) return ".";
  if (p.startsWith(`${WORKSPACE}/`)) return p.slice(WORKSPACE.length + 1);
  return null;
}

/**
 * A framework's own file tree rooted at a folder of the sandbox: its "/" is
 * `root` (/workspace, or a folder under it). Paths go to the files API
 * relative to /workspace and come back in the framework's form.
 */
export class RootedPaths {
  /** The root relative to /workspace ("" for /workspace itself). */
  private readonly prefix: string;

  constructor(readonly root: string = WORKSPACE) {
    const p = workspacePath(root.replace(/\/+$/, "") || "/");
    if (p === null || p.split("/").includes(".."))
      throw new Error(`the root must be ${WORKSPACE} or a folder under it, not ${root}`);
    this.prefix = p === "." ? "" : p;
  }

  /** The files API path of a framework path ("/src/a.py" or "src/a.py"), or null for one with "..". */
  toApi(p: string): string | null {
    const names = p.split("/").filter((n) => n !== "" && n !== ".");
    if (names.includes("..")) return null;
    const rel = names.join("/");
    if (!this.prefix) return rel || ".";
    return rel ? `${this.prefix}/${rel}` : this.prefix;
  }

  /** The framework path ("/src/a.py") of a files API path ("src/a.py"). */
  toFramework(api: string): string {
    let rel = api === "." ? "" : api;
    if (this.prefix) rel = rel === this.prefix ? "" : rel.slice(this.prefix.length + 1);
    return `/${rel}`;
  }

  /** The sandbox's own path of a framework path (what a shell command sees). */
  inSandbox(p: string): string {
    const api = this.toApi(p) ?? p;
    return api === "." ? WORKSPACE : `${WORKSPACE}/${api}`;
  }
}

export type FileErrorCode = "file_not_found" | "permission_denied" | "is_directory" | "invalid_path";

function messageOf(e: SandmanError): string {
  return typeof e.body === "object" && e.body !== null ? String((e.body as Record<string, unknown>).error ?? "") : "";
}

/** The framework's error code for a refused files call. */
export function fileErrorCode(e: unknown): FileErrorCode {
  if (!(e instanceof SandmanError)) return "permission_denied";
  const message = messageOf(e);
  if (e.status === 404) return "file_not_found";
  if (/folder|directory/i.test(message) && e.status === 400) return "is_directory";
  if (e.status === 403 && /link|leaves the workspace|outside/i.test(message)) return "invalid_path";
  if (e.status === 403 || e.status === 401) return "permission_denied";
  return "invalid_path";
}

/**
 * What a 403 refused: a path (a link on it, '..', outside the workspace),
 * or the call (the configuration's tool policy); null for other answers.
 */
export function refusal(e: SandmanError): "path" | "configuration" | null {
  if (e.status !== 403 || e.failureKind !== "policy") return null;
  return /link|leaves the workspace|outside|'\.\.'/i.test(messageOf(e)) ? "path" : "configuration";
}

/**
 * A failed runner request on `what` (a path as the model named it) in
 * words a model can act on: what happened and what to do next.
 */
export function describeFailure(e: unknown, what: string): string {
  if (!(e instanceof SandmanError)) {
    const m = e instanceof Error ? e.message : String(e);
    return `sandman's runner could not be reached for '${what}' (${m}); try again in a moment`;
  }
  const m = messageOf(e) || e.message;
  switch (e.status) {
    case 404:
      return `'${what}' not found`;
    case 400:
      if (/folder|directory/i.test(m)) return `'${what}': ${m} (ls lists a folder; read_file reads a file)`;
      return `'${what}': ${m}`;
    case 401:
      return `sandman refused this client's token (${m}): the sandbox cannot be reached with it`;
    case 403:
      if (e.failureKind === "tool") return `'${what}': permission denied in the sandbox (${m})`;
      if (refusal(e) === "path") return `'${what}' is refused: ${m}`;
      return `refused by sandman's configuration: ${m}`;
    case 409:
      return `'${what}' already exists (${m})`;
    case 413:
      return `'${what}' is too large: ${m}`;
    case 504:
      return `the operation on '${what}' timed out (${m}); narrow it (a smaller folder or a more specific pattern)`;
    default:
      return `the sandbox is not available right now (HTTP ${e.status}: ${m}); try again in a moment`;
  }
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
