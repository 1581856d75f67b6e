/* Container modes: find or create the sandbox for a call, run the call in
 * it, and clean up.
 *
 * Keyed sandboxes (per_run, per_worker) have a name derived from their
 * scope key. Creation is serialised across processes by the key lock
 * "create-<name>": under it we look the name up, check its labels, replace
 * it if its configuration hash differs (waiting for calls in flight to
 * end), create it if missing, and take the busy lock before letting go of
 * the key lock, so no replacement can slip in between. A 409 on create
 * means another sandman (with another state directory) made it first: we
 * look it up again. Any failure while creating or starting removes the
 * container and its volume. */
#include <ctype.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/state.h>
#include <sandman/util.h>
#include <sandman/workspace.h>

#include "sandbox/internal.h"
#include "sandbox/pool.h"
#include "sandbox/swarm.h"

extern char **environ;

#define REPLACE_POLL_MS 100
#define PASSWD_CAP (256 * 1024)

typedef struct sandbox {
  sm_mode mode;
  char name[SM_NAME_MAX];
  char volume[SM_NAME_MAX + 8];
  char id[SM_ENGINE_ID_MAX];
  char scope_key[SM_KEY_MAX];
  char hash[65];
  char user[128];      /* numeric "uid:gid" given to the container */
  char user_name[128]; /* for USER */
  int uid, gid;
  int reused;
  int pooled;          /* per_tool: from (or made for) the warm pool */
  char pool_key[65];   /* pooled: the configuration's pool */
  int cached;          /* keyed: found in the runner's lookup cache, not inspected */
  char replaced[SM_ENGINE_ID_MAX]; /* keyed: the sandbox this call replaced, or "" */
  char because[256];   /* why */
  sm_state_lock *busy;
  sandbox_swarm_box swarm;  /* the swarm backend's hold on it */
} sandbox;

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static const char *json_str(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (!json_object_object_get_ex(o, a, &x)) return NULL;
  if (b == NULL) return json_object_is_type(x, json_type_string) ? json_object_get_string(x) : NULL;
  if (!json_object_object_get_ex(x, b, &y) || !json_object_is_type(y, json_type_string))
    return NULL;
  return json_object_get_string(y);
}

static const char *label_of(json_object *inspect, const char *key) {
  json_object *cfg = NULL, *labels = NULL, *v = NULL;
  char full[128];
  snprintf(full, sizeof full, SM_LABEL_PREFIX "%s", key);
  if (!json_object_object_get_ex(inspect, "Config", &cfg) ||
      !json_object_object_get_ex(cfg, "Labels", &labels) ||
      !json_object_object_get_ex(labels, full, &v) || !json_object_is_type(v, json_type_string))
    return NULL;
  return json_object_get_string(v);
}

static int is_running(json_object *inspect) {
  json_object *st = NULL, *r = NULL;
  return json_object_object_get_ex(inspect, "State", &st) &&
         json_object_object_get_ex(st, "Running", &r) && json_object_get_boolean(r);
}

/* ---- checks before creating ---- */

int sm_sandbox_runtime_present(sm_engine *e, const char *runtime, int *gvisor, sm_error *err) {
  if (gvisor) *gvisor = 0;
  if (runtime == NULL || *runtime == '\0') return 0;
  json_object *info = NULL;
  int rc = sm_engine_info(e, &info, err);
  if (rc) return rc;
  json_object *rts = NULL, *rt = NULL, *path = NULL;
  int found = json_object_object_get_ex(info, "Runtimes", &rts) &&
              json_object_object_get_ex(rts, runtime, &rt);
  if (found && gvisor) {
    /* Any name can be registered for runsc ("runsc-net"): its program says. */
    const char *p = json_object_object_get_ex(rt, "path", &path) ? json_object_get_string(path)
                                                                  : NULL;
    const char *base = p ? strrchr(p, '/') : NULL;
    base = base ? base + 1 : p ? p : runtime;
    *gvisor = strncmp(base, "runsc", 5) == 0 || strncmp(runtime, "runsc", 5) == 0;
  }
  json_object_put(info);
  if (found) return 0;
  return sm_error_set(
      err, SM_ESANDBOX,
      "runtime '%s' is not registered with the engine at %s: add it to the engine's "
      "daemon.json (\"runtimes\": {\"%s\": {\"path\": \"/usr/bin/%s\"}}; for gVisor "
      "`runsc install` does this) and restart the engine, or run without --runtime",
      runtime, sm_engine_host(e), runtime, runtime);
}

int sm_sandbox_image_present(sm_engine *e, const char *image, json_object **out,
                             sm_error *err) {
  json_object *img = NULL;
  int rc = sm_engine_image_inspect(e, image, &img, err);
  if (rc == SM_ENOTFOUND)
    return sm_error_set(err, SM_ESANDBOX,
                        "image '%s' is not present on the engine: build it (sandman image build, "
                        "or scripts/setup.sh for sandman/minimal) or load it; sandman never pulls",
                        image);
  if (rc) return rc;
  if (out) *out = img;
  else json_object_put(img);
  return 0;
}

/* ---- named users: read /etc/passwd or /etc/group out of the image ---- */

static int all_digits(const char *s) {
  if (*s == '\0') return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

static int buf_writer(void *ud, const char *data, size_t len) {
  sm_buf *b = ud;
  return sm_buf_append(b, data, len) == 0 ? 0 : SM_ETOOBIG;
}

static int64_t tar_octal(const char *p, size_t n) {
  int64_t v = 0;
  for (size_t i = 0; i < n && p[i]; i++) {
    if (p[i] == ' ') continue;
    if (p[i] < '0' || p[i] > '7') break;
    v = v * 8 + (p[i] - '0');
  }
  return v;
}

/* Finds name in a passwd/group text; *id = field 3, *gid = field 4. */
static int db_lookup(const char *text, size_t len, const char *name, int *id, int *gid) {
  size_t nlen = strlen(name);
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    if ((size_t)(le - p) > nlen && memcmp(p, name, nlen) == 0 && p[nlen] == ':') {
      const char *f = p + nlen + 1;
      const char *c = memchr(f, ':', (size_t)(le - f)); /* skip password */
      if (c) {
        char num[16] = {0};
        f = c + 1;
        size_t i = 0;
        while (f < le && *f != ':' && i < sizeof num - 1) num[i++] = *f++;
        *id = (int)strtol(num, NULL, 10);
        if (gid && f < le && *f == ':') {
          f++;
          i = 0;
          memset(num, 0, sizeof num);
          while (f < le && *f != ':' && i < sizeof num - 1) num[i++] = *f++;
          *gid = (int)strtol(num, NULL, 10);
        }
        return 0;
      }
    }
    p = le + 1;
  }
  return -1;
}

/* Reads one file from a created (never started) container as text. */
static int read_image_file(sm_engine *e, const char *cid, const char *path, sm_buf *out,
                           sm_error *err) {
  sm_buf tar;
  sm_buf_init(&tar, PASSWD_CAP);
  int rc = sm_engine_archive_get(e, cid, path, buf_writer, &tar, err);
  if (rc == 0) {
    if (tar.len < 512) {
      rc = sm_error_set(err, SM_EPROTOCOL, "reading %s from the image: short archive", path);
    } else {
      int64_t size = tar_octal(tar.data + 124, 12);
      if (size < 0 || (size_t)size > tar.len - 512)
        rc = sm_error_set(err, SM_EPROTOCOL, "reading %s from the image: bad archive", path);
      else if (sm_buf_append(out, tar.data + 512, (size_t)size) != 0)
        rc = sm_error_set(err, SM_ETOOBIG, "%s in the image is too large", path);
    }
  }
  sm_buf_dispose(&tar);
  return rc;
}

