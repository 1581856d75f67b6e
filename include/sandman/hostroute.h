/* sandman: the host-tool route, where its two sides meet.
 *
 * Inside every container sandbox that is given host tools, sandman runs a
 * small relay of its own (`sandman-agent route`, an engine exec sandman
 * keeps attached) that listens on a unix socket in sandman's read-only area
 * (SM_ROUTE_SOCKET) and hands each HTTP/1.1 request it receives to the host
 * over that exec's stream: never over a network, so the route works with
 * `network: none`, under gVisor and with a remote engine.
 *
 * On the host, the call driver (sm_run) knows who is calling: the relay
 * names the process that wrote the request as the kernel gives it
 * (SCM_CREDENTIALS) with its ancestors, and the request belongs to the call with the route
 * whose first process (known from the call's own output, its preamble) is
 * among them. The request's raw bytes and the caller's identity go to a
 * handler (the broker, sandman/broker.h), whose answer is a complete
 * HTTP/1.1 response. A process of no live call (one a call left behind),
 * or of a call without the route, is an inactive caller and the handler
 * refuses.
 *
 * See docs/host-tools.md. */
#ifndef SANDMAN_HOSTROUTE_H
#define SANDMAN_HOSTROUTE_H

#include <stddef.h>

#include <sandman/error.h>
#include <sandman/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where the route listens inside the sandbox, and where `sandman-tools`
 * lives (the call's PATH gets SM_ROUTE_BIN_DIR when the route is on). */
#define SM_ROUTE_SOCKET "/.sandman/tools.sock"
#define SM_ROUTE_BIN_DIR "/.sandman/bin"
/* Hard caps on one request (head and body) and one response. */
#define SM_ROUTE_REQUEST_MAX ((size_t)4 << 20)
#define SM_ROUTE_RESPONSE_MAX ((size_t)8 << 20)

/* Who a request through the route comes from, as sandman knows it. All
 * strings are borrowed for the handler's duration; "" when not known. */
typedef struct sm_route_caller {
  int active;               /* 0: the process is of no live call with the route */
  const char *container_id;
  const char *sandbox;      /* container name */
  const char *mode;         /* "per_tool", "per_run", "per_worker" */
  const char *runtime;      /* "" (engine default) or "runsc" */
  const char *project;
  const char *agent;
  const char *tool;         /* the calling tool of the agent */
  const char *user;
  const char *run_id;
  const char *worker_id;
  const char *principal;    /* "control" or "worker:<key>" */
  const char *call_id;      /* sandman's id of the tool call in progress */
  long peer_pid;            /* the requesting process in the sandbox, -1 unknown */
  long peer_uid;            /* its user id, -1 unknown */
} sm_route_caller;

/* Answers one request (req[0..len), raw HTTP/1.1 as the sandbox sent it:
 * untrusted, at most SM_ROUTE_REQUEST_MAX) with a complete HTTP/1.1
 * response (status line, headers, body), malloc'd into *resp and *resp_len
 * (at most SM_ROUTE_RESPONSE_MAX). Runs on the route's threads, several at
 * once. A negative return (out of memory) makes the route answer 500. */
typedef int (*sm_route_handler_fn)(void *ud, const sm_route_caller *who, const char *req,
                                   size_t len, char **resp, size_t *resp_len, sm_error *err);

typedef struct sm_host_route {
  sm_route_handler_fn handle;
  void *ud;
} sm_host_route;

#ifdef __cplusplus
}
#endif

#endif
