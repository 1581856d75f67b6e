/* The workspace digest: SHA-256 over what a copy out compares of every
 * entry of a sandbox's workspace. Each top-level entry's subtree (the entry
 * and everything under it, depth-first, the names of a folder sorted
 * bytewise: workspace_path_cmp's order) has a digest of its own, its "sum", so
 * that the agent can walk subtrees on two threads; the workspace's digest
 * is SHA-256 over the sums in the order of the top-level names, then the
 * entry count. sandman-agent computes it over what the sandbox holds
 * (`sandman-agent wsdigest`, src/agent/digest_walk.c); the host over what
 * its manifest says the sandbox held after the last copy
 * (src/lib/workspace/unchanged.c). The same digest means the copy out has
 * nothing to do (docs/workspaces.md). Plain libc: this file is also built
 * into sandman-agent, so the two sides encode entries with the same code. */
#ifndef SANDMAN_WORKSPACE_DIGEST_H
#define SANDMAN_WORKSPACE_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "common/sha256.h"

/* The agent's one line of output: "wsdigest HEX COUNT\n". */
#define WS_DIGEST_PREFIX "wsdigest "
#define WS_DIGEST_LINE_MAX 128
/* The longest path the listing enters (WS_LIST_PATH_MAX): past it the
 * agent gives no digest. */
#define WS_DIGEST_PATH_MAX 3072

typedef struct ws_digest {
  common_sha256 sha;
  uint64_t count;
} ws_digest;

/* For a subtree's entries (workspace_digest_add, workspace_digest_sum) or for the
 * workspace (workspace_digest_add_sum, workspace_digest_final). */
void workspace_digest_init(ws_digest *d);
/* One entry as the sandbox's listing shows it (workspace_probe_parse): type 'f',
 * 'd', 'l', or 'p', 'c', 'b', 's'; mtime in whole seconds, ctime in ns,
 * mode the permission bits. Only what the copy out compares for that type
 * goes in: a file's size, mtime, ctime and mode; a link's size (its
 * target's length) and ctime; anything else its mode. */
void workspace_digest_add(ws_digest *d, const char *path, size_t len, char type, int64_t size,
                          int64_t mtime_s, int64_t ctime_ns, uint32_t mode);
/* A subtree's sum (d must be initialised again for reuse). */
void workspace_digest_sum(ws_digest *d, unsigned char sum[32]);
/* The next top-level subtree of the workspace: its sum and entry count. */
void workspace_digest_add_sum(ws_digest *top, const unsigned char sum[32], uint64_t count);
/* 64 hex digits and a NUL; top->count is the workspace's entry count. */
void workspace_digest_final(ws_digest *top, char hex[65]);

#endif
