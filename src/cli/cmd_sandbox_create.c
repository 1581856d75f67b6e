/* sandman sandbox create | inspect: a sandbox made ahead of its calls, as
 * POST /v1/sandboxes makes one, but against the engine directly (no runner
 * needed), and one sandbox's description. The operator's own tool: any
 * template of the configuration, any value; the runner's bounds are for
 * requests (docs/operations.md#create). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/ops.h>

#include "cli.h"

#define LABELS_MAX SM_SANDBOX_LABELS_MAX

typedef struct create_args {
  int json;
  sm_mode mode;
  const char *run_id, *worker_id, *project, *agent, *template_name;
  double timeout_s, idle_s;
  const char **labels;
  size_t n_labels;
} create_args;

static int parse_create(const cli_call *call, create_args *a) {
  memset(a, 0, sizeof *a);
  a->json = cli_has(call, "json");
  a->mode = SM_MODE_PER_RUN;
  if (cli_str(call, "mode") && strcmp(cli_str(call, "mode"), "per_worker") == 0)
    a->mode = SM_MODE_PER_WORKER;
  a->run_id = cli_str(call, "run-id");
  a->worker_id = cli_str(call, "worker-id");
  a->project = cli_str(call, "project");
  a->agent = cli_str(call, "agent");
  a->template_name = cli_str(call, "template");
  if (a->mode == SM_MODE_PER_WORKER && (a->worker_id == NULL || a->run_id))
    return cli_usage_error(call->cmd, a->json, "--mode per_worker takes --worker-id (and no --run-id)");
  if (a->template_name && cli_str(call, "image"))
    return cli_usage_error(call->cmd, a->json, "give either --template or --image");
  sm_error err = SM_ERROR_INIT;
  if (cli_str(call, "timeout")) sm_parse_duration(cli_str(call, "timeout"), &a->timeout_s, &err);
  if (cli_str(call, "idle-timeout")) sm_parse_duration(cli_str(call, "idle-timeout"), &a->idle_s, &err);
  a->n_labels = cli_list(call, "label", &a->labels);
  if (a->n_labels > LABELS_MAX)
    return cli_usage_error(call->cmd, a->json, "--label: at most %d", LABELS_MAX);
  for (size_t i = 0; i < a->n_labels; i++)
    if (sm_sandbox_label_check(a->labels[i], &err) != 0)
      return cli_usage_error(call->cmd, a->json, "--label %s: %s", a->labels[i], err.message);
  return CLI_EXIT_OK;
}

/* The template's values over the resolved ones. */
static int apply_template(const sm_config *cfg, create_args *a, sm_sandbox_settings *s) {
  sm_config_template t;
  if (sm_config_template_get(cfg, a->template_name, &t) != 0) {
    cli_error("no template '%s' in the configuration (%s)", a->template_name,
              sm_config_path(cfg) ? sm_config_path(cfg) : "none loaded");
    return CLI_EXIT_USAGE;
  }
  sm_config_template_apply(&t, s);
  if (a->timeout_s == 0) a->timeout_s = t.timeout_s;
  if (a->idle_s == 0) a->idle_s = t.idle_timeout_s;
  return CLI_EXIT_OK;
}

/* The flags over both (the table checked their forms). */
static void apply_flags(const cli_call *call, sm_sandbox_settings *s) {
  const char *v;
  int64_t n;
  if ((v = cli_str(call, "image"))) snprintf(s->image, sizeof s->image, "%s", v);
  if ((v = cli_str(call, "network"))) snprintf(s->network, sizeof s->network, "%s", v);
  if ((v = cli_str(call, "runtime"))) snprintf(s->runtime, sizeof s->runtime, "%s", v);
  if ((v = cli_str(call, "cpu"))) sm_parse_double(v, 0.01, 1024, &s->cpu, NULL);
  if ((v = cli_str(call, "mem")) && sm_parse_size(v, &n, NULL) == 0) s->memory = n;
  if ((v = cli_str(call, "pids")) && sm_parse_int(v, 1, 4194304, &n, NULL) == 0) s->pids = n;
  if ((v = cli_str(call, "disk")) && sm_parse_size(v, &n, NULL) == 0) s->disk = n;
}

