#!/usr/bin/env bash
# From a fresh checkout to one real tool call in a sandbox: runs
# scripts/setup.sh, then
#   build/sandman run --mode per_tool -- sh -c 'echo hello from $(hostname) as $(id -un); uname -a'
# (a fresh container from sandman/minimal:latest, removed afterwards). Until
# `sandman run` is in the build it runs `build/sandman version` instead.
set -euo pipefail

SM_SCRIPT=quickstart
# shellcheck source=lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
cd "$SM_ROOT"

echo "== set-up (scripts/setup.sh)"
scripts/setup.sh || die "set-up failed"

SANDMAN=build/sandman
[ -x "$SANDMAN" ] || die "$SANDMAN was not built"

# `run --help` exits 0 and shows the options only once the command exists.
if "$SANDMAN" run --help >/dev/null 2>&1; then
  # shellcheck disable=SC2016 # expanded inside the sandbox, not here
  cmd=("$SANDMAN" run --mode per_tool -- sh -c 'echo hello from $(hostname) as $(id -un); uname -a')
  shown="$SANDMAN run --mode per_tool -- sh -c 'echo hello from \$(hostname) as \$(id -un); uname -a'"
  what="one tool call in a fresh sandbox (per_tool: container created, command run, container removed)"
  next="scripts/test.sh runs the tests; docs/run.md explains sandman run"
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
