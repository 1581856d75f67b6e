/* The host-tool broker of `sandman run` and `sandman worker start`
 * (docs/host-tools.md): one per configuration, with the audit trail the
 * command already keeps. */
#include "cli.h"

int cli_broker_new(const sm_config *cfg, sm_audit *audit, int approvals, sm_broker **out) {
  sm_broker_options o = {cfg, audit, approvals, NULL, NULL};
  sm_error err = SM_ERROR_INIT;
  if (sm_broker_new(out, &o, &err) != 0) return cli_fail(&err);
  return CLI_EXIT_OK;
}
