/* PLACEHOLDER: replaced by the module that owns `sandman worker`. */
#include "cli.h"

int cmd_worker(int argc, char **argv, const cli_globals *g) {
  (void)argc; (void)argv; (void)g;
  cli_error("'worker' is not available in this build yet");
  return CLI_EXIT_FAILURE;
}

int cmd_serve(int argc, char **argv, const cli_globals *g) { return cmd_worker(argc, argv, g); }
