/* sandman sandbox doctor | list | reap | rm: operating the sandboxes of
 * this instance. The work is in the library (sandman/ops.h); this file
 * parses flags, prints and picks exit codes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/ops.h>

#include "cli.h"

/* Loads the configuration (exit 2 on a bad file, as everywhere) and fills
 * the engine options: --host > DOCKER_HOST > the file's engine host >
 * the default socket. *cfg may be NULL when none was needed. */
static int setup(const cli_globals *g, sm_config **cfg, sm_engine_options *eo) {
  sm_error err = SM_ERROR_INIT;
  *cfg = NULL;
  if (sm_config_load(cfg, g->config_path, &err) != 0) return cli_fail(&err);
  cli_engine_options(g, *cfg, eo);
  return CLI_EXIT_OK;
}

/* setup() and a negotiated engine client; on failure nothing is left to
 * free and the exit code is returned. */
static int open_engine(const cli_globals *g, sm_config **cfg, sm_engine **out) {
  sm_engine_options eo;
  sm_error err = SM_ERROR_INIT;
  *out = NULL;
  int rc = setup(g, cfg, &eo);
  if (rc) return rc;
  if (sm_engine_new(out, &eo, &err) != 0 || sm_engine_negotiate(*out, &err) != 0) {
    sm_engine_free(*out);
    *out = NULL;
    sm_config_free(*cfg);
    *cfg = NULL;
    return cli_fail(&err);
  }
  return CLI_EXIT_OK;
}

static void print_owned(char *text) {
  if (text == NULL) {
    cli_error("out of memory");
    return;
  }
  fputs(text, stdout);
  fflush(stdout);
  free(text);
}

/* ---- doctor ---- */

int cmd_sandbox_doctor(const cli_call *call) {
  const cli_globals *g = call->g;
  int as_json = cli_has(call, "json");
  const char *mode_flag = cli_str(call, "mode"), *env_flag = cli_str(call, "project-environment");
  sm_config *cfg = NULL;
  sm_ops_doctor_options o = SM_OPS_DOCTOR_OPTIONS_INIT;
  int rc = setup(g, &cfg, &o.engine);
  if (rc) return rc;

  /* What a call with no agent would use: its image, runtime and mode. */
  sm_resolved *res = calloc(1, sizeof *res);
  sm_error err = SM_ERROR_INIT;
  if (res == NULL) {
    sm_config_free(cfg);
    cli_error("out of memory");
    return CLI_EXIT_FAILURE;
  }
  sm_config_flags flags;
  memset(&flags, 0, sizeof flags);
  flags.mode = mode_flag;
  flags.project_environment = env_flag;
  if (sm_config_resolve(cfg, NULL, NULL, NULL, &flags, res, &err) != 0) {
    rc = cli_fail(&err);
    free(res);
    sm_config_free(cfg);
    return rc;
  }
  o.image = res->settings.image;
  o.runtime = res->settings.runtime;
  o.backend = sm_config_engine_backend(cfg);
  sm_config_swarm(cfg, &o.swarm);
  o.mode = res->settings.mode;
  o.mode_explicit = res->mode_explicit;
  o.project_environment = res->project_environment[0] ? res->project_environment : NULL;

  sm_ops_doctor_report *report = calloc(1, sizeof *report);
  if (report == NULL || sm_ops_doctor(&o, report, &err) != 0) {
    rc = report ? cli_fail(&err) : CLI_EXIT_FAILURE;
  } else {
    if (as_json) cli_print_json_owned(sm_ops_doctor_to_json(report));
    else print_owned(sm_ops_doctor_text(report));
    rc = report->healthy ? CLI_EXIT_OK : CLI_EXIT_UNHEALTHY;
  }
  free(report);
  free(res);
  sm_config_free(cfg);
  return rc;
}

/* ---- list ---- */

/* --filter KEY=VALUE: the field of the JSON object it compares. */
static const struct {
  const char *key, *field;
} filter_keys[] = {{"id", "id"},           {"name", "name"},     {"mode", "mode"},
                   {"project", "project"}, {"run", "run_id"},    {"worker", "worker_id"},
                   {"agent", "agent"},     {"status", "status"}, {"pool", "pool"},
                   {"busy", "busy"},       {"image", "image"},   {"state", "state"}};

#define N_FILTER_KEYS (sizeof filter_keys / sizeof filter_keys[0])

