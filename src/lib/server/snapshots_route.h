/* Snapshots, forks, rollbacks and differences on the runner
 * (snapshots_route.c; docs/http-api.md#snapshots), reached through the
 * sandboxes routes' request (sandboxes_route.c), which checked the token
 * against the worker key first. */
#ifndef SANDMAN_SERVER_SNAPSHOTS_ROUTE_H
#define SANDMAN_SERVER_SNAPSHOTS_ROUTE_H

#include <sandman/keep.h>

#include "server/server_core.h"
#include "server/sandboxes_route.h"

typedef struct server_snapshot_args {
  const char *id;                      /* the route's {id} or {name} */
  const char *worker_key;              /* acting for this worker; NULL: the control token */
  char name[SM_SNAPSHOT_NAME_MAX];     /* ?name= (snapshot) */
  char snapshot[SM_SNAPSHOT_NAME_MAX]; /* ?snapshot= (fork, rollback, diff) */
  char prefix[SM_NAME_MAX / 2];        /* ?prefix= (fork) */
  int count;                           /* ?count= (fork; 0: 1) */
  int no_wait;
  int memory;                          /* ?memory=1 (snapshot) */
} server_snapshot_args;

/* One query parameter of a snapshot route: 1 when it is one of op's (*rc
 * 0 when its value is good, -1 when not), 0 when op has no such one. */
int server_snapshot_arg(server_snapshot_args *s, server_sandboxes_op op, const char *key,
                        const char *value, int *rc);
/* Does op, on a call thread. */
void server_snapshot_run(sm_server *srv, server_sandboxes_op op, const server_snapshot_args *s,
                         server_answer *a);

#endif
