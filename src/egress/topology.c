/* The egress topology on the engine: the proxy's image (made from the
 * binary in the library), its policy volume and container, the internal
 * network per project with the proxy on it, policies written into the
 * proxy, and teardown. Every step is idempotent and tolerates another
 * sandman doing the same at once (a name conflict means "already made"). */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include <sandman/log.h>
#include <sandman/state.h>
#include <sandman/version.h>

#include "egress/blob.h"
#include "egress/egress_internal.h"
#include "egress/policy.h"

#define LABEL_PREFIX "io.sandman."
#define POLICY_DIR "/policy"
#define READY_WAIT_MS 10000
#define IMAGE_REPO "sandman/egress"

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
  static const char hex[] = "0123456789abcdef";
  for (unsigned i = 0; i < n && i < 32; i++) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  out[64] = '\0';
}

static int valid_instance(const char *s) {
  if (s == NULL || *s == '\0' || strlen(s) > 64) return 0;
  if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= '0' && s[0] <= '9')))
    return 0;
  for (const char *p = s; *p; p++) {
    char c = *p;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return 0;
  }
  return 1;
}

int eg_instance(const sm_egress_proxy_options *opts, char *out, size_t len, sm_error *err) {
  const char *inst = opts ? opts->instance : NULL;
  if (inst == NULL || *inst == '\0') inst = getenv("SANDMAN_INSTANCE");
  if (inst == NULL || *inst == '\0') inst = "default";
  if (!valid_instance(inst))
    return sm_error_set(err, SM_EINVAL,
                        "instance '%s' must be 1-64 letters, digits, '_', '.' or '-' (set SANDMAN_INSTANCE)", inst);
  snprintf(out, len, "%s", inst);
  return 0;
}

void eg_proxy_name(const char *instance, char *out, size_t len) {
  snprintf(out, len, "sandman-egress-%s", instance);
}

static void volume_name(const char *instance, char *out, size_t len) {
  snprintf(out, len, "sandman-egress-%s-policy", instance);
}

static void network_name(const char *instance, const char *project, char *out, size_t len) {
  char h[65];
  const char *p = project && *project ? project : "default";
  sha256_hex(p, strlen(p), h);
  snprintf(out, len, "sandman-egress-%s-%.12s", instance, h);
}

static void image_ref(char *out, size_t len) {
  snprintf(out, len, IMAGE_REPO ":%.16s", sm_egress_blob_sha256);
}

static json_object *labels_new(const char *instance, const char *role) {
  json_object *l = json_object_new_object();
  json_object_object_add(l, LABEL_PREFIX "managed", json_object_new_string("true"));
  json_object_object_add(l, LABEL_PREFIX "instance", json_object_new_string(instance));
  json_object_object_add(l, EG_LABEL, json_object_new_string(role));
  return l;
}

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
  image_ref(ref, sizeof ref);
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
  if (eg_tar_one(&t, "sandman-egress", 0555, sm_egress_blob, sm_egress_blob_len) != 0)
    return sm_error_set(err, SM_ENOMEM, "egress proxy image: out of memory");
  static const char *const changes[] = {"USER 65534:65534", "ENTRYPOINT [\"/sandman-egress\"]",
                                        "LABEL io.sandman.managed=true io.sandman.egress=image"};
  rc = sm_engine_image_import(e, eg_tar_read, &t, IMAGE_REPO, strchr(ref, ':') + 1, changes,
                              sizeof changes / sizeof changes[0], NULL, NULL, err);
  eg_tar_dispose(&t);
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
 * replaced. */
static void settings_hash(const proxy_settings *s, char out[17]) {
  sm_buf b;
  sm_buf_init(&b, 1 << 20);
  sm_buf_printf(&b, "v1 %s %s %d %d %d %d", sm_egress_blob_sha256, s->network, s->max_conns,
                s->max_per_sandbox, s->idle_s, s->connect_s);
  for (size_t i = 0; i < s->n_hosts; i++) sm_buf_printf(&b, " %s", s->hosts[i]);
  char h[65];
  sha256_hex(b.data ? b.data : "", b.len, h);
  sm_buf_dispose(&b);
  snprintf(out, 17, "%.16s", h);
}