static int check_filters(const cli_call *call, const char **filters, size_t n, int json) {
  for (size_t i = 0; i < n; i++) {
    const char *eq = strchr(filters[i], '=');
    size_t kl = eq ? (size_t)(eq - filters[i]) : strlen(filters[i]);
    if (eq == NULL)
      return cli_usage_error(call->cmd, json, "--filter: '%s' is not KEY=VALUE", filters[i]);
    if (kl == 5 && strncmp(filters[i], "label", 5) == 0) {
      if (eq[1] == '\0' || eq[1] == '=')
        return cli_usage_error(call->cmd, json, "--filter: label= needs a label name (label=K or label=K=V)");
      continue;
    }
    int known = 0;
    const char *keys[N_FILTER_KEYS + 1];
    for (size_t k = 0; k < N_FILTER_KEYS; k++) {
      keys[k] = filter_keys[k].key;
      known |= strlen(keys[k]) == kl && strncmp(keys[k], filters[i], kl) == 0;
    }
    keys[N_FILTER_KEYS] = "label";
    if (!known) {
      char word[64];
      snprintf(word, sizeof word, "%.*s", (int)(kl < 63 ? kl : 63), filters[i]);
      const char *near = cli_nearest(word, keys, N_FILTER_KEYS + 1);
      return cli_usage_error(call->cmd, json,
                             "--filter: unknown key '%s'%s%s%s (use id, name, mode, project, run, "
                             "worker, agent, status, state, pool, busy, image or label)",
                             word, near ? "; did you mean " : "", near ? near : "", near ? "?" : "");
    }
  }
  return 0;
}

/* The JSON value as text: strings as they are, null as "", booleans and
 * numbers as JSON writes them. */
static const char *field_text(json_object *o, const char *field) {
  json_object *v = NULL;
  if (!json_object_object_get_ex(o, field, &v) || v == NULL) return "";
  return json_object_get_string(v);
}

static int matches(json_object *o, const char **filters, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *eq = strchr(filters[i], '=');
    size_t kl = (size_t)(eq - filters[i]);
    if (kl == 5 && strncmp(filters[i], "label", 5) == 0) continue; /* the engine filtered */
    for (size_t k = 0; k < N_FILTER_KEYS; k++) {
      if (strlen(filter_keys[k].key) != kl || strncmp(filter_keys[k].key, filters[i], kl) != 0)
        continue;
      if (strcmp(field_text(o, filter_keys[k].field), eq + 1) != 0) return 0;
    }
  }
  return 1;
}

/* label=K or label=K=V filters go to the engine: the ids it lists. */
static int label_ids(sm_engine *engine, int all, const char **filters, size_t n,
                     json_object **out, sm_error *err) {
  const char *labels[64];
  size_t nl = 0;
  *out = NULL;
  for (size_t i = 0; i < n && nl < 64; i++)
    if (strncmp(filters[i], "label=", 6) == 0) labels[nl++] = filters[i] + 6;
  if (nl == 0) return 0;
  (void)all; /* stopped and hibernated sandboxes are listed without --all */
  return sm_engine_container_list(engine, 1, labels, nl, out, err);
}

static int listed_by_engine(json_object *ids, const char *id) {
  if (ids == NULL) return 1;
  for (size_t i = 0; i < json_object_array_length(ids); i++) {
    json_object *c = json_object_array_get_idx(ids, i), *v = NULL;
    if (json_object_object_get_ex(c, "Id", &v) && strcmp(json_object_get_string(v), id) == 0)
      return 1;
  }
  return 0;
}

/* A --format template: {{.field}} (spaces allowed inside the braces), \t
 * and \n. 0, or a usage error naming the unknown field. */
static int render_template(const char *tpl, json_object *o, FILE *out, char *bad, size_t bad_len) {
  for (const char *p = tpl; *p;) {
    if (p[0] == '\\' && (p[1] == 't' || p[1] == 'n')) {
      if (out) fputc(p[1] == 't' ? '\t' : '\n', out);
      p += 2;
      continue;
    }
    if (p[0] == '{' && p[1] == '{') {
      const char *end = strstr(p, "}}");
      const char *f = p + 2;
      while (f < (end ? end : f) && *f == ' ') f++;
      if (end == NULL || *f != '.') {
        snprintf(bad, bad_len, "%s", p);
        return -1;
      }
      f++;
      const char *fe = end;
      while (fe > f && fe[-1] == ' ') fe--;
      char field[64];
      snprintf(field, sizeof field, "%.*s", (int)(fe - f), f);
      if (!json_object_object_get_ex(o, field, NULL)) {
        snprintf(bad, bad_len, "%s", field);
        return -1;
      }
      const char *v = field_text(o, field);
      /* A label may hold anything: no control character reaches the terminal. */
      for (const char *c = v; *c; c++) {
        if (out) fputc(((unsigned char)*c < 0x20 || *c == 0x7f) ? '?' : *c, out);
      }
      p = end + 2;
      continue;
    }
    if (out) fputc(*p, out);
    p++;
  }
  if (out) fputc('\n', out);
  return 0;
}

