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

Terminals (docs/terminals.md): c.terminals.create(run_id="run-1") starts a
program on a terminal in a keyed sandbox; c.terminals.attach(id) gives a
TerminalConnection (a WebSocket, written here on the standard library) to
type into it and read its output; c.terminals.screen(id) its screen as text.

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
import select
import socket
import struct
import time
import urllib.parse

__all__ = ["Client", "Files", "FileWatch", "Contexts", "Execution", "Result", "Logs",
           "ExecutionError", "Terminals", "TerminalConnection", "SandmanError", "SandmanUnreachable",
           "derive_worker_token", "default_address"]

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


_WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_WS_MAX = 64 * 1024 * 1024


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

    def _open(self, method, path, body=None, headers=None, auth=True):
        """A request whose answer is read by the caller: (connection, response).
        body may be bytes or a file object (sent chunked as it is read)."""
        h = dict(headers or {})
        if auth and self.token:
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
        background_on_timeout, lease_id, workspace, sync, params, sandbox_id,
        replace, from_snapshot (a new run_id's sandbox made from that snapshot)."""
        return self._call("POST", "/v1/execute",
                          self._execute_body(argv=argv, command=command, **kw))

    @staticmethod
    def _execute_body(argv=None, command=None, tool=None, stdin=None, env=None, agent=None,
                      user=None, project=None, run_id=None, worker_key=None, mode=None,
                      timeout_s=None, background_on_timeout=None, lease_id=None,
                      workspace=None, sync=None, params=None, sandbox_id=None, replace=None,
                      from_snapshot=None):
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
                     ("params", params), ("sandbox_id", sandbox_id), ("replace", replace),
                     ("from_snapshot", from_snapshot)):
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

    # ---- rest, snapshots, fork, rollback, diff (docs/state.md) ----

    def _query_path(self, path, worker_key=None, **query):
        q = [(k, v) for k, v in query.items() if v is not None and v is not False]
        q = [(k, 1 if v is True else v) for k, v in q]
        if worker_key is not None:
            q.append(("worker_key", worker_key))
        return path + (("?" + urllib.parse.urlencode(q)) if q else "")

    def pause_sandbox(self, sandbox_id, tier="freeze", no_wait=False, worker_key=None):
        """Puts a keyed sandbox to rest: tier "freeze", "stop" or "hibernate".
        Waits for calls in flight (no_wait: 409 at once instead). Returns
        {"id", "name", "previous", "state", "since", "changed", ...}."""
        return self._call("POST", self._query_path(self._sandbox_path(sandbox_id, "/pause"), worker_key,
                                                   tier=tier, no_wait=no_wait))

    def resume_sandbox(self, sandbox_id, worker_key=None):
        """Back to running (a call into a resting sandbox does that too)."""
        return self._call("POST", self._sandbox_path(sandbox_id, "/resume", worker_key))

    def snapshot_sandbox(self, sandbox_id, name=None, no_wait=False, worker_key=None, memory=False):
        """Captures a keyed sandbox's writable layer and /workspace under name
        (default snap-<UTC time>-<4 hex>), with memory=True also its
        processes' memory (where hibernate works); returns the snapshot."""
        return self._call("POST", self._query_path(self._sandbox_path(sandbox_id, "/snapshot"), worker_key,
                                                   name=name, no_wait=no_wait, memory=memory))

    def fork_snapshot(self, snapshot, count=1, prefix=None, worker_key=None):
        """Makes count (1 to 64) new per_run sandboxes from a snapshot; returns
        {"forks": [{"run_id", "name", "id", "duration_ms", "error"}]}."""
        return self._call("POST", self._query_path("/v1/sandboxes/fork", worker_key, snapshot=snapshot,
                                                   count=count, prefix=prefix))

    def rollback_sandbox(self, sandbox_id, to, worker_key=None):
        """Returns the sandbox to snapshot to (its "id" in the answer is its new container)."""
        return self._call("POST", self._query_path(self._sandbox_path(sandbox_id, "/rollback"), worker_key,
                                                   snapshot=to))

    def diff_sandbox(self, sandbox_id, from_snapshot, worker_key=None):
        """What changed in the sandbox since from_snapshot: {"added", "modified", "deleted"}."""
        return self._call("GET", self._query_path(self._sandbox_path(sandbox_id, "/diff"), worker_key,
                                                  snapshot=from_snapshot))

    def list_snapshots(self, worker_key=None):
        """The snapshots this token may see, newest first."""
        return self._call("GET", self._query_path("/v1/snapshots", worker_key))

    def get_snapshot(self, name, worker_key=None):
        return self._call("GET", self._query_path("/v1/snapshots/" + urllib.parse.quote(name, safe=""),
                                                  worker_key))

    def delete_snapshot(self, name, worker_key=None):
        return self._call("DELETE", self._query_path("/v1/snapshots/" + urllib.parse.quote(name, safe=""),
                                                     worker_key))

    # ---- ports and preview URLs (docs/ports.md) ----

    def port_request(self, sandbox_id, port, path="/", method="GET", body=None, headers=None,
                     worker_key=None):
        """One HTTP request to a server listening on port of the sandbox's own
        loopback, through /v1/sandboxes/{id}/ports/{port}/{path}. path may
        carry a query. A worker token names its key in worker_key (sent as
        X-Sandman-Worker-Key). Returns a PortAnswer: the server's own answer
        (any status), or the runner's refusal, whose body is JSON with
        "failure_kind" (PortAnswer.refusal): 404 no such sandbox, 502 nothing
        listens or no HTTP answer, 504 no answer in 60 s."""
        h = dict(headers or {})
        if worker_key is not None:
            h["X-Sandman-Worker-Key"] = worker_key
        route = self._sandbox_path(sandbox_id, "/ports/%d" % _port_number(port))
        return self._port_answer(method, route + _relayed_path(path), body, h, True)

    def create_preview(self, sandbox_id, port, ttl_s=None, worker_key=None):
        """A preview URL of the sandbox's port: {"token", "path",
        "sandbox_id", "port", "expires_at"}. Anyone holding its path reaches
        that port (and nothing else) until it expires (ttl_s, 1 to 86400,
        default 3600) or the sandbox is paused, snapshotted, rolled back or
        removed."""
        return self._call("POST", self._query_path(self._sandbox_path(sandbox_id, "/previews"),
                                                   worker_key, port=_port_number(port),
                                                   ttl_s=ttl_s))

    def preview_request(self, preview, path="/", method="GET", body=None, headers=None):
        """A request through a preview URL, sending no token: preview is
        create_preview's answer or its "path". Returns a PortAnswer; an
        unknown, expired or revoked preview is a 404 refusal."""
        return self._port_answer(method, _preview_base(preview) + _relayed_path(path), body,
                                 dict(headers or {}), False)

    def port_stream(self, sandbox_id, port, path="/", method="GET", body=None, headers=None,
                    worker_key=None):
        """port_request with the answer's body not read: a PortStream to
        read it as it comes (a download of any size in bounded memory)."""
        h = dict(headers or {})
        if worker_key is not None:
            h["X-Sandman-Worker-Key"] = worker_key
        route = self._sandbox_path(sandbox_id, "/ports/%d" % _port_number(port))
        return PortStream(*self._open(method, route + _relayed_path(path),
                                      body.encode() if isinstance(body, str) else body, h, True))

    def preview_stream(self, preview, path="/", method="GET", body=None, headers=None):
        """preview_request with the body streamed: a PortStream."""
        return PortStream(*self._open(method, _preview_base(preview) + _relayed_path(path),
                                      body.encode() if isinstance(body, str) else body,
                                      dict(headers or {}), False))

    def port_websocket(self, sandbox_id, port, path="/", headers=None, worker_key=None,
                       max_message=_WS_MAX):
        """A WebSocket to the server on port of the sandbox's loopback,
        through the ports route: a PortWebSocket once the server answered
        101. A refusal (the runner's, or the server's own answer other than
        101) raises SandmanError with its status."""
        h = dict(headers or {})
        if worker_key is not None:
            h["X-Sandman-Worker-Key"] = worker_key
        route = self._sandbox_path(sandbox_id, "/ports/%d" % _port_number(port))
        return PortWebSocket(self, route + _relayed_path(path), h, True, max_message)

    def preview_websocket(self, preview, path="/", headers=None, max_message=_WS_MAX):
        """A WebSocket through a preview URL (no token sent): a
        PortWebSocket; an unknown, expired or revoked preview raises
        SandmanError 404."""
        return PortWebSocket(self, _preview_base(preview) + _relayed_path(path),
                             dict(headers or {}), False, max_message)

    def _port_answer(self, method, route, body, headers, auth):
        if isinstance(body, str):
            body = body.encode()
        conn, resp = self._open(method, route, body, headers, auth)
        try:
            data = resp.read()
        finally:
            conn.close()
        return PortAnswer(resp.status, resp.getheaders(), data)

    def reap(self, older_than_s=None, dry_run=False, force=False):
        """POST /v1/sandboxes/reap: the idle lifecycle, then the reap (as
        `sandman sandbox reap`). older_than_s None: as `sandbox reap`
        without --older-than (a sandbox's own idle timeout). The report's "moved" lists the
        sandboxes the lifecycle put to rest; "removed" and "spared" as
        before. Control token only."""
        body = {"dry_run": dry_run, "force": force}
        if older_than_s is not None:
            body["older_than_s"] = older_than_s
        return self._call("POST", "/v1/sandboxes/reap", body)

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

    @property
    def terminals(self):
        """Terminals in keyed sandboxes: c.terminals.create(run_id="r1")."""
        return Terminals(self)

    def _socket(self):
        """A connected socket to the runner (for a WebSocket)."""
        try:
            if self._unix is not None:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(self.timeout)
                s.connect(self._unix)
            else:
                s = socket.create_connection(self._host, timeout=self.timeout)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as e:
            raise SandmanUnreachable(self.address, self.address_source,
                                     e.strerror or str(e)) from None
        return s


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

    def watch(self, key, path=".", recursive=False):
        """The file events of folder path (and with recursive, the folders
        below it) as they happen: a FileWatch, an iterator of events, made
        once the watches are in place. Paths in events are relative to
        /workspace; a link on path is refused (403) as every files call."""
        conn, resp = self.c._open("GET", _files_path("watch", key, path=path,
                                                      recursive=bool(recursive)),
                                  headers={"Accept": "application/x-ndjson"})
        if resp.status >= 400:
            try:
                self.c._raise(resp, resp.read())
            finally:
                conn.close()
        return FileWatch(conn, resp)

    watch_dir = watch  # the name E2B's SDK uses

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


