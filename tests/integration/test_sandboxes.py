#!/usr/bin/env python3
"""Sandboxes as resources on the runner (docs/http-api.md#sandboxes), with
the Python client against the real engine. Run by test_sandboxes_*.sh; one
suite per ctest entry:

  api   create with a template and resources, calls and files by id,
        list by label, keep alive, delete; owner rules (another worker's
        sandbox answers exactly as a missing one); requests outside the
        configuration's bounds refused
  life  nothing leaks: runner-made sandboxes carry an idle timeout and the
        runner's reaper removes them; SIGTERM keeps the sandboxes made as
        resources and the runs, removes the MCP sessions' and per_tool ones
  carry a call that changes a run's settings keeps its /workspace or is
        refused; "replace" empties it; a sandbox made as a resource is never
        replaced by a call

Prints "ok - ..." / "not ok - ..." and exits 0 only when everything passed
(77: no engine outside CI).
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_server as ts  # noqa: E402
from sandman_client import Client, SandmanError  # noqa: E402

check = ts.check
STATE = os.environ["SANDMAN_STATE_DIR"]

CONFIG = """version: 1
templates:
  small:
    image: sandman/minimal:latest
    cpu: 0.5
    memory: 128m
    pids: 64
    disk: 32m
    idle_timeout: 5m
    description: a small busybox sandbox
  tiny:
    image: sandman/minimal:latest
    memory: 64m
limits:
  cpu_max: 1
  memory_max: 256m
  disk_max: 128m
  timeout_max: 2h
  idle_timeout_max: 1h
defaults:
  templates: [small, tiny]
workers:
  k2:
    templates: [tiny]
"""


def write_config(tmp, text=CONFIG):
    path = os.path.join(tmp, "sandman.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


RUNNERS = []


def stopping(suite):
    """The suite, then every runner it started and did not stop (a failed
    check that ended it early) stopped."""
    def run(tmp):
        try:
            suite(tmp)
        finally:
            for r in RUNNERS:
                if r.proc.poll() is None:
                    r.stop()
    return run


def runner(tmp, extra=(), config=CONFIG, name="runner", base=None):
    """A runner with this configuration (--config goes before the command)."""
    path = write_config(tmp, config)
    r = ts.Runner.__new__(ts.Runner)
    r.tmp = tmp
    r.sock = os.path.join(tmp, name, "sandman.sock")
    r.log_path = os.path.join(tmp, name + ".log")
    r.token = open(os.path.join(tmp, "token")).read().strip()
    cmd = [ts.SANDMAN, "--config", path, "worker", "start", "--listen", "unix:" + r.sock,
           "--token-file", os.path.join(tmp, "token")]
    cmd += (ts.sandbox_args() if base is None else base) + list(extra)
    r.log = open(r.log_path, "w")
    r.proc = subprocess.Popen(cmd, stdout=r.log, stderr=subprocess.STDOUT)
    RUNNERS.append(r)
    r.client = Client("unix:" + r.sock, r.token, timeout=300)
    if not wait_for(lambda: r.proc.poll() is not None or healthy(r.client), 60, 0.2) or \
            r.proc.poll() is not None:
        raise RuntimeError("the runner did not start: " + r.read_log())
    return r


def healthy(client):
    try:
        client.healthz()
        return True
    except OSError:
        return False


def error_of(fn):
    """(status, body) of a refused request; (200, answer) otherwise."""
    try:
        return 200, fn()
    except SandmanError as e:
        return e.status, e.body


def inspect(cid):
    p = ts.docker("inspect", cid)
    return json.loads(p.stdout)[0] if p.returncode == 0 else None


def wait_for(cond, timeout=90, step=0.5):
    """A bounded poll for a condition (never a fixed sleep)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


# ---------------------------------------------------------------- api

