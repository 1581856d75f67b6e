#!/usr/bin/env python3
"""The runner's files routes and streamed execute against the real engine,
with the Python client (clients/python). Run by test_runner_files.sh.

  files   round trips of 0 B, 1 B, 5 MiB and 200 MiB by hash (the large one
          streamed both ways), paths that leave the workspace refused (.., an
          absolute path elsewhere, a link the sandbox planted), a worker token
          refused another worker's files, stat/list/glob/grep/mkdir/delete,
          tar upload and download, the body cap
  stream  streamed execute: events as they come, the first one before the
          command ends, a hang-up kills the command, leased values masked in
          the events too; and a chunked file body over the cap

Uses test_server.py's helpers (check, Runner, cleanup).
"""
import hashlib
import io
import json
import os
import secrets
import socket
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402
from sandman_client import Client, derive_worker_token  # noqa: E402

check = ts.check
status_of = ts.status_of
MIB = 1024 * 1024


def kind_of(fn):
    """(status, failure_kind) of a files call that fails."""
    try:
        fn()
        return (200, None)
    except ts.SandmanError as e:
        return (e.status, e.failure_kind)


def runner_args(max_file_body="300m"):
    # /workspace must hold the 200 MiB file.
    return ["--pool", "it-files", "--sandbox-mode", "per_run", "--sandbox-backend", "docker",
            "--sandbox-image", "sandman/minimal:latest", "--sandbox-network", "none",
            "--sandbox-cpu", "1", "--sandbox-mem", "512m", "--sandbox-pids", "128",
            "--sandbox-disk", "512m", "--project-environment", "development",
            "--max-file-body", max_file_body]


