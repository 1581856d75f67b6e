/* The listener on libmicrohttpd: a request from its head to its answer
 * (bearer tokens, body limits and deadlines, request ids, dispatch to
 * the route's code, the answer queued). Which route a URL names is
 * route_match.c's; what a route answers is its own file's (execute.c,
 * health_route.c, metrics_route.c, reap_route.c, audit.c, the *_route.c).
 *
 * Connections reach libmicrohttpd through the gate (gate.c) once their
 * request head is complete, and every answer closes its connection, so a
 * slow client never holds one of libmicrohttpd's connections while it
 * sends a head. A small pool of I/O threads (MHD_OPTION_THREAD_POOL_SIZE)
 * reads requests.
 * Routes that block (tool calls, engine queries) suspend their connection
 * and go to the call threads of server.c; when the answer is ready the
 * connection is resumed and the answer queued from the I/O thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include <sandman/log.h>
#include <sandman/ops.h>
#include <sandman/util.h>
#include <sandman/version.h>

#include "common/buf.h"
#include "server/server_core.h"
#include "server/context_route.h"
#include "server/files_route.h"
#include "server/server_watch.h"
#include "server/mcp_route.h"
#include "server/sandboxes_route.h"
#include "server/stream.h"
#include "server/terminal_route.h"
#include "server/port_route.h"
#include "server/preview.h"
#include "server/preview_route.h"
#include "server/health_route.h"
#include "server/metrics_route.h"
#include "server/reap_route.h"
#include "server/route_match.h"

#define CONNECTION_MEMORY_LIMIT (64 * 1024) /* headers of one request */
#define CONNECTION_TIMEOUT_S 20             /* a connection that makes no progress */
/* The gate keeps to --max-connections; libmicrohttpd's own limit, which it
 * splits among its I/O threads, must never be the one that refuses (it
 * would close a connection without a word). */
#define CONNECTION_SLACK 16
/* From a complete request head: the body must be in by then, and a body
 * read only to be dropped (the answer is decided) by DRAIN_TIMEOUT_MS. */
#define REQUEST_TIMEOUT_MS 30000.0
#define DRAIN_TIMEOUT_MS 10000.0
#define GENERIC_401 "missing or invalid token"
/* Bodies of requests already refused are read and dropped up to this much,
 * so that clients that write a whole body before reading the answer (most
 * HTTP libraries) get the answer rather than a reset connection. Past it,
 * or when the client waits for "100 Continue", the answer goes at once. */
#define DRAIN_MAX ((uint64_t)64 * 1024 * 1024)
#define STREAM_BLOCK (64 * 1024) /* what a streamed answer hands libmicrohttpd at once */



typedef enum { AUTH_NONE = 0, AUTH_CONTROL, AUTH_PENDING } auth_state;
/* READING: the body is buffered. DRAIN: the answer is decided (an error)
 * and the body is read and dropped before it is sent. RUNNING: a call
 * thread has the request. DONE: its answer waits to be queued. UPLOAD: a
 * call thread reads the body as it arrives (stream.h). STREAM: a call
 * thread has the request and answers through its stream. */
typedef enum {
  ST_READING = 0,
  ST_DRAIN,
  ST_RUNNING,
  ST_DONE,
  ST_ANSWERED,
  ST_UPLOAD,
  ST_STREAM,
} req_state;

typedef struct req_ctx {
  sm_server *srv;
  struct MHD_Connection *conn;
  char id[17];
  char method[8];
  server_route_match m; /* the route and what its URL carries */
  auth_state auth;
  char *token;         /* presented token when its check waits for the body */
  common_buf body;
  size_t counted;      /* bytes charged to the server's body budget */
  int has_body;        /* Content-Length > 0 or a chunked body */
  int expect_continue; /* the client waits for 100 Continue */
  uint64_t declared;   /* Content-Length, 0 if none */
  uint64_t drained;
  req_state state;
  double t0;
  server_answer answer;
  char *raw;           /* non-JSON answer (metrics) */
  size_t raw_len;
  int status;
  int accept_stream;    /* Accept: application/x-ndjson */
  server_stream *stream;     /* streamed body or answer (one reference) */
  server_files_req *files;   /* until its job takes it */
  server_mcp_req *mcp;       /* until its job takes it */
  server_sandboxes_req *sbx; /* the sandboxes routes' request */
  context_req *contexts; /* until its job takes it */
  server_terminal_req *term;  /* until its job takes it (terminal_route.c) */
  server_port_req *port_req;  /* until its job takes it (port_route.c) */
  server_preview_ask preview_ask; /* POST /v1/sandboxes/{id}/previews */
  server_ws_upgrade *upgrade; /* a WebSocket's 101 answer (websocket_conn.c) */
} req_ctx;

