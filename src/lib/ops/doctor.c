/* sandbox doctor: is this host able to run sandboxes, and if not, what to
 * do about it. Each check says what it found; a failing one says how to
 * fix it. Checks that need the engine are reported as not checked when the
 * engine does not answer, so the first failure is the one to fix. */
#include <errno.h>
#include <grp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sandman/ops.h>
#include <sandman/state.h>
#include <sandman/util.h>
#include <sandman/fallback.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "ops/format.h"
#include "ops/swarm_health.h"

#define START_ENGINE_FIX                                                                  \
  "start an engine: `sudo systemctl start docker`, or `sudo dockerd >/var/log/dockerd.log " \
  "2>&1 &`, or scripts/setup.sh; or point --host / DOCKER_HOST at an engine that runs"

static sm_ops_check *add_check(sm_ops_doctor_report *r, const char *name, int required) {
  if (r->n >= SM_OPS_MAX_CHECKS) return NULL;
  sm_ops_check *c = &r->checks[r->n++];
  memset(c, 0, sizeof *c);
  ops_copy(c->name, sizeof c->name, name);
  c->required = required;
  return c;
}

static void set_result(sm_ops_check *c, int ok, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_result(sm_ops_check *c, int ok, const char *fix, const char *fmt, ...) {
  if (c == NULL) return;
  c->ok = ok;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->detail, sizeof c->detail, fmt, ap);
  va_end(ap);
  ops_copy(c->fix, sizeof c->fix, ok ? "" : fix);
}

static const char *jstr(json_object *o, const char *key) {
  json_object *v = NULL;
  if (o == NULL || !json_object_object_get_ex(o, key, &v) || v == NULL) return NULL;
  return json_object_get_string(v);
}

static int jbool(json_object *o, const char *key) {
  json_object *v = NULL;
  if (o == NULL || !json_object_object_get_ex(o, key, &v) || v == NULL) return 0;
  return json_object_get_boolean(v);
}

/* "1.41" -> 141; -1 when unreadable. */
static int api_number(const char *v) {
  int major = 0, minor = 0;
  if (v == NULL || sscanf(v, "%d.%d", &major, &minor) != 2) return -1;
  return major * 100 + minor;
}

/* ---- local checks ---- */

static void check_state_dir(sm_ops_doctor_report *r, const char *state_dir) {
  sm_ops_check *c = add_check(r, "state_dir", 1);
  char dir[4096];
  sm_error e = SM_ERROR_INIT;
  if (state_dir == NULL && sm_state_default_dir(dir, sizeof dir, &e) != 0) {
    set_result(c, 0, "set SANDMAN_STATE_DIR to a directory this user can write", "%s", e.message);
    return;
  }
  if (state_dir) ops_copy(dir, sizeof dir, state_dir);
  /* The real paths the runner uses: a busy lock and an atomic last-used
   * write, under a name no sandbox has. */
  const char *probe = ".doctor-probe";
  sm_state_lock *l = NULL;
  int rc = sm_state_exclusive_try(dir, probe, &l, &e);
  if (rc == 0) {
    sm_state_unlock(l);
    rc = sm_state_touch(dir, probe, sm_now(), &e);
    sm_state_forget(dir, probe);
  }
  if (rc == SM_EBUSY) rc = 0; /* another doctor holds the probe: the lock works */
  if (rc)
    set_result(c, 0, "set SANDMAN_STATE_DIR to a directory this user can write, or fix the "
               "permissions of this one", "%s: %s", dir, e.message);
  else
    set_result(c, 1, NULL, "%s: writable (busy locks and last-used times work)", dir);
}

