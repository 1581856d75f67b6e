/* The runner's ports route (port_route.h, docs/ports.md): one HTTP request
 * to a port on a keyed sandbox's own loopback, relayed through sandman's
 * agent as `sandman sandbox port` relays a connection (sandman/ports.h).
 *
 * The sandbox is named by its id and reached through execute's own checks
 * (server_call_prepare with "sandbox_id": the token against the worker key of
 * the X-Sandman-Worker-Key header, the tool policy for the tool "port", the
 * principal), so a worker token reaches only its own sandboxes and
 * another's is answered exactly as a missing one. Each request is one relay
 * call and one connection ("Connection: close"); the answer's head is read
 * (at most 64 KiB), then its body streams to the client through the
 * request's stream (bounded rings: memory does not grow with its size).
 * A WebSocket's upgrade answered 101 becomes a tunnel (port_tunnel.h). */
#include "server/port_route.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sandman/audit.h>
#include <sandman/log.h>
#include <sandman/ports.h>
#include <sandman/util.h>

#include "common/buf.h"
#include "server/server_call.h"
#include "server/port_http.h"
#include "server/port_tunnel.h"
#include "server/preview.h"
#include "server/sandbox_owner.h"

#define REQUEST_HEAD_MAX (64 * 1024)
#define ROUTE_TIMEOUT_MS 60000 /* for the answer's head, and between two pieces of its body */
#define RECV_CHUNK (64 * 1024)

struct server_port_req {
  sm_server *srv;
  char sandbox_id[SM_NAME_MAX];
  unsigned port;
  int control;
  char *token;
  char worker_key[SM_SERVER_KEY_MAX + 1];
  char method[16];
  char path[512];
  common_buf out; /* the request's bytes as they go to the sandbox */
  int upgrade; /* a WebSocket's handshake: passed on as one */
  const char *connection; /* the request's Connection header (while the head is built) */
  int preview; /* came to /preview/{token} */
  char preview_token[SERVER_PREVIEW_TOKEN_LEN + 1];
  server_stream *stream;
};

void server_port_req_free(server_port_req *r) {
  if (r == NULL) return;
  if (r->token) {
    memset(r->token, 0, strlen(r->token));
    free(r->token);
  }
  common_buf_dispose(&r->out);
  server_stream_unref(r->stream);
  free(r);
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value) {
  server_port_req *r = cls;
  (void)kind;
  if (!server_port_http_header_passed(key, r->connection) || (value && strpbrk(value, "\r\n")))
    return MHD_YES;
  common_buf_printf(&r->out, "%s: %s\r\n", key, value ? value : "");
  return MHD_YES;
}

/* Percent-encodes s onto b (the query as libmicrohttpd decoded it). */
static void encode(common_buf *b, const char *s) {
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
        strchr("-._~/", ch))
      common_buf_append(b, s, 1);
    else common_buf_printf(b, "%%%02X", ch);
  }
}

typedef struct query_walk {
  common_buf *b;
  int n;
} query_walk;

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value) {
  query_walk *w = cls;
  (void)kind;
  common_buf_append(w->b, w->n++ ? "&" : "?", 1);
  encode(w->b, key);
  if (value) {
    common_buf_append(w->b, "=", 1);
    encode(w->b, value);
  }
  return MHD_YES;
}

/* 1 when list (a header's value) has token among its comma-separated ones. */
static int has_token(const char *list, const char *token) {
  size_t tl = strlen(token);
  for (const char *p = list; p && *p;) {
    while (*p == ' ' || *p == '\t' || *p == ',') p++;
    size_t n = strcspn(p, ", \t");
    if (n == tl && strncasecmp(p, token, n) == 0) return 1;
    p += n;
  }
  return 0;
}

