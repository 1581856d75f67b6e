"""A small client for sandman's runner service (`sandman worker start`).

Standard library only. Talks HTTP over the runner's unix socket or TCP:

    from sandman_client import Client

    c = Client("unix:/run/user/1000/sandman/sandman.sock", token="...")
    r = c.execute(command="echo hello", tool="shell", run_id="run-1")
    print(r["stdout"], r["exit_code"])

Addresses: "unix:PATH", "unix://PATH", "tcp://HOST:PORT", "http://HOST:PORT".
With none given, the SANDMAN_URL variable, else the runner's default socket
($XDG_RUNTIME_DIR/sandman/sandman.sock, /run/sandman/sandman.sock for
root). The token defaults to the SANDMAN_TOKEN variable. Every call opens
its own connection, so one Client may be shared by many threads.

Errors: an HTTP status of 400 or more raises SandmanError with the runner's
"error" and "failure_kind" (and the whole answer in .body). A tool that ran
and failed is not an error: its answer has "ok": false. When no runner
answers at all, SandmanUnreachable (a ConnectionError) says which address
was tried and where that address came from.
"""

import base64
import hashlib
import hmac
import http.client
import json
import os
import socket
import urllib.parse

__all__ = ["Client", "Files", "Contexts", "Execution", "Result", "Logs", "ExecutionError",
           "SandmanError", "SandmanUnreachable", "derive_worker_token", "default_address"]

WORKER_TOKEN_PREFIX = b"sandman-worker-token-v1"


def derive_worker_token(control_token, worker_key):
    """The per-worker token: hex(HMAC-SHA256(control token,
    "sandman-worker-token-v1" NUL worker_key)), as `sandman token derive`."""
    if isinstance(control_token, str):
        control_token = control_token.encode()
    if isinstance(worker_key, str):
        worker_key = worker_key.encode()
    msg = WORKER_TOKEN_PREFIX + b"\0" + worker_key
    return hmac.new(control_token, msg, hashlib.sha256).hexdigest()


def default_address():
    """The runner's default unix socket, as `sandman worker start` picks it."""
    if os.geteuid() == 0:
        return "unix:/run/sandman/sandman.sock"
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and xdg.startswith("/"):
        return "unix:" + os.path.join(xdg, "sandman", "sandman.sock")
    return "unix:/tmp/sandman-%d/sandman.sock" % os.geteuid()


class SandmanError(Exception):
    """The runner refused or failed a request (HTTP status >= 400)."""

    def __init__(self, status, body, request_id=None):
        self.status = status
        self.body = body if isinstance(body, dict) else {}
        self.error = self.body.get("error") or (body if isinstance(body, str) else "")
        self.failure_kind = self.body.get("failure_kind")
        self.request_id = request_id
        super().__init__("HTTP %d: %s (%s)" % (status, self.error, self.failure_kind))


class SandmanUnreachable(ConnectionError):
    """No runner answers at the client's address (nothing listens, no such
    socket, refused, timed out)."""

    def __init__(self, address, source, cause):
        self.address = address
        self.source = source
        self.cause = cause
        super().__init__(
            "no sandman runner answers at %s (%s): %s; start one with `sandman worker start`, "
            "or set SANDMAN_URL to its address (unix:PATH or tcp://HOST:PORT)"
            % (address, source, cause))


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


