/* Container config -> swarm service spec (see swarm_spec.h). Each key of
 * the config is handled by one table entry; a key with no entry is
 * refused, so the translation fails closed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/swarm_spec.h"

typedef struct xlate {
  json_object *cs;        /* ContainerSpec */
  json_object *limits;    /* Resources.Limits */
  json_object *mounts;    /* ContainerSpec.Mounts */
  json_object *restart;   /* RestartPolicy */
  int network_none;
  const sandbox_swarm_spec_options *opts;
  sandbox_swarm_checks *checks;
  sm_error *err;
} xlate;

typedef int (*handler)(xlate *x, const char *key, json_object *v);

typedef struct rule {
  const char *key;
  handler fn;
} rule;

static int refuse(xlate *x, const char *where, const char *key, const char *why) {
  return sm_error_set(x->err, SM_EUNSUPPORTED,
                      "the swarm backend cannot carry %s%s%s: %s (refused rather than "
                      "run a sandbox with less than was asked; docs/scale-out.md)",
                      where, *where ? "." : "", key, why);
}

static int is_false(json_object *v) {
  return v == NULL || (json_object_is_type(v, json_type_boolean) && !json_object_get_boolean(v));
}

static int empty(json_object *v) {
  if (v == NULL) return 1;
  if (json_object_is_type(v, json_type_null)) return 1;
  if (json_object_is_type(v, json_type_array)) return json_object_array_length(v) == 0;
  if (json_object_is_type(v, json_type_object)) return json_object_object_length(v) == 0;
  if (json_object_is_type(v, json_type_string)) return json_object_get_string_len(v) == 0;
  return 0;
}

static void put(json_object *o, const char *key, json_object *v) {
  json_object_object_add(o, key, json_object_get(v));
}

/* ---- top-level keys ---- */

static int carry_as(xlate *x, const char *to, json_object *v) {
  put(x->cs, to, v);
  return 0;
}
static int top_image(xlate *x, const char *k, json_object *v) { (void)k; return carry_as(x, "Image", v); }
static int top_user(xlate *x, const char *k, json_object *v) { (void)k; return carry_as(x, "User", v); }
static int top_hostname(xlate *x, const char *k, json_object *v) { (void)k; return carry_as(x, "Hostname", v); }
static int top_dir(xlate *x, const char *k, json_object *v) { (void)k; return carry_as(x, "Dir", v); }
static int top_env(xlate *x, const char *k, json_object *v) { (void)k; return carry_as(x, "Env", v); }
static int top_stop_signal(xlate *x, const char *k, json_object *v) { (void)k; return carry_as(x, "StopSignal", v); }
static int top_labels(xlate *x, const char *k, json_object *v) { (void)k; return carry_as(x, "Labels", v); }

/* A service's Command replaces the image's entry point as Entrypoint does,
 * and its Args the image's Cmd. */
static int top_entrypoint(xlate *x, const char *k, json_object *v) { (void)k; return carry_as(x, "Command", v); }
static int top_cmd(xlate *x, const char *k, json_object *v) {
  (void)k;
  return empty(v) ? 0 : carry_as(x, "Args", v);
}

static int top_must_be_false(xlate *x, const char *k, json_object *v) {
  if (is_false(v)) return 0;
  return refuse(x, "", k, "a sandbox's main process has no terminal and no stdin");
}

static const rule top_rules[] = {
    {"Image", top_image},           {"User", top_user},
    {"Hostname", top_hostname},     {"WorkingDir", top_dir},
    {"Env", top_env},               {"Entrypoint", top_entrypoint},
    {"Cmd", top_cmd},           {"Tty", top_must_be_false},
    {"OpenStdin", top_must_be_false}, {"AttachStdin", top_must_be_false},
    {"AttachStdout", top_must_be_false}, {"AttachStderr", top_must_be_false},
    {"StopSignal", top_stop_signal}, {"Labels", top_labels},
};

/* ---- HostConfig ---- */

static int hc_network(xlate *x, const char *k, json_object *v) {
  const char *mode = json_object_get_string(v);
  if (strcmp(mode, "none") == 0) {
    /* Swarm services cannot use the none network, and a task with no
     * network gets the node's default bridge with a route out: the sandbox
     * joins a network of its own instead (internal overlay: no gateway, no
     * other member, not the node's namespace). */
    if (x->opts->network == NULL || *x->opts->network == '\0')
      return refuse(x, "HostConfig", k, "network none needs the sandbox's own internal network");
    x->network_none = 1;
    return 0;
  }
  if (strcmp(mode, "bridge") == 0 || strcmp(mode, "default") == 0) return 0;
  return refuse(x, "HostConfig", k, "only network none and bridge exist on the swarm backend");
}

