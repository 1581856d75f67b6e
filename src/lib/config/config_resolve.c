/* Resolving one call: precedence with sources, tool policy, where the tool
 * runs, and the scope key.
 *
 *   settings:  flag > agents.<a> > defaults > project environment > built-in
 *   policy:    defaults.tools, then agents.<a>.tools, then the sandbox's own
 *              list (worker_tools) when the call is sandboxed; each level can
 *              only narrow, a deny anywhere wins
 *   placement: host_tools > sandbox_tools.always > sandbox_tools.never >
 *              mode none > worker_tools (set, or the built-in list) */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sandman/util.h>
#include <sandman/name.h>

#include "common/unconst.h"
#include "config/config_internal.h"

/* A call without a tool name is a plain command: it is checked as "exec". */
#define CFG_DEFAULT_TOOL "exec"

const char *sm_setting_source_name(sm_setting_source s) {
  switch (s) {
    case SM_SOURCE_BUILT_IN: return "built_in";
    case SM_SOURCE_PROJECT_ENVIRONMENT: return "project_environment";
    case SM_SOURCE_DEFAULTS: return "defaults";
    case SM_SOURCE_AGENT: return "agent";
    case SM_SOURCE_FLAG: return "flag";
  }
  return "built_in";
}

static void set_source(sm_resolved *out, const char *name, sm_setting_source src) {
  for (size_t i = 0; i < out->n_sources; i++) {
    if (strcmp(out->sources[i].name, name) == 0) {
      out->sources[i].source = src;
      return;
    }
  }
  if (out->n_sources >= SM_CONFIG_MAX_SETTINGS) return;
  snprintf(out->sources[out->n_sources].name, sizeof out->sources[0].name, "%s", name);
  out->sources[out->n_sources].source = src;
  out->n_sources++;
}

static const char *flag_value(const sm_config_flags *f, cfg_setting id) {
  if (!f) return NULL;
  switch (id) {
    case CS_MODE: return f->mode;
    case CS_IMAGE: return f->image;
    case CS_NETWORK: return f->network;
    case CS_RUNTIME: return f->runtime;
    case CS_USER: return f->user;
    case CS_CPU: return f->cpu;
    case CS_MEMORY: return f->memory;
    case CS_PIDS: return f->pids;
    case CS_DISK: return f->disk;
    case CS_TMPFS: return f->tmpfs;
    case CS_TIMEOUT: return f->timeout;
    case CS_COPY_ENV_FILES: return f->copy_env_files;
    default: return NULL;
  }
}