server_port_req *server_port_req_new(sm_server *srv, struct MHD_Connection *conn,
                                     const char *sandbox_id, unsigned port, const char *path,
                                     const char *method, int control, const char *token) {
  server_port_req *r = calloc(1, sizeof *r);
  if (r == NULL || (token && (r->token = strdup(token)) == NULL)) {
    free(r);
    return NULL;
  }
  r->srv = srv;
  r->port = port;
  r->control = control;
  snprintf(r->sandbox_id, sizeof r->sandbox_id, "%s", sandbox_id);
  snprintf(r->method, sizeof r->method, "%s", method);
  snprintf(r->path, sizeof r->path, "/%s", path);
  const char *wk = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Sandman-Worker-Key");
  if (wk && server_name_valid(wk, SM_SERVER_KEY_MAX))
    snprintf(r->worker_key, sizeof r->worker_key, "%s", wk);
  common_buf_init(&r->out, REQUEST_HEAD_MAX + srv->opts.max_body);
  common_buf_printf(&r->out, "%s ", method);
  encode(&r->out, r->path);
  query_walk w = {&r->out, 0};
  MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, add_arg, &w);
  r->connection = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Connection");
  const char *up = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Upgrade");
  r->upgrade = strcmp(method, "GET") == 0 && up && has_token(up, "websocket") &&
               has_token(r->connection, "upgrade");
  /* A preview's port is known once its token is looked up: its Host has none. */
  if (port) common_buf_printf(&r->out, " HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n", port);
  else common_buf_printf(&r->out, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  common_buf_printf(&r->out, "%s\r\n", r->upgrade ? "Connection: Upgrade\r\nUpgrade: websocket"
                                                   : "Connection: close");
  MHD_get_connection_values(conn, MHD_HEADER_KIND, add_header, r);
  r->connection = NULL;
  return r;
}

void server_port_req_preview(server_port_req *r, const char *token) {
  r->preview = 1;
  snprintf(r->preview_token, sizeof r->preview_token, "%s", token);
}

int server_port_req_body(server_port_req *r, const char *body, size_t len) {
  if (r->upgrade && len == 0) return common_buf_append(&r->out, "\r\n", 2);
  if (common_buf_printf(&r->out, "Content-Length: %zu\r\n\r\n", len) != 0) return -1;
  return len ? common_buf_append(&r->out, body, len) : 0;
}

void server_port_req_set_stream(server_port_req *r, server_stream *s) {
  server_stream_ref(s);
  r->stream = s;
}

/* ---- one relayed connection: the relay's call and its socket ---- */

/* Everything one relayed connection holds; on the heap, as a tunnel takes
 * it over from the call thread. */
typedef struct port_conn {
  server_port_req *r;
  server_call *k;
  sm_port_relay *relay;
  sm_run_result res;
  int done[2];        /* readable once the relay's call has returned */
  pthread_t thread;
  int started;
  int refused;        /* the connect in the sandbox failed */
  int sv[2];          /* sv[0] the relay's, sv[1] ours; -1 before the relay runs */
  size_t sent;        /* of r->out */
  common_buf in;      /* the answer's head and what came with it */
  port_http_head head;
  size_t head_len;
  server_port_tunnel *tunnel;
  int cfd;            /* a tunnel's client socket */
  void *urh;          /* and its libmicrohttpd handle */
  char *extra;        /* what the client sent after its head */
  size_t extra_len;
} port_conn;

static void *relay_thread(void *arg) {
  port_conn *pc = arg;
  server_call_run(pc->k, &pc->res);
  char one = 1;
  ssize_t w = write(pc->done[1], &one, 1);
  (void)w;
  return NULL;
}

static void on_event(void *ud, sm_port_event ev, unsigned port, int err_no,
                     unsigned long long bytes_in, unsigned long long bytes_out) {
  port_conn *pc = ud;
  (void)bytes_in, (void)bytes_out;
  if (ev == SM_PORT_CLOSED) return;
  if (ev == SM_PORT_REFUSED) pc->refused = err_no ? err_no : ECONNREFUSED;
  const sm_run_request *q = server_call_request(pc->k);
  sm_audit_event a = SM_AUDIT_EVENT_INIT;
  a.name = ev == SM_PORT_OPENED ? "port.opened" : "port.failed";
  a.message = ev == SM_PORT_OPENED ? "a connection to a sandbox's port was opened"
                                   : "a connection to a sandbox's port failed there";
  a.agent = q->agent;
  a.project = q->project;
  a.run_id = q->run_id;
  a.worker = pc->r->worker_key[0] ? pc->r->worker_key : NULL;
  a.tool = "port";
  a.sandbox = q->sandbox;
  a.mode = sm_mode_name(q->settings.mode);
  a.dst_port = (int)port;
  json_object *d = json_object_new_object();
  json_object_object_add(d, "via", json_object_new_string(pc->r->preview ? "preview" : "route"));
  json_object_object_add(d, "method", json_object_new_string(pc->r->method));
  json_object_object_add(d, "path", json_object_new_string(pc->r->path));
  if (pc->r->upgrade) json_object_object_add(d, "websocket", json_object_new_boolean(1));
  if (err_no) json_object_object_add(d, "error", json_object_new_string(strerror(err_no)));
  a.detail = d;
  server_audit(pc->r->srv, &a);
  json_object_put(d);
}