static int hc_init(xlate *x, const char *k, json_object *v) { (void)k; return carry_as(x, "Init", v); }
static int hc_readonly(xlate *x, const char *k, json_object *v) { (void)k; return carry_as(x, "ReadOnly", v); }
static int hc_capdrop(xlate *x, const char *k, json_object *v) { (void)k; return carry_as(x, "CapabilityDrop", v); }
static int hc_capadd(xlate *x, const char *k, json_object *v) {
  (void)k;
  return empty(v) ? 0 : carry_as(x, "CapabilityAdd", v);
}
static int hc_ulimits(xlate *x, const char *k, json_object *v) {
  (void)k;
  return empty(v) ? 0 : carry_as(x, "Ulimits", v);
}

static int hc_ipc(xlate *x, const char *k, json_object *v) {
  const char *mode = json_object_get_string(v);
  if (strcmp(mode, "private") != 0 && *mode != '\0')
    return refuse(x, "HostConfig", k, "only a private IPC namespace");
  x->checks->ipc_private = 1;
  return 0;
}

static int hc_security_opt(xlate *x, const char *k, json_object *v) {
  size_t n = json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
  for (size_t i = 0; i < n; i++) {
    const char *o = json_object_get_string(json_object_array_get_idx(v, i));
    if (strcmp(o, "no-new-privileges") == 0 || strcmp(o, "no-new-privileges:true") == 0 ||
        strcmp(o, "no-new-privileges=true") == 0) {
      x->checks->no_new_privileges = 1;
      continue;
    }
    char why[160];
    snprintf(why, sizeof why, "'%.100s' has no field in a 1.41 service spec", o);
    return refuse(x, "HostConfig", k, why);
  }
  return 0;
}

static int hc_limit(xlate *x, const char *to, json_object *v) {
  if (json_object_get_int64(v) > 0) put(x->limits, to, v);
  return 0;
}
static int hc_pids(xlate *x, const char *k, json_object *v) { (void)k; return hc_limit(x, "Pids", v); }
static int hc_cpus(xlate *x, const char *k, json_object *v) { (void)k; return hc_limit(x, "NanoCPUs", v); }
static int hc_memory(xlate *x, const char *k, json_object *v) { (void)k; return hc_limit(x, "MemoryBytes", v); }
static int hc_swap(xlate *x, const char *k, json_object *v) {
  (void)k;
  x->checks->memory_swap = json_object_get_int64(v);
  return 0;
}

static int hc_runtime(xlate *x, const char *k, json_object *v) {
  (void)k;
  snprintf(x->checks->runtime, sizeof x->checks->runtime, "%s", json_object_get_string(v));
  return 0;
}

static int hc_restart(xlate *x, const char *k, json_object *v) {
  json_object *name = NULL;
  const char *n = json_object_object_get_ex(v, "Name", &name) ? json_object_get_string(name) : "";
  if (*n != '\0' && strcmp(n, "no") != 0)
    return refuse(x, "HostConfig", k, "a sandbox is never restarted");
  return 0;
}

/* "rw,nosuid,nodev,size=N,mode=1777" -> the local driver's tmpfs options
 * without "rw" (the default). */
static json_object *tmpfs_volume(const char *target, const char *options, json_object *labels) {
  char o[512] = "";
  size_t used = 0;
  const char *p = options ? options : "";
  while (*p) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len > 0 && !(len == 2 && strncmp(p, "rw", 2) == 0)) {
      int n = snprintf(o + used, sizeof o - used, "%s%.*s", used ? "," : "", (int)len, p);
      if (n < 0 || (size_t)n >= sizeof o - used) return NULL;
      used += (size_t)n;
    }
    p += len + (comma ? 1 : 0);
  }
  json_object *m = json_object_new_object();
  json_object *vo = json_object_new_object();
  json_object *dc = json_object_new_object();
  json_object *dopts = json_object_new_object();
  json_object_object_add(m, "Type", json_object_new_string("volume"));
  json_object_object_add(m, "Target", json_object_new_string(target));
  json_object_object_add(dopts, "type", json_object_new_string("tmpfs"));
  json_object_object_add(dopts, "device", json_object_new_string("tmpfs"));
  json_object_object_add(dopts, "o", json_object_new_string(o));
  json_object_object_add(dc, "Name", json_object_new_string("local"));
  json_object_object_add(dc, "Options", dopts);
  json_object_object_add(vo, "NoCopy", json_object_new_boolean(1));
  if (labels) json_object_object_add(vo, "Labels", json_object_get(labels));
  json_object_object_add(vo, "DriverConfig", dc);
  json_object_object_add(m, "VolumeOptions", vo);
  return m;
}

