/* PLACEHOLDER: replaced by the module that owns `sandman token`. */
#include "cli.h"

int cmd_token(int argc, char **argv, const cli_globals *g) {
  (void)argc; (void)argv; (void)g;
  cli_error("'token' is not available in this build yet");
  return CLI_EXIT_FAILURE;
}
