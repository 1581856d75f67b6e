/* sandman sandbox doctor | list | reap | rm: operating the sandboxes of
 * this instance. The work is in the library (sandman/ops.h); this file
 * parses flags, prints and picks exit codes. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sandman/ops.h>

#include "cli.h"

static void usage(FILE *out) {
  fprintf(out,
          "Usage: sandman sandbox COMMAND [OPTIONS]\n\n"
          "Commands:\n"
          "  doctor [--json]                  check that this host can run sandboxes\n"
          "  list [--all] [--json]            this instance's sandboxes (running ones without --all)\n"
          "  reap [--older-than DURATION] [--dry-run] [--force] [--json]\n"
          "                                   remove idle sandboxes and those whose owner is gone\n"
          "  rm [--force] [--json] SANDBOX... | --run-id ID | --worker-id ID\n"
          "                                   remove sandboxes by id, name, run or worker\n\n"
          "Only sandboxes of this instance ($SANDMAN_INSTANCE, default \"default\") are seen.\n");
}

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

static int print_json_owned(json_object *o) {
  if (o == NULL) {
    cli_error("out of memory");
    return CLI_EXIT_FAILURE;
  }
  cli_print_json(o);
  json_object_put(o);
  return CLI_EXIT_OK;
}

/* ---- doctor ---- */

static int do_doctor(int argc, char **argv, const cli_globals *g) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"mode", required_argument, NULL, 'm'},
                                       {"project-environment", required_argument, NULL, 'e'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int as_json = 0, c;
  const char *mode_flag = NULL, *env_flag = NULL;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (c == 'j') as_json = 1;
    else if (c == 'm') mode_flag = optarg;
    else if (c == 'e') env_flag = optarg;
    else if (c == 'h') {
      printf("Usage: sandman sandbox doctor [--json] [--mode MODE] [--project-environment ENV]\n"
             "Checks the engine, its limits, runtimes and image, the socket and the state\n"
             "directory, and shows which mode the fallback rule would use (for MODE and ENV,\n"
             "default: the configuration's). Exit 0 when healthy, 1 when not.\n");
      return CLI_EXIT_OK;
    } else return CLI_EXIT_USAGE;
  }
  if (optind < argc) {
    cli_error("sandbox doctor: unexpected argument '%s'", argv[optind]);
    return CLI_EXIT_USAGE;
  }
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
  o.mode = res->settings.mode;
  o.project_environment = res->project_environment[0] ? res->project_environment : NULL;

  sm_ops_doctor_report *report = calloc(1, sizeof *report);
  if (report == NULL || sm_ops_doctor(&o, report, &err) != 0) {
    rc = report ? cli_fail(&err) : CLI_EXIT_FAILURE;
  } else {
    if (as_json) print_json_owned(sm_ops_doctor_to_json(report));
    else print_owned(sm_ops_doctor_text(report));
    rc = report->healthy ? CLI_EXIT_OK : CLI_EXIT_UNHEALTHY;
  }
  free(report);
  free(res);
  sm_config_free(cfg);
  return rc;
}

/* ---- list ---- */