/* Parses a flag's text with the same rules as the file. */
static int parse_flag(cfg_setting id, const char *s, cfg_value *v, sm_error *err) {
  const char *flag = cfg_settings[id].flag ? cfg_settings[id].flag : "--user";
  sm_error perr = SM_ERROR_INIT;
  memset(v, 0, sizeof *v);
  v->set = 1;
  sm_mode mode;
  switch (cfg_settings[id].kind) {
    case CK_MODE:
      if (sm_mode_parse(s, &mode, NULL) == 0) return v->i = (int64_t)mode, 0;
      return sm_error_set(err, SM_EINVAL, "%s: '%s' is not one of none, per_tool, per_run, per_worker",
                          flag, s);
    case CK_NETWORK:
      if (strcmp(s, "none") && strcmp(s, "bridge") && strcmp(s, "allowlist"))
        return sm_error_set(err, SM_EINVAL, "%s: '%s' is not one of none, bridge, allowlist", flag,
                            s);
      v->str = SM_UNCONST(s);
      return 0;
    case CK_IMAGE:
    case CK_RUNTIME:
    case CK_USER:
      if (strlen(s) >= (cfg_settings[id].kind == CK_IMAGE ? SM_NAME_MAX : 64) ||
          (cfg_settings[id].kind != CK_RUNTIME && *s == '\0'))
        return sm_error_set(err, SM_EINVAL, "%s: '%s' is empty or too long", flag, s);
      for (const char *p = s; *p; p++)
        if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p))
          return sm_error_set(err, SM_EINVAL, "%s: '%s' holds spaces or control characters",
                              flag, s);
      v->str = SM_UNCONST(s);
      return 0;
    case CK_CPU:
      if (sm_parse_double(s, 0, 1024, &v->d, &perr))
        return sm_error_set(err, SM_EINVAL, "%s: %s", flag, perr.message);
      return 0;
    case CK_COUNT:
      if (sm_parse_int(s, 1, 4194304, &v->i, &perr))
        return sm_error_set(err, SM_EINVAL, "%s: %s", flag, perr.message);
      return 0;
    case CK_SIZE:
      if (sm_parse_size(s, &v->i, &perr))
        return sm_error_set(err, SM_EINVAL, "%s: %s", flag, perr.message);
      if (id == CS_MEMORY && v->i < (6 << 20))
        return sm_error_set(err, SM_EINVAL, "%s: '%s' is below the engine's minimum of 6m", flag, s);
      if (v->i == 0 && id != CS_MEMORY)
        return sm_error_set(err, SM_EINVAL, "%s: must be more than 0", flag);
      return 0;
    case CK_DURATION:
      if (sm_parse_duration(s, &v->d, &perr))
        return sm_error_set(err, SM_EINVAL, "%s: %s", flag, perr.message);
      if (id == CS_TIMEOUT && v->d <= 0)
        return sm_error_set(err, SM_EINVAL, "%s: must be more than 0s", flag);
      return 0;
    case CK_BOOL:
      v->i = strcmp(s, "false") != 0 && strcmp(s, "0") != 0;
      return 0;
    default: return 0;
  }
}

static int list_add_unique(sm_string_list *l, const char *s, const char *name, sm_error *err) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->items[i], s) == 0) return 0;
  if (l->n >= SM_LIST_MAX)
    return sm_error_set(err, SM_ECONFIG, "%s: more than %d entries after merging", name,
                        SM_LIST_MAX);
  snprintf(l->items[l->n++], SM_NAME_MAX, "%s", s);
  return 0;
}

static sm_string_list *list_field(sm_sandbox_settings *s, cfg_setting id) {
  return id == CS_EXCLUDES ? &s->excludes : id == CS_PROTECT ? &s->protect : &s->env_passthrough;
}

static const sm_string_list *flag_list(const sm_config_flags *f, cfg_setting id) {
  if (f == NULL) return NULL;
  return id == CS_EXCLUDES ? &f->excludes : id == CS_PROTECT ? &f->protect : &f->env_passthrough;
}


/* Stores one scalar value into the settings. */
static void apply_value(sm_sandbox_settings *s, cfg_setting id, const cfg_value *v) {
  switch (id) {
    case CS_MODE: s->mode = (sm_mode)v->i; break;
    case CS_IMAGE: snprintf(s->image, sizeof s->image, "%s", v->str); break;
    case CS_NETWORK: snprintf(s->network, sizeof s->network, "%s", v->str); break;
    case CS_RUNTIME: snprintf(s->runtime, sizeof s->runtime, "%s", v->str); break;
    case CS_USER: snprintf(s->user, sizeof s->user, "%s", v->str); break;
    case CS_CPU: s->cpu = v->d; break;
    case CS_MEMORY: s->memory = v->i; break;
    case CS_PIDS: s->pids = v->i; break;
    case CS_DISK: s->disk = v->i; break;
    case CS_TMPFS: s->tmpfs = v->i; break;
    case CS_READ_ONLY_ROOT: s->read_only_root = (int)v->i; break;
    case CS_TIMEOUT: s->timeout_s = v->d; break;
    case CS_STDOUT_CAP: s->stdout_cap = v->i; break;
    case CS_STDERR_CAP: s->stderr_cap = v->i; break;
    case CS_IDLE_TIMEOUT: s->idle_timeout_s = v->d; break;
    default: break;
  }
}

