/* Loading and validating the configuration file.
 *
 * The YAML tree (yaml_tree.c) is checked key by key against the schema
 * below and turned into typed layers. The first problem found stops the
 * load with "FILE:LINE:COLUMN: key.path: message"; an unknown key names the
 * nearest known one. Nothing of a bad file is ever used. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/image.h>
#include <sandman/util.h>
#include <sandman/workspace.h>
#include <sandman/name.h>

#include "common/cleanup.h"
#include "config/config_internal.h"

const cfg_setting_info cfg_settings[CS_COUNT] = {
    [CS_MODE] = {"mode", CK_MODE, CFG_MERGE_REPLACE, "--mode"},
    [CS_IMAGE] = {"image", CK_IMAGE, CFG_MERGE_REPLACE, "--image"},
    [CS_NETWORK] = {"network", CK_NETWORK, CFG_MERGE_REPLACE, "--network"},
    [CS_RUNTIME] = {"runtime", CK_RUNTIME, CFG_MERGE_REPLACE, "--runtime"},
    [CS_USER] = {"user", CK_USER, CFG_MERGE_REPLACE, NULL},
    [CS_CPU] = {"cpu", CK_CPU, CFG_MERGE_REPLACE, "--cpu"},
    [CS_MEMORY] = {"memory", CK_SIZE, CFG_MERGE_REPLACE, "--mem"},
    [CS_PIDS] = {"pids", CK_COUNT, CFG_MERGE_REPLACE, "--pids"},
    [CS_DISK] = {"disk", CK_SIZE, CFG_MERGE_REPLACE, "--disk"},
    [CS_TMPFS] = {"tmpfs", CK_SIZE, CFG_MERGE_REPLACE, "--tmpfs"},
    [CS_READ_ONLY_ROOT] = {"read_only_root", CK_BOOL, CFG_MERGE_REPLACE, NULL},
    [CS_TIMEOUT] = {"timeout", CK_DURATION, CFG_MERGE_REPLACE, "--timeout"},
    [CS_STDOUT_CAP] = {"stdout_cap", CK_SIZE, CFG_MERGE_REPLACE, NULL},
    [CS_STDERR_CAP] = {"stderr_cap", CK_SIZE, CFG_MERGE_REPLACE, NULL},
    [CS_IDLE_TIMEOUT] = {"idle_timeout", CK_DURATION, CFG_MERGE_REPLACE, NULL},
    [CS_EXCLUDES] = {"excludes", CK_GLOBS, CFG_MERGE_EXTEND, "--exclude"},
    [CS_ENV_PASSTHROUGH] = {"env_passthrough", CK_GLOBS, CFG_MERGE_REPLACE, "--env-passthrough"},
    [CS_PROTECT] = {"protect", CK_GLOBS, CFG_MERGE_REPLACE, "--protect"},
    [CS_COPY_ENV_FILES] = {"copy_env_files", CK_BOOL, CFG_MERGE_REPLACE, "--copy-env-files"},
};

static const char *const top_keys[] = {"version", "project", "engine", "defaults", "agents",
                                       "tools", "workers", "audit", "egress_proxy", "broker",
                                       "templates", "limits", "snapshots", NULL};
static const char *const worker_keys[] = {"services", "templates", "lifecycle", NULL};
static const char *const project_keys[] = {"id", "environment", NULL};
static const char *const engine_keys[] = {"host", "tls_verify", "cert_path", "backend",
                                          "swarm", NULL};
static const char *const swarm_keys[] = {"node_certs", "node_port", "constraints",
                                         "reserve_cpu", "reserve_memory", NULL};
static const char *const audit_keys[] = {"enabled", "file", "stderr", "max_size", "keep", NULL};
static const char *const egress_proxy_keys[] = {"network",         "hosts",        "max_connections",
                                                "max_per_sandbox", "idle_timeout", "connect_timeout",
                                                NULL};
static const char *const defaults_keys[] = {
    "mode",   "image",          "network",       "runtime",    "cpu",        "memory",
    "pids",   "disk",           "read_only_root", "user",      "tmpfs",      "timeout",
    "stdout_cap", "stderr_cap", "output_cap",    "idle_timeout", "excludes", "scope",
    "worker_tools", "tools",    "sandbox_tools", "host_tools", "env",        "pool_size",
    "workspace", "egress", "broker", "templates", "lifecycle", NULL};
static const char *const agent_keys[] = {
    "mode",   "image",          "network",       "runtime",    "cpu",        "memory",
    "pids",   "disk",           "read_only_root", "user",      "tmpfs",      "timeout",
    "stdout_cap", "stderr_cap", "output_cap",    "idle_timeout", "excludes", "scope",
    "worker_tools", "tools",    "sandbox_tools", "host_tools", "env",        "workspace_root",
    "workspace", "egress", "broker", "templates", "lifecycle", NULL};
static const char *const policy_keys[] = {"allow", "deny", NULL};
static const char *const sandbox_tools_keys[] = {"always", "never", NULL};
static const char *const env_keys[] = {"passthrough", NULL};
static const char *const workspace_keys[] = {"protect", "protect_add", "copy_env_files", NULL};
static const char *const tool_keys[] = {"argv", "description", NULL};

/* Keys people put one level off: the full path they probably meant. */
static const struct {
  const char *key, *where;
} misplaced[] = {
    {"allow", "tools.allow"},        {"deny", "tools.deny"},
    {"always", "sandbox_tools.always"}, {"never", "sandbox_tools.never"},
    {"passthrough", "env.passthrough"}, {"env_passthrough", "env.passthrough"},
    {"environment", "project.environment"}, {"host", "engine.host"},
    {"argv", "tools.<name>.argv"},
    {"protect", "workspace.protect"}, {"protect_add", "workspace.protect_add"},
    {"copy_env_files", "workspace.copy_env_files"},
};

typedef cfg_vctx vctx;


static void join(char *out, size_t len, const char *path, const char *key) {
  if (path[0]) snprintf(out, len, "%s.%s", path, key);
  else snprintf(out, len, "%s", key);
}

static const char *describe(const cfg_ynode *n) {
  if (config_ynode_is_null(n)) return "nothing";
  switch (n->type) {
    case CFG_Y_SEQ: return "a list";
    case CFG_Y_MAP: return "a mapping";
    default: return "a single value";
  }
}

static int unknown_key(vctx *v, const cfg_ynode *key, const char *path,
                       const char *const *known) {
  char full[512];
  join(full, sizeof full, path, key->str);
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  for (const char *const *k = known; *k; k++) {
    size_t d = sm_edit_distance(key->str, *k);
    if (d < best_d) {
      best_d = d;
      best = *k;
    }
  }
  size_t lim = best ? (strlen(best) <= 4 ? 1 : strlen(best) <= 8 ? 2 : 3) : 0;
  if (best && best_d <= lim)
    return config_verr(v, key, full, "unknown key (did you mean '%s'?)", best);
  if (strcmp(key->str, "workspace_root") == 0)
    return config_verr(v, key, full,
                       "unknown key (workspace_root is only allowed under agents.<name>)");
  /* The warm pool belongs to the runner, not to one agent's calls. */
  if (strcmp(key->str, "pool_size") == 0)
    return config_verr(
        v, key, full,
        "unknown key (pool_size is only allowed under defaults: the warm pool belongs "
        "to the runner; did you mean 'defaults.pool_size'?)");
  for (size_t i = 0; i < sizeof misplaced / sizeof misplaced[0]; i++)
    if (strcmp(key->str, misplaced[i].key) == 0)
      return config_verr(v, key, full, "unknown key here (did you mean '%s'?)", misplaced[i].where);
  if (path[0] == '\0')
    for (const char *const *k = defaults_keys; *k; k++)
      if (strcmp(key->str, *k) == 0)
        return config_verr(v, key, full,
                           "unknown key at the top level (did you mean 'defaults.%s'?)", *k);
  char list[512] = "";
  size_t used = 0;
  for (const char *const *k = known; *k && used < sizeof list - 1; k++) {
    int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", *k);
    if (w < 0) break;
    used += (size_t)w;
  }
  return config_verr(v, key, full, "unknown key (known keys: %s)", list);
}

/* A mapping (or nothing): keys are plain strings, unique, and from known
 * (known NULL: any valid name, as for agents.<name>). */
