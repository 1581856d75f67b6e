#!/usr/bin/env bash
# Install works (issue 15 items 5 and 9): `cmake --install` into a fresh
# prefix puts the tool, the library, `man sandman`, the bash/zsh/fish
# completion scripts and the image definitions in place; the installed
# sandman finds its library and, run from anywhere, `sandman image build
# minimal` finds share/sandman/images. The Python client installs offline
# (`pip install --no-index clients/python`) and, when no runner answers,
# says which address it tried.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
BUILD=${SANDMAN_BUILD_DIR:-$SRC_DIR/build}
WORK=$(mktemp -d)
TAG=sandman-it/$(printf '%s' "$SANDMAN_INSTANCE" | tr -c 'a-z0-9._-' '-')/minimal:1
cleanup() {
  docker image rm -f "$TAG" >/dev/null 2>&1 || true
  cleanup_instance
  rm -rf "$WORK"
}
trap cleanup EXIT

P=$WORK/prefix
check "cmake --install into a fresh prefix" bash -c "cmake --install '$BUILD' --prefix '$P' >'$WORK/install.log' 2>&1"
for f in bin/sandman share/man/man1/sandman.1 share/bash-completion/completions/sandman \
  share/zsh/site-functions/_sandman share/fish/vendor_completions.d/sandman.fish \
  share/sandman/images/minimal/Dockerfile share/sandman/images/general/rootfs.sh \
  share/sandman/compose/ci-job.sh include/sandman/sandman.h; do
  check "installed: $f" test -e "$P/$f"
done
check "installed: the library" bash -c "ls '$P'/lib*/libsandman.so* >/dev/null"
expect_eq "the installed man page is the tool's own" "$("$SANDMAN" help --man | sed 1d)" "$(sed 1d "$P/share/man/man1/sandman.1")"
expect_contains "man sandman renders" "sandman - a sandbox manager" \
  "$(MANPATH=$P/share/man man -P cat sandman 2>/dev/null || groff -man -Tutf8 "$P/share/man/man1/sandman.1" 2>&1)"
expect_eq "the installed bash completion is the tool's own" "$("$SANDMAN" completion bash)" \
  "$(cat "$P/share/bash-completion/completions/sandman")"

# The installed tool, away from the source tree.
out=$(cd / && env -u LD_LIBRARY_PATH "$P/bin/sandman" --help 2>&1 | head -n 1)
expect_eq "the installed sandman runs (finds its library)" "Usage: sandman [OPTIONS] COMMAND [ARGS]" "$out"
if "$SANDMAN" version >/dev/null 2>&1; then
  rc=0
  (cd / && env -u SANDMAN_IMAGES_DIR "$P/bin/sandman" image build minimal --tag "$TAG") >"$WORK/build.out" 2>"$WORK/build.log" || rc=$?
  expect_eq "installed: image build minimal from / finds share/sandman/images" 0 "$rc"
  expect_contains "... the folder it used" "$P/share/sandman/images/minimal" "$(cat "$WORK/build.log")"
  expect_eq "... and built the image" "$(docker image inspect -f '{{.Id}}' "$TAG" 2>&1)" "$(cat "$WORK/build.out")"
elif [ "${CI:-}" = true ]; then
  it_fail "CI=true and no engine answers (image build from the installed folders)"
fi

# The Python client, offline.
if python3 -m venv "$WORK/venv" >/dev/null 2>&1; then
  check "pip install --no-index clients/python" \
    bash -c "'$WORK/venv/bin/pip' install --no-index '$SRC_DIR/clients/python' >'$WORK/pip.log' 2>&1"
  [ -s "$WORK/pip.log" ] && grep -q 'Successfully installed' "$WORK/pip.log" || sed 's/^/#   /' "$WORK/pip.log"
  out=$(cd / && SANDMAN_URL="unix:$WORK/no-runner.sock" "$WORK/venv/bin/python" -c '
import sandman_client as s
try:
    s.Client().healthz()
except s.SandmanUnreachable as e:
    print("unreachable:", e)
' 2>&1)
  expect_contains "the installed client names the address it tried and where it came from" \
    "no sandman runner answers at unix:$WORK/no-runner.sock (from SANDMAN_URL)" "$out"
  out=$(cd / && "$WORK/venv/bin/python" "$SRC_DIR/clients/python/example.py" "tcp://127.0.0.1:1" 2>&1) && rc=0 || rc=$?
  expect_eq "example.py without a runner exits 1" 1 "$rc"
  expect_contains "... with the address, not a traceback" "no sandman runner answers at tcp://127.0.0.1:1" "$out"
  expect_not_contains "... no traceback" "Traceback" "$out"
else
  it_fail "python3 -m venv is not available"
fi
it_done
