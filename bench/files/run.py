#!/usr/bin/env python3
"""Small-file read and write in a keyed sandbox, side by side in one run:

  files API     PUT/GET /v1/files/content on the runner (the Python client)
  execute+b64   POST /v1/execute with the content as stdin (base64 -d > f)
                and back (base64 f), as a client without a files API does
  docker cp     `docker cp` into and out of the same sandbox (the engine's
                archive endpoint, with the docker CLI's start-up)

Each method writes then reads the same file ROUNDS times (default 50) in
one per_run sandbox, checking the bytes it got back; the first call (which
makes the sandbox) is not counted. Prints a table of median and p90 in ms
and writes bench/results/files.{json,md}.

  python3 bench/files/run.py [--rounds N] [--size BYTES] [--sandman build/sandman]
"""
import argparse
import base64
import json
import os
import platform
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "clients", "python"))
from sandman_client import Client  # noqa: E402


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def timed(fn):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--sandman", default=os.path.join(SRC, "build", "sandman"))
    ap.add_argument("--image", default="sandman/minimal:latest")
    ap.add_argument("--out", default=os.path.join(SRC, "bench", "results"))
    a = ap.parse_args()

    os.environ["SANDMAN_INSTANCE"] = "bench-files-%d" % os.getpid()
    tmp = tempfile.mkdtemp(prefix="smbench-files-")
    tok = secrets.token_hex(24)
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(tok)
    os.chmod(os.path.join(tmp, "token"), 0o600)
    sock = os.path.join(tmp, "s.sock")
    log = open(os.path.join(tmp, "runner.log"), "w")
    proc = subprocess.Popen([a.sandman, "worker", "start", "--listen", "unix:" + sock,
                             "--token-file", os.path.join(tmp, "token"), "--sandbox-mode",
                             "per_run", "--sandbox-image", a.image, "--sandbox-network", "none",
                             "--project-environment", "development"],
                            stdout=log, stderr=subprocess.STDOUT)
    c = Client("unix:" + sock, tok)
    try:
        for _ in range(300):
            try:
                c.healthz()
                break
            except OSError:
                time.sleep(0.1)
        key = {"run_id": "bench"}
        data = os.urandom(a.size)
        r = c.execute(command="true", run_id="bench")  # makes the sandbox
        cid = r["sandbox_id"]
        local = os.path.join(tmp, "f.bin")
        with open(local, "wb") as f:
            f.write(data)
        results = {}

        def files_write():
            c.files.write(key, "api.bin", data)

        def files_read():
            assert c.files.read(key, "api.bin") == data

        def b64_write():
            r = c.execute(command="base64 -d > b64.bin", stdin=base64.b64encode(data),
                          run_id="bench")
            assert r["ok"], r

        def b64_read():
            r = c.execute(command="base64 b64.bin", run_id="bench")
            assert base64.b64decode(r["stdout"]) == data

        def cp_write():
            subprocess.run(["docker", "cp", local, cid + ":/workspace/cp.bin"], check=True,
                           capture_output=True)

        def cp_read():
            out = subprocess.run(["docker", "cp", cid + ":/workspace/cp.bin", "-"], check=True,
                                 capture_output=True).stdout
            assert data in out  # a tar holding the file

        for name, w, rd in (("files API", files_write, files_read),
                            ("execute+base64", b64_write, b64_read),
                            ("docker cp", cp_write, cp_read)):
            w()
            rd()  # warm: the first of each is not counted
            ws = [timed(w) for _ in range(a.rounds)]
            rs = [timed(rd) for _ in range(a.rounds)]
            results[name] = {
                "write_median_ms": round(statistics.median(ws), 2),
                "write_p90_ms": round(pct(ws, 90), 2),
                "read_median_ms": round(statistics.median(rs), 2),
                "read_p90_ms": round(pct(rs, 90), 2),
            }
        load = os.getloadavg()
        report = {"size_bytes": a.size, "rounds": a.rounds, "image": a.image,
                  "host": platform.node(), "cpus": os.cpu_count(),
                  "loadavg": [round(x, 2) for x in load],
                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "results": results}
        lines = ["# Small-file read and write (bench/files/run.py)", "",
                 "%d-byte file, %d rounds each, one per_run sandbox (%s), %d CPUs, load %s, %s." %
                 (a.size, a.rounds, a.image, os.cpu_count(),
                  " ".join("%.2f" % x for x in load), report["date"]), "",
                 "| method | write median ms | write p90 ms | read median ms | read p90 ms |",
                 "|---|---|---|---|---|"]
        for name, v in results.items():
            lines.append("| %s | %.1f | %.1f | %.1f | %.1f |" % (
                name, v["write_median_ms"], v["write_p90_ms"], v["read_median_ms"],
                v["read_p90_ms"]))
        text = "\n".join(lines) + "\n"
        print(text)
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "files.json"), "w") as f:
            json.dump(report, f, indent=2)
        with open(os.path.join(a.out, "files.md"), "w") as f:
            f.write(text)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        ids = subprocess.run(["docker", "ps", "-aq", "--filter", "label=io.sandman.instance=" +
                              os.environ["SANDMAN_INSTANCE"]], capture_output=True,
                             text=True).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-fv"] + ids, capture_output=True)
        vols = subprocess.run(["docker", "volume", "ls", "-q", "--filter",
                               "label=io.sandman.instance=" + os.environ["SANDMAN_INSTANCE"]],
                              capture_output=True, text=True).stdout.split()
        if vols:
            subprocess.run(["docker", "volume", "rm", "-f"] + vols, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
