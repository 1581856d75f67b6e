// A typed client for sandman's runner (`sandman worker start`), with Node's
// standard library only at run time. See docs/clients.md.
//
//   import { SandmanClient } from "sandman-client";
//   const runner = new SandmanClient({ address: "unix:/run/user/1000/sandman/sandman.sock", token });
//   const r = await runner.execute({ tool: "shell", command: "make test", run_id: "run-1" });
//   for await (const ev of runner.executeStream({ command: "make", run_id: "run-1" })) ...
//   await runner.files.write({ run_id: "run-1" }, "src/a.c", "int main;");
import { createHmac } from "node:crypto";
import { defaultAddress, query, readAll, Transport } from "./transport.js";
export * from "./types.js";
export { SandmanError, defaultAddress, parseAddress } from "./transport.js";
export const WORKER_TOKEN_PREFIX = "sandman-worker-token-v1";
/** hex(HMAC-SHA256(control token, "sandman-worker-token-v1" NUL worker_key)), as `sandman token derive`. */
export function deriveWorkerToken(controlToken, workerKey) {
    return createHmac("sha256", controlToken).update(`${WORKER_TOKEN_PREFIX}\0${workerKey}`).digest("hex");
}
function executeBody(req) {
    const { stdin, ...rest } = req;
    const body = { ...rest };
    if (stdin !== undefined)
        body.stdin_b64 = Buffer.from(stdin).toString("base64");
    return body;
}
export class SandmanClient {
    address;
    token;
    files;
    t;
    constructor(opts = {}) {
        this.address = opts.address ?? process.env.SANDMAN_URL ?? defaultAddress();
        this.token = opts.token ?? process.env.SANDMAN_TOKEN;
        this.t = new Transport(this.address, this.token, opts.timeoutMs ?? 600_000);
        this.files = new Files(this.t);
    }
    /** A client holding a worker's derived token (it serves that worker key only). */
    static forWorker(controlToken, workerKey, opts = {}) {
        return new SandmanClient({ ...opts, token: deriveWorkerToken(controlToken, workerKey) });
    }
    health(opts = {}) {
        return this.t.json({ method: "GET", path: "/healthz", ...opts });
    }
    /** Runs one tool call and waits for its result. A tool that ran and failed is `ok: false`, not an error. */
    execute(req, opts = {}) {
        return this.t.json({
            method: "POST",
            path: "/v1/execute",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify(executeBody(req)),
            ...opts,
        });
    }
    /**
     * Runs one tool call and yields its output as it arrives, then the result
     * (NDJSON events). Breaking out of the loop, or aborting `signal`, closes
     * the connection, and the runner cancels the call.
     */
    async *executeStream(req, opts = {}) {
        const res = await this.t.open({
            method: "POST",
            path: "/v1/execute",
            headers: { "Content-Type": "application/json", Accept: "application/x-ndjson" },
            body: JSON.stringify({ ...executeBody(req), stream: true }),
            timeoutMs: 0,
            signal: opts.signal,
        });
        await this.t.check(res);
        let rest = "";
        try {
            for await (const chunk of res.body) {
                rest += chunk.toString("utf8");
                let nl;
                while ((nl = rest.indexOf("\n")) >= 0) {
                    const line = rest.slice(0, nl).trim();
                    rest = rest.slice(nl + 1);
                    if (line)
                        yield JSON.parse(line);
                }
            }
            if (rest.trim())
                yield JSON.parse(rest);
        }
        finally {
            res.body.destroy();
        }
    }
    createLease(req, opts = {}) {
        return this.t.json({
            method: "POST",
            path: "/v1/leases",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify(req),
            ...opts,
        });
    }
    /** State and output so far of a call sent to the background. */
    handle(id, opts = {}) {
        return this.t.json({ method: "GET", path: `/v1/handles/${encodeURIComponent(id)}`, ...opts });
    }
    killHandle(id, opts = {}) {
        return this.t.json({ method: "DELETE", path: `/v1/handles/${encodeURIComponent(id)}`, ...opts });
    }
    /** The runner's sandboxes (control token only). */
    sandboxes(opts = {}) {
        return this.t.json({ method: "GET", path: "/v1/sandboxes", ...opts });
    }
    reap(body, opts = {}) {
        return this.t.json({
            method: "POST",
            path: "/v1/sandboxes/reap",
            headers: { "Content-Type": "application/json" },
            body: JSON.stringify(body),
            ...opts,
        });
    }
    metrics(opts = {}) {
        return this.t.open({ method: "GET", path: "/metrics", ...opts }).then(async (res) => {
            await this.t.check(res);
            return (await readAll(res.body)).toString("utf8");
        });
    }
}
/** The files of a keyed sandbox (per_run or per_worker): routes under /v1/files. */
export class Files {
    t;
    constructor(t) {
        this.t = t;
    }
    path(route, key, extra) {
        return `/v1/files/${route}${query({ ...key, ...extra })}`;
    }
    /** The whole file (or offset/length of it) in memory. */
    async read(key, path, opts = {}) {
        return readAll(await this.readStream(key, path, opts));
    }
    async readText(key, path, opts = {}) {
        return (await this.read(key, path, opts)).toString("utf8");
    }
    /** The file as a stream (never held whole in memory). */
    async readStream(key, path, opts = {}) {
        const res = await this.t.open({
            method: "GET",
            path: this.path("content", key, { path, offset: opts.offset, length: opts.length }),
            signal: opts.signal,
            timeoutMs: opts.timeoutMs,
        });
        await this.t.check(res);
        return res.body;
    }
    /** Writes a whole file: appears whole or not at all. */
    write(key, path, data, opts = {}) {
        return this.t.json({
            method: "PUT",
            path: this.path("content", key, {
                path,
                perm: opts.mode === undefined ? undefined : opts.mode.toString(8).padStart(4, "0"),
                parents: opts.parents ?? true,
                exclusive: opts.exclusive || undefined,
            }),
            headers: { "Content-Type": "application/octet-stream" },
            body: data ?? new Uint8Array(0),
            signal: opts.signal,
            timeoutMs: opts.timeoutMs,
        });
    }
    delete(key, path, opts = {}) {
        return this.t.json({
            method: "DELETE",
            path: this.path("content", key, { path, recursive: opts.recursive || undefined }),
            signal: opts.signal,
            timeoutMs: opts.timeoutMs,
        });
    }
    mkdir(key, path, opts = {}) {
        return this.t.json({
            method: "POST",
            path: this.path("mkdir", key, {
                path,
                perm: opts.mode === undefined ? undefined : opts.mode.toString(8).padStart(4, "0"),
                parents: opts.parents ?? true,
            }),
            signal: opts.signal,
            timeoutMs: opts.timeoutMs,
        });
    }
    /** A link is described, never followed. */
    stat(key, path, opts = {}) {
        return this.t.json({ method: "GET", path: this.path("stat", key, { path }), ...opts });
    }
    /** depth 1: the folder's own entries; 0: every level. */
    list(key, path = ".", opts = {}) {
        return this.t.json({
            method: "GET",
            path: this.path("list", key, { path, depth: opts.depth, max: opts.max }),
            signal: opts.signal,
            timeoutMs: opts.timeoutMs,
        });
    }
    glob(key, pattern, opts = {}) {
        return this.t.json({
            method: "GET",
            path: this.path("glob", key, { pattern, path: opts.path, max: opts.max }),
            signal: opts.signal,
            timeoutMs: opts.timeoutMs,
        });
    }
    grep(key, pattern, opts = {}) {
        return this.t.json({
            method: "GET",
            path: this.path("grep", key, {
                pattern,
                path: opts.path,
                include: opts.include,
                ignore_case: opts.ignoreCase || undefined,
                fixed: opts.fixed || undefined,
                max: opts.max,
            }),
            signal: opts.signal,
            timeoutMs: opts.timeoutMs,
        });
    }
    /** Extracts a tar stream under folder `path`: files and folders only. */
    uploadTar(key, path, tar, opts = {}) {
        return this.t.json({
            method: "PUT",
            path: this.path("archive", key, { path }),
            headers: { "Content-Type": "application/x-tar" },
            body: tar,
            ...opts,
        });
    }
    /** A tar stream of paths (folders with what they hold). */
    async downloadTar(key, paths, opts = {}) {
        const res = await this.t.open({ method: "GET", path: this.path("archive", key, { path: paths }), ...opts });
        await this.t.check(res);
        return res.body;
    }
}
export { readAll };
//# sourceMappingURL=index.js.map