// Starts a `sandman worker start` of its own on a private unix socket for
// a test file, and stops it (SIGTERM) at the end.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { SandmanClient } from "../dist/index.js";

export async function startRunner(extraArgs = []) {
  const bin = process.env.SANDMAN_BIN;
  if (!bin) throw new Error("SANDMAN_BIN must name the sandman binary");
  const dir = mkdtempSync(join(tmpdir(), "sandman-ts-"));
  const token = randomBytes(24).toString("hex");
  writeFileSync(join(dir, "token"), token, { mode: 0o600 });
  const sock = join(dir, "sandman.sock");
  const logPath = join(dir, "runner.log");
  const log = openSync(logPath, "w");
  const args = [
    "worker", "start", "--listen", `unix:${sock}`, "--token-file", join(dir, "token"),
    "--pool", "ts", "--sandbox-mode", "per_run", "--sandbox-backend", "docker",
    "--sandbox-image", "sandman/minimal:latest", "--sandbox-network", "none",
    "--sandbox-cpu", "1", "--sandbox-mem", "512m", "--sandbox-pids", "128", "--sandbox-disk", "512m",
    "--project-environment", "development", ...extraArgs,
  ];
  const proc = spawn(bin, args, { stdio: ["ignore", log, log] });
  const client = new SandmanClient({ address: `unix:${sock}`, token });
  const readLog = () => readFileSync(logPath, "utf8");
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
    address: `unix:${sock}`,
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
