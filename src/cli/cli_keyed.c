/* A keyed sandbox named on the command line by SANDBOX (sandman exec,
 * sandman sandbox port): found among this instance's sandboxes by name,
 * id or a unique id prefix; its keys come from its labels. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void take(cli_keyed_sandbox *out, const sm_ops_sandbox *s) {
  snprintf(out->name, sizeof out->name, "%s", s->name);
  snprintf(out->mode, sizeof out->mode, "%s", s->mode);
  snprintf(out->run_id, sizeof out->run_id, "%s", s->run_id);
  snprintf(out->worker_id, sizeof out->worker_id, "%s", s->worker_id);
  snprintf(out->project, sizeof out->project, "%s", s->project);
  snprintf(out->agent, sizeof out->agent, "%s", s->agent);
}

int cli_find_keyed_sandbox(sm_runner *runner, const char *ref, const char *what,
                           cli_keyed_sandbox *out) {
  memset(out, 0, sizeof *out);
  sm_ops_scope scope;
  sm_ops_sandbox_list list = {0, NULL};
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_scope_from_runner(&scope, runner, &err) != 0 ||
      sm_ops_list(&scope, 1, &list, &err) != 0)
    return cli_fail(&err);
  const sm_ops_sandbox *hit = NULL;
  size_t matches = 0, plen = strlen(ref);
  for (size_t i = 0; i < list.n; i++) {
    const sm_ops_sandbox *s = &list.items[i];
    if (strcmp(s->name, ref) == 0 || strcmp(s->id, ref) == 0) {
      hit = s;
      matches = 1;
      break;
    }
    if (strncmp(s->id, ref, plen) == 0) hit = s, matches++;
  }
  int found = hit && matches == 1;
  if (found) take(out, hit);
  sm_ops_sandbox_list_dispose(&list);
  if (matches > 1) {
    cli_error("'%s' names %zu sandboxes: give more of the id", ref, matches);
    return CLI_EXIT_FAILURE;
  }
  if (!found) {
    cli_error("no sandbox '%s' in this instance (sandman sandbox list)", ref);
    return CLI_EXIT_FAILURE;
  }
  if (strcmp(out->mode, "per_run") != 0 && strcmp(out->mode, "per_worker") != 0) {
    cli_error("sandbox '%s' is a %s sandbox: %s needs a per_run or per_worker one", ref,
              out->mode[0] ? out->mode : "per_tool", what);
    return CLI_EXIT_FAILURE;
  }
  return 0;
}
