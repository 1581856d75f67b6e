/* sandman config check [FILE]
 * sandman config explain [--agent A] [--tool T] [--user U] [--json] [run flags]
 *
 * check validates a file (exit 2 with FILE:LINE:COLUMN on a bad one);
 * explain resolves one call and shows every setting with its source, the
 * policy and placement decisions and the scope key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cmd_config_check(const cli_call *call) {
  const char *path = call->n_args == 1 ? call->args[0] : call->g->config_path;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_config_load(&cfg, path, &err) != 0) return cli_fail(&err);
  const char *used = sm_config_path(cfg);
  if (used) printf("ok: %s\n", used);
  else printf("ok: no configuration file found; the built-in defaults apply\n");
  sm_config_free(cfg);
  return CLI_EXIT_OK;
}

int cmd_config_reload(const cli_call *call) {
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_config_load(&cfg, call->g->config_path, &err) != 0) return cli_fail(&err);
  sm_runner *runner = NULL;
  int rc = cli_runner_new(call->g, cfg, NULL, &runner);
  if (rc) {
    sm_config_free(cfg);
    return rc;
  }
  size_t n = 0;
  rc = cli_egress_reapply(runner, cfg, &n, &err);
  sm_runner_free(runner);
  sm_config_free(cfg);
  if (rc != 0) return cli_fail(&err);
  printf("egress policy applied to %zu running allowlist sandbox(es)\n", n);
  return CLI_EXIT_OK;
}

static int is_size(const char *name) {
  return !strcmp(name, "memory") || !strcmp(name, "disk") || !strcmp(name, "tmpfs") ||
         !strcmp(name, "stdout_cap") || !strcmp(name, "stderr_cap");
}

static void format_value(const char *name, json_object *v, char *buf, size_t len) {
  if (v == NULL) {
    snprintf(buf, len, "(unset)");
  } else if (json_object_is_type(v, json_type_array)) {
    size_t used = 0, n = json_object_array_length(v);
    buf[0] = '\0';
    if (n == 0) snprintf(buf, len, "[]");
    for (size_t i = 0; i < n && used < len; i++) {
      int w = snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
                       json_object_get_string(json_object_array_get_idx(v, i)));
      if (w < 0) break;
      used += (size_t)w;
    }
  } else if (is_size(name)) {
    sm_format_size(json_object_get_int64(v), buf, len);
  } else if (!strcmp(name, "timeout") || !strcmp(name, "idle_timeout")) {
    snprintf(buf, len, "%gs", json_object_get_double(v));
  } else if (json_object_is_type(v, json_type_boolean)) {
    snprintf(buf, len, "%s", json_object_get_boolean(v) ? "true" : "false");
  } else {
    const char *s = json_object_get_string(v);
    const char *empty = !strcmp(name, "runtime") ? "(engine default)"
                        : !strcmp(name, "user")  ? "(the image's user)"
                                                 : "\"\"";
    snprintf(buf, len, "%s", s && *s ? s : empty);
  }
}

/* egress.allow / egress.deny by level, when the network is allowlist. */
static void print_egress(const sm_resolved *r, json_object *j) {
  if (strcmp(r->settings.network, "allowlist") != 0) return;
  json_object *eg = NULL, *allow = NULL, *deny = NULL;
  if (!json_object_object_get_ex(j, "egress", &eg)) return;
  json_object_object_get_ex(eg, "allow", &allow);
  json_object_object_get_ex(eg, "deny", &deny);
  if (json_object_array_length(allow) == 0) printf("egress:      nothing reachable (no egress.allow list)\n");
  for (int pass = 0; pass < 2; pass++) {
    json_object *list = pass ? deny : allow;
    for (size_t i = 0; i < json_object_array_length(list); i++) {
      json_object *lv = json_object_array_get_idx(list, i), *level = NULL, *pats = NULL;
      json_object_object_get_ex(lv, "level", &level);
      json_object_object_get_ex(lv, "patterns", &pats);
      char buf[1100];
      format_value("egress", pats, buf, sizeof buf);
      printf("egress:      %s.egress.%s: %s\n", json_object_get_string(level), pass ? "deny" : "allow", buf);
    }
  }
}