def _port_number(port):
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError("port must be a number from 1 to 65535, not %r" % (port,))
    return port


def _preview_base(preview):
    """The preview's path without its last slash: create_preview's answer
    or its "path"."""
    base = preview.get("path") if isinstance(preview, dict) else preview
    if not isinstance(base, str) or not base.startswith("/preview/"):
        raise ValueError("preview must be create_preview's answer or its path, not %r"
                         % (preview,))
    return base.rstrip("/")


def _relayed_path(path):
    """The server's path (and query) as the route passes it on."""
    if not isinstance(path, str) or any(c in path for c in "\r\n "):
        raise ValueError("path must be a URL path without spaces or line breaks, not %r"
                         % (path,))
    return path if path.startswith("/") else "/" + path


class PortAnswer:
    """The answer of a request through a port route or a preview URL:
    status, headers (a dict, lower-case names; header_list keeps repeated
    ones such as Set-Cookie), body (bytes)."""

    def __init__(self, status, headers, body):
        self.status = status
        self.header_list = [(k.lower(), v) for k, v in headers]
        self.headers = dict(self.header_list)
        self.body = body

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)

    @property
    def refusal(self):
        """The JSON of a refusal ({"error", "failure_kind"}), the form of the
        runner's own errors; None otherwise. The sandbox's server could
        answer the same form: a hint for messages, never a proof of origin."""
        if self.status < 400 or not self.headers.get("content-type", "").startswith(
                "application/json"):
            return None
        try:
            doc = json.loads(self.body)
        except ValueError:
            return None
        if isinstance(doc, dict) and "failure_kind" in doc and "error" in doc:
            return doc
        return None

    def __repr__(self):
        return "PortAnswer(%d, %d bytes)" % (self.status, len(self.body))


