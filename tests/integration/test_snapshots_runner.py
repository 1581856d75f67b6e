#!/usr/bin/env python3
"""Snapshots, forks, rollback and diff on the runner (docs/state.md,
docs/http-api.md#snapshots) against the real engine. Run by
test_snapshots_runner.sh.

  owners  a worker snapshots its own sandbox, lists, inspects, forks,
          diffs, rolls back to and removes its own snapshot; another
          worker's token can do none of these to it (404, exactly as for
          a missing snapshot or sandbox), does not see it in its list, and
          leaves it as it was; the control token sees it
  client  the Python client's own methods (pause_sandbox, resume_sandbox,
          snapshot_sandbox, list_snapshots, get_snapshot, fork_snapshot,
          diff_sandbox, rollback_sandbox, delete_snapshot) for a worker on
          its own sandbox; another worker's client gets SandmanError 404;
          snapshot_sandbox(memory=True) of a runc sandbox is refused (409)
          as hibernate is
  leased  a snapshot while a call with leased credentials runs in the
          sandbox is refused (409) and nothing is made; after the call it
          is made, and the credential is in none of its image's
          configuration
  crash   the runner SIGKILLed during a snapshot and during a fork, then
          started again: no half snapshot or half-made fork is listed, the
          sandbox answers with its files as they were (by hash) and is not
          left frozen, forks listed under their names are whole, a new
          fork works, a reap removes the forks cut short

The "owners" suite also covers POST /v1/execute with "from_snapshot": a
new run's sandbox made from the worker's own snapshot (reused by the next
call with it), another worker's 404 as for a missing snapshot, refusals
with sandbox_id, mode per_tool, and a run whose sandbox was not made from
it.

Prints "ok - ..." / "not ok - ..." and exits 0 only when everything passed
(77: no engine outside CI). Every image a suite commits is removed.
"""
import json
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_sandboxes as tsb  # noqa: E402
import test_server as ts  # noqa: E402
from sandman_client import Client, SandmanError  # noqa: E402

check = ts.check


def call(client, method, path, key, **query):
    """(status, body) of method path?worker_key=key&..."""
    q = dict(query)
    if key:
        q["worker_key"] = key
    if q:
        path += "?" + "&".join("%s=%s" % kv for kv in q.items())
    return tsb.error_of(lambda: client._call(method, path))


def snapshot_images():
    p = ts.docker("images", "-q", "--filter",
                  "label=io.sandman.snapshot.instance=" + os.environ["SANDMAN_INSTANCE"])
    return sorted(set(p.stdout.split()))


def remove_images():
    ids = snapshot_images()
    if ids:
        ts.docker("rmi", "-f", *ids)


def same_404(what, got, missing, ref, gone):
    check(what,
          got[0] == 404 and got[1].get("error", "").replace(ref, "X") ==
          missing[1].get("error", "").replace(gone, "X"), (got, missing))