static void check_socket(sm_ops_doctor_report *r, const char *host, int tls) {
  sm_ops_check *c = add_check(r, "socket", 1);
  if (host == NULL) {
    set_result(c, 0, "give a valid --host or DOCKER_HOST (unix:///var/run/docker.sock, "
               "tcp://HOST:PORT)", "no usable engine address");
    return;
  }
  if (strncmp(host, "unix://", 7) != 0) {
    set_result(c, 1, NULL, "%s: a network address, no socket file to check (%s)", host,
               tls ? "TLS with client certificates" : "no TLS: anyone who reaches it controls the engine");
    return;
  }
  const char *path = host + 7;
  struct stat st;
  if (stat(path, &st) != 0) {
    set_result(c, 0, START_ENGINE_FIX, "%s: %s", path,
               errno == ENOENT ? "no such file: no engine listens there" : strerror(errno));
    return;
  }
  if (!S_ISSOCK(st.st_mode)) {
    set_result(c, 0, "point --host / DOCKER_HOST at the engine's socket", "%s is not a socket",
               path);
    return;
  }
  char group[64];
  struct group gr, *grp = NULL;
  char grbuf[4096];
  if (getgrgid_r(st.st_gid, &gr, grbuf, sizeof grbuf, &grp) == 0 && grp)
    ops_copy(group, sizeof group, grp->gr_name);
  else
    snprintf(group, sizeof group, "%u", (unsigned)st.st_gid);
  if (access(path, R_OK | W_OK) != 0) {
    char fix[320];
    snprintf(fix, sizeof fix,
             "add this user to the socket's group (`sudo usermod -aG %s $USER`, then log in "
             "again), or run sandman as root",
             group);
    set_result(c, 0, fix, "%s: this user (uid %u) cannot read and write it (mode %04o, group %s)",
               path, (unsigned)geteuid(), (unsigned)(st.st_mode & 07777), group);
    return;
  }
  set_result(c, 1, NULL, "%s: readable and writable by this user (mode %04o, group %s)", path,
             (unsigned)(st.st_mode & 07777), group);
}

/* ---- engine checks ---- */

static void not_checked(sm_ops_doctor_report *r, const char *name, int required) {
  sm_ops_check *c = add_check(r, name, required);
  set_result(c, 0, "fix the engine check first", "not checked: the engine does not answer");
  if (c) c->skipped = 1;
}

static void check_api(sm_ops_doctor_report *r, sm_engine *engine, json_object *version) {
  sm_ops_check *c = add_check(r, "api_version", 1);
  const char *spoken = sm_engine_api_version(engine);
  const char *theirs = jstr(version, "ApiVersion");
  const char *min = jstr(version, "MinAPIVersion");
  int n = api_number(theirs ? theirs : spoken);
  if (n >= 0 && n < api_number(SM_ENGINE_MIN_API)) {
    set_result(c, 0, "upgrade the engine to Docker 20.10 (API 1.41) or newer",
               "the engine speaks API %s, older than %s", theirs ? theirs : spoken,
               SM_ENGINE_MIN_API);
    return;
  }
  set_result(c, 1, NULL, "speaking %s (engine %s, minimum %s; sandman speaks %s to %s)",
             spoken ? spoken : "?", theirs ? theirs : "?", min ? min : "?", SM_ENGINE_MIN_API,
             SM_ENGINE_MAX_API);
}

/* "Backing Filesystem" from DriverStatus [["Backing Filesystem","extfs"],...]. */
static const char *backing_fs(json_object *info) {
  json_object *st = NULL;
  if (!json_object_object_get_ex(info, "DriverStatus", &st) || !json_object_is_type(st, json_type_array))
    return NULL;
  for (size_t i = 0; i < json_object_array_length(st); i++) {
    json_object *pair = json_object_array_get_idx(st, i);
    if (!json_object_is_type(pair, json_type_array) || json_object_array_length(pair) < 2) continue;
    const char *k = json_object_get_string(json_object_array_get_idx(pair, 0));
    if (k && strcmp(k, "Backing Filesystem") == 0)
      return json_object_get_string(json_object_array_get_idx(pair, 1));
  }
  return NULL;
}

static void check_storage(sm_ops_doctor_report *r, json_object *info) {
  sm_ops_check *c = add_check(r, "storage_driver", 1);
  const char *driver = jstr(info, "Driver");
  const char *fs = backing_fs(info);
  if (driver == NULL || *driver == '\0') {
    set_result(c, 0, "check the engine's storage configuration (`docker info`)",
               "the engine reports no storage driver");
    return;
  }
  set_result(c, 1, NULL, "%s%s%s%s", driver, fs ? " on " : "", fs ? fs : "",
             strcmp(driver, "vfs") == 0 ? " (vfs copies whole layers: slow, but it works)" : "");
}

