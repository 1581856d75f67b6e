/* A tool call of the runner from its parameters to its answer (server_call.c):
 * the checks and resolution every route that runs something shares
 * (execute, its streamed and background forms, the files routes). */
#ifndef SANDMAN_SERVER_CALL_H
#define SANDMAN_SERVER_CALL_H

#include <limits.h>

#include <sandman/ops.h>

#include "server/server_core.h"

struct server_call {
  sm_server *srv;
  server_execute_params p;
  sm_resolved r;
  char **argv;
  size_t argc;
  char **env;
  size_t n_env;
  server_secret_env secrets;
  int lease_pending;    /* a use of p.lease_id taken and not settled yet (server_call.c) */
  char ws[PATH_MAX];
  int has_ws;
  int control;          /* made with the control token */
  char principal[SM_PRINCIPAL_MAX];
  char nonce[SM_HOOK_NONCE_LEN * 2 + 1];
  int hook;
  size_t stdin_off;
  sm_run_request req;
  double t0;
  server_handle *handle;
  const sm_config *cfg; /* the configuration in force when the call came */
  sm_config_egress egress; /* network allowlist: its lists (borrowed from cfg) */
  sm_host_route route;     /* the host-tool route when the broker offers one */
  char sandbox[SM_NAME_MAX];        /* named by "sandbox_id": its container name, else "" */
  char sandbox_id[SM_ENGINE_ID_MAX]; /* and its container id */
  sm_ops_sandbox *made;             /* and what its labels say (owned) */
};

/* The runner's idle timeout of the sandboxes it makes when the
 * configuration sets none (docs/operations.md#idle-timeouts). */
#define SM_SERVER_IDLE_DEFAULT_S 1800.0
/* The idle timeout a sandbox this runner makes carries: the
 * configuration's idle_timeout when it sets one (0: never), else
 * SM_SERVER_IDLE_DEFAULT_S. */
double server_idle_timeout(const sm_resolved *r);

#define SM_CALL_GENERIC_401 "missing or invalid token"

#endif