static int resolve_named_user(sm_runner *runner, sm_engine *e, const sm_sandbox_settings *s,
                              const char *spec, int *uid, int *gid, sm_error *err) {
  char user[128], group[128] = "";
  snprintf(user, sizeof user, "%s", spec);
  char *colon = strchr(user, ':');
  if (colon) {
    snprintf(group, sizeof group, "%s", colon + 1);
    *colon = '\0';
  }
  json_object *cfg = json_object_new_object();
  json_object_object_add(cfg, "Image", json_object_new_string(s->image));
  json_object *ep = json_object_new_array();
  json_object_array_add(ep, json_object_new_string("/bin/true"));
  json_object_object_add(cfg, "Entrypoint", ep);
  json_object *labels = json_object_new_object();
  json_object_object_add(labels, SM_LABEL_PREFIX "managed", json_object_new_string("true"));
  json_object_object_add(labels, SM_LABEL_PREFIX "instance",
                         json_object_new_string(sm_runner_instance(runner)));
  json_object_object_add(labels, SM_LABEL_PREFIX "mode", json_object_new_string("lookup"));
  json_object_object_add(cfg, "Labels", labels);
  char cid[SM_ENGINE_ID_MAX];
  int rc = sm_engine_container_create(e, NULL, cfg, cid, NULL, err);
  json_object_put(cfg);
  if (rc) return sm_error_wrap(err, "looking up user '%s' in image %s", spec, s->image);
  sm_buf text;
  sm_buf_init(&text, PASSWD_CAP);
  int g = -1;
  rc = read_image_file(e, cid, "/etc/passwd", &text, err);
  if (rc == 0 && all_digits(user)) *uid = (int)strtol(user, NULL, 10);
  else if (rc == 0 && db_lookup(text.data, text.len, user, uid, &g) != 0)
    rc = sm_error_set(err, SM_ESANDBOX, "user '%s' does not exist in image %s", user, s->image);
  if (rc == 0) *gid = g >= 0 ? g : *uid;
  if (rc == 0 && group[0]) {
    if (all_digits(group)) {
      *gid = (int)strtol(group, NULL, 10);
    } else {
      sm_buf_reset(&text);
      rc = read_image_file(e, cid, "/etc/group", &text, err);
      if (rc == 0 && db_lookup(text.data, text.len, group, gid, NULL) != 0)
        rc = sm_error_set(err, SM_ESANDBOX, "group '%s' does not exist in image %s", group,
                          s->image);
    }
  }
  sm_buf_dispose(&text);
  sm_error ignore = SM_ERROR_INIT;
  sm_engine_container_remove(e, cid, 1, 1, &ignore);
  return rc;
}

/* The container's user as numbers, so that the /workspace volume can be
 * owned by it and later calls can read it back from Config.User. */
static int prepare_user(sm_runner *runner, sm_engine *e, const sm_sandbox_settings *s,
                        json_object *image, sandbox *sb, sm_error *err) {
  const char *image_user = json_str(image, "Config", "User");
  char spec[128];
  int uid, gid;
  sm_container_user(s, image_user, spec, sizeof spec, &uid, &gid);
  char *colon = strchr(spec, ':');
  snprintf(sb->user_name, sizeof sb->user_name, "%.*s",
           colon ? (int)(colon - spec) : (int)strlen(spec), spec);
  if (uid < 0) {
    int rc = resolve_named_user(runner, e, s, spec, &uid, &gid, err);
    if (rc) return rc;
  }
  sb->uid = uid;
  sb->gid = gid;
  snprintf(sb->user, sizeof sb->user, "%d:%d", uid, gid);
  return 0;
}

static void ids_from_user(const char *user, int *uid, int *gid) {
  *uid = *gid = 1000;
  if (user == NULL || !isdigit((unsigned char)user[0])) return;
  char *end = NULL;
  *uid = (int)strtol(user, &end, 10);
  *gid = (end && *end == ':') ? (int)strtol(end + 1, NULL, 10) : *uid;
}

static int ignore_missing(int rc) { return rc == SM_ENOTFOUND ? 0 : rc; }

static int64_t json_int(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (!json_object_object_get_ex(o, a, &x) || !json_object_object_get_ex(x, b, &y)) return 0;
  return json_object_get_int64(y);
}

/* Why a keyed sandbox found with another configuration hash is replaced,
 * in the words of the settings that differ (the call's result says it). */
static void replace_reason(json_object *insp, const sm_sandbox_settings *s, int stale, char *out,
                           size_t len) {
  if (!stale) {
    snprintf(out, len, "it was not running");
    return;
  }
  const char *image = json_str(insp, "Config", "Image");
  if (image && strcmp(image, s->image) != 0) {
    snprintf(out, len, "image changed (%.100s -> %.100s)", image, s->image);
    return;
  }
  const char *net = json_str(insp, "HostConfig", "NetworkMode");
  const char *rt = json_str(insp, "HostConfig", "Runtime");
  const char *names[6];
  size_t n = 0;
  if (net && strcmp(net, s->network) != 0) names[n++] = "network";
  if (rt && strcmp(rt, s->runtime[0] ? s->runtime : "runc") != 0) names[n++] = "runtime";
  if (json_int(insp, "HostConfig", "Memory") != (s->memory > 0 ? s->memory : 0)) names[n++] = "memory";
  if (json_int(insp, "HostConfig", "NanoCpus") != (s->cpu > 0 ? (int64_t)(s->cpu * 1e9 + 0.5) : 0))
    names[n++] = "cpu";
  if (json_int(insp, "HostConfig", "PidsLimit") != (s->pids > 0 ? s->pids : 0)) names[n++] = "pids";
  if (n == 0) {
    snprintf(out, len, "its configuration changed");
    return;
  }
  size_t used = 0;
  for (size_t i = 0; i < n && used < len; i++)
    used += (size_t)snprintf(out + used, len - used, "%s%s", i ? ", " : "", names[i]);
  if (used < len) snprintf(out + used, len - used, " changed");
}

/* Removes the container and its volume; what is already gone is fine. */
static int remove_sandbox(sm_engine *e, const char *state_dir, const char *name,
                          const char *volume, sm_error *err) {
  sm_error e1 = SM_ERROR_INIT;
  int rc = ignore_missing(sm_engine_container_remove(e, name, 1, 1, &e1));
  int vrc = 0;
  sm_error e2 = SM_ERROR_INIT;
  for (int i = 0; i < 20; i++) {
    /* The engine may still hold the volume for a moment after the removal. */
    vrc = ignore_missing(sm_engine_volume_remove(e, volume, 1, &e2));
    if (vrc != SM_ECONFLICT || rc != 0) break;
    sleep_ms(100);
  }
  sm_state_forget(state_dir, name);
  if (rc == 0 && vrc == 0)
    sm_log_event(SM_LOG_DEBUG, "sandbox.remove", SM_LOG_FIELDS(SM_LOG_STR("name", name)),
                 "removed sandbox %s", name);
  if (rc) {
    *err = e1;
    return sm_error_wrap(err, "removing sandbox %s", name);
  }
  if (vrc) {
    *err = e2;
    return sm_error_wrap(err, "removing volume %s", volume);
  }
  return 0;
}

/* chmod 1777 /tmp as root inside the started sandbox (root owns the tmpfs;
 * no capability is needed for an owner's chmod). */