static void check_cgroups(sm_ops_doctor_report *r, json_object *info) {
  sm_ops_check *c = add_check(r, "cgroups", 1);
  const char *version = jstr(info, "CgroupVersion");
  const char *driver = jstr(info, "CgroupDriver");
  int mem = jbool(info, "MemoryLimit"), swap = jbool(info, "SwapLimit");
  int pids = jbool(info, "PidsLimit");
  int cpu = jbool(info, "CpuCfsQuota") && jbool(info, "CpuCfsPeriod");
  char missing[96];
  snprintf(missing, sizeof missing, "%s%s%s", cpu ? "" : " cpu", mem ? "" : " memory",
           pids ? "" : " pids");
  const char *fix =
      version && strcmp(version, "2") == 0
          ? "delegate the cpu, memory and pids controllers to the engine's cgroup (rootless "
            "engines: systemd Delegate=cpu memory pids)"
          : "boot with cgroup_enable=memory swapaccount=1 and make sure the cpu, memory and "
            "pids hierarchies are mounted, or move to cgroup v2";
  set_result(c, cpu && mem && pids, fix,
             "cgroup v%s (%s driver): cpu quota %s, memory %s, pids %s, swap cap %s%s%s",
             version ? version : "?", driver ? driver : "?", cpu ? "yes" : "NO", mem ? "yes" : "NO",
             pids ? "yes" : "NO", swap ? "yes" : "no (memory+swap is not capped)",
             missing[0] ? "; limits that cannot be enforced:" : "", missing);
}

static void check_runtime(sm_ops_doctor_report *r, json_object *info, const char *name,
                          int required) {
  char check[48];
  snprintf(check, sizeof check, "runtime_%s", name);
  sm_ops_check *c = add_check(r, check, required);
  json_object *runtimes = NULL, *rt = NULL;
  json_object_object_get_ex(info, "Runtimes", &runtimes);
  const char *def = jstr(info, "DefaultRuntime");
  int is_default = def && strcmp(def, name) == 0;
  if (runtimes && json_object_object_get_ex(runtimes, name, &rt)) {
    const char *path = jstr(rt, "path");
    set_result(c, 1, NULL, "%s registered (%s)%s", name, path ? path : "?",
               is_default ? ", the engine's default" : "");
    return;
  }
  if (strcmp(name, "runsc") == 0)
    set_result(c, 0,
               "install gVisor and register it: `sudo runsc install && sudo systemctl reload "
               "docker` (or scripts/setup.sh); until then do not ask for --runtime runsc",
               "runsc (gVisor) is not registered with the engine%s",
               required ? "" : "; only --runtime runsc needs it");
  else
    set_result(c, 0, "register the runtime in /etc/docker/daemon.json (\"runtimes\") and reload "
               "the engine", "%s is not registered with the engine", name);
}

static void check_image(sm_ops_doctor_report *r, sm_engine *engine, const char *image) {
  sm_ops_check *c = add_check(r, "image", 1);
  cleanup_json json_object *img = NULL;
  sm_error e = SM_ERROR_INIT;
  int rc = sm_engine_image_inspect(engine, image, &img, &e);
  if (rc == SM_ENOTFOUND) {
    set_result(c, 0, "build it locally (no registry is used): scripts/setup.sh, or `sandman image "
               "build minimal`", "%s is not present on the engine", image);
    return;
  }
  if (rc) {
    set_result(c, 0, "check the engine (`docker image inspect`)", "%s: %s", image, e.message);
    return;
  }
  json_object *cfg = NULL;
  json_object_object_get_ex(img, "Config", &cfg);
  const char *id = jstr(img, "Id");
  const char *user = jstr(cfg, "User");
  set_result(c, 1, NULL, "%s present (%.19s, user %s)", image, id ? id : "?",
             user && *user ? user : "root: sandman runs as 1000:1000");
}

/* Is the mount holding path mounted with project quotas? -1: cannot tell. */
static int has_pquota(const char *path) {
  FILE *f = fopen("/proc/mounts", "re");
  if (f == NULL) return -1;
  char line[4096], best_opts[1024] = "";
  size_t best = 0;
  while (fgets(line, sizeof line, f)) {
    char dev[1024], mnt[1024], type[64], opts[1024];
    if (sscanf(line, "%1023s %1023s %63s %1023s", dev, mnt, type, opts) != 4) continue;
    size_t len = strlen(mnt);
    int under = strncmp(path, mnt, len) == 0 && (path[len] == '/' || path[len] == '\0' || len == 1);
    if (under && len >= best) {
      best = len;
      ops_copy(best_opts, sizeof best_opts, opts);
    }
  }
  fclose(f);
  if (best == 0) return -1;
  return strstr(best_opts, "prjquota") != NULL || strstr(best_opts, "pquota") != NULL;
}

