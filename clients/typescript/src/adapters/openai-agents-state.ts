// The OpenAI Agents SDK adapter's session state and snapshots, on sandman's
// own: what a session's state holds (which sandbox, never a token or an
// environment value), how it is found again in another process, and the
// SDK's snapshot spec as a sandman snapshot (POST /v1/sandboxes/{id}/snapshot)
// that a later session starts from by a fork (POST /v1/sandboxes/fork).
//
// The SDK's own providers keep a snapshot of the workspace beside the
// session: a serialized session takes one, a session whose sandbox is gone
// is restored from it, and without one the state is refused. Here the
// snapshot is the runner's, owned by the token's principal (a worker's
// snapshot is its own: another worker's is answered as a missing one).
import {
  Manifest,
  SandboxConfigurationError,
  SandboxProviderError,
  SandboxSnapshotNotRestorableError,
  SandboxSnapshotPersistError,
  SandboxSnapshotRestoreError,
  SandboxUnsupportedFeatureError,
  type SandboxSessionState,
  type Snapshot as SdkSnapshot,
  type SnapshotSpec,
} from "@openai/agents/sandbox";

import type { SandmanClient } from "../index.js";
import { SandmanError } from "../transport.js";
import type { Sandbox, SandboxKey } from "../types.js";
import { describeFailure } from "./common.js";

/** The snapshot spec type this adapter acts on. */
export const SANDMAN_SNAPSHOT = "sandman";

/**
 * A snapshot spec for sandman (the SDK's `snapshot` of a run's sandbox
 * configuration or of create()): `from`, a snapshot a new session starts
 * from (its sandbox is a fork of it); `name`, the name of the snapshot a
 * serialized session takes (default: the runner's `snap-<UTC time>-<4 hex>`).
 */
export interface SandmanSnapshotSpec extends SnapshotSpec {
  type: typeof SANDMAN_SNAPSHOT;
  name?: string;
  from?: string;
}

/** The spec `{ type: "sandman", name, from }`. */
export function sandmanSnapshot(opts: { name?: string; from?: string } = {}): SandmanSnapshotSpec {
  const spec: SandmanSnapshotSpec = { type: SANDMAN_SNAPSHOT };
  if (opts.name !== undefined) spec.name = checkedName(opts.name, "snapshot name");
  if (opts.from !== undefined) spec.from = checkedName(opts.from, "snapshot to start from");
  return spec;
}

export interface SandmanSandboxSessionState extends SandboxSessionState {
  runId?: string;
  workerKey?: string;
  /** per_run (a run, or a fork of a worker's snapshot) or per_worker (default: per_worker with workerKey alone). */
  mode?: "per_run" | "per_worker";
  project?: string;
  agent?: string;
  /** The sandbox the session made for itself (a run of its own, or a fork): removed by close() and delete(). */
  sandboxId?: string;
  /** A named run's or worker's sandbox as it was when the state was serialized: resume finds that one or none. */
  boundSandboxId?: string;
  /** The sandman snapshot spec in effect (null: none). */
  snapshotSpec?: SandmanSnapshotSpec | null;
}

// The runner's names (docs/http-api.md#conventions); an id of 64 hex digits is one too.
const NAME = /^[A-Za-z0-9_:@+=][A-Za-z0-9_.:@+=-]{0,127}$/;

function checkedName(v: unknown, what: string): string {
  if (typeof v !== "string" || !NAME.test(v)) throw new SandboxConfigurationError(`the ${what} must be a name (1 to 128 letters, digits and _ . : @ + = -), not ${JSON.stringify(v)}`, { [what]: v });
  return v;
}

function optionalName(state: Record<string, unknown>, field: string): string | undefined {
  const v = state[field];
  return v === undefined || v === null ? undefined : checkedName(v, `session state's ${field}`);
}

/**
 * The spec this adapter acts on: a sandman spec, or null for none (the SDK's
 * default `{ type: "local" }` and `noop`). Any other spec (a remote store, a
 * local folder) asks for a copy this adapter does not make: refused.
 */
export function snapshotSpecOf(spec: SnapshotSpec | null | undefined): SandmanSnapshotSpec | null {
  if (!spec || spec.type === "noop") return null;
  if (spec.type === "local" && Object.keys(spec).length === 1) return null;
  if (spec.type !== SANDMAN_SNAPSHOT)
    throw new SandboxUnsupportedFeatureError(
      `sandman keeps snapshots in its runner: a snapshot spec of type '${spec.type}' is not supported; use sandmanSnapshot({ name, from })`,
      { type: spec.type },
    );
  return sandmanSnapshot({ name: spec.name as string | undefined, from: spec.from as string | undefined });
}