def chunks(total, seed):
    """total pseudo-random bytes in 1 MiB pieces, and their hash as they go."""
    h = hashlib.sha256()
    state = {"hash": h}
    block = hashlib.sha256(seed).digest() * (MIB // 32)

    def gen():
        left, i = total, 0
        while left > 0:
            n = min(MIB, left)
            piece = bytes([i & 0xFF]) + block[1:n]
            h.update(piece)
            yield piece
            left -= n
            i += 1
    return gen(), state


def suite_files(tmp):
    r = ts.Runner(tmp, runner_args())
    c = r.client
    key = {"run_id": "files-1"}
    try:
        # ---- round trips by hash
        for size in (0, 1, 5 * MIB):
            data = os.urandom(size)
            w = c.files.write(key, "rt/f%d.bin" % size, data)
            back = c.files.read(key, "rt/f%d.bin" % size)
            check("a %d-byte file round-trips (sha256)" % size,
                  w["size"] == size and hashlib.sha256(back).digest() ==
                  hashlib.sha256(data).digest(), (w, len(back)))
        gen, st = chunks(200 * MIB, b"big")
        w = c.files.write(key, "rt/big.bin", gen)  # sent chunked as it is made
        sent = st["hash"].hexdigest()
        got = hashlib.sha256()
        n = c.files.read_to(key, "rt/big.bin", got.update)
        check("a 200 MiB file round-trips streamed both ways (sha256)",
              w["size"] == 200 * MIB and n == 200 * MIB and got.hexdigest() == sent, (w, n))
        part = c.files.read(key, "rt/f5242880.bin", offset=MIB, length=10)
        check("offset and length read a part", len(part) == 10)
        c.files.delete(key, "rt/big.bin")

        # ---- paths that leave the workspace
        c.execute(command="ln -s /etc /workspace/planted && ln -s / /workspace/root",
                  run_id="files-1")
        for path in ("../etc/passwd", "/etc/passwd", "a/../../x", "planted/passwd",
                     "root/etc/hostname"):
            check("read of %r refused (403)" % path,
                  status_of(lambda p=path: c.files.read(key, p)) == 403)
        check("write through a planted link refused (403)",
              status_of(lambda: c.files.write(key, "planted/evil", b"x")) == 403)
        check("a tar download through a planted link refused (403)",
              status_of(lambda: c.files.download_tar(key, ["planted/passwd"],
                                                     lambda b: None)) == 403)
        st_link = c.files.stat(key, "planted")
        check("a link is described, not followed", st_link["type"] == "symlink" and
              st_link.get("link") == "/etc", st_link)

        # ---- workers
        w1 = Client("unix:" + r.sock, derive_worker_token(r.token, "w1"))
        w2 = Client("unix:" + r.sock, derive_worker_token(r.token, "w2"))
        wk1 = {"worker_key": "w1"}
        w1.files.write(wk1, "secret.txt", b"w1's")
        check("a worker reads its own files", w1.files.read(wk1, "secret.txt") == b"w1's")
        check("another worker's token is refused (401)",
              status_of(lambda: w2.files.read(wk1, "secret.txt")) == 401)
        check("a worker token naming another worker is refused (401)",
              status_of(lambda: w1.files.read({"worker_key": "w2"}, "x")) == 401)
        check("a worker naming the operator's run reaches its own sandbox, not it (404)",
              status_of(lambda: w1.files.read({"worker_key": "w1", "run_id": "files-1"},
                                              "rt/f1.bin")) == 404)
        check("no token is refused (401)",
              status_of(lambda: Client("unix:" + r.sock, "").files.read(key, "rt/f1.bin"))
              == 401)
        check("the control token reaches the worker's files",
              c.files.read(wk1, "secret.txt") == b"w1's")

        # ---- the other operations
        c.files.mkdir(key, "tree/sub")
        c.files.write(key, "tree/sub/a.py", b"print('needle')\n")
        c.files.write(key, "tree/b.txt", b"hay\nneedle here\n", perm=0o600)
        st_b = c.files.stat(key, "tree/b.txt")
        check("stat: type, size and mode", st_b["type"] == "file" and st_b["size"] == 16 and
              st_b["mode"] == "0600", st_b)
        lst = c.files.list(key, "tree", depth=0)
        check("list (recursive)", sorted(e["path"] for e in lst["entries"]) ==
              ["tree/b.txt", "tree/sub", "tree/sub/a.py"], lst)
        g = c.files.glob(key, "**/*.py", path="tree")
        check("glob", [e["path"] for e in g["entries"]] == ["tree/sub/a.py"], g)
        gr = c.files.grep(key, "needle", path="tree")
        check("grep", sorted((m["path"], m["line"]) for m in gr["matches"]) ==
              [("tree/b.txt", 2), ("tree/sub/a.py", 1)], gr)
        check("exclusive write of an existing file refused (409)",
              status_of(lambda: c.files.write(key, "tree/b.txt", b"x", exclusive=True)) == 409)
        check("a missing file is 404", status_of(lambda: c.files.read(key, "nope")) == 404)
        # The names both clients give the same operations.
        import sandman_client as sc
        check("SandmanClient is Client (the TypeScript name)", sc.SandmanClient is sc.Client)
        check("health() and healthz() are one", c.health()["status"] == c.healthz()["status"] == "ok")
        check("kill_handle and kill are one", c.kill_handle.__func__ is c.kill.__func__)
        check("files.read_text", c.files.read_text(key, "tree/b.txt") == "hay\nneedle here\n")
        check("a folder that is not empty needs recursive (400)",
              status_of(lambda: c.files.delete(key, "tree")) == 400)
        # What the sandbox's file system answered is the tool's failure; a
        # path sandman refuses (a planted link) stays policy.
        check("a missing file is failure_kind tool",
              kind_of(lambda: c.files.read(key, "nope")) == (404, "tool"))
        check("reading a folder is 400, failure_kind tool",
              kind_of(lambda: c.files.read(key, "tree")) == (400, "tool"))
        check("an exclusive write of an existing file is 409, failure_kind tool",
              kind_of(lambda: c.files.write(key, "tree/b.txt", b"x", exclusive=True)) ==
              (409, "tool"))
        check("a read through a planted link stays 403, failure_kind policy",
              kind_of(lambda: c.files.read(key, "planted/passwd")) == (403, "policy"))
        check("a path leaving the workspace stays 403, failure_kind policy",
              kind_of(lambda: c.files.read(key, "../x")) == (403, "policy"))

        # ---- tar
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            for name, content in (("up/one.txt", b"1"), ("up/d/two.txt", b"22")):
                ti = tarfile.TarInfo(name)
                ti.size = len(content)
                t.addfile(ti, io.BytesIO(content))
        res = c.files.upload_tar(key, "tarred", buf.getvalue())
        check("tar upload", res.get("files") == 2 and res.get("bytes") == 3, res)
        out = io.BytesIO()
        c.files.download_tar(key, ["tarred/up"], out.write)
        out.seek(0)
        with tarfile.open(fileobj=out) as t:
            names = {m.name: (t.extractfile(m).read() if m.isfile() else None)
                     for m in t.getmembers()}
        check("tar download", names.get("tarred/up/one.txt") == b"1" and
              names.get("tarred/up/d/two.txt") == b"22", names)
        evil = io.BytesIO()
        with tarfile.open(fileobj=evil, mode="w") as t:
            ti = tarfile.TarInfo("ln")
            ti.type = tarfile.SYMTYPE
            ti.linkname = "/etc"
            t.addfile(ti)
        check("a tar with a link is refused",
              status_of(lambda: c.files.upload_tar(key, "evil", evil.getvalue())) in (400, 403))

        # ---- the cap: a declared length over --max-file-body
        status, body = r.raw("PUT", "/v1/files/content?run_id=files-1&path=huge", b"",
                             {"Authorization": "Bearer " + r.token,
                              "Content-Length": str(400 * MIB), "Expect": "100-continue"})
        check("a body over --max-file-body is refused (413)", status == 413, (status, body))
        check("the call's sandbox is still usable",
              c.files.read(key, "rt/f1.bin") is not None)
    finally:
        r.stop()


def raw_stream(sock_path, token, body):
    """A streamed execute on a socket of our own: (socket, reader)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(120)  # the first event must come long before this
    s.connect(sock_path)
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
              token.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: " +
              str(len(data)).encode() + b"\r\n\r\n" + data)
    return s, s.makefile("rb")


def suite_stream(tmp):
    value = "ghp_it_" + secrets.token_hex(16)
    creds = os.path.join(tmp, "creds.json")
    with open(creds, "w") as f:
        json.dump({"svc": {"IT_TOKEN": value}}, f)
    os.chmod(creds, 0o600)
    r = ts.Runner(tmp, runner_args("1m") + ["--credentials-file", creds])
    c = r.client
    try:
        ev = list(c.execute_stream(command="echo one; echo two >&2; printf '\\377'; exit 3",
                                   run_id="st-1"))
        kinds = [e["event"] for e in ev]
        res = ev[-1]
        out = "".join(e.get("data", "") for e in ev if e["event"] == "stdout")
        check("events then the result", kinds[-1] == "result" and "stdout" in kinds and
              "stderr" in kinds and res["result"]["exit_code"] == 3 and
              res["result"]["ok"] is False, ev)
        check("stdout and stderr events carry the output", out.startswith("one\n") and
              any(e.get("data") == "two\n" for e in ev if e["event"] == "stderr"), ev)
        check("bytes that are not UTF-8 come as data_b64",
              any("data_b64" in e for e in ev if e["event"] == "stdout"), ev)

        # The first line before the command ends; then a hang-up kills it.
        s, rf = raw_stream(r.sock, r.token, {"command": "echo first; exec sleep 600",
                                             "run_id": "st-1", "stream": True,
                                             "timeout_s": 900})
        seen, result_seen = None, False
        while True:
            line = rf.readline()
            if not line:
                break
            if b'"event":"result"' in line:
                result_seen = True
                break
            if b'"data":"first\\n"' in line:
                seen = line
                break
        check("the first line comes while the command still runs", seen is not None and
              not result_seen, line)
        rf.close()
        s.close()
        cids = ts.instance_containers("label=io.sandman.run=st-1")
        gone, top = False, None
        deadline = time.time() + 90
        while cids and time.time() < deadline:
            top = ts.docker("top", cids[0])
            if top.returncode == 0 and "sleep 600" not in top.stdout:
                gone = True
                break
            time.sleep(0.2)
        check("a client that disconnects kills the command", len(cids) == 1 and gone,
              (cids, top.stdout if top else None))
        again = c.execute(command="echo after", run_id="st-1")
        check("the sandbox serves the next call", again["stdout"] == "after\n", again)

        # Leased values are masked in the events, even cut across two pieces.
        lease = c.create_lease(tool="shell", services=["svc"])
        ev = list(c.execute_stream(
            tool="shell", run_id="st-1", lease_id=lease["lease_id"],
            command='printf %s "$IT_TOKEN" | head -c 9; sleep 0.3; '
                    'printf %s "$IT_TOKEN" | tail -c +10; echo; echo "$IT_TOKEN" >&2'))
        text = json.dumps(ev)
        joined = "".join(e.get("data", "") for e in ev if e["event"] == "stdout")
        check("leased values masked in streamed events", value not in text and
              value[:9] not in joined and "[REDACTED]" in joined, ev)
        check("a streamed call cannot go to the background (400)",
              status_of(lambda: list(c.execute_stream(command="true", run_id="st-1",
                                                      background_on_timeout=True))) == 400)
        # A chunked body (no length given) over --max-file-body (1m here).
        gen, _ = chunks(3 * MIB, b"over")
        check("a chunked body over --max-file-body is refused (413)",
              status_of(lambda: c.files.write({"run_id": "st-1"}, "over.bin", gen)) == 413)
        check("... and nothing of it is written",
              status_of(lambda: c.files.stat({"run_id": "st-1"}, "over.bin")) == 404)
        # Accept: application/x-ndjson asks for the stream as well.
        status, body = r.raw("POST", "/v1/execute",
                             json.dumps({"command": "echo acc", "run_id": "st-1"}).encode(),
                             {"Authorization": "Bearer " + r.token,
                              "Accept": "application/x-ndjson",
                              "Content-Type": "application/json"})
        lines = [json.loads(x) for x in body.decode().splitlines() if x.strip()]
        check("Accept: application/x-ndjson streams", status == 200 and
              lines[0] == {"event": "stdout", "data": "acc\n"} and
              lines[-1]["event"] == "result", body)
    finally:
        r.stop()


def main():
    ts.run_suites({"files": suite_files, "stream": suite_stream}, "files", "smfiles-")


if __name__ == "__main__":
    main()