static int check_map(vctx *v, const cfg_ynode *map, const char *path,
                     const char *const *known) {
  if (config_ynode_is_null(map)) return 0;
  if (map->type != CFG_Y_MAP)
    return config_verr(v, map, path, "expected a mapping of keys, got %s", describe(map));
  if (config_map_size(map) > 1024) return config_verr(v, map, path, "more than 1024 keys");
  for (size_t i = 0; i < config_map_size(map); i++) {
    const cfg_ynode *k = config_map_key(map, i);
    if (k->type != CFG_Y_SCALAR || config_ynode_is_null(k))
      return config_verr(v, k, path, "keys must be plain names, got %s", describe(k));
    for (size_t j = 0; j < i; j++) {
      const cfg_ynode *prev = config_map_key(map, j);
      if (strcmp(prev->str, k->str) == 0) {
        char full[512];
        join(full, sizeof full, path, k->str);
        return config_verr(v, k, full, "duplicate key (first at line %zu, column %zu)", prev->line,
                           prev->col);
      }
    }
    if (known) {
      int found = 0;
      for (const char *const *kk = known; *kk && !found; kk++) found = strcmp(*kk, k->str) == 0;
      if (!found) return unknown_key(v, k, path, known);
    }
  }
  return 0;
}

static int get_string(vctx *v, const cfg_ynode *n, const char *path, const char **out) {
  if (n->type != CFG_Y_SCALAR)
    return config_verr(v, n, path, "expected a string, got %s", describe(n));
  *out = n->str;
  return 0;
}

static int get_bool(vctx *v, const cfg_ynode *n, const char *path, int *out) {
  static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "on", "On", NULL};
  static const char *const no[] = {"false", "False", "FALSE", "no", "No", "off", "Off", NULL};
  if (n->type == CFG_Y_SCALAR && n->plain) {
    for (const char *const *s = yes; *s; s++)
      if (strcmp(n->str, *s) == 0) return *out = 1, 0;
    for (const char *const *s = no; *s; s++)
      if (strcmp(n->str, *s) == 0) return *out = 0, 0;
  }
  if (n->type == CFG_Y_SCALAR)
    return config_verr(v, n, path, "expected true or false, got '%s'", n->str);
  return config_verr(v, n, path, "expected true or false, got %s", describe(n));
}

static int set_str(vctx *v, char **dst, const char *s) {
  char *d = strdup(s);
  if (!d) return sm_error_set(v->err, SM_ENOMEM, "out of memory reading %s", v->file);
  free(*dst);
  *dst = d;
  return 0;
}

static int valid_chars(const char *s, const char *extra) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          strchr(extra, c)))
      return 0;
  }
  return 1;
}

static void list_free(cfg_list *l) {
  for (size_t i = 0; i < l->n; i++) free(l->items[i]);
  free(l->items);
  l->items = NULL;
  l->n = 0;
}

static int list_push(vctx *v, cfg_list *l, const char *s) {
  char **items = realloc(l->items, (l->n + 1) * sizeof *items);
  if (!items) return sm_error_set(v->err, SM_ENOMEM, "out of memory reading %s", v->file);
  l->items = items;
  if (!(l->items[l->n] = strdup(s)))
    return sm_error_set(v->err, SM_ENOMEM, "out of memory reading %s", v->file);
  l->n++;
  return 0;
}

typedef enum { LIST_GLOBS, LIST_ENV_GLOBS, LIST_TOOLS, LIST_SERVICES, LIST_PROTECT, LIST_HOSTS,
               LIST_TEMPLATES } list_kind;

/* The runner's names (worker keys, services): 1..max of letters, digits and
 * _ . : @ + = -, not starting with - or . */
static int runner_name(const char *s, size_t max) {
  size_t n = strlen(s);
  return n > 0 && n <= max && s[0] != '-' && s[0] != '.' && valid_chars(s, "_.:@+=-");
}

static int check_item(vctx *v, const cfg_ynode *it, const char *path, list_kind kind) {
  const char *s = it->str;
  if (it->len == 0) return config_verr(v, it, path, "empty entry");
  if (kind == LIST_TOOLS) {
    if (strncmp(s, "group:", 6) == 0) {
      if (!config_group_members(s))
        return config_verr(v, it, path, "unknown group '%s' (known: %s)", s, config_group_names());
      return 0;
    }
    if (it->len >= CFG_NAME_MAX || !valid_chars(s, "_.-*?[]!"))
      return config_verr(
          v, it, path,
          "'%s' is not a tool name or pattern (letters, digits, '_', '.', '-' and the "
          "globs * ? [...]; or group:NAME)",
          s);
    return 0;
  }
  if (kind == LIST_HOSTS) {
    sm_error perr = SM_ERROR_INIT;
    if (sm_egress_pattern_check(s, &perr) != 0) return config_verr(v, it, path, "%s", perr.message);
    return 0;
  }
  if (kind == LIST_TEMPLATES) {
    if (!config_valid_name(s))
      return config_verr(
          v, it, path, "'%s' is not a template name (letters, digits, '.', '_' and '-', up to 63)",
          s);
    return 0;
  }
  if (kind == LIST_SERVICES) {
    if (!runner_name(s, CFG_SERVICE_MAX))
      return config_verr(
          v, it, path,
          "'%s' is not a service name (1 to %d letters, digits and _ . : @ + = -, not "
          "starting with - or .)",
          s, CFG_SERVICE_MAX);
    return 0;
  }
  if (it->len >= SM_NAME_MAX)
    return config_verr(v, it, path, "entry longer than %d bytes", SM_NAME_MAX - 1);
  if (kind == LIST_ENV_GLOBS && !valid_chars(s, "_*?[]!"))
    return config_verr(v, it, path, "'%s' is not a variable name or pattern", s);
  sm_error gerr = SM_ERROR_INIT;
  if (kind == LIST_PROTECT && sm_workspace_protect_check(s, &gerr) != 0)
    return config_verr(v, it, path, "%s", gerr.message);
  return 0;
}

/* A list of strings (nothing = unset, *set stays 0). */
static int get_list(vctx *v, const cfg_ynode *n, const char *path, list_kind kind, int *set,
                    cfg_list *out) {
  if (config_ynode_is_null(n)) return 0;
  if (n->type != CFG_Y_SEQ) {
    if (n->type == CFG_Y_SCALAR)
      return config_verr(v, n, path, "expected a list, got a single value ('%s'); write [\"%s\"]",
                         n->str, n->str);
    return config_verr(v, n, path, "expected a list, got %s", describe(n));
  }
  if (n->n > SM_LIST_MAX) return config_verr(v, n, path, "more than %d entries", SM_LIST_MAX);
  list_free(out);
  for (size_t i = 0; i < n->n; i++) {
    const cfg_ynode *it = n->kids[i];
    char ipath[544];
    snprintf(ipath, sizeof ipath, "%s[%zu]", path, i);
    if (it->type != CFG_Y_SCALAR || config_ynode_is_null(it))
      return config_verr(v, it, ipath, "expected a string, got %s", describe(it));
    int rc = check_item(v, it, ipath, kind);
    if (rc == 0) rc = list_push(v, out, it->str);
    if (rc) return rc;
  }
  *set = 1;
  return 0;
}