def api_create(r):
    c = r.client
    sb = c.create_sandbox(template="small", cpu=0.75, labels={"team": "blue", "task": "t1"},
                          timeout_s=600)
    check("create: answers the id and the description", sb.get("id") and sb["resource"] is True and
          sb["template"] == "small" and sb["run_id"].startswith("sbx-") and
          sb["labels"] == {"team": "blue", "task": "t1"} and sb["timeout_s"] == 600 and
          sb["idle_timeout_s"] == 300 and sb["expires_at"], sb)
    check("create: the template's resources, the request's cpu", sb["resources"] ==
          {"cpu": 0.75, "memory": 128 << 20, "pids": 64, "disk": 32 << 20}, sb["resources"])
    hc = (inspect(sb["id"]) or {}).get("HostConfig", {})
    check("create: the engine has those limits", hc.get("NanoCpus") == 750000000 and
          hc.get("Memory") == 128 << 20 and hc.get("PidsLimit") == 64, hc)
    got = c.get_sandbox(sb["id"])
    check("get: the same description, by id", got["id"] == sb["id"] and got["labels"] == sb["labels"], got)
    check("get: by its name too", c.get_sandbox(sb["name"])["id"] == sb["id"])
    return sb


def api_calls(r, sb):
    c = r.client
    res = c.execute(command="echo hi > /workspace/f; cat /proc/self/cgroup >/dev/null; echo ok",
                    sandbox_id=sb["id"])
    check("execute by sandbox_id runs in that sandbox", res["ok"] and res["sandbox_id"] == sb["id"], res)
    check("files by sandbox_id", c.files.read({"sandbox_id": sb["id"]}, "f") == b"hi\n")
    check("files by its run id reach the same sandbox",
          c.files.read({"run_id": sb["run_id"]}, "f") == b"hi\n")
    st, body = error_of(lambda: c.execute(command="true", sandbox_id=sb["id"], run_id="other"))
    check("sandbox_id with run_id is refused (400)", st == 400 and "sandbox_id" in body["error"], body)
    st, body = error_of(lambda: c.execute(command="true", sandbox_id="0123456789ab"))
    check("execute by an unknown id: 404", st == 404 and body["error"].startswith("no such sandbox"), body)
    bg = c.execute(command="sleep 2; echo late", sandbox_id=sb["id"], timeout_s=0.5,
                   background_on_timeout=True)
    h = c.handle(bg["handle"])
    check("a handle says its sandbox", h.get("sandbox_id") == sb["id"], h)
    wait_for(lambda: c.handle(bg["handle"])["state"] == "finished", 60)
    # A call whose settings differ uses it as it was made (never replaced).
    res = c.execute(command="cat /workspace/f", run_id=sb["run_id"], mode="per_run")
    check("a call by its run id uses it as made", res["ok"] and res["stdout"] == "hi\n" and
          res["sandbox_id"] == sb["id"] and "replaced" not in res, res)


def api_list_keepalive(r, sb):
    c = r.client
    other = c.create_sandbox(template="tiny", labels={"team": "red"})
    blue = [x["id"] for x in c.list_sandboxes(labels={"team": "blue"})]
    red = [x["id"] for x in c.list_sandboxes(labels={"team": "red"})]
    anyteam = {x["id"] for x in c.list_sandboxes(labels={"team": None})}
    check("list by label", blue == [sb["id"]] and red == [other["id"]] and
          anyteam == {sb["id"], other["id"]}, (blue, red, anyteam))
    check("list by two labels (both must match)",
          [x["id"] for x in c.list_sandboxes(labels={"team": "blue", "task": "t1"})] == [sb["id"]] and
          c.list_sandboxes(labels={"team": "red", "task": "t1"}) == [])
    # Keep alive: a reap of sandboxes unused for an hour spares it after.
    with open(os.path.join(STATE, "last-used", sb["name"]), "w") as f:
        f.write("1000000000\n")
    dry = c.reap(3600, dry_run=True)
    check("an unused sandbox is due for a reap", sb["id"] in [x["id"] for x in dry["removed"]], dry)
    kept = c.keep_alive(sb["id"])
    dry = c.reap(3600, dry_run=True)
    check("keepalive: its idle time starts again", kept["last_used_at"] > "2020" and
          sb["id"] not in [x["id"] for x in dry["removed"]], (kept, dry))
    c.delete_sandbox(other["id"])