def execute_from_snapshot(c, k1, k2, sid):
    """POST /v1/execute with from_snapshot (k1's snapshot s1 of sandbox
    sid): a new run's sandbox made from it, k1's own; k2 gets 404 exactly
    as for a missing snapshot and nothing is made. The sandboxes made, as
    [{"id"}], for the caller to remove."""
    body = {"command": "cat /workspace/note", "mode": "per_run", "run_id": "ex-1",
            "from_snapshot": "s1", "worker_key": "k1"}
    out = k1._call("POST", "/v1/execute", body)
    made = [{"id": out["sandbox_id"]}] if out.get("sandbox_id") else []
    check("execute with from_snapshot makes the run's sandbox from k1's snapshot",
          out.get("stdout") == "kept\n" and out.get("reused") is False, out)
    check("... a new container", out.get("sandbox_id") not in (sid, None), out)
    again = k1.execute(command="echo $((6*7)) && cat /workspace/note", mode="per_run",
                       run_id="ex-1", from_snapshot="s1", worker_key="k1")
    check("the next call with the same run id and from_snapshot (the client's execute) reuses it",
          again.get("stdout") == "42\nkept\n" and again.get("reused") is True and
          again.get("sandbox_id") == out.get("sandbox_id"), again)
    mine = [x["id"] for x in k1.list_sandboxes(worker_key="k1")]
    check("... and it is k1's sandbox", out.get("sandbox_id") in mine, mine)
    other = dict(body, run_id="ex-2", worker_key="k2")
    got = tsb.error_of(lambda: k2._call("POST", "/v1/execute", other))
    miss = tsb.error_of(lambda: k2._call("POST", "/v1/execute", dict(other, from_snapshot="nosuch")))
    same_404("k2's execute from k1's snapshot: 404 as for a missing one", got, miss, "s1", "nosuch")
    theirs = k2.list_sandboxes(worker_key="k2")
    check("... and k2 has no sandbox of run ex-2", not any(x.get("run_id") == "ex-2" for x in theirs),
          theirs)
    st, bad = tsb.error_of(lambda: k1._call("POST", "/v1/execute", dict(body, run_id=None, mode=None,
                                                                         sandbox_id=sid)))
    check("from_snapshot with sandbox_id: 400", st == 400 and "from_snapshot" in bad.get("error", ""),
          (st, bad))
    st, bad = tsb.error_of(lambda: k1._call("POST", "/v1/execute", dict(body, mode="per_tool")))
    check("from_snapshot in mode per_tool: 400", st == 400 and "per_run" in bad.get("error", ""),
          (st, bad))
    plain = k1.execute(command="true", mode="per_run", run_id="ex-3", worker_key="k1")
    made += [{"id": plain["sandbox_id"]}] if plain.get("sandbox_id") else []
    clash = tsb.error_of(lambda: k1._call("POST", "/v1/execute", dict(body, run_id="ex-3")))
    text = json.dumps(clash)
    check("from_snapshot for a run whose sandbox was not made from it is refused",
          (clash[0] >= 400 or clash[1].get("ok") is False) and "not made from snapshot" in text,
          clash)
    return made


