#!/usr/bin/env python3
"""Sandboxes that keep their state, on the runner (docs/state.md,
docs/http-api.md#sandboxes): POST /v1/sandboxes/{id}/pause and /resume
with the Python client against the real engine. Run by
test_state_runner.sh.

  owners  a worker token pauses and resumes its own sandbox (freeze, stop),
          a call into it by sandbox_id says "resumed" and finds its file
          (after a freeze over the session parked before it); a sandbox
          frozen by sandman and thawed by hand answers its next call and is
          listed running again;
          another worker's token can neither pause nor resume it (404,
          exactly as for a missing sandbox) and leaves it as it was;
          hibernate under runc is refused (409) saying what is missing;
          a bad tier is 400; list shows state and state_since
  thaw    the first call into a frozen sandbox goes to its parked agent
          before the engine's unpause (docs/state.md): through a gate
          (engine_gate.py) that fails that unpause, the call fails saying
          so, after its time; the sandbox stays frozen, and thawed by hand
          afterwards the call never runs; the next call works; through a
          gate that holds the unpause past the call's time, the agent
          refuses the call as late and the runner sends it again: it runs
          once (test_state_thaw.sh)

Prints "ok - ..." / "not ok - ..." and exits 0 only when everything passed
(77: no engine outside CI).
"""
import datetime
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_sandboxes as tsb  # noqa: E402
import test_server as ts  # noqa: E402
from sandman_client import Client  # noqa: E402

check = ts.check


def rest(client, sid, verb, key, **query):
    """POST /v1/sandboxes/{sid}/{verb}?worker_key=key&...: (status, body)."""
    path = client._sandbox_path(sid, "/" + verb, key)
    for k, v in query.items():
        path += ("&" if "?" in path else "?") + "%s=%s" % (k, v)
    return tsb.error_of(lambda: client._call("POST", path))


def engine_state(sid):
    insp = tsb.inspect(sid)
    return insp["State"]["Status"] if insp else "gone"


def listed(client, key, sid):
    for x in client.list_sandboxes(worker_key=key):
        if x["id"] == sid:
            return x
    return {}


def new_dangling_volumes(since):
    """Volumes no container uses, without labels, made since `since` (a
    container removed without its anonymous volumes leaves one)."""
    out = []
    for v in ts.docker("volume", "ls", "-q", "--filter", "dangling=true").stdout.split():
        p = ts.docker("volume", "inspect", "-f", "{{.CreatedAt}} {{len .Labels}}", v)
        if p.returncode != 0:
            continue
        created, labels = p.stdout.split()[0], p.stdout.split()[-1]
        made = datetime.datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
        if labels == "0" and made >= int(since):
            out.append(v)
    return out


def agent_calls_total(r, name="sandman_agent_calls_total"):
    """The runner's count of calls made over an in-sandbox agent session
    (or another counter of its /metrics)."""
    for line in r.client.metrics().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return -1


