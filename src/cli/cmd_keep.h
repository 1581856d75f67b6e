/* What the commands of sandboxes that keep their state share (cmd_keep.c,
 * cmd_snapshot.c). */
#ifndef SANDMAN_CLI_CMD_KEEP_H
#define SANDMAN_CLI_CMD_KEEP_H

#include <sandman/audit.h>
#include <sandman/config.h>
#include <sandman/runner.h>

#include "cli.h"

/* The configuration, a runner and the audit trail (when on). */
typedef struct keep_session {
  sm_config *cfg;
  sm_runner *runner;
  sm_audit *audit;
} keep_session;

int keep_session_open(const cli_call *call, keep_session *s);
void keep_session_close(keep_session *s);
/* The keyed sandbox the command names (SANDBOX, --run-id or --worker-id)
 * into name (SM_NAME_MAX), for operation op (sm_keep_supported: a backend
 * that refuses it is said first, exit 125); a CLI exit code. */
int keep_target(const cli_call *call, sm_runner *runner, const char *op, char *name, int json);
/* The exit code of a failed operation: 1 for a missing, busy or
 * wrong-state sandbox, else as cli_fail. */
int keep_exit(const sm_error *err);

#endif
