/* Environment policy for calls served by the runner, and scrubbing of
 * credential values out of answers. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include <sandman/util.h>
#include <sandman/env.h>

#include "server/server_internal.h"

extern char **environ;

/* The library's one rule (sm_env_name_classify) says which names a glob
 * may pass; the runner adds the names of its credentials file, which reach
 * a tool only through a lease. */
int server_env_owned(const char *name, const server_creds *creds) {
  if (sm_env_name_classify(name, strlen(name)) != SM_ENV_NAME_OK) return 1;
  return creds != NULL && server_creds_is_name(creds, name);
}

int server_env_passthrough(const sm_string_list *globs, const server_creds *creds, char ***out,
                           size_t *out_n, sm_error *err) {
  *out = NULL;
  *out_n = 0;
  if (globs == NULL || globs->n == 0) return 0;
  size_t cap = 0;
  for (char **e = environ; e && *e; e++) cap++;
  char **v = calloc(cap + 1, sizeof *v);
  if (v == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  size_t n = 0;
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    if (eq == NULL || eq == *e) continue;
    char name[256];
    size_t nl = (size_t)(eq - *e);
    if (nl >= sizeof name) continue;
    memcpy(name, *e, nl);
    name[nl] = '\0';
    if (!server_env_name_valid(name) || server_env_owned(name, creds)) continue;
    int match = 0;
    for (size_t g = 0; g < globs->n && !match; g++) match = sm_glob_match(globs->items[g], name);
    if (!match) continue;
    v[n] = strdup(*e);
    if (v[n] == NULL) {
      common_strings_free(v, n);
      return sm_error_set(err, SM_ENOMEM, "out of memory");
    }
    n++;
  }
  *out = v;
  *out_n = n;
  return 0;
}

/* Replaces occurrences of needle in *data; returns 1 if anything changed. */
static int replace_all(char **data, size_t *len, const char *needle, size_t nl) {
  if (*data == NULL || nl == 0 || *len < nl) return 0;
  size_t count = 0;
  for (const char *p = *data; (p = memmem(p, *len - (size_t)(p - *data), needle, nl)) != NULL;
       p += nl)
    count++;
  if (count == 0) return 0;
  size_t rl = sizeof SM_REDACTED - 1;
  size_t new_len = *len - count * nl + count * rl;
  char *o = malloc(new_len + 1);
  if (o == NULL) {
    /* Cannot allocate a copy: overwrite in place rather than leak. */
    for (char *p = *data; (p = memmem(p, *len - (size_t)(p - *data), needle, nl)) != NULL;
         p += nl)
      memset(p, '*', nl);
    return 1;
  }
  size_t w = 0;
  const char *src = *data, *end = *data + *len;
  while (src < end) {
    const char *hit = memmem(src, (size_t)(end - src), needle, nl);
    if (hit == NULL) {
      memcpy(o + w, src, (size_t)(end - src));
      w += (size_t)(end - src);
      break;
    }
    memcpy(o + w, src, (size_t)(hit - src));
    w += (size_t)(hit - src);
    memcpy(o + w, SM_REDACTED, rl);
    w += rl;
    src = hit + nl;
  }
  o[w] = '\0';
  OPENSSL_cleanse(*data, *len);
  free(*data);
  *data = o;
  *len = w;
  return 1;
}

void server_redact(char **data, size_t *len, const server_secret_env *secrets) {
  if (secrets == NULL || data == NULL || *data == NULL) return;
  for (size_t i = 0; i < secrets->n; i++) {
    const char *v = strchr(secrets->kv[i], '=');
    if (v == NULL) continue;
    v++;
    size_t vl = strlen(v);
    if (vl < SM_REDACT_MIN_LEN) continue;
    replace_all(data, len, v, vl);
  }
}

/* The longest k (0 < k < the value's length) such that data ends with the
 * first k bytes of a value of at least SM_REDACT_MIN_LEN bytes; 0 if none. */