def suite_owners(tmp):
    r = tsb.runner(tmp)
    c = r.client
    k1 = Client.for_worker(c.address, r.token, "k1")
    k2 = Client.for_worker(c.address, r.token, "k2")
    sid = k1.create_sandbox(worker_key="k1", template="small")["id"]
    own2 = k2.create_sandbox(worker_key="k2", template="tiny")["id"]
    out = k1.execute(command="echo kept >/workspace/note && echo ok", sandbox_id=sid, worker_key="k1")
    check("k1's sandbox runs a call", out.get("stdout") == "ok\n", out)

    # Another worker cannot snapshot k1's sandbox.
    got = call(k2, "POST", "/v1/sandboxes/%s/snapshot" % sid, "k2", name="s2")
    miss = call(k2, "POST", "/v1/sandboxes/sandman-no-such/snapshot", "k2", name="s2")
    same_404("k2 snapshots k1's sandbox: 404 as for a missing one", got, miss, sid, "sandman-no-such")

    st, snap = call(k1, "POST", "/v1/sandboxes/%s/snapshot" % sid, "k1", name="s1")
    check("k1 snapshots its own sandbox", st == 200 and snap.get("name") == "s1" and
          snap.get("owner") == "worker:k1", (st, snap))

    st, body = call(k2, "GET", "/v1/snapshots", "k2")
    check("k2's list does not show k1's snapshot", st == 200 and body == [], (st, body))
    st, body = call(k1, "GET", "/v1/snapshots", "k1")
    check("k1's list shows it, with sizes and age", st == 200 and [x["name"] for x in body] == ["s1"]
          and body[0]["size"]["workspace"] > 0 and body[0]["age_s"] >= 0, (st, body))
    st, body = call(c, "GET", "/v1/snapshots", None)
    check("the control token's list shows it", st == 200 and "s1" in [x["name"] for x in body],
          (st, body))

    def tried(method, path, **q):
        """k2's try on k1's s1 and on a missing snapshot, as (got, missing)."""
        fill = {k: v % "s1" for k, v in q.items()}
        none = {k: v % "nosuch" for k, v in q.items()}
        return (call(k2, method, path.replace("{}", "s1"), "k2", **fill),
                call(k2, method, path.replace("{}", "nosuch"), "k2", **none))

    got, miss = tried("GET", "/v1/snapshots/{}")
    same_404("k2 cannot inspect k1's snapshot: 404 as for a missing one", got, miss, "s1", "nosuch")
    got, miss = tried("DELETE", "/v1/snapshots/{}")
    same_404("k2 cannot remove k1's snapshot: 404 as for a missing one", got, miss, "s1", "nosuch")
    got, miss = tried("POST", "/v1/sandboxes/fork", snapshot="%s")
    same_404("k2 cannot fork k1's snapshot: 404 as for a missing one", got, miss, "s1", "nosuch")
    got, miss = tried("POST", "/v1/sandboxes/%s/rollback" % own2, snapshot="%s")
    same_404("k2 cannot roll its own sandbox back to k1's snapshot: 404 as for a missing one",
             got, miss, "s1", "nosuch")
    got, miss = tried("GET", "/v1/sandboxes/%s/diff" % own2, snapshot="%s")
    same_404("k2 cannot diff its own sandbox against k1's snapshot: 404 as for a missing one",
             got, miss, "s1", "nosuch")
    st, body = call(k1, "GET", "/v1/snapshots/s1", "k1")
    check("k1's snapshot is still there after k2's tries", st == 200 and body.get("name") == "s1",
          (st, body))
    st, body = call(k2, "GET", "/v1/snapshots", "k1")
    check("a worker token naming another key: 401", st == 401, (st, body))

    # k1 uses its own snapshot.
    st, body = call(k1, "POST", "/v1/sandboxes/fork", "k1", snapshot="s1", count=2)
    forks = body.get("forks", []) if st == 200 else []
    check("k1 forks it twice", len(forks) == 2 and all(f.get("id") and not f.get("error")
                                                          for f in forks), (st, body))
    for f in forks:
        out = k1.execute(command="cat /workspace/note", run_id=f["run_id"], worker_key="k1")
        check("k1's fork %s holds the file" % f["run_id"], out.get("stdout") == "kept\n", out)
        check("... in a new container", out.get("sandbox_id") not in (sid, None), out)
    mine = [x["id"] for x in k1.list_sandboxes(worker_key="k1")]
    check("k1's forks are k1's sandboxes", all(f["id"] in mine for f in forks), mine)
    theirs = [x["id"] for x in k2.list_sandboxes(worker_key="k2")]
    check("... not k2's", not any(f["id"] in theirs for f in forks), theirs)
    made = execute_from_snapshot(c, k1, k2, sid)
    k1.execute(command="echo new >/workspace/added", sandbox_id=sid, worker_key="k1")
    st, body = call(k1, "GET", "/v1/sandboxes/%s/diff" % sid, "k1", snapshot="s1")
    check("k1's diff lists its new file", st == 200 and [x["path"] for x in body.get("added", [])]
          == ["added"] and body.get("modified") == [] and body.get("deleted") == [], (st, body))
    st, body = call(k1, "POST", "/v1/sandboxes/%s/rollback" % sid, "k1", snapshot="s1")
    check("k1 rolls its sandbox back", st == 200 and body.get("state") == "running", (st, body))
    out = k1.execute(command="ls /workspace", sandbox_id=body.get("id") or sid, worker_key="k1")
    check("after the rollback the new file is gone", out.get("stdout") == "note\n", out)
    for f in forks + made:
        c.delete_sandbox(f["id"])
    st, body = call(k1, "DELETE", "/v1/snapshots/s1", "k1")
    check("k1 removes its snapshot", st == 200 and body.get("removed") is True, (st, body))
    st, body = call(k1, "GET", "/v1/snapshots", "k1")
    check("... gone from its list", st == 200 and body == [], (st, body))
    events = [e.get("unmapped", {}).get("event") for e in c._call("GET", "/v1/audit")["events"]]
    for ev in ("snapshot.created", "sandbox.forked", "sandbox.rolled_back", "snapshot.removed"):
        check("the audit trail has %s" % ev, ev in events, events)
    check("runner exits 0", r.stop() == 0)
    remove_images()


def refused(fn):
    """The HTTP status of a refused client call (200 when it was not refused)."""
    return tsb.error_of(fn)[0]


