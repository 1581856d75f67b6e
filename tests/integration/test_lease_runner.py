#!/usr/bin/env python3
"""Leases through the runner (`sandman worker start`), tried as an attacker
would, against the real engine (issue 25, items 1, 14 and 16). Run by
test_lease_crash.sh and test_lease_runner.sh; one suite per ctest entry:

  crash   the runner is SIGKILLed while a leased call runs in a per_run
          sandbox (runc, then gVisor): nothing is left holding the credential
          and nothing stays stopped, and after a restart the run's next plain
          call cannot read the credential; in per_tool the call's container
          stops with the runner
  runner  a leased call refused with 503 before anything ran leaves its
          lease usable; a leased value cut by the 1 MiB output cap is masked
          in the answer, the stream and a handle

Prints "ok - ..." / "not ok - ..." lines and "N passed, M failed"; exits 0
only when everything passed, 77 when no engine answers outside CI.
"""
import json
import os
import secrets
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_server as ts  # noqa: E402
from test_server import Runner, check, docker, instance_containers, sandbox_args  # noqa: E402
from sandman_client import SandmanError  # noqa: E402

RUNNERS = []


def start_runner(tmp, args, name):
    r = Runner(tmp, args, name=name)
    RUNNERS.append(r)
    return r


def write_creds(tmp, value):
    path = os.path.join(tmp, "creds.json")
    with open(path, "w") as f:
        json.dump({"github": {"GH_TOKEN": value}}, f)
    os.chmod(path, 0o600)
    return path


def wait_for(cond, limit_s=120, step=0.2):
    """Polls cond() until it is true or limit_s has passed; its last value."""
    deadline = time.time() + limit_s
    while True:
        v = cond()
        if v or time.time() >= deadline:
            return v
        time.sleep(step)


def as_user(cid, script):
    """A shell script in container cid as the sandbox's user (the label
    io.sandman.user): what a process any call left there could see."""
    user = docker("inspect", "-f", '{{index .Config.Labels "io.sandman.user"}}', cid).stdout.strip()
    return docker("exec", "-u", user or "1000:1000", cid, "sh", "-c", script)


# ---------------------------------------------------------------- crash

# Which processes of the sandbox hold a variable named GH_TOKEN, and which
# are stopped (as "<pid> <state>"); the script names the variable, never
# its value.
HOLDERS = "grep -l GH_TOKEN= /proc/[0-9]*/environ 2>/dev/null || true"
STOPPED = ("for s in /proc/[0-9]*/status; do awk -v f=$s '/^State:/ && $2 ~ /^[Tt]/ "
           "{ print f, $2 }' $s 2>/dev/null; done")


