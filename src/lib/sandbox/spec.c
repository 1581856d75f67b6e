/* Names, labels and the hardened container spec; the shell wrappers that
 * every call goes through. Pure: no engine, no host state. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/sandbox_settings.h"
#include "sandbox/spec.h"
#include <sandman/name.h>

int sandbox_instance_valid(const char *instance) {
  if (instance == NULL || *instance == '\0' || strlen(instance) > 64) return 0;
  if (!isalnum((unsigned char)instance[0])) return 0;
  for (const char *p = instance; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.' && *p != '-') return 0;
  return 1;
}

/* ---- names and keys ---- */

static int name_char(unsigned char c) {
  return isalnum(c) || c == '_' || c == '.' || c == ':' || c == '@' || c == '+' || c == '=' ||
         c == '-';
}

int sm_name_valid(const char *s) {
  if (s == NULL || s[0] == '\0' || s[0] == '-' || s[0] == '.') return 0;
  size_t n = 0;
  for (; s[n]; n++)
    if (n >= SM_NAME_LEN_MAX || !name_char((unsigned char)s[n])) return 0;
  return 1;
}

int sm_name_check(const char *what, const char *s, sm_error *err) {
  if (sm_name_valid(s)) return 0;
  /* The value goes into a message: nothing unprintable, bounded. */
  char shown[72];
  size_t n = 0;
  for (const char *p = s ? s : ""; *p && n < 64; p++)
    shown[n++] = isprint((unsigned char)*p) ? *p : '?';
  shown[n] = '\0';
  return sm_error_set(err, SM_EINVAL,
                      "%s '%s%s' is not a valid name: 1 to %d letters, digits and _ . : @ + = - "
                      "(not starting with - or .)",
                      what, shown, s && strlen(s) > 64 ? "..." : "", SM_NAME_LEN_MAX);
}

/* Kept as they are in a key field; everything else is %XX. ':' separates
 * fields and '%' escapes, so neither may appear raw. */
static int key_char(unsigned char c) { return name_char(c) && c != ':'; }

int sandbox_key_append(char *out, size_t len, size_t *used, const char *field, sm_error *err) {
  static const char hex[] = "0123456789ABCDEF";
  size_t u = *used;
  if (u > 0) {
    if (u + 1 >= len) goto too_long;
    out[u++] = ':';
  }
  for (const unsigned char *p = (const unsigned char *)(field ? field : ""); *p; p++) {
    if (key_char(*p)) {
      if (u + 1 >= len) goto too_long;
      out[u++] = (char)*p;
    } else {
      if (u + 3 >= len) goto too_long;
      out[u++] = '%';
      out[u++] = hex[*p >> 4];
      out[u++] = hex[*p & 15];
    }
  }
  out[u] = '\0';
  *used = u;
  return 0;
too_long:
  if (len) out[0] = '\0';
  return sm_error_set(err, SM_EINVAL, "sandbox key too long");
}

static int is_worker_principal(const char *who) {
  return who != NULL && *who && strcmp(who, SM_PRINCIPAL_CONTROL) != 0;
}

/* "p:<principal>:" for a worker principal, nothing for the control one. */
static int key_start(const char *principal, char *out, size_t len, size_t *used,
                     sm_error *err) {
  *used = 0;
  if (len) out[0] = '\0';
  if (!is_worker_principal(principal)) return 0;
  int rc = sandbox_key_append(out, len, used, "p", err);
  if (rc == 0) rc = sandbox_key_append(out, len, used, principal, err);
  return rc;
}

static const char *project_or_default(const char *project) {
  return project && *project ? project : "default";
}

