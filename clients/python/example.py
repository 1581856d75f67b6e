#!/usr/bin/env python3
"""Example: a primary agent runtime talking to a sandman runner.

    sandman worker start --sandbox-mode per_run --token-file ~/.sandman-token \
        --credentials-file ~/.sandman-creds.json &
    SANDMAN_TOKEN=$(cat ~/.sandman-token) python3 example.py

It runs a shell call, leases a credential to one call, and sends a long
call to the background and polls it.
"""
import sys
import time

from sandman_client import Client, SandmanError, SandmanUnreachable


def main():
    address = sys.argv[1] if len(sys.argv) > 1 else None
    runner = Client(address)  # address from SANDMAN_URL, token from SANDMAN_TOKEN
    try:
        print("runner:", runner.health())
    except SandmanUnreachable as e:
        print("example: %s" % e, file=sys.stderr)
        return 1

    r = runner.execute(tool="shell", command="echo hello from $(id -un); uname -s",
                       run_id="example-run")
    print("exit %s in %s ms: %s" % (r["exit_code"], r["duration_ms"], r["stdout"].strip()))

    # A worker's own token opens only that worker's calls.
    worker = Client.for_worker(runner.address, runner.token, "worker-1")
    r = worker.execute(argv=["sh", "-c", "echo per-worker"], worker_key="worker-1",
                       mode="per_worker")
    print("worker call:", r["stdout"].strip(), r["sandbox_id"][:12])

    # A credential lease: the value reaches this one exec only.
    try:
        lease = runner.create_lease(tool="shell", services=["github"], ttl_s=30)
        r = runner.execute(tool="shell", command='test -n "$GH_TOKEN" && echo has-token',
                           run_id="example-run", lease_id=lease["lease_id"])
        print("leased call:", r["stdout"].strip())
    except SandmanError as e:
        print("no lease (start the runner with --credentials-file):", e.error)

    # A call that outlives its timeout goes to the background.
    r = runner.execute(tool="shell", command="for i in 1 2 3; do echo $i; sleep 1; done",
                       run_id="example-run", timeout_s=1, background_on_timeout=True)
    if "handle" in r:
        h = r["handle"]
        while True:
            state = runner.handle(h)
            print("handle %s: %s, output so far %r" % (h[:8], state["state"], state["stdout"]))
            if state["state"] != "running":
                break
            time.sleep(1)
        runner.kill_handle(h)  # forget it
    return 0


if __name__ == "__main__":
    sys.exit(main())
