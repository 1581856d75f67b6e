/* sandman: configuration (YAML) and tool policy.
 *
 * sm_config_load finds and parses the file (--config > $SANDMAN_CONFIG >
 * ./sandman.yaml > $XDG_CONFIG_HOME/sandman/config.yaml; none: built-in
 * defaults). sm_config_resolve applies the precedence
 *   flag > agent entry > defaults > project environment > built-in
 * and the tool policy to one call, recording where each setting came from. */
#ifndef SANDMAN_CONFIG_H
#define SANDMAN_CONFIG_H

#include <stdint.h>

#include <sandman/export.h>

#include <json-c/json.h>

#include <sandman/egress.h>
#include <sandman/error.h>
#include <sandman/scope.h>
#include <sandman/sandbox.h>
#include <sandman/runner.h>
#include <sandman/run.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sm_config sm_config;

/* path NULL: search as above. A file that does not parse or validate is
 * SM_ECONFIG with "FILE:LINE:COLUMN: key: message" in err. A missing file
 * named explicitly is SM_ECONFIG too; no file found by the search is fine. */
SM_API int sm_config_load(sm_config **out, const char *path, sm_error *err);
/* Parses YAML text (name is used in messages). */
SM_API int sm_config_load_string(sm_config **out, const char *name, const char *text,
                                 size_t len, sm_error *err);
SM_API void sm_config_free(sm_config *cfg);
/* The file the config came from, or NULL for built-in defaults. */
SM_API const char *sm_config_path(const sm_config *cfg);
SM_API const char *sm_config_project_id(const sm_config *cfg);          /* may be NULL */
SM_API const char *sm_config_project_environment(const sm_config *cfg); /* may be NULL */
SM_API const char *sm_config_engine_host(const sm_config *cfg);         /* may be NULL */
/* engine.tls_verify: 1, 0, or -1 when the file does not say. */
SM_API int sm_config_engine_tls_verify(const sm_config *cfg);
SM_API const char *sm_config_engine_cert_path(const sm_config *cfg);    /* may be NULL */
/* engine.backend ("docker", "swarm"), NULL when the file does not say. */
SM_API const char *sm_config_engine_backend(const sm_config *cfg);
/* engine.swarm: the swarm backend's options (strings borrowed from cfg). */
SM_API void sm_config_swarm(const sm_config *cfg, sm_swarm_options *out);
/* defaults.pool_size: ready per_tool containers a runner keeps per
 * configuration (0..SM_POOL_MAX_SIZE; 0: no warm pool), or -1 when the
 * file does not say. Only defaults may set it: the pool is the runner's. */
SM_API int sm_config_pool_size(const sm_config *cfg);
/* The audit: section as the file says it (-1, NULL, 0 where it is silent;
 * docs/audit.md has the defaults). file "" means no file. Borrowed. */
typedef struct sm_config_audit {
  int enabled;       /* 1, 0, -1: not said (on for the runner, off otherwise) */
  const char *file;  /* NULL: not said (<state dir>/audit/audit.jsonl) */
  int to_stderr;     /* 1, 0, -1 */
  int64_t max_bytes; /* 0: not said */
  int keep;          /* -1: not said */
} sm_config_audit;
SM_API void sm_config_audit_get(const sm_config *cfg, sm_config_audit *out);

/* A sandbox's egress lists (network allowlist, docs/network.md): the
 * levels that set egress.allow or egress.deny, defaults first, then the
 * agent's entry. Lists are borrowed from cfg. */
typedef struct sm_config_egress {
  sm_egress_level levels[2];
  size_t n_levels;
  char agent_level[96]; /* storage for "agents.<name>" */
} sm_config_egress;
SM_API void sm_config_egress_get(const sm_config *cfg, const char *agent, sm_config_egress *out);
/* {"allow": [{"level", "patterns"}...], "deny": [...]} (caller owns it). */
SM_API json_object *sm_config_egress_json(const sm_config_egress *egress);
/* The egress_proxy section as proxy options (instance and state_dir left
 * NULL; strings borrowed from cfg). */
SM_API void sm_config_egress_proxy(const sm_config *cfg, sm_egress_proxy_options *out);

/* 1 if the file has an agents.<agent> entry (else the defaults apply). */
SM_API int sm_config_has_agent(const sm_config *cfg, const char *agent);
/* The file's agent name nearest to agent (a likely typo of it), or NULL
 * when none is near or agent has an entry. Borrowed from cfg. */
SM_API const char *sm_config_agent_nearest(const sm_config *cfg, const char *agent);
/* 1 when a worker token of worker_key may lease service on a runner: the
 * file's workers.<worker_key>.services or workers."*".services name it. 0
 * otherwise, and always without a file: only the control token leases
 * what no entry grants. */
SM_API int sm_config_worker_may_lease(const sm_config *cfg, const char *worker_key,
                                      const char *service);
