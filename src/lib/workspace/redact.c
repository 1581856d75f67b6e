/* Paths the tool chose, as the copy's log lines quote them: a value the
 * call was given in secret (a leased credential) is written [REDACTED],
 * since a tool may name a file after it and the runner's log must never
 * hold it. The answer's fields are scrubbed by the runner. */
#include <stdlib.h>
#include <string.h>

#include "workspace/ws.h"

#define REDACTED "[REDACTED]"

void workspace_redact_init(ws_redact *r) { memset(r, 0, sizeof *r); }

void workspace_redact_dispose(ws_redact *r) {
  for (size_t i = 0; i < r->n; i++) {
    /* A credential: gone from memory, not only freed. */
    memset(r->v[i], 0, strlen(r->v[i]));
    free(r->v[i]);
  }
  free(r->v);
  workspace_redact_init(r);
}

int workspace_redact_set(ws_redact *r, const char *const *kv, size_t n, sm_error *err) {
  workspace_redact_dispose(r);
  if (n == 0) return 0;
  r->v = calloc(n, sizeof *r->v);
  if (r->v == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory keeping values to redact");
  for (size_t i = 0; i < n; i++) {
    const char *eq = kv[i] ? strchr(kv[i], '=') : NULL;
    if (eq == NULL || strlen(eq + 1) < WS_REDACT_MIN_LEN) continue;
    r->v[r->n] = strdup(eq + 1);
    if (r->v[r->n] == NULL) {
      workspace_redact_dispose(r);
      return sm_error_set(err, SM_ENOMEM, "out of memory keeping values to redact");
    }
    r->n++;
  }
  return 0;
}

const char *workspace_log_path(const ws_redact *r, const char *path, char *buf, size_t len) {
  if (r == NULL || r->n == 0) return path;
  if (len == 0) return REDACTED;
  size_t w = 0;
  for (const char *p = path; *p && w + 1 < len;) {
    /* The longest value that starts here: no part of a value is shown. */
    size_t hit = 0;
    for (size_t i = 0; i < r->n; i++) {
      size_t vl = strlen(r->v[i]);
      if (vl > hit && strncmp(p, r->v[i], vl) == 0) hit = vl;
    }
    if (hit == 0) {
      buf[w++] = *p++;
      continue;
    }
    /* A cut line may lose the marker's end, never show a value's start. */
    size_t m = sizeof REDACTED - 1 < len - 1 - w ? sizeof REDACTED - 1 : len - 1 - w;
    memcpy(buf + w, REDACTED, m);
    w += m;
    p += hit;
  }
  buf[w] = '\0';
  return buf;
}
