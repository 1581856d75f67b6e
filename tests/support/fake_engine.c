/* The fake engine's server (fake_engine.h): the socket, a thread per
 * connection, HTTP/1.1 requests (Content-Length and chunked bodies,
 * keep-alive), the request log and the injected faults. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "support/fake_engine_internal.h"
#include "support/files.h"
#include "support/sock.h"
#include "support/xalloc.h"

#define HEAD_MAX 65536

void fe_new_id(fake_engine *fe, char out[FE_ID_LEN + 1]) {
  unsigned long n = ++fe->next_id;
  snprintf(out, FE_ID_LEN + 1, "fe%08lx%054lx", (unsigned long)getpid() & 0xffffffffUL, n);
}

void fe_reply_json(fe_reply *r, int status, json_object *obj) {
  r->status = status;
  const char *s = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
  r->len = strlen(s);
  r->body = xstrdup(s);
  json_object_put(obj);
}

void fe_reply_error(fe_reply *r, int status, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "message", json_object_new_string(msg));
  fe_reply_json(r, status, o);
}

/* ---- reading a request ---- */

/* Fills c->buf with more bytes; 0 at the end of the connection. */
static ssize_t conn_fill(fe_conn *c) {
  if (c->off > 0) {
    memmove(c->buf, c->buf + c->off, c->len - c->off);
    c->len -= c->off;
    c->off = 0;
  }
  if (c->len == sizeof c->buf) return -1;
  for (;;) {
    ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) c->len += (size_t)n;
    return n;
  }
}

/* One line (CRLF or LF) into out, without its end; -1 at the end. */
static int conn_line(fe_conn *c, char *out, size_t cap) {
  for (;;) {
    char *nl = memchr(c->buf + c->off, '\n', c->len - c->off);
    if (nl) {
      size_t n = (size_t)(nl - (c->buf + c->off));
      size_t keep = n > 0 && nl[-1] == '\r' ? n - 1 : n;
      if (keep >= cap) return -1;
      memcpy(out, c->buf + c->off, keep);
      out[keep] = '\0';
      c->off += n + 1;
      return 0;
    }
    if (conn_fill(c) <= 0) return -1;
  }
}

static int conn_bytes(fe_conn *c, char *out, size_t n) {
  while (n > 0) {
    if (c->off == c->len && conn_fill(c) <= 0) return -1;
    size_t take = c->len - c->off < n ? c->len - c->off : n;
    memcpy(out, c->buf + c->off, take);
    c->off += take;
    out += take;
    n -= take;
  }
  return 0;
}

static int body_grow(fe_request *req, size_t more) {
  if (req->body_len + more + 1 > FE_BODY_MAX) return -1;
  char *b = realloc(req->body, req->body_len + more + 1);
  if (b == NULL) return -1;
  req->body = b;
  return 0;
}

static int read_chunked(fe_conn *c, fe_request *req) {
  char line[128];
  for (;;) {
    if (conn_line(c, line, sizeof line) != 0) return -1;
    size_t n = strtoul(line, NULL, 16);
    if (n == 0) break;
    if (body_grow(req, n) != 0 || conn_bytes(c, req->body + req->body_len, n) != 0) return -1;
    req->body_len += n;
    if (conn_line(c, line, sizeof line) != 0) return -1;
  }
  do {
    if (conn_line(c, line, sizeof line) != 0) return -1;
  } while (line[0] != '\0'); /* trailers */
  return 0;
}

static void percent_decode(char *s) {
  char *o = s;
  for (char *p = s; *p; p++) {
    unsigned v;
    if (p[0] == '%' && p[1] && p[2] && sscanf(p + 1, "%2x", &v) == 1) {
      *o++ = (char)v;
      p += 2;
    } else {
      *o++ = *p;
    }
  }
  *o = '\0';
}

/* "/v1.41/containers/json?all=1": the path without the version, decoded. */
static void split_target(const char *target, fe_request *req) {
  const char *q = strchr(target, '?');
  size_t plen = q ? (size_t)(q - target) : strlen(target);
  snprintf(req->query, sizeof req->query, "%s", q ? q + 1 : "");
  const char *p = target;
  if (strncmp(p, "/v1.", 4) == 0) {
    const char *s = strchr(p + 1, '/');
    if (s && s < target + plen) {
      plen -= (size_t)(s - p);
      p = s;
    }
  }
  snprintf(req->path, sizeof req->path, "%.*s", (int)plen, p);
  percent_decode(req->path);
}