class FileWatch:
    """The file events of a sandbox's folder (Files.watch): iterate over it
    for {"event": "created"|"modified"|"deleted"|"moved"|"overflow"|"end",
    ...} as they happen; "end" (with its "reason") comes last when the
    runner ends the watch. The watches are in place once it is made.
    close() (or leaving a with block) disconnects, which ends the watch."""

    def __init__(self, conn, resp):
        self._conn, self._resp = conn, resp
        self.ended = None  # the "end" event, once it came
        ready = self._next_line()
        if ready is None or ready.get("event") != "ready":
            self.close()
            raise SandmanError(502, {"error": "the watch did not start: %r" % (ready,),
                                     "failure_kind": "sandbox"})
        self.sandbox_id = ready.get("sandbox_id")
        self.path = ready.get("path")
        # Events come when they happen: no read timeout from here on.
        if conn.sock is not None:
            conn.sock.settimeout(None)

    def _next_line(self):
        while True:
            line = self._resp.readline(64 * 1024)
            if not line:
                return None
            if line.strip():
                return json.loads(line)

    def __iter__(self):
        return self

    def __next__(self):
        if self.ended is not None or self._conn is None:
            raise StopIteration
        ev = self._next_line()
        if ev is None:
            self.close()
            raise StopIteration
        if ev.get("event") == "end":
            self.ended = ev
        return ev

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---- terminals (/v1/terminals) ----

