/* sandman: a sandbox's settings, labels and making one as a resource.
 *
 * The calls that run in sandboxes are in sandman/run.h (sm_run), the
 * long-lived context that makes them in sandman/runner.h (sm_runner);
 * sandman/sandman.h includes every header. */
#ifndef SANDMAN_SANDBOX_H
#define SANDMAN_SANDBOX_H

#include <sandman/export.h>

#include <stddef.h>
#include <stdint.h>

#include <sandman/error.h>
#include <sandman/mode.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SM_NAME_MAX 256
#define SM_LIST_MAX 64

/* A fixed-size list so settings copy by assignment. */
typedef struct sm_string_list {
  size_t n;
  char items[SM_LIST_MAX][SM_NAME_MAX];
} sm_string_list;

SM_API int sm_string_list_add(sm_string_list *list, const char *s, sm_error *err);

/* Everything that shapes a sandbox and its calls. Built-in values come from
 * sm_sandbox_settings_defaults(); the configuration and flags override. */
typedef struct sm_sandbox_settings {
  sm_mode mode;
  char image[SM_NAME_MAX];  /* default "sandman/minimal:latest" */
  char network[64];         /* "none" (default), "bridge" or "allowlist" */
  char runtime[64];         /* "" = engine default, or "runsc" */
  char user[64];            /* "" = the image's user if not root, else 1000:1000 */
  double cpu;               /* CPUs; 0 = no limit */
  int64_t memory;           /* bytes; swap is capped at the same value */
  int64_t pids;
  int64_t disk;             /* size of the /workspace volume, bytes */
  int64_t tmpfs;            /* size of /tmp, bytes */
  int64_t nofile;           /* RLIMIT_NOFILE soft = hard */
  int read_only_root;
  int no_new_privileges;
  int drop_all_caps;
  int init;                 /* an init process as pid 1 */
  double timeout_s;         /* per call */
  int64_t stdout_cap;       /* bytes kept of stdout */
  int64_t stderr_cap;
  double idle_timeout_s;    /* 0: never reaped for idleness by a worker */
  sm_string_list excludes;  /* workspace globs not copied */
  /* Workspace globs whose changes never reach the host (the built-in list
   * by default; empty: none). Not part of the container's hash. */
  sm_string_list protect;
  sm_string_list env_passthrough; /* globs of host variables passed through */
  /* network allowlist: the level whose egress lists govern the sandbox
   * ("defaults", "agents.<name>"); part of the config hash, so that agents
   * with lists of their own never share a sandbox. "" otherwise. */
  char egress_owner[160];
} sm_sandbox_settings;

SM_API void sm_sandbox_settings_defaults(sm_sandbox_settings *out);
/* Hex SHA-256 of the settings that shape the container (not the per-call
 * ones such as timeout): the io.sandman.config-hash label. */
SM_API void sm_sandbox_settings_hash(const sm_sandbox_settings *s, char out[65]);

/* The io.sandman.owner label this process writes on its per_tool
 * sandboxes, "<hostname>:<pid>" (sm_ops_owner_check reads it back): the
 * runner finds its own sandboxes by it. */
#define SM_OWNER_LABEL_MAX 300
SM_API void sm_sandbox_owner_label(char *out, size_t len);

/* A sandbox made as a resource (POST /v1/sandboxes, `sandman sandbox
 * create`): its labels say all of it (io.sandman.resource, .template,
 * .timeout, .label.<key>), so a runner that starts again finds it as it
 * was. Such a sandbox is never replaced by a call: calls that reach it,
 * by its id or by its keys, use it as it was made. */
#define SM_SANDBOX_LABELS_MAX 16
#define SM_SANDBOX_LABEL_KEY_MAX 63
#define SM_SANDBOX_LABEL_VALUE_MAX 255
typedef struct sm_sandbox_meta {
  const char *template_name; /* the configuration's template it was made from, or NULL */
  double timeout_s;          /* its life from creation; 0: no limit but its idle timeout */
  const char *const *labels; /* "key=value" (sm_sandbox_label_check) */
  size_t n_labels;
} sm_sandbox_meta;

/* 0 when "key=value" may be a sandbox's label: key 1..63 of [a-z0-9._-]
 * starting with a letter or digit, value up to 255 printable characters;
 * SM_EINVAL saying why otherwise. */
SM_API int sm_sandbox_label_check(const char *kv, sm_error *err);

/* Makes the keyed sandbox of req (settings.mode per_run or per_worker, its
 * keys, principal, settings, meta) and starts it, running nothing in it. A
 * per_run sandbox without a run id gets one of its own ("sbx-<16 hex>").
 * SM_ECONFLICT when that sandbox exists already (id_out gets its id). id_out
 * (SM_ENGINE_ID_MAX) and name_out (SM_NAME_MAX) get the new sandbox's
 * container id and name. The docker backend only (SM_EUNSUPPORTED on a
 * swarm). The runner and the request are sandman/runner.h's sm_runner and
 * sandman/run.h's sm_run_request, named by their tags here because run.h
 * includes this header. */
struct sm_runner;
struct sm_run_request;
SM_API int sm_sandbox_create(struct sm_runner *runner, const struct sm_run_request *req,
                             char *id_out, char *name_out, sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