/** The keyed sandbox a session's calls reach. */
export function keyOf(state: SandmanSandboxSessionState): SandboxKey {
  const mode = state.mode ?? (state.workerKey && !state.runId ? "per_worker" : "per_run");
  return mode === "per_worker"
    ? { worker_key: state.workerKey, mode, project: state.project, agent: state.agent }
    : { run_id: state.runId, worker_key: state.workerKey, mode, project: state.project, agent: state.agent };
}

/** What the SDK keeps of a session (it adds the manifest and the snapshot): names only, no token, no environment. */
export function providerStateOf(state: SandmanSandboxSessionState): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of ["runId", "workerKey", "mode", "project", "agent", "sandboxId", "boundSandboxId"] as const)
    if (state[f] !== undefined) out[f] = state[f];
  out.snapshotSpec = state.snapshotSpec ? { ...state.snapshotSpec } : null;
  return out;
}

/** A serialized file entry's content (the SDK writes bytes as base64) as bytes. */
function decodeEntries(entries: unknown): Record<string, unknown> {
  if (typeof entries !== "object" || entries === null) return {};
  const out: Record<string, unknown> = {};
  for (const [path, e] of Object.entries(entries as Record<string, Record<string, unknown>>)) {
    const c = e?.content as { type?: unknown; data?: unknown } | undefined;
    if (e?.type === "file" && c && c.type === "base64" && typeof c.data === "string") out[path] = { ...e, content: new Uint8Array(Buffer.from(c.data, "base64")) };
    else if (e?.type === "dir" && e.children) out[path] = { ...e, children: decodeEntries(e.children) };
    else out[path] = e;
  }
  return out;
}

/** The session state of what serializeSessionState kept (and the SDK's envelope fields), each field checked. */
export function stateFromProvider(raw: Record<string, unknown>): SandmanSandboxSessionState {
  const mode = raw.mode;
  if (mode !== undefined && mode !== null && mode !== "per_run" && mode !== "per_worker")
    throw new SandboxConfigurationError(`the session state's mode must be per_run or per_worker, not ${JSON.stringify(mode)}`, { mode });
  const m = raw.manifest;
  const manifest =
    m instanceof Manifest ? m : new Manifest({ ...((m ?? {}) as Record<string, unknown>), entries: decodeEntries((m as Record<string, unknown> | undefined)?.entries) } as never);
  const spec = raw.snapshotSpec;
  const snap = raw.snapshot as SdkSnapshot | null | undefined;
  if (snap && (snap.type !== SANDMAN_SNAPSHOT || typeof snap.id !== "string"))
    throw new SandboxSnapshotNotRestorableError(`the session state's snapshot is not a sandman snapshot (type ${JSON.stringify(snap.type)})`, { snapshot: snap });
  return {
    manifest,
    runId: optionalName(raw, "runId"),
    workerKey: optionalName(raw, "workerKey"),
    mode: (mode ?? undefined) as SandmanSandboxSessionState["mode"],
    project: optionalName(raw, "project"),
    agent: optionalName(raw, "agent"),
    sandboxId: optionalName(raw, "sandboxId"),
    boundSandboxId: optionalName(raw, "boundSandboxId"),
    snapshotSpec: spec ? snapshotSpecOf(spec as SnapshotSpec) : null,
    snapshot: snap ? { id: checkedName(snap.id, "session state's snapshot"), type: SANDMAN_SNAPSHOT } : null,
    workspaceReady: raw.workspaceReady !== false,
    ...(raw.exposedPorts ? { exposedPorts: raw.exposedPorts as SandboxSessionState["exposedPorts"] } : {}),
  };
}

function detailsOf(e: unknown): Record<string, unknown> {
  if (!(e instanceof SandmanError)) return { cause: e instanceof Error ? e.message : String(e) };
  return { status: e.status, failure_kind: e.failureKind, request_id: e.requestId };
}

/** A failed runner request other than the 404 each caller answers itself. */
function runnerError(e: unknown, what: string): Error {
  const d = detailsOf(e);
  if (e instanceof SandmanError && (e.status === 401 || e.status === 403)) return new SandboxConfigurationError(`sandman refused ${what}: ${describeFailure(e, what)}`, d);
  return new SandboxProviderError(`sandman could not do ${what}: ${describeFailure(e, what)}`, d);
}

