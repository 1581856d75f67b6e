export declare const WORKSPACE = "/workspace";
/** The files API's form of p, or null when it is outside /workspace. */
export declare function workspacePath(p: string): string | null;
export type FileErrorCode = "file_not_found" | "permission_denied" | "is_directory" | "invalid_path";
/** The framework's error code for a refused files call. */
export declare function fileErrorCode(e: unknown): FileErrorCode;
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
