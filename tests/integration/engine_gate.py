#!/usr/bin/env python3
"""A gate in front of the engine's socket, for crash tests (test_state_crash.sh).

    engine_gate.py LISTEN MARKER WHEN METHOD PATH_REGEX [NTH]

Listens on the unix socket LISTEN and passes every connection through to
the engine (DOCKER_HOST's unix socket, else /var/run/docker.sock),
reading the requests it carries. The NTH (default 1) request whose method
is METHOD and whose path (the /v1.xx prefix left out, the query kept)
matches PATH_REGEX (re.search) is held, and MARKER is written with its
request line once it is:

- WHEN=before: the request is never sent: the engine has not done it.
- WHEN=after: the request is sent; its answer's first bytes are kept from
  the client: the engine has done it, the client does not know.
- WHEN=part: the request is sent and the first 256 KB of its answer passed
  on, then the rest is kept: the client is half way through reading it.
- WHEN=fail: the request is never sent, and the gate answers it with a
  500 at once: the engine failed it (test_state_runner.py, a thaw that
  fails); every request after it goes through.
- WHEN=slow: the request is sent 2.5 s late (test_state_runner.py, a
  thaw slower than a call's not-after time).
- WHEN=late: the request is sent at once and its answer held 3 s, then
  passed on; MARKER is written as it is passed on (test_state_runner.py:
  a call answered before the engine answers its thaw).

So a test lands a SIGKILL of sandman exactly between two of its engine
steps: it waits (a bounded poll) for MARKER, then kills. Every other
request goes through untouched. Requests are parsed as HTTP/1.1
(Content-Length or chunked bodies); after an upgrade (an exec's attach)
the connection is passed through as bytes. Runs until killed.
"""
import os
import re
import socket
import sys
import threading
import time

PART_BYTES = 256 * 1024
HEAD_MAX = 1 << 16

listen_path, marker, when, method, pattern = sys.argv[1:6]
nth = int(sys.argv[6]) if len(sys.argv) > 6 else 1
if when not in ("before", "after", "part", "fail", "slow", "late"):
    sys.exit("WHEN is before, after, part, fail, slow or late")
SLOW_S = 2.5
LATE_S = 3.0
engine_path = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
engine_path = engine_path[len("unix://"):] if engine_path.startswith("unix://") else engine_path
if os.path.abspath(engine_path) == os.path.abspath(listen_path):
    sys.exit("the gate cannot forward to itself")
regex = re.compile(pattern)
lock = threading.Lock()
seen = 0
held = threading.Event()  # set once the gate holds its request


def hold_forever():
    held.set()
    threading.Event().wait()


def mark(line):
    tmp = marker + ".tmp"
    with open(tmp, "w") as f:
        f.write(line + "\n")
    os.replace(tmp, marker)


def matches(m, path):
    global seen
    path = re.sub(r"^/v[0-9.]+/", "/", path)
    if m != method or not regex.search(path):
        return False
    with lock:
        seen += 1
        return seen == nth and not held.is_set()


class Conn:
    def __init__(self, client):
        self.client = client
        self.engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.engine.connect(engine_path)
        self.buf = b""
        self.hold_answer = None  # None, "after", "part" or "late"
        self.line = ""

    def recv_more(self):
        data = self.client.recv(65536)
        if not data:
            raise EOFError
        self.buf += data

    def take(self, n):
        while len(self.buf) < n:
            self.recv_more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def take_line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > HEAD_MAX:
                raise EOFError
            self.recv_more()
        i = self.buf.index(b"\r\n") + 2
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def body(self, headers):
        """The request's body as it came (chunked kept chunked)."""
        if headers.get("transfer-encoding", "").lower().startswith("chunked"):
            out = b""
            while True:
                size_line = self.take_line()
                out += size_line
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:  # trailers, then the empty line
                        t = self.take_line()
                        out += t
                        if t == b"\r\n":
                            return out
                out += self.take(size + 2)
        n = int(headers.get("content-length", "0") or 0)
        return self.take(n)

    def upstream(self):
        """Client to engine, request by request."""
        while True:
            while b"\r\n\r\n" not in self.buf:
                if len(self.buf) > HEAD_MAX:
                    raise EOFError
                self.recv_more()
            i = self.buf.index(b"\r\n\r\n") + 4
            head, self.buf = self.buf[:i], self.buf[i:]
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            m, path = parts[0], parts[1] if len(parts) > 1 else ""
            headers = {}
            for h in lines[1:]:
                if ":" in h:
                    k, v = h.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            gated = matches(m, path)
            if gated and when == "fail":
                self.body(headers)
                held.set()
                mark(lines[0])
                msg = b'{"message":"engine_gate: refused"}\n'
                self.client.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: "
                                    b"application/json\r\nContent-Length: %d\r\n\r\n" % len(msg) + msg)
                continue
            if gated and when == "slow":
                mark(lines[0])
                time.sleep(SLOW_S)
                gated = False
            if gated and when == "before":
                mark(lines[0])
                hold_forever()
            if gated:
                self.line = lines[0]
                self.hold_answer = when
            self.engine.sendall(head)
            self.engine.sendall(self.body(headers))
            if "upgrade" in headers:
                break
        # Upgraded: bytes as they come.
        if self.buf:
            self.engine.sendall(self.buf)
        while True:
            data = self.client.recv(65536)
            if not data:
                raise EOFError
            self.engine.sendall(data)

    def downstream(self):
        """Engine to client, as bytes; the gated request's answer held."""
        passed = 0
        while True:
            data = self.engine.recv(65536)
            if not data:
                break
            if self.hold_answer == "after":
                mark(self.line)
                hold_forever()
            if self.hold_answer == "late":
                time.sleep(LATE_S)
                mark(self.line)
                self.hold_answer = None
            if self.hold_answer == "part":
                room = PART_BYTES - passed
                if room <= 0:
                    mark(self.line)
                    hold_forever()
                data = data[:room]
                passed += len(data)
            self.client.sendall(data)
        self.client.shutdown(socket.SHUT_WR)


def serve(client):
    try:
        c = Conn(client)
    except OSError:
        client.close()
        return
    down = threading.Thread(target=guard, args=(c.downstream, c), daemon=True)
    down.start()
    guard(c.upstream, c)


def guard(fn, c):
    try:
        fn()
    except (EOFError, OSError, ValueError):
        pass
    if not held.is_set():
        for s in (c.client, c.engine):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    try:
        os.unlink(listen_path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(listen_path)
    srv.listen(64)
    while True:
        client, _ = srv.accept()
        threading.Thread(target=serve, args=(client,), daemon=True).start()


if __name__ == "__main__":
    main()