/* The "host_tools" part: whether the call gets the route, and each host
 * tool with the rule that gives or refuses it. */
static void print_host_tools(json_object *j) {
  json_object *h = NULL, *tools = NULL, *route = NULL, *why = NULL;
  if (!json_object_object_get_ex(j, "host_tools", &h)) return;
  json_object_object_get_ex(h, "tools", &tools);
  json_object_object_get_ex(h, "route", &route);
  json_object_object_get_ex(h, "route_rule", &why);
  if (json_object_array_length(tools) == 0) {
    printf("host tools:  none (no broker.tools)\n");
    return;
  }
  const char *w = json_object_get_string(why);
  if (json_object_get_boolean(route)) printf("host tools:  the call gets the host-tool route\n");
  else printf("host tools:  no route: %s\n", w);
  for (size_t i = 0; i < json_object_array_length(tools); i++) {
    json_object *t = json_object_array_get_idx(tools, i), *n = NULL, *ok = NULL, *rule = NULL;
    json_object_object_get_ex(t, "name", &n);
    json_object_object_get_ex(t, "allowed", &ok);
    json_object_object_get_ex(t, "rule", &rule);
    printf("  %-20s %-4s %s\n", json_object_get_string(n), json_object_get_boolean(ok) ? "yes" : "NO",
           json_object_get_string(rule));
  }
}

static void print_text(const sm_config *cfg, const sm_resolved *r, json_object *j,
                       const char *agent, const char *tool, const char *user) {
  const char *path = sm_config_path(cfg);
  printf("config:      %s\n", path ? path : "(none found: built-in defaults)");
  const char *near = agent ? sm_config_agent_nearest(cfg, agent) : NULL;
  if (near)
    printf("agent:       %s (no agents entry: the defaults apply; did you mean '%s'?)\n", agent,
           near);
  else if (agent)
    printf("agent:       %s%s\n", agent,
           r->agent_known ? "" : " (no agents entry: the defaults apply)");
  else
    printf("agent:       (none)\n");
  printf("tool:        %s\n", tool ? tool : "(none: checked as exec)");
  if (user) printf("user:        %s\n", user);
  printf("allowed:     %s (%s)\n", r->allowed ? "yes" : "NO", r->allow_rule);
  printf("sandboxed:   %s (%s)\n", r->sandboxed ? "yes" : "no", r->sandbox_rule);
  if (r->scope_key[0])
    printf("scope key:   %s (scope %s)\n", r->scope_key, r->scope);
  else if (r->scope[0] && strcmp(r->scope, "per_call") != 0)
    printf("scope key:   (none: scope %s needs %s; a fresh sandbox per call)\n", r->scope,
           strcmp(r->scope, "shared") == 0 ? "--agent"
           : strcmp(r->scope, "user") == 0 ? "--user"
                                           : "--user and --agent");
  else
    printf("scope key:   (none: a fresh sandbox per call)\n");
  if (r->project_environment[0]) printf("environment: %s\n", r->project_environment);
  json_object *w = NULL, *key = NULL, *svc = NULL;
  if (json_object_object_get_ex(j, "worker", &w) && json_object_object_get_ex(w, "key", &key) &&
      json_object_object_get_ex(w, "services", &svc)) {
    char buf[1100];
    format_value("services", svc, buf, sizeof buf);
    printf("worker:      %s may lease %s\n", json_object_get_string(key),
           json_object_array_length(svc) ? buf : "nothing (no workers entry grants it)");
  }
  print_egress(r, j);
  print_host_tools(j);
  printf("\n%-22s %-40s %s\n", "SETTING", "VALUE", "SOURCE");
  json_object *settings = NULL;
  json_object_object_get_ex(j, "settings", &settings);
  json_object_object_foreach(settings, name, e) {
    json_object *v = NULL, *src = NULL;
    json_object_object_get_ex(e, "value", &v);
    json_object_object_get_ex(e, "source", &src);
    char buf[1100];
    format_value(name, v, buf, sizeof buf);
    printf("%-22s %-40s %s\n", name, buf, json_object_get_string(src));
  }
}