static void check_disk(sm_ops_doctor_report *r, json_object *info, int local) {
  sm_ops_check *c = add_check(r, "disk_limits", 1);
  json_object *plugins = NULL, *vols = NULL;
  int have_local = 0;
  if (json_object_object_get_ex(info, "Plugins", &plugins) &&
      json_object_object_get_ex(plugins, "Volume", &vols) && json_object_is_type(vols, json_type_array)) {
    for (size_t i = 0; i < json_object_array_length(vols); i++) {
      const char *v = json_object_get_string(json_object_array_get_idx(vols, i));
      if (v && strcmp(v, "local") == 0) have_local = 1;
    }
  } else {
    have_local = 1; /* not reported: every engine has it */
  }
  const char *driver = jstr(info, "Driver");
  const char *fs = backing_fs(info);
  const char *root = jstr(info, "DockerRootDir");
  char rootfs[256];
  if (driver && strcmp(driver, "overlay2") == 0) {
    if (fs && strcmp(fs, "xfs") == 0) {
      int pq = local && root ? has_pquota(root) : -1;
      if (pq == 1)
        snprintf(rootfs, sizeof rootfs, "enforceable (overlay2 on xfs with pquota)");
      else if (pq == 0)
        snprintf(rootfs, sizeof rootfs, "not enforceable: overlay2 on xfs without pquota "
                 "(mount %s with -o pquota)", root);
      else
        snprintf(rootfs, sizeof rootfs, "unknown: overlay2 on xfs, pquota cannot be checked from here");
    } else {
      snprintf(rootfs, sizeof rootfs, "not enforceable: overlay2 on %s (needs xfs mounted with pquota)",
               fs ? fs : "an unknown file system");
    }
  } else if (driver && (strcmp(driver, "btrfs") == 0 || strcmp(driver, "zfs") == 0 ||
                        strcmp(driver, "devicemapper") == 0)) {
    snprintf(rootfs, sizeof rootfs, "enforceable (%s)", driver);
  } else {
    snprintf(rootfs, sizeof rootfs, "not enforceable with %s", driver ? driver : "this storage driver");
  }
  set_result(c, have_local,
             "the engine lacks the `local` volume driver that makes tmpfs volumes: use a standard "
             "Docker Engine",
             "workspace size (--disk): %s; root file system size (storage-opt size): %s "
             "(sandman keeps the root read-only and does not need it)",
             have_local ? "enforced with tmpfs volumes (always available)"
                        : "NOT enforceable: no local volume driver",
             rootfs);
}

/* The sandbox module's fallback rule, as `run` and `worker start` would
 * apply it with these settings: which mode would really be used. */
static void check_fallback(sm_ops_doctor_report *r, const sm_ops_doctor_options *o,
                           const char *image, const char *runtime) {
  sm_ops_check *c = add_check(r, "fallback", 0);
  const char *env = o->project_environment && *o->project_environment ? o->project_environment
                                                                       : "development";
  sm_runner_options ro = SM_RUNNER_OPTIONS_INIT;
  ro.engine = o->engine;
  ro.state_dir = o->state_dir;
  ro.instance = o->instance;
  sm_runner *runner = NULL;
  sm_error e = SM_ERROR_INIT;
  if (sm_runner_new(&runner, &ro, &e) != 0) {
    if (c) c->required = 1;
    set_result(c, 0, "fix the settings named above", "cannot evaluate the fallback rule: %s",
               e.message);
    return;
  }
  sm_fallback_decision d;
  int rc = sm_fallback_decide(runner, o->mode, !o->mode_explicit, env, runtime, image, &d, &e);
  sm_runner_free(runner);
  char reasons[640] = "";
  for (size_t i = 0; i < d.n_reasons; i++) {
    size_t used = strlen(reasons);
    snprintf(reasons + used, sizeof reasons - used, "%s%s", i ? "; " : "", d.reasons[i]);
  }
  const char *asked = sm_mode_name(d.requested);
  if (d.refused || (rc != 0 && d.mode == d.requested)) {
    if (c) c->required = 1;
    set_result(c, 0,
               d.production ? "fix the failing checks above: production never steps down to a "
                              "weaker mode"
                            : "fix the failing checks above: an explicit mode or runtime is never "
                              "stepped down",
               "%s refuses to run mode %s: %s", env, asked, reasons[0] ? reasons : e.message);
  } else if (!d.checked) {
    set_result(c, 1, NULL, "mode %s (%s): tools run on the host, no engine needed", asked, env);
  } else if (d.mode != d.requested) {
    set_result(c, 0, "fix the failing checks above, or ask for mode none explicitly",
               "mode %s would be used instead of %s (%s steps down): %s", sm_mode_name(d.mode),
               asked, env, reasons);
  } else {
    set_result(c, 1, NULL, "mode %s would be used as asked (%s)", asked, env);
  }
}

