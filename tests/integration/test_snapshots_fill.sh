#!/usr/bin/env bash
# Who puts a saved /workspace back (docs/state.md, "Who fills /workspace"),
# against the real engine: a fork, a rollback and a stopped sandbox's
# resume fill it with the agent's unpacker when the tar holds only what it
# takes as the tar says (files, directories, links, hard links), and with
# the engine's upload when it holds anything else (here a fifo), never half
# by one and half by the other: after each, the tree is the same by hash,
# nothing missing or extra, hard links are still one file, the fifo is a
# fifo, and every entry belongs to the sandbox's user as in the source.
source "$(dirname "$0")/lib.sh"
require_engine

WORK=$(mktemp -d)
trap 'cleanup_instance; it_remove_snapshot_images; rm -rf "$WORK"' EXIT
cleanup_instance
it_remove_snapshot_images
rm -rf "${SANDMAN_STATE_DIR:?}"/*

# The tree: every file's hash, every entry's type, owner and mode, and for
# each hard-linked name the name it shares its inode with.
TREE='cd /workspace && find . -type f -exec sha256sum {} + | sort -k 2
find . -mindepth 1 -exec stat -c "%F %u:%g %a %n" {} + | sort -k 4
echo "links: $(stat -c %i d/f) $(stat -c %i h1) $(stat -c %i d/e/h2) $(stat -c %h d/f)"'
GEN='cd /workspace && mkdir -p d/e && i=0; while [ $i -lt 200 ]; do echo "file $i" >d/f$i; i=$((i + 1)); done
echo shared >d/f && ln d/f h1 && ln d/f d/e/h2 && ln -s d/f sl && ln -s /etc/passwd out && chmod 600 d/f1 && echo made'
tree_of() { it_call_per_run "$1" -- sh -c "$TREE" | it_stdout; }
# The inode numbers differ between trees: only whether they are equal counts.
same_links() { sed -E 's/^links: ([0-9]+) \1 \1 3$/links: one file of three names/'; }
# same_tree RUN EXPECTED WHAT: RUN's tree (hard links folded) is EXPECTED's.
same_tree() {
  tree_of "$1" | same_links >"$WORK/tree"
  if diff -q "$2" "$WORK/tree" >/dev/null; then
    it_pass "$3"
  else
    it_fail "$3: $(diff "$2" "$WORK/tree" | head -5 | tr '\n' ' ')"
  fi
}

R=fill-src-$$
expect_eq "the tool wrote its files and hard links" "made" "$(it_call_per_run "$R" -- sh -c "$GEN" | it_stdout | tr -d '\n')"
tree_of "$R" | same_links >"$WORK/expected"
check "the source's hard links are one file of three names" grep -q "links: one file of three names" "$WORK/expected"
expect_eq "the source's tree: 203 file names hashed (200 files, one of three names)" 203 \
  "$(grep -c '^[0-9a-f]\{64\} ' "$WORK/expected")"
"$SANDMAN" sandbox snapshot --run-id "$R" --name fill-links >/dev/null

# --- the agent's unpacker: files, links, hard links --------------------------------
fill_of() { grep -o 'fill=[a-z]*' "$1" | head -1; }
F=fill-fork-$$
"$SANDMAN" --log-level debug run --mode per_run --from-snapshot fill-links --run-id "$F" -- true 2>"$WORK/fork.log" >/dev/null
expect_eq "a fork of a snapshot of files, links and hard links: filled by the agent's unpacker" \
  "fill=agent" "$(fill_of "$WORK/fork.log")"
same_tree "$F" "$WORK/expected" "the fork: every file the same by hash, types, owners, modes, hard links one file"

# A stopped sandbox's resume (the CLI: no runner).
"$SANDMAN" sandbox pause --tier stop --run-id "$F" >/dev/null
expect_eq "the fork stopped" "stopped" "$("$SANDMAN" sandbox list --json | json "[s['state'] for s in d if s.get('run_id') == '$F'][0]")"
"$SANDMAN" --log-level debug sandbox resume --run-id "$F" >/dev/null 2>"$WORK/resume.log"
expect_contains "its resume: filled by the agent's unpacker" "by the agent's unpacker" "$(cat "$WORK/resume.log")"
same_tree "$F" "$WORK/expected" "its resume: every file the same by hash, types, owners, modes, hard links one file"

# --- a fifo: the engine's upload, the whole tar --------------------------------
it_call_per_run "$R" -- sh -c 'mkfifo /workspace/d/pipe' >/dev/null
tree_of "$R" | same_links >"$WORK/expected2"
check "the source now holds a fifo" grep -q "^fifo .* ./d/pipe$" "$WORK/expected2"
"$SANDMAN" sandbox snapshot --run-id "$R" --name fill-fifo >/dev/null
F2=fill-fork2-$$
"$SANDMAN" --log-level debug run --mode per_run --from-snapshot fill-fifo --run-id "$F2" -- true 2>"$WORK/fork2.log" >/dev/null
expect_eq "a fork of a snapshot holding a fifo: filled by the engine's upload" "fill=engine" "$(fill_of "$WORK/fork2.log")"
expect_contains "the reason is said" "an entry of type '6'" "$(cat "$WORK/fork2.log")"
same_tree "$F2" "$WORK/expected2" "the fork with a fifo: every file the same by hash, the fifo a fifo, hard links one file"

# --- a rollback to the first snapshot (the fifo goes) ----------------------------
"$SANDMAN" --log-level debug sandbox rollback --run-id "$R" --to fill-links >/dev/null 2>"$WORK/rb.log"
expect_eq "a rollback: filled by the agent's unpacker" "fill=agent" "$(fill_of "$WORK/rb.log")"
same_tree "$R" "$WORK/expected" "the rollback: the first snapshot's tree exactly, the fifo gone"

"$SANDMAN" snapshot rm fill-links fill-fifo >/dev/null 2>&1 || true
it_done
