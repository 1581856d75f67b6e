#!/bin/sh
# The project compose/dind-ci.yml's job tests when no other is named
# (SANDMAN_CI_PROJECT): a stand-in for a test suite that runs in
# sandman/minimal (busybox sh), the image the job builds in its engine.
# It reads the files copied in and changes nothing, so running the recipe
# of docs/ci.md leaves this folder as it was.
set -eu
echo "ci-example: in $(pwd) as $(id -un), on $(hostname)"
[ "$(pwd)" = /workspace ] || { echo "ci-example: not in the sandbox's /workspace" >&2; exit 1; }
grep -q 'hello from the project' greeting.txt || { echo "ci-example: greeting.txt was not copied in" >&2; exit 1; }
[ ! -e /project ] || { echo "ci-example: the job's folder is visible in the sandbox" >&2; exit 1; }
echo "ci-example: ok"