static int apply_list(sm_sandbox_settings *s, cfg_setting id, const cfg_list *l, int replace,
                      sm_error *err) {
  sm_string_list *dst = list_field(s, id);
  if (replace) dst->n = 0;
  for (size_t i = 0; i < l->n; i++) {
    int rc = list_add_unique(dst, l->items[i], cfg_settings[id].name, err);
    if (rc) return rc;
  }
  return 0;
}

/* workspace.protect: each layer's list replaces the one below (the
 * built-in list first; [] is a value), its protect_add extends it, and
 * --protect extends the result: a flag can only protect more. */
static int resolve_protect(const cfg_layer *D, const cfg_layer *A, const sm_config_flags *flags,
                           sm_resolved *out, sm_error *err) {
  sm_setting_source src = SM_SOURCE_BUILT_IN;
  const cfg_layer *layers[2] = {D, A};
  const sm_setting_source names[2] = {SM_SOURCE_DEFAULTS, SM_SOURCE_AGENT};
  int rc = 0;
  for (int k = 0; k < 2 && rc == 0; k++) {
    const cfg_layer *L = layers[k];
    if (L == NULL) continue;
    if (L->v[CS_PROTECT].set) {
      rc = apply_list(&out->settings, CS_PROTECT, &L->v[CS_PROTECT].list, 1, err);
      src = names[k];
    }
    if (rc == 0 && L->protect_add.set) {
      rc = apply_list(&out->settings, CS_PROTECT, &L->protect_add.list, 0, err);
      src = names[k];
    }
  }
  const sm_string_list *fl = flag_list(flags, CS_PROTECT);
  for (size_t j = 0; rc == 0 && fl && j < fl->n && j < SM_LIST_MAX; j++) {
    rc = list_add_unique(&out->settings.protect, fl->items[j], "protect", err);
    src = SM_SOURCE_FLAG;
  }
  if (rc == 0) set_source(out, "protect", src);
  return rc;
}

/* Unless workspace.copy_env_files, a workspace's .env files stay on the
 * host: they hold secrets a sandboxed tool has no need of, and a .env
 * written in the sandbox would be loaded by the host's tools (excluded
 * paths go neither way). */
static int env_file_excludes(sm_resolved *out, sm_error *err) {
  static const char *const globs[] = SM_CONFIG_ENV_FILE_EXCLUDES;
  if (out->copy_env_files) return 0;
  /* The built-in layer's globs come first, the configuration's after. */
  sm_string_list *l = &out->settings.excludes, rest = *l;
  l->n = 0;
  for (size_t g = 0; g < sizeof globs / sizeof globs[0]; g++) {
    int rc = list_add_unique(l, globs[g], "excludes", err);
    if (rc) return rc;
  }
  for (size_t i = 0; i < rest.n; i++) {
    int rc = list_add_unique(l, rest.items[i], "excludes", err);
    if (rc) return rc;
  }
  return 0;
}