def suite_owners(tmp):
    r = tsb.runner(tmp)
    c = r.client
    k1 = Client.for_worker(c.address, r.token, "k1")
    k2 = Client.for_worker(c.address, r.token, "k2")
    sb = k1.create_sandbox(worker_key="k1", template="small")
    sid = sb["id"]
    out = k1.execute(command="echo kept >/workspace/note && cat /workspace/note", sandbox_id=sid,
                     worker_key="k1")
    check("k1's sandbox runs a call", out.get("stdout") == "kept\n", out)

    # Another worker: every pause and resume answers as for a missing one.
    missing = {
        "pause": rest(k2, "sandman-no-such-sandbox", "pause", "k2"),
        "pause stop": rest(k2, "sandman-no-such-sandbox", "pause", "k2", tier="stop"),
        "resume": rest(k2, "sandman-no-such-sandbox", "resume", "k2"),
    }
    others = {
        "pause": rest(k2, sid, "pause", "k2"),
        "pause stop": rest(k2, sid, "pause", "k2", tier="stop"),
        "resume": rest(k2, sid, "resume", "k2"),
    }
    for k in missing:
        check("another worker cannot %s it: 404 as a missing sandbox" % k,
              others[k][0] == 404 and others[k][1].get("error", "").replace(sid, "X") ==
              missing[k][1].get("error", "").replace("sandman-no-such-sandbox", "X"),
              (others[k], missing[k]))
    check("k1's sandbox still runs after k2's tries", engine_state(sid) == "running")
    st, body = rest(k1, sid, "pause", "k2")
    check("a worker token naming another key: 401", st == 401, (st, body))

    # freeze by its own worker
    for _ in range(2):  # the agent's session opened and parked
        k1.execute(command="true", sandbox_id=sid, worker_key="k1")
    agent_calls = agent_calls_total(r)
    st, body = rest(k1, sid, "pause", "k1")
    check("k1 freezes its own sandbox", st == 200 and body.get("state") == "frozen" and
          body.get("previous") == "running", (st, body))
    check("the engine has it paused", engine_state(sid) == "paused")
    check("/metrics counts it frozen", 'sandman_sandboxes_by_state{state="frozen"} 1' in
          r.client.metrics(), r.client.metrics())
    entry = listed(k1, "k1", sid)
    check("GET /v1/sandboxes: state frozen, state_since", entry.get("state") == "frozen" and
          entry.get("state_since"), entry)
    st, body = rest(k2, sid, "resume", "k2")
    check("k2 cannot resume it (404)", st == 404, (st, body))
    check("it stays frozen after k2's try", engine_state(sid) == "paused")
    out = k1.execute(command="cat /workspace/note", sandbox_id=sid, worker_key="k1")
    check("a call into the frozen sandbox works and says resumed: frozen",
          out.get("stdout") == "kept\n" and out.get("resumed") == "frozen", out)
    check("... over the agent's session parked before the freeze, not an engine exec",
          agent_calls_total(r) == agent_calls + 1, (agent_calls, agent_calls_total(r)))
    entry = listed(k1, "k1", sid)
    check("after that call the engine runs it and list says running since then",
          engine_state(sid) == "running" and entry.get("state") == "running" and
          entry.get("state_since"), (engine_state(sid), entry))

    # frozen by sandman, thawed by hand: the call works, the record is put right
    st, body = rest(k1, sid, "pause", "k1")
    check("k1 freezes it again", st == 200 and body.get("state") == "frozen", (st, body))
    check("unpaused by hand (docker unpause)", ts.docker("unpause", sid).returncode == 0)
    out = k1.execute(command="cat /workspace/note", sandbox_id=sid, worker_key="k1")
    check("a call after a thaw by hand works and brought nothing back",
          out.get("stdout") == "kept\n" and out.get("resumed") is None, out)
    check("... and list says running", listed(k1, "k1", sid).get("state") == "running")
    st, body = rest(k1, sid, "pause", "k1")
    check("... and it freezes again", st == 200 and body.get("previous") == "running" and
          body.get("state") == "frozen", (st, body))
    out = k1.execute(command="cat /workspace/note", sandbox_id=sid, worker_key="k1")
    check("... and a call thaws it again", out.get("stdout") == "kept\n" and
          out.get("resumed") == "frozen" and engine_state(sid) == "running", out)

    # stop, and resume by the route
    st, body = rest(k1, sid, "pause", "k1", tier="stop")
    check("k1 stops it", st == 200 and body.get("state") == "stopped", (st, body))
    check("the engine has it exited", engine_state(sid) == "exited")
    check("list: stopped", listed(k1, "k1", sid).get("state") == "stopped")
    st, body = rest(k1, sid, "resume", "k1")
    check("k1 resumes it: stopped -> running", st == 200 and body.get("previous") == "stopped" and
          body.get("state") == "running", (st, body))
    out = k1.execute(command="cat /workspace/note", sandbox_id=sid, worker_key="k1")
    check("its file is there after stop and resume", out.get("stdout") == "kept\n", out)

    # stopped, then a call: /workspace put back by the agent's unpacker over
    # a session the call then runs over (docs/state.md, "Who fills /workspace"):
    # one session opened for both, the call no engine exec
    st, body = rest(k1, sid, "pause", "k1", tier="stop")
    check("k1 stops it again", st == 200 and body.get("state") == "stopped", (st, body))
    opened = agent_calls_total(r, "sandman_agent_sessions_opened_total")
    calls = agent_calls_total(r)
    since = time.time()
    out = k1.execute(command="cat /workspace/note", sandbox_id=sid, worker_key="k1")
    check("a call into the stopped sandbox works and says resumed: stopped",
          out.get("stdout") == "kept\n" and out.get("resumed") == "stopped", out)
    # The agent stayed in its volume (/.sandman) through the stop: the
    # resume's one exec is the session, no install before it.
    execs = [x for x in ts.docker("events", "--since", "%.6f" % since, "--until",
                                  "%.6f" % (time.time() + 0.2), "--filter", "container=" + sid,
                                  "--filter", "event=exec_create",
                                  "--format", "{{.Action}}").stdout.splitlines()
             if x.startswith("exec_create:")]
    check("... one engine exec in all (the agent's session: no install after the stop)",
          len(execs) == 1 and "/.sandman/agent-" in execs[0], execs)
    check("... over the session its /workspace was put back through, not an engine exec",
          agent_calls_total(r) == calls + 1, (calls, agent_calls_total(r)))
    check("... one session opened for the fill and the call (no second install or open)",
          agent_calls_total(r, "sandman_agent_sessions_opened_total") == opened + 1,
          (opened, agent_calls_total(r, "sandman_agent_sessions_opened_total")))

    # refusals
    since = time.time()
    st, body = rest(k1, sid, "pause", "k1", tier="hibernate")
    check("hibernate under runc: 409 naming CRIU", st == 409 and "CRIU" in body.get("error", ""),
          (st, body))
    check("after the refusal it still runs", engine_state(sid) == "running")
    check("... and the container it tried to come back in left no volume behind",
          new_dangling_volumes(since) == [], new_dangling_volumes(since))
    st, body = rest(k1, sid, "pause", "k1", tier="nap")
    check("an unknown tier: 400", st == 400, (st, body))

    # the control token reaches it too
    st, body = rest(c, sid, "pause", None)
    check("the control token freezes it", st == 200 and body.get("state") == "frozen", (st, body))
    st, body = rest(c, sid, "resume", None)
    check("the control token resumes it", st == 200 and body.get("state") == "running", (st, body))
    agent_vol = [m.get("Name") for m in tsb.inspect(sid).get("Mounts", [])
                 if m.get("Destination") == "/.sandman" and m.get("Type") == "volume"]
    check("its /.sandman is a volume of its own", len(agent_vol) == 1 and agent_vol[0], agent_vol)
    c.delete_sandbox(sid)
    check("... removed with the sandbox",
          agent_vol and ts.docker("volume", "inspect", agent_vol[0]).returncode != 0, agent_vol)
    check("runner exits 0", r.stop() == 0)