int cmd_sandbox_list(const cli_call *call) {
  const cli_globals *g = call->g;
  int all = cli_has(call, "all"), quiet = cli_has(call, "quiet");
  const char *format = cli_str(call, "format");
  int as_json = cli_has(call, "json") || (format && strcmp(format, "json") == 0);
  if (format && strcmp(format, "table") == 0) format = NULL;
  if (format && strcmp(format, "json") == 0) format = NULL;
  if ((quiet ? 1 : 0) + (format ? 1 : 0) + (as_json ? 1 : 0) > 1)
    return cli_usage_error(call->cmd, as_json, "-q, --format and --json: give one of them");
  if (format && strstr(format, "{{") == NULL)
    return cli_usage_error(call->cmd, 0,
                           "--format: '%s' is neither table, json nor a template such as "
                           "'{{.id}} {{.run_id}}'",
                           format);
  const char **filters = NULL;
  size_t n_filters = cli_list(call, "filter", &filters);
  int rc = check_filters(call, filters, n_filters, as_json);
  if (rc) {
    free(filters);
    return rc;
  }
  sm_config *cfg = NULL;
  sm_engine *engine = NULL;
  rc = open_engine(g, &cfg, &engine);
  if (rc) {
    free(filters);
    return rc;
  }
  sm_ops_scope scope = SM_OPS_SCOPE_INIT;
  scope.engine = engine;
  scope.backend = sm_config_engine_backend(cfg);
  sm_ops_sandbox_list list = {0, NULL};
  sm_error err = SM_ERROR_INIT;
  json_object *by_label = NULL;
  if (sm_ops_list(&scope, all, &list, &err) != 0 ||
      label_ids(engine, all, filters, n_filters, &by_label, &err) != 0) {
    rc = cli_fail(&err);
    goto done;
  }
  /* Keep what every filter matches, in the listing's order. */
  size_t kept = 0;
  for (size_t i = 0; i < list.n; i++) {
    json_object *o = sm_ops_sandbox_to_json(&list.items[i]);
    int keep = o && matches(o, filters, n_filters) && listed_by_engine(by_label, list.items[i].id);
    json_object_put(o);
    if (keep) list.items[kept++] = list.items[i];
  }
  list.n = kept;
  if (as_json) {
    rc = cli_print_json_owned(sm_ops_list_to_json(&list));
  } else if (quiet || format) {
    /* The template is checked on an empty row first: an unknown field is a
     * usage error before anything is printed. */
    char bad[128] = "";
    sm_ops_sandbox blank;
    memset(&blank, 0, sizeof blank);
    json_object *probe = format ? sm_ops_sandbox_to_json(&blank) : NULL;
    if (format && (probe == NULL || render_template(format, probe, NULL, bad, sizeof bad) != 0)) {
      /* The fields named from the object itself, so the list cannot drift. */
      char fields[512] = "";
      size_t o = 0;
      if (probe) {
        json_object_object_foreach(probe, key, val) {
          (void)val;
          int n = snprintf(fields + o, sizeof fields - o, "%s%s", o ? ", " : "", key);
          if (n < 0 || (size_t)n >= sizeof fields - o) break;
          o += (size_t)n;
        }
      }
      rc = cli_usage_error(call->cmd, 0,
                           "--format: unknown field '%s' (the fields of `sandbox list --json`: %s)",
                           bad, fields);
    }
    json_object_put(probe);
    for (size_t i = 0; i < list.n && rc == 0; i++) {
      if (quiet) {
        printf("%.12s\n", list.items[i].id);
        continue;
      }
      json_object *o = sm_ops_sandbox_to_json(&list.items[i]);
      if (o) render_template(format, o, stdout, bad, sizeof bad);
      json_object_put(o);
    }
    fflush(stdout);
  } else {
    print_owned(sm_ops_list_table(&list, sm_now()));
  }
done:
  json_object_put(by_label);
  free(filters);
  sm_ops_sandbox_list_dispose(&list);
  sm_engine_free(engine);
  sm_config_free(cfg);
  return rc;
}

/* ---- reap and rm share their output ---- */

static int finish_report(sm_ops_report *report, int as_json) {
  if (as_json) cli_print_json_owned(sm_ops_report_to_json(report));
  else print_owned(sm_ops_report_text(report));
  int rc = report->n_failed ? CLI_EXIT_UNHEALTHY : CLI_EXIT_OK;
  sm_ops_report_dispose(report);
  return rc;
}

/* What reap and rm act on: the engine, this instance's sandboxes and the
 * trail (when the configuration turns it on). */