def suite_client(tmp):
    r = tsb.runner(tmp)
    c = r.client
    k1 = Client.for_worker(c.address, r.token, "k1")
    k2 = Client.for_worker(c.address, r.token, "k2")
    sid = k1.create_sandbox(worker_key="k1", template="small")["id"]
    k1.execute(command="echo kept >/workspace/note", sandbox_id=sid, worker_key="k1")

    rest = k1.pause_sandbox(sid, tier="freeze", worker_key="k1")
    check("pause_sandbox freezes it", rest.get("state") == "frozen" and rest.get("changed"), rest)
    check("another worker's pause_sandbox: 404",
          refused(lambda: k2.pause_sandbox(sid, worker_key="k2")) == 404)
    rest = k1.resume_sandbox(sid, worker_key="k1")
    check("resume_sandbox runs it again", rest.get("state") == "running", rest)
    rest = k1.pause_sandbox(sid, tier="stop", worker_key="k1")
    check("pause_sandbox(tier='stop') stops it", rest.get("state") == "stopped", rest)
    check("resume_sandbox after stop", k1.resume_sandbox(sid, worker_key="k1").get("state") == "running")

    # A memory snapshot of this runc sandbox: refused as hibernate is (409), nothing made.
    st, body = tsb.error_of(lambda: k1.snapshot_sandbox(sid, name="cm", memory=True, worker_key="k1"))
    check("snapshot_sandbox(memory=True) under runc: 409 saying what hibernate says",
          st == 409 and ("CRIU" in body.get("error", "") or "experimental mode is off" in
                         body.get("error", "")), (st, body))
    check("... nothing made", k1.list_snapshots(worker_key="k1") == [])
    snap = k1.snapshot_sandbox(sid, name="c1", no_wait=True, worker_key="k1")
    check("snapshot_sandbox makes k1's snapshot", snap.get("name") == "c1" and
          snap.get("owner") == "worker:k1", snap)
    check("another worker's snapshot_sandbox of it: 404",
          refused(lambda: k2.snapshot_sandbox(sid, name="c2", worker_key="k2")) == 404)
    check("list_snapshots: k1 sees it", [x["name"] for x in k1.list_snapshots(worker_key="k1")] == ["c1"])
    check("list_snapshots: k2 does not", k2.list_snapshots(worker_key="k2") == [])
    check("get_snapshot", k1.get_snapshot("c1", worker_key="k1").get("name") == "c1")
    check("another worker's get_snapshot: 404",
          refused(lambda: k2.get_snapshot("c1", worker_key="k2")) == 404)
    check("another worker's fork_snapshot: 404",
          refused(lambda: k2.fork_snapshot("c1", worker_key="k2")) == 404)

    forks = k1.fork_snapshot("c1", count=2, prefix="cf", worker_key="k1").get("forks", [])
    check("fork_snapshot(count=2) makes two", len(forks) == 2 and all(
        f.get("id") and not f.get("error") and f["run_id"].startswith("cf-") for f in forks), forks)
    for f in forks:
        out = k1.execute(command="cat /workspace/note", run_id=f["run_id"], worker_key="k1")
        check("fork %s holds the file" % f["run_id"], out.get("stdout") == "kept\n", out)
    k1.execute(command="echo new >/workspace/added", sandbox_id=sid, worker_key="k1")
    d = k1.diff_sandbox(sid, "c1", worker_key="k1")
    check("diff_sandbox lists the new file", [x["path"] for x in d.get("added", [])] == ["added"]
          and d.get("modified") == [] and d.get("deleted") == [], d)
    check("another worker's diff_sandbox: 404",
          refused(lambda: k2.diff_sandbox(sid, "c1", worker_key="k2")) == 404)
    back = k1.rollback_sandbox(sid, to="c1", worker_key="k1")
    check("rollback_sandbox", back.get("state") == "running", back)
    out = k1.execute(command="ls /workspace", sandbox_id=back.get("id") or sid, worker_key="k1")
    check("after rollback_sandbox the new file is gone", out.get("stdout") == "note\n", out)
    # The sandboxes made from the snapshot go first: its image is kept while one uses it.
    for f in forks:
        c.delete_sandbox(f["id"])
    c.delete_sandbox(back.get("id") or sid)
    check("another worker's delete_snapshot: 404",
          refused(lambda: k2.delete_snapshot("c1", worker_key="k2")) == 404)
    check("delete_snapshot", k1.delete_snapshot("c1", worker_key="k1").get("removed") is True)
    check("... gone", k1.list_snapshots(worker_key="k1") == [])
    check("get_snapshot of a removed one: 404",
          refused(lambda: k1.get_snapshot("c1", worker_key="k1")) == 404)
    check("the snapshot's image is gone with it", snapshot_images() == [], snapshot_images())
    check("runner exits 0", r.stop() == 0)
    remove_images()


