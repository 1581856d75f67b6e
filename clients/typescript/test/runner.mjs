// Starts a `sandman worker start` of its own on a private unix socket for
// a test file, and stops it (SIGTERM) at the end; until() waits for what a
// test needs of it.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { SandmanClient } from "../dist/index.js";

// tcp: listen on a free loopback port (clients that need a URL: MCP);
// image: the sandboxes' image (default sandman/minimal:latest); config: the
// text of a configuration file it starts with (--config).
export async function startRunner(extraArgs = [], { tcp = false, image = "sandman/minimal:latest", config = null } = {}) {
  const bin = process.env.SANDMAN_BIN;
  if (!bin) throw new Error("SANDMAN_BIN must name the sandman binary");
  const dir = mkdtempSync(join(tmpdir(), "sandman-ts-"));
  const token = randomBytes(24).toString("hex");
  writeFileSync(join(dir, "token"), token, { mode: 0o600 });
  const sock = join(dir, "sandman.sock");
  const logPath = join(dir, "runner.log");
  const log = openSync(logPath, "w");
  const global = [];
  if (config !== null) {
    writeFileSync(join(dir, "sandman.yaml"), config);
    global.push("--config", join(dir, "sandman.yaml"));
  }
  const args = [
    ...global, "worker", "start", "--listen", tcp ? "tcp://127.0.0.1:0" : `unix:${sock}`, "--token-file", join(dir, "token"),
    "--pool", "ts", "--sandbox-mode", "per_run", "--sandbox-backend", "docker",
    "--sandbox-image", image, "--sandbox-network", "none",
    "--sandbox-cpu", "1", "--sandbox-mem", "512m", "--sandbox-pids", "128", "--sandbox-disk", "512m",
    "--project-environment", "development", ...extraArgs,
  ];
  const proc = spawn(bin, args, { stdio: ["ignore", log, log] });
  const readLog = () => readFileSync(logPath, "utf8");
  let address = `unix:${sock}`;
  for (let i = 0; tcp; i++) {
    const m = /runner listening on (tcp:\/\/127\.0\.0\.1:\d+)/.exec(readLog());
    if (m) {
      address = m[1];
      break;
    }
    if (proc.exitCode !== null || i > 600) throw new Error(`the runner did not start: ${readLog()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const client = new SandmanClient({ address, token });
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) throw new Error(`the runner exited: ${readLog()}`);
    try {
      await client.health();
      break;
    } catch {
      if (i > 300) throw new Error(`the runner did not answer: ${readLog()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return {
    client,
    token,
    address,
    url: address.startsWith("tcp://") ? `http://${address.slice(6)}` : null,
    dir,
    readLog,
    async stop() {
      if (proc.exitCode === null) {
        const done = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        await done;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** fn()'s first truthy answer, polled every 200 ms (bounded: an error naming what after ms). */
export async function until(what, fn, ms = 60_000) {
  const end = Date.now() + ms;
  for (;;) {
    const r = await fn();
    if (r) return r;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}
