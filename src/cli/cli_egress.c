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

/* One listed relay: its sandbox's policy again, from cfg. */
static int reapply_one(sm_engine *e, const sm_egress_proxy_options *po, const sm_egress_net *net,
                       const sm_config *cfg, json_object *relay, int *done, sm_error *err) {
  json_object *rl = NULL, *sid = NULL, *info = NULL, *conf = NULL, *labels = NULL, *jname = NULL;
  *done = 0;
  if (!json_object_object_get_ex(relay, "Labels", &rl) ||
      !json_object_object_get_ex(rl, LABEL("egress-sandbox"), &sid))
    return 0;
  int rc = sm_engine_container_inspect(e, json_object_get_string(sid), &info, err);
  if (rc != 0) return rc;
  json_object_object_get_ex(info, "Config", &conf);
  json_object_object_get_ex(conf, "Labels", &labels);
  json_object_object_get_ex(info, "Name", &jname);
  const char *name = jname ? json_object_get_string(jname) : NULL;
  if (name && *name == '/') name++;
  const char *agent = label_of(labels, LABEL("agent")), *project = label_of(labels, LABEL("project"));
  sm_config_egress eg;
  sm_config_egress_get(cfg, agent, &eg);
  sm_egress_policy p = {name,    agent, project, label_of(labels, LABEL("run")), label_of(labels, LABEL("worker")),
                        eg.levels, eg.n_levels};
  rc = sm_egress_set_policy(e, po, net, json_object_get_string(sid), &p, err);
  if (rc != 0) sm_error_wrap(err, "the egress policy of %s", name ? name : "a sandbox");
  else *done = 1;
  json_object_put(info);
  return rc;
}

/* Every running allowlist sandbox of the instance has a relay: each gets
 * its policy again (one whose relay is gone reaches nothing, and gets both
 * at its next call). */
int cli_egress_reapply(sm_runner *runner, const sm_config *cfg, size_t *out_n, sm_error *err) {
  *out_n = 0;
  sm_engine *e = NULL;
  int rc = sm_runner_engine(runner, &e, err);
  if (rc != 0) return rc;
  char inst[200];
  snprintf(inst, sizeof inst, LABEL("instance") "=%s", sm_runner_instance(runner));
  const char *labels[] = {LABEL("managed") "=true", inst, LABEL("egress") "=relay"};
  json_object *list = NULL;
  if ((rc = sm_engine_container_list(e, 0, labels, 3, &list, err)) != 0) return rc;
  sm_egress_settings *st = sm_runner_egress(runner);
  const sm_egress_proxy_options *po = sm_egress_settings_options(st);
  sm_egress_net net;
  size_t n = json_object_array_length(list);
  int first = 0;
  int prepared = n == 0 || (first = sm_egress_prepare(e, po, &net, err)) == 0;
  for (size_t i = 0; prepared && i < n; i++) {
    sm_error one = SM_ERROR_INIT;
    int done = 0;
    rc = reapply_one(e, po, &net, cfg, json_object_array_get_idx(list, i), &done, &one);
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