int sm_scope_key_build(sm_scope scope, const char *principal, const char *project,
                       const char *agent, const char *user, char *out, size_t len,
                       sm_error *err) {
  size_t u = 0;
  const char *kind = scope == SM_SCOPE_SHARED ? "shared"
                     : scope == SM_SCOPE_USER ? "user"
                     : scope == SM_SCOPE_USER_AGENT ? "user_agent" : NULL;
  if (kind == NULL) return sm_error_set(err, SM_EINVAL, "no scope to build a key for");
  if ((scope == SM_SCOPE_SHARED || scope == SM_SCOPE_USER_AGENT) && (agent == NULL || !*agent))
    return sm_error_set(err, SM_EINVAL, "scope %s needs an agent (--agent)", kind);
  if ((scope == SM_SCOPE_USER || scope == SM_SCOPE_USER_AGENT) && (user == NULL || !*user))
    return sm_error_set(err, SM_EINVAL, "scope %s needs a user (--user)", kind);
  int rc = key_start(principal, out, len, &u, err);
  if (rc == 0) rc = sandbox_key_append(out, len, &u, kind, err);
  if (rc == 0) rc = sandbox_key_append(out, len, &u, project_or_default(project), err);
  if (rc == 0 && scope != SM_SCOPE_SHARED) rc = sandbox_key_append(out, len, &u, user, err);
  if (rc == 0 && scope != SM_SCOPE_USER) rc = sandbox_key_append(out, len, &u, agent, err);
  return rc;
}

int sandbox_keyed_name(const char *instance, sm_mode mode, const char *scope_key, char *out,
                       size_t len, sm_error *err) {
  char hash[65];
  sandbox_sha256_hex(scope_key, strlen(scope_key), hash);
  /* 128 bits of the hash: no two keys meet by chance or by search. */
  int n = snprintf(out, len, "sandman-%s-%s-%.32s", instance, sm_mode_name(mode), hash);
  if (n < 0 || (size_t)n >= len) return sm_error_set(err, SM_EINVAL, "sandbox name too long");
  return 0;
}

int sm_principal_worker(const char *worker_key, char *out, size_t len, sm_error *err) {
  if (worker_key == NULL || *worker_key == '\0')
    return sm_error_set(err, SM_EINVAL, "a worker principal needs a worker key");
  int n = snprintf(out, len, "worker:%s", worker_key);
  if (n < 0 || (size_t)n >= len || (size_t)n >= SM_PRINCIPAL_MAX)
    return sm_error_set(err, SM_EINVAL, "worker key too long for a principal");
  return 0;
}

int sm_principal_may_use(const char *who, const char *label) {
  if (!is_worker_principal(who)) return 1;
  return label != NULL && strcmp(label, who) == 0;
}

/* ":ht:<agent>" when the call's agent may use host tools (or the call has
 * the route): such an agent's keyed sandboxes are its own, since another
 * agent's processes beside its calls could act through them (plant what
 * they run, trace them) and so reach the host with its identity and
 * rights (docs/host-tools.md "Whose sandbox"). Other keys are unchanged. */
static int host_tools_field(const sm_run_request *req, char *out, size_t len, size_t *u,
                            sm_error *err) {
  if (req->host_route == NULL && !req->agent_has_host_tools) return 0;
  int rc = sandbox_key_append(out, len, u, "ht", err);
  if (rc == 0) rc = sandbox_key_append(out, len, u, req->agent ? req->agent : "", err);
  return rc;
}

