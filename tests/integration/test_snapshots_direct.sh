#!/usr/bin/env bash
# A snapshot reads /workspace from its volume on the host (docs/state.md,
# "How a snapshot reads /workspace"), against the real engine: a tree with
# every kind of entry (nested and empty folders, empty and large files,
# names with spaces, unicode, a newline and a byte that is not UTF-8, a
# root-owned file, modes 0600, 4755 and a 1777 folder, relative, absolute,
# dangling and folder symlinks pointing at the host's /etc and /root, a
# hard link pair, a fifo) taken
# the direct way (the debug log says so) is the engine's archive of the
# same tree entry by entry (name, type, mode, owner, size, hash, link
# target): the engine's own `docker cp`, and a snapshot sent down the
# engine's path by an identity that does not match (the test-only
# SANDMAN_TEST_SNAPSHOT_DIRECT_SOURCE points the check at another folder),
# which still makes a whole snapshot, and a sandman in a mount namespace of
# its own, where the volume's path is missing or is a folder that is not
# the engine's (tmpfs over the engine's volumes), reads it through the
# engine too; a tree too deep for sandman's walk is
# read again by the engine. Nothing of the host's /etc or /root is
# in the tar (its links are links), and a fork of it holds the same tree.
# Run by hand: SANDMAN_INSTANCE=h1-direct tests/integration/test_snapshots_direct.sh
source "$(dirname "$0")/lib.sh"
require_engine

WORK=$(mktemp -d)
trap 'cleanup_instance; it_remove_snapshot_images; rm -rf "$WORK"' EXIT
cleanup_instance
it_remove_snapshot_images
rm -rf "${SANDMAN_STATE_DIR:?}"/*

container_of() {
  docker ps -aq --no-trunc --filter "label=io.sandman.instance=$SANDMAN_INSTANCE" --filter "label=io.sandman.run=$1" | head -1
}
snap_dir() { dirname "$(grep -l "\"name\": *\"$1\"" "$SANDMAN_STATE_DIR"/snapshots/*/meta.json | head -1)"; }

# Every kind of entry, made by the sandbox's user; a root-owned file made
# by root in the sticky folder (root there has no CAP_DAC_OVERRIDE).
GEN='set -e; cd /workspace
mkdir -p a/b/c empty "with space" "ünï"
: >empty-file
dd if=/dev/urandom of=a/big bs=1M count=3 2>/dev/null
echo secret >a/b/c/mine && chmod 600 a/b/c/mine
echo tool >tool && chmod 4755 tool
mkdir shared && chmod 1777 shared
echo one >"with space/a file" && echo two >"ünï/ü.txt" && printf "nl\n" >"new
line"
ln -s a/big rel && ln -s /etc/passwd abs && ln -s /nowhere/at/all dangling
ln -s /etc etc && ln -s /root/.ssh/id_rsa key && ln -s a/b dirlink
echo linked >hl1 && ln hl1 a/hl2
mkfifo pipe
echo raw >"$(printf "raw\377byte")"
echo made'
R=direct-src-$$
expect_eq "the tool made its tree" "made" "$(it_call_per_run "$R" -- sh -c "$GEN" | it_stdout | tr -d '\n')"
C=$(container_of "$R")
docker exec -u 0 "$C" sh -c 'echo root-owned >/workspace/shared/rootfile && chmod 640 /workspace/shared/rootfile'
check "a file owned by root is in the tree" test "$(docker exec "$C" stat -c %u:%a /workspace/shared/rootfile)" = "0:640"

# The engine's mount namespace: a tmpfs volume is mounted there when its
# container starts. An engine in a namespace of its own (CI's brand-new
# engine: scripts/lib/fresh-dockerd.sh) keeps that mount from this one,
# where the volume's path is the empty folder beneath: a sandman here must
# not read it (checked below), and the direct read is shown by a sandman
# entering the engine's namespace, where the folder is the engine's.
pidfile=${SANDMAN_DOCKERD_PIDFILE:-/var/run/docker.pid}
engine_pid=$(cat "$pidfile" 2>/dev/null || pidof dockerd || true)
check "the engine's process is known (its pid file or pidof)" test -n "$engine_pid" -a -e "/proc/${engine_pid%% *}/ns/mnt"
ENGINE_NS=/proc/${engine_pid%% *}/ns/mnt
NSENTER=()
if [ "$(readlink "$ENGINE_NS")" != "$(readlink /proc/self/ns/mnt)" ]; then
  NSENTER=(nsenter "--mount=$ENGINE_NS" --)
  "$SANDMAN" --log-level debug sandbox snapshot --run-id "$R" --name outside 2>"$WORK/outside.log" >/dev/null
  expect_contains "a sandman outside the engine's mount namespace: the engine's archive read it" "path=engine" \
    "$(grep snapshot.read "$WORK/outside.log")"
  expect_contains "... the identity check said the folder it sees is not the engine's /workspace" \
    "is not the engine's /workspace" "$(grep snapshot.read "$WORK/outside.log")"
  "$SANDMAN" snapshot rm outside >/dev/null
