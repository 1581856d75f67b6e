/* Request bodies of the HTTP API: parsed from untrusted bytes with json-c
 * (depth bounded), every field type- and range-checked, unknown fields
 * refused so that a typo never silently changes what runs. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <sandman/util.h>
#include <sandman/env.h>
#include <sandman/name.h>

#include "common/cleanup.h"
#include "common/json_keys.h"
#include "common/strv.h"
#include "server/server_internal.h"

#define JSON_DEPTH_MAX 16

int server_json_object(const char *body, size_t len, json_object **out, sm_error *err) {
  *out = NULL;
  if (body == NULL || len == 0) return sm_error_set(err, SM_EINVAL, "empty request body");
  if (memchr(body, '\0', len) != NULL)
    return sm_error_set(err, SM_EINVAL, "request body contains a NUL byte");
  if (len > INT32_MAX) return sm_error_set(err, SM_EINVAL, "request body too large");
  json_tokener *tok = json_tokener_new_ex(JSON_DEPTH_MAX);
  if (tok == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
  cleanup_json json_object *obj = json_tokener_parse_ex(tok, body, (int)len);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t used = tok->char_offset;
  json_tokener_free(tok);
  if (obj == NULL || jerr != json_tokener_success)
    return sm_error_set(err, SM_EINVAL, "request body is not valid JSON: %s",
                        jerr == json_tokener_continue ? "unexpected end of input"
                                                      : json_tokener_error_desc(jerr));
  for (size_t i = used; i < len; i++) {
    if (!isspace((unsigned char)body[i]))
      return sm_error_set(err, SM_EINVAL,
                          "request body is not valid JSON: trailing data at byte %zu", i);
  }
  if (!json_object_is_type(obj, json_type_object))
    return sm_error_set(err, SM_EINVAL, "request body must be a JSON object");
  const char *why = NULL;
  if (common_json_keys_unique(body, len, obj, &why) != 0)
    return sm_error_set(err, SM_EINVAL, "request body: %s", why);
  *out = steal_pointer(&obj);
  return 0;
}

bool server_json_has_worker_key(const char *body, size_t len, char out[SM_SERVER_KEY_MAX + 1]) {
  out[0] = '\0';
  if (body == NULL || len == 0 || len > INT32_MAX || memchr(body, '\0', len) != NULL)
    return false;
  json_tokener *tok = json_tokener_new_ex(JSON_DEPTH_MAX);
  if (tok == NULL) return false;
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
  json_object *obj = json_tokener_parse_ex(tok, body, (int)len);
  int ok = obj != NULL && json_tokener_get_error(tok) == json_tokener_success;
  json_tokener_free(tok);
  json_object *v = NULL;
  if (ok && json_object_is_type(obj, json_type_object) &&
      json_object_object_get_ex(obj, "worker_key", &v) &&
      json_object_is_type(v, json_type_string)) {
    const char *k = json_object_get_string(v);
    size_t kl = (size_t)json_object_get_string_len(v);
    if (strlen(k) == kl && server_name_valid(k, SM_SERVER_KEY_MAX)) memcpy(out, k, kl + 1);
  }
  if (obj) json_object_put(obj);
  return out[0] != '\0';
}

int server_name_valid(const char *s, size_t max) {
  /* The library's one name check (the CLI uses it too); some fields are
   * shorter still. */
  return sm_name_valid(s) && strlen(s) <= max;
}

int server_sandbox_ref_valid(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n >= SM_NAME_MAX || !isalnum((unsigned char)s[0])) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-') return 0;
  return 1;
}

int server_env_name_valid(const char *s) {
  if (s == NULL || s[0] == '\0' || isdigit((unsigned char)s[0])) return 0;
  size_t n = 0;
  for (; s[n]; n++) {
    unsigned char c = (unsigned char)s[n];
    if (!(isalnum(c) || c == '_')) return 0;
  }
  return n <= 255;
}

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