typedef struct ops_session {
  sm_config *cfg;
  sm_engine *engine;
  sm_ops_scope scope;
  sm_audit *audit;
} ops_session;

static int session_open(const cli_globals *g, ops_session *s) {
  memset(s, 0, sizeof *s);
  int rc = open_engine(g, &s->cfg, &s->engine);
  if (rc) return rc;
  s->scope.engine = s->engine;
  s->scope.backend = sm_config_engine_backend(s->cfg);
  if (cli_audit_open(s->cfg, 0, &s->audit) != CLI_EXIT_OK) s->audit = NULL;
  return CLI_EXIT_OK;
}

/* The end of an operation that returned op_rc: its error, or its report
 * recorded as event and printed; then the session is closed. */
static int session_finish(ops_session *s, int op_rc, const sm_error *err, sm_ops_report *report,
                          const char *event, int as_json) {
  int rc;
  if (op_rc != 0) {
    rc = cli_fail(err);
  } else {
    sm_ops_report_audit(report, event, s->audit);
    rc = finish_report(report, as_json);
  }
  sm_audit_close(s->audit);
  sm_engine_free(s->engine);
  sm_config_free(s->cfg);
  return rc;
}

/* The configuration's lifecycle (docs/state.md#the-idle-lifecycle), first:
 * a sandbox due to rest goes to rest; one past remove_after goes. Its
 * moves are audited by the rest module as they happen. */
static int reap_lifecycle(const cli_call *call, ops_session *s, int dry_run, sm_ops_report *out,
                          sm_error *err) {
  if (!sm_config_lifecycle_any(s->cfg)) return 0;
  sm_runner *runner = NULL;
  if (cli_runner_new(call->g, s->cfg, NULL, &runner) != CLI_EXIT_OK)
    return sm_error_set(err, SM_EUNREACHABLE, "the lifecycle needs a runner, and none could be made");
  sm_runner_set_audit(runner, s->audit);
  int rc = sm_ops_lifecycle(runner, s->cfg, dry_run, out, err);
  sm_runner_free(runner);
  return rc;
}

int cmd_sandbox_reap(const cli_call *call) {
  sm_ops_reap_options ro = SM_OPS_REAP_OPTIONS_INIT;
  int as_json = cli_has(call, "json");
  sm_error err = SM_ERROR_INIT;
  if (cli_str(call, "older-than"))
    sm_parse_duration(cli_str(call, "older-than"), &ro.older_than_s, &err); /* checked by the table */
  ro.dry_run = cli_has(call, "dry-run");
  ro.force = cli_has(call, "force");
  ops_session s;
  int rc = session_open(call->g, &s);
  if (rc) return rc;
  sm_ops_report moved, report;
  memset(&moved, 0, sizeof moved);
  int op = reap_lifecycle(call, &s, ro.dry_run, &moved, &err);
  if (op == 0) op = sm_ops_reap(&s.scope, &ro, &report, &err);
  if (op == 0) op = sm_ops_report_merge(&report, &moved, &err);
  sm_ops_report_dispose(&moved);
  return session_finish(&s, op, &err, &report, "sandbox.reaped", as_json);
}

int cmd_sandbox_rm(const cli_call *call) {
  sm_ops_rm_options ro = SM_OPS_RM_OPTIONS_INIT;
  int as_json = cli_has(call, "json");
  ro.run_id = cli_str(call, "run-id");
  ro.worker_id = cli_str(call, "worker-id");
  ro.force = cli_has(call, "force");
  ro.wait_s = 10; /* a session's last request may still hold it a moment */
  if (cli_str(call, "wait")) {
    sm_error bad = SM_ERROR_INIT;
    sm_parse_duration(cli_str(call, "wait"), &ro.wait_s, &bad); /* checked by the table */
  }
  if (cli_has(call, "no-wait")) ro.wait_s = 0;
  ro.refs = (const char *const *)call->args;
  ro.n_refs = (size_t)call->n_args;
  if (ro.n_refs == 0 && !ro.run_id && !ro.worker_id)
    return cli_usage_error(call->cmd, as_json, "name a sandbox, or give --run-id or --worker-id");
  ops_session s;
  int rc = session_open(call->g, &s);
  if (rc) return rc;
  sm_ops_report report;
  sm_error err = SM_ERROR_INIT;
  int op = sm_ops_rm(&s.scope, &ro, &report, &err);
  if (op == 0 && report.n_removed == 0 && report.n_spared == 0 && !as_json)
    cli_note("no sandbox of instance '%s' matched", sm_ops_scope_instance(&s.scope));
  return session_finish(&s, op, &err, &report, "sandbox.removed", as_json);
}

