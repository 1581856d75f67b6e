#!/usr/bin/env python3
"""`sandman exec` against the real engine. Run by test_exec.sh.

  exec  in a per_run sandbox `sandman run` made: the command's output,
        stderr and exit code; its user, working directory (-w) and
        variables (-e); -i with standard input as it comes (output flows
        before the input ends); SANDBOX by name; a missing sandbox is 125;
        -t driven through a pseudo-terminal (python's pty): `stty size`
        shows the caller's size, then the new size after the caller's
        window changes (SIGWINCH), ^C reaches the program in the sandbox, the
        caller's terminal is raw while it runs and restored after, and the
        exit code comes back.

Prints "ok - ..." / "not ok - ..." lines and "N passed, M failed".
"""
import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402

check = ts.check
GUARD = 120


def sandman(*args, stdin=None):
    return subprocess.run([ts.SANDMAN] + list(args), input=stdin, capture_output=True, timeout=GUARD)


class Pty:
    """`sandman exec -t ...` on a pseudo-terminal of rows x cols."""

    def __init__(self, args, rows, cols):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(ts.SANDMAN, [ts.SANDMAN] + args)
        self.size(rows, cols)
        self.out = b""

    def size(self, rows, cols):
        # The kernel tells the foreground process group (SIGWINCH).
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def until(self, text, timeout=GUARD):
        """Output until text appears (bounded), all of it so far."""
        if isinstance(text, str):
            text = text.encode()
        deadline = time.time() + timeout
        while text not in self.out and time.time() < deadline:
            r, _, _ = select.select([self.fd], [], [], 0.5)
            if r:
                try:
                    d = os.read(self.fd, 65536)
                except OSError:
                    break
                if not d:
                    break
                self.out += d
        return self.out.decode("utf-8", "replace")

    def type(self, keys):
        os.write(self.fd, keys.encode() if isinstance(keys, str) else keys)

    def lflag(self):
        return termios.tcgetattr(self.fd)[3]

    def wait(self, timeout=GUARD):
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.until(b"\0never\0", 0.2)
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(st)
        os.kill(self.pid, 9)
        return None


def exec_plain(run):
    p = sandman("exec", "--run-id", run, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    check("exec: stdout, stderr apart, and the exit code",
          p.returncode == 7 and p.stdout == b"out\n" and p.stderr == b"err\n", p)
    p = sandman("exec", "--run-id", run, "--", "sh", "-c", "id -u; pwd; cat /workspace/made")
    check("exec: as the sandbox's user, in /workspace, in the sandbox run made",
          p.stdout.split() == [b"1000", b"/workspace", b"by-run"], p)
    p = sandman("exec", "-w", "/tmp", "-e", "FOO=bar baz", "--run-id", run, "--", "sh", "-c",
                "pwd; echo \"$FOO\"; env | grep -c '^SANDMAN_' || true")
    lines = p.stdout.decode().split("\n")
    check("exec: -w and -e; no SANDMAN_ variable but the call's marker",
          lines[:3] == ["/tmp", "bar baz", "1"], p)
    p = sandman("exec", "-i", "--run-id", run, "--", "wc", "-l", stdin=b"a\nb\nc\n")
    check("exec -i: standard input goes to the command", p.stdout.strip() == b"3", p)


def exec_interactive_pipe(run):
    """Output flows while the input is still open."""
    p = subprocess.Popen([ts.SANDMAN, "exec", "-i", "--run-id", run, "--", "sh", "-c",
                          "echo ready; read x; echo got-$x"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    r, _, _ = select.select([p.stdout], [], [], GUARD)
    first = p.stdout.readline() if r else b""
    check("exec -i: output arrives before the input has ended", first == b"ready\n", first)
    out, err = p.communicate(b"hi\n", timeout=GUARD)
    check("exec -i: then the input reaches it", out == b"got-hi\n" and p.returncode == 0, (out, err))


def exec_by_name(run):
    listing = json.loads(sandman("sandbox", "list", "--json").stdout or b"[]")
    names = [s["name"] for s in listing if s.get("run_id") == run]
    if not check("exec: the run's sandbox is listed", len(names) == 1, listing):
        return
    p = sandman("exec", names[0], "--", "cat", "/workspace/made")
    check("exec SANDBOX: by its name", p.returncode == 0 and p.stdout == b"by-run\n", p)
    p = sandman("exec", "--run-id", "no-such-run-%d" % os.getpid(), "--", "true")
    check("exec: a missing sandbox is 125, said so, and nothing is made",
          p.returncode == 125 and b"no sandbox" in p.stderr and
          not any(s.get("run_id", "").startswith("no-such-run") for s in
                  json.loads(sandman("sandbox", "list", "--json", "--all").stdout or b"[]")), p)


def exec_tty(run):
    t = Pty(["exec", "-it", "--run-id", run, "--", "sh"], 30, 100)
    t.type("stty size; echo mark-$((6*7))\r")
    out = t.until("mark-42")
    check("exec -t: stty size shows the caller's size (30 100)", "30 100" in out, out[-300:])
    check("exec -t: the caller's terminal is raw while it runs", not (t.lflag() & termios.ICANON))
    t.size(40, 120)
    # The new size reaches the sandbox asynchronously: ask until it shows.
    deadline = time.time() + GUARD
    seen = False
    n = 0
    while not seen and time.time() < deadline:
        n += 1
        t.type("stty size; echo probe-$((%d+1000))\r" % n)
        out = t.until("probe-%d" % (n + 1000), 10)
        seen = "40 120" in out.split("probe-%d" % (n + 1000))[0]
    check("exec -t: the new size after the caller's window changed (40 120)", seen, out[-300:])
    # The job prints its mark once it is the terminal's foreground (the
    # shell hands it the terminal before it runs), so ^C is its.
    t.type("sh -c 'echo going-$((1+2)); exec sleep 300'\r")
    t.until("going-3")
    t.type("\x03")
    t.type("echo back-$((2*3))\r")
    out = t.until("back-6")
    check("exec -t: ^C interrupts the program in the sandbox, the shell goes on", "back-6" in out,
          out[-300:])
    t.type("exit 5\r")
    code = t.wait()
    check("exec -t: the exit code comes back (5)", code == 5, code)
    check("exec -t: the caller's terminal is restored after", bool(t.lflag() & termios.ICANON))


def suite_exec(tmp):
    run = "exec-%d" % os.getpid()
    p = sandman("run", "--mode", "per_run", "--run-id", run, "--", "sh", "-c",
                "echo by-run > /workspace/made")
    if not check("a per_run sandbox made by sandman run", p.returncode == 0, p):
        return
    exec_plain(run)
    exec_interactive_pipe(run)
    exec_by_name(run)
    exec_tty(run)


if __name__ == "__main__":
    ts.run_suites({"exec": suite_exec}, "exec", "smexec-")
