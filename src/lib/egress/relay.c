/* The relay of an allowlist sandbox (docs/network.md#how-it-is-enforced):
 * a container of sandman's own, named <sandbox name>-egress, that joins the
 * sandbox's network namespace (network mode container:<sandbox id>) and
 * nothing else of it, runs `sandman-egress relay` on the sandbox's loopback
 * and reaches the proxy through the socket volume, mounted read-only. The
 * sandbox's policy is a file in the relay's own root, written by sandman
 * over the Engine API: the sandbox can neither see nor change it.
 *
 * A relay joins the namespace the sandbox has when the relay starts: one
 * started before the sandbox's last start sits in a namespace the sandbox
 * left, and is made again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/log.h>

#include "common/thread.h"
#include "egress/egress_blob.h"
#include "egress/egress_internal.h"
#include "egress/egress_policy.h"

#define LABEL_PREFIX "io.sandman."

typedef struct sandbox_info {
  char id[SM_ENGINE_ID_MAX];
  char name[256];
  long long started_sec;
  long started_nsec;
} sandbox_info;

typedef struct relay_settings {
  char instance[80];
  int max_conns, idle_s;
  char hash[17];
} relay_settings;

static void relay_settings_of(const sm_egress_proxy_options *o, relay_settings *r) {
  r->max_conns = o && o->max_per_sandbox > 0 ? o->max_per_sandbox : 64;
  r->idle_s = o && o->idle_timeout_s > 0 ? o->idle_timeout_s : 300;
  char text[200];
  snprintf(text, sizeof text, "relay v1 %s %d %d", sm_egress_blob_sha256, r->max_conns, r->idle_s);
  egress_settings_hash(text, r->hash);
}

static void relay_name(const char *sandbox, char *out, size_t len) {
  snprintf(out, len, "%s" EG_RELAY_SUFFIX, sandbox);
}

static json_object *relay_cmd(const relay_settings *r) {
  json_object *cmd = json_object_new_array();
  const char *fixed[] = {"relay", "--socket", EG_SOCKET_PATH, "--policy", "/" EG_RELAY_POLICY};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    json_object_array_add(cmd, json_object_new_string(fixed[i]));
  const char *flags[] = {"--port", "--max-connections", "--idle-timeout"};
  int vals[] = {SM_EGRESS_PROXY_PORT, r->max_conns, r->idle_s};
  for (size_t i = 0; i < 3; i++) {
    char num[32];
    snprintf(num, sizeof num, "%d", vals[i]);
    json_object_array_add(cmd, json_object_new_string(flags[i]));
    json_object_array_add(cmd, json_object_new_string(num));
  }
  return cmd;
}

/* The relay's container: the sandbox's network namespace and nothing else
 * of it; the proxy's user, no capabilities, its root writable only for the
 * policy file sandman puts there. */
static json_object *relay_config(const relay_settings *r, const sandbox_info *sb) {
  char ref[96], mode[SM_ENGINE_ID_MAX + 16];
  egress_image_ref(ref, sizeof ref);
  snprintf(mode, sizeof mode, "container:%s", sb->id);
  json_object *c = json_object_new_object(), *hc = json_object_new_object();
  json_object_object_add(c, "Image", json_object_new_string(ref));
  json_object_object_add(c, "User", json_object_new_string("65534:65534"));
  json_object_object_add(c, "Cmd", relay_cmd(r));
  json_object *labels = egress_labels_new(r->instance, "relay");
  json_object_object_add(labels, EG_LABEL "-config", json_object_new_string(r->hash));
  json_object_object_add(labels, EG_LABEL "-sandbox", json_object_new_string(sb->id));
  json_object_object_add(c, "Labels", labels);
  json_object_object_add(hc, "NetworkMode", json_object_new_string(mode));
  json_object *caps = json_object_new_array();
  json_object_array_add(caps, json_object_new_string("ALL"));
  json_object_object_add(hc, "CapDrop", caps);
  json_object *so = json_object_new_array();
  json_object_array_add(so, json_object_new_string("no-new-privileges"));
  json_object_object_add(hc, "SecurityOpt", so);
  json_object_object_add(hc, "PidsLimit", json_object_new_int64(r->max_conns + 16));
  json_object_object_add(hc, "Memory", json_object_new_int64(64LL * 1024 * 1024));
  json_object *rp = json_object_new_object();
  json_object_object_add(rp, "Name", json_object_new_string("unless-stopped"));
  json_object_object_add(hc, "RestartPolicy", rp);
  json_object *lc = json_object_new_object(), *lco = json_object_new_object();
  json_object_object_add(lc, "Type", json_object_new_string("json-file"));
  json_object_object_add(lco, "max-size", json_object_new_string("1m"));
  json_object_object_add(lco, "max-file", json_object_new_string("1"));
  json_object_object_add(lc, "Config", lco);
  json_object_object_add(hc, "LogConfig", lc);
  json_object *mounts = json_object_new_array();
  json_object_array_add(mounts, egress_socket_mount(r->instance, 1));
  json_object_object_add(hc, "Mounts", mounts);
  json_object_object_add(c, "HostConfig", hc);
  return c;
}