static int do_list(int argc, char **argv, const cli_globals *g) {
  static const struct option opts[] = {{"all", no_argument, NULL, 'a'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  int all = 0, as_json = 0, c;
  while ((c = getopt_long(argc, argv, "ah", opts, NULL)) != -1) {
    if (c == 'a') all = 1;
    else if (c == 'j') as_json = 1;
    else if (c == 'h') {
      printf("Usage: sandman sandbox list [--all] [--json]\n"
             "This instance's sandboxes; without --all only running ones.\n");
      return CLI_EXIT_OK;
    } else return CLI_EXIT_USAGE;
  }
  if (optind < argc) {
    cli_error("sandbox list: unexpected argument '%s'", argv[optind]);
    return CLI_EXIT_USAGE;
  }
  sm_config *cfg = NULL;
  sm_engine *engine = NULL;
  int rc = open_engine(g, &cfg, &engine);
  if (rc) return rc;
  sm_ops_scope scope = SM_OPS_SCOPE_INIT;
  scope.engine = engine;
  sm_ops_sandbox_list list = {0, NULL};
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_list(&scope, all, &list, &err) != 0) {
    rc = cli_fail(&err);
  } else if (as_json) {
    rc = print_json_owned(sm_ops_list_to_json(&list));
  } else {
    print_owned(sm_ops_list_table(&list, sm_now()));
  }
  sm_ops_sandbox_list_dispose(&list);
  sm_engine_free(engine);
  sm_config_free(cfg);
  return rc;
}

/* ---- reap and rm share their output ---- */

static int finish_report(sm_ops_report *report, int as_json) {
  if (as_json) print_json_owned(sm_ops_report_to_json(report));
  else print_owned(sm_ops_report_text(report));
  int rc = report->n_failed ? CLI_EXIT_UNHEALTHY : CLI_EXIT_OK;
  sm_ops_report_dispose(report);
  return rc;
}

static int do_reap(int argc, char **argv, const cli_globals *g) {
  static const struct option opts[] = {{"older-than", required_argument, NULL, 'o'},
                                       {"dry-run", no_argument, NULL, 'n'},
                                       {"force", no_argument, NULL, 'f'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  sm_ops_reap_options ro = SM_OPS_REAP_OPTIONS_INIT;
  int as_json = 0, c;
  sm_error err = SM_ERROR_INIT;
  while ((c = getopt_long(argc, argv, "fnh", opts, NULL)) != -1) {
    switch (c) {
      case 'o':
        if (sm_parse_duration(optarg, &ro.older_than_s, &err) != 0) {
          cli_error("--older-than: %s", err.message);
          return CLI_EXIT_USAGE;
        }
        break;
      case 'n': ro.dry_run = 1; break;
      case 'f': ro.force = 1; break;
      case 'j': as_json = 1; break;
      case 'h':
        printf("Usage: sandman sandbox reap [--older-than DURATION] [--dry-run] [--force] [--json]\n"
               "Removes this instance's sandboxes (container, volume, state files) unused for\n"
               "longer than DURATION (90s, 10m, 2h, 7d), those whose owner process is gone,\n"
               "exited ones, and orphaned volumes. A busy sandbox (a call in flight) is never\n"
               "removed without --force. --dry-run shows what would go and changes nothing.\n");
        return CLI_EXIT_OK;
      default: return CLI_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    cli_error("sandbox reap: unexpected argument '%s'", argv[optind]);
    return CLI_EXIT_USAGE;
  }
  sm_config *cfg = NULL;
  sm_engine *engine = NULL;
  int rc = open_engine(g, &cfg, &engine);
  if (rc) return rc;
  sm_ops_scope scope = SM_OPS_SCOPE_INIT;
  scope.engine = engine;
  sm_ops_report report;
  if (sm_ops_reap(&scope, &ro, &report, &err) != 0) rc = cli_fail(&err);
  else rc = finish_report(&report, as_json);
  sm_engine_free(engine);
  sm_config_free(cfg);
  return rc;
}

static int do_rm(int argc, char **argv, const cli_globals *g) {
  static const struct option opts[] = {{"run-id", required_argument, NULL, 'r'},
                                       {"worker-id", required_argument, NULL, 'w'},
                                       {"force", no_argument, NULL, 'f'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  sm_ops_rm_options ro = SM_OPS_RM_OPTIONS_INIT;
  int as_json = 0, c;
  while ((c = getopt_long(argc, argv, "fh", opts, NULL)) != -1) {
    switch (c) {
      case 'r': ro.run_id = optarg; break;
      case 'w': ro.worker_id = optarg; break;
      case 'f': ro.force = 1; break;
      case 'j': as_json = 1; break;
      case 'h':
        printf("Usage: sandman sandbox rm [--force] [--json] SANDBOX... | --run-id ID | --worker-id ID\n"
               "Removes sandboxes of this instance by id (or a unique id prefix), name, run id\n"
               "or worker id. A busy one is refused without --force.\n");
        return CLI_EXIT_OK;
      default: return CLI_EXIT_USAGE;
    }
  }
  ro.refs = (const char *const *)(argv + optind);
  ro.n_refs = (size_t)(argc - optind);
  if (ro.n_refs == 0 && !ro.run_id && !ro.worker_id) {
    cli_error("sandbox rm: name a sandbox, or give --run-id or --worker-id");
    return CLI_EXIT_USAGE;
  }
  sm_config *cfg = NULL;
  sm_engine *engine = NULL;
  int rc = open_engine(g, &cfg, &engine);
  if (rc) return rc;
  sm_ops_scope scope = SM_OPS_SCOPE_INIT;
  scope.engine = engine;
  sm_ops_report report;
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_rm(&scope, &ro, &report, &err) != 0) {
    rc = cli_fail(&err);
  } else {
    if (report.n_removed == 0 && report.n_spared == 0 && !as_json)
      cli_note("no sandbox of instance '%s' matched", sm_ops_scope_instance(&scope));
    rc = finish_report(&report, as_json);
  }
  sm_engine_free(engine);
  sm_config_free(cfg);
  return rc;
}

int cmd_sandbox(int argc, char **argv, const cli_globals *g) {
  if (argc < 2) {
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  const char *sub = argv[1];
  if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  static const struct {
    const char *name;
    int (*fn)(int, char **, const cli_globals *);
  } subs[] = {{"doctor", do_doctor}, {"list", do_list}, {"ls", do_list},
              {"reap", do_reap},     {"rm", do_rm},     {"remove", do_rm}};
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
    if (strcmp(subs[i].name, sub) == 0) {
      optind = 0; /* a new argv: make getopt start over */
      return subs[i].fn(argc - 1, argv + 1, g);
    }
  }
  cli_error("sandbox: unknown command '%s'", sub);
  usage(stderr);
  return CLI_EXIT_USAGE;
}
