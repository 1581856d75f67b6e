/* PLACEHOLDER: replaced by the module that owns `sandman run`. */
#include "cli.h"

int cmd_run(int argc, char **argv, const cli_globals *g) {
  (void)argc; (void)argv; (void)g;
  cli_error("'run' is not available in this build yet");
  return CLI_EXIT_FAILURE;
}
