/* sandman-egress: network mode allowlist's two programs in one static
 * binary (docs/network.md#how-it-is-enforced):
 *
 *   sandman-egress serve ...   the proxy, one per instance (proxy_serve.c)
 *   sandman-egress relay ...   one per allowlist sandbox, in the sandbox's
 *                              network namespace (proxy_relay.c) */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "egress_proxy/proxy_io.h"

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc >= 2 && strcmp(argv[1], "serve") == 0) return eg_serve_main(argc - 2, argv + 2);
  if (argc >= 2 && strcmp(argv[1], "relay") == 0) return eg_relay_main(argc - 2, argv + 2);
  fprintf(stderr, "usage: sandman-egress serve|relay [options]\n");
  return 2;
}
