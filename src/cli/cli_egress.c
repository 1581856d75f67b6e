/* Network allowlist, live (docs/network.md#live-policy): the policy of
 * every running allowlist sandbox of the instance written again from a
 * configuration, so that a changed egress list reaches sandboxes that keep
 * running (`sandman config reload`, SIGHUP to `sandman worker start`).
 * Connections already open keep the policy they were judged by. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define LABEL(name) "io.sandman." name

static const char *label_of(json_object *labels, const char *key) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(labels, key, &v) || !json_object_is_type(v, json_type_string)) return NULL;
  const char *s = json_object_get_string(v);
  return s && *s ? s : NULL;
}

/* One listed container: its policy again if it is on an egress network. */
static int reapply_one(sm_engine *e, const sm_egress_proxy_options *po, const sm_config *cfg, json_object *c,
                       int *done, sm_error *err) {
  json_object *hc = NULL, *nm = NULL, *labels = NULL, *id = NULL, *names = NULL;
  *done = 0;
  if (!json_object_object_get_ex(c, "HostConfig", &hc) || !json_object_object_get_ex(hc, "NetworkMode", &nm) ||
      strncmp(json_object_get_string(nm), "sandman-egress-", 15) != 0)
    return 0;
  json_object_object_get_ex(c, "Labels", &labels);
  json_object_object_get_ex(c, "Id", &id);
  json_object_object_get_ex(c, "Names", &names);
  const char *name = names ? json_object_get_string(json_object_array_get_idx(names, 0)) : NULL;
  if (name && *name == '/') name++;
  const char *agent = label_of(labels, LABEL("agent")), *project = label_of(labels, LABEL("project"));
  sm_egress_net net;
  int rc = sm_egress_prepare(e, po, project, &net, err);
  if (rc != 0) return rc;
  /* Only a sandbox on its project's network: another instance's or a
   * stale one is left alone. */
  if (strcmp(net.network, json_object_get_string(nm)) != 0) return 0;
  sm_config_egress eg;
  sm_config_egress_get(cfg, agent, &eg);
  sm_egress_policy p = {name,    agent, project, label_of(labels, LABEL("run")), label_of(labels, LABEL("worker")),
                        eg.levels, eg.n_levels};
  rc = sm_egress_set_policy(e, po, &net, json_object_get_string(id), &p, err);
  if (rc != 0) return sm_error_wrap(err, "the egress policy of %s", name ? name : "a sandbox");
  *done = 1;
  return 0;
}

int cli_egress_reapply(sm_runner *runner, const sm_config *cfg, size_t *out_n, sm_error *err) {
  *out_n = 0;
  sm_engine *e = NULL;
  int rc = sm_runner_engine(runner, &e, err);
  if (rc != 0) return rc;
  char inst[200];
  snprintf(inst, sizeof inst, LABEL("instance") "=%s", sm_runner_instance(runner));
  const char *labels[] = {LABEL("managed") "=true", inst};
  json_object *list = NULL;
  if ((rc = sm_engine_container_list(e, 0, labels, 2, &list, err)) != 0) return rc;
  sm_egress_settings *st = sm_runner_egress(runner);
  const sm_egress_proxy_options *po = sm_egress_settings_options(st);
  int first = 0;
  for (size_t i = 0; i < json_object_array_length(list); i++) {
    sm_error one = SM_ERROR_INIT;
    int done = 0;
    rc = reapply_one(e, po, cfg, json_object_array_get_idx(list, i), &done, &one);
    /* One that vanished meanwhile is no failure; the others still get theirs. */
    if (rc != 0 && rc != SM_ENOTFOUND && first == 0) {
      first = rc;
      *err = one;
    }
    *out_n += (size_t)done;
  }
  sm_egress_settings_unref(st);
  json_object_put(list);
  return first;
}
