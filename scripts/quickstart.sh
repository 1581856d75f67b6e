#!/usr/bin/env bash
# From a fresh checkout to one real tool call in a sandbox: runs
# scripts/setup.sh, then
#   build/sandman run --mode per_tool -- sh -c 'echo hello from $(hostname) as $(id -un); uname -a'
# (a fresh container from sandman/minimal:latest, removed afterwards). Until
# `sandman run` is in the build it runs `build/sandman version` instead.
#
# The first run on a new Debian 12 machine takes about 5 minutes on 2 cores
# (1 once the Debian packages are there) and about 1.5 GB of disk: the
# Debian packages set-up installs (about 1.1 GB with what they pull in,
# less what the machine has), clients/typescript/node_modules (300 MB),
# build/ (80 MB) and the 2 MB image. A second run takes seconds.
# scripts/test.sh then needs about 20 minutes and 1.6 GB more the first time:
# the ASan/UBSan build, and the images the tests use (scripts/test-images.sh:
# sandman-test/general and sandman-test/dind, from debootstrap, cached in
# build/image-cache); README.md says more.
set -euo pipefail

SM_SCRIPT=quickstart
# shellcheck source=lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
cd "$SM_ROOT"

echo "== set-up (scripts/setup.sh; the first time on a machine: about 5 minutes and 1.5 GB of disk)"
scripts/setup.sh || die "set-up failed"

SANDMAN=build/sandman
[ -x "$SANDMAN" ] || die "$SANDMAN was not built"

# `run --help` exits 0 and shows the options only once the command exists.
if "$SANDMAN" run --help >/dev/null 2>&1; then
  # shellcheck disable=SC2016 # expanded inside the sandbox, not here
  cmd=("$SANDMAN" run --mode per_tool -- sh -c 'echo hello from $(hostname) as $(id -un); uname -a')
  shown="$SANDMAN run --mode per_tool -- sh -c 'echo hello from \$(hostname) as \$(id -un); uname -a'"
  what="one tool call in a fresh sandbox (per_tool: container created, command run, container removed)"
  next="scripts/test.sh runs the tests (the first time about 20 minutes and 1.6 GB more: it builds an ASan build and the images the tests use); docs/run.md explains sandman run"
else
  cmd=("$SANDMAN" version)
  shown="$SANDMAN version"
  what="'sandman run' is not in this build yet; asking the engine for its version instead"
  next="sandman reaches the engine; rebuild (scripts/setup.sh) once 'sandman run' lands"
fi

echo
echo "== $what"
echo "\$ $shown"
rc=0
"${cmd[@]}" || rc=$?
echo
if [ "$rc" -eq 0 ]; then
  echo "quickstart: it worked (exit 0). Next: $next."
else
  echo "quickstart: the command exited $rc (see the message above; docs/operations.md lists the exit codes)" >&2
  exit "$rc"
fi
