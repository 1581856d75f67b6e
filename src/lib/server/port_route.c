/* The runner's ports route (port_route.h, docs/ports.md): one HTTP request
 * to a port on a keyed sandbox's own loopback, relayed through sandman's
 * agent as `sandman sandbox port` relays a connection (sandman/ports.h).
 *
 * The sandbox is named by its id and reached through execute's own checks
 * (server_call_prepare with "sandbox_id": the token against the worker key of
 * the X-Sandman-Worker-Key header, the tool policy for the tool "port", the
 * principal), so a worker token reaches only its own sandboxes and
 * another's is answered exactly as a missing one. Each request is one relay
 * call and one connection ("Connection: close"); its answer is read whole,
 * at most SERVER_PORT_ANSWER_MAX bytes, and passed on. */
#include "server/port_route.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sandman/audit.h>
#include <sandman/ports.h>
#include <sandman/util.h>

#include "common/buf.h"
#include "server/server_call.h"
#include "server/port_http.h"
#include "server/preview.h"
#include "server/sandbox_owner.h"

#define REQUEST_HEAD_MAX (64 * 1024)
#define ROUTE_TIMEOUT_MS 60000

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
  if (!server_port_http_header_passed(key) || (value && strpbrk(value, "\r\n"))) return MHD_YES;
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
  /* A preview's port is known once its token is looked up: its Host has none. */
  if (port)
    common_buf_printf(&r->out, " HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n", port);
  else common_buf_printf(&r->out, " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
  MHD_get_connection_values(conn, MHD_HEADER_KIND, add_header, r);
  return r;
}

void server_port_req_preview(server_port_req *r, const char *token) {
  r->preview = 1;
  snprintf(r->preview_token, sizeof r->preview_token, "%s", token);
}

int server_port_req_body(server_port_req *r, const char *body, size_t len) {
  if (common_buf_printf(&r->out, "Content-Length: %zu\r\n\r\n", len) != 0) return -1;
  return len ? common_buf_append(&r->out, body, len) : 0;
}

void server_port_req_set_stream(server_port_req *r, server_stream *s) {
  server_stream_ref(s);
  r->stream = s;
}

/* ---- the relay's call, on a thread of its own ---- */

typedef struct relay_call {
  server_call *k;
  sm_run_result res;
  int done[2];
  pthread_t thread;
} relay_call;

static void *relay_thread(void *arg) {
  relay_call *rc = arg;
  server_call_run(rc->k, &rc->res);
  char one = 1;
  ssize_t w = write(rc->done[1], &one, 1);
  (void)w;
  return NULL;
}

/* ---- the connection: its audit row and its bytes ---- */

typedef struct conn_state {
  server_port_req *r;
  server_call *k;
  int refused; /* the connect in the sandbox failed */
  common_buf in; /* the answer */
} conn_state;

static void on_event(void *ud, sm_port_event ev, unsigned port, int err_no,
                     unsigned long long bytes_in, unsigned long long bytes_out) {
  conn_state *cs = ud;
  (void)bytes_in, (void)bytes_out;
  if (ev == SM_PORT_CLOSED) return;
  if (ev == SM_PORT_REFUSED) cs->refused = err_no ? err_no : ECONNREFUSED;
  const sm_run_request *q = server_call_request(cs->k);
  sm_audit_event a = SM_AUDIT_EVENT_INIT;
  a.name = ev == SM_PORT_OPENED ? "port.opened" : "port.failed";
  a.message = ev == SM_PORT_OPENED ? "a connection to a sandbox's port was opened"
                                   : "a connection to a sandbox's port failed there";
  a.agent = q->agent;
  a.project = q->project;
  a.run_id = q->run_id;
  a.worker = cs->r->worker_key[0] ? cs->r->worker_key : NULL;
  a.tool = "port";
  a.sandbox = q->sandbox;
  a.mode = sm_mode_name(q->settings.mode);
  a.dst_port = (int)port;
  json_object *d = json_object_new_object();
  json_object_object_add(d, "via", json_object_new_string(cs->r->preview ? "preview" : "route"));
  json_object_object_add(d, "method", json_object_new_string(cs->r->method));
  json_object_object_add(d, "path", json_object_new_string(cs->r->path));
  if (err_no) json_object_object_add(d, "error", json_object_new_string(strerror(err_no)));
  a.detail = d;
  server_audit(cs->r->srv, &a);
  json_object_put(d);
}

/* Moves the request out and the answer in until the server closes its
 * end. 0, or an HTTP status for the failure (*why set). */