class Terminals:
    """Terminals: programs on a pseudo-terminal in a per_run or per_worker
    sandbox, kept by the runner while no client is attached (docs/terminals.md)."""

    def __init__(self, client):
        self.c = client

    def create(self, argv=None, command=None, rows=None, cols=None, env=None, cwd=None,
               run_id=None, worker_key=None, mode=None, project=None, agent=None, user=None,
               network=None, sandbox_id=None):
        """Starts a terminal (default program /bin/sh) in the sandbox of the keys,
        or the one sandbox_id names: its state, {"id", ...}."""
        body = {}
        for k, v in (("argv", list(argv) if argv is not None else None), ("command", command),
                     ("rows", rows), ("cols", cols), ("env", env), ("cwd", cwd),
                     ("sandbox_id", sandbox_id),
                     ("run_id", run_id), ("worker_key", worker_key), ("mode", mode),
                     ("project", project), ("agent", agent), ("user", user),
                     ("network", network)):
            if v is not None:
                body[k] = v
        return self.c._call("POST", "/v1/terminals", body)

    def list(self, worker_key=None):
        """The terminals the token may see (a worker token: give its worker_key)."""
        q = "?" + urllib.parse.urlencode({"worker_key": worker_key}) if worker_key else ""
        return self.c._call("GET", "/v1/terminals" + q)["terminals"]

    def get(self, terminal_id):
        return self.c._call("GET", "/v1/terminals/" + terminal_id)

    def screen(self, terminal_id, scrollback=None, wait_ms=None, quiet_ms=None):
        """The screen as a model reads it: {"text", "lines", "cursor", "rows", "cols", ...}.
        wait_ms: first wait (up to that long) until the screen was quiet for quiet_ms."""
        q = {k: v for k, v in (("scrollback", scrollback), ("wait_ms", wait_ms),
                               ("quiet_ms", quiet_ms)) if v is not None}
        path = "/v1/terminals/%s/screen" % terminal_id
        return self.c._call("GET", path + ("?" + urllib.parse.urlencode(q) if q else ""))

    def screen_text(self, terminal_id, wait_ms=None, quiet_ms=None):
        return self.screen(terminal_id, wait_ms=wait_ms, quiet_ms=quiet_ms)["text"]

    def send(self, terminal_id, data):
        """Types data (bytes or str) into the terminal: {"bytes"}."""
        if isinstance(data, str):
            data = data.encode()
        conn, resp = self.c._open("POST", "/v1/terminals/%s/input" % terminal_id, bytes(data),
                                  {"Content-Type": "application/octet-stream"})
        try:
            raw = resp.read()
        finally:
            conn.close()
        if resp.status >= 400:
            self.c._raise(resp, raw)
        return json.loads(raw.decode())

    def resize(self, terminal_id, rows, cols):
        return self.c._call("POST", "/v1/terminals/%s/resize" % terminal_id,
                            {"rows": rows, "cols": cols})

    def kill(self, terminal_id):
        """Kills the terminal's program and forgets it: its last state."""
        return self.c._call("DELETE", "/v1/terminals/" + terminal_id)

    def attach(self, terminal_id):
        """A WebSocket to the terminal: its screen as it is, then its output as
        it comes (TerminalConnection)."""
        return TerminalConnection(self.c, terminal_id)