def api_delete(r, sb):
    c = r.client
    d = c.delete_sandbox(sb["id"])
    check("delete: answers removed", d.get("removed") is True and d["id"] == sb["id"], d)
    st, body = error_of(lambda: c.get_sandbox(sb["id"]))
    check("deleted: 404", st == 404, body)
    vol = ts.docker("volume", "inspect", sb["name"] + "-ws")
    check("deleted: container and volume gone", inspect(sb["id"]) is None and vol.returncode != 0)


def api_owners(r):
    c = r.client
    k1 = Client.for_worker(c.address, r.token, "k1")
    k2 = Client.for_worker(c.address, r.token, "k2")
    mine = k1.create_sandbox(worker_key="k1", template="small")
    check("a worker token makes its own sandbox", mine.get("id") and mine["run_id"], mine)
    check("a worker lists its own", [x["id"] for x in k1.list_sandboxes(worker_key="k1")] == [mine["id"]])
    check("another worker lists none of it", k2.list_sandboxes(worker_key="k2") == [])
    check("a worker token gets its own", k1.get_sandbox(mine["id"], worker_key="k1")["id"] == mine["id"])
    probes = {
        "get": lambda: k2.get_sandbox(mine["id"], worker_key="k2"),
        "keepalive": lambda: k2.keep_alive(mine["id"], worker_key="k2"),
        "delete": lambda: k2.delete_sandbox(mine["id"], worker_key="k2"),
        "execute": lambda: k2.execute(command="id", sandbox_id=mine["id"], worker_key="k2"),
        "files": lambda: k2.files.read({"sandbox_id": mine["id"], "worker_key": "k2"}, "x"),
    }
    others = {k: error_of(f) for k, f in probes.items()}
    st, body = error_of(lambda: k1.get_sandbox(mine["id"], worker_key="k2"))
    check("a worker token naming another key: 401", st == 401, body)
    check("the sandbox is still there", inspect(mine["id"]) is not None)
    c.delete_sandbox(mine["id"])
    missing = {k: error_of(f) for k, f in probes.items()}
    for k in probes:
        check("another worker's sandbox answers exactly as a missing one (%s)" % k,
              others[k][0] == 404 and others[k] == missing[k], (others[k], missing[k]))
    st, _ = error_of(lambda: k1.list_sandboxes())
    check("a worker token without its key: 401", st == 401)


def api_bounds(r):
    c = r.client
    k2 = Client.for_worker(c.address, r.token, "k2")
    cases = [
        ("cpu above limits.cpu_max", lambda: c.create_sandbox(template="small", cpu=2), "limits.cpu_max"),
        ("memory above limits.memory_max", lambda: c.create_sandbox(memory="1g"), "limits.memory_max"),
        ("an image no template allows", lambda: c.create_sandbox(image="busybox:latest"), "allowed: sandman/minimal"),
        ("an unknown template", lambda: c.create_sandbox(template="nosuch"), "allowed: small, tiny"),
        ("a template the worker's list does not grant",
         lambda: k2.create_sandbox(worker_key="k2", template="small"), "allowed: tiny"),
        ("a life above limits.timeout_max", lambda: c.create_sandbox(timeout_s=3 * 3600), "limits.timeout_max"),
        ("an idle timeout above limits.idle_timeout_max",
         lambda: c.create_sandbox(idle_timeout_s=2 * 3600), "limits.idle_timeout_max"),
        ("a network wider than the configuration's", lambda: c.create_sandbox(network="bridge"), "at most none"),
    ]
    for what, fn, words in cases:
        st, body = error_of(fn)
        check("refused (403): %s" % what, st == 403 and body.get("failure_kind") == "policy" and
              words in body.get("error", ""), (st, body))
    st, body = error_of(lambda: c.create_sandbox(template="small", image="sandman/minimal:latest"))
    check("template and image together: 400", st == 400, body)
    mine = c.create_sandbox(run_id="named-run", template="tiny")
    st, body = error_of(lambda: c.create_sandbox(run_id="named-run"))
    check("a second sandbox of one run: 409 with its id", st == 409 and body.get("id") == mine["id"], body)
    c.delete_sandbox(mine["id"])
    left = ts.instance_containers()
    check("nothing refused was made", left == [], left)


