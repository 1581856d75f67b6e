/* The scrubbed environment of a tool call. The host's environment never
 * goes in wholesale: only a fixed set, the locale, and what the caller
 * names with --env-passthrough globs or -e. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/util.h>
#include <sandman/env.h>

#include "common/cleanup.h"
#include "sandbox/env.h"

extern char **environ;

static int name_is(const char *name, size_t len, const char *want) {
  return strlen(want) == len && memcmp(name, want, len) == 0;
}

static const char *const home_names[] = {"HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                                         "XDG_STATE_HOME", "XDG_CACHE_HOME", NULL};
static const char *const fixed_names[] = {"PATH", "USER", "TMPDIR", NULL};

sm_env_name_class sm_env_name_classify(const char *name, size_t len) {
  if (name == NULL || len == 0 || len > 255 || memchr(name, '=', len) != NULL ||
      memchr(name, '\0', len) != NULL)
    return SM_ENV_NAME_INVALID;
  if ((len >= 8 && memcmp(name, "SANDMAN_", 8) == 0) ||
      (len >= 7 && memcmp(name, "DOCKER_", 7) == 0))
    return SM_ENV_NAME_BLOCKED;
  for (size_t i = 0; home_names[i]; i++)
    if (name_is(name, len, home_names[i])) return SM_ENV_NAME_HOME;
  for (size_t i = 0; fixed_names[i]; i++)
    if (name_is(name, len, fixed_names[i])) return SM_ENV_NAME_FIXED;
  return SM_ENV_NAME_OK;
}

const char *sm_env_name_refusal(sm_env_name_class c) {
  switch (c) {
    case SM_ENV_NAME_INVALID: return "not a variable name (empty, too long, or holding '=')";
    case SM_ENV_NAME_BLOCKED:
      return "names starting with SANDMAN_ or DOCKER_ belong to sandman and the engine and "
             "never reach a tool";
    case SM_ENV_NAME_HOME:
      return "HOME and the XDG directories are set by sandman (they point into /workspace)";
    case SM_ENV_NAME_FIXED: return "PATH, USER and TMPDIR are only set by name, never by a glob";
    default: return "allowed";
  }
}

static int is_locale(const char *name, size_t len) {
  return (len == 4 && memcmp(name, "LANG", 4) == 0) ||
         (len == 8 && memcmp(name, "LANGUAGE", 8) == 0) ||
         (len > 3 && memcmp(name, "LC_", 3) == 0);
}

typedef struct env_acc {
  common_strv *out;
  size_t bytes;
} env_acc;

/* Sets "name=value", replacing an earlier entry of the same name. */
static int env_set(env_acc *a, const char *name, size_t nlen, const char *value, sm_error *err) {
  size_t vlen = strlen(value);
  a->bytes += nlen + vlen + 2;
  if (a->bytes > SM_ENV_MAX_BYTES)
    return sm_error_set(err, SM_EINVAL, "the tool's environment is too large (over %d KiB)",
                        SM_ENV_MAX_BYTES / 1024);
  cleanup_free char *entry = malloc(nlen + vlen + 2);
  if (entry == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  memcpy(entry, name, nlen);
  entry[nlen] = '=';
  memcpy(entry + nlen + 1, value, vlen + 1);
  for (size_t i = 0; i < a->out->n; i++) {
    if (strncmp(a->out->v[i], name, nlen) == 0 && a->out->v[i][nlen] == '=') {
      free(a->out->v[i]);
      a->out->v[i] = steal_pointer(&entry);
      return 0;
    }
  }
  if (a->out->n >= SM_ENV_MAX_VARS)
    return sm_error_set(err, SM_EINVAL, "too many environment variables (at most %d)",
                        SM_ENV_MAX_VARS);
  int rc = common_strv_add(a->out, entry); /* a copy */
  if (rc) return sm_error_set(err, SM_ENOMEM, NULL);
  return 0;
}

static int env_set_entry(env_acc *a, const char *entry, sm_error *err) {
  const char *eq = strchr(entry, '=');
  if (eq == NULL) return sm_error_set(err, SM_EINVAL, "'%s' is not NAME=VALUE", entry);
  return env_set(a, entry, (size_t)(eq - entry), eq + 1, err);
}

static const char *host_lookup(const char *const *host_env, const char *name, size_t nlen) {
  if (host_env == NULL) return NULL;
  for (size_t i = 0; host_env[i]; i++)
    if (strncmp(host_env[i], name, nlen) == 0 && host_env[i][nlen] == '=')
      return host_env[i] + nlen + 1;
  return NULL;
}

void sandbox_env_from_request(sandbox_env_spec *spec, const sm_run_request *req) {
  spec->host_env = (const char *const *)environ;
  spec->passthrough = &req->settings.env_passthrough;
  spec->explicit_env = req->env;
  spec->n_explicit = req->n_env;
  spec->secret_env = req->secret_env;
  spec->n_secret = req->n_secret_env;
}

int sandbox_env_build(const sandbox_env_spec *spec, common_strv *out, sm_error *err) {
  env_acc a = {out, 0};
  char buf[4096];
  int rc;
#define SET(name, value)                                                 \
  do {                                                                   \
    rc = env_set(&a, name, strlen(name), value, err);                    \
    if (rc) return rc;                                                   \
  } while (0)
  /* No PATH given: the container's own (the image's) applies. */
  if (spec->path) SET("PATH", spec->path);
  SET("HOME", spec->home);
  if (spec->user && *spec->user) SET("USER", spec->user);
  SET("TMPDIR", spec->tmpdir);
  snprintf(buf, sizeof buf, "%s/.config", spec->home);
  SET("XDG_CONFIG_HOME", buf);
  snprintf(buf, sizeof buf, "%s/.local/share", spec->home);
  SET("XDG_DATA_HOME", buf);
  snprintf(buf, sizeof buf, "%s/.local/state", spec->home);
  SET("XDG_STATE_HOME", buf);
  snprintf(buf, sizeof buf, "%s/.cache", spec->tmpdir);
  SET("XDG_CACHE_HOME", buf);
#undef SET

  /* The locale is harmless and tools print differently without it. */
  int have_lang = 0;
  for (size_t i = 0; spec->host_env && spec->host_env[i]; i++) {
    const char *e = spec->host_env[i];
    const char *eq = strchr(e, '=');
    if (eq == NULL || !is_locale(e, (size_t)(eq - e))) continue;
    if ((rc = env_set(&a, e, (size_t)(eq - e), eq + 1, err))) return rc;
    if (eq - e == 4) have_lang = 1;
  }
  if (!have_lang && (rc = env_set(&a, "LANG", 4, "C.UTF-8", err))) return rc;

  if (spec->passthrough) {
    for (size_t i = 0; spec->host_env && spec->host_env[i]; i++) {
      const char *e = spec->host_env[i];
      const char *eq = strchr(e, '=');
      if (eq == NULL) continue;
      size_t nlen = (size_t)(eq - e);
      /* A glob passes ordinary names only: never sandman's, the engine's,
       * the home contract's or the fixed ones. */
      if (sm_env_name_classify(e, nlen) != SM_ENV_NAME_OK || nlen >= sizeof buf) continue;
      memcpy(buf, e, nlen);
      buf[nlen] = '\0';
      for (size_t g = 0; g < spec->passthrough->n; g++) {
        if (sm_glob_match(spec->passthrough->items[g], buf)) {
          if ((rc = env_set(&a, e, nlen, eq + 1, err))) return rc;
          break;
        }
      }
    }
  }

  for (size_t i = 0; i < spec->n_explicit; i++) {
    const char *e = spec->explicit_env[i];
    const char *eq = strchr(e, '=');
    size_t nlen = eq ? (size_t)(eq - e) : strlen(e);
    sm_env_name_class cls = sm_env_name_classify(e, nlen);
    if (cls == SM_ENV_NAME_INVALID)
      return sm_error_set(err, SM_EINVAL, "bad environment entry '%s' (use NAME=VALUE)", e);
    if (cls == SM_ENV_NAME_BLOCKED)
      return sm_error_set(err, SM_EINVAL, "environment entry %.*s: %s", (int)nlen, e,
                          sm_env_name_refusal(cls));
    if (eq) {
      rc = env_set(&a, e, nlen, eq + 1, err);
    } else {
      /* -e NAME alone passes the host's value, as docker run -e does. */
      const char *v = host_lookup(spec->host_env, e, nlen);
      rc = v ? env_set(&a, e, nlen, v, err) : 0;
    }
    if (rc) return rc;
  }
  for (size_t i = 0; i < spec->n_secret; i++) {
    const char *e = spec->secret_env[i];
    const char *eq = strchr(e, '=');
    if (eq == NULL || sm_env_name_classify(e, (size_t)(eq - e)) != SM_ENV_NAME_OK)
      return sm_error_set(err, SM_EINVAL,
                          "bad credential environment entry (a NAME=VALUE whose name is "
                          "neither sandman's, the engine's nor one sandman sets)");
    if ((rc = env_set(&a, e, (size_t)(eq - e), eq + 1, err))) return rc;
  }
  if (spec->marker && (rc = env_set_entry(&a, spec->marker, err))) return rc;
  return 0;
}
