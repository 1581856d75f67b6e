#!/usr/bin/python3
"""sandman's side-by-side benchmark (run it through scripts/bench.sh).

Runs every scenario in one run, each peer against the same engine, image
and container spec, and writes bench/results/latest.{md,json,png}:

  S1  a call in a reused sandbox (`true`, output captured): sandman over its
      HTTP API and through the library, `docker exec`, the Python SDK's
      exec_run, the engine's floor (bench/floor).
  S2  a call in a fresh container: sandman per_tool with the warm pool and
      without it (library, and the pool through the HTTP API), `docker run
      --rm`, the SDK's containers.run(remove=True), the floor.
  S3  copy-in of a 10,000-file / 100 MB workspace: sandman vs `docker cp`.
  S4  the same workspace, unchanged, on the next call.
  S5  throughput: 8 concurrent clients making S1 calls over the HTTP API vs
      the floor with 8 concurrent clients.
  S6  the runner's resident memory with 100 live per_run sandboxes.
  S7  reaping 200 sandboxes: `sandman sandbox reap` vs `docker rm -f` (and
      `docker volume rm`) vs the floor removing them in parallel.

Peers run in alternating rounds so that drift of a shared machine hits all
of them alike. Every figure and ratio comes from this one run.
"""
import argparse
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PY = "/usr/bin/python3"
# What a runner asks the engine on its own schedule (health every 10 s, idle
# reap every 60 s), not for a call.
HOUSEKEEPING = {"GET /_ping", "GET /version", "GET /containers/json", "GET /volumes"}
IMAGE = "sandman/minimal:latest"


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def pct(samples, q):
    s = sorted(samples)
    if not s:
        return float("nan")
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def stats(samples):
    return {
        "n": len(samples),
        "p50": pct(samples, 0.5),
        "p95": pct(samples, 0.95),
        "mean": statistics.fmean(samples) if samples else float("nan"),
        "min": min(samples) if samples else float("nan"),
    }


def parse_client(out):
    """The C clients' output: 'sample MS' lines and 'key value' totals."""
    res = {"samples": [], "s3": [], "s4": []}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        k, v = parts
        if k == "sample":
            res["samples"].append(float(v))
        elif k in ("s3", "s4"):
            res[k].append(float(v))
        else:
            try:
                res[k] = float(v)
            except ValueError:
                pass
    return res


