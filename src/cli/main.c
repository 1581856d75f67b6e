/* sandman: global options, then one subcommand from the table. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const struct {
  const char *name;
  cli_command_fn fn;
  const char *summary;
} commands[] = {
    {"run", cmd_run, "run one tool call in a sandbox"},
    {"worker", cmd_worker, "worker start: serve the HTTP API"},
    {"serve", cmd_serve, "alias of `worker start`"},
    {"sandbox", cmd_sandbox, "doctor | list | reap | rm"},
    {"config", cmd_config, "check | explain"},
    {"image", cmd_image, "build a sandbox image"},
    {"token", cmd_token, "derive a per-worker token"},
    {"version", cmd_version, "sandman, engine and API versions"},
};

static void usage(FILE *out) {
  fprintf(out,
          "Usage: sandman [--config FILE] [--host URL] [--log-level L] "
          "[--log-format text|json] COMMAND [ARGS]\n\nCommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\nRun `sandman COMMAND --help` for a command's options.\n");
}

static void log_to_stderr(sm_log_level level, const char *request_id, const char *message,
                          void *userdata) {
  const cli_globals *g = userdata;
  char when[32];
  sm_format_time(sm_now(), when, sizeof when);
  if (g->log_json) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "time", json_object_new_string(when));
    json_object_object_add(o, "level", json_object_new_string(sm_log_level_name(level)));
    if (request_id) json_object_object_add(o, "request_id", json_object_new_string(request_id));
    json_object_object_add(o, "msg", json_object_new_string(message));
    fprintf(stderr, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
  } else {
    char upper[8];
    const char *name = sm_log_level_name(level);
    size_t i = 0;
    for (; name[i] && i < sizeof upper - 1; i++) upper[i] = (char)(name[i] - 32);
    upper[i] = '\0';
    if (request_id)
      fprintf(stderr, "%s %s [%s] %s\n", when, upper, request_id, message);
    else
      fprintf(stderr, "%s %s %s\n", when, upper, message);
  }
}

int main(int argc, char **argv) {
  static cli_globals g = {NULL, NULL, SM_LOG_INFO, 0};
  static const struct option opts[] = {
      {"config", required_argument, NULL, 'c'}, {"host", required_argument, NULL, 'H'},
      {"log-level", required_argument, NULL, 'l'}, {"log-format", required_argument, NULL, 'f'},
      {"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0}};
  int c;
  /* '+' stops at the first non-option: the subcommand owns the rest. */
  while ((c = getopt_long(argc, argv, "+hV", opts, NULL)) != -1) {
    switch (c) {
      case 'c': g.config_path = optarg; break;
      case 'H': g.host = optarg; break;
      case 'l':
        if (sm_log_level_parse(optarg, &g.log_level) != 0) {
          cli_error("--log-level takes debug, info, warn or error, not '%s'", optarg);
          return CLI_EXIT_USAGE;
        }
        break;
      case 'f':
        if (strcmp(optarg, "json") == 0) g.log_json = 1;
        else if (strcmp(optarg, "text") == 0) g.log_json = 0;
        else {
          cli_error("--log-format takes text or json, not '%s'", optarg);
          return CLI_EXIT_USAGE;
        }
        break;
      case 'h': usage(stdout); return CLI_EXIT_OK;
      case 'V': {
        char *vargv[] = {"version", NULL};
        optind = 1;
        return cmd_version(1, vargv, &g);
      }
      default: usage(stderr); return CLI_EXIT_USAGE;
    }
  }
  if (optind >= argc) {
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  sm_log_set_level(g.log_level);
  sm_log_set_handler(log_to_stderr, &g);

  const char *name = argv[optind];
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp(commands[i].name, name) == 0) {
      int sub_argc = argc - optind;
      char **sub_argv = argv + optind;
      optind = 1; /* each command parses its own options from argv[1] */
      return commands[i].fn(sub_argc, sub_argv, &g);
    }
  }
  cli_error("unknown command '%s'", name);
  usage(stderr);
  return CLI_EXIT_USAGE;
}