class Client:
    """One runner. token: the control token or a worker's derived token."""

    def __init__(self, address=None, token=None, timeout=600.0):
        if address:
            self.address, self.address_source = address, "given to Client"
        elif os.environ.get("SANDMAN_URL"):
            self.address, self.address_source = os.environ["SANDMAN_URL"], "from SANDMAN_URL"
        else:
            self.address, self.address_source = default_address(), "the default socket"
        self.token = token if token is not None else os.environ.get("SANDMAN_TOKEN")
        self.timeout = timeout
        self.last_request_id = None
        a = self.address
        if a.startswith("unix://"):
            self._unix, self._host = a[len("unix://"):], None
        elif a.startswith("unix:"):
            self._unix, self._host = a[len("unix:"):], None
        elif a.startswith("tcp://") or a.startswith("http://"):
            u = urllib.parse.urlsplit("http://" + a.split("://", 1)[1])
            self._unix, self._host = None, (u.hostname, u.port or 80)
        else:
            raise ValueError("address must be unix:PATH or tcp://HOST:PORT, not %r" % a)

    @classmethod
    def for_worker(cls, address, control_token, worker_key, **kw):
        """A client holding a worker's derived token (serves that key only)."""
        return cls(address, derive_worker_token(control_token, worker_key), **kw)

    # ---- transport ----

    def _connection(self):
        if self._unix is not None:
            return _UnixConnection(self._unix, self.timeout)
        return http.client.HTTPConnection(self._host[0], self._host[1], timeout=self.timeout)

    def request(self, method, path, body=None, auth=True):
        """Raw call: returns (status, parsed JSON or text, request id)."""
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if auth and self.token:
            headers["Authorization"] = "Bearer " + self.token
        conn = self._connection()
        try:
            try:
                conn.connect()
            except OSError as e:
                raise SandmanUnreachable(self.address, self.address_source,
                                         e.strerror or str(e)) from None
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            rid = resp.getheader("X-Request-Id")
            ctype = resp.getheader("Content-Type") or ""
        finally:
            conn.close()
        self.last_request_id = rid
        text = raw.decode("utf-8", "replace")
        parsed = text
        if ctype.startswith("application/json"):
            try:
                parsed = json.loads(text)
            except ValueError:
                pass
        return resp.status, parsed, rid

    def _open(self, method, path, body=None, headers=None):
        """A request whose answer is read by the caller: (connection, response).
        body may be bytes or a file object (sent chunked as it is read)."""
        h = dict(headers or {})
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        conn = self._connection()
        try:
            conn.connect()
        except OSError as e:
            conn.close()
            raise SandmanUnreachable(self.address, self.address_source,
                                     e.strerror or str(e)) from None
        try:
            chunked = body is not None and not isinstance(body, (bytes, bytearray))
            conn.request(method, path, body=body, headers=h, encode_chunked=chunked)
            resp = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        self.last_request_id = resp.getheader("X-Request-Id")
        return conn, resp

    def _raise(self, resp, raw):
        text = raw.decode("utf-8", "replace")
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = text
        raise SandmanError(resp.status, parsed, resp.getheader("X-Request-Id"))

    def _call(self, method, path, body=None, auth=True):
        status, parsed, rid = self.request(method, path, body, auth)
        if status >= 400:
            raise SandmanError(status, parsed, rid)
        return parsed

    # ---- routes ----

    def health(self):
        """GET /healthz (no token needed)."""
        return self._call("GET", "/healthz", auth=False)

    healthz = health  # the earlier name, kept

    def execute(self, argv=None, command=None, **kw):
        """Runs one tool call: the `sandman run --json` object, plus "handle"
        when the call outlived timeout_s with background_on_timeout.
        Arguments: argv or command, tool, stdin (bytes or str), env (dict),
        agent, user, project, run_id, worker_key, mode, timeout_s,
        background_on_timeout, lease_id, workspace, sync, params."""
        return self._call("POST", "/v1/execute",
                          self._execute_body(argv=argv, command=command, **kw))

    @staticmethod
    def _execute_body(argv=None, command=None, tool=None, stdin=None, env=None, agent=None,
                      user=None, project=None, run_id=None, worker_key=None, mode=None,
                      timeout_s=None, background_on_timeout=None, lease_id=None,
                      workspace=None, sync=None, params=None, sandbox_id=None, replace=None):
        body = {}
        if argv is not None:
            body["argv"] = list(argv)
        if command is not None:
            body["command"] = command
        if stdin is not None:
            if isinstance(stdin, str):
                stdin = stdin.encode()
            body["stdin_b64"] = base64.b64encode(stdin).decode()
        for k, v in (("tool", tool), ("env", env), ("agent", agent), ("user", user),
                     ("project", project), ("run_id", run_id), ("worker_key", worker_key),
                     ("mode", mode), ("timeout_s", timeout_s),
                     ("background_on_timeout", background_on_timeout),
                     ("lease_id", lease_id), ("workspace", workspace), ("sync", sync),
                     ("params", params), ("sandbox_id", sandbox_id), ("replace", replace)):
            if v is not None:
                body[k] = v
        return body

    def execute_stream(self, argv=None, command=None, **kw):
        """Runs one tool call with its output streamed: yields the events as
        they come ({"event": "stdout"|"stderr", "data" or "data_b64"}), then
        {"event": "result", "status", "result"}. Closing the generator early
        disconnects, which cancels the call. Takes execute's arguments."""
        body = self._execute_body(argv=argv, command=command, **kw)
        body["stream"] = True
        conn, resp = self._open("POST", "/v1/execute", json.dumps(body).encode(),
                                {"Content-Type": "application/json",
                                 "Accept": "application/x-ndjson"})
        try:
            if resp.status >= 400:
                self._raise(resp, resp.read())
            while True:
                line = resp.readline(64 * 1024 * 1024)
                if not line:
                    break
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()

    def create_lease(self, tool, services, ttl_s=None, max_uses=None, worker_key=None):
        """A credential lease for one tool: {"lease_id", "expires_at", "max_uses"}."""
        body = {"tool": tool, "services": list(services)}
        if ttl_s is not None:
            body["ttl_s"] = ttl_s
        if max_uses is not None:
            body["max_uses"] = max_uses
        if worker_key is not None:
            body["worker_key"] = worker_key
        return self._call("POST", "/v1/leases", body)

    def handle(self, handle_id):
        """State and output so far of a background call."""
        return self._call("GET", "/v1/handles/" + handle_id)

    def kill_handle(self, handle_id):
        """Kills a background call (if still running) and forgets its handle."""
        return self._call("DELETE", "/v1/handles/" + handle_id)

    kill = kill_handle  # the earlier name, kept

    def sandboxes(self, all=False):
        return self._call("GET", "/v1/sandboxes" + ("?all=1" if all else ""))

    # ---- sandboxes as resources (docs/http-api.md#sandboxes) ----

    def create_sandbox(self, template=None, image=None, **kw):
        """Makes a sandbox ahead of its calls and returns its description
        ({"id", "name", "run_id", "template", "resources", "timeout_s",
        "idle_timeout_s", "expires_at", "labels", ...}). Arguments: template
        or image, mode (per_run, per_worker), run_id, worker_key, project,
        agent, cpu, memory, pids, disk (sizes: bytes or "512m"), network,
        timeout_s (its life), idle_timeout_s, labels (dict)."""
        body = {k: v for k, v in kw.items() if v is not None}
        if template is not None:
            body["template"] = template
        if image is not None:
            body["image"] = image
        return self._call("POST", "/v1/sandboxes", body)

    @staticmethod
    def _sandbox_path(sandbox_id, suffix="", worker_key=None):
        path = "/v1/sandboxes/" + urllib.parse.quote(sandbox_id, safe="") + suffix
        if worker_key is not None:
            path += "?" + urllib.parse.urlencode({"worker_key": worker_key})
        return path

    def get_sandbox(self, sandbox_id, worker_key=None):
        """A sandbox's description (404 when missing, or another worker's)."""
        return self._call("GET", self._sandbox_path(sandbox_id, "", worker_key))

    def list_sandboxes(self, labels=None, all=False, worker_key=None):
        """The sandboxes this token may see, those carrying every label of
        labels (a dict; a value None matches any value of that key)."""
        query = []
        for k, v in (labels or {}).items():
            query.append(("label", k if v is None else "%s=%s" % (k, v)))
        if all:
            query.append(("all", "1"))
        if worker_key is not None:
            query.append(("worker_key", worker_key))
        qs = ("?" + urllib.parse.urlencode(query)) if query else ""
        return self._call("GET", "/v1/sandboxes" + qs)

    def keep_alive(self, sandbox_id, worker_key=None):
        """Records a use now: the sandbox's idle timeout counts from here."""
        return self._call("POST", self._sandbox_path(sandbox_id, "/keepalive", worker_key))

    def delete_sandbox(self, sandbox_id, worker_key=None):
        """Removes the sandbox (calls in flight in it are killed)."""
        return self._call("DELETE", self._sandbox_path(sandbox_id, "", worker_key))

    def reap(self, older_than_s, dry_run=False, force=False):
        return self._call("POST", "/v1/sandboxes/reap",
                          {"older_than_s": older_than_s, "dry_run": dry_run, "force": force})

    def metrics(self):
        return self._call("GET", "/metrics")

    # ---- code contexts of a keyed sandbox (/v1/contexts) ----

    @property
    def contexts(self):
        """The code contexts: c.contexts.create({"run_id": "r1"}, "data")."""
        return Contexts(self)

    def run_code_stream(self, code, context=None, **kw):
        """Runs code in a code context of a keyed sandbox, yielding its
        events as they come ({"event": "start" | "restarted" | "stdout" |
        "stderr" | "display" | "result" | "error" | "truncated" | "notice" |
        "end", ...}; docs/code.md). context None: the sandbox's default
        context (made on first use). Name the sandbox with run_id or
        worker_key (and mode, project, agent, user); also timeout_s,
        max_output, and for a context this run makes: kernel, language, cwd,
        env (dict). A failure after the first event raises SandmanError
        (status 502, the "fail" line as its body). Closing the generator
        early disconnects, which interrupts the cell."""
        body = {"code": code}
        for k, v in kw.items():
            if v is not None:
                body[k] = v
        path = "/v1/contexts/%s/run" % urllib.parse.quote(context or "default", safe="")
        conn, resp = self._open("POST", path, json.dumps(body).encode(),
                                {"Content-Type": "application/json",
                                 "Accept": "application/x-ndjson"})
        try:
            if resp.status >= 400:
                self._raise(resp, resp.read())
            while True:
                line = resp.readline(64 * 1024 * 1024)
                if not line:
                    break
                if not line.strip():
                    continue
                ev = json.loads(line)
                if ev.get("event") == "fail":
                    raise SandmanError(502, ev, self.last_request_id)
                yield ev
        finally:
            conn.close()

    def run_code(self, code, context=None, on_stdout=None, on_stderr=None, on_result=None,
                 on_error=None, **kw):
        """Runs code (as run_code_stream) and gathers its events into an
        Execution (results, logs, error: the shape of E2B's code
        interpreter). on_stdout(text), on_stderr(text), on_result(Result),
        on_error(ExecutionError) are called as the events come."""
        x = Execution()
        for ev in self.run_code_stream(code, context, **kw):
            x._add(ev)
            kind = ev.get("event")
            if kind == "stdout" and on_stdout:
                on_stdout(ev["text"])
            elif kind == "stderr" and on_stderr:
                on_stderr(ev["text"])
            elif kind in ("display", "result") and on_result:
                on_result(x.results[-1])
            elif kind == "error" and on_error:
                on_error(x.error)
        return x

    # ---- files of a keyed sandbox (/v1/files) ----

    @property
    def files(self):
        """The files routes: c.files.write({"run_id": "r1"}, "src/a.c", b"...")."""
        return Files(self)