class Bench:
    def __init__(self, args):
        self.args = args
        self.root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
        self.build = os.path.abspath(args.build)
        self.bin = os.path.join(self.build, "bench")
        self.sandman = os.path.join(self.build, "sandman")
        self.instance = args.instance
        self.tmp = tempfile.mkdtemp(prefix="sandman-bench-")
        self.env = dict(os.environ)
        self.env["SANDMAN_INSTANCE"] = self.instance
        self.env["SANDMAN_STATE_DIR"] = os.path.join(self.tmp, "state")
        self.env.pop("SANDMAN_CONFIG", None)
        self.env["XDG_CONFIG_HOME"] = os.path.join(self.tmp, "xdg")  # no user config file
        self.sock = os.path.join(self.tmp, "runner.sock")
        self.token_file = os.path.join(self.tmp, "token")
        self.worker = None
        self.worker_log = os.path.join(self.tmp, "runner.log")
        self.engine_sock = (os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock")
        if not self.engine_sock.startswith("unix://"):
            raise SystemExit("bench: the floor client needs a unix:// engine (DOCKER_HOST)")
        self.engine_sock = self.engine_sock[len("unix://"):]
        self.results = {}
        self.peer_containers = []
        self.peer_volumes = []
        self.counts = {}

    # ---- processes ----
    def run(self, argv, check=True, timeout=3600, stdin=None):
        p = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout,
                           input=stdin)
        if check and p.returncode != 0:
            raise RuntimeError("%s failed (%d): %s" % (" ".join(argv[:3]), p.returncode,
                                                        p.stderr.strip()[-2000:]))
        return p

    def client(self, argv, **kw):
        return parse_client(self.run(argv, **kw).stdout)

    def timed_cli(self, argv, calls):
        samples = []
        for _ in range(calls):
            t0 = time.perf_counter()
            p = subprocess.run(argv, env=self.env, capture_output=True)
            samples.append((time.perf_counter() - t0) * 1000.0)
            if p.returncode != 0:
                raise RuntimeError("%s failed: %s" % (" ".join(argv), p.stderr.decode()[-500:]))
        return samples

    def start_worker(self):
        with open(self.token_file, "w") as f:
            f.write(secrets.token_hex(24) + "\n")
        os.chmod(self.token_file, 0o600)
        # SANDMAN_BENCH_LOG_LEVEL=debug and SANDMAN_BENCH_RUNNER_LOG=FILE keep
        # the runner's log for a trace (where a call's time went).
        argv = [self.sandman, "--log-level", os.environ.get("SANDMAN_BENCH_LOG_LEVEL", "info"),
                "worker", "start",
                "--sandbox-mode", "per_run", "--sandbox-image", IMAGE,
                "--project-environment", "development", "--listen", "unix:" + self.sock,
                "--token-file", self.token_file]
        logf = open(self.worker_log, "w")
        self.worker = subprocess.Popen(argv, env=self.env, stdout=logf, stderr=subprocess.STDOUT)
        for _ in range(200):
            if os.path.exists(self.sock):
                try:
                    s = socket.socket(socket.AF_UNIX)
                    s.connect(self.sock)
                    s.close()
                    return
                except OSError:
                    pass
            if self.worker.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("the runner did not start: " + open(self.worker_log).read()[-2000:])

    def stop_worker(self):
        if self.worker and self.worker.poll() is None:
            self.worker.send_signal(signal.SIGTERM)
            try:
                self.worker.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.worker.kill()
                self.worker.wait()
        if self.worker and os.environ.get("SANDMAN_BENCH_RUNNER_LOG"):
            shutil.copyfile(self.worker_log, os.environ["SANDMAN_BENCH_RUNNER_LOG"])
        self.worker = None

    def vmrss_kb(self, pid):
        rss = hwm = 0
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
        return rss, hwm

    def http(self, calls, clients, body, pause_ms=None):
        argv = [os.path.join(self.bin, "smhttp"), self.sock, self.token_file, str(calls),
                str(clients), body]
        if pause_ms:
            argv.append(pause_ms)
        return self.client(argv)

    def s2_runner(self, paused, bursts, burst_len, burst_pause_s):
        """S2 through the runner as an agent sees it: `paused` calls with
        1-5 s between them (the pool never waited for), then `bursts` bursts
        of `burst_len` calls back to back with burst_pause_s between bursts
        (the pool sizes itself from the calls it sees). (paused, burst)
        samples."""
        body = '{"argv": ["true"], "mode": "per_tool"}'
        self.http(1, 1, body)  # the pool starts on a configuration's first call
        time.sleep(5.0)
        spaced = self.http(paused, 1, body, "1000-5000")["samples"]
        burst = []
        for _ in range(bursts):
            time.sleep(burst_pause_s)
            burst += self.http(burst_len, 1, body)["samples"]
        return spaced, burst

    def sandboxes(self):
        p = self.run([self.sandman, "sandbox", "list", "--all", "--json"])
        return json.loads(p.stdout or "[]")

    def container_of_run(self, run_id):
        for sb in self.sandboxes():
            if sb.get("run_id") == run_id:
                return sb["id"]
        raise RuntimeError("no sandbox for run " + run_id)

    def engine_objects(self):
        p = self.run(["docker", "ps", "-aq", "--filter", "label=io.sandman.instance=" + self.instance])
        return p.stdout.split()

    # ---- result keeping ----
    def add(self, scen, name, samples, kind="sandman", note="", unit="ms", extra=None):
        row = {"name": name, "kind": kind, "unit": unit, "note": note}
        row.update(stats(samples))
        row["samples"] = [round(x, 3) for x in samples]
        if extra:
            row.update(extra)
        self.results.setdefault(scen, []).append(row)
        log("%s %-34s n=%-3d p50 %9.2f %s  p95 %9.2f" % (scen, name, row["n"], row["p50"], unit,
                                                          row["p95"]))
        return row

    def add_value(self, scen, name, value, unit, kind="sandman", note="", extra=None):
        row = {"name": name, "kind": kind, "unit": unit, "note": note, "n": 1, "p50": value,
               "p95": value, "mean": value, "min": value}
        if extra:
            row.update(extra)
        self.results.setdefault(scen, []).append(row)
        log("%s %-34s %.2f %s" % (scen, name, value, unit))
        return row

    # ---- scenarios ----
    def s1(self, n, rounds):
        log("S1: a call in a reused sandbox (%d calls per peer)" % n)
        # The sandbox every S1 peer uses: made by sandman (per_run, run s1).
        self.http(1, 1, '{"argv": ["true"], "run_id": "s1"}')
        cid = self.container_of_run("s1")
        per = max(1, n // rounds)
        acc = {k: [] for k in ("http", "lib", "docker", "sdk", "floor")}
        extra = {}
        for r in range(rounds):
            acc["floor"] += self.client([os.path.join(self.bin, "floor"), "exec", self.engine_sock,
                                         cid, str(per)])["samples"]
            acc["lib"] += self.client([os.path.join(self.bin, "smbench"), "exec", str(per),
                                       "s1"])["samples"]
            res = self.http(per, 1, '{"argv": ["true"], "run_id": "s1"}')
            acc["http"] += res["samples"]
            extra["connects"] = extra.get("connects", 0) + res.get("connects", 0)
            acc["docker"] += self.timed_cli(["docker", "exec", cid, "true"], per)
            acc["sdk"] += self.client([PY, os.path.join(self.root, "bench/peers/sdk.py"), "exec",
                                       cid, str(per)])["samples"]
        self.add("S1", "sandman HTTP API", acc["http"],
                 note="one kept-alive connection; %d connect(s)" % extra["connects"])
        self.add("S1", "sandman library (sm_run)", acc["lib"])
        self.add("S1", "docker exec", acc["docker"], kind="peer",
                 note="includes starting the docker CLI")
        self.add("S1", "Python SDK exec_run", acc["sdk"], kind="peer")
        self.add("S1", "floor (raw API)", acc["floor"], kind="floor",
                 note="exec create + start + inspect")
        return cid

    def s2(self, n, rounds):
        log("S2: a call in a fresh container (%d calls per peer)" % n)
        per = max(1, n // rounds)
        acc = {k: [] for k in ("pool", "pool_b2b", "nopool", "http_pool", "docker", "sdk", "floor")}
        for r in range(rounds):
            acc["pool"] += self.client([os.path.join(self.bin, "smbench"), "fresh", str(per), "2",
                                        "1"])["samples"]
            acc["nopool"] += self.client([os.path.join(self.bin, "smbench"), "fresh", str(per), "0",
                                          "1"])["samples"]
            acc["docker"] += self.timed_cli(["docker", "run", "--rm", "--network", "none", IMAGE,
                                             "true"], per)
            acc["sdk"] += self.client([PY, os.path.join(self.root, "bench/peers/sdk.py"), "run",
                                       IMAGE, str(per)])["samples"]
            acc["floor"] += self.client([os.path.join(self.bin, "floor"), "run", self.engine_sock,
                                         IMAGE, str(per)])["samples"]
        # Calls back to back: faster than the pool refills (what a burst sees).
        acc["pool_b2b"] = self.client([os.path.join(self.bin, "smbench"), "fresh", str(n), "2",
                                       "0"])["samples"]
        # The runner's pool, through the HTTP API: as with the library's
        # settle, each call starts once the pool is full again and the last
        # container is gone (an agent thinks between tool calls).
        self.http(1, 1, '{"argv": ["true"], "mode": "per_tool"}')  # starts the pool
        for i in range(n):
            self.wait_runner_pool(2)
            acc["http_pool"] += self.http(1, 1, '{"argv": ["true"], "mode": "per_tool"}')["samples"]
        # As an agent sees it: 1-5 s between calls, never waiting for the
        # pool; then bursts of calls back to back, a few seconds apart.
        spaced, bursts = self.s2_runner(max(6, n // 2), 3, max(4, n // 3), 6.0)
        self.add("S2", "sandman per_tool, HTTP API, 1-5 s between calls", spaced,
                 note="one client, pauses 1-5 s (not timed); the pool is not waited for")
        self.add("S2", "sandman per_tool, HTTP API, bursts", bursts,
                 note="3 bursts of %d calls back to back, 6 s apart" % max(4, n // 3))
        self.add("S2", "sandman per_tool, warm pool", acc["pool"],
                 note="library; pool of 2, refilled between calls")
        self.add("S2", "sandman per_tool, pool, HTTP API", acc["http_pool"],
                 note="the runner's pool, full before each call")
        self.add("S2", "sandman per_tool, pool, back to back", acc["pool_b2b"],
                 note="library, pool of 2, no pause: the pool runs dry")
        self.add("S2", "sandman per_tool, no pool", acc["nopool"],
                 note="create + start + exec; removal in the background")
        self.add("S2", "docker run --rm", acc["docker"], kind="peer", note="--network none")
        self.add("S2", "Python SDK containers.run", acc["sdk"], kind="peer",
                 note="remove=True, network none")
        self.add("S2", "floor (raw API)", acc["floor"], kind="floor",
                 note="create + start + wait + remove")

    def runner_metric(self, name):
        """A value from the runner's /metrics (None when absent)."""
        with open(self.token_file) as f:
            token = f.read().strip()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(self.sock)
            s.sendall(("GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s"
                       "\r\nConnection: close\r\n\r\n" % token).encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        finally:
            s.close()
        for line in data.decode(errors="replace").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == name:
                return float(parts[1])
        return None

    def wait_runner_pool(self, size, timeout=60.0):
        """Until the runner has at least `size` per_tool containers, all
        running (its pool full, no removal or creation under way)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            out = self.run(["docker", "ps", "-a", "--filter",
                            "label=io.sandman.instance=" + self.instance, "--filter",
                            "label=io.sandman.mode=per_tool", "--format",
                            "{{.Names}} {{.State}}"]).stdout
            states = [l.split()[-1] for l in out.splitlines() if l.strip()]
            # At least `size`: a burst just before may have sized the pool
            # to its length (pool_demand.c) for the next 60 s.
            if (len(states) >= size and all(x == "running" for x in states)
                    and self.runner_metric("sandman_agent_sessions_preparing") == 0):
                return
            time.sleep(0.05)
        raise RuntimeError("the runner's pool did not fill: %s\nrunner log:\n%s" % (
            out.strip(), open(self.worker_log).read()[-3000:]))

    def make_workspace(self):
        src = self.args.workspace
        if src:
            return os.path.abspath(src)
        ws = os.path.join(self.tmp, "workspace")
        files, per_file = self.args.ws_files, self.args.ws_file_bytes
        log("S3: generating a workspace of %d files x %d bytes (bench/workspace/ws_bench gen)"
            % (files, per_file))
        self.run([os.path.join(self.bin, "ws_bench"), "gen", ws, str(files), str(per_file)])
        # An existing workspace is not freshly written: older than any racy-mtime window.
        self.run(["find", ws, "-exec", "touch", "-h", "-d", "1 hour ago", "{}", "+"])
        return ws

    def ws_box(self, tag):
        """A container like sandman's (read-only root, user 1000, a tmpfs volume
        at /workspace, sandman's /.sandman for the copy in's unpacker), as
        bench/workspace/run.sh makes them."""
        vol = "sandman-bench-%s-%s" % (self.instance, tag)
        self.run(["docker", "volume", "create", "--driver", "local", "--opt", "type=tmpfs",
                  "--opt", "device=tmpfs", "--opt", "o=size=1g,uid=1000,gid=1000,mode=0755",
                  "--label", "io.sandman.bench=" + self.instance, vol])
        self.peer_volumes.append(vol)
        cid = self.run(["docker", "run", "-d", "--network", "none", "--read-only", "--user",
                        "1000:1000", "--label", "io.sandman.bench=" + self.instance, "--mount",
                        "type=volume,source=%s,target=/workspace" % vol, "--tmpfs",
                        "/.sandman:rw,nosuid,nodev,exec,size=8m,mode=0755", IMAGE, "sleep",
                        "3600"]).stdout.strip()
        self.peer_containers.append(cid)
        return cid, vol

    def drop_box(self, cid, vol):
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
        subprocess.run(["docker", "volume", "rm", "-f", vol], capture_output=True)

    def s3(self, n):
        ws = self.make_workspace()
        log("S3/S4: copy-in (%d calls per peer)" % n)
        # Whole calls through the library: a fresh per_run sandbox, a call
        # with the workspace (S3), the same call again (S4).
        res = self.client([os.path.join(self.bin, "smbench"), "ws", ws, str(n)])
        # The copy alone (bench/workspace/ws_bench sync): into a fresh
        # container, then again over the saved manifest. It touches 10 files
        # at the end: it works on a copy.
        wcopy = os.path.join(self.tmp, "workspace-copy")
        self.run(["cp", "-a", ws, wcopy])
        first, unchanged, cp = [], [], []
        for i in range(n):
            cid, vol = self.ws_box("ws%d" % i)
            out = self.run([os.path.join(self.bin, "ws_bench"), "sync", wcopy, cid,
                            os.path.join(self.tmp, "ws.manifest")]).stdout
            for line in out.splitlines():
                f = line.split()
                if f and f[0] == "in_first":
                    first.append(float(f[1]) * 1000.0)
                elif f and f[0] == "in_unchanged":
                    unchanged.append(float(f[1]) * 1000.0)
            self.drop_box(cid, vol)
            # docker cp into the same kind of container.
            cid, vol = self.ws_box("cp%d" % i)
            t0 = time.perf_counter()
            self.run(["docker", "cp", ws + "/.", cid + ":/workspace"])
            cp.append((time.perf_counter() - t0) * 1000.0)
            self.drop_box(cid, vol)
        self.add("S3", "sandman copy-in (sync)", first,
                 note="sm_workspace_sync_in, first call (bench/workspace/ws_bench)")
        self.add("S3", "sandman call with copy-in", res["s3"],
                 note="sm_run --sync in on a fresh sandbox: copy-in + exec")
        self.add("S3", "docker cp", cp, kind="peer",
                 note="into a container like sandman's (tmpfs volume)")
        self.add("S4", "sandman copy-in, unchanged (sync)", unchanged,
                 note="the next sync over the saved manifest: nothing sent")
        self.add("S4", "sandman call, unchanged workspace", res["s4"],
                 note="the next sm_run: scan + nothing sent + exec")

    def s5(self, n, cid, rounds):
        clients = 8
        per = max(1, n // rounds)
        log("S5: throughput, %d clients x %d calls, %d rounds" % (clients, per, rounds))
        acc = {"http": {"calls": 0, "wall": 0.0, "samples": [], "rates": []},
               "floor": {"calls": 0, "wall": 0.0, "samples": [], "rates": []}}
        for _ in range(rounds):
            for name, res in (
                ("http", lambda: self.http(per, clients, '{"argv": ["true"], "run_id": "s1"}')),
                ("floor", lambda: self.client([os.path.join(self.bin, "floor"), "exec",
                                               self.engine_sock, cid, str(per), str(clients)])),
            ):
                r = res()
                a = acc[name]
                a["calls"] += r["calls"]
                a["wall"] += r["wall"]
                a["samples"] += r["samples"]
                a["rates"].append(r["calls"] / (r["wall"] / 1000.0))
        for name, label, kind in (("http", "sandman HTTP API, 8 clients", "sandman"),
                                  ("floor", "floor, 8 clients", "floor")):
            a = acc[name]
            self.add_value("S5", label, a["calls"] / (a["wall"] / 1000.0), "calls/s", kind=kind,
                           extra={"p50_latency_ms": pct(a["samples"], 0.5),
                                  "p95_latency_ms": pct(a["samples"], 0.95),
                                  "calls": a["calls"],
                                  "round_rates": [round(x, 2) for x in a["rates"]]})

    def s6(self, count):
        log("S6: the runner's memory with %d live per_run sandboxes" % count)
        rss0, _ = self.vmrss_kb(self.worker.pid)
        self.http(max(1, count // 4), 4, '{"argv": ["true"], "run_id": "s6-{i}"}')
        live = sum(1 for sb in self.sandboxes() if (sb.get("run_id") or "").startswith("s6-"))
        rss, hwm = self.vmrss_kb(self.worker.pid)
        self.add_value("S6", "runner VmRSS, %d per_run sandboxes" % live, rss / 1024.0, "MB",
                       extra={"vmhwm_mb": hwm / 1024.0, "idle_rss_mb": rss0 / 1024.0,
                              "live": live})

    def s7(self, count):
        log("S7: removing %d sandboxes three ways" % count)
        threads = "4"
        # Nothing else of this instance may be left: each way removes exactly `count`.
        self.run([self.sandman, "sandbox", "reap", "--older-than", "0s", "--force"])

        def make(prefix):
            self.run([os.path.join(self.bin, "smbench"), "mk", prefix, str(count), threads])
            ids = self.engine_objects()
            if len(ids) != count:
                raise RuntimeError("expected %d sandboxes, found %d" % (count, len(ids)))

        make("s7a")
        t0 = time.perf_counter()
        self.run([self.sandman, "sandbox", "reap", "--older-than", "0s"])
        reap_ms = (time.perf_counter() - t0) * 1000.0
        left = len(self.engine_objects())
        self.add_value("S7", "sandman sandbox reap", reap_ms, "ms",
                       note="%d left" % left, extra={"per_sandbox_ms": reap_ms / count})

        make("s7b")
        lines = self.run(["docker", "ps", "-a", "--filter",
                          "label=io.sandman.instance=" + self.instance, "--format",
                          '{{.ID}} {{.Label "io.sandman.volume"}}']).stdout.split("\n")
        pairs = [l.split() for l in lines if l.strip()]
        t0 = time.perf_counter()
        self.run(["docker", "rm", "-f"] + [p[0] for p in pairs])
        self.run(["docker", "volume", "rm", "-f"] + [p[1] for p in pairs if len(p) > 1])
        cli_ms = (time.perf_counter() - t0) * 1000.0
        self.add_value("S7", "docker rm -f + docker volume rm", cli_ms, "ms", kind="peer",
                       extra={"per_sandbox_ms": cli_ms / count})
        self.run([self.sandman, "sandbox", "reap", "--older-than", "0s", "--force"])

        make("s7c")
        lines = self.run(["docker", "ps", "-a", "--filter",
                          "label=io.sandman.instance=" + self.instance, "--format",
                          '{{.ID}} {{.Label "io.sandman.volume"}}']).stdout
        f = self.client([os.path.join(self.bin, "floor"), "rm", self.engine_sock, "8"], stdin=lines)
        self.add_value("S7", "floor, 8 in parallel", f["wall"], "ms", kind="floor",
                       extra={"per_sandbox_ms": f["wall"] / count})
        self.run([self.sandman, "sandbox", "reap", "--older-than", "0s", "--force"])

    def count_trace(self, trace, calls, background_tids=None, main_tid=None):
        """Engine requests in an strace -f log, split into those on the call's
        path and those of background threads (the pool's, by name; or every
        thread but the main one for the library clients)."""
        reqs, bg, house = {}, {}, {}
        connects = 0
        first_tid = None
        with open(trace) as f:
            for line in f:
                tid = line.split(" ", 1)[0]
                if first_tid is None:
                    first_tid = tid
                if "connect(" in line and self.engine_sock in line:
                    connects += 1
                for verb in ("GET", "POST", "PUT", "DELETE", "HEAD"):
                    mark = '"%s /' % verb
                    if mark not in line:
                        continue
                    path = line.split(mark, 1)[1].split(" ")[0].split("?")[0]
                    if path.startswith("v1/") or path == "healthz":
                        continue  # the runner's own API, not the engine's
                    segs = [seg for seg in path.split("/") if seg]
                    if segs and segs[0].startswith("v1."):
                        segs = segs[1:]
                    norm = []
                    for seg in segs:
                        hexish = len(seg) >= 12 and all(ch in "0123456789abcdef" for ch in seg)
                        norm.append("{id}" if hexish or seg.startswith("sandman-") else seg)
                    key = verb + " /" + "/".join(norm)
                    if key.startswith("GET /images/"):
                        key = "GET /images/{name}/json"
                    if background_tids is not None:
                        is_bg = tid in background_tids
                    else:
                        is_bg = tid != (main_tid or first_tid)
                    d = bg if is_bg else reqs
                    if background_tids is not None and key in HOUSEKEEPING:
                        d = house  # the runner's health check and idle reap
                    d[key] = d.get(key, 0) + 1
        return {"calls": calls, "requests": reqs, "background": bg, "housekeeping": house,
                "connects": connects}

    def thread_names(self, pid):
        names = {}
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                    names[tid] = f.read().strip()
            except OSError:
                pass
        return names

    def request_counts(self):
        """Engine requests per call, counted from the socket writes (strace):
        the library clients from their start, the runner attached while it
        serves the calls (its start-up is not counted)."""
        if not shutil.which("strace"):
            return
        log("counting engine requests per call (strace)")
        calls = 10
        trace = os.path.join(self.tmp, "trace.txt")
        out = {}
        for name, argv in (
            ("S1 library", [os.path.join(self.bin, "smbench"), "exec", str(calls), "s1"]),
            ("S2 library, warm pool", [os.path.join(self.bin, "smbench"), "fresh", str(calls),
                                       "2", "1"]),
            ("S2 library, no pool", [os.path.join(self.bin, "smbench"), "fresh", str(calls), "0",
                                     "1"]),
        ):
            # execve first: the first line names the main (calling) thread.
            p = subprocess.Popen(["strace", "-f", "-qq", "-e",
                                  "trace=execve,write,sendto,sendmsg,connect",
                                  "-s", "160", "-o", trace] + argv, env=self.env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            p.wait()
            out[name] = self.count_trace(trace, calls)
            if name == "S1 library":
                out[name]["note"] = "includes the first call's one lookup and the /_ping"
        for name, body in (("S1 HTTP API", '{"argv": ["true"], "run_id": "s1"}'),
                           ("S2 HTTP API, warm pool", '{"argv": ["true"], "mode": "per_tool"}')):
            pooled = "per_tool" in body
            self.http(1, 1, body)  # warm: the lookup and the pool happen before
            if pooled:
                self.wait_runner_pool(2)
            st = subprocess.Popen(["strace", "-f", "-qq", "-p", str(self.worker.pid), "-e",
                                   "trace=write,sendto,sendmsg,connect", "-s", "160", "-o", trace])
            time.sleep(1.0)
            for _ in range(calls):
                self.http(1, 1, body)
                if pooled:
                    self.wait_runner_pool(2)
            names = self.thread_names(self.worker.pid)
            st.send_signal(signal.SIGINT)
            st.wait()
            bg = {tid for tid, n in names.items() if n.startswith("sandman-pool")}
            out[name] = self.count_trace(trace, calls, background_tids=bg)
        self.counts = out

    # ---- the whole run ----
    def main(self):
        a = self.args
        meta = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "engine": self.run(["docker", "version", "--format", "{{.Server.Version}}"]).stdout.strip(),
            "image": IMAGE,
            "quick": a.quick,
            "calls": a.calls,
            "instance": self.instance,
        }
        with open("/proc/meminfo") as f:
            meta["mem_gb"] = round(int(f.readline().split()[1]) / 1048576.0, 1)
        t0 = time.perf_counter()
        spawn = self.timed_cli(["true"], 20)
        meta["spawn_ms"] = round(pct(spawn, 0.5), 3)
        self.start_worker()
        try:
            cid = self.s1(a.calls, a.rounds)
            self.s2(a.calls, a.rounds)
            if not a.skip_ws:
                self.s3(a.ws_calls)
            self.s5(a.calls, cid, a.rounds)
            self.request_counts()
            self.s6(a.s6_count)
        finally:
            self.stop_worker()
        self.s7(a.s7_count)
        meta["duration_s"] = round(time.perf_counter() - t0, 1)
        return meta

    # ---- the short guard (scripts/bench.sh --guard) ----
    def guard(self):
        """A minute or two: each sandman figure as a ratio to a baseline of
        the same run, so a slow machine moves both and a regression shows."""
        a = self.args
        t0 = time.perf_counter()
        meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "host": platform.node(),
                "cpus": os.cpu_count(), "load": open("/proc/loadavg").read().split()[:3],
                "instance": self.instance}
        self.start_worker()
        try:
            self.http(1, 1, '{"argv": ["true"], "run_id": "guard"}')
            cid = self.container_of_run("guard")
            self.http(3, 1, '{"argv": ["true"], "run_id": "guard"}')  # its agent session
            time.sleep(1.0)
            s1 = self.http(a.guard_calls, 1, '{"argv": ["true"], "run_id": "guard"}')["samples"]
            floor = self.client([os.path.join(self.bin, "floor"), "exec", self.engine_sock, cid,
                                 str(a.guard_calls)])["samples"]
            run = self.timed_cli(["docker", "run", "--rm", "--network", "none", IMAGE, "true"],
                                 a.guard_runs)
            spaced, bursts = self.s2_runner(a.guard_spaced, 2, a.guard_burst, 6.0)
            run += self.timed_cli(["docker", "run", "--rm", "--network", "none", IMAGE, "true"],
                                  a.guard_runs)
        finally:
            self.stop_worker()
        rows = [("docker run --rm (baseline)", run), ("floor: engine exec in the sandbox", floor),
                ("S1 HTTP API, reused per_run sandbox", s1),
                ("S2 HTTP API per_tool, 1-5 s between calls", spaced),
                ("S2 HTTP API per_tool, bursts back to back", bursts)]
        base = pct(run, 0.5)
        lines = ["# sandman speed guard", "",
                 "%s on `%s` (%d CPUs, load %s at start), %.0f s. Ratios: docker run --rm p50 / "
                 "the row's p50 (higher is faster), measured in this run; not a pass/fail test." %
                 (meta["date"], meta["host"], meta["cpus"], " ".join(meta["load"]),
                  time.perf_counter() - t0), "",
                 "| row | calls | p50 ms | p95 ms | docker run --rm / row |", "|---|---|---|---|---|"]
        for name, samples in rows:
            lines.append("| %s | %d | %.2f | %.2f | %.1fx |" % (
                name, len(samples), pct(samples, 0.5), pct(samples, 0.95),
                base / pct(samples, 0.5) if pct(samples, 0.5) else float("nan")))
        lines += ["", "Reference (docs/performance.md): S1 >= 50x, S2 with pauses >= 50x, "
                  "S2 in bursts >= 5x."]
        text = "\n".join(lines) + "\n"
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "guard.md"), "w") as f:
            f.write(text)
        with open(os.path.join(a.out, "guard.json"), "w") as f:
            json.dump({"meta": meta, "rows": [{"name": n, "samples": [round(x, 3) for x in v]}
                                              for n, v in rows]}, f, indent=1)
        sys.stdout.write(text)

    def cleanup(self):
        self.stop_worker()
        for c in self.peer_containers:
            subprocess.run(["docker", "rm", "-f", c], capture_output=True)
        ids = subprocess.run(["docker", "ps", "-aq", "--filter",
                              "label=io.sandman.instance=" + self.instance],
                             capture_output=True, text=True).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-f", "-v"] + ids, capture_output=True)
        vols = subprocess.run(["docker", "volume", "ls", "-q", "--filter",
                               "label=io.sandman.instance=" + self.instance],
                              capture_output=True, text=True).stdout.split()
        for v in vols + self.peer_volumes:
            subprocess.run(["docker", "volume", "rm", "-f", v], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", required=True, help="build directory (sandman, bench/ clients)")
    ap.add_argument("--out", required=True, help="where latest.{md,json,png} go")
    ap.add_argument("--instance", default="bench-%d" % os.getpid())
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--guard", action="store_true", help="the short ratio run (CI)")
    ap.add_argument("--workspace", help="S3 workspace directory (default: generated)")
    ap.add_argument("--skip-ws", action="store_true", help="leave S3/S4 out")
    args = ap.parse_args()
    q = args.quick
    args.calls = 6 if q else 30
    args.rounds = 1 if q else 3
    args.ws_calls = 2 if q else 30
    args.ws_files = 10000
    args.ws_file_bytes = 10240
    args.s6_count = 20 if q else 100
    args.s7_count = 20 if q else 200
    args.think = 1.0
    args.guard_calls, args.guard_runs, args.guard_spaced, args.guard_burst = 20, 4, 8, 8
    b = Bench(args)
    if args.guard:
        try:
            b.guard()
        finally:
            b.cleanup()
        return 0
    try:
        meta = b.main()
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import report
        report.write(args.out, meta, b.results, b.counts)
    finally:
        b.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