/* Starts the relay's call. 0, or an HTTP status (*why set). */
static int conn_start(port_conn *pc, const char **why) {
  sm_error err = SM_ERROR_INIT;
  if (sm_port_relay_new(&pc->relay, &err) != 0 || pipe2(pc->done, O_CLOEXEC) != 0)
    return *why = "out of memory", 503;
  sm_port_relay_on_event(pc->relay, on_event, pc);
  sm_run_request *q = server_call_request(pc->k);
  sm_port_relay_request(pc->relay, q);
  q->cancel = server_stream_cancel_flag(pc->r->stream);
  if (pthread_create(&pc->thread, NULL, relay_thread, pc) != 0)
    return *why = "could not start the relay's thread", 503;
  pc->started = 1;
  return 0;
}

/* Ends the relay's call and frees what the connection holds but r and k. */
static void conn_stop(port_conn *pc) {
  if (pc->sv[1] >= 0) close(pc->sv[1]);
  pc->sv[1] = -1;
  if (pc->started) {
    sm_port_relay_end(pc->relay);
    pthread_join(pc->thread, NULL);
  }
  pc->started = 0;
  sm_run_result_dispose(&pc->res);
  if (pc->done[0] >= 0) close(pc->done[0]), close(pc->done[1]);
  pc->done[0] = pc->done[1] = -1;
  common_buf_dispose(&pc->in);
  sm_port_relay_free(pc->relay);
  pc->relay = NULL;
  free(pc->extra);
  pc->extra = NULL;
}

/* One round of the relay; once it runs, the connection is opened. *rev:
 * what the connection's socket is ready for. 0, or an HTTP status. */
static int conn_step(port_conn *pc, short events, short *rev, const char **why) {
  *rev = 0;
  if (*server_stream_cancel_flag(pc->r->stream)) return *why = "the client went away", 499;
  struct pollfd ex[2] = {{pc->done[0], POLLIN, 0}, {pc->sv[1], events, 0}};
  sm_error err = SM_ERROR_INIT;
  if (sm_port_relay_step(pc->relay, ex, pc->sv[1] >= 0 ? 2 : 1, 200, &err) != 0)
    return *why = "the relay in the sandbox broke its protocol", 502;
  if (pc->sv[1] < 0 && sm_port_relay_ready(pc->relay)) {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pc->sv) != 0) {
      pc->sv[0] = pc->sv[1] = -1;
      return *why = "the runner could not open a connection", 503;
    }
    if (sm_port_relay_add(pc->relay, pc->sv[0], pc->r->port, &err) != 0) {
      close(pc->sv[1]);
      pc->sv[1] = -1;
      return *why = "the runner could not open a connection", 503;
    }
    fcntl(pc->sv[1], F_SETFL, O_NONBLOCK);
    return 0;
  }
  if (pc->sv[1] >= 0) *rev = ex[1].revents;
  if (ex[0].revents && !(*rev & POLLIN))
    return *why = "the sandbox's relay ended (the sandbox was stopped or removed)", 502;
  return 0;
}

/* The request goes out and the answer's head comes in (1xx answers but a
 * WebSocket's 101 skipped). 0 with pc->head, or an HTTP status. */