def api_leased(r):
    """A leased call runs in a container of its own beside the sandbox: by
    id, with the sandbox's settings; reaching a sandbox made with other
    settings by its run id, refused."""
    c = r.client
    sb = c.create_sandbox(template="small")
    lease = c.create_lease(tool="shell", services=["svc"])
    res = c.execute(tool="shell", command="cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu.max 2>/dev/null; echo $SVC_KEY",
                    sandbox_id=sb["id"], lease_id=lease["lease_id"])
    check("a leased call by sandbox_id runs with the sandbox's settings (cpu 0.5)",
          res["ok"] and "50000" in res["stdout"] and "[REDACTED]" in res["stdout"], res)
    lease = c.create_lease(tool="shell", services=["svc"])
    st, body = error_of(lambda: c.execute(tool="shell", command="true", run_id=sb["run_id"],
                                          mode="per_run", lease_id=lease["lease_id"]))
    check("a leased call reaching it by run id with other settings: refused (403)",
          st == 403 and "sandbox_id" in body["error"], (st, body))
    c.delete_sandbox(sb["id"])


def suite_api(tmp):
    creds = os.path.join(tmp, "creds.json")
    with open(creds, "w") as f:
        json.dump({"svc": {"SVC_KEY": "svc-secret-0123456789"}}, f)
    os.chmod(creds, 0o600)
    r = runner(tmp, ["--credentials-file", creds])
    sb = api_create(r)
    api_calls(r, sb)
    api_leased(r)
    api_list_keepalive(r, sb)
    api_delete(r, sb)
    api_owners(r)
    api_bounds(r)
    check("runner exits 0", r.stop() == 0)


# ---------------------------------------------------------------- life

def mcp_session(r):
    """A control-token MCP session that ran one tool: its run id."""
    hdr = {"Authorization": "Bearer " + r.token, "Content-Type": "application/json",
           "Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "it", "version": "1"}}}
    conn = ts.http.client.HTTPConnection("localhost")
    sock = ts.socket.socket(ts.socket.AF_UNIX, ts.socket.SOCK_STREAM)
    sock.connect(r.sock)
    conn.sock = sock
    conn.request("POST", "/mcp", json.dumps(init), hdr)
    resp = conn.getresponse()
    sid = resp.getheader("Mcp-Session-Id")
    resp.read()
    hdr["Mcp-Session-Id"] = sid
    hdr["MCP-Protocol-Version"] = "2025-06-18"
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"command": "echo x"}}}
    st, body = r.raw("POST", "/mcp", json.dumps(call).encode(), hdr)
    return st, body


def life_idle(tmp):
    cfg = CONFIG + "  \n"
    r = runner(tmp, ["--reap-interval", "1s"], cfg.replace("defaults:\n", "defaults:\n  idle_timeout: 3s\n"),
               name="idle")
    c = r.client
    res = c.execute(command="true", run_id="idle-run")
    sb = c.get_sandbox(res["sandbox_id"])
    check("a runner-made sandbox carries its idle timeout", sb["idle_timeout_s"] == 3, sb)
    made = c.create_sandbox(template="tiny", idle_timeout_s=2)
    long = c.create_sandbox(template="tiny", idle_timeout_s=3600)
    gone = wait_for(lambda: inspect(res["sandbox_id"]) is None and inspect(made["id"]) is None, 90)
    check("the reaper removes idle sandboxes: a run's and one made with its own idle timeout", gone,
          r.read_log()[-2000:])
    check("a sandbox whose own idle timeout is longer stays", inspect(long["id"]) is not None)
    check("runner exits 0", r.stop() == 0)
    r2 = runner(tmp, [], name="default-idle")
    res = r2.client.execute(command="true", run_id="default-idle")
    check("without idle_timeout a runner-made sandbox carries the default (30m)",
          r2.client.get_sandbox(res["sandbox_id"])["idle_timeout_s"] == 1800)
    check("runner exits 0", r2.stop() == 0)