static int write_policy(sm_engine *e, const char *relay_id, const common_buf *text, sm_error *err) {
  eg_tar t;
  if (egress_tar_one(&t, EG_RELAY_POLICY, 0644, text->data, text->len) != 0)
    return sm_error_set(err, SM_ENOMEM, "egress policy: out of memory");
  int rc = sm_engine_archive_put(e, relay_id, "/", egress_tar_read, &t, err);
  egress_tar_dispose(&t);
  if (rc != 0) sm_error_wrap(err, "writing the egress policy into the relay %.12s", relay_id);
  return rc;
}

static int is_running(json_object *info) {
  json_object *st = NULL, *running = NULL;
  return json_object_object_get_ex(info, "State", &st) && json_object_object_get_ex(st, "Running", &running) &&
         json_object_get_boolean(running);
}

/* A relay found under the sandbox's relay name serves this sandbox as it
 * runs now: its own, with these settings, running, started after the
 * sandbox (so in the sandbox's present network namespace). */
static int relay_current(json_object *info, const relay_settings *r, const sandbox_info *sb) {
  const char *for_sb = egress_jstr(info, "Config", "Labels", EG_LABEL "-sandbox");
  const char *hash = egress_jstr(info, "Config", "Labels", EG_LABEL "-config");
  long long sec = 0;
  long nsec = 0;
  if (for_sb == NULL || strcmp(for_sb, sb->id) != 0 || hash == NULL || strcmp(hash, r->hash) != 0 ||
      !is_running(info) || egress_started_at(info, &sec, &nsec) != 0)
    return 0;
  return sec > sb->started_sec || (sec == sb->started_sec && nsec >= sb->started_nsec);
}

/* Makes the relay with the policy already in it, then starts it. */
static int relay_make(sm_engine *e, const relay_settings *r, const sandbox_info *sb,
                      const char *name, const common_buf *text, sm_error *err) {
  json_object *cfg = relay_config(r, sb);
  char id[SM_ENGINE_ID_MAX];
  int rc = sm_engine_container_create(e, name, cfg, id, NULL, err);
  json_object_put(cfg);
  if (rc != 0) return rc; /* SM_ECONFLICT: another sandman made it meanwhile */
  if ((rc = write_policy(e, id, text, err)) == 0 && (rc = sm_engine_container_start(e, id, err)) == 0)
    rc = egress_wait_ready(e, id, "relay.ready", err);
  if (rc != 0) {
    sm_error ignore = SM_ERROR_INIT;
    sm_engine_container_remove(e, id, 1, 0, &ignore);
    sm_error_wrap(err, "starting the egress relay of %s", sb->name);
  }
  return rc;
}

/* A relay another sandman process has just made and not started yet is
 * not stale: waits (up to 10 s) until it is no longer "created". */