def suite_leased(tmp):
    value = "snap-secret-" + os.urandom(8).hex()
    creds = os.path.join(tmp, "creds.json")
    with open(creds, "w") as f:
        json.dump({"github": {"GH_TOKEN": value}}, f)
    os.chmod(creds, 0o600)
    r = ts.Runner(tmp, ts.sandbox_args() + ["--credentials-file", creds], name="runner-leased")
    tsb.RUNNERS.append(r)
    c = r.client
    run = "snap-leased"
    keyed = c.execute(command="echo before >/workspace/f", run_id=run)["sandbox_id"]
    lease = c.create_lease(tool="shell", services=["github"])
    failure = []

    def leased():
        try:
            c.execute(tool="shell", run_id=run, lease_id=lease["lease_id"], timeout_s=120,
                      command="touch /workspace/leased.started; "
                              "while [ ! -e /workspace/leased.done ]; do sleep 0.1; done")
        except (SandmanError, OSError) as e:
            failure.append(e)

    t = threading.Thread(target=leased, daemon=True)
    t.start()
    started = tsb.wait_for(lambda: ts.docker("exec", keyed, "test", "-e",
                                             "/workspace/leased.started").returncode == 0, 60, 0.2)
    check("the leased call runs", started)
    st, body = call(c, "POST", "/v1/sandboxes/%s/snapshot" % keyed, None, name="during")
    check("a snapshot while the leased call runs is refused (409)",
          st == 409 and "leased" in body.get("error", ""), (st, body))
    st, body = call(c, "GET", "/v1/snapshots", None)
    check("... and nothing was made", st == 200 and body == [], (st, body))
    ts.docker("exec", "-u", "1000:1000", keyed, "touch", "/workspace/leased.done")
    t.join(120)
    check("the leased call ended", not t.is_alive() and not failure, failure)
    st, snap = call(c, "POST", "/v1/sandboxes/%s/snapshot" % keyed, None, name="after")
    check("after it, the snapshot is made", st == 200 and snap.get("name") == "after", (st, snap))
    img = ts.docker("image", "inspect", snap.get("image", "none")).stdout
    check("the credential is nowhere in the snapshot's image configuration",
          img and value not in img and "GH_TOKEN" not in img)
    st, body = call(c, "DELETE", "/v1/snapshots/after", None)
    check("the control token removes it", st == 200 and body.get("removed") is True, (st, body))
    check("runner exits 0", r.stop() == 0)
    remove_images()


TREE = "cd /workspace && find t -type f | sort | xargs sha256sum | sha256sum | cut -c1-64"


def tree_of(c, key, **where):
    out = c.execute(command=TREE, worker_key=key, **where)
    return out.get("stdout", "").strip() if out.get("exit_code") == 0 else ("failed: %r" % out)


def killed_midway(r, work, busy):
    """Runs work() on a thread, waits (bounded) for busy() or work's end,
    then SIGKILLs the runner: the kill lands wherever the work is."""
    t = threading.Thread(target=lambda: tsb.error_of(work), daemon=True)
    t.start()
    tsb.wait_for(lambda: not t.is_alive() or busy(), 120, 0.01)
    r.proc.kill()
    r.proc.wait()
    t.join(30)


def paused(cid):
    info = tsb.inspect(cid)
    return bool(info and info["State"].get("Paused"))


def forking_containers():
    """The engine's containers of this instance still named as forks being made."""
    return ts.docker("ps", "-aq", "--filter", "name=-forking-", "--filter",
                     "label=io.sandman.instance=" + os.environ["SANDMAN_INSTANCE"]).stdout.split()


