/* The workspace digest: one SHA-256 over what a copy out compares of every
 * entry of a sandbox's workspace, in depth-first order with the names of a
 * folder sorted bytewise (ws_path_cmp's order). sandman-agent computes it
 * over what the sandbox holds (`sandman-agent wsdigest`, src/agent/
 * digest_walk.c); the host computes it over what its manifest says the
 * sandbox held after the last copy (src/workspace/unchanged.c). The same
 * digest means the copy out has nothing to do (see docs/workspaces.md).
 * Plain libc: this file is also built into sandman-agent, so the two sides
 * encode entries with the very same code. */
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
  sm_sha256 sha;
  uint64_t count;
} ws_digest;

void ws_digest_init(ws_digest *d);
/* One entry as the sandbox's listing shows it (ws_probe_parse): type 'f',
 * 'd', 'l', or 'p', 'c', 'b', 's'; mtime in whole seconds, ctime in ns,
 * mode the permission bits. Only what the copy out compares for that type
 * goes in: a file's size, mtime, ctime and mode; a link's size (its
 * target's length) and ctime; anything else its mode. */
void ws_digest_add(ws_digest *d, const char *path, size_t len, char type, int64_t size,
                   int64_t mtime_s, int64_t ctime_ns, uint32_t mode);
/* 64 hex digits and a NUL. */
void ws_digest_final(ws_digest *d, char hex[65]);

#endif