/* Reads one request: 1, 0 at the end of the connection, -1 malformed. */
static int read_request(fe_conn *c, fe_request *req) {
  char line[HEAD_MAX], target[FE_PATH_MAX];
  memset(req, 0, sizeof *req);
  if (conn_line(c, line, sizeof line) != 0) return 0;
  if (sscanf(line, "%15s %4095s", req->method, target) != 2) return -1;
  split_target(target, req);
  long long clen = 0;
  int chunked = 0, expect = 0;
  for (;;) {
    if (conn_line(c, line, sizeof line) != 0) return -1;
    if (line[0] == '\0') break;
    if (strncasecmp(line, "Content-Length:", 15) == 0) clen = strtoll(line + 15, NULL, 10);
    if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 && strstr(line + 18, "chunked"))
      chunked = 1;
    if (strncasecmp(line, "Expect:", 7) == 0 && strstr(line + 7, "100")) expect = 1;
  }
  if (expect && ts_send_all(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25) != 0) return -1;
  if (chunked) {
    if (read_chunked(c, req) != 0 || body_grow(req, 0) != 0) return -1;
  } else {
    if (clen < 0 || (size_t)clen >= FE_BODY_MAX || body_grow(req, (size_t)clen) != 0) return -1;
    if (clen > 0 && conn_bytes(c, req->body, (size_t)clen) != 0) return -1;
    req->body_len = (size_t)clen;
  }
  req->body[req->body_len] = '\0'; /* the JSON parser reads up to a NUL */
  return 1;
}

/* ---- answering ---- */

static const char *reason(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 201:
    return "Created";
  case 204:
    return "No Content";
  case 304:
    return "Not Modified";
  case 400:
    return "Bad Request";
  case 404:
    return "Not Found";
  case 409:
    return "Conflict";
  default:
    return status >= 500 ? "Server Error" : "Status";
  }
}

static int send_reply(fe_conn *c, const fe_request *req, const fe_reply *r) {
  char head[4096];
  int head_only = strcmp(req->method, "HEAD") == 0 || r->status == 204 || r->status == 304;
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\nApi-Version: " FE_API "\r\nServer: sandman-fake-engine\r\n"
                   "Content-Type: %s\r\n%sContent-Length: %zu\r\n\r\n",
                   r->status, reason(r->status), r->type ? r->type : "application/json", r->headers,
                   head_only ? (size_t)0 : r->len);
  if (ts_send_all(c->fd, head, (size_t)n) != 0) return -1;
  if (!head_only && r->len > 0 && ts_send_all(c->fd, r->body, r->len) != 0) return -1;
  return 0;
}

static void log_request(fake_engine *fe, const fe_request *req) {
  size_t n = strlen(req->method) + strlen(req->path) + strlen(req->query) + 3;
  char *line = malloc(n);
  if (line == NULL) return;
  snprintf(line, n, "%s %s%s%s", req->method, req->path, req->query[0] ? "?" : "", req->query);
  pthread_mutex_lock(&fe->mu);
  if (fe->n_log == fe->cap_log) {
    size_t cap = fe->cap_log ? fe->cap_log * 2 : 64;
    char **bigger = realloc(fe->log, cap * sizeof *bigger);
    if (bigger == NULL) {
      pthread_mutex_unlock(&fe->mu);
      free(line);
      return;
    }
    fe->log = bigger;
    fe->cap_log = cap;
  }
  fe->log[fe->n_log++] = line;
  pthread_mutex_unlock(&fe->mu);
}

/* An injected fault for this request: 1 and r filled. */
static int take_fault(fake_engine *fe, const fe_request *req, fe_reply *r) {
  int hit = 0;
  pthread_mutex_lock(&fe->mu);
  for (fe_fault *f = fe->faults; f && !hit; f = f->next) {
    if (f->times <= 0 || (f->method[0] && strcmp(f->method, req->method) != 0) ||
        !strstr(req->path, f->part))
      continue;
    if (f->skip > 0) {
      f->skip--;
      continue;
    }
    f->times--;
    fe_reply_error(r, f->status, "%s", f->message);
    hit = 1;
  }
  pthread_mutex_unlock(&fe->mu);
  return hit;
}

void fe_route(fake_engine *fe, fe_conn *c, const fe_request *req, fe_reply *r) {
  log_request(fe, req);
  if (take_fault(fe, req, r)) return;
  if (strcmp(req->path, "/_ping") == 0) {
    r->status = 200;
    r->body = xstrdup("OK");
    r->len = 2;
    return;
  }
  fe_route_api(fe, c, req, r);
}

