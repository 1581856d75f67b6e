/* Internal to src/lib/config: the YAML tree, the typed configuration and the
 * tool groups shared by loading, resolution and tool templates. */
#ifndef SANDMAN_CONFIG_INTERNAL_H
#define SANDMAN_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <sandman/audit.h>
#include <sandman/egress.h>
#include <sandman/config.h>

/* Hard caps on what the loader accepts from a file. */
#define CFG_MAX_BYTES (1u << 20)
#define CFG_MAX_DEPTH 32
#define CFG_MAX_NODES 50000
#define CFG_MAX_SCALAR 8192
#define CFG_MAX_AGENTS 256
#define CFG_MAX_TOOLS 256
#define CFG_MAX_WORKERS 1024
#define CFG_MAX_TEMPLATES 256
#define CFG_WORKER_KEY_MAX 128 /* as the runner's worker keys */
#define CFG_SERVICE_MAX 64     /* as the runner's service names */
#define CFG_NAME_MAX 64 /* agent, tool and user names */

/* ---- YAML tree (yaml_tree.c) ---- */

typedef enum { CFG_Y_SCALAR, CFG_Y_SEQ, CFG_Y_MAP } cfg_ytype;

typedef struct cfg_ynode {
  cfg_ytype type;
  size_t line, col; /* 1-based, where the node starts */
  char *str;        /* scalar text (NUL-terminated, no NUL inside) */
  size_t len;
  int plain;        /* unquoted, untagged: subject to null/bool/number reading */
  struct cfg_ynode **kids; /* seq: items; map: key, value, key, value... */
  size_t n, cap;
} cfg_ynode;

/* Parses one YAML document. An empty stream gives *out = NULL. Errors are
 * SM_ECONFIG "NAME:LINE:COLUMN: syntax error: ...". */
int config_yaml_parse(cfg_ynode **out, const char *name, const char *text, size_t len,
                      sm_error *err);
void config_ynode_free(cfg_ynode *n);
int config_ynode_is_null(const cfg_ynode *n);
size_t config_map_size(const cfg_ynode *map);
const cfg_ynode *config_map_key(const cfg_ynode *map, size_t i);
const cfg_ynode *config_map_value(const cfg_ynode *map, size_t i);
/* The value of key in map, or NULL. */
const cfg_ynode *config_map_get(const cfg_ynode *map, const char *key);

/* ---- the typed configuration ---- */

/* Sandbox settings a layer (defaults, agent, flags) can set, in the order
 * explain prints them. */
typedef enum {
  CS_MODE,
  CS_IMAGE,
  CS_NETWORK,
  CS_RUNTIME,
  CS_USER,
  CS_CPU,
  CS_MEMORY,
  CS_PIDS,
  CS_DISK,
  CS_TMPFS,
  CS_READ_ONLY_ROOT,
  CS_TIMEOUT,
  CS_STDOUT_CAP,
  CS_STDERR_CAP,
  CS_IDLE_TIMEOUT,
  CS_EXCLUDES,
  CS_ENV_PASSTHROUGH,
  CS_PROTECT, /* workspace.protect (+ workspace.protect_add) */
  CS_COPY_ENV_FILES, /* workspace.copy_env_files */
  CS_COUNT
} cfg_setting;

typedef enum {
  CK_MODE,     /* none|per_tool|per_run|per_worker */
  CK_IMAGE,    /* image reference */
  CK_NETWORK,  /* none|bridge */
  CK_RUNTIME,  /* runtime name or "" */
  CK_USER,     /* name or uid[:gid] */
  CK_CPU,      /* number of CPUs */
  CK_SIZE,     /* bytes, with k/m/g suffixes */
  CK_COUNT,    /* whole number */
  CK_BOOL,
  CK_DURATION, /* seconds, with s/m/h/d suffixes */
  CK_GLOBS,    /* list of glob patterns */
} cfg_kind;

typedef enum { CFG_MERGE_REPLACE, CFG_MERGE_EXTEND } cfg_merge;

typedef struct cfg_setting_info {
  const char *name; /* key in the file and in explain */
  cfg_kind kind;
  cfg_merge merge;  /* lists only */
  const char *flag; /* the command-line flag, or NULL */
} cfg_setting_info;

extern const cfg_setting_info cfg_settings[CS_COUNT];

typedef struct cfg_list {
  size_t n;
  char **items;
} cfg_list;

typedef struct cfg_value {
  int set;
  char *str;  /* image, network, runtime, user */
  int64_t i;  /* sizes, counts, bools, mode */
  double d;   /* cpu, durations */
  cfg_list list;
} cfg_value;

/* A tool list that may be absent (set = 0) or present and empty. */
typedef struct cfg_opt_list {
  int set;
  cfg_list list;
} cfg_opt_list;

typedef enum {
  CFG_SCOPE_UNSET = 0,
  CFG_SCOPE_CALL,       /* explicit: a fresh sandbox per call */
  CFG_SCOPE_SHARED,     /* agent:<agent> */
  CFG_SCOPE_USER,       /* user:<user> */
  CFG_SCOPE_USER_AGENT, /* user:<user>:agent:<agent> */
} cfg_scope;

const char *config_scope_name(cfg_scope s);

/* lifecycle: {freeze_after, stop_after, remove_after} of one level, in
 * seconds: < 0 where the level does not say, 0 for "never". */
enum { CFG_LC_FREEZE, CFG_LC_STOP, CFG_LC_REMOVE, CFG_LC_COUNT };
typedef struct cfg_lifecycle {
  double after[CFG_LC_COUNT];
} cfg_lifecycle;