def _files_path(route, key, **query):
    q = [(k, v) for k, v in dict(key).items() if v is not None]
    for k, v in query.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "1" if v else "0"
        if isinstance(v, (list, tuple)):
            q += [(k, x) for x in v]
        else:
            q.append((k, v))
    return "/v1/files/" + route + "?" + urllib.parse.urlencode(q)


class Files:
    """The files of a per_run or per_worker sandbox. key names the sandbox:
    {"run_id": ...} or {"worker_key": ...}, with "mode", "project", "agent"
    if needed. Paths are relative to /workspace."""

    def __init__(self, client):
        self.c = client

    def _json(self, method, route, key, body=None, **query):
        conn, resp = self.c._open(method, _files_path(route, key, **query), body,
                                  {"Content-Type": "application/octet-stream"}
                                  if body is not None else None)
        try:
            raw = resp.read()
        finally:
            conn.close()
        if resp.status >= 400:
            self.c._raise(resp, raw)
        return json.loads(raw.decode())

    def read(self, key, path, offset=None, length=None):
        """The file's bytes (or length bytes from offset)."""
        out = bytearray()
        self.read_to(key, path, out.extend, offset, length)
        return bytes(out)

    def read_text(self, key, path, offset=None, length=None, encoding="utf-8"):
        """The file decoded as text (as the TypeScript client's readText)."""
        return self.read(key, path, offset, length).decode(encoding)

    def read_to(self, key, path, write, offset=None, length=None, chunk=1024 * 1024):
        """Streams the file to write(bytes) (never whole in memory): its size."""
        conn, resp = self.c._open("GET", _files_path("content", key, path=path, offset=offset,
                                                     length=length))
        try:
            if resp.status >= 400:
                self.c._raise(resp, resp.read())
            n = 0
            while True:
                b = resp.read(chunk)
                if not b:
                    break
                write(b)
                n += len(b)
            want = resp.getheader("Content-Length")
            if want is not None and int(want) != n:
                raise SandmanError(502, {"error": "the file's content was cut short",
                                         "failure_kind": "sandbox"})
            return n
        finally:
            conn.close()

    def write(self, key, path, data, perm=None, parents=True, exclusive=False):
        """Writes data (bytes, str, or a file object streamed as it is read):
        {"path", "size", "sandbox_id"}. The file appears whole or not at all."""
        if isinstance(data, str):
            data = data.encode()
        return self._json("PUT", "content", key, data, path=path,
                          perm=None if perm is None else "%04o" % perm, parents=parents,
                          exclusive=exclusive)

    def delete(self, key, path, recursive=False):
        return self._json("DELETE", "content", key, path=path, recursive=recursive)

    def mkdir(self, key, path, perm=None, parents=True):
        return self._json("POST", "mkdir", key, path=path,
                          perm=None if perm is None else "%04o" % perm, parents=parents)

    def stat(self, key, path):
        return self._json("GET", "stat", key, path=path)

    def list(self, key, path=".", depth=1, max=None):
        return self._json("GET", "list", key, path=path, depth=depth, max=max)

    def glob(self, key, pattern, path=None, max=None):
        return self._json("GET", "glob", key, pattern=pattern, path=path, max=max)

    def grep(self, key, pattern, path=None, include=None, ignore_case=None, fixed=None,
             max=None):
        return self._json("GET", "grep", key, pattern=pattern, path=path, include=include,
                          ignore_case=ignore_case, fixed=fixed, max=max)

    def upload_tar(self, key, path, tar):
        """Extracts a tar (bytes or a file object) under folder path:
        {"files", "bytes"}."""
        return self._json("PUT", "archive", key, tar, path=path)

    def download_tar(self, key, paths, write, chunk=1024 * 1024):
        """Streams a tar of paths to write(bytes)."""
        conn, resp = self.c._open("GET", _files_path("archive", key, path=list(paths)))
        try:
            if resp.status >= 400:
                self.c._raise(resp, resp.read())
            while True:
                b = resp.read(chunk)
                if not b:
                    break
                write(b)
        finally:
            conn.close()


