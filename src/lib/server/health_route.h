/* GET /healthz: the runner's state (engine, mode, pool, draining) for a
 * caller without a token. */
#ifndef SANDMAN_SERVER_HEALTH_ROUTE_H
#define SANDMAN_SERVER_HEALTH_ROUTE_H

#include "server/server_core.h"

/* Fills a with the 200 answer: {"status": "ok"|"degraded", "version",
 * "mode", "pool", "engine": {...}} (docs/http-api.md). */
void server_health_route(sm_server *srv, server_answer *a);

#endif
