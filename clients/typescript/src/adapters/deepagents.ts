// A deepagents sandbox backend on sandman, rooted at the sandbox's
// /workspace: deepagents' "/" is /workspace (or the folder given as `root`),
// so `write("/notes.md")` writes /workspace/notes.md and `ls("/")` lists the
// workspace, never the container's root.
//
//   import { createDeepAgent } from "deepagents";
//   import { SandmanClient } from "sandman-client";
//   import { SandmanSandbox } from "sandman-client/deepagents";
//   const backend = new SandmanSandbox({ client: new SandmanClient(), runId: "task-42" });
//   const agent = createDeepAgent({ model, backend });
//
// ls, read, write, edit, glob, grep, delete and the file transfers go
// through the runner's files API (confined to the workspace, links not
// followed, results capped with a truncation flag); execute runs the
// command in the root folder. Every failure (a missing file, a refused
// path or tool, the runner or engine down, a timeout) comes back as
// deepagents' own result with words the model can act on, never as a throw.
import {
  BaseSandbox,
  normalizeReadPagination,
  type DeleteResult,
  type EditResult,
  type ExecuteResponse,
  type FileData,
  type FileDownloadResponse,
  type FileInfo,
  type FileUploadResponse,
  type GlobResult,
  type GrepResult,
  type LsResult,
  type ReadRawResult,
  type ReadResult,
  type WriteResult,
} from "deepagents";

import { SandmanClient } from "../index.js";
import type { FileEntry, SandboxKey } from "../types.js";
import { describeFailure, fileErrorCode, RootedPaths, WORKSPACE, type SandboxChoice } from "./common.js";

/** Exactly one of runId and workerKey. */
export interface SandmanSandboxOptions extends SandboxChoice {
  client: SandmanClient;
  /** The sandbox folder deepagents' "/" stands for: /workspace (default) or a folder under it. */
  root?: string;
  /** Entries of ls and glob, and matches of grep, at most (default 1000; more: truncated). */
  maxResults?: number;
  /** Bytes of one file read or edited at most (default 10 MiB). */
  maxReadBytes?: number;
}

const EMPTY_FILE = "System reminder: File exists but has empty contents";
const DEFAULT_MAX_RESULTS = 1000;
const DEFAULT_MAX_READ = 10 * 1024 * 1024;

/**
 * Media that deepagents reads and writes as bytes (its read_file gives
 * them to the model as multimodal blocks; write_file takes them in base64).
 */
const MEDIA: Record<string, string> = {
  png: "image/png", jpg: "image/jpeg", jpeg: "image/jpeg", gif: "image/gif", webp: "image/webp",
  heic: "image/heic", heif: "image/heif", mp3: "audio/mpeg", wav: "audio/wav", aiff: "audio/aiff",
  aac: "audio/aac", ogg: "audio/ogg", flac: "audio/flac", mp4: "video/mp4", webm: "video/webm",
  mpeg: "video/mpeg", mpg: "video/mpeg", mov: "video/quicktime", avi: "video/x-msvideo",
  flv: "video/x-flv", wmv: "video/x-ms-wmv", "3gpp": "video/3gpp", pdf: "application/pdf",
  ppt: "application/vnd.ms-powerpoint",
  pptx: "application/vnd.openxmlformats-officedocument.presentationml.presentation",
};

function mediaType(path: string): string | undefined {
  const dot = path.lastIndexOf(".");
  return dot > path.lastIndexOf("/") ? MEDIA[path.slice(dot + 1).toLowerCase()] : undefined;
}

function infoOf(paths: RootedPaths, e: FileEntry): FileInfo {
  const dir = e.type === "dir";
  const p = paths.toFramework(e.path);
  return { path: dir ? `${p}/` : p, is_dir: dir, size: e.size, modified_at: e.mtime };
}

