/* sandman runner service: the server object shared by server.c (life
 * cycle, health), jobs.c (call threads), server_http.c (libmicrohttpd, routes),
 * the routes (execute.c, lease_route.c, files_route.c, mcp_route.c) and
 * handles.c (background calls). Answers (answer.h) and authentication
 * (auth.h) are leaves below it. */
#ifndef SANDMAN_SERVER_CORE_H
#define SANDMAN_SERVER_CORE_H

#include <limits.h>
#include <pthread.h>

#include <json-c/json.h>
#include <microhttpd.h>

#include <sandman/config.h>
#include <sandman/hostroute.h>
#include <sandman/server.h>

#include "server/answer.h"
#include "server/server_internal.h"

typedef struct server_job {
  void (*fn)(void *arg);
  void *arg;
  struct server_job *next;
} server_job;

typedef struct server_handle server_handle;
typedef struct server_gate server_gate;

struct sm_server {
  sm_server_options opts;    /* strings below are the server's copies */
  char *token;
  char *pool, *project, *project_environment;
  sm_config_flags flags;
  int have_flags;
  char address[PATH_MAX + 16];
  char sock_path[PATH_MAX];  /* unix socket we created, or "" */
  dev_t sock_dev;
  ino_t sock_ino;
  int listen_fd;
  struct MHD_Daemon *mhd;
  server_gate *gate; /* accepts connections for mhd (gate.c) */
  server_creds *creds;
  struct sm_broker *broker;  /* host tools (broker_route.c); under mu */
  server_lease_store *leases;
  server_metrics *metrics;
  struct sm_mcp_http *mcp;   /* /mcp sessions (mcp_route.c), NULL without an engine */
  struct code_queue *code_queue; /* turns of code runs (code_queue.c) */
  struct server_terminals *terminals; /* terminal.c */
  struct server_previews *previews;   /* preview URLs' tokens (preview.c) */
  struct server_port_tunnels *port_tunnels; /* WebSockets through the ports route (port_tunnel.c) */
  struct server_watches *watches;     /* file events, server_watch.c */
  struct server_ws_group *ws;         /* WebSocket connections (websocket_conn.c) */
  char ws_root[PATH_MAX];    /* realpath of --workspaces-root, or "" */
  char owner_label[SM_OWNER_LABEL_MAX]; /* io.sandman.owner of our per_tool sandboxes */

  pthread_mutex_t mu;        /* guards everything below */
  pthread_cond_t cv_job;     /* a job was queued, or the threads must stop */
  pthread_cond_t cv_idle;    /* a request, call or background call ended */
  pthread_t *threads;
  unsigned n_threads;
  server_job *head, *tail;
  size_t queued;
  int workers_stop;
  long requests_open;        /* requests between first byte and completion */
  long calls_in_flight;
  size_t body_bytes;         /* request bodies buffered right now */
  int draining;
  server_handle **handles;
  size_t n_handles;
  long bg_running;           /* background threads alive */

  pthread_t health_thread;
  int health_started;
  int health_stop;
  pthread_cond_t cv_health;
  int engine_up;
  char engine_host[256];
  char engine_version[64];
  char engine_api[16];
  char engine_error[256];
};

/* ---- the audit trail (audit.c); nothing when the runner keeps none ---- */
/* Records ev (request_id: the thread's when NULL); a failed write is logged. */
void server_audit(sm_server *srv, sm_audit_event *ev);
/* call.allowed / call.refused for the request p (mode, rule may be NULL). */
void server_audit_call(sm_server *srv, const char *event, const server_execute_params *p,
                       const char *mode, const char *rule, const char *message);
/* lease.created / used / refused: the id shortened (it is a capability). */
void server_audit_lease(sm_server *srv, const char *event, const char *lease_id, const char *tool,
                        const char *worker, const char *message);
void server_audit_token(sm_server *srv, const char *route, const char *worker, const char *message);
/* 401 "missing or invalid token" (the same words whatever was wrong), recorded. */
void server_refuse_token(sm_server *srv, const char *route, server_answer *a);
/* GET /v1/audit (audit.c; the control token only: the listener checks):
 * the events of the query's filter in a, or the error answer. On a call
 * thread (the proxy's decisions come from the engine). */
void server_audit_route(sm_server *srv, struct MHD_Connection *conn, server_answer *a);