const is404 = (e: unknown) => e instanceof SandmanError && e.status === 404;

/**
 * Whether sandbox `s` is the one the state's calls reach by its key (and,
 * for a sandbox the session removes when it ends, one this adapter made: a
 * run `openai-...`), so that a state written by someone else cannot point
 * the session, or its close(), at another of this token's sandboxes.
 */
function matches(s: Sandbox, state: SandmanSandboxSessionState): boolean {
  const key = keyOf(state);
  if (s.mode !== key.mode || (s.worker_id ?? undefined) !== state.workerKey) return false;
  if (state.project && s.project !== state.project) return false;
  if (key.mode === "per_worker") return !state.sandboxId;
  return s.run_id === state.runId && (!state.sandboxId || /^openai-/.test(state.runId ?? ""));
}

/** The sandbox a session is on, found now (any state: running, frozen, stopped), or null when it is gone, not this token's, or not the state's. */
export async function findSandbox(client: SandmanClient, state: SandmanSandboxSessionState): Promise<string | null> {
  const id = state.sandboxId ?? state.boundSandboxId;
  try {
    if (id) {
      const s = await client.getSandbox(id, { workerKey: state.workerKey });
      return matches(s, state) ? s.id : null;
    }
    const all = await client.listSandboxes({ all: true, workerKey: state.workerKey });
    const found = all.filter((s) => matches(s, state));
    // The same run in two projects: which one the session's calls reach is the runner's default project's.
    if (found.length > 1)
      throw new SandboxConfigurationError(`sandboxes of projects ${found.map((s) => s.project).join(", ")} have the session's key: give the client's options a project`, { project: state.project });
    return found[0]?.id ?? null;
  } catch (e) {
    if (e instanceof SandboxConfigurationError) throw e;
    if (is404(e)) return null;
    throw runnerError(e, `the lookup of the session's sandbox`);
  }
}

/**
 * A new sandbox from snapshot `name` (a per_run fork of the token's own
 * snapshot): its run id and id. A missing snapshot, or another worker's, is
 * SandboxSnapshotNotRestorableError; a fork the runner could not make,
 * SandboxSnapshotRestoreError.
 */
export async function forkFrom(client: SandmanClient, name: string, workerKey?: string): Promise<{ runId: string; sandboxId: string }> {
  let forks;
  try {
    forks = (await client.forkSnapshot(name, { count: 1, prefix: "openai", workerKey })).forks;
  } catch (e) {
    if (is404(e)) throw new SandboxSnapshotNotRestorableError(`snapshot '${name}' not found`, { snapshot: name, ...detailsOf(e) });
    throw runnerError(e, `a fork of snapshot '${name}'`);
  }
  const f = forks[0];
  if (!f || f.error !== null || !f.id) throw new SandboxSnapshotRestoreError(`sandman could not make a sandbox from snapshot '${name}': ${f?.error ?? "no fork"}`, { snapshot: name });
  return { runId: f.run_id, sandboxId: f.id };
}

/**
 * Takes the session's snapshot (the spec's name, or the runner's default)
 * and records it in state.snapshot; the one the state named before is
 * removed (first, when it has the same name), as the SDK's providers
 * replace theirs.
 */
export async function takeSnapshot(client: SandmanClient, state: SandmanSandboxSessionState, sandboxId: string): Promise<void> {
  const name = state.snapshotSpec?.name;
  const previous = state.snapshot?.type === SANDMAN_SNAPSHOT ? state.snapshot.id : undefined;
  const drop = async (n: string) => {
    await client.deleteSnapshot(n, { workerKey: state.workerKey }).catch((e) => {
      if (!is404(e)) throw new SandboxSnapshotPersistError(`sandman could not replace snapshot '${n}': ${describeFailure(e, n)}`, detailsOf(e));
    });
  };
  if (previous && previous === name) {
    await drop(previous);
    state.snapshot = null;
  }
  let made;
  try {
    made = await client.snapshotSandbox(sandboxId, { name, workerKey: state.workerKey });
  } catch (e) {
    throw new SandboxSnapshotPersistError(`sandman could not snapshot the session's sandbox: ${describeFailure(e, name ?? sandboxId)}`, { snapshot: name, ...detailsOf(e) });
  }
  state.snapshot = { id: made.name, type: SANDMAN_SNAPSHOT };
  if (previous && previous !== name) await drop(previous);
}
