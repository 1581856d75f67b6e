/* POST /v1/sandboxes/reap: the operator's reap of this runner's instance
 * (the control token only: the listener checks). */
#ifndef SANDMAN_SERVER_REAP_ROUTE_H
#define SANDMAN_SERVER_REAP_ROUTE_H

#include <stddef.h>

#include "server/server_core.h"

/* On a call thread (it talks to the engine): body {"older_than_s",
 * "dry_run", "force"} (or none) to the 200 report in a, or its error. */
void server_reap_route(sm_server *srv, const char *body, size_t len, server_answer *a);

#endif