static void *serve(void *p) {
  fe_conn *c = p;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  for (;;) {
    fe_request req;
    int rc = read_request(c, &req);
    if (rc <= 0) {
      if (rc < 0) {
        fe_reply bad = {0};
        fe_reply_error(&bad, 400, "malformed request");
        send_reply(c, &req, &bad);
        free(bad.body);
      }
      free(req.body);
      break;
    }
    fe_reply r = {0};
    fe_route(c->fe, c, &req, &r);
    int sent = r.hijacked ? -1 : send_reply(c, &req, &r);
    free(r.body);
    free(req.body);
    if (sent != 0) break;
  }
  pthread_mutex_lock(&c->fe->mu);
  close(c->fd);
  c->fd = -1;
  pthread_mutex_unlock(&c->fe->mu);
  return NULL;
}

static void *accept_loop(void *p) {
  fake_engine *fe = p;
  for (;;) {
    struct pollfd pf[2] = {{fe->lfd, POLLIN, 0}, {fe->wake[0], POLLIN, 0}};
    if (poll(pf, 2, -1) < 0 && errno != EINTR) break;
    if (pf[1].revents) break;
    if (!(pf[0].revents & POLLIN)) continue;
    int fd = accept4(fe->lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    fe_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
      close(fd);
      continue;
    }
    c->fe = fe;
    c->fd = fd;
    pthread_mutex_lock(&fe->mu);
    if (pthread_create(&c->thread, NULL, serve, c) != 0) {
      pthread_mutex_unlock(&fe->mu);
      close(fd);
      free(c);
      continue;
    }
    c->next = fe->conns;
    fe->conns = c;
    pthread_mutex_unlock(&fe->mu);
  }
  return NULL;
}

/* ---- life ---- */

static int listen_on(fake_engine *fe) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(fe->sock, sizeof fe->sock, "%s/engine.sock", fe->dir);
  if (strlen(fe->sock) >= sizeof sa.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", fe->sock);
  snprintf(fe->host, sizeof fe->host, "unix://%s", fe->sock);
  fe->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fe->lfd < 0) return -1;
  if (bind(fe->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fe->lfd, 64) != 0) return -1;
  return 0;
}

fake_engine *fake_engine_start(void) {
  fake_engine *fe = calloc(1, sizeof *fe);
  if (fe == NULL) return NULL;
  fe->lfd = fe->wake[0] = fe->wake[1] = -1;
  pthread_mutex_init(&fe->mu, NULL);
  pthread_cond_init(&fe->cv, NULL);
  if (tf_temp_dir(fe->dir, sizeof fe->dir, "sandman-fake-engine") != 0 || listen_on(fe) != 0 ||
      pipe2(fe->wake, O_CLOEXEC) != 0 ||
      pthread_create(&fe->accept_thread, NULL, accept_loop, fe) != 0) {
    int saved = errno;
    if (fe->lfd >= 0) close(fe->lfd);
    if (fe->dir[0]) tf_rm_rf(fe->dir);
    free(fe);
    errno = saved;
    return NULL;
  }
  return fe;
}

static void free_state(fake_engine *fe) {
  while (fe->containers) {
    fe_container *c = fe->containers;
    fe->containers = c->next;
    json_object_put(c->config);
    free(c);
  }
  while (fe->execs) {
    fe_exec *x = fe->execs;
    fe->execs = x->next;
    json_object_put(x->config);
    free(x);
  }
  while (fe->volumes) {
    fe_volume *v = fe->volumes;
    fe->volumes = v->next;
    json_object_put(v->labels);
    free(v);
  }
  while (fe->images) {
    fe_image *i = fe->images;
    fe->images = i->next;
    free(i);
  }
  fe_fault *lists[] = {fe->faults, fe->exec_faults};
  for (size_t i = 0; i < 2; i++)
    while (lists[i]) {
      fe_fault *f = lists[i];
      lists[i] = f->next;
      free(f);
    }
  for (size_t i = 0; i < fe->n_log; i++) free(fe->log[i]);
  free(fe->log);
}

