/* sandman config check [FILE]
 * sandman config explain [--agent A] [--tool T] [--user U] [--json] [run flags]
 *
 * check validates a file (exit 2 with FILE:LINE:COLUMN on a bad one);
 * explain resolves one call and shows every setting with its source, the
 * policy and placement decisions and the scope key. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out) {
  fprintf(out,
          "Usage: sandman config check [FILE]\n"
          "       sandman config explain [--agent A] [--tool T] [--user U] [--json]\n"
          "               [--mode M] [--project-environment ENV] [--image REF]\n"
          "               [--network none|bridge] [--runtime NAME] [--cpu N] [--mem SIZE]\n"
          "               [--pids N] [--disk SIZE] [--tmpfs SIZE] [--timeout DURATION]\n"
          "               [--env-passthrough GLOB]... [--exclude GLOB]...\n"
          "\nThe file is --config FILE, else $SANDMAN_CONFIG, else ./sandman.yaml, else\n"
          "$XDG_CONFIG_HOME/sandman/config.yaml; none found means the built-in defaults.\n");
}

static int config_check(int argc, char **argv, const cli_globals *g) {
  if (argc > 2 || (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))) {
    usage(argc > 2 ? stderr : stdout);
    return argc > 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
  }
  const char *path = argc == 2 ? argv[1] : g->config_path;
  sm_config *cfg = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_config_load(&cfg, path, &err) != 0) return cli_fail(&err);
  const char *used = sm_config_path(cfg);
  if (used) printf("ok: %s\n", used);
  else printf("ok: no configuration file found; the built-in defaults apply\n");
  sm_config_free(cfg);
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

static void print_text(const sm_config *cfg, const sm_resolved *r, json_object *j,
                       const char *agent, const char *tool, const char *user) {
  const char *path = sm_config_path(cfg);
  printf("config:      %s\n", path ? path : "(none found: built-in defaults)");
  if (agent)
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
           strcmp(r->scope, "shared") == 0 ? "--agent" : "--user and --agent");
  else
    printf("scope key:   (none: a fresh sandbox per call)\n");
  if (r->project_environment[0]) printf("environment: %s\n", r->project_environment);
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

static int config_explain(int argc, char **argv, const cli_globals *g) {
  enum { O_MODE = 256, O_ENV, O_IMAGE, O_NETWORK, O_RUNTIME, O_CPU, O_MEM, O_PIDS, O_DISK,
         O_TMPFS, O_TIMEOUT, O_PASS, O_EXCL };
  static const struct option opts[] = {
      {"agent", required_argument, NULL, 'a'},
      {"tool", required_argument, NULL, 't'},
      {"user", required_argument, NULL, 'u'},
      {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},
      {"mode", required_argument, NULL, O_MODE},
      {"project-environment", required_argument, NULL, O_ENV},
      {"image", required_argument, NULL, O_IMAGE},
      {"network", required_argument, NULL, O_NETWORK},
      {"runtime", required_argument, NULL, O_RUNTIME},
      {"cpu", required_argument, NULL, O_CPU},
      {"mem", required_argument, NULL, O_MEM},
      {"pids", required_argument, NULL, O_PIDS},
      {"disk", required_argument, NULL, O_DISK},
      {"tmpfs", required_argument, NULL, O_TMPFS},
      {"timeout", required_argument, NULL, O_TIMEOUT},
      {"env-passthrough", required_argument, NULL, O_PASS},
      {"exclude", required_argument, NULL, O_EXCL},
      {NULL, 0, NULL, 0}};
  const char *agent = NULL, *tool = NULL, *user = NULL;
  int json = 0, c;
  static sm_config_flags flags; /* large (two lists): not on the stack */
  static sm_resolved r;
  memset(&flags, 0, sizeof flags);
  sm_error err = SM_ERROR_INIT;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
      case 'a': agent = optarg; break;
      case 't': tool = optarg; break;
      case 'u': user = optarg; break;
      case 'j': json = 1; break;
      case 'h': usage(stdout); return CLI_EXIT_OK;
      case O_MODE: flags.mode = optarg; break;
      case O_ENV: flags.project_environment = optarg; break;
      case O_IMAGE: flags.image = optarg; break;
      case O_NETWORK: flags.network = optarg; break;
      case O_RUNTIME: flags.runtime = optarg; break;
      case O_CPU: flags.cpu = optarg; break;
      case O_MEM: flags.memory = optarg; break;
      case O_PIDS: flags.pids = optarg; break;
      case O_DISK: flags.disk = optarg; break;
      case O_TMPFS: flags.tmpfs = optarg; break;
      case O_TIMEOUT: flags.timeout = optarg; break;
      case O_PASS:
        if (sm_string_list_add(&flags.env_passthrough, optarg, &err) != 0) return cli_fail(&err);
        break;
      case O_EXCL:
        if (sm_string_list_add(&flags.excludes, optarg, &err) != 0) return cli_fail(&err);
        break;
      default: usage(stderr); return CLI_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    cli_error("config explain: unexpected argument '%s'", argv[optind]);
    return CLI_EXIT_USAGE;
  }
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
  if (json) cli_print_json(j);
  else print_text(cfg, &r, j, agent, tool, user);
  json_object_put(j);
  sm_config_free(cfg);
  return CLI_EXIT_OK;
}

int cmd_config(int argc, char **argv, const cli_globals *g) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
  }
  if (strcmp(argv[1], "check") == 0) return config_check(argc - 1, argv + 1, g);
  if (strcmp(argv[1], "explain") == 0) {
    optind = 1;
    return config_explain(argc - 1, argv + 1, g);
  }
  cli_error("config: unknown subcommand '%s' (check or explain)", argv[1]);
  return CLI_EXIT_USAGE;
}
