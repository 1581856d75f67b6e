/* `sandman token derive --worker-key K [--token-file F]`: prints a
 * worker's token, derived from the control token (--token-file, else
 * $SANDMAN_TOKEN) as the runner checks it. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <sandman/server.h>

#include "cli.h"

static void usage(FILE *out) {
  fprintf(out,
          "Usage: sandman token derive --worker-key KEY [--token-file FILE]\n\n"
          "Prints the per-worker token of KEY:\n"
          "  hex(HMAC-SHA256(key = control token, msg = \"" SM_WORKER_TOKEN_PREFIX
          "\" NUL KEY))\n"
          "The control token comes from --token-file (trailing newline stripped) or "
          "$" SM_TOKEN_ENV ".\n");
}

int cmd_token(int argc, char **argv, const cli_globals *g) {
  (void)g;
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
  }
  if (strcmp(argv[1], "derive") != 0) {
    cli_error("unknown token command '%s' (try `sandman token derive --help`)", argv[1]);
    return CLI_EXIT_USAGE;
  }
  static const struct option opts[] = {{"worker-key", required_argument, NULL, 'k'},
                                       {"token-file", required_argument, NULL, 't'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *key = NULL, *file = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc - 1, argv + 1, "+h", opts, NULL)) != -1) {
    switch (c) {
      case 'k': key = optarg; break;
      case 't': file = optarg; break;
      case 'h': usage(stdout); return CLI_EXIT_OK;
      default: usage(stderr); return CLI_EXIT_USAGE;
    }
  }
  if (optind < argc - 1) {
    cli_error("unexpected argument '%s'", argv[optind + 1]);
    return CLI_EXIT_USAGE;
  }
  if (key == NULL || key[0] == '\0') {
    cli_error("--worker-key KEY is required");
    return CLI_EXIT_USAGE;
  }
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
