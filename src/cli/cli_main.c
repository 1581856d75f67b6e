/* sandman: global options, then one command of the table (commands.c). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* "unknown command 'sandbox lst'; did you mean `sandbox list`?" */
int cli_unknown_command(const char *name, int json) {
  char group[128] = "";
  const char *word = name;
  const char *sp = strrchr(name, ' ');
  if (sp) {
    snprintf(group, sizeof group, "%.*s", (int)(sp - name), name);
    word = sp + 1;
  }
  const char *cands[64];
  size_t n = 0;
  for (size_t i = 0; i < cli_n_commands && n < 64; i++)
    if (cli_command_in_group(&cli_commands[i], group))
      cands[n++] = cli_command_leaf(&cli_commands[i]);
  const char *near = cli_nearest(word, cands, n);
  const cli_command *where = cli_command_find(group);
  if (near)
    return cli_usage_error(where, json, "unknown command '%s'; did you mean `sandman %s%s%s`?",
                           name, group, group[0] ? " " : "", near);
  return cli_usage_error(where, json, "unknown command '%s'", name);
}

static int run_command(const cli_command *cmd, int argc, char **argv, const cli_globals *g) {
  cli_call call;
  int rc = cli_parse(cmd, argc, argv, g, &call);
  if (rc < 0) return CLI_EXIT_OK; /* --help */
  if (rc) return rc;
  rc = cli_command_target(cmd)->fn(&call);
  cli_call_dispose(&call);
  return rc;
}

int main(int argc, char **argv) {
  static cli_globals g = {NULL, NULL, SM_LOG_INFO, 0};
  const cli_command *root = &cli_commands[0];
  cli_call top;
  int rc = cli_parse(root, argc - 1, argv + 1, &g, &top);
  if (rc < 0) return CLI_EXIT_OK;
  if (rc) return rc;
  g.config_path = cli_str(&top, "config");
  g.host = cli_str(&top, "host");
  if (cli_str(&top, "log-level")) sm_log_level_parse(cli_str(&top, "log-level"), &g.log_level);
  g.log_json = cli_str(&top, "log-format") && strcmp(cli_str(&top, "log-format"), "json") == 0;
  cli_log_setup(&g);

  if (cli_has(&top, "version")) {
    char *vargv[] = {NULL};
    rc = run_command(cli_command_find("version"), 0, vargv, &g);
    cli_call_dispose(&top);
    return rc;
  }
  if (top.n_args == 0) {
    cli_help_print(stderr, root);
    cli_call_dispose(&top);
    return CLI_EXIT_USAGE;
  }

  /* The longest run of words that names a command: "sandbox list". */
  char name[128] = "";
  const cli_command *cmd = NULL;
  int used = 0;
  for (int i = 0; i < top.n_args && i < 3; i++) {
    char next[128];
    snprintf(next, sizeof next, "%s%s%s", name, name[0] ? " " : "", top.args[i]);
    const cli_command *c = cli_command_find(next);
    if (c == NULL) {
      if (cmd == NULL || !cli_command_is_group(cmd)) break;
      /* "sandman sandbox --help", "sandman sandbox help": the group's help. */
      const char *w = top.args[i];
      if (strcmp(w, "--help") == 0 || strcmp(w, "-h") == 0 || strcmp(w, "help") == 0) {
        cli_help_print(stdout, cmd);
        cli_call_dispose(&top);
        return CLI_EXIT_OK;
      }
      rc = cli_unknown_command(next, cli_wants_json(top.n_args, top.args));
      cli_call_dispose(&top);
      return rc;
    }
    snprintf(name, sizeof name, "%s", next);
    cmd = c;
    used = i + 1;
    if (!cli_command_is_group(c)) break;
  }
  if (cmd == NULL) {
    rc = cli_unknown_command(top.args[0], cli_wants_json(top.n_args, top.args));
  } else if (cli_command_is_group(cmd)) {
    /* A group alone: what it holds, as a usage error. */
    cli_help_print(stderr, cmd);
    rc = CLI_EXIT_USAGE;
  } else {
    rc = run_command(cmd, top.n_args - used, top.args + used, &g);
  }
  cli_call_dispose(&top);
  return rc;
}