def gated_runner(tmp, name, when):
    """A runner whose engine is behind a gate (engine_gate.py) acting WHEN
    on its first unpause: (runner, gate process, marker)."""
    gate_sock, marker = os.path.join(tmp, name + ".sock"), os.path.join(tmp, name + ".mark")
    gate = subprocess.Popen([sys.executable, os.path.join(HERE, "engine_gate.py"), gate_sock, marker,
                             when, "POST", "^/containers/[0-9a-f]{64}/unpause$", "1"])
    tsb.wait_for(lambda: os.path.exists(gate_sock), 10, 0.05)
    engine = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = "unix://" + gate_sock
    try:
        return tsb.runner(tmp, name=name), gate, marker
    except Exception:
        gate.kill()
        raise
    finally:
        if engine is None:
            del os.environ["DOCKER_HOST"]
        else:
            os.environ["DOCKER_HOST"] = engine


def suite_thaw(tmp):
    for name, when, scenario in (("failing", "fail", thaw_refused), ("slow", "slow", thaw_late),
                                 ("early", "late", thaw_answered_early),
                                 ("stopping", "late", thaw_left_at_stop)):
        r, gate, marker = gated_runner(tmp, name, when)
        try:
            scenario(r, marker)
        finally:
            gate.kill()
            gate.wait()


def frozen_with_a_parked_session(c):
    sid = c.create_sandbox(template="small")["id"]
    for _ in range(3):  # the agent's session opened and parked
        c.execute(command="true", sandbox_id=sid)
    st, body = rest(c, sid, "pause", None)
    check("frozen", st == 200 and body.get("state") == "frozen", (st, body))
    return sid


def thaw_late(r, marker):
    c = r.client
    sid = frozen_with_a_parked_session(c)
    t0 = time.time()
    out = c.execute(command="echo once >>/workspace/count; cat /workspace/count", sandbox_id=sid)
    took = time.time() - t0
    check("an unpause held past the call's time (the gate): the call works, resumed: frozen",
          os.path.exists(marker) and out.get("exit_code") == 0 and out.get("resumed") == "frozen", out)
    check("... it waited for the thaw (2.5 s)", took >= 2.5, took)
    check("... refused as late by the agent, sent again: it ran once",
          out.get("stdout") == "once\n", out)
    c.delete_sandbox(sid)
    check("runner exits 0", r.stop() == 0)


