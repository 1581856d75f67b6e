"""Shared by tests/swarm/test_swarm.py and bench/swarm/swarm_bench.py: the
rig (tests/integration/swarm_rig.sh) and runners (`sandman worker start`)
driven from Python."""
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("SANDMAN_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(SRC, "clients", "python"))
from sandman_client import Client  # noqa: E402

SANDMAN = os.environ.get("SANDMAN_BIN", os.path.join(SRC, "build", "sandman"))
RIG = os.path.join(SRC, "tests", "integration", "swarm_rig.sh")


def host_docker(*args, stdin=None):
    """The engine the test runs against (never the rig's): the test's own
    DOCKER_HOST, which under scripts/test.sh --fresh-engine is not the
    machine's default socket."""
    return subprocess.run(["docker"] + list(args), capture_output=True, text=True,
                          env=dict(os.environ), input=stdin)


def wait_for(what, cond, timeout=120, step=0.2):
    """Waits for a condition (never a fixed sleep); False after timeout."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    print("# gave up waiting for %s" % what, flush=True)
    return None


class Rig:
    def __init__(self, nodes=3):
        env = dict(os.environ, SWARM_RIG_NODES=str(nodes))
        p = subprocess.run(["bash", RIG, "up"], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError("the swarm rig did not come up: " + p.stderr[-3000:])
        first = p.stdout.splitlines()[0]
        self.file = os.path.join(first.partition("=")[2], "rig.env")
        names = [line.partition("=")[0] for line in p.stdout.splitlines()]
        q = subprocess.run(["bash", "-c", '. "$1"; shift; for v; do printf "%s=%s\\n" "$v" "${!v}"; done',
                            "_", self.file] + names, capture_output=True, text=True)
        self.env = dict(line.partition("=")[::2] for line in q.stdout.splitlines())
        self.nodes = self.env["SWARM_RIG_NODE_NAMES"].split()
        self.ips = self.env["SWARM_RIG_NODE_IPS"].split()
        self.outside = self.env["SWARM_RIG_OUTSIDE"]

    def down(self):
        subprocess.run(["bash", RIG, "down", self.file], capture_output=True, text=True)

    def in_node(self, node, *args):
        return host_docker("exec", node, "docker", *args)

    def seen(self):
        return host_docker("exec", self.env["SWARM_RIG_ID"] + "-outside", "cat",
                           "/tmp/seen.log").stdout


class Runner:
    def __init__(self, tmp, name, env, token, args):
        self.sock = os.path.join(tmp, name, "sandman.sock")
        self.log_path = os.path.join(tmp, name + ".log")
        self.log = open(self.log_path, "w")
        renv = dict(env)
        renv["SANDMAN_STATE_DIR"] = os.path.join(tmp, name + "-state")
        os.makedirs(renv["SANDMAN_STATE_DIR"], exist_ok=True)
        cmd = [SANDMAN, "worker", "start", "--listen", "unix:" + self.sock, "--token-file",
               token] + args
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=renv)
        self.client = Client("unix:" + self.sock, open(token).read().strip(), timeout=300)
        ok = wait_for("runner %s" % name, self._up, timeout=60)
        if not ok:
            raise RuntimeError("runner %s did not answer: %s" % (name, self.read_log()))

    def _up(self):
        if self.proc.poll() is not None:
            raise RuntimeError("runner exited: " + self.read_log())
        try:
            self.client.healthz()
            return True
        except OSError:
            return False

    def read_log(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def metric(self, name):
        for line in self.client.metrics().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None




def sweep_stale_rigs(instance):
    """Removes what an earlier run of the same test (same instance label) left
    when it was killed before its clean-up ran: its rig's containers (with
    their volumes) and networks. Returns how many things went."""
    flt = ["--filter", "label=io.sandman.instance=" + instance,
           "--filter", "label=io.sandman.component=swarm-rig"]
    ids = host_docker("ps", "-aq", *flt).stdout.split()
    if ids:
        host_docker("rm", "-fv", *ids)
    nets = host_docker("network", "ls", "-q", *flt).stdout.split()
    for n in nets:
        host_docker("network", "rm", n)
    return len(ids) + len(nets)


def ensure_dind_image(report):
    """sandman/dind from this checkout as the tests build it
    (scripts/test-images.sh: sandman-test/dind:<inputs hash>, never the
    user's own build of it), made the rig's engine image through
    SWARM_RIG_DIND; report(desc, ok, detail) says how it went."""
    p = subprocess.run([os.path.join(SRC, "scripts", "test-images.sh"), "ensure", "dind"],
                       capture_output=True, text=True, env=dict(os.environ, SANDMAN_BIN=SANDMAN))
    tag = p.stdout.strip()
    if p.returncode == 0 and tag:
        os.environ["SWARM_RIG_DIND"] = tag
    return report("the rig's engine image %s (scripts/test-images.sh ensure dind)" % (tag or "dind"),
                  p.returncode == 0 and bool(tag), p.stderr[-2000:])


def rig_env(rig, tmp, config_lines=""):
    """The environment of sandman commands against the rig's manager, with
    a configuration selecting the swarm backend."""
    env = dict(os.environ)
    env.update({"DOCKER_HOST": rig.env["SWARM_RIG_HOST"], "DOCKER_TLS_VERIFY": "1",
                "DOCKER_CERT_PATH": rig.env["SWARM_RIG_CERTS"],
                "SANDMAN_STATE_DIR": os.path.join(tmp, "cli-state")})
    cfg = os.path.join(tmp, "sandman.yaml")
    with open(cfg, "w") as f:
        f.write("engine:\n  backend: swarm\n  swarm:\n    node_certs: %s\n"
                "    constraints: [\"node.labels.sandman.rig==1\"]\n%s"
                % (rig.env["SWARM_RIG_CERTS"], config_lines))
    env["SANDMAN_CONFIG"] = cfg
    return env
