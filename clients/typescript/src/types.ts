// The runner's JSON, as docs/http-api.md describes it.

export type Mode = "none" | "per_tool" | "per_run" | "per_worker";
export type FailureKind = null | "tool" | "timeout" | "policy" | "sandbox" | "engine";

/** The body of POST /v1/execute. Exactly one of argv and command (or params with a templated tool). */
export interface ExecuteRequest {
  tool?: string;
  argv?: string[];
  command?: string;
  params?: Record<string, unknown>;
  /** Standard input (sent base64). */
  stdin?: string | Uint8Array;
  env?: Record<string, string>;
  agent?: string;
  user?: string;
  project?: string;
  run_id?: string;
  worker_key?: string;
  mode?: Mode;
  timeout_s?: number;
  background_on_timeout?: boolean;
  lease_id?: string;
  workspace?: string;
  sync?: "none" | "in" | "inout";
  /** A sandbox by its id (createSandbox): used as it was made. */
  sandbox_id?: string;
  /** A sandbox these settings change may be replaced with an empty /workspace when its own cannot be carried over. */
  replace?: boolean;
  /** A new keyed sandbox (this run_id's, or with mode per_worker this worker's) made from this snapshot; another worker's is 404, as a missing one. */
  from_snapshot?: string;
}

/** The `sandman run --json` object. */
export interface RunResult {
  ok: boolean;
  exit_code: number;
  stdout: string;
  stderr: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  timed_out: boolean;
  oom_killed: boolean;
  duration_ms: number;
  mode: Mode;
  sandbox_id: string;
  reused: boolean;
  files_changed: string[];
  /** Conflict copies kept beside the host's version (`<name>.sandman-conflict`). */
  conflicts: string[];
  failure_kind: FailureKind;
  error: string | null;
  handle?: string;
  state?: string;
  [key: string]: unknown;
}

/** One event of a streamed execute (NDJSON). */
export type StreamEvent =
  | { event: "stdout" | "stderr"; data: string; data_b64?: undefined }
  | { event: "stdout" | "stderr"; data?: undefined; data_b64: string }
  | { event: "result"; status: number; result: RunResult };

export interface LeaseRequest {
  tool: string;
  services: string[];
  ttl_s?: number;
  max_uses?: number;
  worker_key?: string;
}

export interface Lease {
  lease_id: string;
  expires_at: string;
  max_uses: number;
  [key: string]: unknown;
}

export interface Health {
  status: "ok" | "degraded";
  version: string;
  mode: Mode;
  pool: string | null;
  engine: Record<string, unknown>;
  [key: string]: unknown;
}

export interface Sandbox {
  id: string;
  name: string;
  mode: Mode;
  project: string;
  run_id: string | null;
  worker_id: string | null;
  agent: string | null;
  image: string;
  status: string;
  created_at: string;
  last_used_at: string | null;
  busy: boolean;
  [key: string]: unknown;
}

/** A sandbox made ahead of its calls (POST /v1/sandboxes). */
export interface CreateSandboxRequest {
  /** A template of the runner's configuration, or an image (one of those the configuration allows). */
  template?: string;
  image?: string;
  mode?: "per_run" | "per_worker";
  run_id?: string;
  worker_key?: string;
  project?: string;
  agent?: string;
  cpu?: number;
  /** Sizes: bytes, or a string such as "512m". */
  memory?: number | string;
  pids?: number;
  disk?: number | string;
  network?: "none" | "allowlist" | "bridge";
  /** Its life in seconds from creation. */
  timeout_s?: number;
  idle_timeout_s?: number;
  labels?: Record<string, string>;
}

/** A sandbox's description (GET /v1/sandboxes/{id}). */
export interface SandboxInfo extends Sandbox {
  resource: boolean;
  template: string | null;
  network: string | null;
  resources: { cpu: number | null; memory: number | null; pids: number | null; disk: number | null };
  timeout_s: number | null;
  idle_timeout_s: number | null;
  expires_at: string | null;
  labels: Record<string, string>;
}

/** Which keyed sandbox a files call works in (as execute's fields). */
export interface SandboxKey {
  /** A sandbox by its id (instead of run_id or mode). */
  sandbox_id?: string;
  run_id?: string;
  worker_key?: string;
  mode?: "per_run" | "per_worker";
  project?: string;
  agent?: string;
}

export interface FileEntry {
  path: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  mode: string;
  mtime: string;
  link?: string;
}

export interface FileList {
  entries: FileEntry[];
  truncated: boolean;
}

export interface GrepMatch {
  path: string;
  line: number;
  text: string;
}

export interface GrepResult {
  matches: GrepMatch[];
  truncated: boolean;
}

export interface WriteResult {
  path: string;
  size: number;
  sandbox_id?: string;
  [key: string]: unknown;
}

export interface TarStats {
  files: number;
  bytes: number;
  [key: string]: unknown;
}

/** A rest tier of a keyed sandbox (docs/state.md). */
export type RestTier = "freeze" | "stop" | "hibernate";

/** The answer of pause, resume and rollback. */
export interface RestReport {
  id: string;
  name: string;
  previous: string;
  state: string;
  since: number;
  changed: boolean;
  duration_ms: number;
  workspace_bytes: number;
  [key: string]: unknown;
}

/** One item of a reap's report: removed, spared, or moved to rest. */
export interface ReapItem {
  id: string | null;
  name: string;
  /** moved only: the state it went to ("frozen", "stopped"). */
  state?: string;
  reason: string;
  kind: "sandbox" | "volume" | "network";
  failed?: boolean;
}

/** The answer of POST /v1/sandboxes/reap (docs/http-api.md), as `sandman sandbox reap --json`. */
export interface ReapReport {
  removed: ReapItem[];
  spared: ReapItem[];
  /** What the idle lifecycle put to rest (docs/state.md#the-idle-lifecycle); with dry_run, what it would. */
  moved: ReapItem[];
  dry_run: boolean;
  [key: string]: unknown;
}

/** A snapshot of a keyed sandbox (docs/http-api.md#snapshots). */
export interface Snapshot {
  name: string;
  key: string;
  owner: string;
  source: string;
  source_id: string;
  mode: string;
  image: string;
  created_at: number;
  age_s: number;
  size: { workspace: number; layer: number; checkpoint: number };
  /** It holds its processes' memory (taken with `memory: true`). */
  memory: boolean;
  files: number;
  duration_ms: number;
  [key: string]: unknown;
}

export interface ForkItem {
  run_id: string;
  name: string | null;
  id: string | null;
  duration_ms: number;
  error: string | null;
}

export interface DiffEntry {
  path: string;
  type: string;
  size: number;
  size_before?: number;
}

export interface SnapshotDiff {
  sandbox: string;
  snapshot: string;
  added: DiffEntry[];
  modified: DiffEntry[];
  deleted: DiffEntry[];
}

/** A preview URL of a sandbox's port (POST /v1/sandboxes/{id}/previews; docs/ports.md). */
export interface Preview {
  token: string;
  /** "/preview/{token}/": anyone holding it reaches that port, and nothing else. */
  path: string;
  sandbox_id: string;
  port: number;
  /** Unix seconds. */
  expires_at: number;
}