def life_sigterm(tmp):
    r = runner(tmp, [], name="term")
    c = r.client
    kept = c.create_sandbox(template="tiny")
    run = c.execute(command="true", run_id="term-run")
    st, body = mcp_session(r)
    check("an MCP session ran a tool", st == 200 and b"isError" in body, body[:300])
    mcp = [x for x in c.list_sandboxes() if (x["run_id"] or "").startswith("mcp-")]
    check("the MCP session has a sandbox", len(mcp) == 1, mcp)
    check("runner exits 0 on SIGTERM", r.stop() == 0)
    check("SIGTERM keeps a sandbox made as a resource", inspect(kept["id"]) is not None)
    check("SIGTERM keeps a run's sandbox (it outlives the runner by design)",
          inspect(run["sandbox_id"]) is not None)
    check("SIGTERM removes the MCP session's sandbox", mcp and inspect(mcp[0]["id"]) is None)
    tools = ts.instance_containers("label=io.sandman.mode=per_tool")
    check("no per_tool sandbox is left", tools == [], tools)


def suite_life(tmp):
    life_idle(tmp)
    ts.cleanup_instance()
    life_sigterm(tmp)


# ---------------------------------------------------------------- carry

CARRY_BASE = ["--pool", "it", "--sandbox-mode", "per_run", "--sandbox-backend", "docker",
              "--sandbox-image", "sandman/minimal:latest", "--sandbox-network", "none",
              "--project-environment", "development"]
CARRY_CONFIG = """version: 1
defaults:
  memory: 256m
  disk: 64m
agents:
  bigger:
    memory: 200m
  smalldisk:
    disk: 16m
  tinydisk:
    disk: 1m
"""


def suite_carry(tmp):
    r = runner(tmp, config=CARRY_CONFIG, base=CARRY_BASE)
    c = r.client
    w = c.execute(command="mkdir -p /workspace/d; echo work > /workspace/d/f", run_id="cr")
    check("a run writes its work", w["ok"], w)
    res = c.execute(command="cat /workspace/d/f", run_id="cr", timeout_s=30)
    check("same settings: not replaced", res["stdout"] == "work\n" and "replaced" not in res, res)
    res = c.execute(command="cat /workspace/d/f", run_id="cr", agent="bigger")
    check("memory changed: replaced, /workspace kept", res["ok"] and res["stdout"] == "work\n" and
          res.get("replaced", {}).get("workspace") == "kept" and
          "memory" in res["replaced"]["because"], res)
    res = c.execute(command="cat /workspace/d/f; stat -c %u /workspace/d/f", run_id="cr",
                    agent="smalldisk")
    check("disk changed: replaced, /workspace copied, owned by the sandbox's user",
          res["ok"] and res["stdout"] == "work\n1000\n" and
          res.get("replaced", {}).get("workspace") == "copied" and "disk" in res["replaced"]["because"],
          res)
    big = c.execute(command="dd if=/dev/zero of=/workspace/big bs=1024 count=4096 2>/dev/null",
                    run_id="cr", agent="smalldisk")
    check("4 MiB written", big["ok"], big)
    st, res = error_of(lambda: c.execute(command="ls /workspace", run_id="cr", agent="tinydisk"))
    check("too big for the new disk: refused (403), naming the difference and the field",
          st == 403 and res["failure_kind"] == "policy" and '"replace": true' in res["error"] and
          "disk changed" in res["error"], (st, res))
    res = c.execute(command="cat /workspace/d/f", run_id="cr", agent="smalldisk")
    check("refused: nothing was changed", res["ok"] and res["stdout"] == "work\n" and
          "replaced" not in res, res)
    res = c.execute(command="ls /workspace", run_id="cr", agent="tinydisk", replace=True)
    check("replace: a new sandbox with an empty /workspace, said so", res["ok"] and
          res["stdout"] == "" and res.get("replaced", {}).get("workspace") == "dropped", res)
    made = c.create_sandbox(run_id="made")
    c.execute(command="echo mine > /workspace/m", sandbox_id=made["id"])
    res = c.execute(command="cat /workspace/m", run_id="made", agent="bigger")
    check("a sandbox made as a resource is used as made, never replaced", res["ok"] and
          res["stdout"] == "mine\n" and res["sandbox_id"] == made["id"] and "replaced" not in res, res)
    check("runner exits 0", r.stop() == 0)


def main():
    ts.run_suites({"api": stopping(suite_api), "life": stopping(suite_life),
                   "carry": stopping(suite_carry)}, "api", "smsbx-")


if __name__ == "__main__":
    main()
