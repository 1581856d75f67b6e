# sandman's code-context driver (docs/code.md). Runs inside a sandbox as
# the sandbox's user, started by `sandman-agent code start` (src/agent/agent_code.c),
# which embeds this file and runs it as `python3 -I -c SOURCE DIR READY_FD`.
#
# It keeps the sandbox's code contexts: one Jupyter kernel each, started
# from the kernelspec its create named (a kernel name, or a language), and
# spoken to over the Jupyter messaging protocol on ipc sockets in the
# context's private folder (DIR is 0700; the connection file is 0600 with a
# fresh random key, every message HMAC-SHA256 signed and checked). Nothing
# of it listens on a network.
#
# Clients (the relay `sandman-agent code send`) connect to DIR/ctl.sock and
# write one JSON request line; the answer is JSON lines, the last one
# terminal ("end" for a run; "context", "list", "ok" or "fail" otherwise).
# Runs of one context take turns in the order they came.
import collections
import errno
import json
import os
import re
import secrets
import select
import shutil
import signal
import socket
import sys
import threading
import time

# Where IPython, matplotlib and Jupyter keep their files, for this program
# (importing the kernelspecs imports IPython) and its kernels: the driver's
# private folder, never the workspace (HOME is /workspace in a sandbox).
ROOT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/.sandman-code"
KERNEL_DEFAULTS = {
    "IPYTHONDIR": os.path.join(ROOT, "ipython"),
    "MPLCONFIGDIR": os.path.join(ROOT, "mpl"),
    "JUPYTER_RUNTIME_DIR": os.path.join(ROOT, "runtime"),
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
}
os.environ.update(KERNEL_DEFAULTS)

try:
    import zmq
    import jupyter_client.session as jc_session
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    from jupyter_client.session import Session
except Exception as exc:  # reported to the starter, which reports it to sandman
    sys.stderr.write("sandman-code: this image lacks jupyter_client and pyzmq (%s): code "
                     "contexts need an image with a Jupyter kernel, e.g. sandman/general\n" % exc)
    sys.exit(3)

# The driver reads no date of a message's headers; jupyter_client parses
# every one with dateutil on receipt (80 % of deserialising a message, ~0.5
# ms of a `1 + 1` cell's five messages). They stay the strings they came
# as. The signature check and the rest of deserialize are untouched.
if hasattr(jc_session, "extract_dates"):
    jc_session.extract_dates = lambda obj: obj

NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
MIME_TYPES = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png",
              "image/jpeg", "image/svg+xml", "application/json", "application/javascript",
              "application/pdf")
BASE64_TYPES = ("image/png", "image/jpeg", "application/pdf")
REQUEST_MAX = 16 << 20        # one request line
EVENT_MAX = 12 << 20          # one event line; a bigger one is dropped and said so
CONNECTIONS_MAX = 64
START_TIMEOUT_S = 60.0
INTERRUPT_GRACE_S = 5.0       # a cell still busy this long after an interrupt: kernel killed
POLL_MS = 100


class Gone(Exception):
    """The client went away."""


class Reply:
    """The answer to one client: JSON lines, one write each."""

    def __init__(self, conn):
        self.conn = conn
        self.gone = False

    def send(self, event):
        if self.gone:
            return
        line = json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n"
        data = line.encode("utf-8", "replace")  # a lone surrogate becomes "?"
        if len(data) > EVENT_MAX:
            data = (json.dumps({"event": "notice", "message": "an output of %d bytes was dropped "
                                "(one event is at most %d)" % (len(data), EVENT_MAX)}) +
                    "\n").encode()
        try:
            self.conn.sendall(data)
        except OSError:
            self.gone = True

    def fail(self, code, message):
        self.send({"event": "fail", "code": code, "message": message})

    def closed(self):
        """True once the client hung up (it writes nothing after its request)."""
        if self.gone:
            return True
        try:
            r, _, _ = select.select([self.conn], [], [], 0)
            if r and self.conn.recv(1, socket.MSG_PEEK) == b"":
                self.gone = True
        except OSError:
            self.gone = True
        return self.gone