# The TypeScript client's name for the same class: both clients name the
# same operations alike (health, execute, execute_stream / executeStream,
# create_lease, handle, kill_handle, sandboxes, reap, metrics, files.*).
SandmanClient = Client


# ---- code contexts ----

_MIME_FIELDS = (("text/plain", "text"), ("text/html", "html"), ("text/markdown", "markdown"),
                ("text/latex", "latex"), ("image/png", "png"), ("image/jpeg", "jpeg"),
                ("image/svg+xml", "svg"), ("application/json", "json"),
                ("application/javascript", "javascript"), ("application/pdf", "pdf"))


class Result:
    """One display or the cell's value: its MIME bundle as fields (text,
    html, markdown, latex, png and jpeg as base64, svg, json, javascript,
    pdf as base64; None when absent); is_main_result for the cell's value."""

    def __init__(self, data, is_main_result=False):
        self.data = dict(data or {})
        for mime, field in _MIME_FIELDS:
            setattr(self, field, self.data.get(mime))
        self.is_main_result = is_main_result

    def formats(self):
        return [field for mime, field in _MIME_FIELDS if mime in self.data]

    def __repr__(self):
        return "Result(%s%s)" % (", ".join(self.formats()),
                                 ", main" if self.is_main_result else "")


class Logs:
    def __init__(self):
        self.stdout = []
        self.stderr = []