static int read_head(port_conn *pc, const char **why) {
  server_port_req *r = pc->r;
  double deadline = sm_monotonic_ms() + ROUTE_TIMEOUT_MS;
  common_buf_init(&pc->in, PORT_HTTP_HEAD_MAX + RECV_CHUNK);
  for (;;) {
    if (sm_monotonic_ms() > deadline) return *why = "the sandbox's server did not answer in time", 504;
    short rev = 0;
    int st = conn_step(pc, (short)(POLLIN | (pc->sent < r->out.len ? POLLOUT : 0)), &rev, why);
    if (st) return st;
    if ((rev & POLLOUT) && pc->sent < r->out.len) {
      ssize_t n = send(pc->sv[1], r->out.data + pc->sent, r->out.len - pc->sent, MSG_NOSIGNAL);
      if (n > 0) pc->sent += (size_t)n;
    }
    if (!(rev & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[16 * 1024];
    ssize_t n = recv(pc->sv[1], buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      return *why = pc->refused ? "nothing listens on that port in the sandbox"
                                : "the sandbox's server gave no HTTP/1.x answer", 502;
    }
    common_buf_append(&pc->in, buf, (size_t)n);
    long h;
    while ((h = server_port_http_head_end(pc->in.data, pc->in.len)) > 0) {
      if (server_port_http_head_parse(pc->in.data, (size_t)h, strcmp(r->method, "HEAD") == 0,
                                      &pc->head) != 0)
        return *why = "the sandbox's server gave no HTTP/1.x answer", 502;
      if (pc->head.status >= 200 || (pc->head.status == 101 && r->upgrade)) {
        pc->head_len = (size_t)h;
        return 0;
      }
      if (pc->head.status == 101) return *why = "the sandbox's server switched protocols unasked", 502;
      memmove(pc->in.data, pc->in.data + h, pc->in.len - (size_t)h); /* an interim answer */
      pc->in.len -= (size_t)h;
    }
    if (h < 0) return *why = "the sandbox's server sent a head over 64 KiB", 502;
  }
}

/* ---- the answer's body, streamed ---- */

typedef struct body_out {
  server_stream *s;
  port_http_body mode;
  uint64_t left; /* PORT_BODY_LENGTH's */
  port_http_dechunk dc;
  int complete;
} body_out;

static int emit(void *ud, const char *data, size_t len) {
  return server_stream_write(((body_out *)ud)->s, data, len);
}

/* Passes data on as the body's mode says. 0, or -1 (the client is gone, or
 * the coding is broken). */
static int deliver(body_out *o, const char *data, size_t len) {
  if (o->complete || len == 0) return 0;
  if (o->mode == PORT_BODY_CHUNKED) {
    size_t used = 0;
    int rc = server_port_http_dechunk(&o->dc, data, len, &used, emit, o);
    if (rc == 1) o->complete = 1;
    return rc < 0 ? -1 : 0;
  }
  if (o->mode == PORT_BODY_LENGTH && len > o->left) len = (size_t)o->left;
  if (server_stream_write(o->s, data, len) != 0) return -1;
  if (o->mode == PORT_BODY_LENGTH && (o->left -= len) == 0) o->complete = 1;
  return 0;
}

static void pass_header(void *ud, const char *name, const char *value) {
  server_stream_add_header(ud, name, value);
}

/* Begins the client's answer with the head's status and headers, then
 * streams the body as it comes. 0 when it came whole, -1 when it was cut
 * (the client then sees a short answer, never a complete-looking one). */
static int stream_body(port_conn *pc) {
  server_stream *s = pc->r->stream;
  body_out o = {s, pc->head.body, pc->head.length, {0}, pc->head.body == PORT_BODY_NONE};
  server_port_http_answer_headers(pc->in.data, pc->head_len, pass_header, s);
  int64_t len = o.mode == PORT_BODY_NONE ? 0 : o.mode == PORT_BODY_LENGTH ? (int64_t)o.left : -1;
  if (o.mode == PORT_BODY_LENGTH && o.left == 0) o.complete = 1;
  if (server_stream_begin(s, pc->head.status, NULL, len, NULL, NULL, NULL, NULL) != 0) return -1;
  if (deliver(&o, pc->in.data + pc->head_len, pc->in.len - pc->head_len) != 0) return -1;
  common_buf_dispose(&pc->in);
  char *buf = malloc(RECV_CHUNK);
  double last = sm_monotonic_ms();
  int rc = buf ? 0 : -1;
  while (rc == 0 && !o.complete) {
    const char *why = NULL;
    short rev = 0;
    if (sm_monotonic_ms() - last > ROUTE_TIMEOUT_MS || conn_step(pc, POLLIN, &rev, &why) != 0) {
      rc = -1;
      break;
    }
    if (!(rev & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t n = recv(pc->sv[1], buf, RECV_CHUNK, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      rc = o.mode == PORT_BODY_CLOSE && n == 0 ? 0 : -1;
      break;
    }
    last = sm_monotonic_ms();
    rc = deliver(&o, buf, (size_t)n);
  }
  free(buf);
  return rc;
}

/* ---- a WebSocket: the tunnel ---- */

static void job_end(port_conn *pc);

static void *tunnel_main(void *arg) {
  port_conn *pc = arg;
  server_port_req *r = pc->r;
  const char *to_client = pc->in.data + pc->head_len;
  server_tunnel_end e = server_port_tunnel_pump(
      pc->tunnel, pc->relay, pc->done[0], pc->cfd, pc->sv[1], to_client, pc->in.len - pc->head_len,
      pc->extra, pc->extra_len, r->srv->previews, r->preview ? r->preview_token : NULL);
  sm_log(SM_LOG_INFO, "port %u of sandbox %s: a WebSocket's tunnel is over (%s)", r->port,
         r->sandbox_id, server_port_tunnel_end_name(e));
  server_stream_release_socket(pc->urh);
  server_port_tunnel *t = pc->tunnel;
  server_port_tunnels *tt = r->srv->port_tunnels;
  pc->tunnel = NULL;
  server_stream_finish(r->stream, 0, NULL);
  job_end(pc);
  server_port_tunnels_release(tt, t);
  return NULL;
}

/* The server answered the upgrade with its 101: the client gets it (with
 * the server's headers), then its socket is joined to the connection on a
 * thread of its own. 0 once the tunnel runs (it owns pc), -1 when the
 * client went away first. */
static int start_tunnel(port_conn *pc) {
  server_stream *s = pc->r->stream;
  server_port_http_answer_headers(pc->in.data, pc->head_len, pass_header, s);
  if (pc->in.len - pc->head_len > SERVER_PORT_TUNNEL_BUF) return -1;
  if (server_stream_begin_upgrade(s) != 0 ||
      server_stream_take_socket(s, &pc->cfd, &pc->urh, &pc->extra, &pc->extra_len) != 0)
    return -1;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int e = pc->extra_len > SERVER_PORT_TUNNEL_BUF ? -1 : pthread_create(&t, &attr, tunnel_main, pc);
  pthread_attr_destroy(&attr);
  if (e != 0) {
    server_stream_release_socket(pc->urh);
    return -1;
  }
  return 0;
}

typedef enum { RELAY_FAILED = 0, RELAY_ANSWERED, RELAY_TUNNEL } relay_result;

/* Relays r's request through pc's call: the answer streamed (and the
 * stream finished), a tunnel started (it owns pc), or a failure: *status
 * and *why for the JSON answer. */
static relay_result relay(port_conn *pc, int *status, const char **why) {
  *status = conn_start(pc, why);
  if (*status == 0) *status = read_head(pc, why);
  if (*status != 0) return RELAY_FAILED;
  if (pc->head.status == 101) {
    if (start_tunnel(pc) == 0) return RELAY_TUNNEL;
    server_stream_finish(pc->r->stream, 1, NULL);
    return RELAY_ANSWERED;
  }
  server_stream_finish(pc->r->stream, stream_body(pc) != 0, NULL);
  return RELAY_ANSWERED;
}

/* A preview's token to its sandbox and port, the sandbox checked as it is
 * now: the same container (not one made again under its name), keyed and
 * running (not frozen, stopped or hibernated, by the runner or by anyone
 * else). A preview that fails the check is dropped. 0, or -1 with *a the
 * answer of an unknown token. */
static int preview_target(server_port_req *r, server_answer *a) {
  server_preview p;
  int ok = r->preview_token[0] &&
           server_previews_find(r->srv->previews, r->preview_token, sm_monotonic_ms(), &p) == 0;
  if (ok) {
    sm_ops_sandbox sb;
    sm_error err = SM_ERROR_INIT;
    ok = server_sandbox_find(r->srv, p.container_id, p.worker_key[0] ? p.worker_key : NULL, 1,
                             &sb, &err) == 0 &&
         strcmp(sb.id, p.container_id) == 0 && strcmp(sb.rest, "running") == 0 &&
         strcmp(sb.state, "running") == 0;
    if (!ok) server_previews_revoke(r->srv->previews, p.container_id);
  }
  if (!ok) {
    server_answer_error(a, 404, "policy", "no such preview");
    return -1;
  }
  snprintf(r->sandbox_id, sizeof r->sandbox_id, "%s", p.container_id);
  snprintf(r->worker_key, sizeof r->worker_key, "%s", p.worker_key);
  r->port = p.port;
  r->control = 1; /* the preview's token stood for its owner's */
  return 0;
}

/* The end of a connection: its relay's call, then r and k (the stream's
 * answer is finished by then). */
static void job_end(port_conn *pc) {
  conn_stop(pc);
  server_call_free(pc->k);
  server_port_req_free(pc->r);
  free(pc);
}

/* A WebSocket's slot in the table, taken before its call starts. 0, or -1
 * with the 429 in a. */
static int reserve_tunnel(port_conn *pc, server_answer *a) {
  server_port_req *r = pc->r;
  if (server_port_tunnels_reserve(r->srv->port_tunnels, pc->k->sandbox_id,
                                  r->preview ? r->preview_token : NULL, &pc->tunnel) == 0)
    return 0;
  server_answer_error(a, 429, "policy",
                      "too many WebSocket connections (%d to a sandbox, %d in all)",
                      SERVER_PORT_TUNNELS_PER_SANDBOX, SERVER_PORT_TUNNELS_MAX);
  return -1;
}

/* The relay's call for r (execute's checks), its connection, its answer. */
static void job_relay(server_port_req *r, server_execute_params *p, server_answer *a) {
  port_conn *pc = calloc(1, sizeof *pc);
  server_call *k = NULL;
  if (pc == NULL) {
    server_execute_params_dispose(p);
    server_answer_error(a, 503, "sandbox", "out of memory");
  } else {
    k = server_call_prepare(r->srv, p, r->control, r->token, a);
  }
  if (k == NULL) {
    free(pc);
    server_stream_finish(r->stream, 0, a);
    server_port_req_free(r);
    return;
  }
  pc->r = r;
  pc->k = k;
  pc->done[0] = pc->done[1] = pc->sv[0] = pc->sv[1] = pc->cfd = -1;
  int status = 0;
  const char *why = NULL;
  relay_result rr = RELAY_FAILED;
  if (!r->upgrade || reserve_tunnel(pc, a) == 0) rr = relay(pc, &status, &why);
  if (rr == RELAY_TUNNEL) return; /* the tunnel's thread ends it */
  server_port_tunnels_release(r->srv->port_tunnels, pc->tunnel);
  pc->tunnel = NULL;
  if (rr == RELAY_FAILED && status) {
    conn_stop(pc); /* the call's error is known once it has returned */
    int with = status == 502 && pc->res.error[0];
    server_answer_error(a, status, "sandbox", "%s%s%s", why, with ? ": " : "",
                        with ? pc->res.error : "");
  }
  if (rr == RELAY_FAILED) server_stream_finish(r->stream, 0, a);
  job_end(pc);
}

void server_port_job(void *arg) {
  server_port_req *r = arg;
  server_answer a = {0, NULL};
  if (r->preview && preview_target(r, &a) != 0) {
    server_stream_finish(r->stream, 0, &a);
    if (a.body) json_object_put(a.body);
    server_port_req_free(r);
    return;
  }
  server_execute_params p;
  memset(&p, 0, sizeof p);
  p.sandbox_id = strdup(r->sandbox_id);
  p.tool = strdup("port");
  p.worker_key = r->worker_key[0] ? strdup(r->worker_key) : NULL;
  p.argv = calloc(3, sizeof *p.argv);
  if (p.argv) p.argv[0] = strdup("sandman-agent"), p.argv[1] = strdup("ports"), p.argc = 2;
  if (!p.sandbox_id || !p.tool || (r->worker_key[0] && !p.worker_key) || !p.argv ||
      !p.argv[0] || !p.argv[1]) {
    server_execute_params_dispose(&p);
    server_answer_error(&a, 503, "sandbox", "out of memory");
    server_stream_finish(r->stream, 0, &a);
    server_port_req_free(r);
  } else {
    job_relay(r, &p, &a);
  }
  if (a.body) json_object_put(a.body);
}
