/* A sandbox's life on the docker backend (lifecycle.h): the checks before
 * creating, the hardened config (shared with the swarm backend), creation
 * and start, removal, and the audit trail's entries. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/state.h>
#include <sandman/util.h>

#include "common/thread.h"
#include "sandbox/env.h"
#include "sandbox/helper.h"
#include "sandbox/lifecycle.h"
#include "sandbox/meta.h"
#include "sandbox/network.h"
#include "sandbox/sandbox_settings.h"
#include "sandbox/spec.h"
#include "sandbox/users.h"

const char *sandbox_json_str(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (!json_object_object_get_ex(o, a, &x)) return NULL;
  if (b == NULL) return json_object_is_type(x, json_type_string) ? json_object_get_string(x) : NULL;
  if (!json_object_object_get_ex(x, b, &y) || !json_object_is_type(y, json_type_string))
    return NULL;
  return json_object_get_string(y);
}

const char *sandbox_label_of(json_object *inspect, const char *key) {
  json_object *cfg = NULL, *labels = NULL, *v = NULL;
  char full[128];
  snprintf(full, sizeof full, SM_LABEL_PREFIX "%s", key);
  if (!json_object_object_get_ex(inspect, "Config", &cfg) ||
      !json_object_object_get_ex(cfg, "Labels", &labels) ||
      !json_object_object_get_ex(labels, full, &v) || !json_object_is_type(v, json_type_string))
    return NULL;
  return json_object_get_string(v);
}

/* ---- checks before creating ---- */