class Turns:
    """First come, first served turns of one context."""

    def __init__(self):
        self.cv = threading.Condition()
        self.waiting = collections.deque()
        self.holder = None

    def take(self, reply, front=False):
        me = object()
        with self.cv:
            if front:
                self.waiting.appendleft(me)
            else:
                self.waiting.append(me)
            while self.holder is not None or self.waiting[0] is not me:
                self.cv.wait(0.2)
                if reply is not None and reply.closed():
                    self.waiting.remove(me)
                    self.cv.notify_all()
                    raise Gone()
            self.waiting.popleft()
            self.holder = me

    def release(self):
        with self.cv:
            self.holder = None
            self.cv.notify_all()

    def queued(self):
        with self.cv:
            return len(self.waiting)


class Kernel:
    """One running kernel: its process and the three sockets we use."""

    def __init__(self, ctx):
        self.ctx = ctx
        d = ctx.dir
        for i in range(1, 6):
            try:
                os.unlink(os.path.join(d, "k-%d" % i))
            except FileNotFoundError:
                pass
        key = secrets.token_hex(32)
        info = {"transport": "ipc", "ip": os.path.join(d, "k"), "shell_port": 1,
                "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5,
                "key": key, "signature_scheme": "hmac-sha256", "kernel_name": ctx.kernel}
        self.connection_file = os.path.join(d, "kernel.json")
        try:
            os.unlink(self.connection_file)
        except FileNotFoundError:
            pass
        fd = os.open(self.connection_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                     0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(info, f)
        self.session = Session(key=key.encode(), signature_scheme="hmac-sha256",
                               username="sandman")
        argv = [a.replace("{connection_file}", self.connection_file)
                 .replace("{resource_dir}", ctx.spec.resource_dir) for a in ctx.spec.argv]
        if any("ipykernel" in a for a in argv):
            # IPython's SQLite history (a write and a thread wake-up per cell,
            # ~1.5 ms): nothing outlives the sandbox's /tmp anyway; a
            # session's history stays in memory.
            argv.append("--HistoryManager.enabled=False")
            argv = without_tcp_pipe(argv)
        log = os.open(os.path.join(d, "kernel.log"),
                      os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            self.proc = spawn(argv, ctx.cwd, ctx.kernel_env(), log)
        finally:
            os.close(log)
        zctx = zmq.Context.instance()
        self.shell = zctx.socket(zmq.DEALER)
        self.iopub = zctx.socket(zmq.SUB)
        self.iopub.setsockopt(zmq.SUBSCRIBE, b"")
        self.control = zctx.socket(zmq.DEALER)
        for s, port in ((self.shell, 1), (self.iopub, 2), (self.control, 4)):
            s.setsockopt(zmq.LINGER, 0)
            s.connect("ipc://%s-%d" % (info["ip"], port))
        self.control_lock = threading.Lock()

    def alive(self):
        return self.proc.poll() is None

    def exit_text(self):
        code = self.proc.poll()
        if code is None:
            return "it is running"
        if code < 0:
            return "it was killed by signal %d" % -code
        return "it exited with status %d" % code

    def recv(self, sock):
        """One message of sock, its signature checked (a bad one raises)."""
        _, parts = self.session.feed_identities(sock.recv_multipart(), copy=True)
        return self.session.deserialize(parts, content=True, copy=True)

    def wait_ready(self):
        """Until the kernel answers kernel_info and its iopub reaches us."""
        deadline = time.monotonic() + START_TIMEOUT_S
        replied = heard = False
        poller = zmq.Poller()
        poller.register(self.shell, zmq.POLLIN)
        poller.register(self.iopub, zmq.POLLIN)
        next_ask = 0.0
        while not (replied and heard):
            now = time.monotonic()
            if not self.alive():
                raise RuntimeError("the kernel stopped while starting (%s): %s" %
                                   (self.exit_text(), self.ctx.log_tail()))
            if now > deadline:
                raise RuntimeError("the kernel did not answer within %d s: %s" %
                                   (START_TIMEOUT_S, self.ctx.log_tail()))
            if now >= next_ask and not (replied and heard):
                self.session.send(self.shell, "kernel_info_request", {})
                next_ask = now + 0.25
            for sock, _ in poller.poll(50):
                msg = self.recv(sock)
                if sock is self.shell and msg["msg_type"] == "kernel_info_reply":
                    replied = True
                    self.language_info = msg["content"].get("language_info", {})
                elif sock is self.iopub:
                    heard = True

    def interrupt(self):
        if not self.alive():
            return
        if self.ctx.spec.interrupt_mode == "message":
            with self.control_lock:
                self.session.send(self.control, "interrupt_request", {})
        else:
            try:
                os.kill(self.proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    def kill(self):
        """The kernel and its process group killed; any thread may call it."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.kill()
        except OSError:
            pass

    def close(self):
        """Killed, reaped and its sockets closed: the turn's holder only (zmq
        sockets belong to one thread at a time)."""
        self.kill()
        self.proc.wait()
        for s in (self.shell, self.iopub, self.control):
            s.close(0)


def end_old_kernel(pid, connection_file):
    """Kills pid when it is a kernel of that connection file (a pid may have
    been used again by another process since)."""
    if not isinstance(pid, int) or pid <= 1 or not connection_file:
        return
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if connection_file.encode() not in f.read().split(b"\0"):
                return
        os.killpg(pid, signal.SIGKILL)
    except (OSError, ValueError):
        pass


# ipykernel's launcher, started without the one TCP socket it opens: the
# pipe its IOPub thread listens on (127.0.0.1, a random port) for output of
# forked children. A listening TCP socket someone waits on is what gVisor's
# checkpoint cannot save, so with it no sandbox holding a kernel could
# hibernate (docs/code.md). Without it the kernel is what ipykernel makes
# when that bind fails (its own fallback): output printed by forked
# children's Python (multiprocessing) is not forwarded; output written to
# the file descriptors (subprocesses, C code) still is.
IPYKERNEL_NO_TCP = (
    "import sys\n"
    "if sys.path and sys.path[0] == '':\n"
    "    del sys.path[0]\n"
    "from ipykernel import iostream, kernelapp\n"
    "def _no_pipe(self):\n"
    "    self._pipe_flag = False\n"
    "if hasattr(iostream.IOPubThread, '_setup_pipe_in'):\n"
    "    iostream.IOPubThread._setup_pipe_in = _no_pipe\n"
    "kernelapp.launch_new_instance()\n")


def without_tcp_pipe(argv):
    """argv with `-m ipykernel_launcher` replaced by IPYKERNEL_NO_TCP."""
    for i in range(len(argv) - 1):
        if argv[i] == "-m" and argv[i + 1] == "ipykernel_launcher":
            return argv[:i] + ["-c", IPYKERNEL_NO_TCP] + argv[i + 2:]
    return argv


def spawn(argv, cwd, env, log):
    import subprocess
    return subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=log, start_new_session=True, close_fds=True)


class Context:
    def __init__(self, server, name, spec_name, spec, cwd, env):
        self.server = server
        self.name = name
        self.kernel = spec_name
        self.spec = spec
        self.cwd = cwd
        self.env = env
        self.dir = os.path.join(server.root, "c", name)
        self.turns = Turns()
        self.lock = threading.Lock()
        self.k = None
        self.busy = False
        self.interrupted = False  # by an interrupt request, for the running cell
        # The kernel has begun the running cell (its execute_input came). An
        # interrupt before that would be lost (ipykernel ignores SIGINT
        # between cells), so it waits for it: see Run.started.
        self.started = False
        self.lost = None          # why the last kernel's state is gone (said at the next run)
        self.created_at = time.time()
        self.last_run_at = None
        self.execution_count = 0
        self.deleted = False
        self.restarting = False

    def kernel_env(self):
        env = dict(os.environ)
        env.update(self.server.kernel_defaults)
        env.update(self.spec.env or {})
        env.update(self.env)
        return env

    def log_tail(self):
        try:
            with open(os.path.join(self.dir, "kernel.log"), "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 2000))
                text = f.read().decode("utf-8", "replace").strip()
        except OSError:
            text = ""
        return text or "(the kernel printed nothing)"

    def info(self):
        with self.lock:
            if self.k is None:
                state = "stopped"
            elif not self.k.alive():
                state = "dead"
            else:
                state = "busy" if self.busy else "idle"
            return {"event": "context", "name": self.name, "kernel": self.kernel,
                    "language": self.spec.language, "cwd": self.cwd, "state": state,
                    "execution_count": self.execution_count, "created_at": self.created_at,
                    "last_run_at": self.last_run_at, "queued": self.turns.queued()}

    def start(self):
        """A fresh kernel (the turn's holder calls it)."""
        k = Kernel(self)
        try:
            k.wait_ready()
        except Exception:
            k.close()
            raise
        with self.lock:
            self.k = k
            self.execution_count = 0
        self.save(k.proc.pid)

    def save(self, pid):
        """The context's record (context.json): a driver started again (this
        one was killed) knows its contexts, says their state was lost, and
        ends their old kernels."""
        rec = {"name": self.name, "kernel": self.kernel, "cwd": self.cwd, "env": self.env,
               "created_at": self.created_at, "pid": pid,
               "connection_file": os.path.join(self.dir, "kernel.json")}
        tmp = os.path.join(self.dir, ".context.json")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(rec, f)
        os.rename(tmp, os.path.join(self.dir, "context.json"))

    def stop(self, why):
        """The kernel gone (the turn's holder calls it)."""
        with self.lock:
            k, self.k = self.k, None
        if k is not None:
            k.close()
        if why:
            self.lost = why

    def kill(self):
        """The kernel killed from outside the turn: a cell running now ends,
        and whoever holds the turn next replaces or closes it."""
        with self.lock:
            k = self.k
        if k is not None:
            k.kill()

    def ensure_alive(self, reply):
        """Before a run: a kernel that died is replaced and the run is told."""
        with self.lock:
            k = self.k
        if k is not None and k.alive():
            return True
        why = self.lost or ("the kernel died (%s)" % k.exit_text() if k else None)
        if k is not None:
            self.stop(None)
        try:
            self.start()
        except Exception as exc:
            reply.fail("start_failed", str(exc))
            return False
        if why:
            reply.send({"event": "restarted", "reason": why, "state_lost": True})
        self.lost = None
        return True


class Run:
    """One cell: the execute request and its messages, until idle."""

    def __init__(self, ctx, reply, code, timeout_s, max_output):
        self.ctx = ctx
        self.k = ctx.k
        self.reply = reply
        self.code = code
        self.timeout_s = timeout_s
        self.max_output = max_output
        self.sent = 0
        self.truncated = False
        self.status = None
        self.message = None
        self.execution_count = None

    def emit(self, event, size):
        if self.sent + size > self.max_output:
            if not self.truncated:
                self.truncated = True
                self.reply.send({"event": "truncated", "limit": self.max_output})
            return
        self.sent += size
        self.reply.send(event)

    def on_iopub(self, msg):
        kind, c = msg["msg_type"], msg["content"]
        if kind == "stream":
            name = "stderr" if c.get("name") == "stderr" else "stdout"
            text = c.get("text", "")
            self.emit({"event": name, "text": text}, len(text))
        elif kind in ("display_data", "update_display_data", "execute_result"):
            data = {m: v for m, v in (c.get("data") or {}).items() if m in MIME_TYPES}
            for m in BASE64_TYPES:  # Jupyter's base64 may carry line breaks
                if isinstance(data.get(m), str):
                    data[m] = "".join(data[m].split())
            size = sum(len(json.dumps(v)) for v in data.values())
            if kind == "execute_result":
                self.execution_count = c.get("execution_count")
                self.emit({"event": "result", "data": data,
                           "execution_count": self.execution_count}, size)
            else:
                self.emit({"event": "display", "data": data}, size)
        elif kind == "error":
            tb = "\n".join(ANSI_RE.sub("", line) for line in c.get("traceback") or [])
            self.reply.send({"event": "error", "name": c.get("ename", ""),
                             "value": c.get("evalue", ""), "traceback": tb})
        elif kind == "execute_input":
            self.execution_count = c.get("execution_count")
            self.started()

    def started(self):
        """The kernel has begun the cell: an interrupt asked before now is sent."""
        with self.ctx.lock:
            pending = self.ctx.interrupted and not self.ctx.started
            self.ctx.started = True
        if pending:
            self.k.interrupt()

    def run(self):
        k = self.k
        for sock in (k.iopub, k.shell):  # what earlier cells left
            while sock.poll(0):
                k.recv(sock)
        msg = k.session.send(k.shell, "execute_request", {
            "code": self.code, "silent": False, "store_history": True,
            # Runs are queued here, one at a time, never in the kernel: a
            # cell's error has no queued cell to abort. With stop_on_error
            # the kernel also aborted, unrun, a cell sent just after an
            # interrupted one (ipykernel aborts for a moment after an error).
            "user_expressions": {}, "allow_stdin": False, "stop_on_error": False})
        mid = msg["header"]["msg_id"]
        t0 = time.monotonic()
        deadline = t0 + self.timeout_s if self.timeout_s > 0 else None
        grace = None
        idle = replied = False
        reply_status = None
        poller = zmq.Poller()
        poller.register(k.iopub, zmq.POLLIN)
        poller.register(k.shell, zmq.POLLIN)
        poller.register(self.reply.conn.fileno(), zmq.POLLIN)
        while not (idle and replied):
            for sock, _ in poller.poll(POLL_MS):
                if sock == self.reply.conn.fileno():
                    if self.reply.closed() and self.status is None:
                        self.status = "cancelled"
                        k.interrupt()
                        grace = time.monotonic() + INTERRUPT_GRACE_S
                        poller.unregister(self.reply.conn.fileno())
                    continue
                m = k.recv(sock)
                if m["parent_header"].get("msg_id") != mid:
                    continue
                if sock is k.shell and m["msg_type"] == "execute_reply":
                    replied = True
                    reply_status = m["content"].get("status")
                    self.execution_count = m["content"].get("execution_count",
                                                            self.execution_count)
                elif sock is k.iopub:
                    if m["msg_type"] == "status" and m["content"].get("execution_state") == "idle":
                        idle = True
                    else:
                        self.on_iopub(m)
            now = time.monotonic()
            if not k.alive():
                if self.status == "cancelled":
                    pass  # the client went away; nobody reads the end
                elif self.ctx.deleted or self.ctx.restarting:
                    self.status = "cancelled"
                    self.message = "the context was %s while the cell ran" % (
                        "deleted" if self.ctx.deleted else "restarted")
                else:
                    self.status = "died"
                    why = "the kernel died while running a cell (%s)" % k.exit_text()
                    self.message = why + "; the next run starts a fresh kernel: its state is lost"
                    self.ctx.lost = why
                    self.reply.send({"event": "error", "name": "KernelDied", "value": why,
                                     "traceback": ""})
                break
            if deadline is not None and now > deadline and grace is None:
                self.status = "timeout"
                self.message = "the cell ran past its timeout of %g s and was interrupted" % \
                    self.timeout_s
                k.interrupt()
                grace = now + INTERRUPT_GRACE_S
            elif grace is not None and now > grace:
                why = "a cell did not stop %g s after it was interrupted, so the kernel was " \
                      "killed" % INTERRUPT_GRACE_S
                self.message = (self.message + "; " if self.message else "") + why + \
                    ": the next run starts a fresh kernel and its state is lost"
                self.ctx.stop(why)
                break
            elif idle and not replied and grace is None:
                grace = now + 1.0  # the reply is late; it is not needed for the end
        if self.status is None:
            if self.ctx.interrupted:
                self.status = "interrupted"
            elif reply_status == "ok":
                self.status = "ok"
            else:
                self.status = "error"
                if reply_status == "aborted" and not self.message:
                    self.message = "the kernel aborted the cell without running it"
        end = {"event": "end", "status": self.status, "execution_count": self.execution_count,
               "duration_ms": round((time.monotonic() - t0) * 1000.0, 3)}
        if self.message:
            end["message"] = self.message
        if self.truncated:
            end["truncated"] = True
        return end


class Server:
    def __init__(self, root):
        self.root = root
        self.contexts = {}
        self.lock = threading.Lock()
        for d in ("c", "ipython", "mpl", "runtime"):
            os.makedirs(os.path.join(root, d), mode=0o700, exist_ok=True)
        self.ksm = KernelSpecManager()
        self.connections = 0
        self.kernel_defaults = KERNEL_DEFAULTS
        self.restore()

    def restore(self):
        """The contexts of a driver that was killed: each comes back without a
        kernel, its state lost (said at its next run); a kernel of theirs that
        still runs (its command line names its connection file) is killed."""
        cdir = os.path.join(self.root, "c")
        for name in sorted(os.listdir(cdir)):
            try:
                with open(os.path.join(cdir, name, "context.json")) as f:
                    rec = json.load(f)
                spec = self.ksm.get_kernel_spec(rec["kernel"])
            except Exception:
                continue
            if rec.get("name") != name or not NAME_RE.match(name):
                continue
            end_old_kernel(rec.get("pid"), rec.get("connection_file"))
            ctx = Context(self, name, rec["kernel"], spec, rec.get("cwd") or "/workspace",
                          rec.get("env") or {})
            ctx.created_at = rec.get("created_at") or ctx.created_at
            ctx.lost = "the sandbox's code driver was stopped (its processes were killed)"
            self.contexts[name] = ctx

    # ---- kernelspecs ----
    def find_spec(self, kernel, language):
        if kernel:
            try:
                return kernel, self.ksm.get_kernel_spec(kernel)
            except NoSuchKernel:
                return None, "no kernel named %r in this sandbox (kernels: %s)" % (
                    kernel, ", ".join(sorted(self.ksm.find_kernel_specs())) or "none")
        lang = (language or "python").lower()
        names = sorted(self.ksm.find_kernel_specs())
        if lang == "python" and "python3" in names:
            names.remove("python3")
            names.insert(0, "python3")
        for name in names:
            try:
                spec = self.ksm.get_kernel_spec(name)
            except Exception:
                continue
            if (spec.language or "").lower() == lang:
                return name, spec
        return None, "no kernel for language %r in this sandbox (kernels: %s)" % (
            language or "python", ", ".join(names) or "none")

    # ---- operations ----
    def create(self, req, reply, quiet_exists=False):
        name = req.get("context")
        if not isinstance(name, str) or not NAME_RE.match(name):
            return reply.fail("bad_request", "a context name is 1-64 letters, digits, _ . -")
        with self.lock:
            if name in self.contexts:
                if quiet_exists:
                    return self.contexts[name]
                return reply.fail("exists", "context %r exists" % name)
            if len(self.contexts) >= int(req.get("max_contexts") or 8):
                return reply.fail("limit", "this sandbox has %d contexts, its limit: delete one "
                                  "first" % len(self.contexts))
            spec_name, spec = self.find_spec(req.get("kernel"), req.get("language"))
            if spec_name is None:
                return reply.fail("no_kernel", spec)
            env = req.get("env") or {}
            if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
                return reply.fail("bad_request", "env is an object of strings")
            ctx = Context(self, name, spec_name, spec, req.get("cwd") or "/workspace", env)
            os.makedirs(ctx.dir, mode=0o700, exist_ok=True)
            self.contexts[name] = ctx
        ctx.turns.take(None)
        try:
            ctx.start()
        except Exception as exc:
            with self.lock:
                self.contexts.pop(name, None)
            shutil.rmtree(ctx.dir, ignore_errors=True)
            ctx.turns.release()
            return reply.fail("start_failed", str(exc))
        ctx.turns.release()
        return ctx

    def get(self, req, reply):
        with self.lock:
            ctx = self.contexts.get(req.get("context"))
        if ctx is None:
            reply.fail("not_found", "no context %r in this sandbox" % req.get("context"))
        return ctx

    def op_create(self, req, reply):
        ctx = self.create(req, reply, quiet_exists=bool(req.get("ensure")))
        if isinstance(ctx, Context):
            reply.send(ctx.info())

    def op_run(self, req, reply):
        code = req.get("code")
        if not isinstance(code, str):
            return reply.fail("bad_request", "code is a string")
        if req.get("ensure"):
            ctx = self.create(req, reply, quiet_exists=True)
            if not isinstance(ctx, Context):
                return
        else:
            ctx = self.get(req, reply)
            if ctx is None:
                return
        try:
            ctx.turns.take(reply)
        except Gone:
            return
        try:
            if ctx.deleted:
                return reply.fail("not_found", "context %r was deleted" % ctx.name)
            if not ctx.ensure_alive(reply):
                return
            with ctx.lock:
                ctx.busy = True
                ctx.interrupted = False
                ctx.started = False
            run = Run(ctx, reply, code, float(req.get("timeout_s") or 0),
                      int(req.get("max_output") or (16 << 20)))
            reply.send({"event": "start", "context": ctx.name})
            end = run.run()
            with ctx.lock:
                ctx.last_run_at = time.time()
                if isinstance(run.execution_count, int):
                    ctx.execution_count = run.execution_count
            reply.send(end)
        finally:
            with ctx.lock:
                ctx.busy = False
            ctx.turns.release()

    def op_interrupt(self, req, reply):
        ctx = self.get(req, reply)
        if ctx is None:
            return
        with ctx.lock:
            busy, k = ctx.busy, ctx.k
            if busy:
                ctx.interrupted = True
            # Before the kernel has begun the cell, Run.started sends it.
            now = busy and ctx.started
        if now and k is not None:
            k.interrupt()
        reply.send({"event": "ok", "interrupted": bool(busy)})

    def op_restart(self, req, reply):
        ctx = self.get(req, reply)
        if ctx is None:
            return
        ctx.restarting = True
        ctx.kill()  # a cell running now ends "cancelled"
        ctx.turns.take(None, front=True)
        try:
            ctx.restarting = False
            ctx.stop(None)
            ctx.start()
            ctx.lost = None
        except Exception as exc:
            return reply.fail("start_failed", str(exc))
        finally:
            ctx.turns.release()
        reply.send(ctx.info())

    def op_delete(self, req, reply):
        with self.lock:
            ctx = self.contexts.pop(req.get("context"), None)
        if ctx is None:
            return reply.fail("not_found", "no context %r in this sandbox" % req.get("context"))
        ctx.deleted = True
        ctx.kill()
        ctx.turns.take(None, front=True)
        try:
            ctx.stop(None)
            shutil.rmtree(ctx.dir, ignore_errors=True)
        finally:
            ctx.turns.release()
        reply.send({"event": "ok", "deleted": ctx.name})

    def op_list(self, req, reply):
        with self.lock:
            ctxs = sorted(self.contexts.values(), key=lambda c: c.name)
        reply.send({"event": "list", "contexts": [c.info() for c in ctxs]})

    def op_info(self, req, reply):
        ctx = self.get(req, reply)
        if ctx is not None:
            reply.send(ctx.info())

    OPS = {"create": op_create, "run": op_run, "interrupt": op_interrupt,
           "restart": op_restart, "delete": op_delete, "list": op_list, "info": op_info}

    # ---- connections ----
    def serve_one(self, conn):
        reply = Reply(conn)
        try:
            buf = b""
            while b"\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
                if len(buf) > REQUEST_MAX:
                    return reply.fail("bad_request", "the request is over %d bytes" % REQUEST_MAX)
            try:
                req = json.loads(buf.split(b"\n", 1)[0])
            except ValueError:
                return reply.fail("bad_request", "the request is not JSON")
            op = self.OPS.get(req.get("op")) if isinstance(req, dict) else None
            if op is None:
                return reply.fail("bad_request", "unknown operation")
            op(self, req, reply)
        except Exception as exc:  # one request's failure is its own
            reply.fail("internal", "%s: %s" % (type(exc).__name__, exc))
        finally:
            with self.lock:
                self.connections -= 1
            try:
                conn.close()
            except OSError:
                pass

    def serve(self, listener):
        while True:
            try:
                conn, _ = listener.accept()
            except OSError as exc:
                if exc.errno in (errno.EINTR, errno.ECONNABORTED, errno.EMFILE):
                    time.sleep(0.05)
                    continue
                raise
            with self.lock:
                full = self.connections >= CONNECTIONS_MAX
                if not full:
                    self.connections += 1
            if full:
                Reply(conn).fail("busy", "too many requests at once in this sandbox")
                conn.close()
                continue
            threading.Thread(target=self.serve_one, args=(conn,), daemon=True).start()


def main():
    root, ready_fd = sys.argv[1], int(sys.argv[2])
    os.umask(0o077)
    server = Server(root)
    path = os.path.join(root, "ctl.sock")
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    os.write(ready_fd, b"ready\n")
    os.close(ready_fd)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    server.serve(listener)


main()