class _WebSocket:
    """An RFC 6455 client on a socket to the runner (standard library only):
    the handshake for a path, masked frames out, messages reassembled in
    (at most max_message bytes), pings answered, the close handshake."""

    def __init__(self, client, path, headers=None, auth=True, max_message=_WS_MAX):
        self._buf = b""
        self._closed = False
        self._max = max_message
        self.status = None
        self.headers = {}
        self.sock = client._socket()
        key = base64.b64encode(os.urandom(16)).decode()
        host = "localhost" if client._unix is not None else "%s:%d" % client._host
        head = ("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
                % (path, host, key))
        if auth and client.token:
            head += "Authorization: Bearer %s\r\n" % client.token
        for k, v in (headers or {}).items():
            if any(c in str(k) + str(v) for c in "\r\n"):
                raise ValueError("a header without line breaks, not %r" % (k,))
            head += "%s: %s\r\n" % (k, v)
        self.sock.sendall((head + "\r\n").encode())
        while b"\r\n\r\n" not in self._buf:
            d = self.sock.recv(65536)
            if not d:
                self.sock.close()
                raise SandmanError(502, {"error": "the runner closed the connection",
                                         "failure_kind": "sandbox"})
            self._buf += d
            if len(self._buf) > 1 << 20:
                self.sock.close()
                raise SandmanError(502, {"error": "an answer head too large"})
        raw_head, self._buf = self._buf.split(b"\r\n\r\n", 1)
        lines = raw_head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        self.status, self.headers = status, headers
        if status != 101:
            body = self._buf
            n = int(headers.get("content-length", "0"))
            while len(body) < n:
                d = self.sock.recv(65536)
                if not d:
                    break
                body += d
            self.sock.close()
            try:
                parsed = json.loads(body.decode())
            except ValueError:
                parsed = body.decode("utf-8", "replace")
            raise SandmanError(status, parsed, headers.get("x-request-id"))
        want = base64.b64encode(hashlib.sha1(key.encode() + _WS_GUID).digest()).decode()
        if headers.get("sec-websocket-accept") != want:
            self.sock.close()
            raise SandmanError(502, {"error": "bad Sec-WebSocket-Accept", "failure_kind": "sandbox"})

    def _send_frame(self, opcode, payload):
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        body = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + body)

    def _need(self, n, deadline):
        while len(self._buf) < n:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            r, _, _ = select.select([self.sock], [], [], left)
            if not r:
                return False
            # 64 KiB: a larger buffer is allocated (mmap'd) and freed on
            # every recv, which cost ~27 us a message here (a keystroke's echo).
            d = self.sock.recv(65536)
            if not d:
                raise EOFError
            self._buf += d
        return True

    def _frame(self, deadline):
        """(fin, opcode, payload), or None when the deadline passed first."""
        if not self._need(2, deadline):
            return None
        b0, b1 = self._buf[0], self._buf[1]
        n, at = b1 & 0x7F, 2
        if n == 126:
            self._need(4, None)
            n, at = struct.unpack("!H", self._buf[2:4])[0], 4
        elif n == 127:
            self._need(10, None)
            n, at = struct.unpack("!Q", self._buf[2:10])[0], 10
        if n > self._max or b1 & 0x80:
            raise SandmanError(502, {"error": "a bad or too large frame"})
        self._need(at + n, None)
        payload, self._buf = self._buf[at:at + n], self._buf[at + n:]
        return bool(b0 & 0x80), b0 & 0x0F, payload

    def _message(self, timeout=None):
        """(opcode, payload) of the next whole message, None once closed, or
        "timeout"."""
        if self._closed:
            return None
        deadline = None if timeout is None else time.monotonic() + timeout
        message, mop = b"", None
        try:
            while True:
                f = self._frame(deadline)
                if f is None:
                    return "timeout"
                fin, op, payload = f
                if op == 0x9:
                    self._send_frame(0xA, payload)
                    continue
                if op == 0xA:
                    continue
                if op == 0x8:
                    if not self._closed:
                        self._send_frame(0x8, payload[:2])
                    self.sock.close()
                    self._closed = True
                    return None
                if op != 0x0:
                    mop = op
                message += payload
                if len(message) > self._max:
                    raise SandmanError(502, {"error": "a message over %d bytes" % self._max})
                if fin:
                    return mop, message
        except (EOFError, OSError):
            self._closed = True
            self.sock.close()
            return None

    @property
    def closed(self):
        return self._closed

    def close(self, code=1000):
        """Our close frame, then the socket ends."""
        if not self._closed:
            try:
                self._send_frame(0x8, struct.pack("!H", code))
            except OSError:
                pass
            self._closed = True
            self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class TerminalConnection(_WebSocket):
    """An attached terminal (RFC 6455 over the runner's socket). recv()
    gives ("output", bytes), ("attached", dict), ("resize", dict),
    ("exit", code), or None once the connection is closed. Closing it
    detaches; the terminal lives on for the runner's grace time."""

    def __init__(self, client, terminal_id):
        self.exit_code = None
        super().__init__(client, "/v1/terminals/%s" % terminal_id)

    def send(self, data):
        """Types data (bytes or str)."""
        if isinstance(data, str):
            data = data.encode()
        self._send_frame(0x2, data)

    def resize(self, rows, cols):
        self._send_frame(0x1, json.dumps({"type": "resize", "rows": rows, "cols": cols}).encode())

    def recv(self, timeout=None):
        """The next event, None once closed, or ("timeout", None)."""
        m = self._message(timeout)
        if m is None:
            return None
        if m == "timeout":
            return ("timeout", None)
        mop, message = m
        if mop == 0x2:
            return ("output", message)
        ev = json.loads(message.decode())
        if ev.get("type") == "exit":
            self.exit_code = ev.get("exit_code")
            return ("exit", self.exit_code)
        return (ev.get("type"), ev)

    def read_until(self, pattern, timeout=30.0):
        """Output until pattern (bytes or str) appears in it: all of it, or
        what came before the timeout or the end."""
        if isinstance(pattern, str):
            pattern = pattern.encode()
        out = b""
        deadline = time.monotonic() + timeout
        while pattern not in out:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ev = self.recv(left)
            if ev is None or ev[0] == "timeout":
                break
            if ev[0] == "output":
                out += ev[1]
        return out