def audit_events(c):
    return [e.get("unmapped", {}).get("event") for e in c._call("GET", "/v1/audit")["events"]]


def thaw_answered_early(r, marker):
    c = r.client
    sid = frozen_with_a_parked_session(c)
    resumed_rows = audit_events(c).count("sandbox.resumed")
    out = c.execute(command="echo ran >>/workspace/count; cat /workspace/count", sandbox_id=sid)
    check("the engine's answer to the unpause held (the gate, 3 s): the call is answered before it, "
          "resumed: frozen", not os.path.exists(marker) and out.get("stdout") == "ran\n" and
          out.get("resumed") == "frozen", (os.path.exists(marker), out))
    check("... the thaw's audit row is not written before the engine's answer",
          audit_events(c).count("sandbox.resumed") == resumed_rows)
    out = c.execute(command="cat /workspace/count", sandbox_id=sid)
    check("a second call at once goes in, running, nothing resumed, before the engine's answer",
          not os.path.exists(marker) and out.get("stdout") == "ran\n" and out.get("resumed") is None,
          (os.path.exists(marker), out))
    st, body = rest(c, sid, "pause", None)
    check("a freeze then waits for the thaw to end (the engine's answer): running -> frozen",
          os.path.exists(marker) and st == 200 and body.get("previous") == "running" and
          body.get("state") == "frozen", (os.path.exists(marker), st, body))
    check("... and the thaw wrote its audit row",
          audit_events(c).count("sandbox.resumed") == resumed_rows + 1, audit_events(c))
    out = c.execute(command="cat /workspace/count", sandbox_id=sid)
    check("... and the next call thaws it again (through the engine, the gate's one hold spent)",
          out.get("stdout") == "ran\n" and out.get("resumed") == "frozen", out)
    c.delete_sandbox(sid)
    check("runner exits 0", r.stop() == 0)


def thaw_left_at_stop(r, marker):
    c = r.client
    sid = frozen_with_a_parked_session(c)
    out = c.execute(command="echo ran", sandbox_id=sid)
    check("a call answered before the engine's answer to its thaw",
          not os.path.exists(marker) and out.get("resumed") == "frozen", out)
    rc = r.stop()
    what = "the runner stopped at once after it: exits 0, and only after the engine's answer (its thaw's record written)"
    check(what, rc == 0 and os.path.exists(marker), rc)
    r2 = tsb.runner(r.tmp, name="after-stop")
    try:
        entry = listed(r2.client, None, sid)
        check("... a runner started again lists it running", entry.get("state") == "running", entry)
        check("... and the thaw's audit row is there", "sandbox.resumed" in audit_events(r2.client))
        r2.client.delete_sandbox(sid)
    finally:
        check("runner exits 0", r2.stop() == 0)


def thaw_refused(r, marker):
    c = r.client
    sid = frozen_with_a_parked_session(c)
    t0 = time.time()
    st, body = tsb.error_of(lambda: c.execute(command="echo ran >/workspace/late", sandbox_id=sid))
    took = time.time() - t0
    err = body.get("error") or ""
    check("the engine fails the thaw (the gate): the call fails, saying so",
          os.path.exists(marker) and not body.get("ok") and "unfreezing" in err, (st, body))
    check("... once its frame's time had passed (2 s), so that nothing can start it later",
          took >= 2.0, took)
    check("... and the engine has it paused still", engine_state(sid) == "paused")
    check("thawed by hand", ts.docker("unpause", sid).returncode == 0)
    time.sleep(1.0)
    check("... the refused call never ran",
          ts.docker("exec", sid, "test", "-e", "/workspace/late").returncode == 1)
    out = c.execute(command="cat /workspace/late 2>/dev/null || echo none", sandbox_id=sid)
    check("the next call works and finds nothing of it", out.get("stdout") == "none\n", out)
    c.delete_sandbox(sid)
    check("runner exits 0", r.stop() == 0)


def main():
    ts.run_suites({"owners": tsb.stopping(suite_owners), "thaw": tsb.stopping(suite_thaw)}, "owners",
                  "smstate-")


if __name__ == "__main__":
    main()