/* ---- answers ---- */

/* Queues r (and drops our reference to it). */
static enum MHD_Result send_response(req_ctx *c, struct MHD_Response *r, int status) {
  /* One request per connection: the next one goes through the gate again
   * (a kept-alive connection would let a client trickle its next head to
   * libmicrohttpd directly). */
  MHD_add_response_header(r, "Connection", "close");
  enum MHD_Result ret = MHD_queue_response(c->conn, (unsigned)status, r);
  MHD_destroy_response(r);
  if (ret == MHD_YES) {
    c->status = status;
    c->state = ST_ANSWERED;
    server_metrics_http(c->srv->metrics, server_route_name(c->m.route), status);
    if (status == 401 || status == 403 || status == 400 || status == 413 || status == 404)
      server_metrics_failure(c->srv->metrics, "policy");
  }
  return ret;
}

static enum MHD_Result queue_answer(req_ctx *c) {
  char *data;
  size_t len;
  const char *ctype;
  int status;
  if (c->raw) {
    data = c->raw;
    len = c->raw_len;
    c->raw = NULL;
    ctype = "text/plain; version=0.0.4; charset=utf-8";
    status = c->answer.status ? c->answer.status : 200;
  } else {
    if (c->answer.body == NULL) server_answer_error(&c->answer, 500, "sandbox", "internal error");
    size_t n = 0;
    const char *s = json_object_to_json_string_length(
        c->answer.body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    data = malloc(n + 2);
    if (data == NULL) return MHD_NO;
    memcpy(data, s, n);
    data[n] = '\n';
    data[n + 1] = '\0';
    len = n + 1;
    ctype = "application/json";
    status = c->answer.status;
  }
  struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
  if (r == NULL) {
    free(data);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", ctype);
  MHD_add_response_header(r, "X-Request-Id", c->id);
  MHD_add_response_header(r, "Cache-Control", "no-store");
  if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
  if (status == 405) {
    /* Every route that answers 405 names its methods (match_route and the
     * other matchers set c->m.allow). */
    if (c->m.allow) MHD_add_response_header(r, "Allow", c->m.allow);
  }
  return send_response(c, r, status);
}

static enum MHD_Result answer_error(req_ctx *c, int status, const char *kind, const char *msg) {
  if (c->answer.body) json_object_put(c->answer.body);
  c->answer.body = NULL;
  server_answer_error(&c->answer, status, kind, "%s", msg);
  return queue_answer(c);
}

/* An error decided before the body is read: answered now when there is no
 * body to wait for, else once it has been read and dropped. */
static enum MHD_Result decide_answer(req_ctx *c) {
  if (!c->has_body) return queue_answer(c);
  if (c->expect_continue || c->declared > DRAIN_MAX) return queue_answer(c);
  common_buf_dispose(&c->body);
  common_buf_init(&c->body, 0);
  c->state = ST_DRAIN;
  return MHD_YES;
}

static enum MHD_Result decide(req_ctx *c, int status, const char *kind, const char *msg) {
  if (c->answer.body) json_object_put(c->answer.body);
  c->answer.body = NULL;
  server_answer_error(&c->answer, status, kind, "%s", msg);
  return decide_answer(c);
}

/* ---- streamed requests (stream.h) ---- */

static void stream_response_free(void *cls) { server_stream_unref(cls); }

static void add_passed(void *ud, const char *name, const char *value) {
  MHD_add_response_header(ud, name, value);
}

/* A 101 queued: the request is answered (and counted) once it is. */
static enum MHD_Result queue_switching(req_ctx *c, struct MHD_Response *r) {
  enum MHD_Result ret = MHD_queue_response(c->conn, MHD_HTTP_SWITCHING_PROTOCOLS, r);
  MHD_destroy_response(r);
  if (ret == MHD_YES) {
    c->status = MHD_HTTP_SWITCHING_PROTOCOLS;
    c->state = ST_ANSWERED;
    server_metrics_http(c->srv->metrics, server_route_name(c->m.route), c->status);
  }
  return ret;
}

/* A proxied 101 (a WebSocket through the ports route): libmicrohttpd sends
 * it with the server's headers, then hands the socket to the call side. */
static enum MHD_Result queue_stream_upgrade(req_ctx *c) {
  struct MHD_Response *r = MHD_create_response_for_upgrade(server_stream_on_upgrade, c->stream);
  if (r == NULL) return MHD_NO;
  server_stream_headers(c->stream, add_passed, r);
  MHD_add_response_header(r, "Upgrade", "websocket");
  MHD_add_response_header(r, "Connection", "Upgrade");
  MHD_add_response_header(r, "X-Request-Id", c->id);
  return queue_switching(c, r);
}

static enum MHD_Result queue_stream(req_ctx *c) {
  int status;
  int64_t len;
  const char *ctype, *h1, *v1, *h2, *v2;
  if (server_stream_upgrading(c->stream)) return queue_stream_upgrade(c);
  server_stream_head(c->stream, &status, &ctype, &len, &h1, &v1, &h2, &v2);
  server_stream_ref(c->stream); /* the response's: libmicrohttpd may read after completion */
  struct MHD_Response *r =
      MHD_create_response_from_callback(len < 0 ? MHD_SIZE_UNKNOWN : (uint64_t)len, STREAM_BLOCK,
                                        server_stream_reader, c->stream, stream_response_free);
  if (r == NULL) {
    server_stream_unref(c->stream);
    return MHD_NO;
  }
  if (ctype[0]) MHD_add_response_header(r, "Content-Type", ctype);
  MHD_add_response_header(r, "X-Request-Id", c->id);
  /* A sandbox's server's answer keeps its own caching headers. */
  if (server_stream_proxied(c->stream)) server_stream_headers(c->stream, add_passed, r);
  else MHD_add_response_header(r, "Cache-Control", "no-store");
  if (h1) MHD_add_response_header(r, h1, v1);
  if (h2) MHD_add_response_header(r, h2, v2);
  return send_response(c, r, status);
}

/* Where the call of a streamed request stands: its streamed answer, its
 * JSON answer, or a wait (the connection suspended until the call side
 * resumes it). */
static enum MHD_Result stream_step(req_ctx *c) {
  switch (server_stream_wait(c->stream, 1)) {
  case SM_STREAM_BEGUN:
    return queue_stream(c);
  case SM_STREAM_ANSWERED:
    server_stream_take_answer(c->stream, &c->answer);
    return queue_answer(c);
  default:
    return MHD_YES;
  }
}

static void files_discard(void *arg) { server_files_req_free(arg); }
static void term_discard(void *arg) { server_terminal_req_free(arg); }
static void mcp_discard(void *arg) { server_mcp_req_free(arg); }
static void contexts_discard(void *arg) { server_context_req_free(arg); }
static void port_discard(void *arg) { server_port_req_free(arg); }

static int stream_open(req_ctx *c) {
  c->stream = server_stream_new(c->conn, NULL, NULL);
  return c->stream ? 0 : -1;
}

/* Hands a request to a call thread that answers through its stream;
 * discard frees arg when no thread takes it. */
static enum MHD_Result dispatch_stream(req_ctx *c, void (*fn)(void *), void *arg,
                                       void (*discard)(void *)) {
  c->state = ST_STREAM;
  sm_error serr = SM_ERROR_INIT;
  if (server_submit(c->srv, fn, arg, &serr) != 0) {
    if (discard) discard(arg);
    c->state = ST_READING;
    return answer_error(c, 503, "sandbox", serr.message);
  }
  return stream_step(c);
}

/* File events: threads of their own (server_watch.h), never a call thread. */
static enum MHD_Result dispatch_watch(req_ctx *c, server_files_req *f) {
  c->state = ST_STREAM;
  if (server_watches_start(c->srv->watches, f, &c->answer) != 0) {
    c->state = ST_READING;
    return queue_answer(c);
  }
  return stream_step(c);
}

/* ---- the handlers that run on call threads ---- */

static void finish_job(req_ctx *c) {
  sm_server *srv = c->srv;
  /* The state change and the resume happen in this order under MHD's own
   * lock, so the I/O thread sees ST_DONE when it calls us again. */
  c->state = ST_DONE;
  (void)srv;
  MHD_resume_connection(c->conn);
}

/* The request's connection stays suspended until the call begins a
 * streamed answer or finishes: c is not touched after that. */
static void job_execute(void *arg) {
  req_ctx *c = arg;
  sm_log_set_request_id(c->id);
  server_execute_job(c->srv, c->stream, c->body.data, c->body.len, c->auth == AUTH_CONTROL,
                     c->token, c->accept_stream);
}

static void job_handle_delete(void *arg) {
  req_ctx *c = arg;
  sm_log_set_request_id(c->id);
  server_handle_route_delete(c->srv, c->m.handle_id, c->auth == AUTH_CONTROL, c->token, &c->answer);
  finish_job(c);
}

static void job_metrics(void *arg) {
  req_ctx *c = arg;
  sm_log_set_request_id(c->id);
  server_metrics_route(c->srv, &c->raw, &c->raw_len, &c->answer);
  finish_job(c);
}

static void job_sandboxes(void *arg) {
  req_ctx *c = arg;
  sm_log_set_request_id(c->id);
  server_sandboxes_run(c->sbx, c->body.data, c->body.len, &c->answer);
  finish_job(c);
}

static void job_previews(void *arg) {
  req_ctx *c = arg;
  sm_log_set_request_id(c->id);
  server_preview_create(c->srv, c->m.sandbox_id, &c->preview_ask, c->auth == AUTH_CONTROL, c->token,
                        &c->answer);
  finish_job(c);
}

static void job_reap(void *arg) {
  req_ctx *c = arg;
  sm_log_set_request_id(c->id);
  server_reap_route(c->srv, c->body.data, c->body.len, &c->answer);
  finish_job(c);
}

/* On a call thread: collecting the proxy's decisions talks to the engine. */
static void job_audit(void *arg) {
  req_ctx *c = arg;
  sm_log_set_request_id(c->id);
  server_audit_route(c->srv, c->conn, &c->answer);
  finish_job(c);
}

static enum MHD_Result dispatch(req_ctx *c, void (*fn)(void *)) {
  c->state = ST_RUNNING;
  MHD_suspend_connection(c->conn);
  sm_error serr = SM_ERROR_INIT;
  if (server_submit(c->srv, fn, c, &serr) != 0) {
    MHD_resume_connection(c->conn);
    c->state = ST_READING;
    return answer_error(c, 503, "sandbox", serr.message);
  }
  return MHD_YES;
}

/* ---- requests ---- */

/* The bearer token of the request, or NULL. */
static const char *bearer(struct MHD_Connection *conn) {
  const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
  if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0) return NULL;
  h += 7;
  while (*h == ' ') h++;
  return *h ? h : NULL;
}

static int charge_body(sm_server *srv, req_ctx *c, size_t n) {
  /* All bodies buffered at once stay under a budget of 16 bodies' worth:
   * many slow uploads cannot exhaust memory before their tokens are even
   * checked. */
  size_t budget = srv->opts.max_body * 16;
  pthread_mutex_lock(&srv->mu);
  int ok = srv->body_bytes + n <= budget;
  if (ok) {
    srv->body_bytes += n;
    c->counted += n;
  }
  pthread_mutex_unlock(&srv->mu);
  return ok;
}

/* A WebSocket handshake's 101 answer: the connection then belongs to the
 * route's handler (websocket_conn.c). */
static enum MHD_Result queue_upgrade(req_ctx *c, server_ws_upgrade *u, const char *accept) {
  struct MHD_Response *r = server_ws_upgrade_response(u, accept);
  if (r == NULL) {
    server_ws_upgrade_done(u);
    return answer_error(c, 503, "sandbox", "out of memory");
  }
  c->upgrade = u;
  return queue_switching(c, r);
}

/* After the token: a terminals request (terminal_route.c); an attach is
 * answered now. */
static enum MHD_Result terminals_start(req_ctx *c, const char *url, const char *method) {
  c->term = server_terminal_req_new(c->srv, c->conn, url, method, c->auth == AUTH_CONTROL, c->token,
                                    &c->m.allow, &c->answer);
  if (c->term == NULL) return decide_answer(c);
  server_ws_upgrade *u = NULL;
  char accept[SERVER_WS_ACCEPT_LEN + 1];
  if (!server_terminal_req_upgrade(c->term, c->conn, &u, accept, &c->answer)) return MHD_YES;
  if (u == NULL) return decide_answer(c);
  return queue_upgrade(c, u, accept);
}

/* After the token: the files request from the query (its own token check
 * for a worker token), its call thread started at once when the body is
 * the content. */
static enum MHD_Result files_start(req_ctx *c, int op) {
  sm_server *srv = c->srv;
  c->files = server_files_req_new(srv, c->conn, (server_files_op)op, c->id, c->auth == AUTH_CONTROL,
                                  c->token, &c->answer);
  if (c->files == NULL) return decide_answer(c);
  if (!server_files_op_uploads((server_files_op)op)) return MHD_YES; /* after the body */
  if (c->declared > srv->opts.max_file_body) {
    char msg[128];
    snprintf(msg, sizeof msg, "file body larger than %zu bytes (--max-file-body)",
             srv->opts.max_file_body);
    return decide(c, 413, "policy", msg);
  }
  if (stream_open(c) != 0) return decide(c, 503, "sandbox", "out of memory");
  server_files_req_set_stream(c->files, c->stream);
  sm_error serr = SM_ERROR_INIT;
  if (server_submit(srv, server_files_job, c->files, &serr) != 0)
    return decide(c, 503, "sandbox", serr.message);
  c->files = NULL; /* the job's */
  c->state = ST_UPLOAD;
  return MHD_YES;
}

/* A piece of a streamed body, or its end. */
static enum MHD_Result upload_step(req_ctx *c, const char *data, size_t *size) {
  if (*size == 0) return stream_step(c);
  size_t n = *size;
  *size = 0;
  if (server_stream_push(c->stream, data, n) == SM_STREAM_DROPPED) {
    /* The call is over (an error, the cap): the rest is read and dropped
     * up to the drain's limit, then the answer goes. */
    c->drained += n;
    if (c->drained > DRAIN_MAX) return stream_step(c);
  }
  return MHD_YES;
}

static enum MHD_Result first_call(req_ctx *c, const char *url, const char *method) {
  sm_server *srv = c->srv;
  server_route_match_url(&c->m, url, method);
  const char *cl = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Content-Length");
  const char *te = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Transfer-Encoding");
  const char *ex = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Expect");
  int64_t n = 0;
  if (cl && sm_parse_int(cl, 0, INT64_MAX, &n, NULL) != 0) {
    c->has_body = 0;
    return decide(c, 400, "policy", "bad Content-Length");
  }
  c->declared = (uint64_t)n;
  c->has_body = n > 0 || (te != NULL && !cl);
  c->expect_continue = ex != NULL && strcasecmp(ex, "100-continue") == 0;
  if (srv->draining) return decide(c, 503, "sandbox", "the runner is stopping");
  if (c->m.route == R_NOT_FOUND) return decide(c, 404, "policy", "no such route");
  if (c->m.route == R_BAD_METHOD) return decide(c, 405, "policy", "method not allowed");
  if (c->m.route != R_HEALTHZ && c->m.route != R_PREVIEW) {
    const char *tok = bearer(c->conn);
    int worker_ok = c->m.route == R_EXECUTE || c->m.route == R_LEASES || c->m.route == R_HANDLE ||
                    c->m.route == R_FILES || c->m.route == R_MCP || c->m.route == R_APPROVALS ||
                    c->m.route == R_SANDBOXES || c->m.route == R_SANDBOX ||
                    c->m.route == R_CONTEXTS || c->m.route == R_TERMINALS || c->m.route == R_PORT ||
                    c->m.route == R_PREVIEWS;
    if (tok && server_is_control(srv, tok)) {
      c->auth = AUTH_CONTROL;
    } else if (tok && worker_ok && strlen(tok) == 64) {
      /* Possibly a worker token: it is checked against the worker key once
       * the body (or the handle) names one. */
      c->auth = AUTH_PENDING;
      c->token = strdup(tok);
      if (c->token == NULL) return decide(c, 503, "sandbox", "out of memory");
    } else {
      server_audit_token(srv, server_route_name(c->m.route), NULL, GENERIC_401);
      return decide(c, 401, "policy", GENERIC_401);
    }
  }
  if (c->m.route == R_FILES) return files_start(c, c->m.files_op);
  if (c->m.route == R_TERMINALS) {
    enum MHD_Result ret = terminals_start(c, url, method);
    if (c->state != ST_READING || c->term == NULL) return ret;
  }
  if (c->m.route == R_MCP) {
    c->mcp = server_mcp_req_new(srv, c->conn, method, c->id, c->auth == AUTH_CONTROL, c->token,
                                &c->answer);
    if (c->mcp == NULL) return decide_answer(c);
  }
  if (c->m.route == R_CONTEXTS) {
    c->contexts = server_context_req_new(srv, c->conn, url, method, c->id, c->auth == AUTH_CONTROL,
                                         c->token, &c->answer);
    if (c->contexts == NULL) return decide_answer(c);
  }
  if (c->m.route == R_PORT || c->m.route == R_PREVIEW) {
    c->port_req = server_port_req_new(srv, c->conn, c->m.sandbox_id, c->m.port, c->m.port_path, method,
                                      c->auth == AUTH_CONTROL, c->token);
    if (c->port_req == NULL) return decide(c, 503, "sandbox", "out of memory");
    if (c->m.route == R_PREVIEW) server_port_req_preview(c->port_req, c->m.preview_token);
  }
  if (c->m.route == R_PREVIEWS) server_preview_ask_read(c->conn, &c->preview_ask);
  if (c->m.route == R_EXECUTE) {
    const char *acc = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "Accept");
    c->accept_stream = acc && strstr(acc, "application/x-ndjson") != NULL;
  }
  if (c->declared > srv->opts.max_body) {
    char msg[128];
    snprintf(msg, sizeof msg, "request body larger than %zu bytes", srv->opts.max_body);
    return decide(c, 413, "policy", msg);
  }
  if (c->m.route == R_SANDBOXES || c->m.route == R_SANDBOX) {
    server_sandboxes_op op = c->m.route == R_SANDBOX       ? (server_sandboxes_op)c->m.sandbox_op
                             : strcmp(method, "POST") == 0 ? SM_SANDBOXES_CREATE
                                                           : SM_SANDBOXES_LIST;
    c->sbx =
        server_sandboxes_req_new(srv, c->conn, op, c->m.route == R_SANDBOX ? c->m.sandbox_id : NULL,
                                 c->auth == AUTH_CONTROL, c->token, &c->answer);
    if (c->sbx == NULL) return decide_answer(c);
  }
  return MHD_YES;
}

