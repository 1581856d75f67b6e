/* The credentials file: {"service": {"ENV_NAME": "value", ...}, ...}.
 * Read once at start; it must be a regular file with no group or other
 * permission bits, or the runner refuses to start. Values are wiped from
 * memory when the store is freed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/io.h"
#include "common/unconst.h"
#include "server/server_internal.h"
#include <sandman/env.h>

#define CREDS_FILE_MAX (1024 * 1024)
#define CREDS_SERVICES_MAX 256
#define CREDS_VARS_MAX 64     /* per service */
#define CREDS_VALUE_MAX (32 * 1024)

typedef struct cred_var {
  char *name;
  char *value;
  size_t value_len;
} cred_var;

typedef struct cred_service {
  char name[SM_SERVER_TOOL_MAX + 1];
  cred_var *vars;
  size_t n_vars;
} cred_service;

struct server_creds {
  cred_service *services;
  size_t n;
};

static void wipe_free(char *s, size_t n) {
  if (s == NULL) return;
  OPENSSL_cleanse(s, n);
  free(s);
}

void server_creds_free(server_creds *c) {
  if (c == NULL) return;
  for (size_t i = 0; i < c->n; i++) {
    for (size_t j = 0; j < c->services[i].n_vars; j++) {
      cred_var *v = &c->services[i].vars[j];
      free(v->name);
      wipe_free(v->value, v->value_len);
    }
    free(c->services[i].vars);
  }
  free(c->services);
  free(c);
}

size_t server_creds_count(const server_creds *c) { return c ? c->n : 0; }