static json_object *proxy_config(const char *instance, const proxy_settings *s, const char *hash) {
  char ref[96], vol[SM_EGRESS_NAME_MAX], num[32];
  image_ref(ref, sizeof ref);
  volume_name(instance, vol, sizeof vol);
  json_object *c = json_object_new_object(), *hc = json_object_new_object();
  json_object_object_add(c, "Image", json_object_new_string(ref));
  json_object_object_add(c, "User", json_object_new_string("65534:65534"));
  json_object *cmd = json_object_new_array();
  const char *args[] = {"--port", "--policy-dir", "--max-connections", "--max-per-sandbox",
                        "--idle-timeout", "--connect-timeout"};
  int vals[] = {SM_EGRESS_PROXY_PORT, 0, s->max_conns, s->max_per_sandbox, s->idle_s, s->connect_s};
  for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
    json_object_array_add(cmd, json_object_new_string(args[i]));
    if (i == 1) {
      json_object_array_add(cmd, json_object_new_string(POLICY_DIR));
    } else {
      snprintf(num, sizeof num, "%d", vals[i]);
      json_object_array_add(cmd, json_object_new_string(num));
    }
  }
  json_object_object_add(c, "Cmd", cmd);
  json_object *labels = labels_new(instance, "proxy");
  json_object_object_add(labels, EG_LABEL "-config", json_object_new_string(hash));
  json_object_object_add(c, "Labels", labels);
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
  if (s->n_hosts > 0) {
    json_object *eh = json_object_new_array();
    for (size_t i = 0; i < s->n_hosts; i++) {
      char entry[320];
      const char *eq = strchr(s->hosts[i], '=');
      if (eq == NULL) continue;
      snprintf(entry, sizeof entry, "%.*s:%s", (int)(eq - s->hosts[i]), s->hosts[i], eq + 1);
      json_object_array_add(eh, json_object_new_string(entry));
    }
    json_object_object_add(hc, "ExtraHosts", eh);
  }
  json_object *mounts = json_object_new_array(), *m = json_object_new_object();
  json_object_object_add(m, "Type", json_object_new_string("volume"));
  json_object_object_add(m, "Source", json_object_new_string(vol));
  json_object_object_add(m, "Target", json_object_new_string(POLICY_DIR));
  json_object *vo = json_object_new_object();
  json_object_object_add(vo, "Labels", labels_new(instance, "policy"));
  json_object_object_add(m, "VolumeOptions", vo);
  json_object_array_add(mounts, m);
  json_object_object_add(hc, "Mounts", mounts);
  json_object_object_add(c, "HostConfig", hc);
  return c;
}

static const char *jstr(json_object *o, const char *a, const char *b, const char *c) {
  json_object *x = o;
  const char *path[] = {a, b, c};
  for (int i = 0; i < 3 && path[i]; i++)
    if (!json_object_object_get_ex(x, path[i], &x)) return NULL;
  return json_object_is_type(x, json_type_string) ? json_object_get_string(x) : NULL;
}

typedef struct ready_scan {
  int seen;
} ready_scan;

static int scan_ready(void *ud, int stream, const char *data, size_t len) {
  ready_scan *r = ud;
  if (stream == 1 && memmem(data, len, "\"event\":\"proxy.ready\"", 21)) r->seen = 1;
  return 0;
}

/* Waits until the proxy says it listens (a fresh start takes a few ms). */
static int wait_ready(sm_engine *e, const char *id, sm_error *err) {
  for (int waited = 0; waited < READY_WAIT_MS; waited += 20) {
    ready_scan r = {0};
    sm_error lerr = SM_ERROR_INIT;
    if (sm_engine_container_logs(e, id, 0, 0, scan_ready, &r, &lerr) == 0 && r.seen) return 0;
    json_object *info = NULL;
    if (sm_engine_container_inspect(e, id, &info, &lerr) == 0) {
      json_object *st = NULL, *running = NULL;
      int up = json_object_object_get_ex(info, "State", &st) && json_object_object_get_ex(st, "Running", &running) &&
               json_object_get_boolean(running);
      json_object_put(info);
      if (!up) return sm_error_set(err, SM_ESANDBOX, "the egress proxy %s stopped at start (docker logs %.12s)", id, id);
    }
    nap_ms(20);
  }
  return sm_error_set(err, SM_ETIMEOUT, "the egress proxy %.12s did not say it was ready within %d s", id,
                      READY_WAIT_MS / 1000);
}