void fake_engine_stop(fake_engine *fe) {
  if (fe == NULL) return;
  pthread_mutex_lock(&fe->mu);
  fe->stopping = 1;
  for (fe_container *c = fe->containers; c; c = c->next) fe_container_kill(fe, c, 137);
  for (fe_conn *c = fe->conns; c; c = c->next)
    if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
  pthread_cond_broadcast(&fe->cv);
  pthread_mutex_unlock(&fe->mu);
  if (write(fe->wake[1], "x", 1) != 1) perror("fake engine: waking the accept loop");
  pthread_join(fe->accept_thread, NULL);
  /* No thread adds connections now. */
  while (fe->conns) {
    fe_conn *c = fe->conns;
    pthread_join(c->thread, NULL);
    fe->conns = c->next;
    free(c);
  }
  close(fe->lfd);
  close(fe->wake[0]);
  close(fe->wake[1]);
  for (fe_container *c = fe->containers; c; c = c->next) fe_fs_remove(c);
  tf_rm_rf(fe->dir);
  free_state(fe);
  pthread_cond_destroy(&fe->cv);
  pthread_mutex_destroy(&fe->mu);
  free(fe);
}

const char *fake_engine_host(const fake_engine *fe) { return fe->host; }

sm_runner *fake_engine_runner(fake_engine *fe, const char *state_dir, const char *instance) {
  sm_runner_options o = SM_RUNNER_OPTIONS_INIT;
  o.engine.host = fe->host;
  o.state_dir = state_dir;
  o.instance = instance;
  sm_runner *r = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_runner_new(&r, &o, &err) != 0) fprintf(stderr, "fake engine: runner: %s\n", err.message);
  return r;
}

/* ---- what tests ask ---- */

/* Does pattern match at the start of s? '*' stands for any run of bytes
 * other than '/' and '?'. */
static int match_here(const char *pattern, const char *s) {
  if (*pattern == '\0') return 1;
  if (*pattern == '*') {
    for (;; s++) {
      if (match_here(pattern + 1, s)) return 1;
      if (*s == '\0' || *s == '/' || *s == '?') return 0;
    }
  }
  return *s == *pattern && match_here(pattern + 1, s + 1);
}

static int match_part(const char *pattern, const char *s) {
  for (; *s; s++)
    if (match_here(pattern, s)) return 1;
  return *pattern == '\0';
}

size_t fake_engine_count(fake_engine *fe, const char *method, const char *part) {
  size_t n = 0, mlen = method ? strlen(method) : 0;
  pthread_mutex_lock(&fe->mu);
  for (size_t i = 0; i < fe->n_log; i++) {
    const char *l = fe->log[i];
    if (method && (strncmp(l, method, mlen) != 0 || l[mlen] != ' ')) continue;
    if (part && !match_part(part, strchr(l, ' ') + 1)) continue;
    n++;
  }
  pthread_mutex_unlock(&fe->mu);
  return n;
}

char *fake_engine_log(fake_engine *fe) {
  pthread_mutex_lock(&fe->mu);
  size_t total = 1;
  for (size_t i = 0; i < fe->n_log; i++) total += strlen(fe->log[i]) + 1;
  char *out = malloc(total);
  if (out) {
    size_t o = 0;
    for (size_t i = 0; i < fe->n_log; i++)
      o += (size_t)snprintf(out + o, total - o, "%s\n", fe->log[i]);
    out[o] = '\0';
  }
  pthread_mutex_unlock(&fe->mu);
  return out;
}

void fake_engine_clear_log(fake_engine *fe) {
  pthread_mutex_lock(&fe->mu);
  for (size_t i = 0; i < fe->n_log; i++) free(fe->log[i]);
  fe->n_log = 0;
  pthread_mutex_unlock(&fe->mu);
}

static void add_fault(fake_engine *fe, fe_fault **list, const char *method, const char *part,
                      int skip, int status, const char *message, int times) {
  fe_fault *f = calloc(1, sizeof *f);
  if (f == NULL) return;
  f->skip = skip;
  snprintf(f->method, sizeof f->method, "%s", method ? method : "");
  snprintf(f->part, sizeof f->part, "%s", part ? part : "");
  snprintf(f->message, sizeof f->message, "%s", message ? message : "injected failure");
  f->status = status;
  f->times = times;
  pthread_mutex_lock(&fe->mu);
  f->next = *list;
  *list = f;
  pthread_mutex_unlock(&fe->mu);
}

void fake_engine_fail(fake_engine *fe, const char *method, const char *part, int status,
                      const char *message, int times) {
  add_fault(fe, &fe->faults, method, part, 0, status, message, times);
}

void fake_engine_fail_after(fake_engine *fe, const char *method, const char *part, int after,
                            int status, const char *message, int times) {
  add_fault(fe, &fe->faults, method, part, after, status, message, times);
}

void fake_engine_fail_exec(fake_engine *fe, const char *part, const char *message, int code,
                           int times) {
  add_fault(fe, &fe->exec_faults, NULL, part, 0, code, message, times);
}