static void wait_started(sm_engine *e, const char *id) {
  for (int i = 0; i < 100; i++) {
    json_object *info = NULL;
    sm_error ierr = SM_ERROR_INIT;
    if (sm_engine_container_inspect(e, id, &info, &ierr) != 0) return;
    const char *status = egress_jstr(info, "State", "Status", NULL);
    int created = status && strcmp(status, "created") == 0;
    json_object_put(info);
    if (!created) return;
    common_sleep_ms(100);
  }
}

/* The sandbox's relay, current and holding text as its policy. */
static int relay_ensure(sm_engine *e, const relay_settings *r, const sandbox_info *sb,
                        const common_buf *text, sm_error *err) {
  char name[SM_EGRESS_NAME_MAX + 300];
  relay_name(sb->name, name, sizeof name);
  int waited = 0;
  for (int attempt = 0; attempt < 3; attempt++) {
    json_object *info = NULL;
    sm_error ierr = SM_ERROR_INIT;
    int rc = sm_engine_container_inspect(e, name, &info, &ierr);
    if (rc == SM_ENOTFOUND) {
      rc = relay_make(e, r, sb, name, text, &ierr);
      if (rc == SM_ECONFLICT) continue;
      if (rc != 0) *err = ierr;
      return rc;
    }
    if (rc != 0) {
      *err = ierr;
      return rc;
    }
    char id[SM_ENGINE_ID_MAX];
    const char *rid = egress_jstr(info, "Id", NULL, NULL),
               *status = egress_jstr(info, "State", "Status", NULL);
    snprintf(id, sizeof id, "%s", rid ? rid : name);
    int current = relay_current(info, r, sb), created = status && strcmp(status, "created") == 0;
    json_object_put(info);
    if (created && !waited) {
      waited = 1;
      wait_started(e, id);
      attempt--;
      continue;
    }
    if (current) {
      rc = write_policy(e, id, text, err);
      /* One another sandman process has just started: wait for it to listen. */
      return rc ? rc : egress_wait_ready(e, id, "relay.ready", err);
    }
    /* By its id: a relay someone made meanwhile under the name stays. */
    sm_log(SM_LOG_DEBUG, "egress: replacing the relay of %s (stale or of other settings)", sb->name);
    rc = sm_engine_container_remove(e, id, 1, 0, &ierr);
    if (rc != 0 && rc != SM_ENOTFOUND) {
      *err = ierr;
      return rc;
    }
  }
  return sm_error_set(err, SM_ECONFLICT, "the egress relay of %s keeps changing under us", sb->name);
}

static int sandbox_of(sm_engine *e, const char *container, sandbox_info *out, sm_error *err) {
  json_object *info = NULL;
  int rc = sm_engine_container_inspect(e, container, &info, err);
  if (rc != 0) return rc;
  const char *id = egress_jstr(info, "Id", NULL, NULL),
             *name = egress_jstr(info, "Name", NULL, NULL);
  const char *nm = egress_jstr(info, "HostConfig", "NetworkMode", NULL);
  char mode[SM_ENGINE_ID_MAX + 16];
  snprintf(mode, sizeof mode, "%s", nm ? nm : "");
  int running = is_running(info);
  if (id) snprintf(out->id, sizeof out->id, "%s", id);
  if (name) snprintf(out->name, sizeof out->name, "%s", name[0] == '/' ? name + 1 : name);
  int started = egress_started_at(info, &out->started_sec, &out->started_nsec);
  json_object_put(info);
  if (id == NULL || name == NULL || started != 0)
    return sm_error_set(err, SM_EPROTOCOL, "the engine's answer about %s lacks its id, name or start", container);
  if (!running) return sm_error_set(err, SM_ESANDBOX, "container %s is not running", out->name);
  /* Its relay would share a network namespace that has more than the
   * sandbox's loopback in it: never. */
  if (strcmp(mode, SM_EGRESS_SANDBOX_NETWORK) != 0)
    return sm_error_set(err, SM_EUNSAFE, "container %s has network mode %s, not %s: no egress relay for it",
                        out->name, mode[0] ? mode : "(none given)", SM_EGRESS_SANDBOX_NETWORK);
  return 0;
}