static int hc_tmpfs(xlate *x, const char *k, json_object *v) {
  if (!json_object_is_type(v, json_type_object)) return refuse(x, "HostConfig", k, "not a map");
  json_object_object_foreach(v, target, opt) {
    json_object *m = tmpfs_volume(target, json_object_get_string(opt), NULL);
    if (m == NULL) return sm_error_set(x->err, SM_EINVAL, "tmpfs options of %s too long", target);
    json_object_array_add(x->mounts, m);
  }
  return 0;
}

/* The config's named volume (/workspace) becomes an anonymous one with the
 * same driver options: the swarm removes it with the task, where a named
 * one would stay behind on whichever node ran the task. */
static int hc_mounts(xlate *x, const char *k, json_object *v) {
  size_t n = json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
  for (size_t i = 0; i < n; i++) {
    json_object *m = json_object_array_get_idx(v, i);
    json_object *type = NULL, *target = NULL, *vo = NULL;
    json_object_object_get_ex(m, "Type", &type);
    json_object_object_get_ex(m, "Target", &target);
    json_object_object_get_ex(m, "VolumeOptions", &vo);
    if (type == NULL || strcmp(json_object_get_string(type), "volume") != 0 || target == NULL)
      return refuse(x, "HostConfig", k, "only volumes (never a bind mount)");
    json_object *copy = json_object_new_object();
    json_object_object_add(copy, "Type", json_object_new_string("volume"));
    put(copy, "Target", target);
    json_object *ro = NULL;
    if (json_object_object_get_ex(m, "ReadOnly", &ro)) put(copy, "ReadOnly", ro);
    json_object *nvo = json_object_new_object();
    json_object *labels = NULL, *dc = NULL;
    if (vo && json_object_object_get_ex(vo, "Labels", &labels)) put(nvo, "Labels", labels);
    if (vo && json_object_object_get_ex(vo, "DriverConfig", &dc)) put(nvo, "DriverConfig", dc);
    json_object_object_add(nvo, "NoCopy", json_object_new_boolean(1));
    json_object_object_add(copy, "VolumeOptions", nvo);
    json_object_array_add(x->mounts, copy);
  }
  return 0;
}

static int hc_must_be_empty(xlate *x, const char *k, json_object *v) {
  if (empty(v) || is_false(v)) return 0;
  return refuse(x, "HostConfig", k, "no such setting for a swarm task");
}

static const rule hc_rules[] = {
    {"NetworkMode", hc_network},   {"Init", hc_init},
    {"ReadonlyRootfs", hc_readonly}, {"IpcMode", hc_ipc},
    {"CapDrop", hc_capdrop},       {"CapAdd", hc_capadd},
    {"SecurityOpt", hc_security_opt}, {"PidsLimit", hc_pids},
    {"NanoCpus", hc_cpus},         {"Memory", hc_memory},
    {"MemorySwap", hc_swap},       {"Tmpfs", hc_tmpfs},
    {"Ulimits", hc_ulimits},       {"Runtime", hc_runtime},
    {"RestartPolicy", hc_restart}, {"Mounts", hc_mounts},
    {"Binds", hc_must_be_empty},   {"Privileged", hc_must_be_empty},
    {"Devices", hc_must_be_empty}, {"StorageOpt", hc_must_be_empty},
};

static int apply(xlate *x, json_object *obj, const rule *rules, size_t n_rules, const char *where) {
  json_object_object_foreach(obj, key, v) {
    size_t i = 0;
    while (i < n_rules && strcmp(rules[i].key, key) != 0) i++;
    if (i == n_rules) return refuse(x, where, key, "no translation to a service spec");
    if (strcmp(key, "HostConfig") == 0) continue;
    int rc = rules[i].fn(x, key, v);
    if (rc != 0) return rc;
  }
  return 0;
}

static int hostconfig_key(xlate *x, const char *k, json_object *v) {
  (void)x;
  (void)k;
  (void)v;
  return 0;
}