static int make_tmp_writable(sm_engine *e, const sandbox *sb, const char *image, unsigned mode,
                             sm_error *err) {
  const char *argv[] = {"chmod", "1777", "/tmp"};
  int code = -1;
  int rc = sm_exec_helper(e, sb->id, argv, 3, "0:0", NULL, NULL, 30, NULL, &code, err);
  if (rc == 0 && code != 0)
    rc = sm_error_set(err, SM_ESANDBOX,
                      "the /tmp of image %s is mode %04o and could not be made 1777 (chmod "
                      "exited %d): give the image a /tmp of mode 1777, or none",
                      image, mode & 07777, code);
  if (rc == 0)
    sm_log(SM_LOG_DEBUG, "%s: /tmp of image %s was %04o, made 1777", sb->name, image, mode & 07777);
  return rc;
}

/* The mode of each image's /tmp, learnt once per process: a path stat
 * costs the engine a mount of the container's root (10-60 ms measured
 * under load), and an image id never changes its files. */
#define TMP_MODES 32
static struct {
  char image_id[SM_ENGINE_ID_MAX];
  unsigned mode; /* 0: the image has no /tmp */
} tmp_modes[TMP_MODES];
static size_t tmp_modes_next;
static pthread_mutex_t tmp_modes_mu = PTHREAD_MUTEX_INITIALIZER;

static int tmp_mode_cached(const char *image_id, unsigned *mode) {
  int hit = 0;
  pthread_mutex_lock(&tmp_modes_mu);
  for (size_t i = 0; i < TMP_MODES && !hit; i++)
    if (image_id[0] && strcmp(tmp_modes[i].image_id, image_id) == 0) {
      *mode = tmp_modes[i].mode;
      hit = 1;
    }
  pthread_mutex_unlock(&tmp_modes_mu);
  return hit;
}

static void tmp_mode_remember(const char *image_id, unsigned mode) {
  if (image_id[0] == '\0') return;
  pthread_mutex_lock(&tmp_modes_mu);
  size_t i = tmp_modes_next++ % TMP_MODES;
  snprintf(tmp_modes[i].image_id, sizeof tmp_modes[i].image_id, "%s", image_id);
  tmp_modes[i].mode = mode;
  pthread_mutex_unlock(&tmp_modes_mu);
}

/* Whether the image's /tmp (read from the created container) needs the
 * chmod; *mode gets it for the message. */
static int tmp_needs_fix(sm_engine *e, const char *cid, const char *image_id, unsigned *mode) {
  if (!tmp_mode_cached(image_id, mode)) {
    sm_error ignore = SM_ERROR_INIT;
    int rc = sm_engine_path_mode(e, cid, "/tmp", mode, &ignore);
    if (rc == SM_ENOTFOUND) *mode = 0;
    else if (rc != 0) return 0; /* unknown: the tool's own error will tell */
    tmp_mode_remember(image_id, *mode);
  }
  return *mode != 0 && (*mode & 07777) != 01777;
}

/* The hardened container config of sandbox sb (labels, user, environment)
 * against engine e: its image there, its user resolved in the image. The
 * docker backend creates it; the swarm backend translates it. image_id (may
 * be NULL; SM_ENGINE_ID_MAX bytes) gets the image's id. */
static int sandbox_config(sm_runner *runner, sm_engine *e, const sm_run_request *req,
                          sandbox *sb, int check_runtime, json_object **out, char *image_id,
                          sm_error *err) {
  *out = NULL;
  const sm_sandbox_settings *s = &req->settings;
  json_object *image = NULL;
  int gvisor = 0;
  int rc = sm_sandbox_image_present(e, s->image, &image, err);
  if (rc == 0 && check_runtime) rc = sm_sandbox_runtime_present(e, s->runtime, &gvisor, err);
  /* On a swarm the runtime is the node's (checked on the task's container). */
  else if (rc == 0) gvisor = strncmp(s->runtime, "runsc", 5) == 0;
  if (rc == 0) rc = prepare_user(runner, e, s, image, sb, err);
  if (image_id) image_id[0] = '\0';
  if (rc == 0 && image_id && json_str(image, "Id", NULL))
    snprintf(image_id, SM_ENGINE_ID_MAX, "%s", json_str(image, "Id", NULL));
  json_object_put(image);
  if (rc) return rc;

  char created[40], owner[300];
  sm_format_time(sm_now(), created, sizeof created);
  sm_sandbox_owner_label(owner, sizeof owner);
  sm_label_info li = {
      .instance = sm_runner_instance(runner),
      .mode = sm_mode_name(sb->mode),
      .project = req->project && *req->project ? req->project : "default",
      .run = req->run_id,
      .worker = req->worker_id,
      .agent = req->agent,
      .scope_key = sb->scope_key,
      .config_hash = sb->hash,
      .created = created,
      .owner = sb->mode == SM_MODE_PER_TOOL ? owner : NULL,
      .principal = sb->mode == SM_MODE_PER_TOOL ? NULL : req->principal,
      .user = sb->user,
      .volume = sb->volume,
  };
  json_object *labels = sm_labels_build(&li);
  if (labels && sb->pooled)
    json_object_object_add(labels, SM_LABEL_PREFIX "pool", json_object_new_string("true"));
  sm_strv env = {0};
  sm_env_spec es = {.home = "/workspace", .tmpdir = "/tmp", .user = sb->user_name};
  rc = sm_env_build(&es, &env, err);
  /* network allowlist: the project's internal network and the proxy. */
  sm_egress_net net;
  int allowlist = sm_sandbox_allowlist(s);
  if (rc == 0 && allowlist && !check_runtime)
    rc = sm_error_set(err, SM_EUNSUPPORTED,
                      "network allowlist is not supported on the swarm backend (docs/network.md); use "
                      "network none or bridge there, or the docker backend");
  if (rc == 0 && allowlist) rc = sandbox_egress_prepare(sm_runner_egress(runner), e, req, &net, &env, err);
  json_object *config = NULL;
  if (rc == 0) {
    sm_container_spec cs = {
        .settings = s,
        .user = sb->user,
        .uid = sb->uid,
        .gid = sb->gid,
        .volume = sb->volume,
        .labels = labels,
        .env = (const char *const *)env.v,
        .n_env = env.n,
        .gvisor = gvisor,
        .network = allowlist ? net.network : NULL,
    };
    config = sm_container_config_build(&cs);
    if (config == NULL) rc = sm_error_set(err, SM_ENOMEM, "building the container spec");
  }
  json_object_put(labels);
  sm_strv_dispose(&env);
  if (rc == 0) *out = config;
  return rc;
}

/* A sandbox's life in the audit trail (sandbox.created, .replaced, .removed). */
static void audit_sandbox(sm_runner *runner, const char *event, const sm_run_request *req, const sandbox *sb,
                          const char *message) {
  sm_audit *a = sm_runner_audit(runner);
  if (a == NULL) return;
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = event;
  ev.request_id = sm_log_request_id();
  ev.agent = req->agent;
  ev.user = req->user;
  ev.project = req->project;
  ev.run_id = req->run_id;
  ev.worker = req->worker_id;
  ev.tool = req->tool;
  ev.sandbox = sb->name;
  ev.mode = sm_mode_name(sb->mode);
  ev.message = message;
  sm_error err = SM_ERROR_INIT;
  if (sm_audit_record(a, &ev, &err) != 0) sm_log(SM_LOG_WARN, "audit: %s", err.message);
}

/* Creates and starts the sandbox named sb->name. SM_ECONFLICT (untouched
 * volume) when the name is taken; any other failure removes what was made. */
