/* Fuzz target for names and sandbox keys: the input is split at NUL bytes
 * into two calls' fields (principal, project, run id, worker id, agent,
 * user, then the same for the second call); the first byte picks the mode
 * and scope of each. Keys must round-trip (split at ':' and unescaped, a
 * key gives back exactly its fields, so no two field lists share a key),
 * and the name check agrees with its definition and never
 * echoes an unprintable byte. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/spec.h"
#include <sandman/name.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FIELDS 6

static int reference_valid(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > SM_NAME_LEN_MAX || s[0] == '-' || s[0] == '.') return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && !strchr("_.:@+=-", s[i])) return 0;
  return 1;
}

/* The fields of a key, unescaped, joined with '\n' (which no escaped key
 * holds) so two field lists compare as one string. */
static void decode(const char *key, char *out, size_t len) {
  size_t o = 0;
  for (const char *p = key; *p && o + 2 < len; p++) {
    if (*p == ':') {
      out[o++] = '\n';
    } else if (*p == '%') {
      unsigned v = 0;
      if (sscanf(p + 1, "%2X", &v) != 1 || !isxdigit((unsigned char)p[1]) ||
          !isxdigit((unsigned char)p[2]))
        abort();
      out[o++] = (char)v;
      p += 2;
    } else {
      if (!isalnum((unsigned char)*p) && !strchr("_.@+=-", *p)) abort(); /* unescaped */
      out[o++] = *p;
    }
  }
  out[o] = '\0';
}

static void check_name(const char *s) {
  sm_error err = SM_ERROR_INIT;
  int ok = sm_name_valid(s);
  if (ok != reference_valid(s)) abort();
  int rc = sm_name_check("name", s, &err);
  if ((rc == 0) != ok) abort();
  for (const char *p = err.message; *p; p++)
    if (!isprint((unsigned char)*p)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 4096) return 0;
  unsigned pick = data[0];
  char buf[4097];
  memcpy(buf, data + 1, size - 1);
  buf[size - 1] = '\0';
  const char *f[2 * FIELDS] = {0};
  size_t nf = 0, start = 0;
  for (size_t i = 0; i <= size - 1 && nf < 2 * FIELDS; i++) {
    if (i == size - 1 || buf[i] == '\0') {
      buf[i] = '\0';
      f[nf++] = buf + start;
      start = i + 1;
    }
  }
  for (size_t i = 0; i < nf; i++) check_name(f[i]);

  char keys[2][SM_KEY_MAX], plain[2][SM_KEY_MAX + 8];
  for (int c = 0; c < 2; c++) {
    const char *const *v = f + c * FIELDS;
    unsigned bits = c ? pick >> 4 : pick & 15;
    sm_run_request req;
    sm_run_request_init(&req);
    req.principal = v[0] && (bits & 1) ? v[0] : NULL;
    req.project = v[1];
    req.run_id = v[2];
    req.worker_id = v[3];
    req.agent = v[4];
    req.user = v[5];
    req.scope = (sm_scope)((bits >> 1) & 3);
    sm_mode mode = (bits & 8) ? SM_MODE_PER_WORKER : SM_MODE_PER_RUN;
    if (sandbox_scope_key(&req, mode, keys[c], sizeof keys[c], NULL) != 0) continue;
    decode(keys[c], plain[c], sizeof plain[c]);
    /* The decoded key is exactly the fields it was made of. */
    char want[SM_KEY_MAX + 8];
    const char *kind = req.scope == SM_SCOPE_SHARED ? "shared"
                       : req.scope == SM_SCOPE_USER ? "user"
                       : req.scope == SM_SCOPE_USER_AGENT ? "user_agent"
                       : mode == SM_MODE_PER_RUN ? "run" : "worker";
    const char *proj = req.project && *req.project ? req.project : "default";
    int n = 0;
    if (req.principal && *req.principal && strcmp(req.principal, "control") != 0)
      n = snprintf(want, sizeof want, "p\n%s\n", req.principal);
    if (req.scope == SM_SCOPE_SHARED)
      snprintf(want + n, sizeof want - (size_t)n, "%s\n%s\n%s", kind, proj, req.agent);
    else if (req.scope == SM_SCOPE_USER)
      snprintf(want + n, sizeof want - (size_t)n, "%s\n%s\n%s", kind, proj, req.user);
    else if (req.scope == SM_SCOPE_USER_AGENT)
      snprintf(want + n, sizeof want - (size_t)n, "%s\n%s\n%s\n%s", kind, proj, req.user,
               req.agent);
    else if (mode == SM_MODE_PER_RUN)
      snprintf(want + n, sizeof want - (size_t)n, "%s\n%s\n%s", kind, proj, req.run_id);
    else
      snprintf(want + n, sizeof want - (size_t)n, "%s\n%s", kind, req.worker_id);
    /* Fields holding '\n' would make this comparison ambiguous: skip them. */
    int has_nl = 0;
    for (int k = 0; k < FIELDS; k++)
      if (v[k] && strchr(v[k], '\n')) has_nl = 1;
    if (!has_nl && strcmp(plain[c], want) != 0) abort();
  }
  return 0;
}