static int exchange(sm_port_relay *relay, relay_call *rc, conn_state *cs, const char **why) {
  server_port_req *r = cs->r;
  int sv[2] = {-1, -1};
  size_t off = 0;
  double deadline = sm_monotonic_ms() + ROUTE_TIMEOUT_MS;
  volatile int *cancel = server_stream_cancel_flag(r->stream);
  int status = 0;
  while (status == 0) {
    if (*cancel) status = 499, *why = "the client went away";
    else if (sm_monotonic_ms() > deadline) status = 504, *why = "the sandbox's server did not answer in time";
    if (status) break;
    struct pollfd ex[2] = {{rc->done[0], POLLIN, 0},
                           {sv[1], (short)(off < r->out.len ? POLLIN | POLLOUT : POLLIN), 0}};
    sm_error err = SM_ERROR_INIT;
    if (sm_port_relay_step(relay, ex, sv[1] >= 0 ? 2 : 1, 200, &err) != 0) {
      status = 502, *why = "the relay in the sandbox broke its protocol";
      break;
    }
    if (sv[1] < 0 && sm_port_relay_ready(relay)) {
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
          sm_port_relay_add(relay, sv[0], r->port, &err) != 0) {
        status = 503, *why = "the runner could not open a connection";
        break;
      }
      fcntl(sv[1], F_SETFL, O_NONBLOCK);
      continue;
    }
    if (sv[1] >= 0 && (ex[1].revents & POLLOUT) && off < r->out.len) {
      ssize_t n = send(sv[1], r->out.data + off, r->out.len - off, MSG_NOSIGNAL);
      if (n > 0) off += (size_t)n;
    }
    if (sv[1] >= 0 && (ex[1].revents & (POLLIN | POLLHUP))) {
      char buf[64 * 1024];
      ssize_t n = recv(sv[1], buf, sizeof buf, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
      if (n > 0 && common_buf_append(&cs->in, buf, (size_t)n) != 0)
        status = 502, *why = "the sandbox's answer is larger than the route passes on (16 MiB)";
    }
    if (ex[0].revents) status = 502, *why = "the sandbox's relay ended (the sandbox was stopped or removed)";
  }
  if (sv[1] >= 0) close(sv[1]);
  if (status == 0 && cs->refused) status = 502, *why = "nothing listens on that port in the sandbox";
  return status;
}

/* Relays r through k's call; the answer (or the error) into the stream. */
static void relay(server_port_req *r, server_call *k, server_answer *a) {
  sm_port_relay *relay = NULL;
  sm_error err = SM_ERROR_INIT;
  relay_call rc = {k, {0}, {-1, -1}, 0};
  conn_state cs = {r, k, 0, {0}};
  common_buf_init(&cs.in, SERVER_PORT_ANSWER_MAX + REQUEST_HEAD_MAX);
  if (sm_port_relay_new(&relay, &err) != 0 || pipe2(rc.done, O_CLOEXEC) != 0) {
    server_answer_error(a, 503, "sandbox", "out of memory");
  } else {
    sm_port_relay_on_event(relay, on_event, &cs);
    sm_run_request *q = server_call_request(k);
    sm_port_relay_request(relay, q);
    q->cancel = server_stream_cancel_flag(r->stream);
    if (pthread_create(&rc.thread, NULL, relay_thread, &rc) != 0) {
      server_answer_error(a, 503, "sandbox", "could not start the relay's thread");
    } else {
      const char *why = NULL;
      int st = exchange(relay, &rc, &cs, &why);
      sm_port_relay_end(relay);
      pthread_join(rc.thread, NULL);
      port_http_answer h;
      if (st == 0 && server_port_http_parse(cs.in.data ? cs.in.data : "", cs.in.len,
                                            strcmp(r->method, "HEAD") == 0, &h) != 0)
        st = 502, why = "the sandbox's server gave no HTTP/1.x answer";
      if (st != 0) {
        server_answer_error(a, st, "sandbox", "%s%s%s", why,
                            rc.res.error[0] && st == 502 ? ": " : "",
                            st == 502 ? rc.res.error : "");
      } else {
        if (server_stream_begin(r->stream, h.status, h.content_type[0] ? h.content_type : NULL,
                                (int64_t)h.body_len, h.location[0] ? "Location" : NULL, h.location,
                                NULL, NULL) == 0)
          server_stream_write(r->stream, h.body, h.body_len);
        server_port_http_answer_dispose(&h);
      }
      sm_run_result_dispose(&rc.res);
    }
  }
  if (rc.done[0] >= 0) close(rc.done[0]), close(rc.done[1]);
  common_buf_dispose(&cs.in);
  sm_port_relay_free(relay);
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
  } else {
    server_call *k = server_call_prepare(r->srv, &p, r->control, r->token, &a);
    if (k) {
      relay(r, k, &a);
      server_call_free(k);
    }
  }
  server_stream_finish(r->stream, 0, server_stream_begun(r->stream) ? NULL : &a);
  if (a.body) json_object_put(a.body);
  server_port_req_free(r);
}