static int create_sandbox(sm_runner *runner, sm_engine *e, const sm_run_request *req,
                          sandbox *sb, sm_error *err) {
  const sm_sandbox_settings *s = &req->settings;
  json_object *config = NULL;
  char image_id[SM_ENGINE_ID_MAX];
  int rc = sandbox_config(runner, e, req, sb, 1, &config, image_id, err);
  if (rc) return rc;

  json_object *warnings = NULL;
  rc = sm_engine_container_create(e, sb->name, config, sb->id, &warnings, err);
  json_object_put(config);
  if (rc == SM_ECONFLICT) return rc;
  if (rc) {
    sm_error ignore = SM_ERROR_INIT;
    sm_engine_volume_remove(e, sb->volume, 1, &ignore);
    /* The engine answered but refused this sandbox: it could not be made. */
    if (rc == SM_EENGINE) rc = err->code = SM_ESANDBOX;
    sm_error_wrap(err, "creating sandbox %s", sb->name);
    return rc;
  }
  for (size_t i = 0; warnings && i < json_object_array_length(warnings); i++)
    sm_log(SM_LOG_WARN, "engine warning for %s: %s", sb->name,
           json_object_get_string(json_object_array_get_idx(warnings, i)));
  json_object_put(warnings);
  /* The runtime gives the /tmp tmpfs the mode of the image's /tmp (runc
   * keeps it whatever the mount's mode= says), and images made with
   * `docker import` often have 0755 root there: the tool could then not
   * write /tmp, nor the wrapper its call file (timeouts, OOM reports). */
  unsigned tmp_mode = 0;
  int fix_tmp = tmp_needs_fix(e, sb->id, image_id, &tmp_mode);
  rc = sm_engine_container_start(e, sb->id, err);
  if (rc == 0 && fix_tmp) rc = make_tmp_writable(e, sb, s->image, tmp_mode, err);
  /* Its policy before anything runs in it; else it reaches nothing. */
  if (rc == 0 && sm_sandbox_allowlist(s))
    rc = sandbox_egress_apply(sm_runner_egress(runner), e, req, NULL, sb->id, sb->name, err);
  if (rc) {
    if (rc == SM_EENGINE) rc = err->code = SM_ESANDBOX;
    sm_error_wrap(err, "starting sandbox %s", sb->name);
    sm_error ignore = SM_ERROR_INIT;
    remove_sandbox(e, sm_runner_state_dir(runner), sb->name, sb->volume, &ignore);
    sb->id[0] = '\0';
    return rc;
  }
  sm_log_event(SM_LOG_DEBUG, "sandbox.create",
               SM_LOG_FIELDS(SM_LOG_STR("sandbox", sb->id), SM_LOG_STR("name", sb->name),
                             SM_LOG_STR("mode", sm_mode_name(sb->mode)), SM_LOG_STR("image", s->image),
                             SM_LOG_STR("run_id", req->run_id), SM_LOG_STR("worker_id", req->worker_id)),
               "created sandbox %s", sb->name);
  audit_sandbox(runner, "sandbox.created", req, sb, sb->pooled ? "made ahead for the warm pool" : NULL);
  return 0;
}

/* Waits (up to the call's timeout) until no call is in flight in sandbox
 * name, then returns holding its exclusive lock. */
static int wait_exclusive(const char *state_dir, const char *name, double wait_s,
                          const char *why, sm_state_lock **out, sm_error *err) {
  double deadline = sm_monotonic_ms() + (wait_s > 1 ? wait_s : 1) * 1000.0;
  for (;;) {
    int rc = sm_state_exclusive_try(state_dir, name, out, err);
    if (rc != SM_EBUSY) return rc;
    if (sm_monotonic_ms() >= deadline)
      return sm_error_set(err, SM_EBUSY,
                          "sandbox %s %s, but a call is still running in it; retry when it has "
                          "finished",
                          name, why);
    sleep_ms(REPLACE_POLL_MS);
  }
}

/* The call's hold on its sandbox: shared with other calls, or (a leased
 * call) the sandbox to itself, waiting up to the call's timeout. */
static int take_busy(const char *state_dir, const sm_run_request *req, sandbox *sb,
                     sm_error *err) {
  if (req->n_secret_env == 0) return sm_state_busy_acquire(state_dir, sb->name, &sb->busy, err);
  return wait_exclusive(state_dir, sb->name,
                        req->settings.timeout_s > 0 ? req->settings.timeout_s : 3600,
                        "is needed alone by a call with leased credentials", &sb->busy, err);
}

static int acquire_keyed(sm_runner *runner, sm_engine *e, const sm_run_request *req,
                         sandbox *sb, sm_error *err) {
  const char *state_dir = sm_runner_state_dir(runner);
  const char *project = req->project && *req->project ? req->project : "default";
  /* Found before by this runner with this configuration: no inspect. If it
   * has gone or stopped since, the exec fails and the call looks again. */
  sm_pool_cached hit;
  if (sm_pool_cache_get(runner, sb->name, sb->hash, &hit) &&
      (sb->mode != SM_MODE_PER_WORKER || strcmp(hit.project, project) == 0)) {
    int rc = take_busy(state_dir, req, sb, err);
    if (rc) return rc;
    snprintf(sb->id, sizeof sb->id, "%s", hit.id);
    sb->uid = hit.uid;
    sb->gid = hit.gid;
    sb->reused = 1;
    sb->cached = 1;
    return 0;
  }
  char key[SM_NAME_MAX + 16];
  snprintf(key, sizeof key, "create-%s", sb->name);
  sm_state_lock *key_lock = NULL;
  int rc = sm_state_key_lock(state_dir, key, &key_lock, err);
  if (rc) return sm_error_wrap(err, "locking sandbox key %s", sb->name);

  for (int attempt = 0; attempt < 5; attempt++) {
    json_object *insp = NULL;
    sm_state_lock *excl = NULL;
    rc = sm_engine_container_inspect(e, sb->name, &insp, err);
    if (rc == SM_ENOTFOUND) {
      rc = 0;
    } else if (rc) {
      sm_error_wrap(err, "looking up sandbox %s", sb->name);
      break;
    } else {
      const char *managed = label_of(insp, "managed");
      const char *inst = label_of(insp, "instance");
      const char *hash = label_of(insp, "config-hash");
      const char *proj = label_of(insp, "project");
      if (!managed || strcmp(managed, "true") != 0 || !inst ||
          strcmp(inst, sm_runner_instance(runner)) != 0) {
        json_object_put(insp);
        rc = sm_error_set(err, SM_ESANDBOX,
                          "a container named %s exists that this sandman instance did not make; "
                          "remove or rename it",
                          sb->name);
        break;
      }
      if (!sm_principal_may_use(req->principal, label_of(insp, "principal"))) {
        /* Only a key collision or a hand-made container gets here: a
         * worker's keys carry its principal. */
        rc = sm_error_set(err, SM_EPOLICY,
                          "sandbox %s belongs to another worker; this call may not use it",
                          sb->name);
        json_object_put(insp);
        break;
      }
      if (sb->mode == SM_MODE_PER_WORKER && proj && strcmp(proj, project) != 0) {
        rc = sm_error_set(err, SM_EPOLICY,
                          "worker '%s' is pinned to project '%s'; a call for project '%s' is "
                          "refused",
                          req->worker_id ? req->worker_id : sb->scope_key, proj, project);
        json_object_put(insp);
        break;
      }
      int stale = !hash || strcmp(hash, sb->hash) != 0;
      if (!stale && is_running(insp)) {
        const char *id = json_str(insp, "Id", NULL);
        snprintf(sb->id, sizeof sb->id, "%s", id ? id : sb->name);
        /* Its calls' user: the label (the container itself runs as root);
         * Config.User for a sandbox made before the label existed. */
        const char *u = label_of(insp, "user");
        ids_from_user(u && *u ? u : json_str(insp, "Config", "User"), &sb->uid, &sb->gid);
        sb->reused = 1;
        json_object_put(insp);
      } else {
        const char *old = json_str(insp, "Id", NULL);
        snprintf(sb->replaced, sizeof sb->replaced, "%s", old ? old : sb->name);
        replace_reason(insp, &req->settings, stale, sb->because, sizeof sb->because);
        json_object_put(insp);
        /* Replaced (new configuration) or broken (not running): never while
         * a call is in flight in it. */
        rc = wait_exclusive(state_dir, sb->name,
                            req->settings.timeout_s > 0 ? req->settings.timeout_s : 3600,
                            "must be replaced (its configuration changed)", &excl, err);
        if (rc) break;
        sm_log(SM_LOG_WARN, "replacing sandbox %s: %s; what was installed in it is gone",
               sb->name, sb->because);
        audit_sandbox(runner, "sandbox.replaced", req, sb, sb->because);
        rc = remove_sandbox(e, state_dir, sb->name, sb->volume, err);
        if (rc) {
          sm_state_unlock(excl);
          break;
        }
      }
    }
    if (!sb->reused) {
      if (excl == NULL) {
        /* A volume left by a crash would carry old files and old options. */
        sm_error ignore = SM_ERROR_INIT;
        sm_engine_volume_remove(e, sb->volume, 1, &ignore);
        sm_state_forget(state_dir, sb->name);
      }
      rc = create_sandbox(runner, e, req, sb, err);
      sm_state_unlock(excl);
      if (rc == SM_ECONFLICT) {
        sm_log(SM_LOG_DEBUG, "sandbox %s was created elsewhere meanwhile: looking again",
               sb->name);
        sleep_ms(50);
        continue;
      }
      if (rc) break;
    }
    rc = take_busy(state_dir, req, sb, err);
    if (rc == 0) {
      sm_pool_cached c;
      memset(&c, 0, sizeof c);
      snprintf(c.id, sizeof c.id, "%s", sb->id);
      snprintf(c.hash, sizeof c.hash, "%s", sb->hash);
      snprintf(c.project, sizeof c.project, "%s", project);
      c.uid = sb->uid;
      c.gid = sb->gid;
      sm_pool_cache_put(runner, sb->name, &c);
    }
    break;
  }
  sm_state_unlock(key_lock);
  return rc;
}