def suite_crash(tmp):
    """SIGKILL of the runner during a snapshot and during a fork, then a
    restart (docs/state.md): nothing half-made is listed and the sandbox
    answers with its files as they were."""
    r = tsb.runner(tmp, name="runner-crash1")
    k1 = Client.for_worker(r.client.address, r.token, "k1")
    sid = k1.create_sandbox(worker_key="k1", template="small")["id"]
    made = k1.execute(command="cd /workspace && mkdir -p t && for i in $(seq 1 300); do "
                      "echo file-$i >t/f$i; done && head -c 20000000 /dev/zero >big",
                      sandbox_id=sid, worker_key="k1")
    check("300 files and 20 MB are written", made.get("exit_code") == 0, made)
    before = tree_of(k1, "k1", sandbox_id=sid)
    base = k1.snapshot_sandbox(sid, name="crash-base", worker_key="k1")
    check("a whole snapshot to fork from", base.get("name") == "crash-base", base)

    killed_midway(r, lambda: k1.snapshot_sandbox(sid, name="crash-mid", worker_key="k1"),
                  lambda: paused(sid))
    r = tsb.runner(tmp, name="runner-crash2")
    k1 = Client.for_worker(r.client.address, r.token, "k1")
    names = sorted(x["name"] for x in k1.list_snapshots(worker_key="k1"))
    if "crash-mid" in names:
        whole = k1.get_snapshot("crash-mid", worker_key="k1")
        check("SIGKILL during a snapshot (it had finished): the one listed is whole",
              whole.get("files") == base.get("files") and names == ["crash-base", "crash-mid"],
              (names, whole, base))
        k1.delete_snapshot("crash-mid", worker_key="k1")
    else:
        check("SIGKILL during a snapshot: no half snapshot listed", names == ["crash-base"], names)
    check("after the restart the sandbox answers with its files as they were",
          tree_of(k1, "k1", sandbox_id=sid) == before)
    check("... and is not left frozen", not paused(sid))

    prefix = "crashfork-%d" % os.getpid()
    killed_midway(r, lambda: k1.fork_snapshot("crash-base", count=3, prefix=prefix, worker_key="k1"),
                  lambda: bool(forking_containers()))
    held = forking_containers()
    r = tsb.runner(tmp, name="runner-crash3")
    k1 = Client.for_worker(r.client.address, r.token, "k1")
    print("# fork containers cut short by the SIGKILL: %d" % len(held))
    listed = k1.list_sandboxes(worker_key="k1")
    check("after a SIGKILL during a fork no half-made sandbox is listed",
          not any("-forking-" in (x.get("name") or "") for x in listed), listed)
    forks = [x for x in listed if (x.get("run_id") or "").startswith(prefix)]
    for f in forks:
        check("fork %s, listed under its name, is whole" % f["run_id"],
              tree_of(k1, "k1", run_id=f["run_id"], mode="per_run") == before)
        r.client.delete_sandbox(f["id"])
    print("# SIGKILL during a fork: %d of 3 forks were listed after the restart" % len(forks))
    check("the source sandbox still answers", tree_of(k1, "k1", sandbox_id=sid) == before)
    again = k1.fork_snapshot("crash-base", count=1, prefix=prefix + "-again", worker_key="k1")
    f = (again.get("forks") or [{}])[0]
    check("a fork after the restart works", f.get("id") and not f.get("error"), again)
    if f.get("id"):
        r.client.delete_sandbox(f["id"])
    r.client.delete_sandbox(sid)
    for x in k1.list_snapshots(worker_key="k1"):
        k1.delete_snapshot(x["name"], worker_key="k1")
    reaped = r.client.reap(86400)
    half = [x for x in reaped.get("removed", reaped.get("sandboxes", [])) if
            "-forking-" in json.dumps(x)]
    print("# the reap removed %d half-made fork containers: %s" % (len(half), [x.get("reason") for x in half]))
    leftovers = forking_containers()
    check("a reap removes the forks cut short (their maker is gone), whatever their age",
          leftovers == [], (leftovers, reaped))
    if leftovers:
        ts.docker("rm", "-f", *leftovers)
    check("runner exits 0", r.stop() == 0)
    remove_images()


def main():
    suites = {"owners": tsb.stopping(suite_owners),
              "client": tsb.stopping(suite_client), "leased": tsb.stopping(suite_leased),
              "crash": tsb.stopping(suite_crash)}
    try:
        ts.run_suites(suites, "owners", "smsnap-")
    finally:
        remove_images()


if __name__ == "__main__":
    main()