static int resolve_settings(const sm_config *cfg, const cfg_layer *D, const cfg_layer *A,
                            const sm_config_flags *flags, sm_resolved *out, sm_error *err) {
  const char *env = flags && flags->project_environment ? flags->project_environment
                                                        : (cfg ? cfg->project_env : NULL);
  if (env) {
    if (strcmp(env, "production") && strcmp(env, "staging") && strcmp(env, "development"))
      return sm_error_set(err, SM_EINVAL,
                          "--project-environment: '%s' is not one of production, staging, "
                          "development",
                          env);
    snprintf(out->project_environment, sizeof out->project_environment, "%s", env);
  }
  for (int i = 0; i < CS_COUNT; i++) {
    cfg_setting id = (cfg_setting)i;
    sm_setting_source src = SM_SOURCE_BUILT_IN;
    int rc = 0;
    if (id == CS_PROTECT) {
      if ((rc = resolve_protect(D, A, flags, out, err))) return rc;
      continue;
    }
    if (cfg_settings[id].kind == CK_GLOBS) {
      int extend = cfg_settings[id].merge == CFG_MERGE_EXTEND;
      /* Replace: the most specific layer's list; extend: all of them. */
      if (D && D->v[id].set) {
        if ((rc = apply_list(&out->settings, id, &D->v[id].list, !extend, err))) return rc;
        src = SM_SOURCE_DEFAULTS;
      }
      if (A && A->v[id].set) {
        if ((rc = apply_list(&out->settings, id, &A->v[id].list, !extend, err))) return rc;
        src = SM_SOURCE_AGENT;
      }
      const sm_string_list *fl = flag_list(flags, id);
      for (size_t j = 0; fl && j < fl->n && j < SM_LIST_MAX; j++) {
        if ((rc = list_add_unique(list_field(&out->settings, id), fl->items[j],
                                  cfg_settings[id].name, err)))
          return rc;
        src = SM_SOURCE_FLAG;
      }
      set_source(out, cfg_settings[id].name, src);
      continue;
    }
    const char *fv = flag_value(flags, id);
    cfg_value tmp;
    const cfg_value *v = NULL;
    if (fv) {
      if ((rc = parse_flag(id, fv, &tmp, err))) return rc;
      v = &tmp;
      src = SM_SOURCE_FLAG;
    } else if (A && A->v[id].set) {
      v = &A->v[id];
      src = SM_SOURCE_AGENT;
    } else if (D && D->v[id].set) {
      v = &D->v[id];
      src = SM_SOURCE_DEFAULTS;
    } else if (id == CS_MODE && env) {
      memset(&tmp, 0, sizeof tmp);
      tmp.i = strcmp(env, "production") == 0 ? SM_MODE_PER_RUN
              : strcmp(env, "staging") == 0  ? SM_MODE_PER_TOOL
                                             : SM_MODE_NONE;
      v = &tmp;
      src = SM_SOURCE_PROJECT_ENVIRONMENT;
    }
    if (v) apply_value(&out->settings, id, v);
    if (v && id == CS_COPY_ENV_FILES) out->copy_env_files = (int)v->i;
    set_source(out, cfg_settings[id].name, src);
  }
  return env_file_excludes(out, err);
}