/* A per_tool sandbox's random name, volume and key. */
static int tool_names(sm_runner *runner, sandbox *sb, sm_error *err) {
  char rnd[17];
  int rc = sm_random_hex(rnd, 8, err);
  if (rc) return rc;
  snprintf(sb->name, sizeof sb->name, "sandman-%s-tool-%s", sm_runner_instance(runner), rnd);
  snprintf(sb->volume, sizeof sb->volume, "%s-ws", sb->name);
  snprintf(sb->scope_key, sizeof sb->scope_key, "tool:%s", rnd);
  return 0;
}

/* The call's sandbox is the warm pool's item. */
static void from_pool(sandbox *sb, const sm_pool_item *item) {
  snprintf(sb->name, sizeof sb->name, "%s", item->name);
  snprintf(sb->volume, sizeof sb->volume, "%s", item->volume);
  snprintf(sb->scope_key, sizeof sb->scope_key, "%s", item->scope_key);
  snprintf(sb->id, sizeof sb->id, "%s", item->id);
  snprintf(sb->pool_key, sizeof sb->pool_key, "%s", item->pool_key);
  sb->uid = item->uid;
  sb->gid = item->gid;
  sb->pooled = 1;
}

static int acquire_per_tool(sm_runner *runner, sm_engine *e, const sm_run_request *req,
                            sandbox *sb, sm_error *err) {
  sm_pool_item item;
  if (sm_pool_take(runner, req, sb->hash, &item)) {
    from_pool(sb, &item);
    int rc = sm_state_busy_acquire(sm_runner_state_dir(runner), sb->name, &sb->busy, err);
    if (rc == 0) return 0;
    sm_pool_call_done(runner, sb->pool_key);
    sb->pool_key[0] = '\0';
    sm_error ignore = SM_ERROR_INIT;
    if (sm_pool_remove_later(runner, sb->name, sb->volume, NULL) != 0)
      remove_sandbox(e, sm_runner_state_dir(runner), sb->name, sb->volume, &ignore);
    sb->id[0] = '\0';
    return rc;
  }
  int rc = tool_names(runner, sb, err);
  if (rc) return rc;
  /* Busy from the start, so a reap never takes it while it is being set up. */
  rc = sm_state_busy_acquire(sm_runner_state_dir(runner), sb->name, &sb->busy, err);
  if (rc) return rc;
  rc = create_sandbox(runner, e, req, sb, err);
  if (rc == SM_ECONFLICT)
    rc = sm_error_set(err, SM_ESANDBOX, "sandbox name %s is taken", sb->name);
  if (rc) {
    sm_state_unlock(sb->busy);
    sb->busy = NULL;
    sm_state_forget(sm_runner_state_dir(runner), sb->name);
  }
  return rc;
}

int sm_sandbox_remove(sm_engine *e, const char *state_dir, const char *name,
                      const char *volume, sm_error *err) {
  return remove_sandbox(e, state_dir, name, volume, err);
}


/* A sandbox found through the cache or the pool that has gone (or stopped)
 * since: the call looks once more. */
static int retry_gone(const sandbox *sb, int rc) {
  if (rc == SM_ENOTFOUND) return sb->mode != SM_MODE_PER_TOOL || sb->pooled;
  if (rc == SM_ECONFLICT) return sb->cached || sb->pooled;
  return 0;
}

static void release(sm_runner *runner, sm_engine *e, const sm_run_request *req, sandbox *sb) {
  const char *state_dir = sm_runner_state_dir(runner);
  if (sb->pool_key[0]) {
    sm_pool_call_done(runner, sb->pool_key);
    sb->pool_key[0] = '\0';
  }
  if (sb->mode == SM_MODE_PER_TOOL && sb->id[0])
    audit_sandbox(runner, "sandbox.removed", req, sb, "a per_tool sandbox goes after its call");
  if (sb->mode == SM_MODE_PER_TOOL) {
    /* Off the caller's time; the queue now holds the busy lock. */
    if (sb->id[0] && sm_pool_remove_later(runner, sb->name, sb->volume, sb->busy) == 0) {
      sb->busy = NULL;
      return;
    }
    if (sb->id[0]) {
      sm_error err = SM_ERROR_INIT;
      if (remove_sandbox(e, state_dir, sb->name, sb->volume, &err) != 0)
        sm_log(SM_LOG_WARN, "%s (a reap will remove it)", err.message);
    }
  } else if (sb->id[0] && sm_pool_touch_due(runner, sb->name, sm_now())) {
    sm_error err = SM_ERROR_INIT;
    if (sm_state_touch(state_dir, sb->name, sm_now(), &err) != 0)
      sm_log(SM_LOG_WARN, "recording last use of %s: %s", sb->name, err.message);
  }
  sm_state_unlock(sb->busy);
  sb->busy = NULL;
}

/* Before looking again: forget what we knew, and the workspace state loaded
 * for the sandbox that is gone (a new one starts with an empty manifest). */
static void retry_release(sm_runner *runner, sm_engine *e, const sm_run_request *req,
                          sandbox *sb, sm_workspace_sync **ws) {
  if (sb->cached) sm_pool_cache_drop(runner, sb->name);
  if (sb->pooled) sm_pool_forget(runner, req, sb->hash);
  release(runner, e, req, sb);
  if (*ws) {
    sm_workspace_sync_free(*ws);
    *ws = NULL;
  }
}

/* ---- the swarm backend (swarm.c): the same container config, made a
 * service; the call then runs on the task's node ---- */