/* The swarm backend's own checks (docs/scale-out.md). */
static void check_swarm(sm_ops_doctor_report *r, sm_engine *engine, const sm_ops_doctor_options *o,
                        const char *image) {
  ops_swarm_health_report *h = calloc(1, sizeof *h);
  if (h == NULL) return;
  ops_swarm_health(engine, o, image, h);
  sm_ops_check *c = add_check(r, "swarm_manager", 1);
  int quorum = h->manager_ok && h->reachable > h->managers / 2;
  if (!h->manager_ok)
    set_result(c, 0, "point --host / DOCKER_HOST (or engine.host) at a manager of the swarm", "%s",
               h->manager_error);
  else
    set_result(c, quorum,
               "bring the unreachable managers back or remove them (docker node demote/rm); run 3 "
               "or 5 managers so that one can fail",
               "%s is a manager; %zu of %zu managers reachable%s", sm_engine_host(engine),
               h->reachable, h->managers, quorum ? "" : ": no quorum, nothing can be created");
  if (h->manager_ok) {
    set_result(add_check(r, "swarm_nodes", 1), h->ready > 0, "start or rejoin nodes (docker swarm join)",
               "%zu of %zu nodes ready and active%s%s", h->ready, h->nodes, h->down[0] ? "; not: " : "",
               h->down);
    set_result(add_check(r, "swarm_tls", 1), h->tls_tried > 0 && h->tls_ok == h->tls_tried,
               "every node's dockerd must listen on tcp://0.0.0.0:2376 with --tlsverify and accept "
               "the client certificate in engine.swarm.node_certs (docs/scale-out.md)",
               "%zu of %zu ready nodes answer over TLS (certificates from %s[/<node>])%s%s",
               h->tls_ok, h->tls_tried, o->swarm.node_certs ? o->swarm.node_certs : "the manager's",
               h->tls_bad[0] ? ": " : "", h->tls_bad);
    set_result(add_check(r, "swarm_image", 1), h->tls_ok > 0 && h->image_ok == h->tls_ok,
               h->image_fix, "image %s on %zu of %zu nodes%s%s", image, h->image_ok, h->tls_ok,
               h->image_missing[0] ? "; missing on " : "", h->image_missing);
  }
  free(h);
}

/* ---- the whole report ---- */

int sm_ops_doctor(const sm_ops_doctor_options *opts, sm_ops_doctor_report *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  sm_ops_doctor_options o = SM_OPS_DOCTOR_OPTIONS_INIT;
  if (opts) o = *opts;
  sm_sandbox_settings defaults;
  sm_sandbox_settings_defaults(&defaults);
  const char *image = o.image && *o.image ? o.image : defaults.image;
  const char *runtime = o.runtime && *o.runtime ? o.runtime : "";

  check_state_dir(out, o.state_dir);

  sm_engine *engine = NULL;
  sm_error e = SM_ERROR_INIT;
  int rc = sm_engine_new(&engine, &o.engine, &e);
  check_socket(out, rc == 0 ? sm_engine_host(engine) : NULL, rc == 0 && sm_engine_uses_tls(engine));

  sm_ops_check *c = add_check(out, "engine", 1);
  cleanup_json json_object *version = NULL;
  cleanup_json json_object *info = NULL;
  if (rc != 0) {
    set_result(c, 0,
               "give a valid --host, DOCKER_HOST or DOCKER_CONTEXT (and DOCKER_CERT_PATH for TLS)",
               "%s", e.message);
  } else if ((rc = sm_engine_negotiate(engine, &e)) != 0) {
    set_result(c, 0, START_ENGINE_FIX, "%s (address from %s)", e.message,
               sm_engine_host_source(engine));
  } else if ((rc = sm_engine_version(engine, &version, &e)) != 0 ||
             (rc = sm_engine_info(engine, &info, &e)) != 0) {
    set_result(c, 0, "check the engine's own logs; it answers /_ping but not /version or /info",
               "%s: %s", sm_engine_host(engine), e.message);
  } else {
    const char *v = jstr(version, "Version");
    const char *os = jstr(version, "Os");
    const char *arch = jstr(version, "Arch");
    set_result(c, 1, NULL, "%s (from %s) answers: Docker Engine %s (%s/%s)",
               sm_engine_host(engine), sm_engine_host_source(engine), v ? v : "?", os ? os : "?",
               arch ? arch : "?");
  }

  int runsc_required = strcmp(runtime, "runsc") == 0;
  int runc_required = runtime[0] == '\0' || strcmp(runtime, "runc") == 0;
  if (rc != 0) {
    not_checked(out, "api_version", 1);
    not_checked(out, "storage_driver", 1);
    not_checked(out, "cgroups", 1);
    not_checked(out, "runtime_runc", runc_required);
    not_checked(out, "runtime_runsc", runsc_required);
    if (runtime[0] && !runc_required && !runsc_required) {
      char name[48];
      snprintf(name, sizeof name, "runtime_%s", runtime);
      not_checked(out, name, 1);
    }
    not_checked(out, "image", 1);
    not_checked(out, "disk_limits", 1);
  } else {
    check_api(out, engine, version);
    check_storage(out, info);
    check_cgroups(out, info);
    check_runtime(out, info, "runc", runc_required);
    check_runtime(out, info, "runsc", runsc_required);
    if (runtime[0] && !runc_required && !runsc_required) check_runtime(out, info, runtime, 1);
    check_image(out, engine, image);
    check_disk(out, info, strncmp(sm_engine_host(engine), "unix://", 7) == 0);
    if (o.backend && strcmp(o.backend, "swarm") == 0) check_swarm(out, engine, &o, image);
  }
  sm_engine_free(engine);
  check_fallback(out, &o, image, runtime);

  out->healthy = 1;
  for (size_t i = 0; i < out->n; i++)
    if (out->checks[i].required && !out->checks[i].ok) out->healthy = 0;
  (void)err;
  return 0;
}