/* ---- host tools (broker_route.c) ---- */
/* Lends the broker the credentials file (start) or takes it back (free). */
void server_broker_attach(sm_server *srv, struct sm_broker *b);
void server_broker_detach(sm_server *srv);
/* 1 and *route filled when the broker offers agent's tool host tools;
 * *agent_has_tools: whether any of agent's calls may get them. */
int server_host_route(sm_server *srv, const char *agent, const char *tool, sm_host_route *route,
                      int *agent_has_tools);
/* GET /v1/approvals (id NULL) and POST /v1/approvals/{id} {"approve": bool};
 * control: the request has the control token (else 403). */
void server_approvals_route(sm_server *srv, const char *method, const char *id, int control,
                            const char *body, size_t len, server_answer *a);

/* jobs.c: queues a job for a call thread; SM_EBUSY when the queue is full
 * (err says so in the words the runner answers with). */
int server_submit(sm_server *srv, void (*fn)(void *), void *arg, sm_error *err);
/* A call thread's main (arg: the server): runs jobs until workers_stop. */
void *server_job_thread(void *arg);
/* gauges.c */
void server_gauges(sm_server *srv, server_metrics_gauges *g, int with_sandboxes);
/* 1 when token authorises a request about worker_key (control token, or
 * that worker's derived token). Constant time in the token. */
int server_token_ok(const sm_server *srv, const char *token, const char *worker_key);
int server_is_control(const sm_server *srv, const char *token);
/* The control token, or a worker token of the body's worker_key (read
 * before anything else of the body is told). */
int server_body_token_ok(sm_server *srv, const char *body, size_t len, int control,
                         const char *token);

/* gate.c: accepts connections on srv->listen_fd and hands those whose
 * request head is complete to srv->mhd. */
int server_gate_start(sm_server *srv, sm_error *err);
/* Stops accepting: closes the listening socket and the waiting heads. */
void server_gate_stop(sm_server *srv);
void server_gate_free(sm_server *srv);
/* libmicrohttpd's connection notifications (started 1, closed 0). */
void server_gate_connection(sm_server *srv, struct MHD_Connection *conn, void **ctx, int started);
void server_gate_read_stats(sm_server *srv, server_gate_stats *out);

/* server_http.c */
int server_http_start(sm_server *srv, sm_error *err);
void server_http_quiesce(sm_server *srv);
void server_http_stop(sm_server *srv);

/* execute.c: token is the bearer token presented (already known to be
 * the control token when control is 1). accept_stream: the client asked
 * for application/x-ndjson. A call to stream (the body's "stream", or
 * accept_stream) is not run: it comes back prepared in *streamed (for
 * server_execute_streamed), with out untouched. */
typedef struct server_stream server_stream;
typedef struct server_call server_call;
void server_execute_route(sm_server *srv, const char *body, size_t len, int control,
                          const char *token, int accept_stream, server_call **streamed,
                          server_answer *out);
/* GET and DELETE /v1/handles/ID (execute.c): unknown handles are 404 for
 * the control token only. */
void server_handle_route_get(sm_server *srv, const char *id, int control, const char *token,
                             server_answer *out);
void server_handle_route_delete(sm_server *srv, const char *id, int control, const char *token,
                                server_answer *out);
/* lease_route.c: POST /v1/leases. */
void server_lease_route(sm_server *srv, const char *body, size_t len, int control,
                        const char *token, server_answer *out);

/* server_call.c: a call checked and resolved from its parameters (p is taken) as
 * execute does it (token, policy, workspace, lease, environment, hook):
 * NULL with *a filled when it is refused. */
server_call *server_call_prepare(sm_server *srv, server_execute_params *p, int control,
                                 const char *token, server_answer *a);
sm_run_request *server_call_request(server_call *k);
const server_secret_env *server_call_secrets(const server_call *k);
/* Runs it (errors become the result's failure) and scrubs and answers it. */
void server_call_run(server_call *k, sm_run_result *res);
void server_call_answer(server_call *k, sm_run_result *res, server_answer *a);
void server_call_free(server_call *k);

/* execute_stream.c: the streamed answer of an execute (takes k). */
void server_execute_streamed(server_call *k, server_stream *stream);
/* execute_stream.c: POST /v1/execute on its call thread, answered through
 * stream s (streamed, or its JSON answer): the call counted in flight
 * meanwhile. body belongs to the request, which may be gone once a
 * streamed answer begins: it is not read after that. */
void server_execute_job(sm_server *srv, server_stream *s, const char *body, size_t len, int control,
                        const char *token, int accept_stream);

#endif
