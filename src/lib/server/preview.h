/* Preview tokens (preview.c, docs/ports.md#preview-urls): a bearer secret
 * of its own for one port of one keyed sandbox, so a browser reaches
 * /preview/{token}/{path} without the runner's tokens. A token holds the
 * sandbox's container id (not its name: a sandbox made again under the
 * same name is another one), expires, and is dropped when the sandbox is
 * put to rest or removed through the runner; the route checks the
 * sandbox's state on each use as well, so a change made elsewhere (the CLI,
 * the engine) ends it too. Caps: per sandbox and in all. */
#ifndef SANDMAN_SERVER_PREVIEW_H
#define SANDMAN_SERVER_PREVIEW_H

#include <stddef.h>

#include <sandman/engine.h>
#include <sandman/sandbox.h>

#define SERVER_PREVIEW_TOKEN_BYTES 24 /* 192 random bits */
#define SERVER_PREVIEW_TOKEN_LEN (SERVER_PREVIEW_TOKEN_BYTES * 2)
#define SERVER_PREVIEW_MAX_TOTAL 256
#define SERVER_PREVIEW_MAX_PER_SANDBOX 8
#define SERVER_PREVIEW_TTL_DEFAULT_S 3600
#define SERVER_PREVIEW_TTL_MAX_S 86400

typedef struct server_previews server_previews;

typedef struct server_preview {
  char token[SERVER_PREVIEW_TOKEN_LEN + 1];
  char container_id[SM_ENGINE_ID_MAX];
  char worker_key[SM_NAME_MAX]; /* the owner's; "" the control token's */
  unsigned port;
  double expires_ms; /* on the monotonic clock */
} server_preview;

server_previews *server_previews_new(size_t max_total, size_t max_per_sandbox);
void server_previews_free(server_previews *t);
/* A new token into *out (its fields copied). 0, or -1 when a cap is
 * reached (expired ones are dropped first). now_ms: the monotonic clock. */
int server_previews_add(server_previews *t, const char *container_id, const char *worker_key,
                        unsigned port, double ttl_s, double now_ms, server_preview *out);
/* The live preview of token into *out: 0, or -1 when there is none
 * (unknown, expired or revoked alike). Compared in constant time. */
int server_previews_find(server_previews *t, const char *token, double now_ms,
                         server_preview *out);
/* Drops the sandbox's previews (every one when container_id matches, a
 * prefix too short to be an id matches none): how many went. */
size_t server_previews_revoke(server_previews *t, const char *container_id);
/* Previews held now (expired ones not yet dropped included). */
size_t server_previews_count(server_previews *t);

#endif
