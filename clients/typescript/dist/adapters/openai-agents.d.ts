import { type Editor } from "@openai/agents";
import { Manifest, type ExecCommandArgs, type ListDirectoryArgs, type MaterializeEntryArgs, type ReadFileArgs, type SandboxClient, type SandboxClientCreateArgs, type SandboxDirectoryEntry, type SandboxExecResult, type SandboxSession, type SandboxSessionState } from "@openai/agents/sandbox";
import { SandmanClient } from "../index.js";
import { type SandboxChoice } from "./common.js";
/** Without runId or workerKey, each session gets a run of its own. */
export interface SandmanSandboxClientOptions extends SandboxChoice {
    [key: string]: unknown;
}
export interface SandmanSandboxSessionState extends SandboxSessionState {
    runId?: string;
    workerKey?: string;
    project?: string;
    agent?: string;
}
export declare class SandmanSandboxSession implements SandboxSession<SandmanSandboxSessionState> {
    readonly state: SandmanSandboxSessionState;
    private readonly client;
    private readonly tool;
    private readonly timeoutS?;
    constructor(client: SandmanClient, state: SandmanSandboxSessionState, opts?: SandmanSandboxClientOptions);
    private get key();
    supportsPty(): boolean;
    exec(args: ExecCommandArgs): Promise<SandboxExecResult>;
    execCommand(args: ExecCommandArgs): Promise<string>;
    readFile(args: ReadFileArgs): Promise<Uint8Array>;
    listDir(args: ListDirectoryArgs): Promise<SandboxDirectoryEntry[]>;
    private stat;
    pathExists(path: string): Promise<boolean>;
    directoryExists(path: string): Promise<boolean>;
    /** apply_patch: V4A diffs applied here, files written through the files API. */
    createEditor(): Editor;
    /** Files and folders of a manifest (other entry kinds are not supported here). */
    materializeEntry(args: MaterializeEntryArgs): Promise<void>;
    applyManifest(manifest: Manifest): Promise<void>;
    /** The whole workspace as a tar. */
    persistWorkspace(): Promise<Uint8Array>;
    hydrateWorkspace(data: string | ArrayBuffer | Uint8Array): Promise<void>;
    running(): Promise<boolean>;
    close(): Promise<void>;
}
/** The SDK's sandbox client: one sandman sandbox per session. */
export declare class SandmanSandboxClient implements SandboxClient<SandmanSandboxClientOptions, SandmanSandboxSessionState> {
    private readonly client;
    private readonly defaults;
    readonly backendId = "sandman";
    readonly supportsDefaultOptions = true;
    constructor(client: SandmanClient, defaults?: SandmanSandboxClientOptions);
    create(args?: SandboxClientCreateArgs<SandmanSandboxClientOptions> | Manifest, manifestOptions?: SandmanSandboxClientOptions): Promise<SandmanSandboxSession>;
    resume(state: SandmanSandboxSessionState): Promise<SandmanSandboxSession>;
}
