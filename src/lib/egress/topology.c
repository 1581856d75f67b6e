/* The egress proxy on the engine: its image (made from the binary in the
 * library), its container on its outbound network with the volume of the
 * socket the relays reach it by (relay.c), and teardown. Every step is
 * idempotent and tolerates another sandman doing the same at once (a name
 * conflict means "already made"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/log.h>
#include <sandman/state.h>

#include "egress/egress_blob.h"
#include "egress/egress_internal.h"

#define LABEL_PREFIX "io.sandman."
#define IMAGE_REPO "sandman/egress"

/* ---- the image ---- */

/* Images of earlier sandman builds (other tags of the repository) that no
 * container uses any more: removing one still in use fails, and is left. */
static void drop_old_images(sm_engine *e, const char *keep) {
  json_object *filters = json_object_new_object(), *ref = json_object_new_array(), *list = NULL;
  json_object_array_add(ref, json_object_new_string(IMAGE_REPO));
  json_object_object_add(filters, "reference", ref);
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_image_list(e, filters, &list, &err) == 0) {
    for (size_t i = 0; i < json_object_array_length(list); i++) {
      json_object *tags = NULL;
      if (!json_object_object_get_ex(json_object_array_get_idx(list, i), "RepoTags", &tags) ||
          !json_object_is_type(tags, json_type_array))
        continue;
      for (size_t j = 0; j < json_object_array_length(tags); j++) {
        const char *t = json_object_get_string(json_object_array_get_idx(tags, j));
        if (t && strncmp(t, IMAGE_REPO ":", sizeof IMAGE_REPO) == 0 && strcmp(t, keep) != 0)
          sm_engine_image_remove(e, t, 0, &err);
      }
    }
  }
  json_object_put(list);
  json_object_put(filters);
}

static int ensure_image(sm_engine *e, sm_error *err) {
  char ref[96];
  egress_image_ref(ref, sizeof ref);
  json_object *info = NULL;
  sm_error ierr = SM_ERROR_INIT;
  int rc = sm_engine_image_inspect(e, ref, &info, &ierr);
  json_object_put(info);
  if (rc == 0) return 0;
  if (rc != SM_ENOTFOUND) {
    *err = ierr;
    return rc;
  }
  eg_tar t;
  if (egress_tar_one(&t, "sandman-egress", 0555, sm_egress_blob, sm_egress_blob_len) != 0)
    return sm_error_set(err, SM_ENOMEM, "egress proxy image: out of memory");
  static const char *const changes[] = {"USER 65534:65534", "ENTRYPOINT [\"/sandman-egress\"]",
                                        "LABEL io.sandman.managed=true io.sandman.egress=image"};
  rc = sm_engine_image_import(e, egress_tar_read, &t, IMAGE_REPO, strchr(ref, ':') + 1, changes,
                              sizeof changes / sizeof changes[0], NULL, NULL, err);
  egress_tar_dispose(&t);
  if (rc != 0) return sm_error_wrap(err, "making the egress proxy's image %s", ref);
  sm_log(SM_LOG_INFO, "egress: made the proxy image %s from the embedded binary", ref);
  drop_old_images(e, ref);
  return 0;
}

/* ---- the proxy container ---- */

typedef struct proxy_settings {
  const char *network;
  int max_conns, max_per_sandbox, idle_s, connect_s;
  const char *const *hosts;
  size_t n_hosts;
} proxy_settings;

static void settings_of(const sm_egress_proxy_options *o, proxy_settings *s) {
  s->network = o && o->network && *o->network ? o->network : "bridge";
  s->max_conns = o && o->max_connections > 0 ? o->max_connections : 512;
  s->max_per_sandbox = o && o->max_per_sandbox > 0 ? o->max_per_sandbox : 64;
  s->idle_s = o && o->idle_timeout_s > 0 ? o->idle_timeout_s : 300;
  s->connect_s = o && o->connect_timeout_s > 0 ? o->connect_timeout_s : 10;
  s->hosts = o ? o->hosts : NULL;
  s->n_hosts = o ? o->n_hosts : 0;
}

/* A hash of what the container is made from: a proxy with another hash is
 * replaced (v2: the proxy behind relays). */
