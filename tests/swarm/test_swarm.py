#!/usr/bin/env python3
"""The swarm backend on a real three-node swarm (tests/integration/swarm_rig.sh:
sandman/dind engines in containers, TLS from sandman to every node).

  1. doctor checks the swarm: manager, nodes, TLS to each node, the image;
  2. two runners (`worker start --sandbox-backend swarm`, separate state
     directories, as on two hosts) make 30 per_run sandboxes, which the
     swarm's scheduler spreads over the three nodes; calls and workspaces
     work on every node, and the second call in each goes through the
     in-sandbox agent;
  3. network none reaches nothing: not the outside (a stand-in on the nodes'
     network that records what reaches it, DNS included), not another
     sandbox, not the node's engine port; a bridge sandbox does reach the
     stand-in (the check can fail);
  4. a node is killed during a call: the call fails cleanly ("node lost",
     failure_kind sandbox); the next call of that run gets a new sandbox on
     another node with the workspace copied in again; list shows the dead
     ones, reap removes them;
  5. the two runners race on the same keys: one sandbox per key; a reap by
     one runner spares the sandboxes where the other has calls in flight,
     and those calls finish;
  6. list and rm across the swarm; everything the test made goes away.
Also: the swarm backend keeps no sandbox's state: pause (each tier),
resume, snapshot, fork, rollback and diff are refused naming the
operation and the backend, from the runner and the CLI (keep_state).
Also: runner a keeps a warm pool (size 1): one ready per_tool sandbox on
each node, which per_tool calls take; network allowlist is refused clearly.

Prints "ok - ..." / "not ok - ..." and "N passed, M failed".
"""
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from swarmlib import (SANDMAN, Rig, Runner, ensure_dind_image, host_docker, rig_env,  # noqa: E402
                      sweep_stale_rigs, wait_for)
from sandman_client import SandmanError  # noqa: E402

INSTANCE = os.environ.setdefault("SANDMAN_INSTANCE", "%s-swarm-%d" % (
    os.environ.get("SANDMAN_TEST_PREFIX") or "it", os.getpid()))
IN_CI = os.environ.get("CI") in ("true", "1")
IMAGE = "sandman/minimal:latest"

PASSED = 0
FAILED = 0


def check(desc, cond, detail=""):
    global PASSED, FAILED
    if cond:
        PASSED += 1
        print("ok - %s" % desc, flush=True)
    else:
        FAILED += 1
        print("not ok - %s%s" % (desc, (": " + str(detail)[:3000]) if detail else ""), flush=True)
    return cond


def sandman(env, *args, timeout=300):
    return subprocess.run([SANDMAN] + list(args), capture_output=True, text=True, env=env,
                          timeout=timeout)


def listing(env):
    p = sandman(env, "sandbox", "list", "--all", "--json")
    try:
        return json.loads(p.stdout)
    except ValueError:
        print("# list failed: %s %s" % (p.stdout[-500:], p.stderr[-1000:]), flush=True)
        return []


def refused(fn):
    """(status, error text) of a runner request; (200, "") when it was not refused."""
    try:
        fn()
        return 200, ""
    except SandmanError as e:
        return e.status, e.error or ""


