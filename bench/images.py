"""The image a bench runs its code in when none is named: sandman/general
built under the tests' own tag by scripts/test-images.sh (what a fresh
machine has after it), never a user's own tag of it, which set-up does not
build."""
import os
import subprocess

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def general_image(sandman):
    """The tag of the tests' build of sandman/general, built if missing."""
    p = subprocess.run([os.path.join(SRC, "scripts", "test-images.sh"), "ensure", "general"],
                       env=dict(os.environ, SANDMAN_BIN=os.path.abspath(sandman)),
                       capture_output=True, text=True)
    lines = p.stdout.split()
    if p.returncode != 0 or not lines:
        raise SystemExit("scripts/test-images.sh ensure general failed: " + p.stderr[-800:])
    return lines[-1]