/* A new proxy (its settings changed) joins the instance's internal networks
 * at once: their running sandboxes keep a way out. */
static void rejoin_networks(sm_engine *e, const char *instance, const char *proxy_id) {
  char label[160];
  snprintf(label, sizeof label, LABEL_PREFIX "instance=%s", instance);
  const char *labels[] = {label, EG_LABEL "=network"};
  json_object *nets = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_network_list(e, labels, 2, &nets, &err) != 0) return;
  for (size_t i = 0; i < json_object_array_length(nets); i++) {
    const char *n = jstr(json_object_array_get_idx(nets, i), "Name", NULL, NULL);
    const char *alias[] = {SM_EGRESS_PROXY_ALIAS};
    if (n && sm_engine_network_connect(e, n, proxy_id, alias, 1, &err) != 0)
      sm_log(SM_LOG_WARN, "egress: joining the new proxy to %s: %s", n, err.message);
  }
  json_object_put(nets);
}

/* The running proxy of the instance with these settings, made if needed. */
static int ensure_proxy(sm_engine *e, const char *instance, const proxy_settings *s, char id[SM_ENGINE_ID_MAX],
                        sm_error *err) {
  char name[SM_EGRESS_NAME_MAX], hash[17];
  eg_proxy_name(instance, name, sizeof name);
  settings_hash(s, hash);
  for (int attempt = 0; attempt < 3; attempt++) {
    json_object *info = NULL;
    sm_error ierr = SM_ERROR_INIT;
    int rc = sm_engine_container_inspect(e, name, &info, &ierr);
    if (rc == 0) {
      const char *have = jstr(info, "Config", "Labels", EG_LABEL "-config");
      const char *cid = jstr(info, "Id", NULL, NULL);
      json_object *st = NULL, *running = NULL;
      int up = json_object_object_get_ex(info, "State", &st) &&
               json_object_object_get_ex(st, "Running", &running) && json_object_get_boolean(running);
      snprintf(id, SM_ENGINE_ID_MAX, "%s", cid ? cid : name);
      int same = have && strcmp(have, hash) == 0;
      json_object_put(info);
      if (same && up) return 0;
      if (same) {
        if ((rc = sm_engine_container_start(e, id, err)) != 0) return rc;
        return wait_ready(e, id, err);
      }
      /* Other settings (or an older sandman): replace it. Its networks are
       * joined again by whoever prepares them next. */
      sm_log(SM_LOG_INFO, "egress: replacing the proxy %s (its settings changed)", name);
      rc = sm_engine_container_remove(e, id, 1, 0, &ierr);
      if (rc != 0 && rc != SM_ENOTFOUND) {
        *err = ierr;
        return rc;
      }
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
    if ((rc = wait_ready(e, id, err)) != 0) return rc;
    rejoin_networks(e, instance, id);
    return 0;
  }
  return sm_error_set(err, SM_ECONFLICT, "the egress proxy %s keeps changing under us", name);
}

/* ---- the internal network ---- */

static int network_subnet(json_object *net, char *out, size_t len) {
  json_object *ipam = NULL, *cfgs = NULL;
  if (!json_object_object_get_ex(net, "IPAM", &ipam) || !json_object_object_get_ex(ipam, "Config", &cfgs) ||
      !json_object_is_type(cfgs, json_type_array))
    return -1;
  for (size_t i = 0; i < json_object_array_length(cfgs); i++) {
    const char *sub = jstr(json_object_array_get_idx(cfgs, i), "Subnet", NULL, NULL);
    if (sub && strchr(sub, '.')) { /* the IPv4 range */
      snprintf(out, len, "%s", sub);
      return 0;
    }
  }
  return -1;
}

static int ensure_network(sm_engine *e, const char *instance, const char *project, const char *proxy_id,
                          sm_egress_net *out, sm_error *err) {
  network_name(instance, project, out->network, sizeof out->network);
  for (int attempt = 0; attempt < 3; attempt++) {
    json_object *net = NULL;
    sm_error ierr = SM_ERROR_INIT;
    int rc = sm_engine_network_inspect(e, out->network, &net, &ierr);
    if (rc == SM_ENOTFOUND) {
      json_object *labels = labels_new(instance, "network");
      json_object_object_add(labels, LABEL_PREFIX "project",
                             json_object_new_string(project && *project ? project : "default"));
      rc = sm_engine_network_create(e, out->network, NULL, 1, labels, NULL, &ierr);
      json_object_put(labels);
      if (rc != 0 && rc != SM_ECONFLICT) {
        *err = ierr;
        return sm_error_wrap(err, "creating the internal network %s", out->network);
      }
      continue;
    }
    if (rc != 0) {
      *err = ierr;
      return rc;
    }
    json_object *internal = NULL;
    if (!json_object_object_get_ex(net, "Internal", &internal) || !json_object_get_boolean(internal)) {
      json_object_put(net);
      return sm_error_set(err, SM_EUNSAFE, "network %s exists but is not internal: refusing to use it", out->network);
    }
    if (network_subnet(net, out->subnet, sizeof out->subnet) != 0) {
      json_object_put(net);
      return sm_error_set(err, SM_EPROTOCOL, "network %s has no IPv4 subnet", out->network);
    }
    json_object *containers = NULL;
    int joined = json_object_object_get_ex(net, "Containers", &containers) &&
                 json_object_object_get_ex(containers, proxy_id, NULL);
    json_object_put(net);
    if (joined) return 0;
    const char *alias[] = {SM_EGRESS_PROXY_ALIAS};
    rc = sm_engine_network_connect(e, out->network, proxy_id, alias, 1, &ierr);
    if (rc == 0) return 0;
    /* "already exists in network": someone else connected it; look again. */
    if (attempt == 2) {
      *err = ierr;
      return sm_error_wrap(err, "connecting the egress proxy to %s", out->network);
    }
  }
  return sm_error_set(err, SM_ECONFLICT, "network %s keeps changing under us", out->network);
}

int sm_egress_prepare(sm_engine *e, const sm_egress_proxy_options *opts, const char *project,
                      sm_egress_net *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  char instance[80], key[128];
  int rc = eg_instance(opts, instance, sizeof instance, err);
  if (rc != 0) return rc;
  proxy_settings s;
  settings_of(opts, &s);
  snprintf(key, sizeof key, "egress-%s", instance);
  sm_state_lock *lock = NULL;
  if ((rc = sm_state_key_lock(opts ? opts->state_dir : NULL, key, &lock, err)) != 0) return rc;
  rc = ensure_proxy(e, instance, &s, out->proxy_id, err);
  if (rc == 0) rc = ensure_network(e, instance, project, out->proxy_id, out, err);
  sm_state_unlock(lock);
  if (rc != 0) return rc;
  snprintf(out->proxy_url, sizeof out->proxy_url, "http://%s:%d", SM_EGRESS_PROXY_ALIAS, SM_EGRESS_PROXY_PORT);
  return 0;
}

/* ---- policies ---- */

/* What the engine host and its networks are: refused unless listed by
 * address. A local engine shares this host's addresses; a remote one is
 * the address it is reached at. */
static size_t engine_blocks(sm_engine *e, eg_block_in *out, size_t cap) {
  size_t n = 0;
  const char *host = sm_engine_host(e);
  if (host && strncmp(host, "unix://", 7) == 0) {
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0) {
      for (struct ifaddrs *i = ifs; i && n < cap; i = i->ifa_next) {
        if (i->ifa_addr == NULL || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
          continue;
        char a[64];
        const void *src = i->ifa_addr->sa_family == AF_INET
                              ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                              : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        if (inet_ntop(i->ifa_addr->sa_family, src, a, sizeof a) == NULL || strchr(a, '%')) continue;
        /* Loopback and link-local say more by their own names. */
        eg_addr ea;
        const char *what = eg_addr_parse(a, &ea) == 0 ? eg_addr_special(&ea) : NULL;
        if (what && (strcmp(what, "loopback") == 0 || strncmp(what, "link-local", 10) == 0)) continue;
        snprintf(out[n].cidr, sizeof out[n].cidr, "%s/%d", a, i->ifa_addr->sa_family == AF_INET ? 32 : 128);
        snprintf(out[n].why, sizeof out[n].why, "engine host");
        n++;
      }
      freeifaddrs(ifs);
    }
  } else if (host && (strncmp(host, "tcp://", 6) == 0 || strncmp(host, "https://", 8) == 0 ||
                      strncmp(host, "http://", 7) == 0)) {
    char name[256];
    const char *h = strstr(host, "://") + 3;
    size_t hl = strcspn(h, ":/");
    if (*h == '[') {
      h++;
      hl = strcspn(h, "]");
    }
    snprintf(name, sizeof name, "%.*s", (int)hl, h);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(name, NULL, &hints, &res) == 0) {
      for (struct addrinfo *ai = res; ai && n < cap; ai = ai->ai_next) {
        char a[64];
        const void *src = ai->ai_family == AF_INET ? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
                                                   : (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
        if (inet_ntop(ai->ai_family, src, a, sizeof a) == NULL) continue;
        snprintf(out[n].cidr, sizeof out[n].cidr, "%s/%d", a, ai->ai_family == AF_INET ? 32 : 128);
        snprintf(out[n].why, sizeof out[n].why, "engine host");
        n++;
      }
      freeaddrinfo(res);
    }
  }
  /* Every network of the engine: other sandboxes, other containers. */
  json_object *nets = NULL;
  sm_error lerr = SM_ERROR_INIT;
  if (sm_engine_network_list(e, NULL, 0, &nets, &lerr) == 0) {
    for (size_t i = 0; i < json_object_array_length(nets) && n < cap; i++) {
      json_object *ipam = NULL, *cfgs = NULL;
      json_object *net = json_object_array_get_idx(nets, i);
      if (!json_object_object_get_ex(net, "IPAM", &ipam) || !json_object_object_get_ex(ipam, "Config", &cfgs) ||
          !json_object_is_type(cfgs, json_type_array))
        continue;
      for (size_t j = 0; j < json_object_array_length(cfgs) && n < cap; j++) {
        const char *sub = jstr(json_object_array_get_idx(cfgs, j), "Subnet", NULL, NULL);
        eg_pattern p;
        char why[EG_WHY_MAX], tmp[80];
        if (sub == NULL) continue;
        snprintf(tmp, sizeof tmp, strchr(sub, ':') ? "[%s]" : "%s", sub);
        if (eg_pattern_parse(tmp, &p, why, sizeof why) != 0 || p.kind != EG_PAT_ADDR) continue;
        snprintf(out[n].cidr, sizeof out[n].cidr, "%s", sub);
        snprintf(out[n].why, sizeof out[n].why, "engine network");
        n++;
      }
    }
    json_object_put(nets);
  } else {
    sm_log(SM_LOG_WARN, "egress: listing the engine's networks: %s (their ranges are refused as private anyway)",
           lerr.message);
  }
  return n;
}

static int container_address(sm_engine *e, const char *container, const char *network, char *out, size_t len,
                             sm_error *err) {
  json_object *info = NULL;
  int rc = sm_engine_container_inspect(e, container, &info, err);
  if (rc != 0) return rc;
  json_object *ns = NULL, *nets = NULL, *net = NULL;
  const char *ip = NULL;
  if (json_object_object_get_ex(info, "NetworkSettings", &ns) && json_object_object_get_ex(ns, "Networks", &nets) &&
      json_object_object_get_ex(nets, network, &net))
    ip = jstr(net, "IPAddress", NULL, NULL);
  eg_addr a;
  if (ip == NULL || *ip == '\0' || eg_addr_parse(ip, &a) != 0) {
    json_object_put(info);
    return sm_error_set(err, SM_ESANDBOX, "container %.12s has no address on network %s (not started, or not attached)",
                        container, network);
  }
  eg_addr_format(&a, out, len);
  json_object_put(info);
  return 0;
}

static int write_policy_file(sm_engine *e, const sm_egress_net *net, const char *ip, const sm_buf *text,
                             sm_error *err) {
  eg_tar t;
  if (eg_tar_one(&t, ip, 0644, text->data, text->len) != 0)
    return sm_error_set(err, SM_ENOMEM, "egress policy: out of memory");
  int rc = sm_engine_archive_put(e, net->proxy_id, POLICY_DIR, eg_tar_read, &t, err);
  eg_tar_dispose(&t);
  if (rc != 0) sm_error_wrap(err, "writing the egress policy of %s into the proxy", ip);
  return rc;
}

int sm_egress_set_policy(sm_engine *e, const sm_egress_proxy_options *opts, const sm_egress_net *net,
                         const char *container, const sm_egress_policy *policy, sm_error *err) {
  (void)opts;
  char ip[64];
  int rc = container_address(e, container, net->network, ip, sizeof ip, err);
  if (rc != 0) return rc;
  eg_block_in *blocks = calloc(EG_POLICY_MAX_BLOCKS, sizeof *blocks);
  if (blocks == NULL) return sm_error_set(err, SM_ENOMEM, "egress policy: out of memory");
  size_t nb = engine_blocks(e, blocks, EG_POLICY_MAX_BLOCKS);
  sm_buf text;
  sm_buf_init(&text, EG_POLICY_MAX_BYTES);
  rc = eg_policy_text(&text, policy, net->subnet, blocks, nb, err);
  free(blocks);
  if (rc == 0) rc = write_policy_file(e, net, ip, &text, err);
  sm_buf_dispose(&text);
  return rc;
}

int sm_egress_revoke(sm_engine *e, const sm_egress_proxy_options *opts, const sm_egress_net *net,
                     const char *container, sm_error *err) {
  (void)opts;
  char ip[64];
  int rc = container_address(e, container, net->network, ip, sizeof ip, err);
  if (rc != 0) return rc;
  sm_buf text;
  sm_buf_init(&text, EG_POLICY_MAX_BYTES);
  rc = eg_policy_revoked_text(&text, net->subnet, err);
  if (rc == 0) rc = write_policy_file(e, net, ip, &text, err);
  sm_buf_dispose(&text);
  return rc;
}

/* ---- teardown ---- */

int sm_egress_teardown(sm_engine *e, const sm_egress_proxy_options *opts, sm_error *err) {
  char instance[80], name[SM_EGRESS_NAME_MAX], label[160];
  int rc = eg_instance(opts, instance, sizeof instance, err);
  if (rc != 0) return rc;
  eg_proxy_name(instance, name, sizeof name);
  sm_error lerr = SM_ERROR_INIT;
  rc = sm_engine_container_remove(e, name, 1, 0, &lerr);
  if (rc != 0 && rc != SM_ENOTFOUND) {
    *err = lerr;
    return rc;
  }
  int first = 0;
  snprintf(label, sizeof label, LABEL_PREFIX "instance=%s", instance);
  const char *labels[] = {label, EG_LABEL "=network"};
  json_object *nets = NULL;
  if ((rc = sm_engine_network_list(e, labels, 2, &nets, err)) != 0) return rc;
  for (size_t i = 0; i < json_object_array_length(nets); i++) {
    const char *n = jstr(json_object_array_get_idx(nets, i), "Name", NULL, NULL);
    if (n == NULL) continue;
    sm_error nerr = SM_ERROR_INIT;
    int r = sm_engine_network_remove(e, n, &nerr);
    if (r != 0 && r != SM_ENOTFOUND && first == 0) {
      first = r;
      *err = nerr;
      sm_error_wrap(err, "removing network %s (a container still on it?)", n);
    }
  }
  json_object_put(nets);
  char vol[SM_EGRESS_NAME_MAX];
  volume_name(instance, vol, sizeof vol);
  sm_error verr = SM_ERROR_INIT;
  rc = sm_engine_volume_remove(e, vol, 1, &verr);
  if (rc != 0 && rc != SM_ENOTFOUND && first == 0) {
    first = rc;
    *err = verr;
  }
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