static int print_sandbox(const sm_ops_sandbox *sb, int json, int id_only) {
  if (!json && id_only) {
    printf("%s\n", sb->id);
    return CLI_EXIT_OK;
  }
  json_object *o = sm_ops_sandbox_to_json(sb);
  if (o == NULL) {
    cli_error("out of memory");
    return CLI_EXIT_FAILURE;
  }
  cli_print_json(o);
  json_object_put(o);
  return CLI_EXIT_OK;
}

/* The new sandbox's description, from the engine. */
static int describe_made(sm_runner *runner, const char *id, int json) {
  sm_ops_scope scope;
  sm_ops_sandbox sb;
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_scope_from_runner(&scope, runner, &err) != 0 || sm_ops_get(&scope, id, &sb, &err) != 0)
    return cli_fail(&err);
  return print_sandbox(&sb, json, 1);
}

static int make(const cli_call *call, create_args *a, sm_config *cfg, sm_resolved *res) {
  sm_runner *runner = NULL;
  int rc = cli_runner_new(call->g, cfg, NULL, &runner);
  if (rc) return rc;
  sm_call_names names = {a->project, NULL, a->agent, NULL, NULL, a->run_id,
                         a->mode == SM_MODE_PER_WORKER ? a->worker_id : NULL};
  sm_run_request req;
  sm_config_egress eg;
  sm_run_request_from_config(&req, &eg, cfg, res, &names);
  req.settings = res->settings;
  req.settings.mode = a->mode;
  req.settings.idle_timeout_s = a->idle_s;
  req.scope = SM_SCOPE_NONE;
  sm_sandbox_meta meta = {a->template_name, a->timeout_s, a->labels, a->n_labels};
  req.meta = &meta;
  char id[SM_ENGINE_ID_MAX], name[SM_NAME_MAX];
  sm_error err = SM_ERROR_INIT;
  rc = sm_sandbox_create(runner, &req, id, name, &err);
  if (rc == 0) {
    rc = describe_made(runner, id, a->json);
  } else if (rc == SM_ECONFLICT) {
    cli_error("%s: name another --run-id, or remove it first", err.message);
    rc = CLI_EXIT_UNHEALTHY;
  } else {
    rc = cli_fail(&err);
  }
  sm_runner_free(runner);
  sm_config_free(cfg);
  return rc;
}

int cmd_sandbox_create(const cli_call *call) {
  create_args a;
  int rc = parse_create(call, &a);
  if (rc) {
    free(a.labels);
    return rc;
  }
  sm_config *cfg = NULL;
  sm_resolved *res = calloc(1, sizeof *res);
  if (res == NULL) {
    cli_error("out of memory");
    return CLI_EXIT_FAILURE;
  }
  /* The configuration's settings for the agent, then the template's, then
   * the flags: the same order as a request's. */
  rc = cli_load_resolve(call->g, a.agent, NULL, NULL, NULL, &cfg, res);
  if (rc == 0 && a.template_name) rc = apply_template(cfg, &a, &res->settings);
  if (rc == 0) {
    apply_flags(call, &res->settings);
    if (a.idle_s == 0) a.idle_s = res->settings.idle_timeout_s;
    rc = make(call, &a, cfg, res);
    cfg = NULL; /* make's */
  }
  sm_config_free(cfg);
  free(res);
  free(a.labels); /* cli_list's array (its strings are the command line's) */
  return rc;
}

int cmd_sandbox_inspect(const cli_call *call) {
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_config_load(&cfg, call->g->config_path, &err) != 0) return cli_fail(&err);
  sm_engine_options eo;
  cli_engine_options(call->g, cfg, &eo);
  sm_engine *e = NULL;
  int rc = CLI_EXIT_OK;
  if (sm_engine_new(&e, &eo, &err) != 0 || sm_engine_negotiate(e, &err) != 0) {
    rc = cli_fail(&err);
  } else {
    sm_ops_scope scope = SM_OPS_SCOPE_INIT;
    scope.engine = e;
    scope.backend = sm_config_engine_backend(cfg);
    sm_ops_sandbox sb;
    if (sm_ops_get(&scope, call->args[0], &sb, &err) != 0) {
      cli_error("%s", err.message);
      rc = err.code == SM_ENOTFOUND ? CLI_EXIT_UNHEALTHY : cli_fail(&err);
    } else {
      rc = print_sandbox(&sb, 1, 0);
    }
  }
  sm_engine_free(e);
  sm_config_free(cfg);
  return rc;
}