static size_t cut_value_at_end(const char *data, size_t len, const server_secret_env *secrets) {
  size_t best = 0;
  for (size_t i = 0; i < secrets->n; i++) {
    const char *v = strchr(secrets->kv[i], '=');
    if (v == NULL) continue;
    v++;
    size_t vl = strlen(v);
    if (vl < SM_REDACT_MIN_LEN) continue;
    for (size_t k = vl - 1 < len ? vl - 1 : len; k > best; k--)
      if (memcmp(data + len - k, v, k) == 0) {
        best = k;
        break;
      }
  }
  return best;
}

void server_redact_cut(char **data, size_t *len, const server_secret_env *secrets, int mark) {
  server_redact(data, len, secrets);
  if (secrets == NULL || data == NULL || *data == NULL) return;
  size_t k = cut_value_at_end(*data, *len, secrets);
  if (k == 0) return;
  size_t keep = *len - k, rl = mark ? sizeof SM_REDACTED - 1 : 0;
  OPENSSL_cleanse(*data + keep, k);
  if (rl > k) {
    char *grown = realloc(*data, keep + rl + 1);
    if (grown == NULL) {
      /* No room for the marker: the cut start goes, unmarked. */
      (*data)[keep] = '\0';
      *len = keep;
      return;
    }
    *data = grown;
  }
  memcpy(*data + keep, SM_REDACTED, rl);
  *len = keep + rl;
  (*data)[*len] = '\0';
}

void server_redact_str(char *s, size_t size, const server_secret_env *secrets) {
  if (s == NULL || size == 0 || secrets == NULL || secrets->n == 0) return;
  size_t len = strnlen(s, size - 1);
  char *copy = malloc(len + 1);
  if (copy == NULL) {
    s[0] = '\0';
    return;
  }
  memcpy(copy, s, len);
  copy[len] = '\0';
  server_redact(&copy, &len, secrets);
  /* The redacted text may be longer: cut it, never mid-way into a value
   * (the value is gone already, only the marker may be cut). */
  size_t n = len < size - 1 ? len : size - 1;
  memcpy(s, copy, n);
  s[n] = '\0';
  free(copy);
}

/* A copy of string v with the secrets replaced (a new reference). */
static json_object *redacted_string(json_object *v, const server_secret_env *secrets) {
  size_t len = (size_t)json_object_get_string_len(v);
  char *s = malloc(len + 1);
  if (s == NULL) return json_object_new_string(SM_REDACTED);
  memcpy(s, json_object_get_string(v), len + 1);
  server_redact(&s, &len, secrets);
  json_object *out = json_object_new_string_len(s, (int)len);
  OPENSSL_cleanse(s, len);
  free(s);
  return out;
}

/* Every string of the answer, however deep (files_changed, refused paths,
 * a replaced sandbox's reason, what a later field may add), and every key:
 * a path the tool named after a credential is one. */
void server_redact_json(json_object *o, const server_secret_env *secrets) {
  if (o == NULL || secrets == NULL || secrets->n == 0) return;
  if (json_object_is_type(o, json_type_array)) {
    for (size_t i = 0; i < json_object_array_length(o); i++) {
      json_object *v = json_object_array_get_idx(o, i);
      if (json_object_is_type(v, json_type_string))
        json_object_array_put_idx(o, i, redacted_string(v, secrets));
      else server_redact_json(v, secrets);
    }
    return;
  }
  if (!json_object_is_type(o, json_type_object)) return;
  /* Keys cannot be renamed in place: the entries go into a new object,
   * then back into o (which keeps its identity for whoever holds it). */
  json_object *entries = json_object_new_object();
  if (entries == NULL) return;
  json_object_object_foreach(o, key, val) {
    size_t kl = strlen(key);
    char *k = strdup(key);
    if (k == NULL) continue;
    server_redact(&k, &kl, secrets);
    json_object *v = json_object_is_type(val, json_type_string) ? redacted_string(val, secrets)
                                                                 : json_object_get(val);
    if (!json_object_is_type(v, json_type_string)) server_redact_json(v, secrets);
    json_object_object_add(entries, k, v);
    free(k);
  }
  while (json_object_object_length(o) > 0) {
    json_object_object_foreach(o, old, unused) {
      (void)unused;
      json_object_object_del(o, old);
      break;
    }
  }
  json_object_object_foreach(entries, nk, nv) json_object_object_add(o, nk, json_object_get(nv));
  json_object_put(entries);
}