/* The services a worker token of worker_key may lease (its entry's and
 * "*"'s, each once) into out; returns how many. */
SM_API int sm_config_worker_services(const sm_config *cfg, const char *worker_key,
                                     sm_string_list *out);

/* templates.<name> (docs/configuration.md#templates): what a sandbox made
 * from it gets; 0 (NULL) where the template does not say. Borrowed. */
typedef struct sm_config_template {
  const char *name, *description;
  const char *image, *network, *runtime;
  double cpu;                   /* 0: not said */
  int64_t memory, pids, disk;   /* 0: not said */
  double timeout_s;             /* its life; 0: not said */
  double idle_timeout_s;        /* 0: not said */
} sm_config_template;
/* 0 and *out, or SM_ENOTFOUND when the file defines no such template. */
SM_API int sm_config_template_get(const sm_config *cfg, const char *name, sm_config_template *out);
/* The template's image, network, runtime and resources over s (what it
 * does not say stays). */
SM_API void sm_config_template_apply(const sm_config_template *t, sm_sandbox_settings *s);
/* The templates a request of agent (NULL: none) and, for a worker token,
 * worker_key (NULL: not a worker token) may ask for: the agent entry's
 * templates list if it has one, else the defaults'; a worker's list
 * (workers.<key>.templates and workers."*".templates), when one is set,
 * narrows it. Into out; returns how many. *rule names the lists (static
 * text in rule, len bytes). */
SM_API int sm_config_templates_allowed(const sm_config *cfg, const char *agent,
                                       const char *worker_key, sm_string_list *out, char *rule,
                                       size_t len);
/* limits: the most a request to the runner may ask for a sandbox it makes
 * (0 where the file does not say: docs/configuration.md#limits). */
typedef struct sm_config_limits {
  double cpu_max;
  int64_t memory_max, pids_max, disk_max;
  double timeout_max, idle_timeout_max;
} sm_config_limits;
SM_API void sm_config_limits_get(const sm_config *cfg, sm_config_limits *out);

/* lifecycle: how long a keyed sandbox stays unused before it is frozen,
 * stopped and removed (docs/configuration.md#lifecycle); 0: never. */
typedef struct sm_lifecycle {
  double freeze_after_s, stop_after_s, remove_after_s;
} sm_lifecycle;
/* The lifecycle of a sandbox of agent and worker (either NULL or ""):
 * workers.<worker>.lifecycle over workers."*".lifecycle over
 * agents.<agent>.lifecycle over defaults.lifecycle, key by key ("*" only
 * for a sandbox of a worker). */
SM_API void sm_config_lifecycle(const sm_config *cfg, const char *agent, const char *worker,
                                sm_lifecycle *out);
/* 1 when any level of the file sets a step of the lifecycle. */
SM_API int sm_config_lifecycle_any(const sm_config *cfg);
/* snapshots: what the runner reaps by itself: snapshots older than
 * *older_than_s (0: no age limit) and, per owner, all but the *keep newest
 * (0: no count limit). Both 0: the runner reaps no snapshots. */
SM_API void sm_config_snapshot_reap(const sm_config *cfg, double *older_than_s, size_t *keep);

/* The host-tool broker's section (broker:, defaults.broker,
 * agents.<name>.broker), validated at load and normalized as JSON (see
 * docs/host-tools.md): {"tools": {NAME: {...}}, "groups": {G: [...]},
 * "mcp_servers": {S: {...}}, "defaults": {"allow", "deny", "from_tools"},
 * "agents": {A: {...}}}. Borrowed; NULL when the file has none. */
SM_API json_object *sm_config_broker(const sm_config *cfg);
/* 1 when a tool-name pattern (a glob, or a built-in group such as
 * "group:runtime") matches tool. */
SM_API int sm_config_tool_matches(const char *pattern, const char *tool);

/* Flag values as the user typed them (NULL = not given). */
typedef struct sm_config_flags {
  const char *mode, *image, *network, *runtime, *user;
  const char *cpu, *memory, *pids, *disk, *tmpfs, *timeout;
  const char *project_environment;
  sm_string_list env_passthrough; /* --env-passthrough globs (extend) */
  sm_string_list excludes;        /* --exclude globs (extend) */
  sm_string_list protect;         /* --protect globs (extend) */
  const char *copy_env_files;     /* --copy-env-files: "true" (NULL: not given) */
} sm_config_flags;

typedef enum {
  SM_SOURCE_BUILT_IN = 0,
  SM_SOURCE_PROJECT_ENVIRONMENT,
  SM_SOURCE_DEFAULTS,
  SM_SOURCE_AGENT,
  SM_SOURCE_FLAG,
} sm_setting_source;

SM_API const char *sm_setting_source_name(sm_setting_source s); /* "built_in", "flag", ... */