static int parse_setting(vctx *v, const cfg_ynode *n, const char *path, cfg_setting id,
                         cfg_value *out) {
  const cfg_setting_info *info = &cfg_settings[id];
  sm_error perr = SM_ERROR_INIT;
  const char *s = NULL;
  int rc = 0;
  if (config_ynode_is_null(n)) return 0;
  switch (info->kind) {
    case CK_MODE: {
      if ((rc = get_string(v, n, path, &s))) return rc;
      sm_mode mode;
      if (sm_mode_parse(s, &mode, NULL) == 0) out->i = (int)mode, out->set = 1;
      if (!out->set)
        return config_verr(v, n, path, "'%s' is not one of none, per_tool, per_run, per_worker", s);
      return 0;
    }
    case CK_NETWORK:
      if ((rc = get_string(v, n, path, &s))) return rc;
      if (strcmp(s, "none") != 0 && strcmp(s, "bridge") != 0 && strcmp(s, "allowlist") != 0)
        return config_verr(v, n, path, "'%s' is not one of none, bridge, allowlist", s);
      break;
    case CK_IMAGE:
      if ((rc = get_string(v, n, path, &s))) return rc;
      if (n->len == 0 || n->len >= SM_NAME_MAX || !valid_chars(s, "_.-/:@"))
        return config_verr(v, n, path,
                           "'%s' is not an image reference (e.g. sandman/minimal:latest)", s);
      {
        /* A pin must be a well-formed sha256 digest: caught here, with its
         * position, rather than at the first call. */
        sm_image_ref ref;
        sm_error ie = SM_ERROR_INIT;
        if (sm_image_ref_parse(s, &ref, &ie) != 0) return config_verr(v, n, path, "%s", ie.message);
      }
      break;
    case CK_RUNTIME:
      if ((rc = get_string(v, n, path, &s))) return rc;
      if (n->len >= 64 || !valid_chars(s, "_.-"))
        return config_verr(v, n, path, "'%s' is not a runtime name (e.g. runc, runsc)", s);
      break;
    case CK_USER:
      if ((rc = get_string(v, n, path, &s))) return rc;
      if (n->len == 0 || n->len >= 64 || !valid_chars(s, "_.-:"))
        return config_verr(v, n, path, "'%s' is not a user (a name, UID or UID:GID)", s);
      break;
    case CK_CPU:
      if (n->type != CFG_Y_SCALAR)
        return config_verr(v, n, path, "expected a number of CPUs, got %s", describe(n));
      if (sm_parse_double(n->str, 0, 1024, &out->d, &perr))
        return config_verr(v, n, path, "%s", perr.message);
      out->set = 1;
      return 0;
    case CK_COUNT:
      if (n->type != CFG_Y_SCALAR)
        return config_verr(v, n, path, "expected a whole number, got %s", describe(n));
      if (sm_parse_int(n->str, 1, 4194304, &out->i, &perr))
        return config_verr(v, n, path, "%s", perr.message);
      out->set = 1;
      return 0;
    case CK_SIZE:
      if (n->type != CFG_Y_SCALAR)
        return config_verr(v, n, path, "expected a size (e.g. 512k, 64m, 2g), got %s", describe(n));
      if (sm_parse_size(n->str, &out->i, &perr)) return config_verr(v, n, path, "%s", perr.message);
      if (id == CS_MEMORY && out->i < (6 << 20))
        return config_verr(v, n, path, "'%s' is below the engine's minimum of 6m", n->str);
      if ((id == CS_DISK || id == CS_TMPFS) && out->i == 0)
        return config_verr(v, n, path, "must be more than 0");
      out->set = 1;
      return 0;
    case CK_BOOL: {
      int b = 0;
      if ((rc = get_bool(v, n, path, &b))) return rc;
      out->i = b;
      out->set = 1;
      return 0;
    }
    case CK_DURATION:
      if (n->type != CFG_Y_SCALAR)
        return config_verr(v, n, path, "expected a duration (e.g. 90s, 10m, 2h), got %s",
                           describe(n));
      if (sm_parse_duration(n->str, &out->d, &perr))
        return config_verr(v, n, path, "%s", perr.message);
      if (id == CS_TIMEOUT && out->d <= 0) return config_verr(v, n, path, "must be more than 0s");
      out->set = 1;
      return 0;
    case CK_GLOBS:
      return get_list(v, n, path,
                      id == CS_ENV_PASSTHROUGH ? LIST_ENV_GLOBS
                      : id == CS_PROTECT       ? LIST_PROTECT
                                               : LIST_GLOBS,
                      &out->set, &out->list);
  }
  if ((rc = set_str(v, &out->str, s))) return rc;
  out->set = 1;
  return 0;
}

static void layer_free(cfg_layer *l) {
  for (int i = 0; i < CS_COUNT; i++) {
    free(l->v[i].str);
    list_free(&l->v[i].list);
  }
  list_free(&l->allow.list);
  list_free(&l->deny.list);
  list_free(&l->worker_tools.list);
  list_free(&l->always.list);
  list_free(&l->never.list);
  list_free(&l->host_tools.list);
  list_free(&l->protect_add.list);
  list_free(&l->egress_allow.list);
  list_free(&l->egress_deny.list);
  list_free(&l->templates.list);
  free(l->workspace_root);
  memset(l, 0, sizeof *l);
}

const char *config_scope_name(cfg_scope s) {
  switch (s) {
    case CFG_SCOPE_CALL: return "per_call";
    case CFG_SCOPE_SHARED: return "shared";
    case CFG_SCOPE_USER: return "user";
    case CFG_SCOPE_USER_AGENT: return "user_agent";
    default: return "";
  }
}

static int parse_scope(vctx *v, const cfg_ynode *n, const char *path, cfg_scope *out) {
  const char *s = NULL;
  if (config_ynode_is_null(n)) return 0;
  int rc = get_string(v, n, path, &s);
  if (rc) return rc;
  for (cfg_scope sc = CFG_SCOPE_CALL; sc <= CFG_SCOPE_USER_AGENT; sc++)
    if (strcmp(s, config_scope_name(sc)) == 0) return *out = sc, 0;
  return config_verr(v, n, path, "'%s' is not one of shared, user, user_agent, per_call", s);
}