json_object *sm_ops_doctor_to_json(const sm_ops_doctor_report *report) {
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  json_object_object_add(o, "healthy", json_object_new_boolean(report->healthy));
  json_object *checks = json_object_new_array();
  for (size_t i = 0; checks && i < report->n; i++) {
    const sm_ops_check *c = &report->checks[i];
    json_object *j = json_object_new_object();
    json_object_object_add(j, "name", json_object_new_string(c->name));
    json_object_object_add(j, "ok", json_object_new_boolean(c->ok));
    /* Readers of the contract see name, ok and detail only: a failing
     * detail carries what to do as well. */
    char detail[sizeof c->detail + sizeof c->fix + 16];
    if (!c->ok && c->fix[0]) snprintf(detail, sizeof detail, "%s; fix: %s", c->detail, c->fix);
    else snprintf(detail, sizeof detail, "%s", c->detail);
    json_object_object_add(j, "detail", json_object_new_string(detail));
    json_object_object_add(j, "required", json_object_new_boolean(c->required));
    if (!c->ok && c->fix[0]) json_object_object_add(j, "fix", json_object_new_string(c->fix));
    json_object_array_add(checks, j);
  }
  json_object_object_add(o, "checks", checks);
  return o;
}

char *sm_ops_doctor_text(const sm_ops_doctor_report *report) {
  common_buf b;
  common_buf_init(&b, (size_t)1 << 20);
  size_t width = 0;
  for (size_t i = 0; i < report->n; i++)
    if (strlen(report->checks[i].name) > width) width = strlen(report->checks[i].name);
  int rc = 0;
  size_t failed = 0, skipped = 0;
  for (size_t i = 0; rc == 0 && i < report->n; i++) {
    const sm_ops_check *c = &report->checks[i];
    const char *tag = c->ok ? "ok" : c->skipped ? "--" : c->required ? "FAIL" : "warn";
    if (!c->ok && c->required) {
      if (c->skipped) skipped++;
      else failed++;
    }
    rc = common_buf_printf(&b, "%-4s  %-*s  %s\n", tag, (int)width, c->name, c->detail);
    if (rc == 0 && !c->ok && !c->skipped && c->fix[0])
      rc = common_buf_printf(&b, "      %-*s  fix: %s\n", (int)width, "", c->fix);
  }
  if (rc == 0) {
    if (report->healthy) rc = common_buf_printf(&b, "healthy\n");
    else if (skipped)
      rc = common_buf_printf(&b, "unhealthy: %zu required check%s failed, %zu not checked\n",
                             failed, failed == 1 ? "" : "s", skipped);
    else
      rc = common_buf_printf(&b, "unhealthy: %zu required check%s failed\n", failed,
                             failed == 1 ? "" : "s");
  }
  if (rc) {
    common_buf_dispose(&b);
    return NULL;
  }
  return common_buf_steal(&b, NULL);
}