class PortWebSocket(_WebSocket):
    """A WebSocket to a server in a sandbox, through the ports route or a
    preview URL (port_websocket, preview_websocket). status and headers:
    the server's 101 answer. send(str) sends text, send(bytes) binary;
    recv(timeout) gives the next message (str for text, bytes for
    binary), None once the connection is closed (by the server, or by the
    runner when the preview is revoked or the sandbox put to rest), and
    raises TimeoutError when timeout passes first."""

    def send(self, data):
        if isinstance(data, str):
            self._send_frame(0x1, data.encode())
        else:
            self._send_frame(0x2, bytes(data))

    def recv(self, timeout=None):
        m = self._message(timeout)
        if m == "timeout":
            raise TimeoutError("no message in %s s" % timeout)
        if m is None:
            return None
        mop, message = m
        return message.decode() if mop == 0x1 else message


class PortStream:
    """A streamed answer through the ports route or a preview URL
    (port_stream, preview_stream): status, headers (a dict, lower-case
    names; header_list keeps repeated ones such as Set-Cookie), and the
    body read as it comes: read(n), iter_bytes(size), or the object as an
    iterator. Close it (or use it in a with block) to end the connection."""

    def __init__(self, conn, resp):
        self._conn, self._resp = conn, resp
        self.status = resp.status
        self.header_list = [(k.lower(), v) for k, v in resp.getheaders()]
        self.headers = dict(self.header_list)

    def read(self, n=-1):
        return self._resp.read() if n is None or n < 0 else self._resp.read(n)

    def iter_bytes(self, size=1 << 16):
        while True:
            d = self._resp.read(size)
            if not d:
                return
            yield d

    def __iter__(self):
        return self.iter_bytes()

    def close(self):
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# The TypeScript client's name for the same class: both clients name the
# same operations alike (health, execute, execute_stream / executeStream,
# create_lease, handle, kill_handle, sandboxes, reap, metrics, files.*,
# terminals.*).
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