static void join_list(char *dst, size_t len, const cfg_list *l) {
  size_t used = 0;
  dst[0] = '\0';
  for (size_t i = 0; l && i < l->n && used < len; i++) {
    int w = snprintf(dst + used, len - used, "%s%s", i ? "," : "", l->items[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
}

/* The list of the most specific layer that sets it, with its source. */
static const cfg_opt_list *pick(const cfg_opt_list *a, const cfg_opt_list *d,
                                sm_setting_source *src) {
  if (a && a->set) return *src = SM_SOURCE_AGENT, a;
  if (d && d->set) return *src = SM_SOURCE_DEFAULTS, d;
  *src = SM_SOURCE_BUILT_IN;
  return NULL;
}

__attribute__((format(printf, 3, 4))) static void rule(char *dst, size_t len, const char *fmt,
                                                       ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst, len, fmt, ap);
  va_end(ap);
}

/* Runs the tool through one level of tools.allow / tools.deny. Returns 0 when
 * the level refuses (rule filled). */
static int policy_level(const cfg_layer *l, const char *where, const char *tool,
                        sm_resolved *out, const char **allowed_by, const char **allowed_where) {
  if (!l) return 1;
  const char *m;
  if (l->deny.set && (m = config_list_match(&l->deny.list, tool))) {
    rule(out->allow_rule, sizeof out->allow_rule, "%s.tools.deny: %s matches %s", where, m, tool);
    return 0;
  }
  if (l->allow.set && l->allow.list.n > 0) {
    if (!(m = config_list_match(&l->allow.list, tool))) {
      rule(out->allow_rule, sizeof out->allow_rule, "%s.tools.allow does not include %s", where,
           tool);
      return 0;
    }
    *allowed_by = m;
    *allowed_where = where;
  }
  return 1;
}

/* "agents.a.worker_tools", "defaults.worker_tools" or "built-in worker_tools". */
static void where_of(sm_setting_source src, const char *agent_where, const char *key, char *dst,
                     size_t len) {
  if (src == SM_SOURCE_AGENT) snprintf(dst, len, "%s.%s", agent_where, key);
  else if (src == SM_SOURCE_DEFAULTS) snprintf(dst, len, "defaults.%s", key);
  else snprintf(dst, len, "built-in %s", key);
}

/* Tool policy: defaults, then the agent (out->allowed, out->allow_rule). */
static void resolve_policy(const cfg_layer *D, const cfg_layer *A, const char *agent_where,
                           const char *tool, sm_resolved *out) {
  const char *allowed_by = NULL, *allowed_where = NULL;
  out->allowed = policy_level(D, "defaults", tool, out, &allowed_by, &allowed_where) &&
                 policy_level(A, agent_where, tool, out, &allowed_by, &allowed_where);
  if (!out->allowed) return;
  if (allowed_by)
    rule(out->allow_rule, sizeof out->allow_rule, "%s.tools.allow: %s matches %s", allowed_where,
         allowed_by, tool);
  else
    rule(out->allow_rule, sizeof out->allow_rule, "no tools.allow or tools.deny refuses %s", tool);
}

/* For explain: the tool lists that applied to a resolved tool. */
static void record_lists(const cfg_layer *D, const cfg_layer *A, const cfg_opt_list *work,
                         const cfg_list *host_list, const cfg_list *work_list,
                         sm_setting_source wsrc, sm_setting_source hsrc, sm_resolved *out) {
  out->worker_tools_set = work != NULL;
  join_list(out->worker_tools, sizeof out->worker_tools, work_list);
  join_list(out->host_tools, sizeof out->host_tools, host_list);
  set_source(out, "worker_tools", wsrc);
  set_source(out, "host_tools", hsrc);
  char *dsts[2] = {out->sandbox_always, out->sandbox_never};
  const char *names[2] = {"sandbox_tools.always", "sandbox_tools.never"};
  for (int k = 0; k < 2; k++) {
    const cfg_opt_list *dl = D ? (k ? &D->never : &D->always) : NULL;
    const cfg_opt_list *al = A ? (k ? &A->never : &A->always) : NULL;
    char a[1024] = "", d[1024] = "";
    if (dl) join_list(d, sizeof d, &dl->list);
    if (al) join_list(a, sizeof a, &al->list);
    snprintf(dsts[k], 1024, "%s%s%s", d, d[0] && a[0] ? "," : "", a);
    set_source(out, names[k], al && al->set   ? SM_SOURCE_AGENT
                               : dl && dl->set ? SM_SOURCE_DEFAULTS
                                               : SM_SOURCE_BUILT_IN);
  }
}

static void resolve_tool(const cfg_layer *D, const cfg_layer *A, const char *agent_where,
                         const char *tool, sm_resolved *out) {
  resolve_policy(D, A, agent_where, tool, out);

  /* Placement. */
  sm_setting_source hsrc, wsrc, msrc = SM_SOURCE_BUILT_IN;
  char hw[192], ww[192];
  const cfg_opt_list *host = pick(A ? &A->host_tools : NULL, D ? &D->host_tools : NULL, &hsrc);
  const cfg_opt_list *work =
      pick(A ? &A->worker_tools : NULL, D ? &D->worker_tools : NULL, &wsrc);
  const cfg_list *host_list = host ? &host->list : &cfg_builtin_host_tools;
  const cfg_list *work_list = work ? &work->list : &cfg_builtin_worker_tools;
  where_of(hsrc, agent_where, "host_tools", hw, sizeof hw);
  where_of(wsrc, agent_where, "worker_tools", ww, sizeof ww);
  for (size_t i = 0; i < out->n_sources; i++)
    if (strcmp(out->sources[i].name, "mode") == 0) msrc = out->sources[i].source;

  const char *m;
  sm_mode mode = out->settings.mode;
  int sandboxed = 0, always = 0;
  sm_setting_source decided = msrc;
  if ((m = config_list_match(host_list, tool))) {
    rule(out->sandbox_rule, sizeof out->sandbox_rule,
         "%s: %s matches %s (credential-backed: runs on the host)", hw, m, tool);
    decided = hsrc;
  } else if ((A && (m = config_list_match(&A->always.list, tool))) ||
             (D && (m = config_list_match(&D->always.list, tool)))) {
    int from_agent = A && config_list_match(&A->always.list, tool) != NULL;
    sandboxed = always = 1;
    decided = from_agent ? SM_SOURCE_AGENT : SM_SOURCE_DEFAULTS;
    rule(out->sandbox_rule, sizeof out->sandbox_rule, "%s.sandbox_tools.always: %s matches %s%s",
         from_agent ? agent_where : "defaults", m, tool,
         mode == SM_MODE_NONE ? " (mode none becomes per_tool)" : "");
    if (mode == SM_MODE_NONE) {
      out->settings.mode = SM_MODE_PER_TOOL;
      set_source(out, "mode", decided);
    }
  } else if ((A && (m = config_list_match(&A->never.list, tool))) ||
             (D && (m = config_list_match(&D->never.list, tool)))) {
    int from_agent = A && config_list_match(&A->never.list, tool) != NULL;
    decided = from_agent ? SM_SOURCE_AGENT : SM_SOURCE_DEFAULTS;
    rule(out->sandbox_rule, sizeof out->sandbox_rule,
         "%s.sandbox_tools.never: %s matches %s (runs on the host)",
         from_agent ? agent_where : "defaults", m, tool);
  } else if (mode == SM_MODE_NONE) {
    if (msrc == SM_SOURCE_BUILT_IN) {
      out->mode_unchosen = 1;
      rule(out->sandbox_rule, sizeof out->sandbox_rule,
           "no mode was chosen (no --mode, no mode in the configuration, no project "
           "environment): mode none runs it on the host");
    } else {
      rule(out->sandbox_rule, sizeof out->sandbox_rule, "mode is none (from %s)",
           sm_setting_source_name(msrc));
    }
  } else if ((m = config_list_match(work_list, tool))) {
    sandboxed = 1;
    rule(out->sandbox_rule, sizeof out->sandbox_rule, "%s: %s matches %s (mode %s)", ww, m, tool,
         sm_mode_name(mode));
  } else if (work == NULL) {
    /* Unset worker_tools name no tool on the host: only host_tools and
     * sandbox_tools.never do. An unknown tool is sandboxed. */
    sandboxed = 1;
    rule(out->sandbox_rule, sizeof out->sandbox_rule,
         "worker_tools is unset and neither host_tools nor sandbox_tools.never names %s "
         "(mode %s)",
         tool, sm_mode_name(mode));
  } else {
    decided = wsrc;
    if (work_list->n == 0)
      rule(out->sandbox_rule, sizeof out->sandbox_rule, "%s is empty: %s runs on the host", ww,
           tool);
    else
      rule(out->sandbox_rule, sizeof out->sandbox_rule,
           "%s does not include %s: it runs on the host", ww, tool);
  }
  /* A rule, not the mode, sends a container-mode call to the host. */
  out->host_by_rule = !sandboxed && mode != SM_MODE_NONE;
  /* Asked for explicitly (a flag, the agent's own entry, sandbox_tools.always):
   * never weakened by the fallback rule; from the defaults or the project
   * environment it may step down. */
  out->mode_explicit =
      sandboxed && (always || msrc == SM_SOURCE_FLAG || msrc == SM_SOURCE_AGENT);
  out->sandboxed = sandboxed;
  if (!sandboxed) {
    out->settings.mode = SM_MODE_NONE;
    set_source(out, "mode", decided);
  }

  /* The sandbox's own tool list is the last narrowing level: a tool sent to
   * the sandbox by sandbox_tools.always must be one the sandbox runs. */
  if (out->allowed && sandboxed && work && !config_list_match(&work->list, tool)) {
    out->allowed = 0;
    rule(out->allow_rule, sizeof out->allow_rule,
         "%s does not include %s (sandbox_tools.always sends it to the sandbox)",
         ww, tool);
  }

  record_lists(D, A, work, host_list, work_list, wsrc, hsrc, out);
}

int sm_config_resolve(const sm_config *cfg, const char *agent, const char *tool,
                      const char *user, const sm_config_flags *flags, sm_resolved *out,
                      sm_error *err) {
  memset(out, 0, sizeof *out);
  int rc;
  if ((agent && (rc = sm_name_check("agent", agent, err))) ||
      (tool && (rc = sm_name_check("tool", tool, err))) ||
      (user && (rc = sm_name_check("user", user, err))))
    return rc;
  sm_sandbox_settings_defaults(&out->settings);
  const cfg_layer *D = cfg ? &cfg->defaults : NULL;
  const cfg_agent *ag = config_find_agent(cfg, agent);
  const cfg_layer *A = ag ? &ag->layer : NULL;
  out->agent_known = ag != NULL;
  char agent_where[128];
  snprintf(agent_where, sizeof agent_where, "agents.%s", agent ? agent : "");

  rc = resolve_settings(cfg, D, A, flags, out, err);
  if (rc) return rc;
  resolve_tool(D, A, agent_where, tool ? tool : CFG_DEFAULT_TOOL, out);
  snprintf(out->rule, sizeof out->rule, "%s", out->allowed ? out->sandbox_rule : out->allow_rule);

  /* Scope. */
  cfg_scope scope = CFG_SCOPE_UNSET;
  sm_setting_source ssrc = SM_SOURCE_BUILT_IN;
  if (A && A->scope != CFG_SCOPE_UNSET) scope = A->scope, ssrc = SM_SOURCE_AGENT;
  else if (D && D->scope != CFG_SCOPE_UNSET) scope = D->scope, ssrc = SM_SOURCE_DEFAULTS;
  snprintf(out->scope, sizeof out->scope, "%s", config_scope_name(scope));
  set_source(out, "scope", ssrc);
  /* A scope that needs an identity the call lacks falls back to a fresh
   * sandbox: sharing one among anonymous callers would leak between them. */
  switch (scope) {
    case CFG_SCOPE_SHARED:
      if (agent) out->scope_kind = SM_SCOPE_SHARED;
      break;
    case CFG_SCOPE_USER:
      if (user) out->scope_kind = SM_SCOPE_USER;
      break;
    case CFG_SCOPE_USER_AGENT:
      if (user && agent) out->scope_kind = SM_SCOPE_USER_AGENT;
      break;
    default: break;
  }
  if (out->scope_kind != SM_SCOPE_NONE &&
      (rc = sm_scope_key_build(out->scope_kind, NULL, cfg ? cfg->project_id : NULL, agent, user,
                               out->scope_key, sizeof out->scope_key, err)))
    return rc;
  /* network allowlist: whose egress lists govern the sandbox (the agent's
   * narrow the defaults'), part of its settings hash. */
  if (strcmp(out->settings.network, "allowlist") == 0) {
    if (A && (A->egress_allow.set || A->egress_deny.set))
      snprintf(out->settings.egress_owner, sizeof out->settings.egress_owner, "%s", agent_where);
    else
      snprintf(out->settings.egress_owner, sizeof out->settings.egress_owner, "defaults");
  }
  if (A && A->workspace_root) {
    snprintf(out->workspace_root, sizeof out->workspace_root, "%s", A->workspace_root);
    set_source(out, "workspace_root", SM_SOURCE_AGENT);
  } else {
    set_source(out, "workspace_root", SM_SOURCE_BUILT_IN);
  }
  return 0;
}

/* ---- JSON ---- */

static json_object *csv_array(const char *csv) {
  json_object *a = json_object_new_array();
  const char *p = csv;
  while (p && *p) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    json_object_array_add(a, json_object_new_string_len(p, (int)n));
    p = e ? e + 1 : NULL;
  }
  return a;
}

static json_object *list_array(const sm_string_list *l) {
  json_object *a = json_object_new_array();
  for (size_t i = 0; i < l->n && i < SM_LIST_MAX; i++)
    json_object_array_add(a, json_object_new_string(l->items[i]));
  return a;
}

static json_object *setting_value(const sm_resolved *r, const char *name) {
  const sm_sandbox_settings *s = &r->settings;
  if (!strcmp(name, "mode")) return json_object_new_string(sm_mode_name(s->mode));
  if (!strcmp(name, "image")) return json_object_new_string(s->image);
  if (!strcmp(name, "network")) return json_object_new_string(s->network);
  if (!strcmp(name, "runtime")) return json_object_new_string(s->runtime);
  if (!strcmp(name, "user")) return json_object_new_string(s->user);
  if (!strcmp(name, "cpu")) return json_object_new_double(s->cpu);
  if (!strcmp(name, "memory")) return json_object_new_int64(s->memory);
  if (!strcmp(name, "pids")) return json_object_new_int64(s->pids);
  if (!strcmp(name, "disk")) return json_object_new_int64(s->disk);
  if (!strcmp(name, "tmpfs")) return json_object_new_int64(s->tmpfs);
  if (!strcmp(name, "read_only_root")) return json_object_new_boolean(s->read_only_root);
  if (!strcmp(name, "timeout")) return json_object_new_double(s->timeout_s);
  if (!strcmp(name, "stdout_cap")) return json_object_new_int64(s->stdout_cap);
  if (!strcmp(name, "stderr_cap")) return json_object_new_int64(s->stderr_cap);
  if (!strcmp(name, "idle_timeout")) return json_object_new_double(s->idle_timeout_s);
  if (!strcmp(name, "excludes")) return list_array(&s->excludes);
  if (!strcmp(name, "env_passthrough")) return list_array(&s->env_passthrough);
  if (!strcmp(name, "protect")) return list_array(&s->protect);
  if (!strcmp(name, "copy_env_files")) return json_object_new_boolean(r->copy_env_files);
  if (!strcmp(name, "scope")) return r->scope[0] ? json_object_new_string(r->scope) : NULL;
  if (!strcmp(name, "worker_tools")) return csv_array(r->worker_tools);
  if (!strcmp(name, "host_tools")) return csv_array(r->host_tools);
  if (!strcmp(name, "sandbox_tools.always")) return csv_array(r->sandbox_always);
  if (!strcmp(name, "sandbox_tools.never")) return csv_array(r->sandbox_never);
  if (!strcmp(name, "workspace_root"))
    return r->workspace_root[0] ? json_object_new_string(r->workspace_root) : NULL;
  return NULL;
}

json_object *sm_resolved_to_json(const sm_resolved *r, const char *agent, const char *tool) {
  json_object *o = json_object_new_object();
  if (!o) return NULL;
  json_object_object_add(o, "agent", agent ? json_object_new_string(agent) : NULL);
  json_object_object_add(o, "tool", tool ? json_object_new_string(tool) : NULL);
  json_object_object_add(o, "allowed", json_object_new_boolean(r->allowed));
  json_object_object_add(o, "sandboxed", json_object_new_boolean(r->sandboxed));
  json_object_object_add(o, "scope_key", json_object_new_string(r->scope_key));
  json_object_object_add(o, "rule", json_object_new_string(r->rule));
  json_object_object_add(o, "allow_rule", json_object_new_string(r->allow_rule));
  json_object_object_add(o, "sandbox_rule", json_object_new_string(r->sandbox_rule));
  json_object_object_add(o, "agent_known", json_object_new_boolean(r->agent_known));
  json_object_object_add(o, "mode_explicit", json_object_new_boolean(r->mode_explicit));
  json_object_object_add(o, "project_environment",
                         r->project_environment[0]
                             ? json_object_new_string(r->project_environment)
                             : NULL);
  json_object *s = json_object_new_object();
  for (size_t i = 0; i < r->n_sources && i < SM_CONFIG_MAX_SETTINGS; i++) {
    json_object *e = json_object_new_object();
    json_object_object_add(e, "value", setting_value(r, r->sources[i].name));
    json_object_object_add(e, "source",
                           json_object_new_string(sm_setting_source_name(r->sources[i].source)));
    json_object_object_add(s, r->sources[i].name, e);
  }
  json_object_object_add(o, "settings", s);
  return o;
}
