/* PLACEHOLDER: replaced by the module that owns `sandman image`. */
#include "cli.h"

int cmd_image(int argc, char **argv, const cli_globals *g) {
  (void)argc; (void)argv; (void)g;
  cli_error("'image' is not available in this build yet");
  return CLI_EXIT_FAILURE;
}
