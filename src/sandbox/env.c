/* The scrubbed environment of a tool call. The host's environment never
 * goes in wholesale: only a fixed set, the locale, and what the caller
 * names with --env-passthrough globs or -e. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/util.h>

#include "sandbox/internal.h"

/* Names the passthrough globs never override: the sandbox decides them. */
static const char *const fixed_names[] = {
    "PATH", "HOME", "USER", "TMPDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
    "XDG_CACHE_HOME", NULL};

static int is_fixed(const char *name, size_t len) {
  for (size_t i = 0; fixed_names[i]; i++)
    if (strlen(fixed_names[i]) == len && memcmp(fixed_names[i], name, len) == 0) return 1;
  return 0;
}

static int is_locale(const char *name, size_t len) {
  return (len == 4 && memcmp(name, "LANG", 4) == 0) ||
         (len == 8 && memcmp(name, "LANGUAGE", 8) == 0) ||
         (len > 3 && memcmp(name, "LC_", 3) == 0);
}

static int valid_name(const char *name, size_t len) {
  if (len == 0 || len > 255) return 0;
  for (size_t i = 0; i < len; i++)
    if (name[i] == '=' || name[i] == '\0') return 0;
  return 1;
}

typedef struct env_acc {
  sm_strv *out;
  size_t bytes;
} env_acc;

/* Sets "name=value", replacing an earlier entry of the same name. */
static int env_set(env_acc *a, const char *name, size_t nlen, const char *value, sm_error *err) {
  size_t vlen = strlen(value);
  a->bytes += nlen + vlen + 2;
  if (a->bytes > SM_ENV_MAX_BYTES)
    return sm_error_set(err, SM_EINVAL, "the tool's environment is too large (over %d KiB)",
                        SM_ENV_MAX_BYTES / 1024);
  char *entry = malloc(nlen + vlen + 2);
  if (entry == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  memcpy(entry, name, nlen);
  entry[nlen] = '=';
  memcpy(entry + nlen + 1, value, vlen + 1);
  for (size_t i = 0; i < a->out->n; i++) {
    if (strncmp(a->out->v[i], name, nlen) == 0 && a->out->v[i][nlen] == '=') {
      free(a->out->v[i]);
      a->out->v[i] = entry;
      return 0;
    }
  }
  if (a->out->n >= SM_ENV_MAX_VARS) {
    free(entry);
    return sm_error_set(err, SM_EINVAL, "too many environment variables (at most %d)",
                        SM_ENV_MAX_VARS);
  }
  int rc = sm_strv_add(a->out, entry);
  free(entry);
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

int sm_env_build(const sm_env_spec *spec, sm_strv *out, sm_error *err) {
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
      if (nlen >= 8 && memcmp(e, "SANDMAN_", 8) == 0) continue;
      if (is_fixed(e, nlen) || !valid_name(e, nlen) || nlen >= sizeof buf) continue;
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
    if (!valid_name(e, nlen))
      return sm_error_set(err, SM_EINVAL, "bad environment entry '%s' (use NAME=VALUE)", e);
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
    if (eq == NULL || !valid_name(e, (size_t)(eq - e)))
      return sm_error_set(err, SM_EINVAL, "bad credential environment entry (use NAME=VALUE)");
    if ((rc = env_set(&a, e, (size_t)(eq - e), eq + 1, err))) return rc;
  }
  if (spec->marker && (rc = env_set_entry(&a, spec->marker, err))) return rc;
  return 0;
}
