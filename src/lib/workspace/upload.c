/* What a copy in uploads: the entries that changed on the host, and every
 * directory above each of them, before it in the stream.
 *
 * Who extracts it decides how safe that is (workspace_in.c). The engine's
 * archive upload runs as root and resolves each member's path in the
 * container, following the sandbox's symbolic links there (the read-only
 * root does not bind it): a directory that a tool replaced by "d -> /etc"
 * would send "d/x" into the container's /etc. It is used only for a sandbox
 * in which nothing but sandman has run and nothing can run until the copy
 * returns (a per_tool sandbox before its call). Every other copy in is
 * extracted by sandman's unpacker running as the sandbox's user
 * (src/agent/untar.c): whatever a tool planted, even while the copy runs,
 * cannot make it write where that user could not write anyway.
 *
 * The directories come along because both extractors replace whatever is
 * not a directory where a member needs one, so no link a tool left above a
 * member redirects it (for a directory already there only its mode is set
 * again). A relative host link climbing above the workspace makes the
 * engine refuse the whole upload: with the engine such links are left out
 * and made after it by the sandbox's user. */
#include <stdlib.h>
#include <string.h>

#include <sandman/log.h>

#include "workspace/ws.h"

int workspace_upload_plan(const ws_manifest *cur, ws_entry **send, size_t nsend, int engine,
                          ws_entry ***pack, size_t *npack, ws_entry ***later, size_t *nlater,
                          sm_error *err) {
  *pack = NULL;
  *later = NULL;
  *npack = *nlater = 0;
  unsigned char *want = calloc(cur->n + 1, 1);
  ws_entry **p = calloc(cur->n + 1, sizeof *p);
  ws_entry **l = calloc(nsend + 1, sizeof *l);
  char *buf = NULL;
  size_t cap = 0;
  int rc = 0;
  if (want == NULL || p == NULL || l == NULL) rc = sm_error_set(err, SM_ENOMEM, "out of memory");
  size_t nl = 0;
  for (size_t i = 0; rc == 0 && i < nsend; i++) {
    ws_entry *e = send[i];
    if (engine && e->type == 'l' && !workspace_link_engine_accepts(e->path, e->link)) l[nl++] = e;
    else
      want[e - cur->v] = 1;
    /* Its directories, up from its parent. */
    size_t len = strlen(e->path);
    if (len + 1 > cap) {
      char *nb = realloc(buf, len + 1);
      if (nb == NULL) {
        rc = sm_error_set(err, SM_ENOMEM, "out of memory");
        break;
      }
      buf = nb;
      cap = len + 1;
    }
    memcpy(buf, e->path, len + 1);
    for (size_t k = len; k > 0; k--) {
      if (buf[k - 1] != '/') continue;
      buf[k - 1] = '\0';
      const ws_entry *d = workspace_manifest_get(cur, buf);
      if (d == NULL || d->type != 'd') {
        rc = sm_error_set(err, SM_EIO, "'%s': its directory '%s' is not in the scan", e->path,
                          buf);
        break;
      }
      if (want[d - cur->v]) break; /* and so are the ones above it */
      want[d - cur->v] = 1;
    }
  }
  free(buf);
  size_t np = 0;
  /* In scan order: a directory always comes before what is in it. */
  for (size_t i = 0; rc == 0 && i < cur->n; i++)
    if (want[i]) p[np++] = &cur->v[i];
  free(want);
  if (rc) {
    free(p);
    free(l);
    return rc;
  }
  *pack = p;
  *npack = np;
  *later = l;
  *nlater = nl;
  return 0;
}