static enum MHD_Result body_complete(req_ctx *c) {
  switch (c->m.route) {
    case R_HEALTHZ:
      server_health_route(c->srv, &c->answer);
      return queue_answer(c);
    case R_EXECUTE:
      if (stream_open(c) != 0) return answer_error(c, 503, "sandbox", "out of memory");
      return dispatch_stream(c, job_execute, c, NULL);
    case R_FILES: {
      if (stream_open(c) != 0) return answer_error(c, 503, "sandbox", "out of memory");
      server_files_req *f = c->files;
      server_files_req_set_stream(f, c->stream);
      c->files = NULL; /* the job's once submitted */
      if (server_files_req_op(f) == SM_FILES_WATCH) return dispatch_watch(c, f);
      return dispatch_stream(c, server_files_job, f, files_discard);
    }
    case R_MCP: {
      if (stream_open(c) != 0) return answer_error(c, 503, "sandbox", "out of memory");
      server_mcp_req *m = c->mcp;
      if (server_mcp_req_body(m, c->body.data, c->body.len) != 0)
        return answer_error(c, 503, "sandbox", "out of memory");
      server_mcp_req_set_stream(m, c->stream);
      c->mcp = NULL;
      return dispatch_stream(c, server_mcp_job, m, mcp_discard);
    }
    case R_CONTEXTS: {
      if (stream_open(c) != 0) return answer_error(c, 503, "sandbox", "out of memory");
      context_req *x = c->contexts;
      if (server_context_req_body(x, c->body.data, c->body.len) != 0)
        return answer_error(c, 503, "sandbox", "out of memory");
      server_context_req_set_stream(x, c->stream);
      c->contexts = NULL;
      return dispatch_stream(c, server_context_job, x, contexts_discard);
    }
    case R_LEASES:
      server_lease_route(c->srv, c->body.data, c->body.len, c->auth == AUTH_CONTROL, c->token,
                         &c->answer);
      return queue_answer(c);
    case R_HANDLE:
      if (strcmp(c->method, "DELETE") == 0) return dispatch(c, job_handle_delete);
      server_handle_route_get(c->srv, c->m.handle_id, c->auth == AUTH_CONTROL, c->token,
                              &c->answer);
      return queue_answer(c);
    case R_SANDBOXES:
    case R_SANDBOX:
      return dispatch(c, job_sandboxes);
    case R_REAP:
      return dispatch(c, job_reap);
    case R_METRICS:
      return dispatch(c, job_metrics);
    case R_AUDIT:
      return dispatch(c, job_audit);
    case R_TERMINALS: {
      if (stream_open(c) != 0) return answer_error(c, 503, "sandbox", "out of memory");
      server_terminal_req *t = c->term;
      if (server_terminal_req_body(t, c->body.data ? c->body.data : "", c->body.len) != 0)
        return answer_error(c, 503, "sandbox", "out of memory");
      server_terminal_req_set_stream(t, c->stream);
      c->term = NULL;
      return dispatch_stream(c, server_terminal_job, t, term_discard);
    }
    case R_PREVIEWS:
      return dispatch(c, job_previews);
    case R_PORT:
    case R_PREVIEW: {
      if (stream_open(c) != 0) return answer_error(c, 503, "sandbox", "out of memory");
      server_port_req *pr = c->port_req;
      if (server_port_req_body(pr, c->body.data ? c->body.data : "", c->body.len) != 0)
        return answer_error(c, 503, "sandbox", "out of memory");
      server_port_req_set_stream(pr, c->stream);
      c->port_req = NULL;
      return dispatch_stream(c, server_port_job, pr, port_discard);
    }
    case R_APPROVALS:
      server_approvals_route(c->srv, c->method, c->m.handle_id[0] ? c->m.handle_id : NULL,
                             c->auth == AUTH_CONTROL, c->body.data, c->body.len, &c->answer);
      return queue_answer(c);
    default:
      return answer_error(c, 404, "policy", "no such route");
  }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  sm_server *srv = cls;
  req_ctx *c = *con_cls;
  if (c == NULL) {
    c = calloc(1, sizeof *c);
    if (c == NULL) return MHD_NO;
    c->srv = srv;
    c->conn = conn;
    c->t0 = sm_monotonic_ms();
    server_random_hex(c->id, 8);
    snprintf(c->method, sizeof c->method, "%s", method);
    common_buf_init(&c->body, srv->opts.max_body);
    *con_cls = c;
    pthread_mutex_lock(&srv->mu);
    srv->requests_open++;
    pthread_mutex_unlock(&srv->mu);
    sm_log_set_request_id(c->id);
    return first_call(c, url, method);
  }
  sm_log_set_request_id(c->id);
  if (c->state == ST_DONE) return queue_answer(c);
  if (c->state == ST_STREAM) {
    *upload_data_size = 0;
    return stream_step(c);
  }
  if (c->state == ST_UPLOAD) return upload_step(c, upload_data, upload_data_size);
  if (c->state == ST_ANSWERED || c->state == ST_RUNNING) {
    *upload_data_size = 0; /* answered at once (connection closes): drop the rest */
    return MHD_YES;
  }
  if (c->state == ST_DRAIN) {
    if (*upload_data_size == 0) return queue_answer(c);
    c->drained += *upload_data_size;
    *upload_data_size = 0;
    /* Past the drain's limits the answer goes at once (and the client,
     * still writing, may see the connection reset). */
    if (c->drained > DRAIN_MAX || sm_monotonic_ms() - c->t0 > DRAIN_TIMEOUT_MS)
      return queue_answer(c);
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    if (sm_monotonic_ms() - c->t0 > REQUEST_TIMEOUT_MS)
      return answer_error(c, 408, "policy", "the request body did not arrive in time");
    if (c->body.len + n > srv->opts.max_body) {
      char msg[128];
      snprintf(msg, sizeof msg, "request body larger than %zu bytes", srv->opts.max_body);
      c->drained = c->body.len + n;
      c->declared = 0;
      /* The client is sending already (a chunked body, or one whose length
       * was not given): read the rest and drop it, then answer 413, even
       * when it asked for 100 Continue, so it gets the answer and no reset. */
      c->expect_continue = 0;
      return decide(c, 413, "policy", msg);
    }
    if (!charge_body(srv, c, n)) {
      return decide(c, 503, "sandbox",
                    "the runner is overloaded: too many large requests at once");
    }
    if (common_buf_append(&c->body, upload_data, n) != 0) return MHD_NO;
    return MHD_YES;
  }
  return body_complete(c);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  sm_server *srv = cls;
  req_ctx *c = *con_cls;
  if (c == NULL) return;
  *con_cls = NULL;
  sm_log_set_request_id(c->id);
  double ms = sm_monotonic_ms() - c->t0;
  int early = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK;
  sm_log_event(c->status >= 500 ? SM_LOG_WARN : SM_LOG_INFO, "http.request",
               SM_LOG_FIELDS(SM_LOG_STR("method", c->method), SM_LOG_STR("route", server_route_name(c->m.route)),
                             SM_LOG_INT("status", c->status), SM_LOG_NUM("duration_ms", ms),
                             SM_LOG_BOOL("ended_early", early)),
               "%s %s -> %d in %.1f ms%s", c->method, server_route_name(c->m.route), c->status, ms,
               early ? " (connection ended early)" : "");
  sm_log_set_request_id(NULL);
  if (c->token) {
    OPENSSL_cleanse(c->token, strlen(c->token));
    free(c->token);
  }
  if (c->body.data) OPENSSL_cleanse(c->body.data, c->body.len);
  common_buf_dispose(&c->body);
  if (c->answer.body) json_object_put(c->answer.body);
  free(c->raw);
  if (c->stream) server_stream_detach(c->stream);
  server_files_req_free(c->files);
  server_mcp_req_free(c->mcp);
  server_sandboxes_req_free(c->sbx);
  server_context_req_free(c->contexts);
  server_terminal_req_free(c->term);
  server_port_req_free(c->port_req);
  server_ws_upgrade_done(c->upgrade);
  pthread_mutex_lock(&srv->mu);
  srv->body_bytes -= c->counted;
  srv->requests_open--;
  pthread_cond_broadcast(&srv->cv_idle);
  pthread_mutex_unlock(&srv->mu);
  free(c);
}