int sm_egress_set_policy(sm_engine *e, const sm_egress_proxy_options *opts, const sm_egress_net *net,
                         const char *container, const sm_egress_policy *policy, sm_error *err) {
  (void)net;
  relay_settings r;
  relay_settings_of(opts, &r);
  int rc = egress_instance(opts, r.instance, sizeof r.instance, err);
  sandbox_info sb;
  memset(&sb, 0, sizeof sb);
  if (rc == 0) rc = sandbox_of(e, container, &sb, err);
  if (rc != 0) return rc;
  eg_block_in *blocks = calloc(EG_POLICY_MAX_BLOCKS, sizeof *blocks);
  if (blocks == NULL) return sm_error_set(err, SM_ENOMEM, "egress policy: out of memory");
  size_t nb = egress_engine_blocks(e, blocks, EG_POLICY_MAX_BLOCKS);
  common_buf text;
  common_buf_init(&text, EG_POLICY_MAX_BYTES);
  rc = egress_policy_text(&text, policy, blocks, nb, err);
  free(blocks);
  if (rc == 0) rc = relay_ensure(e, &r, &sb, &text, err);
  common_buf_dispose(&text);
  return rc;
}

int sm_egress_revoke(sm_engine *e, const char *sandbox, sm_error *err) {
  char name[SM_EGRESS_NAME_MAX + 300];
  relay_name(sandbox, name, sizeof name);
  json_object *info = NULL;
  int rc = sm_engine_container_inspect(e, name, &info, err);
  if (rc == SM_ENOTFOUND) {
    sm_error_clear(err);
    return 0;
  }
  if (rc != 0) return rc;
  const char *role = egress_jstr(info, "Config", "Labels", EG_LABEL);
  char id[SM_ENGINE_ID_MAX] = "";
  const char *rid = egress_jstr(info, "Id", NULL, NULL);
  if (rid) snprintf(id, sizeof id, "%s", rid);
  int ours = role && strcmp(role, "relay") == 0 && id[0];
  json_object_put(info);
  if (!ours) return 0; /* a container of that name that is no relay: not ours to remove */
  rc = sm_engine_container_remove(e, id, 1, 0, err);
  if (rc == SM_ENOTFOUND) {
    sm_error_clear(err);
    rc = 0;
  }
  return rc;
}

/* 1 if id is among the containers listed. */
static int listed(json_object *list, const char *id) {
  for (size_t i = 0; i < json_object_array_length(list); i++) {
    const char *x = egress_jstr(json_object_array_get_idx(list, i), "Id", NULL, NULL);
    if (x && strcmp(x, id) == 0) return 1;
  }
  return 0;
}

int sm_egress_sweep(sm_engine *e, const sm_egress_proxy_options *opts, size_t *out_n, sm_error *err) {
  if (out_n) *out_n = 0;
  char instance[80], label[160];
  int rc = egress_instance(opts, instance, sizeof instance, err);
  if (rc != 0) return rc;
  snprintf(label, sizeof label, LABEL_PREFIX "instance=%s", instance);
  const char *labels[] = {label};
  json_object *all = NULL;
  if ((rc = sm_engine_container_list(e, 1, labels, 1, &all, err)) != 0) return rc;
  for (size_t i = 0; i < json_object_array_length(all); i++) {
    json_object *c = json_object_array_get_idx(all, i);
    const char *role = egress_jstr(c, "Labels", EG_LABEL, NULL),
               *sb = egress_jstr(c, "Labels", EG_LABEL "-sandbox", NULL);
    const char *id = egress_jstr(c, "Id", NULL, NULL);
    if (role == NULL || strcmp(role, "relay") != 0 || id == NULL || (sb && listed(all, sb))) continue;
    sm_error one = SM_ERROR_INIT;
    int r = sm_engine_container_remove(e, id, 1, 0, &one);
    if (r == 0 && out_n) (*out_n)++;
    if (r != 0 && r != SM_ENOTFOUND && rc == 0) {
      rc = r;
      *err = one;
    }
  }
  json_object_put(all);
  return rc;
}