int sandbox_scope_key(const sm_run_request *req, sm_mode mode, char *out, size_t len,
                      sm_error *err) {
  size_t u = 0;
  int rc;
  if (req->scope != SM_SCOPE_NONE) {
    rc = sm_scope_key_build(req->scope, req->principal, req->project, req->agent, req->user, out,
                            len, err);
    /* Scopes shared and user_agent have the agent already. */
    if (rc == 0 && req->scope == SM_SCOPE_USER) {
      u = strlen(out);
      rc = host_tools_field(req, out, len, &u, err);
    }
    return rc;
  }
  if (mode == SM_MODE_PER_RUN) {
    if (req->run_id == NULL || *req->run_id == '\0')
      return sm_error_set(err, SM_EINVAL, "mode per_run needs a run id (--run-id)");
    rc = key_start(req->principal, out, len, &u, err);
    if (rc == 0) rc = sandbox_key_append(out, len, &u, "run", err);
    if (rc == 0) rc = sandbox_key_append(out, len, &u, project_or_default(req->project), err);
    if (rc == 0) rc = sandbox_key_append(out, len, &u, req->run_id, err);
    if (rc == 0) rc = host_tools_field(req, out, len, &u, err);
    return rc;
  }
  if (mode == SM_MODE_PER_WORKER) {
    if (req->worker_id == NULL || *req->worker_id == '\0')
      return sm_error_set(err, SM_EINVAL, "mode per_worker needs a worker id (--worker-id)");
    rc = key_start(req->principal, out, len, &u, err);
    if (rc == 0) rc = sandbox_key_append(out, len, &u, "worker", err);
    if (rc == 0) rc = sandbox_key_append(out, len, &u, req->worker_id, err);
    if (rc == 0) rc = host_tools_field(req, out, len, &u, err);
    return rc;
  }
  return sm_error_set(err, SM_EINVAL, "mode %s has no scope key", sm_mode_name(mode));
}

static void label(json_object *o, const char *key, const char *value) {
  char full[128];
  snprintf(full, sizeof full, SM_LABEL_PREFIX "%s", key);
  json_object_object_add(o, full, json_object_new_string(value ? value : ""));
}

json_object *sandbox_labels_build(const sandbox_label_info *li) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  label(o, "managed", "true");
  label(o, "instance", li->instance);
  label(o, "mode", li->mode);
  label(o, "project", li->project);
  label(o, "run", li->run);
  label(o, "worker", li->worker);
  label(o, "agent", li->agent);
  label(o, "scope-key", li->scope_key);
  label(o, "config-hash", li->config_hash);
  label(o, "created", li->created);
  if (li->owner) label(o, "owner", li->owner);
  if (li->principal) label(o, "principal", li->principal);
  if (li->user) label(o, "user", li->user);
  if (li->volume) label(o, "volume", li->volume);
  if (li->lease) label(o, "lease", li->lease);
  return o;
}

static int is_root_user(const char *u) {
  if (u == NULL || *u == '\0') return 1;
  return strcmp(u, "0") == 0 || strncmp(u, "0:", 2) == 0 || strcmp(u, "root") == 0 ||
         strncmp(u, "root:", 5) == 0;
}