int server_base64_decode(const char *in, size_t len, size_t max, unsigned char **out,
                         size_t *out_len, sm_error *err) {
  *out = NULL;
  *out_len = 0;
  while (len > 0 && in[len - 1] == '=') len--;
  if (len % 4 == 1) return sm_error_set(err, SM_EINVAL, "not valid base64 (a stray last character)");
  size_t cap = len / 4 * 3 + 3;
  if (len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0) > max)
    return sm_error_set(err, SM_ETOOBIG, "base64 that decodes to more than %zu bytes", max);
  cleanup_free unsigned char *buf = malloc(cap + 1);
  if (buf == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory decoding base64");
  size_t o = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < len; i++) {
    int v = b64_value((unsigned char)in[i]);
    if (v < 0) return sm_error_set(err, SM_EINVAL, "not valid base64 (a character outside its alphabet)");
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      buf[o++] = (unsigned char)(acc >> bits);
      acc &= (1u << bits) - 1;
    }
  }
  /* Leftover bits must be zero (canonical encoding). */
  if (bits > 0 && acc != 0) return sm_error_set(err, SM_EINVAL, "not valid base64 (not canonical)");
  buf[o] = '\0';
  *out = steal_pointer(&buf);
  *out_len = o;
  return 0;
}

/* ---- field helpers: NULL means absent (JSON null counts as absent) ---- */

/* A JSON string of at most max bytes with no NUL in it; errors name it
 * as what ("field 'tool'"). */
static int string_value(json_object *v, const char *what, size_t max, const char **out,
                        size_t *out_len, sm_error *err) {
  if (!json_object_is_type(v, json_type_string))
    return sm_error_set(err, SM_EINVAL, "%s must be a string", what);
  size_t n = (size_t)json_object_get_string_len(v);
  const char *s = json_object_get_string(v);
  if (memchr(s, '\0', n) != NULL)
    return sm_error_set(err, SM_EINVAL, "%s contains a NUL character", what);
  if (n > max) return sm_error_set(err, SM_EINVAL, "%s is longer than %zu bytes", what, max);
  *out = s;
  *out_len = n;
  return 0;
}