fi
in_engine_ns() { "${NSENTER[@]}" "$SANDMAN" "$@"; }

# --- the direct read -------------------------------------------------------------
in_engine_ns --log-level debug sandbox snapshot --run-id "$R" --name direct 2>"$WORK/direct.log" >/dev/null
expect_contains "the snapshot read /workspace from its volume" "path=direct" "$(grep snapshot.read "$WORK/direct.log")"
expect_contains "the commit and the read went at once" "read=direct" "$(grep snapshot.steps "$WORK/direct.log")"
D=$(snap_dir direct)

# --- the engine's path: an identity that does not match ---------------------------
mkdir "$WORK/elsewhere"
SANDMAN_TEST_SNAPSHOT_DIRECT_SOURCE="$WORK/elsewhere" "$SANDMAN" --log-level debug sandbox snapshot \
  --run-id "$R" --name engine 2>"$WORK/engine.log" >/dev/null
expect_contains "a folder that is not the engine's /workspace: the engine's archive read it" "path=engine" \
  "$(grep snapshot.read "$WORK/engine.log")"
expect_contains "the reason is said" "is not the engine's /workspace" "$(grep snapshot.read "$WORK/engine.log")"
E=$(snap_dir engine)
check "the snapshot down the engine's path is whole" test -s "$E/workspace.tar" -a -s "$E/manifest.json"

# --- sandman in a mount namespace of its own (as in a container beside the
# engine's socket): the volume's path is not the engine's folder there --------
ROOT=$(docker info -f '{{.DockerRootDir}}')
SRC=$(docker inspect -f '{{range .Mounts}}{{if eq .Destination "/workspace"}}{{.Source}}{{end}}{{end}}' "$C")
expect_contains "the /workspace volume's folder is under the engine's data root" "$ROOT/volumes/" "$SRC"
# A tmpfs over the engine's volumes: first nothing at that path, then a
# folder made there (same path, not the engine's folder).
in_ns() { unshare -m --propagation private sh -c "mount -t tmpfs sm-test '$ROOT/volumes' && $1"; }
in_ns "\"$SANDMAN\" --log-level debug sandbox snapshot --run-id '$R' --name ns-missing" \
  2>"$WORK/ns-missing.log" >/dev/null
expect_contains "another mount namespace, no folder at the volume's path: the engine's archive read it" \
  "path=engine" "$(grep snapshot.read "$WORK/ns-missing.log")"
expect_contains "... saying it cannot open it" "cannot open" "$(grep snapshot.read "$WORK/ns-missing.log")"
in_ns "mkdir -p '$SRC' && \"$SANDMAN\" --log-level debug sandbox snapshot --run-id '$R' --name ns-other" \
  2>"$WORK/ns-other.log" >/dev/null
expect_contains "another mount namespace, a folder of its own at the volume's path: the engine's archive read it" \
  "path=engine" "$(grep snapshot.read "$WORK/ns-other.log")"
expect_contains "... the identity check said it is not the engine's /workspace" "is not the engine's /workspace" \
  "$(grep snapshot.read "$WORK/ns-other.log")"
check "... and both snapshots are whole" cmp "$(snap_dir ns-missing)/manifest.json" "$(snap_dir ns-other)/manifest.json"

# The engine's own archive of the same tree (nothing runs in it meanwhile).
docker cp "$C:/workspace/." - >"$WORK/cp.tar"

# Every entry: name, type, mode, owner, size, data hash, link target, device.
cat >"$WORK/rows.py" <<'EOF'
import hashlib, sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    for m in t:
        h = hashlib.sha256(t.extractfile(m).read()).hexdigest() if m.isreg() else ""
        print(repr((m.name.rstrip("/") or ".", m.type, oct(m.mode & 0o7777), m.uid, m.gid, m.size,
                    m.linkname, h, m.devmajor, m.devminor)))
