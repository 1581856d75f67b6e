/* The stop flag of a long-running command: SIGINT, SIGTERM and SIGHUP set
 * it, installed without SA_RESTART so that a blocked read returns and the
 * command's loop sees the flag. */
#include <signal.h>
#include <string.h>

#include "cli.h"

static volatile int stop_requested;

static void on_stop_signal(int sig) {
  (void)sig;
  stop_requested = 1;
}

volatile int *cli_catch_stop_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  return &stop_requested;
}
