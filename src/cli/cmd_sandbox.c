/* PLACEHOLDER: replaced by the module that owns `sandman sandbox`. */
#include "cli.h"

int cmd_sandbox(int argc, char **argv, const cli_globals *g) {
  (void)argc; (void)argv; (void)g;
  cli_error("'sandbox' is not available in this build yet");
  return CLI_EXIT_FAILURE;
}