static int parse_layer(vctx *v, const cfg_ynode *map, const char *path, int is_agent,
                       cfg_layer *l) {
  int rc = check_map(v, map, path, is_agent ? agent_keys : defaults_keys);
  if (rc || config_ynode_is_null(map)) return rc;
  char p[512], q[600];
  /* output_cap first so that stdout_cap / stderr_cap in the same entry win. */
  const cfg_ynode *oc = config_map_get(map, "output_cap");
  if (oc && !config_ynode_is_null(oc)) {
    join(p, sizeof p, path, "output_cap");
    if ((rc = parse_setting(v, oc, p, CS_STDOUT_CAP, &l->v[CS_STDOUT_CAP]))) return rc;
    l->v[CS_STDERR_CAP] = l->v[CS_STDOUT_CAP];
  }
  for (int id = 0; id < CS_COUNT; id++) {
    if (id == CS_ENV_PASSTHROUGH || id == CS_PROTECT) continue;
    const cfg_ynode *n = config_map_get(map, cfg_settings[id].name);
    if (!n) continue;
    join(p, sizeof p, path, cfg_settings[id].name);
    if ((rc = parse_setting(v, n, p, (cfg_setting)id, &l->v[id]))) return rc;
  }
  const cfg_ynode *n;
  if ((n = config_map_get(map, "env"))) {
    join(p, sizeof p, path, "env");
    if ((rc = check_map(v, n, p, env_keys))) return rc;
    const cfg_ynode *pt = config_map_get(n, "passthrough");
    snprintf(q, sizeof q, "%s.passthrough", p);
    if (pt && (rc = parse_setting(v, pt, q, CS_ENV_PASSTHROUGH, &l->v[CS_ENV_PASSTHROUGH])))
      return rc;
  }
  if ((n = config_map_get(map, "workspace"))) {
    join(p, sizeof p, path, "workspace");
    if ((rc = check_map(v, n, p, workspace_keys))) return rc;
    const cfg_ynode *pr = config_map_get(n, "protect"), *pa = config_map_get(n, "protect_add");
    snprintf(q, sizeof q, "%s.protect", p);
    if (pr && (rc = parse_setting(v, pr, q, CS_PROTECT, &l->v[CS_PROTECT]))) return rc;
    snprintf(q, sizeof q, "%s.protect_add", p);
    if (pa && (rc = get_list(v, pa, q, LIST_PROTECT, &l->protect_add.set, &l->protect_add.list)))
      return rc;
    const cfg_ynode *ce = config_map_get(n, "copy_env_files");
    snprintf(q, sizeof q, "%s.copy_env_files", p);
    if (ce && (rc = parse_setting(v, ce, q, CS_COPY_ENV_FILES, &l->v[CS_COPY_ENV_FILES])))
      return rc;
  }
  if ((n = config_map_get(map, "tools"))) {
    join(p, sizeof p, path, "tools");
    if ((rc = check_map(v, n, p, policy_keys))) return rc;
    const cfg_ynode *a = config_map_get(n, "allow"), *d = config_map_get(n, "deny");
    snprintf(q, sizeof q, "%s.allow", p);
    if (a && (rc = get_list(v, a, q, LIST_TOOLS, &l->allow.set, &l->allow.list))) return rc;
    snprintf(q, sizeof q, "%s.deny", p);
    if (d && (rc = get_list(v, d, q, LIST_TOOLS, &l->deny.set, &l->deny.list))) return rc;
  }
  if ((n = config_map_get(map, "egress"))) {
    join(p, sizeof p, path, "egress");
    if ((rc = check_map(v, n, p, policy_keys))) return rc;
    const cfg_ynode *a = config_map_get(n, "allow"), *d = config_map_get(n, "deny");
    snprintf(q, sizeof q, "%s.allow", p);
    if (a && (rc = get_list(v, a, q, LIST_HOSTS, &l->egress_allow.set, &l->egress_allow.list))) return rc;
    snprintf(q, sizeof q, "%s.deny", p);
    if (d && (rc = get_list(v, d, q, LIST_HOSTS, &l->egress_deny.set, &l->egress_deny.list))) return rc;
  }
  if ((n = config_map_get(map, "sandbox_tools"))) {
    join(p, sizeof p, path, "sandbox_tools");
    if ((rc = check_map(v, n, p, sandbox_tools_keys))) return rc;
    const cfg_ynode *a = config_map_get(n, "always"), *nv = config_map_get(n, "never");
    snprintf(q, sizeof q, "%s.always", p);
    if (a && (rc = get_list(v, a, q, LIST_TOOLS, &l->always.set, &l->always.list))) return rc;
    snprintf(q, sizeof q, "%s.never", p);
    if (nv && (rc = get_list(v, nv, q, LIST_TOOLS, &l->never.set, &l->never.list))) return rc;
  }
  if ((n = config_map_get(map, "worker_tools"))) {
    join(p, sizeof p, path, "worker_tools");
    if ((rc = get_list(v, n, p, LIST_TOOLS, &l->worker_tools.set, &l->worker_tools.list)))
      return rc;
  }
  if ((n = config_map_get(map, "host_tools"))) {
    join(p, sizeof p, path, "host_tools");
    if ((rc = get_list(v, n, p, LIST_TOOLS, &l->host_tools.set, &l->host_tools.list)))
      return rc;
  }
  if ((n = config_map_get(map, "templates"))) {
    join(p, sizeof p, path, "templates");
    if ((rc = get_list(v, n, p, LIST_TEMPLATES, &l->templates.set, &l->templates.list))) return rc;
  }
  if ((n = config_map_get(map, "scope"))) {
    join(p, sizeof p, path, "scope");
    if ((rc = parse_scope(v, n, p, &l->scope))) return rc;
  }
  if (is_agent && (n = config_map_get(map, "workspace_root")) && !config_ynode_is_null(n)) {
    const char *s = NULL;
    join(p, sizeof p, path, "workspace_root");
    if ((rc = get_string(v, n, p, &s))) return rc;
    if (s[0] != '/' || n->len >= SM_NAME_MAX)
      return config_verr(v, n, p, "'%s' is not an absolute path", s);
    if ((rc = set_str(v, &l->workspace_root, s))) return rc;
  }
  return 0;
}

static int parse_project(vctx *v, const cfg_ynode *map, sm_config *c) {
  int rc = check_map(v, map, "project", project_keys);
  if (rc || config_ynode_is_null(map)) return rc;
  const cfg_ynode *n;
  const char *s = NULL;
  if ((n = config_map_get(map, "id")) && !config_ynode_is_null(n)) {
    if ((rc = get_string(v, n, "project.id", &s))) return rc;
    if (!sm_name_valid(s))
      return config_verr(
          v, n, "project.id",
          "'%.64s' is not a project id (1 to %d letters, digits and _ . : @ + = -, not "
          "starting with - or .)",
          s, SM_NAME_LEN_MAX);
    if ((rc = set_str(v, &c->project_id, s))) return rc;
  }
  if ((n = config_map_get(map, "environment")) && !config_ynode_is_null(n)) {
    if ((rc = get_string(v, n, "project.environment", &s))) return rc;
    if (strcmp(s, "production") && strcmp(s, "staging") && strcmp(s, "development"))
      return config_verr(v, n, "project.environment",
                         "'%s' is not one of production, staging, development", s);
    if ((rc = set_str(v, &c->project_env, s))) return rc;
  }
  return 0;
}

/* engine.swarm: how the swarm backend reaches nodes and places sandboxes. */
static int parse_swarm(vctx *v, const cfg_ynode *map, sm_config *c) {
  int rc = check_map(v, map, "engine.swarm", swarm_keys);
  if (rc || config_ynode_is_null(map)) return rc;
  const cfg_ynode *n;
  const char *s = NULL;
  sm_error perr = SM_ERROR_INIT;
  if ((n = config_map_get(map, "node_certs")) && !config_ynode_is_null(n)) {
    if ((rc = get_string(v, n, "engine.swarm.node_certs", &s))) return rc;
    if (n->len == 0) return config_verr(v, n, "engine.swarm.node_certs", "empty path");
    if ((rc = set_str(v, &c->swarm_node_certs, s))) return rc;
  }
  if ((n = config_map_get(map, "node_port")) && !config_ynode_is_null(n)) {
    int64_t port = 0;
    if ((rc = get_string(v, n, "engine.swarm.node_port", &s))) return rc;
    if (sm_parse_int(s, 1, 65535, &port, &perr) != 0)
      return config_verr(v, n, "engine.swarm.node_port", "%s", perr.message);
    c->swarm_node_port = (int)port;
  }
  int set = 0;
  if ((rc = get_list(v, config_map_get(map, "constraints"), "engine.swarm.constraints", LIST_GLOBS,
                     &set, &c->swarm_constraints)))
    return rc;
  if ((n = config_map_get(map, "reserve_cpu")) && !config_ynode_is_null(n)) {
    if ((rc = get_string(v, n, "engine.swarm.reserve_cpu", &s))) return rc;
    if (sm_parse_double(s, 0, 1024, &c->swarm_reserve_cpu, &perr) != 0)
      return config_verr(v, n, "engine.swarm.reserve_cpu", "%s", perr.message);
  }
  if ((n = config_map_get(map, "reserve_memory")) && !config_ynode_is_null(n)) {
    if ((rc = get_string(v, n, "engine.swarm.reserve_memory", &s))) return rc;
    if (sm_parse_size(s, &c->swarm_reserve_memory, &perr) != 0)
      return config_verr(v, n, "engine.swarm.reserve_memory", "%s", perr.message);
  }
  return 0;
}

static int parse_engine(vctx *v, const cfg_ynode *map, sm_config *c) {
  int rc = check_map(v, map, "engine", engine_keys);
  if (rc || config_ynode_is_null(map)) return rc;
  const cfg_ynode *n;
  const char *s = NULL;
  if ((n = config_map_get(map, "host")) && !config_ynode_is_null(n)) {
    if ((rc = get_string(v, n, "engine.host", &s))) return rc;
    if (strncmp(s, "unix://", 7) && strncmp(s, "tcp://", 6) && strncmp(s, "http://", 7) &&
        strncmp(s, "https://", 8))
      return config_verr(v, n, "engine.host",
                         "'%s' is not an engine address (unix:///PATH or tcp://HOST:PORT)", s);
    if ((rc = set_str(v, &c->engine_host, s))) return rc;
  }
  if ((n = config_map_get(map, "tls_verify")) && !config_ynode_is_null(n)) {
    int b = 0;
    if ((rc = get_bool(v, n, "engine.tls_verify", &b))) return rc;
    c->tls_verify = b;
  }
  if ((n = config_map_get(map, "cert_path")) && !config_ynode_is_null(n)) {
    if ((rc = get_string(v, n, "engine.cert_path", &s))) return rc;
    if (n->len == 0) return config_verr(v, n, "engine.cert_path", "empty path");
    if ((rc = set_str(v, &c->cert_path, s))) return rc;
  }
  if ((n = config_map_get(map, "backend")) && !config_ynode_is_null(n)) {
    if ((rc = get_string(v, n, "engine.backend", &s))) return rc;
    if (strcmp(s, "docker") != 0 && strcmp(s, "swarm") != 0)
      return config_verr(v, n, "engine.backend", "'%s' is not a backend (docker or swarm)", s);
    if ((rc = set_str(v, &c->backend, s))) return rc;
  }
  return parse_swarm(v, config_map_get(map, "swarm"), c);
}