def keep_state(a, env, sb):
    """The swarm backend keeps no sandbox's state (docs/state.md "On a
    swarm"): pause in each tier, resume, snapshot (with and without
    memory), fork, rollback and diff are refused with an error naming the
    operation and the backend, from the runner's routes and the CLI,
    before anything is touched; the snapshot lists answer (empty); the
    sandbox answers a call afterwards, the same container."""
    sid, run = sb["id"], sb["run_id"]
    c = a.client
    tries = [("pause", lambda: c.pause_sandbox(sid, tier="freeze")),
             ("stop", lambda: c.pause_sandbox(sid, tier="stop")),
             ("hibernate", lambda: c.pause_sandbox(sid, tier="hibernate")),
             ("resume", lambda: c.resume_sandbox(sid)),
             ("snapshot", lambda: c.snapshot_sandbox(sid, name="sw1")),
             ("snapshot", lambda: c.snapshot_sandbox(sid, name="sw2", memory=True)),
             ("fork", lambda: c.fork_snapshot("sw1")),
             ("rollback", lambda: c.rollback_sandbox(sid, to="sw1")),
             ("diff", lambda: c.diff_sandbox(sid, "sw1"))]
    for op, fn in tries:
        st, msg = refused(fn)
        check("runner on the swarm: %s refused (409) naming it and the backend" % op,
              st == 409 and (op + " is refused on the swarm backend") in msg, (st, msg))
    check("runner on the swarm: the snapshot list answers, empty", c.list_snapshots() == [])
    for op, args in (("pause", ["sandbox", "pause", "--run-id", run]),
                     ("stop", ["sandbox", "pause", "--tier", "stop", "--run-id", run]),
                     ("hibernate", ["sandbox", "pause", "--tier", "hibernate", "--run-id", run]),
                     ("resume", ["sandbox", "resume", "--run-id", run]),
                     ("snapshot", ["sandbox", "snapshot", "--memory", "--run-id", run]),
                     ("fork", ["sandbox", "fork", "--from-snapshot", "sw1"]),
                     ("rollback", ["sandbox", "rollback", "--to", "sw1", "--run-id", run]),
                     ("diff", ["sandbox", "diff", "--from-snapshot", "sw1", "--run-id", run])):
        p = sandman(env, *args)
        check("CLI on the swarm: %s refused (exit 125) naming it and the backend" % op,
              p.returncode == 125 and "%s is refused on the swarm backend" % op in p.stderr,
              (p.returncode, p.stderr[-500:]))
    p = sandman(env, "snapshot", "list", "--json")
    check("CLI on the swarm: snapshot list answers, empty", p.returncode == 0 and
          json.loads(p.stdout or "null") == [], (p.returncode, p.stdout, p.stderr[-300:]))
    p = sandman(env, "run", "--mode", "per_run", "--run-id", "sw-fork", "--from-snapshot", "sw1",
                "--json", "--", "true")
    check("CLI on the swarm: run --from-snapshot refused", p.returncode != 0 and
          "docker backend" in p.stdout + p.stderr, (p.returncode, p.stdout[-300:], p.stderr[-300:]))
    r = c.execute(command="echo still", run_id=run)
    check("after the refusals the sandbox answers, the same container",
          r.get("stdout") == "still\n" and r.get("sandbox_id") == sid, r)
    check("nothing was made by the refused operations", not [
        s for s in listing(env) if (s.get("run_id") or "").startswith("sw")])