typedef struct swarm_config_ud {
  sm_runner *runner;
  const sm_run_request *req;
  sandbox *sb;
} swarm_config_ud;

static int swarm_config(void *ud, sm_engine *manager, json_object **config, int *uid, int *gid,
                        sm_error *err) {
  swarm_config_ud *c = ud;
  /* The runtime is the node's: checked on the task's container. */
  int rc = sandbox_config(c->runner, manager, c->req, c->sb, 0, config, NULL, err);
  *uid = c->sb->uid;
  *gid = c->sb->gid;
  return rc;
}

/* A ready sandbox of the warm pool for this per_tool call (1), or none (0:
 * the call makes its own). One that cannot be taken is removed. */
static int take_pooled_swarm(sm_runner *runner, sandbox_swarm *sw, sm_engine *m,
                             const sm_run_request *req, sandbox *sb, double lease_s) {
  sm_pool_item item;
  if (!sm_pool_take(runner, req, sb->hash, &item)) return 0;
  sm_error err = SM_ERROR_INIT;
  if (sandbox_swarm_take(sw, m, &item.swarm, lease_s, &sb->swarm, &err) != 0) {
    sm_log(SM_LOG_INFO, "%s: the call makes a sandbox of its own", err.message);
    sm_pool_call_done(runner, item.pool_key);
    sm_error ignore = SM_ERROR_INIT;
    sandbox_swarm_remove(m, item.swarm.name, 1, &ignore);
    return 0;
  }
  from_pool(sb, &item);
  sb->reused = 0;
  return 1;
}

/* Ends the call's hold on a swarm sandbox (a per_tool one goes). */
static void release_swarm(sm_runner *runner, sandbox_swarm *sw, sm_engine *m,
                          const sm_run_request *req, sandbox *sb) {
  if (sb->mode == SM_MODE_PER_TOOL && sb->swarm.lease[0])
    audit_sandbox(runner, "sandbox.removed", req, sb, "a per_tool sandbox goes after its call");
  if (sb->pool_key[0]) {
    sm_pool_call_done(runner, sb->pool_key);
    sb->pool_key[0] = '\0';
  }
  sandbox_swarm_release(sw, m, &sb->swarm);
}

static int acquire_swarm(sm_runner *runner, sandbox_swarm *sw, sm_engine *m, const sm_run_request *req,
                         sandbox *sb, sm_error *err) {
  const char *net = req->settings.network;
  if (strcmp(net, "none") != 0 && strcmp(net, "bridge") != 0)
    return sm_error_set(err, SM_EUNSUPPORTED,
                        "network '%s' is not available on the swarm backend: use none (a network "
                        "of the sandbox's own that reaches nothing) or bridge (docs/scale-out.md)",
                        net);
  double timeout = req->settings.timeout_s;
  if (sb->mode == SM_MODE_PER_TOOL) {
    if (take_pooled_swarm(runner, sw, m, req, sb, timeout > 0 ? timeout + 600 : 24 * 3600.0))
      return 0;
    int rc = tool_names(runner, sb, err);
    if (rc) return rc;
  }
  char service[SM_SWARM_SERVICE_NAME_MAX + 1];
  sandbox_swarm_service_name(sb->name, service);
  swarm_config_ud cu = {runner, req, sb};
  const char *project = req->project && *req->project ? req->project : "default";
  sandbox_swarm_want w = {
      .name = service,
      .instance = sm_runner_instance(runner),
      .hash = sb->hash,
      .project = sb->mode == SM_MODE_PER_WORKER ? project : NULL,
      .principal = req->principal,
      .per_tool = sb->mode == SM_MODE_PER_TOOL,
      /* Past the call's timeout and its clean-up; a dead runner's lease
       * ends there. A call with no timeout holds it for a day. */
      .lease_s = timeout > 0 ? timeout + 600 : 0,
      .config = swarm_config,
      .config_ud = &cu,
  };
  int rc = sandbox_swarm_acquire(sw, m, &w, &sb->swarm, err);
  if (rc) return rc;
  snprintf(sb->id, sizeof sb->id, "%s", sb->swarm.container_id);
  sb->uid = sb->swarm.uid;
  sb->gid = sb->swarm.gid;
  sb->reused = sb->swarm.reused;
  if (!sb->reused) audit_sandbox(runner, "sandbox.created", req, sb, NULL);
  return 0;
}

/* A pooled per_tool service on the swarm, made like a call's and holding
 * the pool's lease; its node checks are done, so a call taking it runs at
 * once. */
static int prewarm_swarm(sm_runner *runner, sandbox_swarm *sw, sm_engine *manager,
                         const sm_run_request *req, sandbox *sb, sm_pool_item *out,
                         sm_error *err) {
  char service[SM_SWARM_SERVICE_NAME_MAX + 1];
  sandbox_swarm_service_name(sb->name, service);
  char owner[300], node_id[SM_ENGINE_ID_MAX];
  sm_sandbox_owner_label(owner, sizeof owner);
  int rc = sandbox_swarm_pool_node(sw, manager, sb->hash, owner, node_id, err);
  if (rc) return sm_error_wrap(err, "placing a warm pool sandbox");
  swarm_config_ud cu = {runner, req, sb};
  sandbox_swarm_want w = {
      .name = service,
      .instance = sm_runner_instance(runner),
      .hash = sb->hash,
      .node_id = node_id,
      .per_tool = 1,
      .lease_s = SM_SWARM_POOL_LEASE_S,
      .config = swarm_config,
      .config_ud = &cu,
  };
  rc = sandbox_swarm_acquire(sw, manager, &w, &out->swarm, err);
  sandbox_swarm_pool_placed(sw, node_id);
  if (rc) return rc;
  out->swarm.node = NULL; /* this thread's client: a call takes its own */
  snprintf(sb->id, sizeof sb->id, "%s", out->swarm.container_id);
  snprintf(sb->name, sizeof sb->name, "%s", service);
  sb->uid = out->swarm.uid;
  sb->gid = out->swarm.gid;
  return 0;
}

int sm_sandbox_prewarm(sm_runner *runner, sm_engine *e, const sm_run_request *req,
                       sm_pool_item *out, sm_error *err) {
  sandbox sb;
  memset(&sb, 0, sizeof sb);
  memset(out, 0, sizeof *out);
  sb.mode = SM_MODE_PER_TOOL;
  sb.pooled = 1;
  sm_sandbox_settings_hash(&req->settings, sb.hash);
  char rnd[17];
  int rc = sm_random_hex(rnd, 8, err);
  if (rc) return rc;
  snprintf(sb.name, sizeof sb.name, "sandman-%s-pool-%s", sm_runner_instance(runner), rnd);
  snprintf(sb.volume, sizeof sb.volume, "%s-ws", sb.name);
  snprintf(sb.scope_key, sizeof sb.scope_key, "tool:%s", rnd);
  sandbox_swarm *sw = sm_runner_swarm(runner);
  rc = sw ? prewarm_swarm(runner, sw, e, req, &sb, out, err) : create_sandbox(runner, e, req, &sb, err);
  if (rc == SM_ECONFLICT)
    return sm_error_set(err, SM_ESANDBOX, "sandbox name %s is taken", sb.name);
  if (rc) return rc;
  snprintf(out->id, sizeof out->id, "%s", sb.id);
  snprintf(out->name, sizeof out->name, "%s", sb.name);
  snprintf(out->volume, sizeof out->volume, "%s", sb.volume);
  snprintf(out->scope_key, sizeof out->scope_key, "%s", sb.scope_key);
  out->uid = sb.uid;
  out->gid = sb.gid;
  return 0;
}