EOF
python3 "$WORK/rows.py" "$D/workspace.tar" >"$WORK/direct.rows"
python3 "$WORK/rows.py" "$E/workspace.tar" >"$WORK/engine.rows"
python3 "$WORK/rows.py" "$WORK/cp.tar" >"$WORK/cp.rows"
expect_eq "the tar holds every entry (25 and the folder)" 26 "$(wc -l <"$WORK/direct.rows")"
check "entry by entry, the direct tar is the engine's docker cp" diff "$WORK/cp.rows" "$WORK/direct.rows"
check "entry by entry, the direct tar is the snapshot read by the engine" diff "$WORK/engine.rows" "$WORK/direct.rows"
check "the engine's path made the engine's tar" diff "$WORK/cp.rows" "$WORK/engine.rows"
check "the manifests are the same, entry by entry" cmp "$D/manifest.json" "$E/manifest.json"
check "... and the same as those read in another mount namespace" cmp "$D/manifest.json" "$(snap_dir ns-other)/manifest.json"
check "the root-owned file is root's in the tar" grep -q "^('./shared/rootfile', b'0', '0o640', 0, 0," "$WORK/direct.rows"
check "the hard link is a link to the first name" grep -q "^('./hl1', b'1', .*'./a/hl2'" "$WORK/direct.rows"
check "the fifo is a fifo" grep -q "^('./pipe', b'6'" "$WORK/direct.rows"
check "4755 and a 1777 folder kept" grep -q "^('./shared', b'5', '0o1777'" "$WORK/direct.rows"

# --- an attacker's links: links, never what they point at ---------------------------
tar -tvf "$D/workspace.tar" >"$WORK/list" 2>/dev/null
check "the link to the host's /etc is a link in the tar" grep -q "^l.* ./etc -> /etc$" "$WORK/list"
check "the link to root's key is a link in the tar" grep -q "^l.* ./key -> /root/.ssh/id_rsa$" "$WORK/list"
check "nothing under ./etc/ or ./key in the tar" test -z "$(grep -E ' \./(etc|key)/' "$WORK/list")"
check "no line of the host's /etc/passwd in the tar" test -z "$(grep -a -F "$(head -1 /etc/passwd)" "$D/workspace.tar")"

# --- a fork of the direct snapshot: the same tree -----------------------------------
TREE='cd /workspace && find . -type f -exec sha256sum {} + | sort -k 2
find . -mindepth 1 -exec stat -c "%F %u:%g %a %n" {} + | sort -k 4
for l in rel abs dangling etc key dirlink; do echo "$l -> $(readlink $l)"; done
[ "$(stat -c %i hl1)" = "$(stat -c %i a/hl2)" ] && echo "hl1 and a/hl2: one inode"'
it_call_per_run "$R" -- sh -c "$TREE" | it_stdout >"$WORK/src.tree"
F=direct-fork-$$
"$SANDMAN" run --mode per_run --from-snapshot direct --run-id "$F" -- true >/dev/null
it_call_per_run "$F" -- sh -c "$TREE" | it_stdout >"$WORK/fork.tree"
check "the source's tree lists its hard links as one inode" grep -q "one inode" "$WORK/src.tree"
check "the fork's tree is the source's: hashes, owners, modes, link targets, the hard link one inode" \
  diff "$WORK/src.tree" "$WORK/fork.tree"

# --- a tree deeper than sandman walks: the engine's archive reads it again ----------
it_call_per_run "$R" -- sh -c 'cd /workspace && i=0; while [ $i -lt 130 ]; do mkdir d && cd d; i=$((i + 1)); done; echo deep >f' >/dev/null
in_engine_ns --log-level debug sandbox snapshot --run-id "$R" --name deep 2>"$WORK/deep.log" >/dev/null
expect_contains "a tree 130 folders deep: read again through the engine's archive" "path=engine" \
  "$(grep snapshot.read "$WORK/deep.log")"
expect_contains "the reason is said (too deep)" "folders deep" "$(grep snapshot.read "$WORK/deep.log")"
docker cp "$C:/workspace/." - >"$WORK/cp2.tar"
python3 "$WORK/rows.py" "$WORK/cp2.tar" >"$WORK/cp2.rows"
python3 "$WORK/rows.py" "$(snap_dir deep)/workspace.tar" >"$WORK/deep.rows"
check "the deep tree's snapshot is the engine's docker cp, entry by entry" diff "$WORK/cp2.rows" "$WORK/deep.rows"

"$SANDMAN" snapshot rm direct engine deep ns-missing ns-other >/dev/null 2>&1 || true
it_done