/* audit: where the trail goes (docs/audit.md). Not a sandbox setting. */
static int parse_audit(vctx *v, const cfg_ynode *map, sm_config *c) {
  int rc = check_map(v, map, "audit", audit_keys);
  if (rc || config_ynode_is_null(map)) return rc;
  const cfg_ynode *n;
  const char *s = NULL;
  int b = 0;
  if ((n = config_map_get(map, "enabled")) && !config_ynode_is_null(n)) {
    if ((rc = get_bool(v, n, "audit.enabled", &b))) return rc;
    c->audit_enabled = b;
  }
  if ((n = config_map_get(map, "stderr")) && !config_ynode_is_null(n)) {
    if ((rc = get_bool(v, n, "audit.stderr", &b))) return rc;
    c->audit_stderr = b;
  }
  if ((n = config_map_get(map, "file")) && !config_ynode_is_null(n)) {
    if ((rc = get_string(v, n, "audit.file", &s))) return rc;
    if (n->len > 0 && s[0] != '/')
      return config_verr(v, n, "audit.file", "'%s' is not an absolute path (or \"\" for no file)",
                         s);
    if ((rc = set_str(v, &c->audit_file, s))) return rc;
  }
  if ((n = config_map_get(map, "max_size")) && !config_ynode_is_null(n)) {
    int64_t sz = 0;
    sm_error perr = SM_ERROR_INIT;
    if (n->type != CFG_Y_SCALAR || sm_parse_size(n->str, &sz, &perr) != 0 || sz < 4096)
      return config_verr(v, n, "audit.max_size",
                         "expected a size of at least 4k (e.g. 10m), got %s",
                         n->type == CFG_Y_SCALAR ? n->str : describe(n));
    c->audit_max_bytes = sz;
  }
  if ((n = config_map_get(map, "keep")) && !config_ynode_is_null(n)) {
    int64_t k = 0;
    sm_error perr = SM_ERROR_INIT;
    if (n->type != CFG_Y_SCALAR || sm_parse_int(n->str, 0, SM_AUDIT_MAX_KEEP, &k, &perr) != 0)
      return config_verr(v, n, "audit.keep", "expected a whole number from 0 to %d, got %s",
                         SM_AUDIT_MAX_KEEP, n->type == CFG_Y_SCALAR ? n->str : describe(n));
    c->audit_keep = (int)k;
  }
  return 0;
}

static int whole_number(vctx *v, const cfg_ynode *n, const char *path, int64_t min, int64_t max, int *out) {
  int64_t i = 0;
  sm_error perr = SM_ERROR_INIT;
  if (n->type != CFG_Y_SCALAR || sm_parse_int(n->str, min, max, &i, &perr) != 0)
    return config_verr(v, n, path, "expected a whole number from %lld to %lld, got %s",
                       (long long)min, (long long)max,
                       n->type == CFG_Y_SCALAR ? n->str : describe(n));
  *out = (int)i;
  return 0;
}

static int seconds(vctx *v, const cfg_ynode *n, const char *path, int max, int *out) {
  double d = 0;
  sm_error perr = SM_ERROR_INIT;
  if (n->type != CFG_Y_SCALAR || sm_parse_duration(n->str, &d, &perr) != 0 || d < 1 || d > max)
    return config_verr(v, n, path, "expected a duration from 1s to %ds (e.g. 30s, 5m), got %s", max,
                       n->type == CFG_Y_SCALAR ? n->str : describe(n));
  *out = (int)d;
  return 0;
}

/* egress_proxy: the instance's egress proxy (docs/network.md). */
static int parse_egress_proxy(vctx *v, const cfg_ynode *map, sm_config *c) {
  int rc = check_map(v, map, "egress_proxy", egress_proxy_keys);
  if (rc || config_ynode_is_null(map)) return rc;
  const cfg_ynode *n;
  const char *s = NULL;
  if ((n = config_map_get(map, "network")) && !config_ynode_is_null(n)) {
    if ((rc = get_string(v, n, "egress_proxy.network", &s))) return rc;
    if (n->len == 0 || n->len > 128 || !valid_chars(s, "_.-"))
      return config_verr(v, n, "egress_proxy.network", "'%s' is not a network name", s);
    if ((rc = set_str(v, &c->egress_network, s))) return rc;
  }
  if ((n = config_map_get(map, "hosts")) && !config_ynode_is_null(n)) {
    if ((rc = check_map(v, n, "egress_proxy.hosts", NULL))) return rc;
    for (size_t i = 0; i < config_map_size(n); i++) {
      const cfg_ynode *k = config_map_key(n, i), *val = config_map_value(n, i);
      char p[600], entry[600];
      snprintf(p, sizeof p, "egress_proxy.hosts.%s", k->str);
      sm_error perr = SM_ERROR_INIT;
      if (k->str[0] == '*' || sm_egress_pattern_check(k->str, &perr) != 0 || strchr(k->str, ':') ||
          strchr(k->str, '/'))
        return config_verr(v, k, p, "'%s' is not a host name", k->str);
      if (val->type != CFG_Y_SCALAR || config_ynode_is_null(val) ||
          sm_egress_address_check(val->str) != 0)
        return config_verr(v, val ? val : k, p, "expected an IP address, got %s",
                           val && val->type == CFG_Y_SCALAR ? val->str : describe(val));
      snprintf(entry, sizeof entry, "%s=%s", k->str, val->str);
      if ((rc = list_push(v, &c->egress_hosts, entry))) return rc;
    }
  }
  if ((n = config_map_get(map, "max_connections")) && !config_ynode_is_null(n) &&
      (rc = whole_number(v, n, "egress_proxy.max_connections", 1, 100000,
                         &c->egress_max_connections)))
    return rc;
  if ((n = config_map_get(map, "max_per_sandbox")) && !config_ynode_is_null(n) &&
      (rc = whole_number(v, n, "egress_proxy.max_per_sandbox", 1, 100000,
                         &c->egress_max_per_sandbox)))
    return rc;
  if ((n = config_map_get(map, "idle_timeout")) && !config_ynode_is_null(n) &&
      (rc = seconds(v, n, "egress_proxy.idle_timeout", 86400, &c->egress_idle_timeout)))
    return rc;
  if ((n = config_map_get(map, "connect_timeout")) && !config_ynode_is_null(n) &&
      (rc = seconds(v, n, "egress_proxy.connect_timeout", 600, &c->egress_connect_timeout)))
    return rc;
  return 0;
}

static int parse_agents(vctx *v, const cfg_ynode *map, sm_config *c) {
  int rc = check_map(v, map, "agents", NULL);
  if (rc || config_ynode_is_null(map)) return rc;
  size_t n = config_map_size(map);
  if (n > CFG_MAX_AGENTS)
    return config_verr(v, map, "agents", "more than %d agents", CFG_MAX_AGENTS);
  c->agents = calloc(n ? n : 1, sizeof *c->agents);
  if (!c->agents) return sm_error_set(v->err, SM_ENOMEM, "out of memory reading %s", v->file);
  for (size_t i = 0; i < n; i++) {
    const cfg_ynode *k = config_map_key(map, i);
    char p[512];
    join(p, sizeof p, "agents", k->str);
    if (!config_valid_name(k->str))
      return config_verr(v, k, p,
                         "agent names may only hold letters, digits, '.', '_' and '-' (up to 63, "
                         "starting with a letter or digit)");
    cfg_agent *a = &c->agents[c->n_agents++];
    if ((rc = set_str(v, &a->name, k->str))) return rc;
    if ((rc = parse_layer(v, config_map_value(map, i), p, 1, &a->layer))) return rc;
  }
  return 0;
}