#define SM_CONFIG_MAX_SETTINGS 32
/* What a workspace's copy leaves out unless workspace.copy_env_files:
 * dotenv files, which hold secrets and which the host's tools load. */
#define SM_CONFIG_ENV_FILE_EXCLUDES {".env", ".env.*"}
#define SM_CONFIG_MAX_ARGV 64

typedef struct sm_resolved {
  sm_sandbox_settings settings;
  /* Per setting name ("mode", "image", "network", ...), its source. */
  size_t n_sources;
  struct {
    char name[32];
    sm_setting_source source;
  } sources[SM_CONFIG_MAX_SETTINGS];
  int allowed;            /* tool policy allows the call */
  int sandboxed;          /* the tool runs in a sandbox (else: on the host, mode none) */
  /* A sandboxed call's container mode was asked for explicitly (a flag, the
   * agent's own entry, sandbox_tools.always): the fallback rule never steps
   * it down (sm_fallback_decide's may_step_down is !mode_explicit). */
  int mode_explicit;
  int mode_unchosen;      /* on the host only because nothing chose a mode (built-in none) */
  int host_by_rule;       /* on the host although the mode is a container mode:
                           * host_tools, sandbox_tools.never or a worker_tools list */
  char rule[256];         /* the rule that decided allowed/sandboxed, e.g. "agents.family.tools.deny: web_*" */
  /* The configuration's scope for this call (SM_SCOPE_NONE when unscoped or
   * when the call lacks the agent or user the scope needs) and its key for
   * the configuration's project (explain; sm_run builds it for the call's). */
  sm_scope scope_kind;
  char scope_key[SM_KEY_MAX]; /* "" when unscoped (fresh sandbox per call) */
  char workspace_root[SM_NAME_MAX]; /* agent's workspace_root or "" */
  /* The two decisions behind allowed/sandboxed, for explain. */
  char allow_rule[256];   /* why the call is allowed or refused */
  char sandbox_rule[256]; /* why it runs in a sandbox or on the host */
  char scope[16];         /* "shared", "user", "user_agent", "per_call" or "" */
  char project_environment[16]; /* resolved: flag, else project.environment, else "" */
  int agent_known;        /* the file has an entry for the agent */
  /* workspace.copy_env_files: .env files are copied with a workspace (else
   * settings.excludes starts with SM_CONFIG_ENV_FILE_EXCLUDES). */
  int copy_env_files;
  /* Effective tool lists, comma-separated patterns (for explain). */
  int worker_tools_set;   /* 0: the built-in list applies */
  char worker_tools[1024];
  char host_tools[1024];
  char sandbox_always[1024];
  char sandbox_never[1024];
} sm_resolved;

/* Resolves one call. agent/tool/user may be NULL. flags may be NULL.
 * A refusal is not an error: out->allowed = 0 with out->rule set.
 * A NULL tool is checked as "exec" (a plain command). When out->sandboxed
 * is 0, out->settings.mode is SM_MODE_NONE. SM_EINVAL for a bad flag value
 * or an agent/tool/user name that sm_name_valid refuses.
 * A loaded sm_config is never modified: resolve may run on many threads. */
SM_API int sm_config_resolve(const sm_config *cfg, const char *agent, const char *tool,
                             const char *user, const sm_config_flags *flags, sm_resolved *out,
                             sm_error *err);
/* The names a call gives (borrowed; NULL: absent). */
typedef struct sm_call_names {
  const char *project;             /* NULL: the configuration's project id */
  const char *project_environment; /* NULL: the resolved one, else the configuration's */
  const char *agent, *tool, *user, *run_id, *worker_id;
} sm_call_names;

/* The request of a call the configuration resolved (res, from
 * sm_config_resolve with the same agent): sm_run_request_init, then res's
 * settings and scope, the names, and the agent's egress lists, kept in
 * *egress, which must outlive *out. The caller adds the command, the
 * environment, the workspace and the rest. Shared by `sandman run` and
 * the runner, so that both make a call from a configuration alike. */
SM_API void sm_run_request_from_config(sm_run_request *out, sm_config_egress *egress,
                                       const sm_config *cfg, const sm_resolved *res,
                                       const sm_call_names *names);
/* The `config explain --json` object of the contract (caller owns it). */
SM_API json_object *sm_resolved_to_json(const sm_resolved *r, const char *agent, const char *tool);

/* Expands a named tool's template (tools.<name>: e.g. shell -> sh -c {command})
 * with params (a JSON object, e.g. {"command": "ls"}) into argv. Returns
 * SM_ENOTFOUND if the config defines no such tool. *out_argv is owned
 * (free each string, then the array). */
SM_API int sm_config_tool_argv(const sm_config *cfg, const char *tool, json_object *params,
                               char ***out_argv, size_t *out_argc, sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