/* libmicrohttpd 0.9.75 learns that a socket is not TCP only from EINVAL,
 * ENOPROTOOPT or ENOTSOCK; a unix socket answers EOPNOTSUPP, so after every
 * answer it tries TCP_NODELAY and TCP_CORK again and says the data "could
 * not be pushed" (a delay of "200ms - 5 sec"). On a unix socket nothing is
 * held back: the answer is in the peer's buffer before these calls (see
 * docs/performance.md). Those three lines say nothing there. */
static int mhd_noise(const sm_server *srv, const char *fmt) {
  return strncmp(srv->address, "unix:", 5) == 0 &&
         (strncmp(fmt, "Setting %s option to %s state failed", 36) == 0 ||
          strncmp(fmt, "Failed to push the data from buffers", 36) == 0);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  if (mhd_noise(cls, fmt)) return;
  char line[512];
  vsnprintf(line, sizeof line, fmt, ap);
  size_t n = strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
  sm_log(SM_LOG_DEBUG, "http: %s", line);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
  server_gate_connection(cls, conn, socket_context, toe == MHD_CONNECTION_NOTIFY_STARTED);
}

int server_http_start(sm_server *srv, sm_error *err) {
  /* libmicrohttpd never accepts: the gate hands it complete heads. */
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
                   MHD_USE_ITC | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_UPGRADE;
  /* The logger first: libmicrohttpd prints what comes before it itself. */
  srv->mhd = MHD_start_daemon(
      flags, 0, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
      MHD_OPTION_THREAD_POOL_SIZE, srv->opts.io_threads, MHD_OPTION_CONNECTION_LIMIT,
      (srv->opts.max_connections + CONNECTION_SLACK) * srv->opts.io_threads,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY_LIMIT,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_NOTIFY_CONNECTION,
      on_connection, srv, MHD_OPTION_END);
  if (srv->mhd == NULL)
    return sm_error_set(err, SM_EIO, "libmicrohttpd could not start on %s", srv->address);
  return server_gate_start(srv, err);
}

void server_http_quiesce(sm_server *srv) { server_gate_stop(srv); }

void server_http_stop(sm_server *srv) {
  server_gate_stop(srv);
  if (srv->mhd) MHD_stop_daemon(srv->mhd);
  srv->mhd = NULL;
  server_gate_free(srv);
}