typedef struct cfg_layer {
  cfg_value v[CS_COUNT];
  cfg_opt_list allow, deny;           /* tools.allow / tools.deny */
  cfg_opt_list worker_tools;          /* the sandbox's own tool list */
  cfg_opt_list always, never;         /* sandbox_tools.always / .never */
  cfg_opt_list host_tools;            /* credential-backed: stay on the host */
  cfg_opt_list egress_allow, egress_deny; /* egress.allow / egress.deny (network allowlist) */
  cfg_scope scope;
  char *workspace_root;               /* agents only */
  cfg_opt_list protect_add;           /* workspace.protect_add */
  cfg_opt_list templates;             /* templates a caller may ask for (POST /v1/sandboxes) */
  cfg_lifecycle lifecycle;            /* lifecycle: (config_lifecycle.c) */
} cfg_layer;

typedef struct cfg_agent {
  char *name;
  cfg_layer layer;
} cfg_agent;

typedef struct cfg_tool {
  char *name;
  char **argv;
  size_t argc;
  char *description;
} cfg_tool;

/* workers.<key>: what a worker token of that key may do on a runner. */
typedef struct cfg_worker {
  char *key;         /* a worker key, or "*" for every worker */
  cfg_list services; /* services of the credentials file it may lease */
  cfg_opt_list templates; /* the templates its token may ask for (narrows) */
  cfg_lifecycle lifecycle;
} cfg_worker;

/* templates.<name>: the settings a sandbox made from it receives (config_templates.c). */
typedef struct cfg_template {
  char *name;
  cfg_value v[CS_COUNT]; /* image, network, runtime, cpu, memory, pids, disk, timeout, idle_timeout */
  char *description;
} cfg_template;

struct sm_config {
  char *path; /* NULL: built-in defaults */
  int version;
  char *project_id, *project_env;
  char *engine_host, *cert_path;
  int tls_verify; /* -1: not set */
  char *backend;  /* engine.backend: NULL (docker), "docker", "swarm" */
  char *swarm_node_certs;
  int swarm_node_port;
  cfg_list swarm_constraints;
  double swarm_reserve_cpu;
  int64_t swarm_reserve_memory;
  int pool_size;  /* defaults.pool_size, -1: not set */
  /* audit: -1 / NULL / 0 where the file does not say */
  int audit_enabled, audit_stderr, audit_keep;
  char *audit_file;
  int64_t audit_max_bytes;
  /* egress_proxy: NULL / 0 where the file does not say */
  char *egress_network;
  cfg_list egress_hosts; /* "name=address" */
  int egress_max_connections, egress_max_per_sandbox, egress_idle_timeout, egress_connect_timeout;
  cfg_layer defaults;
  cfg_agent *agents;
  size_t n_agents;
  cfg_tool *tools;
  size_t n_tools;
  cfg_worker *workers;
  size_t n_workers;
  json_object *broker; /* the broker section, normalized (config_broker.c); NULL: none */
  cfg_template *templates;
  size_t n_templates;
  sm_config_limits limits; /* limits: (0 where the file does not say) */
  /* snapshots: what the runner reaps by itself (< 0 / 0: not set) */
  double snapshots_older_than;
  int64_t snapshots_keep;
};

const cfg_agent *config_find_agent(const sm_config *cfg, const char *name);

/* ---- the loader's context (file name for messages, the error) ---- */
typedef struct cfg_vctx {
  const char *file;
  sm_error *err;
} cfg_vctx;
/* SM_ECONFIG "FILE:LINE:COLUMN: path: message" (yaml_tree.c). */
__attribute__((format(printf, 4, 5))) int config_verr(cfg_vctx *v, const cfg_ynode *at,
                                                      const char *path, const char *fmt, ...);

/* ---- the host-tool broker's section (config_broker.c) ---- */
/* Validates broker:, defaults.broker and agents.<name>.broker of root into
 * c->broker (the normalized JSON sm_config_broker returns). */
int config_broker_parse(cfg_vctx *v, const cfg_ynode *root, sm_config *c);

/* ---- the idle lifecycle and snapshot reaping (config_lifecycle.c) ---- */
/* Reads defaults.lifecycle, agents.<name>.lifecycle, workers.<key>.lifecycle
 * and snapshots: of root (the agents and workers already parsed), and
 * checks that every combination of them keeps the order freeze_after <
 * stop_after < remove_after. */
int config_lifecycle_parse(cfg_vctx *v, const cfg_ynode *root, sm_config *c);
void config_lifecycle_unset(cfg_lifecycle *lc);

/* ---- tool groups and patterns (config_tools.c) ---- */

/* NULL-terminated member list of a group ("group:fs"), or NULL. */
const char *const *config_group_members(const char *group);
/* "group:fs, group:fs_read, ..." for messages. */
const char *config_group_names(void);
/* A pattern is "group:<name>" or a glob over tool names. */
int config_pattern_match(const char *pattern, const char *tool);
/* The first pattern of list that matches tool, or NULL. */
const char *config_list_match(const cfg_list *list, const char *tool);
/* The built-in lists used when worker_tools / host_tools are not set. */
extern const cfg_list cfg_builtin_worker_tools;
extern const cfg_list cfg_builtin_host_tools;
/* A placeholder is an argument that is exactly "{name}". Fills name. */
int config_placeholder(const char *arg, char *name, size_t len);
/* Names are [A-Za-z0-9][A-Za-z0-9_.-]* up to CFG_NAME_MAX - 1 bytes. */
int config_valid_name(const char *s);

#endif
