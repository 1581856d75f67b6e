/* GET /metrics: the Prometheus text of the runner's counters and gauges
 * (the control token only: the listener checks). */
#ifndef SANDMAN_SERVER_METRICS_ROUTE_H
#define SANDMAN_SERVER_METRICS_ROUTE_H

#include <stddef.h>

#include "server/server_core.h"

/* On a call thread (the gauges count the engine's sandboxes): *text (the
 * caller frees it) and *len, with a->status 200; or the error answer in
 * a with *text NULL. */
void server_metrics_route(sm_server *srv, char **text, size_t *len, server_answer *a);

#endif