int sm_sandbox_discard(sm_runner *runner, sm_engine *e, const char *name, const char *volume,
                       sm_error *err) {
  if (sm_runner_swarm(runner) == NULL)
    return sm_sandbox_remove(e, sm_runner_state_dir(runner), name, volume, err);
  int rc = sandbox_swarm_remove(e, name, 1, err);
  return rc == SM_ENOTFOUND ? 0 : rc;
}

unsigned sm_sandbox_pool_width(sm_runner *runner, sm_engine *e) {
  sandbox_swarm *sw = sm_runner_swarm(runner);
  return sw ? sandbox_swarm_ready_nodes(sw, e) : 1;
}

/* The call goes over an agent session when one is parked for this
 * container (the pool opened it) or, in a keyed sandbox this runner has
 * used before, when one can be opened (see agent.c). */
static int take_agent(sm_runner *runner, sm_engine *e, const sandbox *sb, sm_exec_target *t,
                      sm_error *err) {
  sm_agents *a = sm_runner_agents(runner);
  if (a == NULL || !sm_agents_enabled(a)) return 0;
  int open_new = sb->mode != SM_MODE_PER_TOOL && (sb->cached || sb->swarm.node != NULL);
  if (!open_new && !sb->pooled) return 0;
  int rc = sm_agent_take(a, e, sb->id, sb->user, open_new, &t->agent);
  if (rc) return sm_error_set(err, rc, "the sandbox %s is gone", sb->name);
  if (t->agent) t->agents = a;
  else if (open_new) sm_agent_note_fallback(a);
  return 0;
}

/* Parks the session for the sandbox's next call (keep) or closes it. */
static void drop_agent(sm_exec_target *t, int keep) {
  if (t->agent && keep) sm_agent_give_back(t->agents, t->agent);
  else sm_agent_close(t->agent);
  t->agent = NULL;
  t->agents = NULL;
}

/* sm_workspace_target.run over the call's session; 1 (use an engine exec)
 * once the session is broken, e.g. the tool killed the agent. */
static int run_via_agent(void *ud, const char *const *argv, size_t argc, sm_read_fn in,
                         void *in_ud, sm_output_fn out, void *out_ud, int *exit_code,
                         sm_error *err) {
  sm_exec_target *t = ud;
  if (t->agent == NULL || sm_agent_broken(t->agent)) return 1;
  return sm_agent_run(t->agent, argv, argc, in, in_ud, out, out_ud,
                      in ? 3600 * 1000 : 300 * 1000, exit_code, err);
}

/* sm_workspace_target.install: the copy in of a sandbox that may run
 * processes is extracted by the agent binary as the sandbox's user. */
typedef struct unpacker_ctx {
  sm_runner *runner;
  sm_engine *e;
  const char *cid;
} unpacker_ctx;

static int install_unpacker(void *ud, sm_error *err) {
  unpacker_ctx *u = ud;
  return sm_agent_install(sm_runner_agents(u->runner), u->e, u->cid, err);
}

static void merge_excludes(const sm_run_request *req, sm_string_list *out) {
  *out = req->settings.excludes;
  if (req->extra_excludes)
    for (size_t i = 0; i < req->extra_excludes->n; i++)
      if (sm_string_list_add(out, req->extra_excludes->items[i], NULL) != 0) break;
}

static void helper_dispose(const char **argv) {
  if (argv) free((char *)argv[0]);
  free(argv);
}

/* A call of sandman's helper: the same request with the helper's path in
 * front of its arguments, once the helper is installed in container cid. */
