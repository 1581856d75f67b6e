/* Internal to src/lib/sandbox: names, keys, labels and the hardened container
 * config (spec.c), and the shell wrappers every exec goes through. */
#ifndef SANDMAN_SANDBOX_SPEC_H
#define SANDMAN_SANDBOX_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/mode.h>
#include <sandman/sandbox.h>
#include <sandman/run.h>

typedef struct sandbox_label_info {
  const char *instance;
  const char *mode;
  const char *project;
  const char *run;
  const char *worker;
  const char *agent;
  const char *scope_key;
  const char *config_hash;
  const char *created;  /* RFC 3339 UTC */
  const char *owner;    /* per_tool, lease: "<host>:<pid>"; NULL otherwise */
  const char *volume;   /* containers only; NULL on the volume itself */
  const char *principal;/* keyed: the call's principal, when it has one */
  const char *user;     /* "uid:gid" the calls run as (the container runs as root) */
  const char *lease;    /* a leased call's own container: the keyed sandbox whose
                         * /workspace it shares (lease_box.h); NULL otherwise */
} sandbox_label_info;

#define SM_LABEL_PREFIX "io.sandman."

json_object *sandbox_labels_build(const sandbox_label_info *li);

/* Appends ':' (unless first) and field, escaped, to out[0..*used). */
int sandbox_key_append(char *out, size_t len, size_t *used, const char *field, sm_error *err);
/* "sandman-<instance>-<mode>-<32 hex of sha256(key)>". */
int sandbox_keyed_name(const char *instance, sm_mode mode, const char *scope_key, char *out,
                       size_t len, sm_error *err);
/* The key of a keyed call: its scope's (sm_scope_key_build), else
 * "run:<project>:<run>" or "worker:<worker>", each after the principal's
 * field. SM_EINVAL when a name the key needs is missing. */
int sandbox_scope_key(const sm_run_request *req, sm_mode mode, char *out, size_t len,
                      sm_error *err);
/* Instance names become part of container names: [A-Za-z0-9_.-], 1..64. */
int sandbox_instance_valid(const char *instance);

typedef struct sandbox_container_spec {
  const sm_sandbox_settings *settings;
  const char *user;     /* resolved user for the container ("1000:1000") */
  int uid, gid;         /* owner of the /workspace volume */
  const char *volume;   /* volume name */
  json_object *labels;  /* borrowed; copied into the spec */
  const char *const *env; /* container's base environment */
  size_t n_env;
  int gvisor;           /* the runtime is gVisor: --pids is enforced inside it */
  const char *network;  /* NULL: settings->network; else join this network (allowlist) */
  double lease_deadline_s; /* > 0: a leased call's own container (lease_box.h): its
                            * keeper ends after this many seconds and the engine
                            * removes it when it stops */
  int agent_volume;     /* /.sandman (the agent's place) a volume of the container's
                         * own, kept across a stop and removed with it, instead of
                         * a tmpfs: a resumed sandbox needs no second install */
} sandbox_container_spec;

/* Under gVisor the host's pids cgroup counts gVisor's own threads too (its
 * kernel, its file proxy, and on the ptrace platform about nine host tasks
 * per process of the tool: measured, docs/modes.md), so --pids 64 left no
 * room and every call failed. The tool's limit is then RLIMIT_NPROC, which
 * gVisor's kernel enforces for the sandbox's user, and the host's cgroup
 * gets room for gVisor besides: base + per task * pids. */
#define SM_GVISOR_PIDS_BASE 64
#define SM_GVISOR_PIDS_PER_TASK 12
int64_t sandbox_host_pids_limit(int64_t pids, int gvisor);

/* The /workspace volume's tmpfs options ("size=...,nosuid,nodev,uid=...")
 * for settings s and its owner: a volume keeps the options it was made
 * with, so a sandbox that would need others gets a volume of its own. */
void sandbox_volume_options(const sm_sandbox_settings *s, int uid, int gid, char *out, size_t len);

/* The ContainerConfig (HostConfig inside) of a hardened sandbox. Caller
 * owns the result. */
json_object *sandbox_container_config_build(const sandbox_container_spec *spec);

/* Whether the container inspected as insp keeps /.sandman in a volume
 * (spec->agent_volume): its agent is still there after a stop. */
int sandbox_agent_volume_kept(json_object *insp);

/* The container user: settings->user, else the image's user unless it is
 * root or empty, else "1000:1000". uid/gid are numeric when the user is
 * ("1000", "1000:1000"); -1 when it is a name. */
void sandbox_container_user(const sm_sandbox_settings *s, const char *image_user, char *out,
                            size_t len, int *uid, int *gid);

/* The shell wrappers every container exec and every mode-none call go
 * through (see exec.c and host.c for why). */
extern const char sm_exec_wrapper_script[];
extern const char sm_exec_kill_script[];
extern const char sm_exec_oom_script[];
/* Run as root in a container whose life is bound to the runner's: waits
 * for its stdin to end (the runner closed the stream, or is gone), then
 * ends the container's keeper (lease_box.c). */
extern const char sm_exec_watch_script[];
extern const char sm_host_wrapper_script[];

#endif
