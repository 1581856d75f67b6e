import type { Readable } from "node:stream";
import { Body, readAll, Transport } from "./transport.js";
import type { ExecuteRequest, FileEntry, FileList, GrepResult, Health, Lease, LeaseRequest, RunResult, Sandbox, SandboxKey, StreamEvent, TarStats, WriteResult } from "./types.js";
export * from "./types.js";
export { SandmanError, defaultAddress, parseAddress } from "./transport.js";
export declare const WORKER_TOKEN_PREFIX = "sandman-worker-token-v1";
/** hex(HMAC-SHA256(control token, "sandman-worker-token-v1" NUL worker_key)), as `sandman token derive`. */
export declare function deriveWorkerToken(controlToken: string, workerKey: string): string;
export interface ClientOptions {
    /** "unix:PATH", "tcp://HOST:PORT" or "http://HOST:PORT" (default: $SANDMAN_URL, else the runner's default socket). */
    address?: string;
    /** The control token or a worker's derived token (default: $SANDMAN_TOKEN). */
    token?: string;
    /** How long to wait for an answer's headers (default 10 minutes; 0: forever). */
    timeoutMs?: number;
}
export interface CallOptions {
    signal?: AbortSignal;
    timeoutMs?: number;
}
export declare class SandmanClient {
    readonly address: string;
    readonly token: string | undefined;
    readonly files: Files;
    private readonly t;
    constructor(opts?: ClientOptions);
    /** A client holding a worker's derived token (it serves that worker key only). */
    static forWorker(controlToken: string, workerKey: string, opts?: Omit<ClientOptions, "token">): SandmanClient;
    health(opts?: CallOptions): Promise<Health>;
    /** Runs one tool call and waits for its result. A tool that ran and failed is `ok: false`, not an error. */
    execute(req: ExecuteRequest, opts?: CallOptions): Promise<RunResult>;
    /**
     * Runs one tool call and yields its output as it arrives, then the result
     * (NDJSON events). Breaking out of the loop, or aborting `signal`, closes
     * the connection, and the runner cancels the call.
     */
    executeStream(req: ExecuteRequest, opts?: CallOptions): AsyncGenerator<StreamEvent, void, undefined>;
    createLease(req: LeaseRequest, opts?: CallOptions): Promise<Lease>;
    /** State and output so far of a call sent to the background. */
    handle(id: string, opts?: CallOptions): Promise<RunResult>;
    killHandle(id: string, opts?: CallOptions): Promise<RunResult>;
    /** The runner's sandboxes (control token only). */
    sandboxes(opts?: CallOptions): Promise<Sandbox[]>;
    reap(body: {
        older_than_s: number;
        dry_run?: boolean;
        force?: boolean;
    }, opts?: CallOptions): Promise<Record<string, unknown>>;
    metrics(opts?: CallOptions): Promise<string>;
}
export interface ReadOptions extends CallOptions {
    offset?: number;
    length?: number;
}
export interface WriteOptions extends CallOptions {
    /** Permission bits, e.g. 0o644 (default: kept, or 0644 for a new file). */
    mode?: number;
    /** Make missing parent folders (default true). */
    parents?: boolean;
    /** Refuse when the file exists. */
    exclusive?: boolean;
}
/** The files of a keyed sandbox (per_run or per_worker): routes under /v1/files. */
export declare class Files {
    private readonly t;
    constructor(t: Transport);
    private path;
    /** The whole file (or offset/length of it) in memory. */
    read(key: SandboxKey, path: string, opts?: ReadOptions): Promise<Buffer>;
    readText(key: SandboxKey, path: string, opts?: ReadOptions): Promise<string>;
    /** The file as a stream (never held whole in memory). */
    readStream(key: SandboxKey, path: string, opts?: ReadOptions): Promise<Readable>;
    /** Writes a whole file: appears whole or not at all. */
    write(key: SandboxKey, path: string, data: Body, opts?: WriteOptions): Promise<WriteResult>;
    delete(key: SandboxKey, path: string, opts?: CallOptions & {
        recursive?: boolean;
    }): Promise<{
        removed: number;
    }>;
    mkdir(key: SandboxKey, path: string, opts?: CallOptions & {
        mode?: number;
        parents?: boolean;
    }): Promise<FileEntry>;
    /** A link is described, never followed. */
    stat(key: SandboxKey, path: string, opts?: CallOptions): Promise<FileEntry>;
    /** depth 1: the folder's own entries; 0: every level. */
    list(key: SandboxKey, path?: string, opts?: CallOptions & {
        depth?: number;
        max?: number;
    }): Promise<FileList>;
    glob(key: SandboxKey, pattern: string, opts?: CallOptions & {
        path?: string;
        max?: number;
    }): Promise<FileList>;
    grep(key: SandboxKey, pattern: string, opts?: CallOptions & {
        path?: string;
        include?: string;
        ignoreCase?: boolean;
        fixed?: boolean;
        max?: number;
    }): Promise<GrepResult>;
    /** Extracts a tar stream under folder `path`: files and folders only. */
    uploadTar(key: SandboxKey, path: string, tar: Body, opts?: CallOptions): Promise<TarStats>;
    /** A tar stream of paths (folders with what they hold). */
    downloadTar(key: SandboxKey, paths: string[], opts?: CallOptions): Promise<Readable>;
}
export { readAll };
export type { Body };