def main():
    if shutil.which("docker") is None or host_docker("version").returncode != 0:
        if IN_CI:
            print("FAIL: CI=true and no engine answers", file=sys.stderr)
            return 1
        print("SKIP: no engine answers")
        return 77
    # Stopped (ctest's timeout, ^C): the clean-up below still runs.
    def stop(signum, _frame):
        raise SystemExit("stopped by signal %d" % signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    gone = sweep_stale_rigs(INSTANCE)
    if gone:
        print("# removed %d things an earlier, killed run of this test left" % gone, flush=True)
    tmp = tempfile.mkdtemp(prefix="sm-swarm-it.")
    rig = None
    runners = []
    try:
        if not ensure_dind_image(check):
            return 1
        t0 = time.time()
        rig = Rig()
        check("a swarm of three engines in containers came up (%.0f s)" % (time.time() - t0),
              len(rig.nodes) == 3)
        env = rig_env(rig, tmp)

        # 1. doctor
        p = sandman(env, "sandbox", "doctor", "--json")
        doc = json.loads(p.stdout) if p.stdout.startswith("{") else {"checks": []}
        checks = {c["name"]: c for c in doc["checks"]}
        for name, want in (("swarm_manager", "1 of 1 managers reachable"),
                           ("swarm_nodes", "3 of 3 nodes ready"),
                           ("swarm_tls", "3 of 3 ready nodes answer over TLS"),
                           ("swarm_image", "on 3 of 3 nodes")):
            c = checks.get(name, {})
            check("doctor: %s (%s)" % (name, want), c.get("ok") and want in c.get("detail", ""), c)
        check("doctor: healthy (exit 0)", p.returncode == 0 and doc.get("healthy"), p.stdout[-2000:])

        # 2. two runners, 30 per_run sandboxes
        token = os.path.join(tmp, "token")
        with open(token, "w") as f:
            f.write("swarm-it-" + os.urandom(16).hex())
        os.chmod(token, 0o600)
        wsroot = os.path.join(tmp, "ws")
        os.makedirs(wsroot)
        args = ["--pool", "swarm-it", "--sandbox-backend", "swarm", "--sandbox-mode", "per_run",
                "--sandbox-image", IMAGE, "--sandbox-network", "none", "--sandbox-cpu", "0.5",
                "--sandbox-mem", "128m", "--sandbox-pids", "64", "--sandbox-disk", "32m",
                "--project-environment", "development", "--workspaces-root", wsroot]
        # Runner a keeps a warm pool of per_tool sandboxes: one per ready node.
        a = Runner(tmp, "a", env, token, args + ["--sandbox-pool-size", "1"])
        runners.append(a)
        b = Runner(tmp, "b", env, token, args)
        runners.append(b)

        def first_call(i):
            ws = os.path.join(wsroot, "s%d" % i)
            os.makedirs(ws, exist_ok=True)
            with open(os.path.join(ws, "in.txt"), "w") as f:
                f.write("in-%d\n" % i)
            r = (a if i % 2 == 0 else b).client
            return r.execute(command="cat in.txt; echo out-%d > out.txt" % i, run_id="s%d" % i,
                             workspace=ws)

        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(6) as ex:
            results = list(ex.map(first_call, range(30)))
        bad = [(i, r.get("error")) for i, r in enumerate(results)
               if not r.get("ok") or r.get("stdout") != "in-%d\n" % i]
        check("30 per_run sandboxes made through two runners, each call saw its workspace "
              "(%.0f s)" % (time.time() - t0), not bad, bad[:3])
        back = [i for i in range(30)
                if open(os.path.join(wsroot, "s%d" % i, "out.txt")).read() != "out-%d\n" % i]
        check("every call's output file came back to its workspace", not back, back[:5])
        lst = [s for s in listing(env) if (s.get("run_id") or "").startswith("s")]
        per_node = {}
        for s in lst:
            per_node.setdefault(s.get("node"), []).append(s["run_id"])
        counts = {n: len(v) for n, v in per_node.items()}
        print("# placement by the swarm's scheduler: %s" % counts, flush=True)
        check("list shows 30 sandboxes, each with its node", len(lst) == 30 and all(
            s.get("node") in rig.nodes for s in lst), [(s.get("run_id"), s.get("node")) for s in lst][:5])
        check("the scheduler spread them over all three nodes", set(per_node) == set(rig.nodes), counts)

        # The second call in each goes through the agent (runner a opens
        # sessions in sandboxes runner b made too).
        calls0 = a.metric("sandman_agent_calls_total") or 0
        fb0 = a.metric("sandman_agent_fallbacks_total") or 0

        def second_call(i):
            return a.client.execute(command="cat in.txt out.txt", run_id="s%d" % i,
                                    workspace=os.path.join(wsroot, "s%d" % i))

        with concurrent.futures.ThreadPoolExecutor(6) as ex:
            results = list(ex.map(second_call, range(30)))
        bad = [(i, r.get("error"), r.get("stdout")) for i, r in enumerate(results)
               if not r.get("ok") or r.get("stdout") != "in-%d\nout-%d\n" % (i, i) or not r.get("reused")]
        check("a second call in every sandbox, on every node, reuses it", not bad, bad[:3])
        calls = (a.metric("sandman_agent_calls_total") or 0) - calls0
        fbs = (a.metric("sandman_agent_fallbacks_total") or 0) - fb0
        check("those 30 calls went through the in-sandbox agent on their nodes (agent calls +%d, "
              "fallbacks +%d)" % (calls, fbs), calls >= 30 and fbs == 0)

        # 2b. the warm pool, per node: a per_tool call starts runner a's pool
        # of its configuration, which keeps one ready sandbox on each node
        # (placed by the scheduler); per_tool calls then take those.
        r = a.client.execute(command="echo first", mode="per_tool")
        check("a per_tool call on the swarm runs", r.get("ok") and r.get("stdout") == "first\n", r)

        # Ready in the runner's own count (made and checked on its node),
        # then as the swarm lists them.
        wait_for("the runner's pool to have three ready",
                 lambda: (a.metric("sandman_pool_ready") or 0) >= 3, timeout=240)
        pooled = [s for s in listing(env) if s.get("pool") and s.get("status") == "running"]
        spread = sorted(s.get("node") for s in pooled)
        print("# warm pool placement: %s" % spread, flush=True)
        check("the warm pool keeps size x nodes = 3 ready per_tool sandboxes, none busy (on %s)"
              % spread, len(pooled) == 3 and not any(s.get("busy") for s in pooled), pooled)
        check("one on each node", spread == sorted(rig.nodes), spread)
        taken0 = a.metric("sandman_pool_taken_total") or 0
        with concurrent.futures.ThreadPoolExecutor(3) as ex:
            results = list(ex.map(lambda i: a.client.execute(command="id -u; echo warm-%d" % i,
                                                             mode="per_tool"), range(3)))
        check("three per_tool calls ran in ready sandboxes",
              all(x.get("ok") and x.get("stdout", "").endswith("warm-%d\n" % i)
                  for i, x in enumerate(results)), results)
        taken = (a.metric("sandman_pool_taken_total") or 0) - taken0
        used = {x.get("sandbox_id") for x in results}
        check("they took the pool's sandboxes (taken +%d), one each" % taken,
              taken == 3 and used == {s.get("id") for s in pooled}, (used, pooled))
        names = {s.get("name") for s in pooled}
        gone = wait_for("the used pool sandboxes to go", lambda: not names & {
            s.get("name") for s in listing(env)}, timeout=60)
        check("a used pool sandbox is removed after its call (per_tool)", gone)

        # 3. network none reaches nothing
        by_run = {s["run_id"]: s for s in lst}
        x_run = per_node[rig.nodes[1]][0] if rig.nodes[1] in per_node else "s0"
        x_node = by_run[x_run]["node"]
        y_run = next(r for r in by_run if by_run[r]["node"] != x_node)
        y = by_run[y_run]
        y_ip = rig.in_node(y["node"], "inspect", "-f",
                           "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                           y["id"]).stdout.strip()
        x_ip_node = rig.ips[rig.nodes.index(x_node)]
        probe = ("for t in %s:8080 %s:9000 %s:2376 %s:2376; do h=${t%%:*}; p=${t#*:}; "
                 "o=$(echo | nc -w 3 $h $p 2>&1); echo \"$t rc=$? $o\"; done; "
                 "nslookup leak-direct.example %s 2>&1 | tail -n 2; "
                 "nslookup leak-embedded.example 2>&1 | tail -n 2"
                 % (rig.outside, y_ip, x_ip_node, rig.ips[0], rig.outside))
        seen_before = rig.seen()
        r = a.client.execute(command=probe, run_id=x_run, timeout_s=60)
        out = r.get("stdout", "")
        print("# from %s on %s (other sandbox %s at %s):\n# %s" % (
            x_run, x_node, y_run, y_ip, out.replace("\n", "\n# ")), flush=True)
        check("the probe ran in a none sandbox", r.get("exit_code") is not None and y_ip, r)
        check("none: the outside stand-in is not reached (no answer)", "outside" not in out, out)
        y_line = next((line for line in out.splitlines() if line.startswith(y_ip + ":9000 ")), "")
        check("none: another sandbox's address is not reached (no route to it)",
              "rc=0" not in y_line and "unreachable" in y_line, out)
        check("none: the node's engine port (2376) and the manager's are not reached",
              "%s:2376 rc=0" % x_ip_node not in out and "%s:2376 rc=0" % rig.ips[0] not in out, out)
        seen_after = rig.seen()
        new = seen_after[len(seen_before):]
        check("none: nothing reached the outside stand-in, DNS included (its log)", new == "", new)
        # The controls: the stand-in answers the node, and a bridge sandbox.
        ctl = host_docker("exec", x_node, "python3", "-c",
                          "import socket; s=socket.create_connection(('%s',8080),5); "
                          "print(s.recv(64).decode().strip())" % rig.outside)
        check("control: the node itself reaches the stand-in", ctl.stdout.strip() == "outside",
              ctl.stderr)
        p = sandman(env, "run", "--mode", "per_run", "--run-id", "bridge-ctl", "--network", "bridge",
                    "--json", "--", "sh", "-c", "echo | nc -w 5 %s 8080" % rig.outside)
        rb = json.loads(p.stdout) if p.stdout.startswith("{") else {}
        check("control: a bridge sandbox on the swarm does reach it",
              rb.get("stdout", "").strip() == "outside", p.stdout + p.stderr)

        # allowlist (the egress proxy) is not built for the swarm: refused
        # clearly, before anything is made.
        aenv = dict(env, SANDMAN_CONFIG=os.path.join(tmp, "allowlist.yaml"))
        with open(env["SANDMAN_CONFIG"]) as f, open(aenv["SANDMAN_CONFIG"], "w") as g:
            g.write(f.read() + "defaults:\n  network: allowlist\n  egress:\n    allow: [\"%s:8080\"]\n"
                    % rig.outside)
        p = sandman(aenv, "run", "--mode", "per_run", "--run-id", "allow-x", "--json", "--", "true")
        ra = json.loads(p.stdout) if p.stdout.startswith("{") else {}
        msg = (ra.get("error") or "") + p.stderr
        check("allowlist on the swarm is refused clearly (exit %d: %s)" % (p.returncode, msg.strip()[:200]),
              p.returncode != 0 and not ra.get("ok") and "allowlist" in msg and "swarm backend" in msg,
              p.stdout + p.stderr)
        check("and nothing was made for it",
              not [s for s in listing(env) if s.get("run_id") == "allow-x"])

        keep_state(a, env, by_run[x_run])

        # 4. a node killed during a call
        victim = rig.nodes[2] if rig.nodes[2] in per_node else rig.nodes[1]
        k_run = per_node[victim][0]
        on_victim = set(per_node[victim])
        holder = {}

        def long_call():
            holder["r"] = a.client.execute(command="sleep 120", run_id=k_run,
                                           workspace=os.path.join(wsroot, k_run), timeout_s=200)

        th = threading.Thread(target=long_call)
        th.start()
        busy = wait_for("the call in %s to be in flight" % k_run,
                        lambda: any(s.get("run_id") == k_run and s.get("busy") for s in listing(env)),
                        timeout=60)
        check("the run's call is in flight (list says busy)", busy)
        before = {s["name"]: s.get("run_id") for s in listing(env) if s.get("node") == victim}
        on_victim = {r or "" for r in before.values()}
        kill = host_docker("kill", victim)
        check("node %s killed" % victim, kill.returncode == 0, kill.stderr)
        t0 = time.time()
        # What list says of the node from now on. The runners' own idle reap
        # (every 60 s) removes dead sandboxes too, so a sandbox may be listed
        # dead only for a while: watched from the kill on, not looked at once
        # after the calls below (under load that came after the runners'
        # reap, and the wait never saw one dead).
        seen_dead = {}
        watching = threading.Event()
        watching.set()

        def watch():
            while watching.is_set():
                for s in listing(env):
                    if s.get("node") == victim and s.get("status") == "dead":
                        seen_dead.setdefault(s["name"], time.time() - t0)
                time.sleep(0.5)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        th.join(timeout=240)
        r = holder.get("r", {})
        check("the call on the killed node failed cleanly: failure_kind sandbox, 'node lost' "
              "(%.0f s after the kill)" % (time.time() - t0),
              r.get("failure_kind") == "sandbox" and "node lost" in (r.get("error") or ""), r)
        r = a.client.execute(command="cat in.txt; ls", run_id=k_run,
                             workspace=os.path.join(wsroot, k_run))
        new_node = next((s.get("node") for s in listing(env) if s.get("run_id") == k_run), None)
        check("the run's next call got a new sandbox on another node (%s)" % new_node,
              r.get("ok") and not r.get("reused") and new_node not in (None, victim), r)
        check("its workspace was copied in again",
              r.get("stdout", "").startswith("in-%s\n" % k_run[1:]) and "out.txt" in r.get("stdout", ""),
              r.get("stdout"))
        # Done when every sandbox that stayed on the node (the killed call's
        # moved) was listed dead, or was removed as dead by a runner's idle
        # reap ("not running (dead)" in its log). The manager sees the node
        # down when its heartbeats stop: about 20 s, longer under load.
        stayed = {n for n, r in before.items() if r and r != k_run}

        def reaped_dead():
            text = a.read_log() + b.read_log()
            return {n for n in stayed if "idle reap removed sandbox %s: not running (dead)" % n in text}

        done = wait_for("the node's sandboxes to be listed dead or reaped as dead",
                        lambda: stayed and stayed <= set(seen_dead) | reaped_dead(), timeout=240)
        watching.clear()
        watcher.join(timeout=60)
        if not done:
            print("# the manager's nodes: %s" % rig.in_node(rig.nodes[0], "node", "ls").stdout,
                  flush=True)
        # Either way sandman's list found them dead (the runners' reap decides
        # from the same list); which of the two saw them first is the load's.
        listed = {n for n in stayed if n in seen_dead}
        check("the killed node's sandboxes are dead: %d seen so in list (the first %.0f s after "
              "the kill), %d removed as dead by the runners' idle reap before" % (
                  len(listed), min(seen_dead.values() or [0]), len(stayed - listed)),
              done, (sorted(seen_dead), sorted(stayed), sorted(reaped_dead())))
        dead = [s for s in listing(env) if s.get("node") == victim]
        check("what is still listed on the killed node is dead",
              all(s.get("status") == "dead" for s in dead), dead)
        p = sandman(env, "sandbox", "reap", "--json")
        rep = json.loads(p.stdout) if p.stdout.startswith("{") else {}
        removed = {x["name"] for x in rep.get("removed", [])}
        check("reap removes the dead sandboxes (no --older-than needed)",
              {s["name"] for s in dead} <= removed, p.stdout + p.stderr)
        check("and nothing on the killed node is listed any more",
              not [s for s in listing(env) if s.get("node") == victim])

        # 5. two runners racing on the same keys
        keys = ["race%d" % k for k in range(8)]

        def race(job):
            k, r = job
            return r.client.execute(command="echo $$", run_id=k)

        jobs = [(k, r) for k in keys for r in (a, b, a, b)]
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            results = list(ex.map(race, jobs))
        check("32 racing calls on 8 keys through both runners all ran",
              all(x.get("ok") for x in results), [x.get("error") for x in results if not x.get("ok")][:3])
        ids = {}
        for (k, _), x in zip(jobs, results):
            ids.setdefault(k, set()).add(x.get("sandbox_id"))
        check("one sandbox per key (the swarm's unique names)", all(len(v) == 1 for v in ids.values()),
              ids)
        racing = [s for s in listing(env) if (s.get("run_id") or "").startswith("race")]
        check("list has exactly 8 of them", len(racing) == 8, [s.get("name") for s in racing])

        held = {}

        # Each call stays in flight until the test lets it go (a file in its
        # sandbox, made through the node's engine after the reap), not for a
        # fixed time a loaded machine can outrun; at most 150 s.
        release = "/tmp/sm-release"

        def hold(k):
            held[k] = a.client.execute(
                command="i=0; while [ ! -e %s ] && [ $i -lt 750 ]; do sleep 0.2; i=$((i+1)); "
                        "done; echo held" % release, run_id=k, timeout_s=200)

        threads = [threading.Thread(target=hold, args=(k,)) for k in keys[:3]]
        for t in threads:
            t.start()
        busy = wait_for("three calls in flight", lambda: len(
            [s for s in listing(env) if s.get("run_id") in keys[:3] and s.get("busy")]) == 3,
            timeout=60)
        check("runner a has calls in flight in three sandboxes", busy)
        rep = b.client.reap(older_than_s=0)
        removed = {x["name"] for x in rep.get("removed", [])}
        spared = {x["name"]: x["reason"] for x in rep.get("spared", [])}
        busy_names = {s["name"] for s in racing if s["run_id"] in keys[:3]}
        idle_names = {s["name"] for s in racing if s["run_id"] not in keys[:3]}
        check("runner b's reap spared the busy ones", busy_names.isdisjoint(removed) and all(
            "busy" in spared.get(n, "") for n in busy_names), rep)
        check("and removed the idle ones across the swarm", idle_names <= removed, rep)
        for s in listing(env):
            if s.get("run_id") in keys[:3]:
                rig.in_node(s.get("node"), "exec", s.get("id"), "touch", release)
        for t in threads:
            t.join(timeout=240)
        check("the calls in flight finished", all(
            held.get(k, {}).get("stdout") == "held\n" for k in keys[:3]), held)

        # 6. rm across the swarm, then everything goes
        p = sandman(env, "sandbox", "rm", "--run-id", keys[0])
        check("sandbox rm --run-id removes a sandbox on whatever node", p.returncode == 0 and not [
            s for s in listing(env) if s.get("run_id") == keys[0]], p.stdout + p.stderr)
        for r in runners:
            r.stop()
        p = sandman(env, "sandbox", "reap", "--older-than", "0s", "--force", "--json")
        left = listing(env)
        check("reap --force leaves no sandbox of this instance on the swarm", left == [],
              [s.get("name") for s in left])
        svc = rig.in_node(rig.nodes[0], "service", "ls", "-q", "--filter",
                          "label=io.sandman.instance=" + INSTANCE).stdout.split()
        check("no service of this instance is left", svc == [], svc)
    except Exception as e:  # noqa: BLE001 - a failed step is a failed test, not a crash
        check("the test ran to its end", False, repr(e))
    finally:
        for r in runners:
            r.stop()
        rig_id = rig.env.get("SWARM_RIG_ID") if rig else None
        if rig:
            rig.down()
        else:
            # Stopped while the rig was coming up: whatever of it exists.
            sweep_stale_rigs(INSTANCE)
        shutil.rmtree(tmp, ignore_errors=True)
        if rig_id:
            left = host_docker("ps", "-aq", "--filter", "label=io.sandman.swarm-rig=" + rig_id).stdout
            nets = host_docker("network", "ls", "-q", "--filter", "name=" + rig_id).stdout
            check("the rig is gone: no container, no network of it on the host engine",
                  left.strip() == "" and nets.strip() == "", left + nets)
    print("%d passed, %d failed" % (PASSED, FAILED), flush=True)
    return 0 if FAILED == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