static int get_string(json_object *v, const char *field, size_t max, char **out,
                      sm_error *err) {
  char what[SM_SERVER_TOOL_MAX + 16];
  snprintf(what, sizeof what, "field '%s'", field);
  const char *s;
  size_t n;
  int rc = string_value(v, what, max, &s, &n, err);
  if (rc != 0) return rc;
  *out = strdup(s);
  if (*out == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  return 0;
}

static int get_name(json_object *v, const char *field, size_t max, char **out, sm_error *err) {
  int rc = get_string(v, field, max, out, err);
  if (rc != 0) return rc;
  if (!server_name_valid(*out, max)) {
    free(*out);
    *out = NULL;
    return sm_error_set(err, SM_EINVAL,
                        "field '%s' must be 1 to %zu characters of letters, digits and "
                        "_ . : @ + = - (not starting with - or .)",
                        field, max);
  }
  return 0;
}

static int get_number(json_object *v, const char *field, double min, double max, double *out,
                      sm_error *err) {
  if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
    return sm_error_set(err, SM_EINVAL, "field '%s' must be a number", field);
  double d = json_object_get_double(v);
  if (!isfinite(d) || d < min || d > max)
    return sm_error_set(err, SM_EINVAL, "field '%s' must be between %g and %g", field, min, max);
  *out = d;
  return 0;
}

static int get_int(json_object *v, const char *field, int min, int max, int *out,
                   sm_error *err) {
  if (!json_object_is_type(v, json_type_int))
    return sm_error_set(err, SM_EINVAL, "field '%s' must be an integer", field);
  int64_t i = json_object_get_int64(v);
  if (i < min || i > max)
    return sm_error_set(err, SM_EINVAL, "field '%s' must be between %d and %d", field, min, max);
  *out = (int)i;
  return 0;
}

static int get_bool(json_object *v, const char *field, int *out, sm_error *err) {
  if (!json_object_is_type(v, json_type_boolean))
    return sm_error_set(err, SM_EINVAL, "field '%s' must be true or false", field);
  *out = json_object_get_boolean(v) ? 1 : 0;
  return 0;
}

/* "network": one of the static names, so the value needs no copy. */
static int get_network(json_object *v, const char **out, sm_error *err) {
  const char *n = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
  if (strcmp(n, "none") != 0 && strcmp(n, "allowlist") != 0 && strcmp(n, "bridge") != 0)
    return sm_error_set(err, SM_EINVAL, "field 'network' must be one of none, allowlist, bridge");
  *out = n[0] == 'n' ? "none" : n[0] == 'a' ? "allowlist" : "bridge";
  return 0;
}

/* s was capped below size by get_name: one longer is left out. */
static void copy_fixed(const char *s, char *dst, size_t size) {
  size_t n = strlen(s);
  if (n >= size) return;
  memcpy(dst, s, n + 1);
}

void server_execute_params_dispose(server_execute_params *p) {
  if (p == NULL) return;
  char *owned[] = {p->tool,       p->agent,    p->user,      p->project, p->run_id,
                   p->worker_key, p->lease_id, p->workspace, p->command, p->sandbox_id,
                   p->from_snapshot};
  for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
  common_strings_free(p->argv, p->argc);
  if (p->params) json_object_put(p->params);
  free(p->stdin_data);
  common_strings_free(p->env, p->n_env);
  memset(p, 0, sizeof *p);
}

static int parse_argv(json_object *v, server_execute_params *p, sm_error *err) {
  if (!json_object_is_type(v, json_type_array))
    return sm_error_set(err, SM_EINVAL, "field 'argv' must be an array of strings");
  size_t n = json_object_array_length(v);
  if (n == 0) return sm_error_set(err, SM_EINVAL, "field 'argv' must not be empty");
  if (n > SM_SERVER_ARGV_MAX)
    return sm_error_set(err, SM_EINVAL, "field 'argv' has more than %d entries",
                        SM_SERVER_ARGV_MAX);
  p->argv = calloc(n + 1, sizeof *p->argv);
  if (p->argv == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    json_object *e = json_object_array_get_idx(v, i);
    if (!json_object_is_type(e, json_type_string))
      return sm_error_set(err, SM_EINVAL, "field 'argv' must be an array of strings");
    int rc = get_string(e, "argv", (size_t)-1, &p->argv[i], err);
    if (rc != 0) return rc;
    p->argc = i + 1;
  }
  if (p->argv[0][0] == '\0')
    return sm_error_set(err, SM_EINVAL, "field 'argv': the command (argv[0]) is empty");
  return 0;
}

static int parse_env(json_object *v, server_execute_params *p, sm_error *err) {
  if (!json_object_is_type(v, json_type_object))
    return sm_error_set(err, SM_EINVAL, "field 'env' must be an object of strings");
  size_t n = (size_t)json_object_object_length(v);
  if (n > SM_SERVER_ENV_MAX)
    return sm_error_set(err, SM_EINVAL, "field 'env' has more than %d entries",
                        SM_SERVER_ENV_MAX);
  p->env = calloc(n + 1, sizeof *p->env);
  if (p->env == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  json_object_object_foreach(v, key, val) {
    if (!server_env_name_valid(key))
      return sm_error_set(err, SM_EINVAL, "field 'env': '%.64s' is not a valid variable name",
                          key);
    sm_env_name_class cls = sm_env_name_classify(key, strlen(key));
    if (cls == SM_ENV_NAME_BLOCKED || cls == SM_ENV_NAME_HOME)
      return sm_error_set(err, SM_EINVAL, "field 'env': %s: %s", key,
                          sm_env_name_refusal(cls));
    char what[300];
    snprintf(what, sizeof what, "field 'env': %s", key);
    const char *vs;
    size_t vl;
    int rc = string_value(val, what, SM_SERVER_ENV_VALUE_MAX, &vs, &vl, err);
    if (rc != 0) return rc;
    size_t kl = strlen(key);
    char *kv = malloc(kl + vl + 2);
    if (kv == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
    memcpy(kv, key, kl);
    kv[kl] = '=';
    memcpy(kv + kl + 1, vs, vl + 1);
    p->env[p->n_env++] = kv;
  }
  return 0;
}

static int parse_execute_field(const char *key, json_object *v, size_t max_stdin,
                               server_execute_params *p, sm_error *err) {
  if (strcmp(key, "tool") == 0) return get_name(v, key, SM_SERVER_TOOL_MAX, &p->tool, err);
  if (strcmp(key, "agent") == 0) return get_name(v, key, SM_SERVER_KEY_MAX, &p->agent, err);
  if (strcmp(key, "user") == 0) return get_name(v, key, SM_SERVER_KEY_MAX, &p->user, err);
  if (strcmp(key, "project") == 0) return get_name(v, key, SM_SERVER_KEY_MAX, &p->project, err);
  if (strcmp(key, "run_id") == 0) return get_name(v, key, SM_SERVER_KEY_MAX, &p->run_id, err);
  if (strcmp(key, "worker_key") == 0)
    return get_name(v, key, SM_SERVER_KEY_MAX, &p->worker_key, err);
  if (strcmp(key, "lease_id") == 0) return get_string(v, key, 128, &p->lease_id, err);
  if (strcmp(key, "workspace") == 0) {
    int rc = get_string(v, key, SM_SERVER_PATH_MAX, &p->workspace, err);
    if (rc == 0 && p->workspace[0] == '\0')
      return sm_error_set(err, SM_EINVAL, "field 'workspace' is empty");
    return rc;
  }
  if (strcmp(key, "argv") == 0) return parse_argv(v, p, err);
  if (strcmp(key, "command") == 0) {
    int rc = get_string(v, key, (size_t)-1, &p->command, err);
    if (rc == 0 && p->command[0] == '\0')
      return sm_error_set(err, SM_EINVAL, "field 'command' is empty");
    return rc;
  }
  if (strcmp(key, "params") == 0) {
    if (!json_object_is_type(v, json_type_object))
      return sm_error_set(err, SM_EINVAL, "field 'params' must be an object");
    p->params = json_object_get(v);
    return 0;
  }
  if (strcmp(key, "env") == 0) return parse_env(v, p, err);
  if (strcmp(key, "stdin_b64") == 0) {
    if (!json_object_is_type(v, json_type_string))
      return sm_error_set(err, SM_EINVAL, "field 'stdin_b64' must be a base64 string");
    int rc = server_base64_decode(json_object_get_string(v), (size_t)json_object_get_string_len(v),
                                  max_stdin, &p->stdin_data, &p->stdin_len, err);
    if (rc == SM_ETOOBIG)
      return sm_error_set(err, SM_EINVAL, "field 'stdin_b64' decodes to more than %zu bytes",
                          max_stdin);
    if (rc == SM_ENOMEM) return sm_error_set(err, SM_ENOMEM, "out of memory");
    if (rc != 0) return sm_error_set(err, SM_EINVAL, "field 'stdin_b64' is not valid base64");
    p->has_stdin = 1;
    return 0;
  }
  if (strcmp(key, "mode") == 0) {
    if (!json_object_is_type(v, json_type_string) ||
        sm_mode_parse(json_object_get_string(v), &p->mode, NULL) != 0)
      return sm_error_set(err, SM_EINVAL,
                          "field 'mode' must be one of none, per_tool, per_run, per_worker");
    p->has_mode = 1;
    return 0;
  }
  if (strcmp(key, "network") == 0) return get_network(v, &p->network, err);
  if (strcmp(key, "sync") == 0) {
    const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    if (sm_sync_mode_parse(s, &p->sync, NULL) != 0)
      return sm_error_set(err, SM_EINVAL, "field 'sync' must be one of none, in, inout");
    p->has_sync = 1;
    return 0;
  }
  if (strcmp(key, "timeout_s") == 0)
    return get_number(v, key, 0.001, SM_SERVER_TIMEOUT_MAX, &p->timeout_s, err);
  if (strcmp(key, "background_on_timeout") == 0)
    return get_bool(v, key, &p->background_on_timeout, err);
  if (strcmp(key, "stream") == 0) return get_bool(v, key, &p->stream, err);
  if (strcmp(key, "replace") == 0) return get_bool(v, key, &p->replace, err);
  if (strcmp(key, "sandbox_id") == 0) {
    int rc = get_string(v, key, SM_NAME_MAX, &p->sandbox_id, err);
    if (rc == 0 && !server_sandbox_ref_valid(p->sandbox_id))
      return sm_error_set(err, SM_EINVAL,
                          "field 'sandbox_id' must be a sandbox's id or name (letters, digits, _ . -)");
    return rc;
  }
  if (strcmp(key, "from_snapshot") == 0) return get_name(v, key, SM_NAME_MAX, &p->from_snapshot, err);
  return sm_error_set(err, SM_EINVAL, "unknown field '%.64s'", key);
}

int server_parse_execute(const char *body, size_t len, size_t max_stdin, server_execute_params *out,
                         sm_error *err) {
  memset(out, 0, sizeof *out);
  cleanup_json json_object *obj = NULL;
  int rc = server_json_object(body, len, &obj, err);
  if (rc != 0) return rc;
  json_object_object_foreach(obj, key, val) {
    if (val == NULL) continue; /* JSON null: as if absent */
    rc = parse_execute_field(key, val, max_stdin, out, err);
    if (rc != 0) {
      server_execute_params_dispose(out);
      return rc;
    }
  }
  if (out->argv && out->command) {
    server_execute_params_dispose(out);
    return sm_error_set(err, SM_EINVAL, "give either 'argv' or 'command', not both");
  }
  if (out->argv == NULL && out->command == NULL && out->params == NULL) {
    server_execute_params_dispose(out);
    return sm_error_set(err, SM_EINVAL, "missing 'argv' or 'command'");
  }
  if (out->argv == NULL && out->command == NULL && out->tool == NULL) {
    server_execute_params_dispose(out);
    return sm_error_set(err, SM_EINVAL, "'params' needs a 'tool' whose template uses them");
  }
  return 0;
}

int server_parse_lease(const char *body, size_t len, server_lease_params *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  out->ttl_s = SM_LEASE_TTL_DEFAULT;
  out->max_uses = 1;
  cleanup_json json_object *obj = NULL;
  int rc = server_json_object(body, len, &obj, err);
  if (rc != 0) return rc;
  int have_tool = 0, have_services = 0;
  json_object_object_foreach(obj, key, val) {
    if (val == NULL) continue;
    if (strcmp(key, "tool") == 0) {
      cleanup_free char *s = NULL;
      if ((rc = get_name(val, key, SM_SERVER_TOOL_MAX, &s, err)) != 0) return rc;
      copy_fixed(s, out->tool, sizeof out->tool);
      have_tool = 1;
    } else if (strcmp(key, "worker_key") == 0) {
      cleanup_free char *s = NULL;
      if ((rc = get_name(val, key, SM_SERVER_KEY_MAX, &s, err)) != 0) return rc;
      copy_fixed(s, out->worker_key, sizeof out->worker_key);
    } else if (strcmp(key, "services") == 0) {
      if (!json_object_is_type(val, json_type_array))
        return sm_error_set(err, SM_EINVAL, "field 'services' must be an array of names");
      size_t n = json_object_array_length(val);
      if (n == 0 || n > SM_LEASE_SERVICES_MAX)
        return sm_error_set(err, SM_EINVAL, "field 'services' must hold 1 to %d names",
                            SM_LEASE_SERVICES_MAX);
      for (size_t i = 0; i < n; i++) {
        cleanup_free char *s = NULL;
        if ((rc = get_name(json_object_array_get_idx(val, i), "services", SM_SERVER_TOOL_MAX,
                           &s, err)) != 0)
          return rc;
        copy_fixed(s, out->services[i], sizeof out->services[i]);
      }
      out->n_services = n;
      have_services = 1;
    } else if (strcmp(key, "ttl_s") == 0) {
      if ((rc = get_number(val, key, 1, SM_LEASE_TTL_MAX, &out->ttl_s, err)) != 0) return rc;
    } else if (strcmp(key, "max_uses") == 0) {
      if ((rc = get_int(val, key, 1, SM_LEASE_USES_MAX, &out->max_uses, err)) != 0) return rc;
    } else {
      return sm_error_set(err, SM_EINVAL, "unknown field '%.64s'", key);
    }
  }
  if (!have_tool) return sm_error_set(err, SM_EINVAL, "missing 'tool'");
  if (!have_services) return sm_error_set(err, SM_EINVAL, "missing 'services'");
  return 0;
}

/* ---- POST /v1/sandboxes ---- */

void server_create_params_dispose(server_create_params *p) {
  if (p == NULL) return;
  char *owned[] = {p->run_id, p->worker_key, p->project, p->agent, p->template_name, p->image};
  for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
  for (size_t i = 0; i < p->n_labels; i++) free(p->labels[i]);
  memset(p, 0, sizeof *p);
}

/* A size: a number of bytes, or a string with k/m/g (as the configuration). */
static int get_size(json_object *v, const char *field, int64_t *out, sm_error *err) {
  if (json_object_is_type(v, json_type_int)) {
    *out = json_object_get_int64(v);
  } else if (!json_object_is_type(v, json_type_string) ||
             sm_parse_size(json_object_get_string(v), out, NULL) != 0) {
    return sm_error_set(err, SM_EINVAL, "field '%s' must be a size (bytes, or e.g. \"512m\")", field);
  }
  if (*out <= 0) return sm_error_set(err, SM_EINVAL, "field '%s' must be more than 0", field);
  return 0;
}

static int parse_labels(json_object *v, server_create_params *p, sm_error *err) {
  if (!json_object_is_type(v, json_type_object))
    return sm_error_set(err, SM_EINVAL, "field 'labels' must be an object of strings");
  if (json_object_object_length(v) > SM_CREATE_LABELS_MAX)
    return sm_error_set(err, SM_EINVAL, "field 'labels' has more than %d entries", SM_CREATE_LABELS_MAX);
  json_object_object_foreach(v, key, val) {
    if (!json_object_is_type(val, json_type_string))
      return sm_error_set(err, SM_EINVAL, "field 'labels': '%.64s' must be a string", key);
    size_t n = strlen(key) + (size_t)json_object_get_string_len(val) + 2;
    char *kv = malloc(n);
    if (kv == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
    snprintf(kv, n, "%s=%s", key, json_object_get_string(val));
    p->labels[p->n_labels++] = kv;
    sm_error lerr = SM_ERROR_INIT;
    if (strlen(kv) != n - 1 || sm_sandbox_label_check(kv, &lerr) != 0)
      return sm_error_set(err, SM_EINVAL, "field 'labels': %s", lerr.message[0] ? lerr.message : "a NUL character");
  }
  return 0;
}

static int parse_create_field(const char *key, json_object *v, server_create_params *p,
                              sm_error *err) {
  if (strcmp(key, "run_id") == 0) return get_name(v, key, SM_SERVER_KEY_MAX, &p->run_id, err);
  if (strcmp(key, "worker_key") == 0) return get_name(v, key, SM_SERVER_KEY_MAX, &p->worker_key, err);
  if (strcmp(key, "project") == 0) return get_name(v, key, SM_SERVER_KEY_MAX, &p->project, err);
  if (strcmp(key, "agent") == 0) return get_name(v, key, SM_SERVER_KEY_MAX, &p->agent, err);
  if (strcmp(key, "template") == 0) return get_name(v, key, 63, &p->template_name, err);
  if (strcmp(key, "image") == 0) return get_string(v, key, SM_NAME_MAX - 1, &p->image, err);
  if (strcmp(key, "mode") == 0) {
    const char *m = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    if (strcmp(m, "per_run") != 0 && strcmp(m, "per_worker") != 0)
      return sm_error_set(err, SM_EINVAL, "field 'mode' must be per_run or per_worker");
    p->has_mode = 1;
    p->mode = m[4] == 'r' ? SM_MODE_PER_RUN : SM_MODE_PER_WORKER;
    return 0;
  }
  if (strcmp(key, "network") == 0) return get_network(v, &p->network, err);
  if (strcmp(key, "cpu") == 0) return get_number(v, key, 0.01, 1024, &p->cpu, err);
  if (strcmp(key, "memory") == 0) return get_size(v, key, &p->memory, err);
  if (strcmp(key, "disk") == 0) return get_size(v, key, &p->disk, err);
  if (strcmp(key, "pids") == 0) {
    int n = 0;
    int rc = get_int(v, key, 1, 4194304, &n, err);
    p->pids = n;
    return rc;
  }
  if (strcmp(key, "timeout_s") == 0) return get_number(v, key, 1, 1e9, &p->timeout_s, err);
  if (strcmp(key, "idle_timeout_s") == 0)
    return get_number(v, key, 1, 1e9, &p->idle_timeout_s, err);
  if (strcmp(key, "labels") == 0) return parse_labels(v, p, err);
  return sm_error_set(err, SM_EINVAL, "unknown field '%.64s'", key);
}

int server_parse_create(const char *body, size_t len, server_create_params *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  cleanup_json json_object *obj = NULL;
  /* An empty body is a sandbox with every default. */
  if (len == 0) return 0;
  int rc = server_json_object(body, len, &obj, err);
  if (rc != 0) return rc;
  json_object_object_foreach(obj, key, val) {
    if (val == NULL) continue;
    rc = parse_create_field(key, val, out, err);
    if (rc != 0) {
      server_create_params_dispose(out);
      return rc;
    }
  }
  if (out->template_name && out->image) {
    server_create_params_dispose(out);
    return sm_error_set(err, SM_EINVAL, "give either 'template' or 'image', not both");
  }
  return 0;
}