static int parse_tools(vctx *v, const cfg_ynode *map, sm_config *c) {
  int rc = check_map(v, map, "tools", NULL);
  if (rc || config_ynode_is_null(map)) return rc;
  size_t n = config_map_size(map);
  if (n > CFG_MAX_TOOLS) return config_verr(v, map, "tools", "more than %d tools", CFG_MAX_TOOLS);
  c->tools = calloc(n ? n : 1, sizeof *c->tools);
  if (!c->tools) return sm_error_set(v->err, SM_ENOMEM, "out of memory reading %s", v->file);
  for (size_t i = 0; i < n; i++) {
    const cfg_ynode *k = config_map_key(map, i), *body = config_map_value(map, i);
    char p[512], q[600];
    join(p, sizeof p, "tools", k->str);
    if (strcmp(k->str, "allow") == 0 || strcmp(k->str, "deny") == 0)
      return config_verr(v, k, p,
                         "tool policy lives under defaults (did you mean 'defaults.tools.%s'?)",
                         k->str);
    if (!config_valid_name(k->str))
      return config_verr(v, k, p, "tool names may only hold letters, digits, '.', '_' and '-'");
    if ((rc = check_map(v, body, p, tool_keys))) return rc;
    cfg_tool *t = &c->tools[c->n_tools++];
    if ((rc = set_str(v, &t->name, k->str))) return rc;
    const cfg_ynode *argv = config_map_get(body, "argv");
    snprintf(q, sizeof q, "%s.argv", p);
    if (config_ynode_is_null(argv))
      return config_verr(v, config_ynode_is_null(body) ? k : body, q,
                         "missing (a list such as [\"sh\", \"-c\", \"{command}\"])");
    if (argv->type != CFG_Y_SEQ)
      return config_verr(v, argv, q, "expected a list of arguments, got %s", describe(argv));
    if (argv->n == 0) return config_verr(v, argv, q, "empty list");
    if (argv->n >= SM_CONFIG_MAX_ARGV)
      return config_verr(v, argv, q, "more than %d arguments", SM_CONFIG_MAX_ARGV - 1);
    t->argv = calloc(argv->n + 1, sizeof *t->argv);
    if (!t->argv) return sm_error_set(v->err, SM_ENOMEM, "out of memory reading %s", v->file);
    for (size_t j = 0; j < argv->n; j++) {
      const cfg_ynode *it = argv->kids[j];
      char ip[640];
      snprintf(ip, sizeof ip, "%s[%zu]", q, j);
      if (it->type != CFG_Y_SCALAR || config_ynode_is_null(it))
        return config_verr(v, it, ip, "expected a string, got %s", describe(it));
      if (j == 0 && it->len == 0) return config_verr(v, it, ip, "the command is empty");
      if (!(t->argv[j] = strdup(it->str)))
        return sm_error_set(v->err, SM_ENOMEM, "out of memory reading %s", v->file);
      t->argc++;
    }
    const cfg_ynode *d = config_map_get(body, "description");
    if (d && !config_ynode_is_null(d)) {
      const char *s = NULL;
      snprintf(q, sizeof q, "%s.description", p);
      if ((rc = get_string(v, d, q, &s)) || (rc = set_str(v, &t->description, s))) return rc;
    }
  }
  return 0;
}

/* workers: what a worker token may do beyond its own calls (the runner's;
 * docs/configuration.md#workers). */
static int parse_workers(vctx *v, const cfg_ynode *map, sm_config *c) {
  int rc = check_map(v, map, "workers", NULL);
  if (rc || config_ynode_is_null(map)) return rc;
  size_t n = config_map_size(map);
  if (n > CFG_MAX_WORKERS)
    return config_verr(v, map, "workers", "more than %d workers", CFG_MAX_WORKERS);
  c->workers = calloc(n ? n : 1, sizeof *c->workers);
  if (!c->workers) return sm_error_set(v->err, SM_ENOMEM, "out of memory reading %s", v->file);
  for (size_t i = 0; i < n; i++) {
    const cfg_ynode *k = config_map_key(map, i), *body = config_map_value(map, i);
    char p[512], q[600];
    join(p, sizeof p, "workers", k->str);
    if (strcmp(k->str, "*") != 0 && !runner_name(k->str, CFG_WORKER_KEY_MAX))
      return config_verr(
          v, k, p,
          "a worker key is 1 to %d letters, digits and _ . : @ + = - (not starting with "
          "- or .), or \"*\" for every worker",
          CFG_WORKER_KEY_MAX);
    if ((rc = check_map(v, body, p, worker_keys))) return rc;
    cfg_worker *w = &c->workers[c->n_workers++];
    if ((rc = set_str(v, &w->key, k->str))) return rc;
    const cfg_ynode *svc = config_ynode_is_null(body) ? NULL : config_map_get(body, "services");
    int set = 0;
    snprintf(q, sizeof q, "%s.services", p);
    if (svc && (rc = get_list(v, svc, q, LIST_SERVICES, &set, &w->services))) return rc;
    const cfg_ynode *tpl = config_ynode_is_null(body) ? NULL : config_map_get(body, "templates");
    snprintf(q, sizeof q, "%s.templates", p);
    if (tpl && (rc = get_list(v, tpl, q, LIST_TEMPLATES, &w->templates.set, &w->templates.list)))
      return rc;
  }
  return 0;
}

/* defaults.pool_size: ready per_tool containers a runner keeps per
 * configuration (0 turns the warm pool off). Not a sandbox setting: it is
 * the runner's, so it is kept apart from the layers. */
static int parse_pool_size(vctx *v, const cfg_ynode *defaults, sm_config *c) {
  const cfg_ynode *n =
      defaults && defaults->type == CFG_Y_MAP ? config_map_get(defaults, "pool_size") : NULL;
  if (n == NULL || config_ynode_is_null(n)) return 0;
  if (n->type != CFG_Y_SCALAR)
    return config_verr(v, n, "defaults.pool_size", "expected a whole number from 0 to %d, got %s",
                       SM_POOL_MAX_SIZE, describe(n));
  int64_t i = 0;
  sm_error perr = SM_ERROR_INIT;
  if (sm_parse_int(n->str, 0, SM_POOL_MAX_SIZE, &i, &perr))
    return config_verr(v, n, "defaults.pool_size", "%s", perr.message);
  c->pool_size = (int)i;
  return 0;
}

static void value_free(cfg_value *val) {
  free(val->str);
  list_free(&val->list);
  memset(val, 0, sizeof *val);
}

/* ---- templates: and limits: (docs/configuration.md#templates); every name a
 * templates list gives must be a template of the file ---- */

static const char *const template_keys[] = {"image",   "network", "runtime", "cpu",
                                            "memory",  "pids",    "disk",    "timeout",
                                            "idle_timeout", "description", NULL};
static const cfg_setting template_settings[] = {CS_IMAGE,  CS_NETWORK, CS_RUNTIME, CS_CPU,
                                                CS_MEMORY, CS_PIDS,    CS_DISK,    CS_TIMEOUT,
                                                CS_IDLE_TIMEOUT};
static const char *const limits_keys[] = {"cpu_max", "memory_max", "pids_max", "disk_max",
                                          "timeout_max", "idle_timeout_max", NULL};

static const cfg_template *template_named(const sm_config *c, const char *name) {
  for (size_t i = 0; c && name && i < c->n_templates; i++)
    if (strcmp(c->templates[i].name, name) == 0) return &c->templates[i];
  return NULL;
}

static int parse_template(vctx *v, const cfg_ynode *key, const cfg_ynode *body,
                          cfg_template *t) {
  char p[512], q[600];
  snprintf(p, sizeof p, "templates.%s", key->str);
  if (!config_valid_name(key->str))
    return config_verr(v, key, p,
                       "template names may only hold letters, digits, '.', '_' and '-' (up to 63, "
                       "starting with a letter or digit)");
  int rc = check_map(v, body, p, template_keys);
  if (rc) return rc;
  if (!(t->name = strdup(key->str))) return sm_error_set(v->err, SM_ENOMEM, NULL);
  if (config_ynode_is_null(body)) return 0;
  for (size_t i = 0; i < sizeof template_settings / sizeof template_settings[0]; i++) {
    cfg_setting id = template_settings[i];
    const cfg_ynode *n = config_map_get(body, cfg_settings[id].name);
    snprintf(q, sizeof q, "%s.%s", p, cfg_settings[id].name);
    if (n && (rc = parse_setting(v, n, q, id, &t->v[id]))) return rc;
  }
  const cfg_ynode *d = config_map_get(body, "description");
  if (d && !config_ynode_is_null(d)) {
    snprintf(q, sizeof q, "%s.description", p);
    if (d->type != CFG_Y_SCALAR) return config_verr(v, d, q, "expected a string");
    if (!(t->description = strdup(d->str))) return sm_error_set(v->err, SM_ENOMEM, NULL);
  }
  return 0;
}