int sandbox_swarm_service_spec(json_object *config, const sandbox_swarm_spec_options *opts,
                          json_object **out, sandbox_swarm_checks *checks, sm_error *err) {
  *out = NULL;
  memset(checks, 0, sizeof *checks);
  if (!json_object_is_type(config, json_type_object) || opts == NULL || opts->name == NULL)
    return sm_error_set(err, SM_EINVAL, "swarm spec: no container config or service name");
  json_object *hc = NULL;
  if (!json_object_object_get_ex(config, "HostConfig", &hc) ||
      !json_object_is_type(hc, json_type_object))
    return sm_error_set(err, SM_EINVAL, "swarm spec: the container config has no HostConfig");

  json_object *spec = json_object_new_object();
  xlate x = {.cs = json_object_new_object(),
             .limits = json_object_new_object(),
             .mounts = json_object_new_array(),
             .opts = opts,
             .checks = checks,
             .err = err};
  rule tops[sizeof top_rules / sizeof top_rules[0] + 1];
  memcpy(tops, top_rules, sizeof top_rules);
  tops[sizeof top_rules / sizeof top_rules[0]] = (rule){"HostConfig", hostconfig_key};
  int rc = apply(&x, config, tops, sizeof tops / sizeof tops[0], "");
  if (rc == 0) rc = apply(&x, hc, hc_rules, sizeof hc_rules / sizeof hc_rules[0], "HostConfig");
  if (rc != 0) {
    json_object_put(spec);
    json_object_put(x.cs);
    json_object_put(x.limits);
    json_object_put(x.mounts);
    return rc;
  }

  json_object_object_add(x.cs, "Mounts", x.mounts);
  /* The keeper ends on SIGTERM at once; a short grace keeps removal quick. */
  json_object_object_add(x.cs, "StopGracePeriod", json_object_new_int64(2000000000LL));

  json_object *tt = json_object_new_object();
  json_object_object_add(tt, "ContainerSpec", x.cs);
  json_object *res = json_object_new_object();
  json_object_object_add(res, "Limits", x.limits);
  if (opts->reserve_nano_cpus > 0 || opts->reserve_memory > 0) {
    json_object *rv = json_object_new_object();
    if (opts->reserve_nano_cpus > 0)
      json_object_object_add(rv, "NanoCPUs", json_object_new_int64(opts->reserve_nano_cpus));
    if (opts->reserve_memory > 0)
      json_object_object_add(rv, "MemoryBytes", json_object_new_int64(opts->reserve_memory));
    json_object_object_add(res, "Reservations", rv);
  }
  json_object_object_add(tt, "Resources", res);
  json_object *rp = json_object_new_object();
  json_object_object_add(rp, "Condition", json_object_new_string("none"));
  json_object_object_add(rp, "MaxAttempts", json_object_new_int(0));
  json_object_object_add(tt, "RestartPolicy", rp);
  json_object *placement = json_object_new_object();
  json_object *cons = json_object_new_array();
  for (size_t i = 0; i < opts->n_constraints; i++)
    json_object_array_add(cons, json_object_new_string(opts->constraints[i]));
  /* A runtime other than the node's default cannot be asked of a swarm
   * task: the sandbox goes to nodes labelled as running it by default,
   * and the runtime is checked on the container after it starts. */
  if (checks->runtime[0]) {
    char c[160];
    snprintf(c, sizeof c, "node.labels.sandman.runtime==%s", checks->runtime);
    json_object_array_add(cons, json_object_new_string(c));
  }
  json_object_object_add(placement, "Constraints", cons);
  json_object_object_add(tt, "Placement", placement);
  if (x.network_none) {
    json_object *nets = json_object_new_array();
    json_object *n = json_object_new_object();
    json_object_object_add(n, "Target", json_object_new_string(opts->network));
    json_object_array_add(nets, n);
    json_object_object_add(tt, "Networks", nets);
  }

  json_object_object_add(spec, "Name", json_object_new_string(opts->name));
  json_object *labels = NULL;
  if (opts->service_labels) json_object_deep_copy(opts->service_labels, &labels, NULL);
  json_object_object_add(spec, "Labels", labels ? labels : json_object_new_object());
  json_object_object_add(spec, "TaskTemplate", tt);
  json_object *mode = json_object_new_object();
  json_object *rep = json_object_new_object();
  json_object_object_add(rep, "Replicas", json_object_new_int(1));
  json_object_object_add(mode, "Replicated", rep);
  json_object_object_add(spec, "Mode", mode);
  /* No virtual IP and no load balancer endpoint on the sandbox's network. */
  json_object *ep = json_object_new_object();
  json_object_object_add(ep, "Mode", json_object_new_string("dnsrr"));
  json_object_object_add(spec, "EndpointSpec", ep);
  *out = spec;
  return 0;
}