function bytesOf(b: Buffer): Uint8Array {
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

export class SandmanSandbox extends BaseSandbox {
  readonly id: string;
  readonly key: SandboxKey;
  readonly paths: RootedPaths;
  private readonly client: SandmanClient;
  private readonly tool: string;
  private readonly timeoutS?: number;
  private readonly maxResults: number;
  private readonly maxReadBytes: number;

  constructor(opts: SandmanSandboxOptions) {
    super();
    if (!opts.runId === !opts.workerKey) throw new Error("SandmanSandbox needs exactly one of runId and workerKey");
    this.client = opts.client;
    this.key = opts.runId
      ? { run_id: opts.runId, mode: "per_run", project: opts.project, agent: opts.agent }
      : { worker_key: opts.workerKey, mode: "per_worker", project: opts.project, agent: opts.agent };
    this.id = `sandman:${opts.runId ?? opts.workerKey}`;
    this.paths = new RootedPaths(opts.root ?? WORKSPACE);
    this.tool = opts.tool ?? "shell";
    this.timeoutS = opts.timeoutS;
    this.maxResults = opts.maxResults ?? DEFAULT_MAX_RESULTS;
    this.maxReadBytes = opts.maxReadBytes ?? DEFAULT_MAX_READ;
  }

  /** The files API path of p, or the words of its refusal. */
  private api(p: string): { path: string } | { error: string } {
    const path = this.paths.toApi(p);
    if (path === null) return { error: `'${p}' is refused: '..' may not leave ${this.paths.root}; name paths from / (which is ${this.paths.root})` };
    return { path };
  }

  /** A failure on p in words, with a hint when p looks like a sandbox path given from the wrong root. */
  private failure(e: unknown, p: string): string {
    const words = describeFailure(e, p);
    const real = this.paths.root.replace(/\/+$/, "");
    if (/not found$/.test(words) && (p === real || p.startsWith(`${real}/`)))
      return `${words}: the file tools' / is the sandbox's ${real}, so ${real}/x is /x here (try '${p.slice(real.length) || "/"}')`;
    return words;
  }

  async execute(command: string): Promise<ExecuteResponse> {
    const real = this.paths.inSandbox("/");
    const cmd = real === WORKSPACE ? command : `cd '${real.replace(/'/g, `'\\''`)}' && ${command}`;
    try {
      const r = await this.client.execute({ ...this.key, tool: this.tool, command: cmd, timeout_s: this.timeoutS });
      const ran = r.failure_kind === null || r.failure_kind === "tool" || r.failure_kind === "timeout";
      if (!ran) return { output: `sandman could not run the command: ${r.error ?? "the sandbox failed"}`, exitCode: null, truncated: false };
      let output = r.stdout;
      if (r.stderr) output += (output && !output.endsWith("\n") ? "\n" : "") + r.stderr;
      if (r.timed_out || r.oom_killed)
        output += `${output && !output.endsWith("\n") ? "\n" : ""}[sandman: ${r.error ?? "the command was killed"}${
          r.timed_out ? "; run long jobs in the background (nohup CMD > log 2>&1 &) and look at the log later" : ""
        }]`;
      return { output, exitCode: r.exit_code, truncated: r.stdout_truncated || r.stderr_truncated };
    } catch (e) {
      return { output: `sandman could not run the command: ${describeFailure(e, command.slice(0, 80))}`, exitCode: null, truncated: false };
    }
  }

  override async ls(path: string): Promise<LsResult> {
    const a = this.api(path || "/");
    if ("error" in a) return a;
    try {
      const l = await this.client.files.list(this.key, a.path, { depth: 1, max: this.maxResults });
      return { files: l.entries.map((e) => infoOf(this.paths, e)) };
    } catch (e) {
      return { error: this.failure(e, path) };
    }
  }

  override async read(filePath: string, offset = 0, limit = 500): Promise<ReadResult> {
    const a = this.api(filePath);
    if ("error" in a) return a;
    try {
      const st = await this.client.files.stat(this.key, a.path);
      if (st.type === "dir") return { error: `'${filePath}' is a folder, not a file: list it with ls` };
      if (st.type !== "file") return { error: `'${filePath}' is a ${st.type}, not a regular file` };
      const media = mediaType(filePath);
      if (media) {
        if (st.size > this.maxReadBytes)
          return { error: `'${filePath}' is ${st.size} bytes, more than the ${this.maxReadBytes} read whole at most` };
        return { content: bytesOf(await this.client.files.read(this.key, a.path)), mimeType: media };
      }
      if (st.size === 0) return { content: EMPTY_FILE, mimeType: "text/plain" };
      const n = normalizeReadPagination(offset, limit);
      return await this.readLines(filePath, a.path, n.offset, n.limit);
    } catch (e) {
      return { error: this.failure(e, filePath) };
    }
  }

  /** Lines [offset, offset+limit) of a text file, streamed: what follows the window is not read. */
  private async readLines(filePath: string, api: string, offset: number, limit: number): Promise<ReadResult> {
    const stream = await this.client.files.readStream(this.key, api);
    const lines: string[] = [];
    const decoder = new TextDecoder();
    let line = 0, rest = "", bytes = 0, more = false, first = true;
    try {
      for await (const chunk of stream) {
        const buf = chunk as Buffer;
        if (first && buf.includes(0))
          return { error: `'${filePath}' is a binary file, not text: look at it with execute (e.g. od -c ${this.paths.inSandbox(filePath)} | head)` };
        first = false;
        bytes += buf.byteLength;
        rest += decoder.decode(buf, { stream: true });
        let nl: number;
        while ((nl = rest.indexOf("\n")) >= 0 && !more) {
          if (line >= offset + limit) more = true;
          else if (line >= offset) lines.push(rest.slice(0, nl));
          line++;
          rest = rest.slice(nl + 1);
        }
        if (more || bytes > this.maxReadBytes) break;
      }
    } finally {
      stream.destroy();
    }
    const cut = !more && bytes > this.maxReadBytes;
    rest += decoder.decode();
    if (!more && !cut && rest !== "") {
      if (line >= offset + limit) more = true;
      else if (line >= offset) lines.push(rest);
      line++;
    }
    if (limit === 0) return { content: "", mimeType: "text/plain" };
    if (lines.length === 0)
      return { error: `offset ${offset} is past the end of '${filePath}' (${line} line${line === 1 ? "" : "s"}): read from offset 0` };
    const end = offset + lines.length;
    const known = !more && !cut;
    return {
      content: lines.join("\n"),
      mimeType: "text/plain",
      totalLines: known ? line : undefined,
      startLine: offset + 1,
      endLine: end,
      nextOffset: more || cut ? end : undefined,
    };
  }

  override async readRaw(filePath: string): Promise<ReadRawResult> {
    const a = this.api(filePath);
    if ("error" in a) return a;
    try {
      const st = await this.client.files.stat(this.key, a.path);
      if (st.type !== "file") return { error: `'${filePath}' is a ${st.type === "dir" ? "folder" : st.type}, not a file` };
      if (st.size > this.maxReadBytes) return { error: `'${filePath}' is ${st.size} bytes, more than the ${this.maxReadBytes} read whole at most` };
      const data = await this.client.files.read(this.key, a.path);
      const media = mediaType(filePath);
      const file: FileData = {
        content: media ? bytesOf(data) : data.toString("utf8"),
        mimeType: media ?? "text/plain",
        created_at: st.mtime,
        modified_at: st.mtime,
      };
      return { data: file };
    } catch (e) {
      return { error: this.failure(e, filePath) };
    }
  }

  /** A whole file: media in base64 (as deepagents' write_file gives them), text as it is. */
  override async write(filePath: string, content: string): Promise<WriteResult> {
    const a = this.api(filePath);
    if ("error" in a) return a;
    const bytes = mediaType(filePath) ? Buffer.from(content, "base64") : Buffer.from(content, "utf8");
    try {
      await this.client.files.write(this.key, a.path, bytes, { parents: true });
      return { path: filePath, filesUpdate: null };
    } catch (e) {
      return { error: `Failed to write to '${filePath}': ${this.failure(e, filePath)}` };
    }
  }

  override async edit(filePath: string, oldString: string, newString: string, replaceAll = false): Promise<EditResult> {
    const a = this.api(filePath);
    if ("error" in a) return a;
    let text: string;
    try {
      const data = await this.client.files.read(this.key, a.path, { length: this.maxReadBytes + 1 });
      if (data.byteLength > this.maxReadBytes)
        return { error: `'${filePath}' is larger than ${this.maxReadBytes} bytes: edit it with execute (e.g. sed -i)` };
      if (data.includes(0)) return { error: `'${filePath}' is a binary file: edit_file changes text; use write_file for the whole file` };
      text = data.toString("utf8");
    } catch (e) {
      return { error: this.failure(e, filePath) };
    }
    let next: string, count: number;
    if (oldString === "") {
      if (text !== "") return { error: `old_string is empty but '${filePath}' is not: give the exact text to replace` };
      next = newString;
      count = newString === "" ? 0 : 1;
    } else {
      count = text.split(oldString).length - 1;
      if (count === 0)
        return { error: `String not found in file '${filePath}': read it again and copy the exact text, indentation included` };
      if (count > 1 && !replaceAll)
        return { error: `The string occurs ${count} times in '${filePath}': give more surrounding text so it occurs once, or set replace_all to true` };
      next = replaceAll ? text.split(oldString).join(newString) : text.replace(oldString, () => newString);
    }
    if (next === text) return { path: filePath, filesUpdate: null, occurrences: count };
    try {
      await this.client.files.write(this.key, a.path, Buffer.from(next, "utf8"));
      return { path: filePath, filesUpdate: null, occurrences: count };
    } catch (e) {
      return { error: `Failed to write edited file '${filePath}': ${this.failure(e, filePath)}` };
    }
  }

  /** Literal text (deepagents' grep is not a regular expression), in text files only. */
  override async grep(pattern: string, path: string | null = "/", glob: string | null = null, maxCount: number | null = null): Promise<GrepResult> {
    const a = this.api(path || "/");
    if ("error" in a) return a;
    if (pattern === "") return { error: "the pattern is empty: give the text to search for" };
    const include = glob ? (glob.includes("/") ? glob.replace(/^\/+/, "") : `**/${glob}`) : undefined;
    try {
      const r = await this.client.files.grep(this.key, pattern, {
        path: a.path,
        include,
        fixed: true,
        max: Math.max(1, Math.min(maxCount ?? this.maxResults, this.maxResults)),
      });
      return {
        matches: r.matches.map((m) => ({ path: this.paths.toFramework(m.path), line: m.line, text: m.text })),
        truncated: r.truncated,
      };
    } catch (e) {
      return { error: this.failure(e, path || "/") };
    }
  }

  /** Paths matched relative to path (or to / for a pattern that starts with /), answered absolute. */
  override async glob(pattern: string, path = "/"): Promise<GlobResult> {
    let base = path || "/";
    let rel = pattern;
    if (pattern.startsWith("/")) {
      base = "/";
      rel = pattern.replace(/^\/+/, "");
    }
    const a = this.api(base);
    if ("error" in a) return a;
    if (rel === "") return { error: "the pattern is empty: give one such as **/*.py" };
    try {
      const l = await this.client.files.glob(this.key, rel, { path: a.path, max: this.maxResults });
      return { files: l.entries.map((e) => infoOf(this.paths, e)), truncated: l.truncated };
    } catch (e) {
      return { error: this.failure(e, base) };
    }
  }

  override async delete(filePath: string): Promise<DeleteResult> {
    const a = this.api(filePath);
    if ("error" in a) return a;
    if (a.path === "." || a.path === this.paths.toApi("/")) return { error: `'${filePath}' is the root: delete what is in it instead` };
    try {
      await this.client.files.delete(this.key, a.path, { recursive: true });
      return { path: filePath, filesUpdate: null };
    } catch (e) {
      return { error: `Error: ${this.failure(e, filePath)}` };
    }
  }

  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    const out: FileUploadResponse[] = [];
    for (const [path, content] of files) {
      const p = this.paths.toApi(path);
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
      const p = this.paths.toApi(path);
      if (p === null) {
        out.push({ path, content: null, error: "invalid_path" });
        continue;
      }
      try {
        out.push({ path, content: bytesOf(await this.client.files.read(this.key, p)), error: null });
      } catch (e) {
        out.push({ path, content: null, error: fileErrorCode(e) });
      }
    }
    return out;
  }
}