int server_creds_parse(server_creds **out, const char *name, const char *text, size_t len,
                       sm_error *err) {
  *out = NULL;
  cleanup_json json_object *root = NULL;
  sm_error perr = SM_ERROR_INIT;
  /* The parser's message could quote the text: keep only a generic one so
   * that a broken file never puts a secret in a log line. */
  if (server_json_object(text, len, &root, &perr) != 0)
    return sm_error_set(err, SM_ECONFIG,
                        "credentials file %s: not a JSON object of the form "
                        "{\"service\": {\"ENV_NAME\": \"value\"}}",
                        name);
  server_creds *c = calloc(1, sizeof *c);
  size_t n = (size_t)json_object_object_length(root);
  if (c == NULL || n > CREDS_SERVICES_MAX) {
    free(c);
    return n > CREDS_SERVICES_MAX
               ? sm_error_set(err, SM_ECONFIG, "credentials file %s: more than %d services",
                              name, CREDS_SERVICES_MAX)
               : sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  c->services = calloc(n ? n : 1, sizeof *c->services);
  int rc = c->services ? 0 : sm_error_set(err, SM_ENOMEM, "out of memory");
  json_object_object_foreach(root, svc, vars) {
    if (rc != 0) break;
    if (!server_name_valid(svc, SM_SERVER_TOOL_MAX)) {
      rc = sm_error_set(err, SM_ECONFIG, "credentials file %s: bad service name '%.64s'", name,
                        svc);
      break;
    }
    if (!json_object_is_type(vars, json_type_object) ||
        json_object_object_length(vars) > CREDS_VARS_MAX) {
      rc = sm_error_set(err, SM_ECONFIG,
                        "credentials file %s: service %s must map to an object of at most %d "
                        "\"ENV_NAME\": \"value\" pairs",
                        name, svc, CREDS_VARS_MAX);
      break;
    }
    cred_service *s = &c->services[c->n++];
    snprintf(s->name, sizeof s->name, "%s", svc);
    s->vars = calloc((size_t)json_object_object_length(vars) + 1, sizeof *s->vars);
    if (s->vars == NULL) {
      rc = sm_error_set(err, SM_ENOMEM, "out of memory");
      break;
    }
    json_object_object_foreach(vars, var, val) {
      size_t vl = val ? (size_t)json_object_get_string_len(val) : 0;
      sm_env_name_class cls = sm_env_name_classify(var, strlen(var));
      if (!server_env_name_valid(var) || cls != SM_ENV_NAME_OK) {
        rc = sm_error_set(err, SM_ECONFIG,
                          "credentials file %s: service %s: '%.64s' is not a usable variable "
                          "name%s%s",
                          name, svc, var, cls != SM_ENV_NAME_OK ? ": " : "",
                          cls != SM_ENV_NAME_OK ? sm_env_name_refusal(cls) : "");
        break;
      }
      if (val == NULL || !json_object_is_type(val, json_type_string) ||
          memchr(json_object_get_string(val), '\0', vl) != NULL || vl > CREDS_VALUE_MAX) {
        rc = sm_error_set(err, SM_ECONFIG,
                          "credentials file %s: service %s: %s must be a string of at most %d "
                          "bytes without NUL",
                          name, svc, var, CREDS_VALUE_MAX);
        break;
      }
      cred_var *cv = &s->vars[s->n_vars];
      cv->name = strdup(var);
      cv->value = malloc(vl + 1);
      if (cv->name == NULL || cv->value == NULL) {
        free(cv->name);
        free(cv->value);
        rc = sm_error_set(err, SM_ENOMEM, "out of memory");
        break;
      }
      memcpy(cv->value, json_object_get_string(val), vl + 1);
      cv->value_len = vl;
      s->n_vars++;
    }
  }
  /* json-c keeps its own copies of the strings: wipe them before release. */
  json_object_object_foreach(root, svc2, vars2) {
    (void)svc2;
    if (!json_object_is_type(vars2, json_type_object)) continue;
    json_object_object_foreach(vars2, var2, val2) {
      (void)var2;
      if (val2 && json_object_is_type(val2, json_type_string))
        OPENSSL_cleanse(SM_UNCONST(json_object_get_string(val2)),
                        (size_t)json_object_get_string_len(val2));
    }
  }
  if (rc != 0) {
    server_creds_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

int server_creds_load(server_creds **out, const char *path, sm_error *err) {
  *out = NULL;
  cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
  if (fd < 0)
    return sm_error_set_errno(err, SM_ECONFIG, errno, "cannot open credentials file %s: %s%s",
                              path, strerror(errno),
                              errno == ELOOP ? " (symbolic links are refused)" : "");
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return sm_error_set(err, SM_ECONFIG, "credentials file %s is not a regular file", path);
  if ((st.st_mode & 077) != 0)
    return sm_error_set(err, SM_ECONFIG,
                        "credentials file %s has mode %04o: it must not be readable by group or "
                        "others (run `chmod 600 %s`)",
                        path, (unsigned)(st.st_mode & 07777), path);
  if (st.st_uid != geteuid())
    return sm_error_set(err, SM_ECONFIG,
                        "credentials file %s is owned by uid %u, not by the runner's uid %u",
                        path, (unsigned)st.st_uid, (unsigned)geteuid());
  if (st.st_size > CREDS_FILE_MAX)
    return sm_error_set(err, SM_ECONFIG, "credentials file %s is larger than %d bytes", path,
                        CREDS_FILE_MAX);
  common_buf b;
  common_buf_init(&b, CREDS_FILE_MAX);
  char chunk[4096];
  int rc = 0;
  for (;;) {
    ssize_t n = common_read_retry(fd, chunk, sizeof chunk);
    if (n < 0) {
      rc = sm_error_set_errno(err, SM_EIO, errno, "reading credentials file %s: %s", path,
                              strerror(errno));
      break;
    }
    if (n == 0) break;
    if (common_buf_append(&b, chunk, (size_t)n) != 0) {
      rc = sm_error_set(err, SM_ECONFIG, "credentials file %s is larger than %d bytes", path,
                        CREDS_FILE_MAX);
      break;
    }
  }
  OPENSSL_cleanse(chunk, sizeof chunk);
  if (rc == 0) rc = server_creds_parse(out, path, b.data, b.len, err);
  if (b.data) OPENSSL_cleanse(b.data, b.alloc);
  common_buf_dispose(&b);
  return rc;
}

static const cred_service *find_service(const server_creds *c, const char *name) {
  for (size_t i = 0; c && i < c->n; i++)
    if (strcmp(c->services[i].name, name) == 0) return &c->services[i];
  return NULL;
}

int server_creds_has_service(const server_creds *c, const char *service) {
  return find_service(c, service) != NULL;
}

int server_creds_is_name(const server_creds *c, const char *name) {
  for (size_t i = 0; c && i < c->n; i++)
    for (size_t j = 0; j < c->services[i].n_vars; j++)
      if (strcmp(c->services[i].vars[j].name, name) == 0) return 1;
  return 0;
}

void server_secret_env_dispose(server_secret_env *env) {
  if (env == NULL) return;
  for (size_t i = 0; i < env->n; i++)
    if (env->kv[i]) wipe_free(env->kv[i], strlen(env->kv[i]));
  free(env->kv);
  env->kv = NULL;
  env->n = 0;
}

int server_creds_env(const server_creds *c, const server_lease_params *p, server_secret_env *out,
                     sm_error *err) {
  out->kv = NULL;
  out->n = 0;
  size_t total = 0;
  for (size_t i = 0; i < p->n_services; i++) {
    const cred_service *s = find_service(c, p->services[i]);
    if (s == NULL)
      return sm_error_set(err, SM_EPOLICY, "service %s has no credentials", p->services[i]);
    total += s->n_vars;
  }
  out->kv = calloc(total + 1, sizeof *out->kv);
  if (out->kv == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  for (size_t i = 0; i < p->n_services; i++) {
    const cred_service *s = find_service(c, p->services[i]);
    for (size_t j = 0; j < s->n_vars; j++) {
      size_t nl = strlen(s->vars[j].name);
      char *kv = malloc(nl + s->vars[j].value_len + 2);
      if (kv == NULL) {
        server_secret_env_dispose(out);
        return sm_error_set(err, SM_ENOMEM, "out of memory");
      }
      memcpy(kv, s->vars[j].name, nl);
      kv[nl] = '=';
      memcpy(kv + nl + 1, s->vars[j].value, s->vars[j].value_len + 1);
      out->kv[out->n++] = kv;
    }
  }
  return 0;
}