int sandbox_runtime_present(sm_engine *e, const char *runtime, int *gvisor, sm_error *err) {
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

int sandbox_image_present(sm_engine *e, const char *image, json_object **out, sm_error *err) {
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

/* ---- the sandbox's user ---- */

/* The container's user as numbers, so that the /workspace volume can be
 * owned by it and later calls can read it back from Config.User. */
static int prepare_user(const sandbox_ctx *ctx, sm_engine *e, const sm_sandbox_settings *s,
                        json_object *image, sandbox_box *sb, sm_error *err) {
  const char *image_user = sandbox_json_str(image, "Config", "User");
  char spec[128];
  int uid, gid;
  sandbox_container_user(s, image_user, spec, sizeof spec, &uid, &gid);
  char *colon = strchr(spec, ':');
  snprintf(sb->user_name, sizeof sb->user_name, "%.*s",
           colon ? (int)(colon - spec) : (int)strlen(spec), spec);
  if (uid < 0) {
    int rc = sandbox_image_user(e, ctx->instance, s->image, spec, &uid, &gid, err);
    if (rc) return rc;
  }
  sb->uid = uid;
  sb->gid = gid;
  snprintf(sb->user, sizeof sb->user, "%d:%d", uid, gid);
  return 0;
}

int sandbox_plan_user(const sandbox_ctx *ctx, sm_engine *e, const sm_sandbox_settings *s,
                      sandbox_box *sb, sm_error *err) {
  json_object *image = NULL;
  int rc = sandbox_image_present(e, s->image, &image, err);
  if (rc == 0) rc = prepare_user(ctx, e, s, image, sb, err);
  json_object_put(image);
  return rc;
}

static int ignore_missing(int rc) { return rc == SM_ENOTFOUND ? 0 : rc; }

int sandbox_remove(sm_engine *e, const char *state_dir, const char *name, const char *volume,
                   int relay, sm_error *err) {
  int rc = sandbox_remove_keep_state(e, name, volume, relay, err);
  sm_state_forget(state_dir, name);
  return rc;
}

/* Removes the container and its volume (volume NULL: the container
 * only); what is already gone is fine. */
int sandbox_remove_keep_state(sm_engine *e, const char *name, const char *volume, int relay,
                              sm_error *err) {
  sm_error e1 = SM_ERROR_INIT;
  /* Its egress relay (network allowlist), if it may have one. */
  if (relay && sm_egress_revoke(e, name, &e1) != 0) {
    sm_log(SM_LOG_WARN, "sandbox %s: removing its egress relay: %s", name, e1.message);
    sm_error_clear(&e1);
  }
  int rc = ignore_missing(sm_engine_container_remove(e, name, 1, 1, &e1));
  int vrc = 0;
  sm_error e2 = SM_ERROR_INIT;
  for (int i = 0; volume && i < 20; i++) {
    /* The engine may still hold the volume for a moment after the removal. */
    vrc = ignore_missing(sm_engine_volume_remove(e, volume, 1, &e2));
    if (vrc != SM_ECONFLICT || rc != 0) break;
    common_sleep_ms(100);
  }
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

static void host_name(char *out, size_t len) {
  if (gethostname(out, len) != 0 || out[0] == '\0') snprintf(out, len, "localhost");
  out[len - 1] = '\0';
}

void sm_sandbox_owner_label(char *out, size_t len) {
  char host[256];
  host_name(host, sizeof host);
  snprintf(out, len, "%s:%ld", host, (long)getpid());
}

int sandbox_fresh_names(const sandbox_ctx *ctx, const char *kind, sandbox_box *sb,
                        sm_error *err) {
  char rnd[17];
  int rc = sm_random_hex(rnd, 8, err);
  if (rc) return rc;
  snprintf(sb->name, sizeof sb->name, "sandman-%s-%s-%s", ctx->instance, kind, rnd);
  snprintf(sb->volume, sizeof sb->volume, "%s-ws", sb->name);
  snprintf(sb->scope_key, sizeof sb->scope_key, "tool:%s", rnd);
  return 0;
}

/* ---- creating ---- */

/* chmod 1777 /tmp as root inside the started sandbox (root owns the tmpfs;
 * no capability is needed for an owner's chmod). */
static int make_tmp_writable(sm_engine *e, const sandbox_box *sb, const char *image, unsigned mode,
                             sm_error *err) {
  const char *argv[] = {"chmod", "1777", "/tmp"};
  int code = -1;
  int rc = sandbox_exec_helper(e, sb->id, argv, 3, "0:0", NULL, NULL, 30, NULL, &code, err);
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

int sandbox_fix_tmp(sm_engine *e, const char *id, const char *name, const char *image_id,
                    sm_error *err) {
  unsigned mode = 0;
  if (!tmp_needs_fix(e, id, image_id ? image_id : "", &mode)) return 0;
  sandbox_box sb;
  memset(&sb, 0, sizeof sb);
  snprintf(sb.id, sizeof sb.id, "%s", id);
  snprintf(sb.name, sizeof sb.name, "%s", name);
  return make_tmp_writable(e, &sb, image_id ? image_id : "its image", mode, err);
}

/* The hardened container config of sandbox sb (labels, user, environment)
 * against engine e: its image there, its user resolved in the image. The
 * docker backend creates it; the swarm backend translates it. image_id (may
 * be NULL; SM_ENGINE_ID_MAX bytes) gets the image's id. */
int sandbox_config(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                          sandbox_box *sb, int check_runtime, json_object **out, char *image_id,
                          sm_error *err) {
  *out = NULL;
  const sm_sandbox_settings *s = &req->settings;
  json_object *image = NULL;
  int gvisor = 0;
  int rc = sandbox_image_present(e, s->image, &image, err);
  if (rc == 0 && check_runtime) rc = sandbox_runtime_present(e, s->runtime, &gvisor, err);
  /* On a swarm the runtime is the node's (checked on the task's container). */
  else if (rc == 0) gvisor = strncmp(s->runtime, "runsc", 5) == 0;
  if (rc == 0) rc = prepare_user(ctx, e, s, image, sb, err);
  if (image_id) image_id[0] = '\0';
  if (rc == 0 && image_id && sandbox_json_str(image, "Id", NULL))
    snprintf(image_id, SM_ENGINE_ID_MAX, "%s", sandbox_json_str(image, "Id", NULL));
  json_object_put(image);
  if (rc) return rc;

  char created[40], owner[300];
  sm_format_time(sm_now(), created, sizeof created);
  sm_sandbox_owner_label(owner, sizeof owner);
  sandbox_label_info li = {
      .instance = ctx->instance,
      .mode = sm_mode_name(sb->mode),
      .project = req->project && *req->project ? req->project : "default",
      .run = req->run_id,
      .worker = req->worker_id,
      .agent = req->agent,
      .scope_key = sb->scope_key,
      .config_hash = sb->hash,
      .created = created,
      .owner = sb->mode == SM_MODE_PER_TOOL || sb->lease_of[0] ? owner : NULL,
      .principal = sb->mode == SM_MODE_PER_TOOL ? NULL : req->principal,
      .user = sb->user,
      /* A lease container's volume is its sandbox's: never removed with it. */
      .volume = sb->lease_of[0] ? NULL : sb->volume,
      .lease = sb->lease_of[0] ? sb->lease_of : NULL,
  };
  json_object *labels = sandbox_labels_build(&li);
  if (labels && sb->pooled)
    json_object_object_add(labels, SM_LABEL_PREFIX "pool", json_object_new_string("true"));
  if (labels) sandbox_meta_labels(labels, req);
  common_strv env = {0};
  sandbox_env_spec es = {.home = "/workspace", .tmpdir = "/tmp", .user = sb->user_name};
  rc = sandbox_env_build(&es, &env, err);
  /* network allowlist: no network of its own; the proxy, and its relay
   * once it runs (sandbox_create). */
  sm_egress_net net;
  int allowlist = sandbox_allowlist(s);
  if (rc == 0 && allowlist && !check_runtime)
    rc = sm_error_set(err, SM_EUNSUPPORTED,
                      "network allowlist is not supported on the swarm backend (docs/network.md); use "
                      "network none or bridge there, or the docker backend");
  if (rc == 0 && allowlist) rc = sandbox_egress_prepare(ctx->egress(ctx->runner), e, req, &net, &env, err);
  json_object *config = NULL;
  if (rc == 0) {
    sandbox_container_spec cs = {
        .settings = s,
        .user = sb->user,
        .uid = sb->uid,
        .gid = sb->gid,
        .volume = sb->volume,
        .labels = labels,
        .env = (const char *const *)env.v,
        .n_env = env.n,
        .gvisor = gvisor,
        .network = allowlist ? SM_EGRESS_SANDBOX_NETWORK : NULL,
        .lease_deadline_s = sb->lease_of[0] ? sb->lease_deadline_s : 0,
        /* A keyed sandbox on this engine keeps its agent across a stop. Not
         * under gVisor (a hibernated sandbox comes back in a new container,
         * and its running agent with it, which the tmpfs carries in the
         * checkpoint), nor on a swarm (a task's volume outlives it). */
        .agent_volume = check_runtime && !gvisor && sb->mode != SM_MODE_PER_TOOL &&
                        !sb->lease_of[0],
    };
    config = sandbox_container_config_build(&cs);
    if (config == NULL) rc = sm_error_set(err, SM_ENOMEM, "building the container spec");
  }
  json_object_put(labels);
  common_strv_dispose(&env);
  if (rc == 0) *out = config;
  return rc;
}

/* A sandbox's life in the audit trail (sandbox.created, .replaced, .removed). */
void sandbox_audit(const sandbox_ctx *ctx, const char *event, const sm_run_request *req, const sandbox_box *sb,
                          const char *message) {
  sm_audit *a = ctx->audit;
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
int sandbox_create(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                          sandbox_box *sb, sm_error *err) {
  const sm_sandbox_settings *s = &req->settings;
  json_object *config = NULL;
  char image_id[SM_ENGINE_ID_MAX];
  int rc = sandbox_config(ctx, e, req, sb, 1, &config, image_id, err);
  if (rc) return rc;

  json_object *warnings = NULL;
  rc = sm_engine_container_create(e, sb->name, config, sb->id, &warnings, err);
  json_object_put(config);
  if (rc == SM_ECONFLICT) return rc;
  /* A lease container's volume is its sandbox's, in use: never removed here. */
  const char *own_volume = sb->lease_of[0] ? NULL : sb->volume;
  if (rc) {
    sm_error ignore = SM_ERROR_INIT;
    if (own_volume) sm_engine_volume_remove(e, own_volume, 1, &ignore);
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
  if (rc == 0 && sandbox_allowlist(s))
    rc = sandbox_egress_apply(ctx->egress(ctx->runner), e, req, NULL, sb->id, sb->name, err);
  if (rc) {
    if (rc == SM_EENGINE) rc = err->code = SM_ESANDBOX;
    sm_error_wrap(err, "starting sandbox %s", sb->name);
    sm_error ignore = SM_ERROR_INIT;
    sandbox_remove(e, ctx->state_dir, sb->name, own_volume, sandbox_allowlist(s), &ignore);
    sb->id[0] = '\0';
    return rc;
  }
  sm_log_event(SM_LOG_DEBUG, "sandbox.create",
               SM_LOG_FIELDS(SM_LOG_STR("sandbox", sb->id), SM_LOG_STR("name", sb->name),
                             SM_LOG_STR("mode", sm_mode_name(sb->mode)), SM_LOG_STR("image", s->image),
                             SM_LOG_STR("run_id", req->run_id), SM_LOG_STR("worker_id", req->worker_id)),
               "created sandbox %s", sb->name);
  sandbox_audit(ctx, "sandbox.created", req, sb,
                sb->pooled     ? "made ahead for the warm pool"
                : sb->lease_of[0] ? "a leased call's own container, sharing its sandbox's /workspace"
                                  : NULL);
  return 0;
}

int sandbox_prewarm(const sandbox_ctx *ctx, sm_engine *e, const sm_run_request *req,
                    sandbox_make_fn make, sandbox_pool_item *out, sm_error *err) {
  sandbox_box sb;
  memset(&sb, 0, sizeof sb);
  memset(out, 0, sizeof *out);
  sb.mode = SM_MODE_PER_TOOL;
  sb.pooled = 1;
  sm_sandbox_settings_hash(&req->settings, sb.hash);
  int rc = sandbox_fresh_names(ctx, "pool", &sb, err);
  if (rc == 0) rc = make(ctx, e, req, &sb, out, err);
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

int sandbox_swarm_config(void *ud, sm_engine *manager, json_object **config, int *uid, int *gid,
                         sm_error *err) {
  sandbox_swarm_config_ud *c = ud;
  /* The runtime is the node's: checked on the task's container. */
  int rc = sandbox_config(c->ctx, manager, c->req, c->sb, 0, config, NULL, err);
  *uid = c->sb->uid;
  *gid = c->sb->gid;
  return rc;
}