static void settings_hash(const proxy_settings *s, char out[17]) {
  common_buf b;
  common_buf_init(&b, 1 << 20);
  common_buf_printf(&b, "v2 %s %s %d %d %d %d", sm_egress_blob_sha256, s->network, s->max_conns,
                    s->max_per_sandbox, s->idle_s, s->connect_s);
  for (size_t i = 0; i < s->n_hosts; i++) common_buf_printf(&b, " %s", s->hosts[i]);
  egress_settings_hash(b.data ? b.data : "", out);
  common_buf_dispose(&b);
}

static void add_arg(json_object *cmd, const char *flag, int value) {
  char num[32];
  snprintf(num, sizeof num, "%d", value);
  json_object_array_add(cmd, json_object_new_string(flag));
  json_object_array_add(cmd, json_object_new_string(num));
}

static json_object *proxy_cmd(const proxy_settings *s) {
  json_object *cmd = json_object_new_array();
  json_object_array_add(cmd, json_object_new_string("serve"));
  json_object_array_add(cmd, json_object_new_string("--socket"));
  json_object_array_add(cmd, json_object_new_string(EG_SOCKET_PATH));
  add_arg(cmd, "--max-connections", s->max_conns);
  add_arg(cmd, "--max-per-sandbox", s->max_per_sandbox);
  add_arg(cmd, "--idle-timeout", s->idle_s);
  add_arg(cmd, "--connect-timeout", s->connect_s);
  return cmd;
}

static json_object *extra_hosts(const proxy_settings *s) {
  json_object *eh = json_object_new_array();
  for (size_t i = 0; i < s->n_hosts; i++) {
    char entry[320];
    const char *eq = strchr(s->hosts[i], '=');
    if (eq == NULL) continue;
    snprintf(entry, sizeof entry, "%.*s:%s", (int)(eq - s->hosts[i]), s->hosts[i], eq + 1);
    json_object_array_add(eh, json_object_new_string(entry));
  }
  return eh;
}

static json_object *proxy_config(const char *instance, const proxy_settings *s, const char *hash) {
  char ref[96];
  egress_image_ref(ref, sizeof ref);
  json_object *c = json_object_new_object(), *hc = json_object_new_object();
  json_object_object_add(c, "Image", json_object_new_string(ref));
  json_object_object_add(c, "User", json_object_new_string("65534:65534"));
  json_object_object_add(c, "Cmd", proxy_cmd(s));
  json_object *labels = egress_labels_new(instance, "proxy");
  json_object_object_add(labels, EG_LABEL "-config", json_object_new_string(hash));
  json_object_object_add(c, "Labels", labels);
  /* Its outbound network only: it listens on no network at all, only on
   * its socket in the volume that the relays mount. */
  json_object_object_add(hc, "NetworkMode", json_object_new_string(s->network));
  json_object_object_add(hc, "ReadonlyRootfs", json_object_new_boolean(1));
  json_object *caps = json_object_new_array();
  json_object_array_add(caps, json_object_new_string("ALL"));
  json_object_object_add(hc, "CapDrop", caps);
  json_object *so = json_object_new_array();
  json_object_array_add(so, json_object_new_string("no-new-privileges"));
  json_object_object_add(hc, "SecurityOpt", so);
  /* A thread per connection: pids bounded a little above the limit. */
  json_object_object_add(hc, "PidsLimit", json_object_new_int64(s->max_conns + 64));
  json_object_object_add(hc, "Memory", json_object_new_int64(512LL * 1024 * 1024));
  json_object *rp = json_object_new_object();
  json_object_object_add(rp, "Name", json_object_new_string("unless-stopped"));
  json_object_object_add(hc, "RestartPolicy", rp);
  json_object *lc = json_object_new_object(), *lco = json_object_new_object();
  json_object_object_add(lc, "Type", json_object_new_string("json-file"));
  json_object_object_add(lco, "max-size", json_object_new_string("10m"));
  json_object_object_add(lco, "max-file", json_object_new_string("3"));
  json_object_object_add(lc, "Config", lco);
  json_object_object_add(hc, "LogConfig", lc);
  if (s->n_hosts > 0) json_object_object_add(hc, "ExtraHosts", extra_hosts(s));
  json_object *mounts = json_object_new_array();
  json_object_array_add(mounts, egress_socket_mount(instance, 0));
  json_object_object_add(hc, "Mounts", mounts);
  json_object_object_add(c, "HostConfig", hc);
  return c;
}