def crash_once(tmp, creds, value, runtime):
    tag = runtime or "runc"
    run_id = "crash-" + tag
    args = sandbox_args() + ["--credentials-file", creds]
    if runtime:
        args += ["--sandbox-runtime", runtime]
    r = start_runner(tmp, args, "runner-" + tag)
    c = r.client
    # A process an earlier call left behind: it must not be left stopped.
    res = c.execute(argv=["sh", "-c", "setsid sleep 900 </dev/null >/dev/null 2>&1 & echo left"],
                    run_id=run_id)
    check("%s: an earlier call left a process" % tag, res["ok"] and res["stdout"] == "left\n", res)
    keyed = res["sandbox_id"]
    lease = c.create_lease(tool="shell", services=["github"])
    failure = []

    def leased():
        try:
            c.execute(tool="shell", run_id=run_id, lease_id=lease["lease_id"], timeout_s=600,
                      argv=["sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & "
                            "touch /workspace/leased.started; sleep 300"])
        except (SandmanError, OSError) as e:  # the runner is killed under it
            failure.append(e)

    t = threading.Thread(target=leased, daemon=True)
    t.start()
    started = wait_for(lambda: as_user(keyed, "test -e /workspace/leased.started").returncode == 0)
    check("%s: the leased call runs" % tag, started)
    inspected = [docker("inspect", x).stdout for x in instance_containers()]
    check("%s: while it runs, no container's configuration holds the credential" % tag,
          all(value not in i and "GH_TOKEN" not in i for i in inspected))
    r.proc.kill()  # SIGKILL
    r.proc.wait()
    t.join(60)

    of_run = "label=io.sandman.run=" + run_id
    left = wait_for(lambda: instance_containers(of_run) == [keyed[:12]], 60)
    check("%s: after the runner's SIGKILL only the run's sandbox is left" % tag, left,
          instance_containers(of_run))
    holders = wait_for(lambda: as_user(keyed, HOLDERS).stdout.strip() == "", 60)
    check("%s: no process in the sandbox holds the credential" % tag, holders,
          as_user(keyed, HOLDERS).stdout)
    stopped = as_user(keyed, STOPPED).stdout.strip()
    check("%s: no process in the sandbox is left stopped" % tag, stopped == "", stopped)

    # Had the watcher not ended it, the lease container would still be there,
    # labelled with its dead owner: a stand-in for one, which a restarted
    # runner removes at once.
    dead_owner = "%s:%d" % (socket.gethostname(), r.proc.pid)
    stand_in = docker("run", "-d", "--label", "io.sandman.managed=true",
                      "--label", "io.sandman.instance=" + ts.INSTANCE,
                      "--label", "io.sandman.mode=per_run", "--label", "io.sandman.run=" + run_id,
                      "--label", "io.sandman.lease=stand-in", "--label", "io.sandman.owner=" + dead_owner,
                      "--name", "sandman-%s-lease-standin-%s" % (ts.INSTANCE, tag),
                      "sandman/minimal:latest", "sleep", "600").stdout.strip()
    check("%s: a stand-in for a lease container the crash left" % tag, stand_in != "")

    # A restarted runner; the run's next plain call looks as the sandbox's
    # user would.
    r = start_runner(tmp, args, "runner-" + tag + "-again")
    gone = wait_for(lambda: instance_containers(of_run) == [keyed[:12]], 30)
    check("%s: the restarted runner removed what the crash left" % tag, gone,
          instance_containers(of_run))
    res = r.client.execute(argv=["sh", "-c", HOLDERS + "; echo ---; " + STOPPED + "; echo ---; "
                                 "for d in /proc/[0-9]*; do tr '\\000' ' ' < $d/cmdline; echo; "
                                 "done | grep -E '^sleep (900|600|300) ' | sort"], run_id=run_id)
    parts = res["stdout"].split("---\n")
    check("%s: after a restart the run's next call works" % tag, res["ok"] and len(parts) == 3, res)
    check("%s: ... and reads no credential in the sandbox" % tag,
          len(parts) == 3 and parts[0] == "" and value not in res["stdout"], res["stdout"])
    check("%s: ... and finds nothing stopped" % tag, len(parts) == 3 and parts[1] == "",
          res["stdout"])
    # The earlier call's sleep 900 runs on; nothing of the leased call's.
    check("%s: ... and the earlier call's process runs on, alone" % tag,
          len(parts) == 3 and parts[2] == "sleep 900 \n", res["stdout"])
    r.stop()


def crash_per_tool(tmp, creds):
    """The same in per_tool: the call's own container stops with the
    runner, and the restarted runner removes it."""
    run_id = "crash-per_tool"
    args = sandbox_args(mode="per_tool") + ["--credentials-file", creds]
    r = start_runner(tmp, args, "runner-per_tool")
    c = r.client
    lease = c.create_lease(tool="shell", services=["github"])
    t = threading.Thread(target=lambda: ignore_errors(lambda: c.execute(
        tool="shell", run_id=run_id, lease_id=lease["lease_id"], timeout_s=600,
        argv=["sh", "-c", "touch /tmp/leased.started; sleep 300"])), daemon=True)
    t.start()
    # The call's container: made for it (labelled with its run) or taken
    # from the warm pool (labelled as the pool's), whichever the pool's
    # timing gives; known by the file the call made.
    found = []

    def started():
        for cid in instance_containers():
            if docker("exec", cid, "test", "-e", "/tmp/leased.started").returncode == 0:
                found[:] = [cid]
                return True
        return False
    check("per_tool: the leased call runs", wait_for(started))
    cid = found[0] if found else "none"
    r.proc.kill()
    r.proc.wait()
    t.join(60)

    def runs():
        return docker("inspect", "-f", "{{.State.Running}}", cid).stdout.strip() == "true"
    check("per_tool: after the runner's SIGKILL its call's container no longer runs",
          found and wait_for(lambda: not runs(), 60), cid)
    r = start_runner(tmp, args, "runner-per_tool-again")
    gone = wait_for(lambda: docker("inspect", cid).returncode != 0, 30)
    check("per_tool: the restarted runner removed it", found and gone, cid)
    r.stop()


def ignore_errors(fn):
    try:
        fn()
    except (SandmanError, OSError):  # the runner is killed under it
        pass


def suite_crash(tmp):
    value = "ghp_crash_" + secrets.token_hex(12)
    creds = write_creds(tmp, value)
    crash_once(tmp, creds, value, "")
    crash_once(tmp, creds, value, "runsc")
    crash_per_tool(tmp, creds)


# ---------------------------------------------------------------- runner

CAP = 1024 * 1024