static int parse_id(const char *s, size_t len) {
  if (len == 0 || len > 9) return -1;
  int v = 0;
  for (size_t i = 0; i < len; i++) {
    if (!isdigit((unsigned char)s[i])) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

void sandbox_container_user(const sm_sandbox_settings *s, const char *image_user, char *out,
                            size_t len, int *uid, int *gid) {
  const char *u;
  if (s->user[0]) u = s->user;
  else if (!is_root_user(image_user)) u = image_user;
  else u = "1000:1000";
  snprintf(out, len, "%s", u);
  const char *colon = strchr(out, ':');
  size_t ulen = colon ? (size_t)(colon - out) : strlen(out);
  *uid = parse_id(out, ulen);
  *gid = colon ? parse_id(colon + 1, strlen(colon + 1)) : *uid;
  if (*uid < 0) *gid = -1;
}

/* The long-lived process of a sandbox: it only keeps the container up (the
 * init process reaps zombies). sleep in a loop so SIGTERM ends it at once. */
static const char keeper_script[] =
    "trap 'exit 0' TERM INT HUP; while :; do sleep 3600 & wait $!; done";

/* A leased call's own container (lease_box.c): it keeps the container up
 * for at most $1 seconds, a backstop should the runner's watcher never
 * end it, and ends at once on SIGTERM. */
static const char lease_keeper_script[] =
    "trap 'exit 0' TERM INT HUP; sleep \"$1\" & wait $!";

int64_t sandbox_host_pids_limit(int64_t pids, int gvisor) {
  if (!gvisor || pids <= 0) return pids;
  int64_t cap = 4194304; /* the kernel's pid_max ceiling */
  if (pids >= (cap - SM_GVISOR_PIDS_BASE) / SM_GVISOR_PIDS_PER_TASK) return cap;
  return SM_GVISOR_PIDS_BASE + SM_GVISOR_PIDS_PER_TASK * pids;
}

static void ulimit(json_object *list, const char *name, int64_t value) {
  json_object *u = json_object_new_object();
  json_object_object_add(u, "Name", json_object_new_string(name));
  json_object_object_add(u, "Soft", json_object_new_int64(value));
  json_object_object_add(u, "Hard", json_object_new_int64(value));
  json_object_array_add(list, u);
}

/* The container's own fields: image, user, the keeper, labels. */
static void container_fields(json_object *c, const sandbox_container_spec *spec) {
  const sm_sandbox_settings *s = spec->settings;
  json_object_object_add(c, "Image", json_object_new_string(s->image));
  /* The container's own processes (init, the keeper) run as root without
   * capabilities: the sandbox's user can neither signal nor trace them, so
   * no call can turn them into a snooper or stop the sandbox. Every exec
   * of sandman names the sandbox's user (spec->user, also a label). */
  json_object_object_add(c, "User", json_object_new_string("0:0"));
  json_object_object_add(c, "Hostname", json_object_new_string("sandbox"));
  json_object_object_add(c, "WorkingDir", json_object_new_string("/workspace"));
  json_object *env = json_object_new_array();
  for (size_t i = 0; i < spec->n_env; i++)
    json_object_array_add(env, json_object_new_string(spec->env[i]));
  json_object_object_add(c, "Env", env);
  json_object *ep = json_object_new_array();
  json_object_array_add(ep, json_object_new_string("/bin/sh"));
  json_object_array_add(ep, json_object_new_string("-c"));
  if (spec->lease_deadline_s > 0) {
    char deadline[32];
    snprintf(deadline, sizeof deadline, "%.0f", spec->lease_deadline_s);
    json_object_array_add(ep, json_object_new_string(lease_keeper_script));
    json_object_array_add(ep, json_object_new_string("sandman-lease"));
    json_object_array_add(ep, json_object_new_string(deadline));
  } else {
    json_object_array_add(ep, json_object_new_string(keeper_script));
    json_object_array_add(ep, json_object_new_string("sandman-sandbox"));
  }
  json_object_object_add(c, "Entrypoint", ep);
  json_object_object_add(c, "Cmd", json_object_new_array());
  json_object_object_add(c, "Tty", json_object_new_boolean(0));
  json_object_object_add(c, "OpenStdin", json_object_new_boolean(0));
  json_object_object_add(c, "AttachStdin", json_object_new_boolean(0));
  json_object_object_add(c, "AttachStdout", json_object_new_boolean(0));
  json_object_object_add(c, "AttachStderr", json_object_new_boolean(0));
  json_object_object_add(c, "StopSignal", json_object_new_string("SIGTERM"));
  json_object *labels = NULL;
  if (spec->labels) json_object_deep_copy(spec->labels, &labels, NULL);
  json_object_object_add(c, "Labels", labels ? labels : json_object_new_object());
}

/* Isolation: network, init, read-only root, no capabilities, no new
 * privileges. */
static void host_isolation(json_object *hc, const sandbox_container_spec *spec) {
  const sm_sandbox_settings *s = spec->settings;
  json_object_object_add(hc, "NetworkMode", json_object_new_string(spec->network ? spec->network : s->network));
  json_object_object_add(hc, "Init", json_object_new_boolean(s->init));
  json_object_object_add(hc, "ReadonlyRootfs", json_object_new_boolean(s->read_only_root));
  json_object_object_add(hc, "IpcMode", json_object_new_string("private"));
  if (s->drop_all_caps) {
    json_object *caps = json_object_new_array();
    json_object_array_add(caps, json_object_new_string("ALL"));
    json_object_object_add(hc, "CapDrop", caps);
  }
  if (s->no_new_privileges) {
    json_object *so = json_object_new_array();
    json_object_array_add(so, json_object_new_string("no-new-privileges"));
    json_object_object_add(hc, "SecurityOpt", so);
  }
}

/* Limits: pids, cpu, memory, the tmpfs mounts, ulimits. */
static void host_limits(json_object *hc, const sandbox_container_spec *spec) {
  const sm_sandbox_settings *s = spec->settings;
  if (s->pids > 0)
    json_object_object_add(hc, "PidsLimit",
                           json_object_new_int64(sandbox_host_pids_limit(s->pids, spec->gvisor)));
  if (s->cpu > 0)
    json_object_object_add(hc, "NanoCpus", json_object_new_int64((int64_t)(s->cpu * 1e9 + 0.5)));
  if (s->memory > 0) {
    json_object_object_add(hc, "Memory", json_object_new_int64(s->memory));
    /* Memory+swap equal to memory: no swap at all. */
    json_object_object_add(hc, "MemorySwap", json_object_new_int64(s->memory));
  }
  json_object *tmpfs = json_object_new_object();
  char opts[256];
  snprintf(opts, sizeof opts, "rw,nosuid,nodev,size=%lld,mode=1777",
           (long long)(s->tmpfs > 0 ? s->tmpfs : 64LL * 1024 * 1024));
  json_object_object_add(tmpfs, "/tmp", json_object_new_string(opts));
  /* Where the agent is installed (by root, so the sandbox's user cannot
   * replace it; see src/lib/sandbox/agent.c), unless a volume holds it
   * (agent_mount). */
  if (!spec->agent_volume)
    json_object_object_add(tmpfs, "/.sandman",
                           json_object_new_string("rw,nosuid,nodev,exec,size=8m,mode=0755"));
  json_object_object_add(hc, "Tmpfs", tmpfs);
  json_object *ul = json_object_new_array();
  if (s->nofile > 0) ulimit(ul, "nofile", s->nofile);
  /* gVisor's kernel counts the user's processes and threads itself; on the
   * host (runc) RLIMIT_NPROC would count every container of that uid. */
  if (spec->gvisor && s->pids > 0) ulimit(ul, "nproc", s->pids);
  if (json_object_array_length(ul) > 0) json_object_object_add(hc, "Ulimits", ul);
  else json_object_put(ul);
}

void sandbox_volume_options(const sm_sandbox_settings *s, int uid, int gid, char *out, size_t len) {
  /* nosuid, nodev: nothing the tool leaves in /workspace is a device or
   * gains privileges by its mode bits. */
  int n = snprintf(out, len, "size=%lld,nosuid,nodev",
                   (long long)(s->disk > 0 ? s->disk : 1024LL * 1024 * 1024));
  if (uid >= 0 && n > 0 && (size_t)n < len)
    snprintf(out + n, len - (size_t)n, ",uid=%d,gid=%d,mode=0755", uid, gid >= 0 ? gid : uid);
}

/* /.sandman in an anonymous volume: the engine makes it with the
 * container, keeps it while the container is stopped and removes it with
 * the container (every removal of a sandbox asks for its volumes). Nothing
 * is copied into it from the image (NoCopy): it starts empty and root's
 * (0755), as the tmpfs would; a commit (snapshot) leaves it out. */
static json_object *agent_mount(void) {
  json_object *m = json_object_new_object();
  json_object_object_add(m, "Type", json_object_new_string("volume"));
  json_object_object_add(m, "Target", json_object_new_string("/.sandman"));
  json_object *vo = json_object_new_object();
  json_object_object_add(vo, "NoCopy", json_object_new_boolean(1));
  json_object_object_add(m, "VolumeOptions", vo);
  return m;
}

int sandbox_agent_volume_kept(json_object *insp) {
  json_object *mounts = NULL;
  if (insp == NULL || !json_object_object_get_ex(insp, "Mounts", &mounts) ||
      !json_object_is_type(mounts, json_type_array))
    return 0;
  for (size_t i = 0; i < json_object_array_length(mounts); i++) {
    json_object *m = json_object_array_get_idx(mounts, i), *dst = NULL, *type = NULL;
    json_object_object_get_ex(m, "Destination", &dst);
    json_object_object_get_ex(m, "Type", &type);
    const char *d = json_object_get_string(dst), *t = json_object_get_string(type);
    if (d && t && strcmp(d, "/.sandman") == 0 && strcmp(t, "volume") == 0) return 1;
  }
  return 0;
}

/* /workspace: a named volume on tmpfs sized by --disk. The engine makes it
 * with the container, with the same labels (minus io.sandman.volume). */
static json_object *workspace_mounts(const sandbox_container_spec *spec) {
  const sm_sandbox_settings *s = spec->settings;
  json_object *mounts = json_object_new_array();
  json_object *m = json_object_new_object();
  json_object_object_add(m, "Type", json_object_new_string("volume"));
  json_object_object_add(m, "Source", json_object_new_string(spec->volume));
  json_object_object_add(m, "Target", json_object_new_string("/workspace"));
  json_object *vo = json_object_new_object();
  json_object *vlabels = NULL;
  if (spec->labels) json_object_deep_copy(spec->labels, &vlabels, NULL);
  if (vlabels == NULL) vlabels = json_object_new_object();
  json_object_object_del(vlabels, SM_LABEL_PREFIX "volume");
  json_object_object_add(vo, "Labels", vlabels);
  json_object *dc = json_object_new_object();
  json_object_object_add(dc, "Name", json_object_new_string("local"));
  json_object *dopts = json_object_new_object();
  json_object_object_add(dopts, "type", json_object_new_string("tmpfs"));
  json_object_object_add(dopts, "device", json_object_new_string("tmpfs"));
  char o[128];
  sandbox_volume_options(s, spec->uid, spec->gid, o, sizeof o);
  json_object_object_add(dopts, "o", json_object_new_string(o));
  json_object_object_add(dc, "Options", dopts);
  json_object_object_add(vo, "DriverConfig", dc);
  json_object_object_add(m, "VolumeOptions", vo);
  json_object_array_add(mounts, m);
  if (spec->agent_volume) json_object_array_add(mounts, agent_mount());
  return mounts;
}

json_object *sandbox_container_config_build(const sandbox_container_spec *spec) {
  json_object *c = json_object_new_object();
  json_object *hc = json_object_new_object();
  if (c == NULL || hc == NULL) {
    json_object_put(c);
    json_object_put(hc);
    return NULL;
  }
  container_fields(c, spec);
  host_isolation(hc, spec);
  host_limits(hc, spec);
  const sm_sandbox_settings *s = spec->settings;
  if (s->runtime[0]) json_object_object_add(hc, "Runtime", json_object_new_string(s->runtime));
  json_object *rp = json_object_new_object();
  json_object_object_add(rp, "Name", json_object_new_string("no"));
  json_object_object_add(hc, "RestartPolicy", rp);
  /* A lease container goes as soon as it stops, whoever stopped it. */
  if (spec->lease_deadline_s > 0) json_object_object_add(hc, "AutoRemove", json_object_new_boolean(1));
  json_object_object_add(hc, "Mounts", workspace_mounts(spec));
  json_object_object_add(c, "HostConfig", hc);
  return c;
}

/* Before the wrappers' exec: a command that is not there (127), or a path
 * that cannot be run (126), said in the command's own words, so the
 * shell's message, which names a line of the wrapper ("sh: exec: line 11:
 * x: not found"), is not what the caller reads. Builtins only. */
#define SCRIPT_CHECK_COMMAND                                                                   \
  "case $1 in\n"                                                                               \
  "*/*) w=\n"                                                                                  \
  "  [ -e \"$1\" ] || { printf '%s: No such file or directory\\n' \"$1\" >&2; exit 127; }\n"    \
  "  [ -d \"$1\" ] && w='Is a directory'\n"                                                     \
  "  [ -z \"$w\" ] && [ ! -x \"$1\" ] && w='Permission denied'\n"                              \
  "  [ -z \"$w\" ] || { printf '%s: %s\\n' \"$1\" \"$w\" >&2; exit 126; } ;;\n"                 \
  "*) command -v \"$1\" >/dev/null || { printf '%s: command not found\\n' \"$1\" >&2; exit 127; } ;;\n" \
  "esac\n"

/* Every container exec runs as
 *   /bin/sh -c WRAPPER sandman TOKEN CMD ARGS...
 * Before the tool starts, the wrapper prints one line on stdout that only
 * it can have written, the call's preamble:
 *   sandman-call TOKEN PID START OOM
 * its pid (the tool's, since it then execs it), its start time in clock
 * ticks since boot (/proc/PID/stat field 22) and the memory cgroup's
 * oom_kill counter so far. The host strips the line (sandbox_call_watch) and
 * keeps what it says: a timeout kills by it and the OOM check compares with
 * it, so nothing the tool could write (a file in /tmp) is trusted. Output
 * that comes before a preamble is the runtime's, not the tool's.
 * The wrapper forks nothing (builtins only) and execs the tool, so a call
 * needs one process slot, a missing command is 127 and a non-executable one
 * 126 as with any shell, and no shell notice ("Killed") reaches stderr. */
const char sm_exec_wrapper_script[] =
    "exec 3>&2 2>/dev/null\n"
    "t=$1; shift; n=\n"
    "for c in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do\n"
    "  if [ -r \"$c\" ]; then\n"
    "    while read k v; do [ \"$k\" = oom_kill ] && n=$v; done < \"$c\"; break\n"
    "  fi\n"
    "done\n"
    "st() { shift 19; s=$1; }\n"
    "read -r l < /proc/$$/stat; st ${l##*) }\n"
    "printf 'sandman-call %s %s %s %s\\n' \"$t\" \"$$\" \"$s\" \"${n:--}\"\n"
    "exec 2>&3 3>&-\n"
    SCRIPT_CHECK_COMMAND
    "exec \"$@\"\n";

/* Pieces of the scripts below. info PID: its state (sa), parent (pp) and
 * start time (st) from /proc. */
#define SCRIPT_INFO                                        \
  "info() {\n"                                             \
  "  local l\n"                                            \
  "  { read -r l < /proc/$1/stat; } 2>/dev/null || return 1\n" \
  "  l=${l##*) }\n"                                        \
  "  set -- $l\n"                                          \
  "  sa=$1 pp=$2\n"                                        \
  "  shift 19\n"                                           \
  "  st=$1\n"                                              \
  "}\n"

/* No preamble came (a timeout before it): the call's first process is the
 * oldest that carries its marker variable. */
#define SCRIPT_FIND_CALL                                                  \
  "if [ -z \"$p\" ]; then\n"                                              \
  "  for d in /proc/[0-9]*; do\n"                                         \
  "    q=${d#/proc/}\n"                                                   \
  "    grep -qs \"SANDMAN_CALL=$t\" \"$d/environ\" || continue\n"         \
  "    info $q || continue\n"                                             \
  "    if [ -z \"$s\" ] || [ \"$st\" -lt \"$s\" ]; then p=$q s=$st; fi\n" \
  "  done\n"                                                              \
  "fi\n"

/* sweep: kills the call's processes (see sm_exec_kill_script); 0 once none
 * is left. */
#define SCRIPT_SWEEP                                                         \
  "ours() {\n"                                                               \
  "  local x=$1 i=0\n"                                                       \
  "  info $x || return 1\n"                                                  \
  "  case $sa in Z|X) return 1 ;; esac\n"                                    \
  "  [ \"$st\" -ge \"$s\" ] || return 1\n"                                   \
  "  while [ $i -lt 5000 ]; do\n"                                            \
  "    [ \"$x\" = \"$p\" ] && return 0\n"                                    \
  "    info $x || return 1\n"                                                \
  "    [ \"$pp\" = 0 ] && return 1\n"                                        \
  "    [ \"$pp\" = 1 ] && return 0\n"                                        \
  "    x=$pp\n"                                                              \
  "    info $x || return 1\n"                                                \
  "    [ \"$st\" -ge \"$s\" ] || return 1\n"                                 \
  "    i=$((i + 1))\n"                                                       \
  "  done\n"                                                                 \
  "  return 1\n"                                                             \
  "}\n"                                                                      \
  "sweep() {\n"                                                              \
  "  kill -KILL -\"$p\" \"$p\" 2>/dev/null\n"                                \
  "  r=0\n"                                                                  \
  "  while [ $r -lt 50 ]; do\n"                                              \
  "    k=0\n"                                                                \
  "    for d in /proc/[0-9]*; do\n"                                          \
  "      q=${d#/proc/}\n"                                                    \
  "      [ \"$q\" = \"$me\" ] || [ \"$q\" = 1 ] && continue\n"               \
  "      ours $q && kill -KILL \"$q\" 2>/dev/null && k=$((k + 1))\n"         \
  "    done\n"                                                               \
  "    [ $k = 0 ] && return 0\n"                                             \
  "    r=$((r + 1))\n"                                                       \
  "  done\n"                                                                 \
  "  return 1\n"                                                             \
  "}\n"

/* Kills what a timed-out or cancelled call started: sandman-kill TOKEN PID
 * START (PID and START from the preamble; empty when none arrived: then the
 * call's first process is found by its marker variable). A process is the
 * call's when it started at or after START and its parent chain reaches the
 * call's process, or reaches pid 1 (an orphan: it double-forked, setsid'd,
 * or its parent was killed) before any process older than the call or any
 * engine exec (parent 0: sandman's own, or another call's). So neither a
 * new session, a cleared environment nor a killed parent hides a process;
 * what processes older than the call start stays theirs. Rounds until none
 * is left (a process forking while it is killed). Zombies are skipped. */
const char sm_exec_kill_script[] =
    "t=$1 p=$2 s=$3 me=$$\n" SCRIPT_INFO SCRIPT_FIND_CALL
    "[ -n \"$p\" ] && [ -n \"$s\" ] || exit 0\n" SCRIPT_SWEEP
    "sweep\n";

/* The watcher: its stdin is an exec stream the runner holds; when that
 * ends (the runner closed it, or died and the engine closed it), it ends
 * the container's keeper: TERM to pid 1 (the keeper, or the init that
 * passes it on), and KILL to every other process of root's, the keeper
 * under an init and its sleep included (root without capabilities reaches
 * no process of the sandbox's user). The container stops with everything
 * in it. Root's, so the sandbox's user can neither signal it nor reach its
 * stdin. */
const char sm_exec_watch_script[] = "read -r _; kill -TERM 1; kill -KILL -1\n";

/* Prints "counts <oom kills now>". */
const char sm_exec_oom_script[] =
    "n=\n"
    "for c in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do\n"
    "  if [ -r \"$c\" ]; then\n"
    "    while read k v; do [ \"$k\" = oom_kill ] && n=$v; done < \"$c\"; break\n"
    "  fi\n"
    "done\n"
    "echo \"counts ${n:--}\"\n";

/* Mode none: the child waits on fd 3 until sandman has applied its rlimits
 * (prlimit on the waiting shell), then becomes the tool. If sandman goes
 * away first, read fails and the tool never runs unlimited. */
const char sm_host_wrapper_script[] =
    "IFS= read -r go <&3 || exit 125\n"
    "[ \"$go\" = go ] || exit 125\n"
    "exec 3<&-\n"
    SCRIPT_CHECK_COMMAND
    "exec \"$@\"\n";