static int parse_templates(vctx *v, const cfg_ynode *map, sm_config *c) {
  int rc = check_map(v, map, "templates", NULL);
  if (rc || config_ynode_is_null(map)) return rc;
  size_t n = config_map_size(map);
  if (n > CFG_MAX_TEMPLATES)
    return config_verr(v, map, "templates", "more than %d templates", CFG_MAX_TEMPLATES);
  c->templates = calloc(n ? n : 1, sizeof *c->templates);
  if (!c->templates) return sm_error_set(v->err, SM_ENOMEM, NULL);
  for (size_t i = 0; i < n; i++) {
    rc = parse_template(v, config_map_key(map, i), config_map_value(map, i),
                        &c->templates[c->n_templates++]);
    if (rc) return rc;
  }
  return 0;
}

/* One limits key: the same kind as the setting it bounds. */
static int parse_limit(vctx *v, const cfg_ynode *map, const char *key, cfg_setting id,
                       cfg_value *out) {
  const cfg_ynode *n = config_map_get(map, key);
  char p[64];
  snprintf(p, sizeof p, "limits.%s", key);
  return n ? parse_setting(v, n, p, id, out) : 0;
}

static int parse_limits(vctx *v, const cfg_ynode *map, sm_config *c) {
  int rc = check_map(v, map, "limits", limits_keys);
  if (rc || config_ynode_is_null(map)) return rc;
  cfg_value val[6];
  memset(val, 0, sizeof val);
  if ((rc = parse_limit(v, map, "cpu_max", CS_CPU, &val[0])) == 0 &&
      (rc = parse_limit(v, map, "memory_max", CS_MEMORY, &val[1])) == 0 &&
      (rc = parse_limit(v, map, "pids_max", CS_PIDS, &val[2])) == 0 &&
      (rc = parse_limit(v, map, "disk_max", CS_DISK, &val[3])) == 0 &&
      (rc = parse_limit(v, map, "timeout_max", CS_TIMEOUT, &val[4])) == 0)
    rc = parse_limit(v, map, "idle_timeout_max", CS_IDLE_TIMEOUT, &val[5]);
  c->limits.cpu_max = val[0].d;
  c->limits.memory_max = val[1].i;
  c->limits.pids_max = val[2].i;
  c->limits.disk_max = val[3].i;
  c->limits.timeout_max = val[4].d;
  c->limits.idle_timeout_max = val[5].d;
  return rc;
}

/* Every name of a templates list under node (a layer, or a worker entry)
 * is a template of the file. */
static int check_names(vctx *v, const sm_config *c, const cfg_ynode *entry, const char *path) {
  const cfg_ynode *list =
      entry && entry->type == CFG_Y_MAP ? config_map_get(entry, "templates") : NULL;
  if (list == NULL || list->type != CFG_Y_SEQ) return 0;
  for (size_t i = 0; i < list->n; i++) {
    const char *name = list->kids[i]->str;
    if (template_named(c, name)) continue;
    char p[600];
    snprintf(p, sizeof p, "%s.templates[%zu]", path, i);
    const char *near = NULL;
    for (size_t t = 0; t < c->n_templates; t++)
      if (sm_edit_distance(name, c->templates[t].name) <= 2) near = c->templates[t].name;
    if (near)
      return config_verr(v, list->kids[i], p,
                         "'%s' is not a template of this file (did you mean '%s'?)", name, near);
    return config_verr(v, list->kids[i], p, "'%s' is not a template of this file (templates.%s)",
                       name, name);
  }
  return 0;
}

static int check_lists(vctx *v, const cfg_ynode *root, const sm_config *c) {
  int rc = check_names(v, c, config_map_get(root, "defaults"), "defaults");
  const char *sections[] = {"agents", "workers"};
  for (size_t s = 0; rc == 0 && s < 2; s++) {
    const cfg_ynode *map = config_map_get(root, sections[s]);
    for (size_t i = 0; rc == 0 && map && map->type == CFG_Y_MAP && i < config_map_size(map); i++) {
      char p[512];
      snprintf(p, sizeof p, "%s.%s", sections[s], config_map_key(map, i)->str);
      rc = check_names(v, c, config_map_value(map, i), p);
    }
  }
  return rc;
}

static int parse_templates_limits(vctx *v, const cfg_ynode *root, sm_config *c) {
  int rc = parse_templates(v, config_map_get(root, "templates"), c);
  if (rc == 0) rc = parse_limits(v, config_map_get(root, "limits"), c);
  if (rc == 0) rc = check_lists(v, root, c);
  return rc;
}

static void templates_free(sm_config *c) {
  for (size_t i = 0; i < c->n_templates; i++) {
    for (int j = 0; j < CS_COUNT; j++) value_free(&c->templates[i].v[j]);
    free(c->templates[i].name);
    free(c->templates[i].description);
  }
  free(c->templates);
  c->templates = NULL;
  c->n_templates = 0;
}

static int parse_root(vctx *v, const cfg_ynode *root, sm_config *c) {
  if (config_ynode_is_null(root)) return 0;
  if (root->type != CFG_Y_MAP)
    return config_verr(v, root, "",
                       "expected a mapping of keys (version, project, engine, defaults, agents, "
                       "tools, workers, audit, egress_proxy), got %s",
                       describe(root));
  int rc = check_map(v, root, "", top_keys);
  if (rc) return rc;
  const cfg_ynode *n = config_map_get(root, "version");
  if (n && !config_ynode_is_null(n)) {
    if (n->type != CFG_Y_SCALAR || strcmp(n->str, "1") != 0)
      return config_verr(v, n, "version",
                         "unsupported version %s%s%s (this sandman reads version 1)",
                         n->type == CFG_Y_SCALAR ? "'" : "",
                         n->type == CFG_Y_SCALAR ? n->str : describe(n),
                         n->type == CFG_Y_SCALAR ? "'" : "");
  }
  if ((rc = parse_project(v, config_map_get(root, "project"), c))) return rc;
  if ((rc = parse_engine(v, config_map_get(root, "engine"), c))) return rc;
  if ((rc = parse_audit(v, config_map_get(root, "audit"), c))) return rc;
  if ((rc = parse_egress_proxy(v, config_map_get(root, "egress_proxy"), c))) return rc;
  if ((rc = parse_layer(v, config_map_get(root, "defaults"), "defaults", 0, &c->defaults)))
    return rc;
  if ((rc = parse_pool_size(v, config_map_get(root, "defaults"), c))) return rc;
  if ((rc = parse_agents(v, config_map_get(root, "agents"), c))) return rc;
  if ((rc = parse_workers(v, config_map_get(root, "workers"), c))) return rc;
  if ((rc = config_broker_parse(v, root, c))) return rc;
  if ((rc = config_lifecycle_parse(v, root, c))) return rc;
  if ((rc = parse_templates_limits(v, root, c))) return rc;
  return parse_tools(v, config_map_get(root, "tools"), c);
}

static sm_config *config_new(void) {
  sm_config *c = calloc(1, sizeof *c);
  if (c) {
    c->version = 1;
    c->tls_verify = -1;
    c->pool_size = -1;
    c->audit_enabled = -1;
    c->audit_stderr = -1;
    c->audit_keep = -1;
  }
  return c;
}

void sm_config_free(sm_config *cfg) {
  if (!cfg) return;
  free(cfg->path);
  free(cfg->project_id);
  free(cfg->project_env);
  free(cfg->engine_host);
  free(cfg->cert_path);
  free(cfg->audit_file);
  free(cfg->backend);
  free(cfg->swarm_node_certs);
  list_free(&cfg->swarm_constraints);
  free(cfg->egress_network);
  list_free(&cfg->egress_hosts);
  layer_free(&cfg->defaults);
  for (size_t i = 0; i < cfg->n_agents; i++) {
    free(cfg->agents[i].name);
    layer_free(&cfg->agents[i].layer);
  }
  free(cfg->agents);
  for (size_t i = 0; i < cfg->n_tools; i++) {
    free(cfg->tools[i].name);
    for (size_t j = 0; j < cfg->tools[i].argc; j++) free(cfg->tools[i].argv[j]);
    free(cfg->tools[i].argv);
    free(cfg->tools[i].description);
  }
  free(cfg->tools);
  for (size_t i = 0; i < cfg->n_workers; i++) {
    free(cfg->workers[i].key);
    list_free(&cfg->workers[i].services);
    list_free(&cfg->workers[i].templates.list);
  }
  templates_free(cfg);
  free(cfg->workers);
  json_object_put(cfg->broker);
  free(cfg);
}

