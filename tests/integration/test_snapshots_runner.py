#!/usr/bin/env python3
"""Snapshots, forks, rollback and diff on the runner (docs/state.md,
docs/http-api.md#snapshots) against the real engine. Run by
test_snapshots_runner.sh.

  owners  a worker snapshots its own sandbox, lists, inspects, forks,
          diffs, rolls back to and removes its own snapshot; another
          worker's token can do none of these to it (404, exactly as for
          a missing snapshot or sandbox), does not see it in its list, and
          leaves it as it was; the control token sees it
  leased  a snapshot while a call with leased credentials runs in the
          sandbox is refused (409) and nothing is made; after the call it
          is made, and the credential is in none of its image's
          configuration

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
    k1.execute(command="echo new >/workspace/added", sandbox_id=sid, worker_key="k1")
    st, body = call(k1, "GET", "/v1/sandboxes/%s/diff" % sid, "k1", snapshot="s1")
    check("k1's diff lists its new file", st == 200 and [x["path"] for x in body.get("added", [])]
          == ["added"] and body.get("modified") == [] and body.get("deleted") == [], (st, body))
    st, body = call(k1, "POST", "/v1/sandboxes/%s/rollback" % sid, "k1", snapshot="s1")
    check("k1 rolls its sandbox back", st == 200 and body.get("state") == "running", (st, body))
    out = k1.execute(command="ls /workspace", sandbox_id=body.get("id") or sid, worker_key="k1")
    check("after the rollback the new file is gone", out.get("stdout") == "note\n", out)
    for f in forks:
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


def main():
    suites = {"owners": tsb.stopping(suite_owners), "leased": tsb.stopping(suite_leased)}
    try:
        ts.run_suites(suites, "owners", "smsnap-")
    finally:
        remove_images()


if __name__ == "__main__":
    main()
