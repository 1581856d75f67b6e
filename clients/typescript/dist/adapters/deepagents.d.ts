import { BaseSandbox, type ExecuteResponse, type FileDownloadResponse, type FileUploadResponse } from "deepagents";
import { SandmanClient } from "../index.js";
import type { SandboxKey } from "../types.js";
import { type SandboxChoice } from "./common.js";
/** Exactly one of runId and workerKey. */
export interface SandmanSandboxOptions extends SandboxChoice {
    client: SandmanClient;
}
export declare class SandmanSandbox extends BaseSandbox {
    readonly id: string;
    readonly key: SandboxKey;
    private readonly client;
    private readonly tool;
    private readonly timeoutS?;
    constructor(opts: SandmanSandboxOptions);
    execute(command: string): Promise<ExecuteResponse>;
    uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]>;
    downloadFiles(paths: string[]): Promise<FileDownloadResponse[]>;
}