def refused_before_run(c):
    """A leased call that waits for its sandbox longer than its timeout is
    refused (503) before anything ran: its lease serves the next call."""
    run_id = "refused"
    busy = []
    t = threading.Thread(target=lambda: busy.append(c.execute(
        run_id=run_id, argv=["sh", "-c", "touch /workspace/busy.started; sleep 20; echo done"])),
        daemon=True)
    t.start()
    sid = []

    def running():
        ids = instance_containers("label=io.sandman.run=" + run_id)
        ok = len(ids) == 1 and docker("exec", ids[0], "test", "-e",
                                      "/workspace/busy.started").returncode == 0
        if ok:
            sid.append(ids[0])
        return ok
    check("refused: a plain call is in flight in the run's sandbox", wait_for(running))
    lease = c.create_lease(tool="shell", services=["github"])
    script = 'case "$GH_TOKEN" in ghp_*) echo has-it ;; esac'
    status, body = 200, None
    try:
        body = c.execute(tool="shell", run_id=run_id, lease_id=lease["lease_id"], timeout_s=2,
                         argv=["sh", "-c", script])
    except SandmanError as e:
        status, body = e.status, e.body
    check("refused: the leased call is refused with 503 before it ran",
          status == 503 and body.get("failure_kind") == "sandbox", (status, body))
    t.join(120)
    check("refused: the plain call finished", busy and busy[0]["stdout"] == "done\n", busy)
    status = 200
    try:
        res = c.execute(tool="shell", run_id=run_id, lease_id=lease["lease_id"],
                        argv=["sh", "-c", script])
    except SandmanError as e:
        status, res = e.status, e.body
    check("refused: the lease still serves a call that runs", status == 200 and
          res.get("stdout") == "has-it\n", (status, res))
    status = 200
    try:
        c.execute(tool="shell", run_id=run_id, lease_id=lease["lease_id"], argv=["true"])
    except SandmanError as e:
        status = e.status
    check("refused: then it is used up (403)", status == 403, status)


def cut_at_cap(c, value):
    """The tool prints 1 MiB minus 29 bytes, then the 30-byte value: the cap
    cuts it after 29 of its bytes. Nothing of it may come back."""
    pad = CAP - (len(value) - 1)
    script = ("head -c %d /dev/zero | tr '\\000' x; printf %%s \"$GH_TOKEN\"; " % pad) + "TAIL"

    def leaked(text):
        return any(value[:k] in text[-len(value):] for k in range(6, len(value)))

    lease = c.create_lease(tool="shell", services=["github"], max_uses=3)
    res = c.execute(tool="shell", run_id="cut", lease_id=lease["lease_id"],
                    argv=["sh", "-c", script.replace("TAIL", "true")])
    out = res["stdout"]
    check("cut: the answer's stdout was cut", res["stdout_truncated"] and len(out) >= CAP - 40, len(out))
    check("cut: nothing of the cut value is in the answer", not leaked(out) and
          out.endswith("[REDACTED]"), out[-60:])
    events = list(c.execute_stream(tool="shell", run_id="cut", lease_id=lease["lease_id"],
                                   argv=["sh", "-c", script.replace("TAIL", "true")]))
    streamed = "".join(e.get("data", "") for e in events if e.get("event") == "stdout")
    check("cut: nothing of it in the stream's events", not leaked(streamed) and
          streamed.endswith("[REDACTED]"), streamed[-60:])
    h = c.execute(tool="shell", run_id="cut", lease_id=lease["lease_id"], timeout_s=1,
                  background_on_timeout=True,
                  argv=["sh", "-c", script.replace("TAIL", "sleep 4; echo")])
    check("cut: the call went to the background", "handle" in h, {k: h[k] for k in h if k != "stdout"})
    if "handle" in h:
        so_far = wait_for(lambda: c.handle(h["handle"]), 30)
        check("cut: nothing of it in the handle's output so far",
              not leaked(so_far["stdout"]), so_far["stdout"][-60:])
        done = wait_for(lambda: (lambda x: x if x["state"] != "running" else None)(
            c.handle(h["handle"])), 120)
        check("cut: nothing of it in the handle's output and result", done and
              not leaked(done["stdout"]) and not leaked(done["result"]["stdout"]),
              done and done["stdout"][-60:])


def suite_runner(tmp):
    value = "ghp_" + secrets.token_hex(13)  # 30 bytes
    creds = write_creds(tmp, value)
    r = start_runner(tmp, sandbox_args() + ["--credentials-file", creds], "runner")
    refused_before_run(r.client)
    cut_at_cap(r.client, value)
    r.stop()


def main():
    try:
        ts.run_suites({"crash": suite_crash, "runner": suite_runner}, "runner", "smlease-")
    finally:
        for r in RUNNERS:
            r.stop()


if __name__ == "__main__":
    main()