class ExecutionError:
    def __init__(self, name, value, traceback):
        self.name = name
        self.value = value
        self.traceback = traceback

    def __repr__(self):
        return "ExecutionError(%s: %s)" % (self.name, self.value)


class Execution:
    """A run's outcome: results (Result), logs (stdout and stderr pieces),
    error (ExecutionError or None), execution_count, status ("ok", "error",
    "timeout", "interrupted", "died", "cancelled"), duration_ms, truncated,
    state_lost (why the context's earlier state is gone, or None), message."""

    def __init__(self):
        self.results = []
        self.logs = Logs()
        self.error = None
        self.execution_count = None
        self.status = None
        self.duration_ms = None
        self.truncated = False
        self.state_lost = None
        self.message = None

    @property
    def text(self):
        """The text of the cell's value, or None."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    def _add(self, ev):
        kind = ev.get("event")
        if kind == "stdout":
            self.logs.stdout.append(ev["text"])
        elif kind == "stderr":
            self.logs.stderr.append(ev["text"])
        elif kind in ("display", "result"):
            self.results.append(Result(ev.get("data"), kind == "result"))
        elif kind == "error":
            self.error = ExecutionError(ev.get("name"), ev.get("value"), ev.get("traceback"))
        elif kind == "restarted":
            self.state_lost = ev.get("reason")
        elif kind == "truncated":
            self.truncated = True
        elif kind == "end":
            self.status = ev.get("status")
            self.execution_count = ev.get("execution_count")
            self.duration_ms = ev.get("duration_ms")
            self.truncated = self.truncated or bool(ev.get("truncated"))
            self.message = ev.get("message")


class Contexts:
    """The code contexts of a per_run or per_worker sandbox. key names the
    sandbox: {"run_id": ...} or {"worker_key": ...}, with "mode", "project",
    "agent", "user" if needed."""

    def __init__(self, client):
        self.c = client

    @staticmethod
    def _path(name=None, verb=None, key=None):
        p = "/v1/contexts"
        if name is not None:
            p += "/" + urllib.parse.quote(name, safe="")
        if verb:
            p += "/" + verb
        if key is not None:
            p += "?" + urllib.parse.urlencode([(k, v) for k, v in key.items() if v is not None])
        return p

    def create(self, key, name, kernel=None, language=None, cwd=None, env=None):
        """Makes context name: {"name", "kernel", "language", "cwd", "state", ...}."""
        body = dict(key)
        body["name"] = name
        for k, v in (("kernel", kernel), ("language", language), ("cwd", cwd), ("env", env)):
            if v is not None:
                body[k] = v
        return self.c._call("POST", self._path(), body)

    def list(self, key):
        return self.c._call("GET", self._path(key=key))["contexts"]

    def get(self, key, name):
        return self.c._call("GET", self._path(name, key=key))

    def delete(self, key, name):
        return self.c._call("DELETE", self._path(name, key=key))

    def interrupt(self, key, name="default"):
        """Interrupts the running cell: {"context", "interrupted": bool}."""
        return self.c._call("POST", self._path(name, "interrupt"), dict(key))

    def restart(self, key, name="default"):
        """A fresh kernel (the state is dropped)."""
        return self.c._call("POST", self._path(name, "restart"), dict(key))