static int helper_call(sm_runner *runner, sm_engine *e, const char *cid,
                       const sm_run_request *req, sm_run_request *out, const char ***argv,
                       sm_error *err) {
  if (!req->helper) return 0;
  helper_dispose(*argv);
  *argv = calloc(req->argc + 2, sizeof **argv);
  char *path = malloc(128);
  if (*argv == NULL || path == NULL) {
    free(path);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  sm_agent_binary_path(path, 128);
  int rc = sm_agent_install(sm_runner_agents(runner), e, cid, err);
  if (rc) {
    free(path);
    return sm_error_wrap(err, "installing sandman's helper in the sandbox");
  }
  (*argv)[0] = path; /* freed with the array (below) */
  for (size_t i = 0; i < req->argc; i++) (*argv)[i + 1] = req->argv[i];
  *out = *req;
  out->argv = *argv;
  out->argc = req->argc + 1;
  return 0;
}

int sm_run_container(sm_runner *runner, const sm_run_request *req, sm_run_result *out,
                     sm_error *err) {
  const sm_sandbox_settings *s = &req->settings;
  sm_engine *e = NULL;
  int rc = sm_runner_engine(runner, &e, err);
  if (rc) {
    sm_result_fail(out, sm_failure_kind_for(rc), err);
    return 0;
  }
  sandbox sb;
  memset(&sb, 0, sizeof sb);
  sb.mode = s->mode;
  sm_sandbox_settings_hash(s, sb.hash);
  if (sb.mode != SM_MODE_PER_TOOL) {
    rc = sm_scope_key(req, sb.mode, sb.scope_key, sizeof sb.scope_key, err);
    if (rc == 0) rc = sm_keyed_name(sm_runner_instance(runner), sb.mode, sb.scope_key, sb.name,
                                    sizeof sb.name, err);
    if (rc) {
      sm_result_fail(out, SM_FAIL_SANDBOX, err);
      return rc;
    }
    snprintf(sb.volume, sizeof sb.volume, "%s-ws", sb.name);
  }

  const char *state_dir = sm_runner_state_dir(runner);
  sandbox_swarm *sw = sm_runner_swarm(runner);
  sm_engine *manager = e; /* the swarm backend's; e becomes the task's node */
  sm_workspace_sync *ws = NULL;
  sm_capture cap;
  sm_capture_init(&cap, s->stdout_cap, s->stderr_cap, req->on_output, req->on_output_ud);
  cap.forward_only = req->stdout_forward_only;
  sm_strv env = {0};
  sm_exec_outcome oc;
  memset(&oc, 0, sizeof oc);
  sm_run_request helper_req;
  const char **helper_argv = NULL;
  int sync_failed = 0;
  sm_error sync_err = SM_ERROR_INIT;

  /* A keyed sandbox can vanish between lookup and exec (a forced reap):
   * then we look it up (and create it) once more. */
  sm_exec_target t = {e, NULL, NULL, 0, NULL, NULL, NULL};
  char quiet[128];
  for (int attempt = 0; attempt < 2; attempt++) {
    sb.reused = 0;
    sb.pooled = 0;
    sb.cached = 0;
    sb.id[0] = '\0';
    rc = sw ? acquire_swarm(runner, sw, manager, req, &sb, err)
         : sb.mode == SM_MODE_PER_TOOL ? acquire_per_tool(runner, e, req, &sb, err)
                                       : acquire_keyed(runner, e, req, &sb, err);
    if (rc) goto fail;
    if (sw) e = t.engine = sb.swarm.node;
    /* A sandbox made before (or by the pool): this call's policy, which a
     * reloaded configuration may have changed since. */
    if (sm_sandbox_allowlist(s) && (sb.reused || sb.pooled) &&
        (rc = sandbox_egress_apply(sm_runner_egress(runner), e, req, NULL, sb.id, sb.name, err)) != 0)
      goto fail_release;
    snprintf(out->sandbox_id, sizeof out->sandbox_id, "%s", sb.id);
    out->reused = sb.reused;
    snprintf(out->replaced_previous, sizeof out->replaced_previous, "%s", sb.replaced);
    snprintf(out->replaced_because, sizeof out->replaced_because, "%s", sb.because);
    /* Every exec of the call names its user: the container runs as root. */
    snprintf(sb.user, sizeof sb.user, "%d:%d", sb.uid, sb.gid);
    t.container_id = sb.id;
    t.user = sb.user;
    t.per_tool = sb.mode == SM_MODE_PER_TOOL;
    /* A call with leased credentials never goes through the agent (a
     * process of the sandbox's user that earlier calls could have touched),
     * and in a shared sandbox it runs alone: every other process of the
     * sandbox's user stopped while it runs (exec.c, src/agent/quiet.c). */
    t.quiet = NULL;
    if (req->n_secret_env > 0 && sb.mode != SM_MODE_PER_TOOL && sw) {
      /* Several runners share a swarm sandbox and none can hold it alone. */
      rc = sm_error_set(err, SM_ESANDBOX,
                        "a call with leased credentials runs alone in its sandbox, which the "
                        "swarm backend cannot promise for %s sandboxes; lease in mode per_tool",
                        sm_mode_name(sb.mode));
    } else if (req->n_secret_env > 0 && sb.mode != SM_MODE_PER_TOOL) {
      sm_agent_binary_path(quiet, sizeof quiet);
      rc = sm_agent_install(sm_runner_agents(runner), e, sb.id, err);
      if (rc == 0) t.quiet = quiet;
      else if (!retry_gone(&sb, rc))
        sm_error_wrap(err, "installing sandman's helper to run a call with leased credentials "
                           "alone in sandbox %s", sb.name);
    }
    if (rc == 0 && req->n_secret_env == 0) rc = take_agent(runner, e, &sb, &t, err);
    if (!sw && attempt == 0 && retry_gone(&sb, rc)) {
      retry_release(runner, e, req, &sb, &ws);
      continue;
    }
    if (rc) goto fail_release;

    /* A per_tool sandbox is this call's alone and nothing has run in it
     * yet: the engine may extract its copy in. Any other copy in goes
     * through the unpacker, as the sandbox's user. */
    char unpacker[128];
    sm_agent_binary_path(unpacker, sizeof unpacker);
    unpacker_ctx uctx = {runner, e, sb.id};
    sm_workspace_target target = {.engine = e,
                                  .container_id = sb.id,
                                  .sandbox_path = "/workspace",
                                  .uid = sb.uid,
                                  .gid = sb.gid,
                                  .untouched = sb.mode == SM_MODE_PER_TOOL,
                                  .unpacker = unpacker,
                                  .install = install_unpacker,
                                  .install_ud = &uctx};
    if (t.agent) {
      /* The workspace's listings and deletes go over the session too. */
      target.run = run_via_agent;
      target.run_ud = &t;
    }
    sm_sync_mode sync = req->sync == SM_SYNC_DEFAULT ? SM_SYNC_INOUT : req->sync;
    if (req->workspace && sync != SM_SYNC_NONE && ws == NULL) {
      char manifest[PATH_MAX];
      sm_string_list excludes;
      merge_excludes(req, &excludes);
      /* On a swarm, per container: a sandbox made again elsewhere starts
       * with an empty manifest, so its workspace is copied in whole. */
      snprintf(manifest, sizeof manifest, "%s/workspaces/%s.manifest", state_dir,
               sw ? sb.swarm.state_name : sb.name);
      rc = sm_workspace_sync_new(&ws, req->workspace, sb.mode == SM_MODE_PER_TOOL ? NULL : manifest,
                                 &excludes, NULL, err);
      if (rc == 0) rc = sm_workspace_sync_set_protect(ws, &s->protect, err);
      if (rc == 0) rc = sm_workspace_sync_set_redact(ws, req->secret_env, req->n_secret_env, err);
      if (rc) goto fail_release;
    }
    if (ws) {
      rc = sm_workspace_sync_in(ws, &target, err);
      if (sw) rc = sandbox_swarm_check_node_lost(sw, manager, &sb.swarm, rc, err);
      if (!sw && attempt == 0 && retry_gone(&sb, rc)) {
        drop_agent(&t, 0);
        retry_release(runner, e, req, &sb, &ws);
        continue;
      }
      if (rc) {
        sm_error_wrap(err, "copying the workspace into %s", sb.name);
        goto fail_release;
      }
    }

    char token[17], marker[64];
    rc = sm_random_hex(token, 8, err);
    if (rc) goto fail_release;
    snprintf(marker, sizeof marker, "SANDMAN_CALL=%s", token);
    sm_strv_dispose(&env);
    sm_env_spec es = {
        .home = "/workspace",
        .tmpdir = "/tmp",
        .host_env = (const char *const *)environ,
        .passthrough = &s->env_passthrough,
        .explicit_env = req->env,
        .n_explicit = req->n_env,
        .secret_env = req->secret_env,
        .n_secret = req->n_secret_env,
        .marker = marker,
    };
    rc = sm_env_build(&es, &env, err);
    if (rc) goto fail_release;

    rc = helper_call(runner, e, sb.id, req, &helper_req, &helper_argv, err);
    if (sw) rc = sandbox_swarm_check_node_lost(sw, manager, &sb.swarm, rc, err);
    if (!sw && attempt == 0 && retry_gone(&sb, rc)) {
      drop_agent(&t, 0);
      retry_release(runner, e, req, &sb, &ws);
      continue;
    }
    if (rc) goto fail_release;
    rc = sm_exec_call(&t, req->helper ? &helper_req : req, &env, &cap, &oc, err);
    if (sw) rc = sandbox_swarm_check_node_lost(sw, manager, &sb.swarm, rc, err);
    if (!sw && attempt == 0 && retry_gone(&sb, rc)) {
      drop_agent(&t, 0);
      retry_release(runner, e, req, &sb, &ws);
      continue;
    }
    if (rc) goto fail_release;
    out->started = 1;

    if (ws && sync == SM_SYNC_INOUT) {
      /* The tool ran: a failed copy out is added to its result. */
      sync_failed = sm_result_copy_out(out, ws, &target, sb.name, &sync_err) != 0;
      /* On a swarm the copy out may have failed because the node is gone. */
      if (sync_failed && sw)
        sandbox_swarm_check_node_lost(sw, manager, &sb.swarm, sync_err.code, &sync_err);
    }
    break;
  }
  /* A keyed sandbox's first call here went through the engine: its next
   * one can find a session ready (long-running processes only). */
  if (!sw && t.agent == NULL && sb.mode != SM_MODE_PER_TOOL && !sb.cached && sb.id[0] &&
      sm_agents_enabled(sm_runner_agents(runner)))
    sm_pool_prepare_agent_later(runner, sb.id, sb.user);
  /* A per_tool container goes now: its session goes with it. */
  drop_agent(&t, sb.mode != SM_MODE_PER_TOOL);
  if (sw) release_swarm(runner, sw, manager, req, &sb);
  else release(runner, e, req, &sb);
  if (ws) sm_workspace_sync_free(ws);
  sm_strv_dispose(&env);
  helper_dispose(helper_argv);
  rc = sm_capture_to_result(&cap, out);
  sm_capture_dispose(&cap);
  if (rc) return sm_error_set(err, SM_ENOMEM, "keeping the tool's output");
  sm_result_apply_outcome(out, &oc, s);
  if (sync_failed) sm_result_sync_failed(out, &sync_err);
  return 0;

fail_release:
  drop_agent(&t, 0);
  if (sw) release_swarm(runner, sw, manager, req, &sb);
  else release(runner, e, req, &sb);
fail:
  if (ws) sm_workspace_sync_free(ws);
  sm_strv_dispose(&env);
  helper_dispose(helper_argv);
  sm_capture_to_result(&cap, out);
  sm_capture_dispose(&cap);
  sm_result_fail(out, sm_failure_kind_for(rc), err);
  return 0;
}
