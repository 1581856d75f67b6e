"""The image check of tests/integration/launch.sh: did the test make a
container from an image that nothing of this test run made?

    image_check.py TEST INSTANCE EVENTS < PROVIDED

EVENTS: the engine's events while the test ran (`docker events --format
'{{json .}}'`: container create, image tag/load/import). PROVIDED: the images
scripts/setup.sh and scripts/test-images.sh provide, one a line. A container
counts as the test's when its io.sandman.instance label is INSTANCE or starts
with INSTANCE- (tests make instances of their own under theirs). Its image
must be provided, or tagged, loaded or imported while the test ran (the test
built it), or one sandman makes for itself whenever it is missing (labelled
io.sandman.managed=true: the egress proxy's sandman/egress:<hash>); an image
given by id (a build step's) is not a name anything could have left behind,
and passes. Exit 1, naming the test and each image, if not.
"""
import json
import re
import subprocess
import sys

HEX = re.compile(r"^(sha256:)?[0-9a-f]{12,64}$")


def normal(ref):
    """repo:tag with the default tag made explicit; a digest reference
    (repo@sha256:...) stays as it is."""
    if "@" in ref:
        return ref
    last = ref.rsplit("/", 1)[-1]
    return ref if ":" in last else ref + ":latest"


def repo(ref):
    ref = ref.split("@", 1)[0]
    head, _, last = ref.rpartition("/")
    return (head + "/" if head else "") + last.split(":", 1)[0]


def sandman_made(ref):
    """True when sandman made the image itself (it makes it again when it is
    missing, so no test depends on an earlier one having made it)."""
    p = subprocess.run(["docker", "image", "inspect", "-f",
                        '{{index .Config.Labels "io.sandman.managed"}}', ref],
                       capture_output=True, text=True)
    return p.returncode == 0 and p.stdout.strip() == "true"


def main():
    test, instance, path = sys.argv[1:4]
    allowed = {normal(x.strip()) for x in sys.stdin if x.strip()}
    made_ids = set()
    used = []
    with open(path) as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            kind, action = ev.get("Type"), ev.get("Action") or ev.get("status")
            actor = ev.get("Actor") or {}
            attrs = actor.get("Attributes") or {}
            if kind == "image" and action in ("tag", "load", "import"):
                if attrs.get("name"):
                    allowed.add(normal(attrs["name"]))
                made_ids.add(actor.get("ID", ""))
            elif kind == "container" and action == "create":
                owner = attrs.get("io.sandman.instance", "")
                if instance and (owner == instance or owner.startswith(instance + "-")):
                    used.append((attrs.get("image", ""), attrs.get("name", "?"), owner))
    allowed_repos = {repo(a) for a in allowed}
    bad = {}
    for image, name, owner in used:
        if not image or HEX.match(image) or image in made_ids:
            continue
        ref = normal(image)
        if ref in allowed or ("@" in ref and repo(ref) in allowed_repos) or sandman_made(ref):
            continue
        bad.setdefault(ref, []).append(name)
    for ref, names in sorted(bad.items()):
        print("image check: FAIL: %s made %d container(s) (%s) from image %s, which neither "
              "scripts/setup.sh nor scripts/test-images.sh provides and which was not built "
              "while the test ran: build it in the test under a tag of its own, or get it from "
              "scripts/test-images.sh" % (test, len(names), ", ".join(sorted(names)[:3]), ref),
              file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