/* What a worker token may do on a runner beyond its own calls
 * (docs/configuration.md#workers). */
static json_object *worker_json(const sm_config *cfg, const char *key) {
  static sm_string_list services;
  sm_config_worker_services(cfg, key, &services);
  json_object *o = json_object_new_object();
  json_object *a = json_object_new_array();
  for (size_t i = 0; i < services.n; i++)
    json_object_array_add(a, json_object_new_string(services.items[i]));
  json_object_object_add(o, "key", json_object_new_string(key));
  json_object_object_add(o, "services", a);
  json_object_object_add(o, "source", json_object_new_string(
                                           services.n ? "workers" : "built_in"));
  return o;
}

int cmd_config_explain(const cli_call *call) {
  const cli_globals *g = call->g;
  const char *agent = cli_str(call, "agent"), *tool = cli_str(call, "tool");
  const char *user = cli_str(call, "user");
  int json = cli_has(call, "json");
  static sm_config_flags flags; /* large (two lists): not on the stack */
  static sm_resolved r;
  memset(&flags, 0, sizeof flags);
  sm_error err = SM_ERROR_INIT;
  flags.mode = cli_str(call, "mode");
  flags.project_environment = cli_str(call, "project-environment");
  flags.image = cli_str(call, "image");
  flags.network = cli_str(call, "network");
  flags.runtime = cli_str(call, "runtime");
  flags.cpu = cli_str(call, "cpu");
  flags.memory = cli_str(call, "mem");
  flags.pids = cli_str(call, "pids");
  flags.disk = cli_str(call, "disk");
  flags.tmpfs = cli_str(call, "tmpfs");
  flags.timeout = cli_str(call, "timeout");
  int rc = cli_add_list(call, "env-passthrough", &flags.env_passthrough, json);
  if (rc == 0) rc = cli_add_list(call, "exclude", &flags.excludes, json);
  if (rc == 0) rc = cli_protect_flags(call, &flags.protect, json);
  if (rc) return rc;
  sm_config *cfg = NULL;
  if (sm_config_load(&cfg, g->config_path, &err) != 0) return cli_fail(&err);
  if (sm_config_resolve(cfg, agent, tool, user, &flags, &r, &err) != 0) {
    sm_config_free(cfg);
    return cli_fail(&err);
  }
  json_object *j = sm_resolved_to_json(&r, agent, tool);
  if (j == NULL) {
    sm_config_free(cfg);
    cli_error("out of memory");
    return CLI_EXIT_FAILURE;
  }
  const char *worker = cli_str(call, "worker-key");
  if (worker) json_object_object_add(j, "worker", worker_json(cfg, worker));
  sm_config_egress eg;
  sm_config_egress_get(cfg, agent, &eg);
  json_object_object_add(j, "egress", sm_config_egress_json(&eg));
  sm_broker *broker = NULL;
  sm_broker_options bo = {cfg, NULL, 0, NULL, NULL};
  if (sm_broker_new(&broker, &bo, &err) != 0) {
    json_object_put(j);
    sm_config_free(cfg);
    return cli_fail(&err);
  }
  json_object *ht = sm_broker_explain(broker, agent, tool);
  if (ht && !r.sandboxed) {
    /* The route lives in a container sandbox: a call on the host has none. */
    json_object_object_add(ht, "route", json_object_new_boolean(0));
    json_object_object_add(ht, "route_rule",
                           json_object_new_string("the call runs on the host (mode none): the "
                                                  "host-tool route exists only in a container "
                                                  "sandbox"));
  }
  json_object_object_add(j, "host_tools", ht);
  sm_broker_free(broker);
  if (json) cli_print_json(j);
  else print_text(cfg, &r, j, agent, tool, user);
  json_object_put(j);
  sm_config_free(cfg);
  return CLI_EXIT_OK;
}