/* The container found under the proxy's name: 0 with *same when it has
 * these settings (started if it was stopped); else it is removed. */
static int proxy_found(sm_engine *e, json_object *info, const char *hash, const char *name, int *same,
                       char id[SM_ENGINE_ID_MAX], sm_error *err) {
  const char *have = egress_jstr(info, "Config", "Labels", EG_LABEL "-config");
  const char *cid = egress_jstr(info, "Id", NULL, NULL);
  json_object *st = NULL, *running = NULL;
  int up = json_object_object_get_ex(info, "State", &st) && json_object_object_get_ex(st, "Running", &running) &&
           json_object_get_boolean(running);
  snprintf(id, SM_ENGINE_ID_MAX, "%s", cid ? cid : name);
  *same = have && strcmp(have, hash) == 0;
  if (*same && up) return 0;
  if (*same) {
    int rc = sm_engine_container_start(e, id, err);
    return rc ? rc : egress_wait_ready(e, id, "proxy.ready", err);
  }
  /* Other settings (or an older sandman): replace it. Relays connect per
   * connection, to whichever proxy listens on the socket then. */
  sm_log(SM_LOG_INFO, "egress: replacing the proxy %s (its settings changed)", name);
  sm_error ierr = SM_ERROR_INIT;
  int rc = sm_engine_container_remove(e, id, 1, 0, &ierr);
  if (rc != 0 && rc != SM_ENOTFOUND) {
    *err = ierr;
    return rc;
  }
  return 0;
}

/* The running proxy of the instance with these settings, made if needed. */
static int ensure_proxy(sm_engine *e, const char *instance, const proxy_settings *s, char id[SM_ENGINE_ID_MAX],
                        sm_error *err) {
  char name[SM_EGRESS_NAME_MAX], hash[17];
  egress_proxy_name(instance, name, sizeof name);
  settings_hash(s, hash);
  for (int attempt = 0; attempt < 3; attempt++) {
    json_object *info = NULL;
    sm_error ierr = SM_ERROR_INIT;
    int rc = sm_engine_container_inspect(e, name, &info, &ierr);
    if (rc == 0) {
      int same = 0;
      rc = proxy_found(e, info, hash, name, &same, id, err);
      json_object_put(info);
      if (rc != 0 || same) return rc;
      continue;
    }
    if (rc != SM_ENOTFOUND) {
      *err = ierr;
      return rc;
    }
    if ((rc = ensure_image(e, err)) != 0) return rc;
    json_object *cfg = proxy_config(instance, s, hash);
    if (cfg == NULL) return sm_error_set(err, SM_ENOMEM, "egress proxy: out of memory");
    rc = sm_engine_container_create(e, name, cfg, id, NULL, &ierr);
    json_object_put(cfg);
    if (rc == SM_ECONFLICT) continue; /* another sandman made it meanwhile */
    if (rc != 0) {
      *err = ierr;
      return sm_error_wrap(err, "creating the egress proxy %s", name);
    }
    if ((rc = sm_engine_container_start(e, id, err)) != 0) return sm_error_wrap(err, "starting the egress proxy");
    if ((rc = egress_wait_ready(e, id, "proxy.ready", err)) != 0)
      return sm_error_wrap(err, "the egress proxy");
    return 0;
  }
  return sm_error_set(err, SM_ECONFLICT, "the egress proxy %s keeps changing under us", name);
}

int sm_egress_prepare(sm_engine *e, const sm_egress_proxy_options *opts, sm_egress_net *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  char instance[80], key[128];
  int rc = egress_instance(opts, instance, sizeof instance, err);
  if (rc != 0) return rc;
  proxy_settings s;
  settings_of(opts, &s);
  snprintf(key, sizeof key, "egress-%s", instance);
  sm_state_lock *lock = NULL;
  if ((rc = sm_state_key_lock(opts ? opts->state_dir : NULL, key, &lock, err)) != 0) return rc;
  rc = ensure_proxy(e, instance, &s, out->proxy_id, err);
  sm_state_unlock(lock);
  if (rc != 0) return rc;
  snprintf(out->proxy_url, sizeof out->proxy_url, "http://127.0.0.1:%d", SM_EGRESS_PROXY_PORT);
  return 0;
}