int sm_config_load_string(sm_config **out, const char *name, const char *text, size_t len,
                          sm_error *err) {
  *out = NULL;
  if (name == NULL) name = "(string)";
  cfg_ynode *root = NULL;
  int rc = config_yaml_parse(&root, name, text ? text : "", text ? len : 0, err);
  if (rc) return rc;
  sm_config *c = config_new();
  if (!c) {
    config_ynode_free(root);
    return sm_error_set(err, SM_ENOMEM, "out of memory reading %s", name);
  }
  vctx v = {name, err};
  rc = parse_root(&v, root, c);
  config_ynode_free(root);
  if (rc == 0 && !(c->path = strdup(name)))
    rc = sm_error_set(err, SM_ENOMEM, "out of memory reading %s", name);
  if (rc) {
    sm_config_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

/* Reads a whole file under the size cap. */
static int read_file(const char *path, char **out, size_t *out_len, sm_error *err) {
  cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return sm_error_set_errno(err, SM_ECONFIG, errno, "%s: cannot open", path);
  struct stat st;
  if (fstat(fd, &st) != 0)
    return sm_error_set_errno(err, SM_ECONFIG, errno, "%s", path);
  if (!S_ISREG(st.st_mode)) return sm_error_set(err, SM_ECONFIG, "%s: not a regular file", path);
  if ((uint64_t)st.st_size > CFG_MAX_BYTES)
    return sm_error_set(err, SM_ECONFIG, "%s: larger than %u bytes", path, CFG_MAX_BYTES);
  cleanup_free char *buf = malloc((size_t)st.st_size + 1);
  if (!buf) return sm_error_set(err, SM_ENOMEM, "out of memory reading %s", path);
  size_t got = 0;
  while (got <= CFG_MAX_BYTES) {
    size_t want = (size_t)st.st_size + 1 - got;
    if (want == 0) break;
    ssize_t r = read(fd, buf + got, want);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      return sm_error_set_errno(err, SM_ECONFIG, errno, "%s", path);
    if (r == 0) break;
    got += (size_t)r;
  }
  if (got > (size_t)st.st_size)
    return sm_error_set(err, SM_ECONFIG, "%s: changed while being read", path);
  buf[got] = '\0';
  *out = steal_pointer(&buf);
  *out_len = got;
  return 0;
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

int sm_config_load(sm_config **out, const char *path, sm_error *err) {
  *out = NULL;
  char found[4096];
  const char *env = getenv("SANDMAN_CONFIG");
  if (path == NULL && env && *env) path = env; /* named explicitly: must exist */
  if (path == NULL) {
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (exists("sandman.yaml")) {
      path = "sandman.yaml";
    } else {
      found[0] = '\0';
      if (xdg && *xdg) snprintf(found, sizeof found, "%s/sandman/config.yaml", xdg);
      else if (home && *home) snprintf(found, sizeof found, "%s/.config/sandman/config.yaml", home);
      if (found[0] && exists(found)) path = found;
    }
  }
  if (path == NULL) {
    sm_config *c = config_new();
    if (!c) return sm_error_set(err, SM_ENOMEM, "out of memory");
    *out = c;
    return 0;
  }
  cleanup_free char *text = NULL;
  size_t len = 0;
  int rc = read_file(path, &text, &len, err);
  if (rc) return rc;
  return sm_config_load_string(out, path, text, len, err);
}

const char *sm_config_path(const sm_config *cfg) { return cfg ? cfg->path : NULL; }
const char *sm_config_project_id(const sm_config *cfg) { return cfg ? cfg->project_id : NULL; }
const char *sm_config_project_environment(const sm_config *cfg) {
  return cfg ? cfg->project_env : NULL;
}
const char *sm_config_engine_host(const sm_config *cfg) { return cfg ? cfg->engine_host : NULL; }
int sm_config_engine_tls_verify(const sm_config *cfg) { return cfg ? cfg->tls_verify : -1; }
int sm_config_pool_size(const sm_config *cfg) { return cfg ? cfg->pool_size : -1; }

void sm_config_audit_get(const sm_config *cfg, sm_config_audit *out) {
  out->enabled = cfg ? cfg->audit_enabled : -1;
  out->file = cfg ? cfg->audit_file : NULL;
  out->to_stderr = cfg ? cfg->audit_stderr : -1;
  out->max_bytes = cfg ? cfg->audit_max_bytes : 0;
  out->keep = cfg ? cfg->audit_keep : -1;
}

const char *sm_config_engine_backend(const sm_config *cfg) { return cfg ? cfg->backend : NULL; }

void sm_config_swarm(const sm_config *cfg, sm_swarm_options *out) {
  sm_swarm_options none = {NULL, 0, NULL, 0, 0, 0};
  *out = none;
  if (cfg == NULL) return;
  out->node_certs = cfg->swarm_node_certs;
  out->node_port = cfg->swarm_node_port;
  out->constraints = (const char *const *)cfg->swarm_constraints.items;
  out->n_constraints = cfg->swarm_constraints.n;
  out->reserve_cpu = cfg->swarm_reserve_cpu;
  out->reserve_memory = cfg->swarm_reserve_memory;
}

const char *sm_config_engine_cert_path(const sm_config *cfg) {
  return cfg ? cfg->cert_path : NULL;
}

const cfg_agent *config_find_agent(const sm_config *cfg, const char *name) {
  for (size_t i = 0; cfg && name && i < cfg->n_agents; i++)
    if (strcmp(cfg->agents[i].name, name) == 0) return &cfg->agents[i];
  return NULL;
}

int sm_config_has_agent(const sm_config *cfg, const char *agent) {
  return config_find_agent(cfg, agent) != NULL;
}

const char *sm_config_agent_nearest(const sm_config *cfg, const char *agent) {
  if (cfg == NULL || agent == NULL || config_find_agent(cfg, agent)) return NULL;
  const char *best = NULL;
  size_t best_d = (size_t)-1;
  for (size_t i = 0; i < cfg->n_agents; i++) {
    size_t d = sm_edit_distance(agent, cfg->agents[i].name);
    if (d < best_d) {
      best_d = d;
      best = cfg->agents[i].name;
    }
  }
  /* As for unknown keys: a short name tolerates one edit, longer ones more. */
  size_t lim = best ? (strlen(best) <= 4 ? 1 : strlen(best) <= 8 ? 2 : 3) : 0;
  return best && best_d <= lim ? best : NULL;
}

int sm_config_worker_services(const sm_config *cfg, const char *worker_key, sm_string_list *out) {
  memset(out, 0, sizeof *out);
  if (cfg == NULL || worker_key == NULL) return 0;
  for (size_t i = 0; i < cfg->n_workers; i++) {
    const cfg_worker *w = &cfg->workers[i];
    if (strcmp(w->key, worker_key) != 0 && strcmp(w->key, "*") != 0) continue;
    for (size_t j = 0; j < w->services.n; j++) {
      int seen = 0;
      for (size_t k = 0; k < out->n && !seen; k++) seen = strcmp(out->items[k], w->services.items[j]) == 0;
      if (!seen && sm_string_list_add(out, w->services.items[j], NULL) != 0) break;
    }
  }
  return (int)out->n;
}

int sm_config_worker_may_lease(const sm_config *cfg, const char *worker_key, const char *service) {
  if (cfg == NULL || worker_key == NULL || service == NULL) return 0;
  for (size_t i = 0; i < cfg->n_workers; i++) {
    const cfg_worker *w = &cfg->workers[i];
    if (strcmp(w->key, worker_key) != 0 && strcmp(w->key, "*") != 0) continue;
    for (size_t j = 0; j < w->services.n; j++)
      if (strcmp(w->services.items[j], service) == 0) return 1;
  }
  return 0;
}
