/* `sandman token derive --worker-key K [--token-file F]`: prints a
 * worker's token, derived from the control token (--token-file, else
 * $SANDMAN_TOKEN) as the runner checks it. */
#include <stdio.h>
#include <string.h>

#include <sandman/server.h>

#include "cli.h"

int cmd_token_derive(const cli_call *call) {
  const char *key = cli_str(call, "worker-key"), *file = cli_str(call, "token-file");
  if (key == NULL) return cli_usage_error(call->cmd, 0, "--worker-key KEY is required");
  char token[SM_TOKEN_MAX_LEN + 2];
  sm_error err = SM_ERROR_INIT;
  if (sm_token_load(file, token, sizeof token, &err) != 0) {
    cli_error("%s", err.message);
    return CLI_EXIT_USAGE;
  }
  char out[65];
  int rc = sm_token_derive(token, key, out, &err);
  memset(token, 0, sizeof token);
  if (rc != 0) return cli_fail(&err);
  printf("%s\n", out);
  return CLI_EXIT_OK;
}