/* ---- teardown ---- */

typedef enum { KIND_CONTAINER, KIND_NETWORK, KIND_VOLUME } kind;

/* Removes the instance's containers, networks or volumes of an egress
 * role; the first failure goes into *first and err. */
static void remove_role(sm_engine *e, const char *instance, kind k, const char *role, int *first, sm_error *err) {
  char label[160], rl[64];
  snprintf(label, sizeof label, LABEL_PREFIX "instance=%s", instance);
  snprintf(rl, sizeof rl, EG_LABEL "=%s", role);
  const char *labels[] = {label, rl};
  json_object *items = NULL;
  sm_error lerr = SM_ERROR_INIT;
  int rc = k == KIND_NETWORK  ? sm_engine_network_list(e, labels, 2, &items, &lerr)
           : k == KIND_VOLUME ? sm_engine_volume_list(e, labels, 2, &items, &lerr)
                              : sm_engine_container_list(e, 1, labels, 2, &items, &lerr);
  for (size_t i = 0; rc == 0 && items && i < json_object_array_length(items); i++) {
    const char *n = egress_jstr(json_object_array_get_idx(items, i),
                                k == KIND_CONTAINER ? "Id" : "Name", NULL, NULL);
    if (n == NULL) continue;
    sm_error one = SM_ERROR_INIT;
    int r = k == KIND_NETWORK  ? sm_engine_network_remove(e, n, &one)
            : k == KIND_VOLUME ? sm_engine_volume_remove(e, n, 1, &one)
                               : sm_engine_container_remove(e, n, 1, 0, &one);
    if (r != 0 && r != SM_ENOTFOUND) {
      rc = r;
      lerr = one;
      sm_error_wrap(&lerr, "removing %s (a container still on it?)", n);
    }
  }
  json_object_put(items);
  if (rc != 0 && *first == 0) {
    *first = rc;
    *err = lerr;
  }
}

int sm_egress_teardown(sm_engine *e, const sm_egress_proxy_options *opts, sm_error *err) {
  char instance[80], name[SM_EGRESS_NAME_MAX];
  int rc = egress_instance(opts, instance, sizeof instance, err);
  if (rc != 0) return rc;
  egress_proxy_name(instance, name, sizeof name);
  sm_error lerr = SM_ERROR_INIT;
  rc = sm_engine_container_remove(e, name, 1, 0, &lerr);
  if (rc != 0 && rc != SM_ENOTFOUND) {
    *err = lerr;
    return rc;
  }
  int first = 0;
  remove_role(e, instance, KIND_CONTAINER, "relay", &first, err);
  remove_role(e, instance, KIND_VOLUME, "socket", &first, err);
  /* What an older sandman made: internal networks, the policy volume. */
  remove_role(e, instance, KIND_NETWORK, "network", &first, err);
  remove_role(e, instance, KIND_VOLUME, "policy", &first, err);
  return first;
}

/* ---- runtimes ---- */

int sm_egress_runtime_check(sm_engine *e, const char *runtime, sm_error *err) {
  if (runtime == NULL || *runtime == '\0') return 0;
  json_object *info = NULL, *rts = NULL, *rt = NULL, *args = NULL;
  int rc = sm_engine_info(e, &info, err);
  if (rc != 0) return rc;
  int none = 0;
  if (json_object_object_get_ex(info, "Runtimes", &rts) && json_object_object_get_ex(rts, runtime, &rt) &&
      json_object_object_get_ex(rt, "runtimeArgs", &args) && json_object_is_type(args, json_type_array)) {
    for (size_t i = 0; i < json_object_array_length(args); i++) {
      const char *a = json_object_get_string(json_object_array_get_idx(args, i));
      if (a && (strcmp(a, "--network=none") == 0 || strcmp(a, "-network=none") == 0)) none = 1;
    }
  }
  json_object_put(info);
  if (none)
    return sm_error_set(err, SM_EUNSUPPORTED,
                        "runtime %s is registered with --network=none: a sandbox under it has no network, so "
                        "network allowlist cannot work there; use --runtime runsc-net (gVisor on the sandbox's own "
                        "network, registered by scripts/setup.sh; docs/network.md#gvisor)",
                        runtime);
  return 0;
}
