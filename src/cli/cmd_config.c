/* PLACEHOLDER: replaced by the module that owns `sandman config`. */
#include "cli.h"

int cmd_config(int argc, char **argv, const cli_globals *g) {
  (void)argc; (void)argv; (void)g;
  cli_error("'config' is not available in this build yet");
  return CLI_EXIT_FAILURE;
}
