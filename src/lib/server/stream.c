/* Streamed request bodies and answers between libmicrohttpd's I/O thread
 * and a call thread (see stream.h). Every state change happens under the
 * stream's mutex, and so do libmicrohttpd's suspend and resume of the
 * connection: a side never resumes a connection that is not suspended, or
 * one that is closed. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "server/stream.h"

#include "common/buf.h"

#define RING_SIZE (1024 * 1024)  /* each direction */
#define PUSH_MARK (RING_SIZE / 2) /* the I/O side stops reading the body past it */
#define HEADER_MAX 128
#define PASSED_MAX (32 * 1024) /* a proxied answer's own headers, all of them */

typedef struct ring {
  char *data;
  size_t head, len;
} ring;

struct server_stream {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs;
  struct MHD_Connection *conn;
  int conn_gone;        /* detached: conn must not be touched */
  int suspended;        /* suspended by this stream's code */
  volatile int cancel;
  void (*begin_fn)(void *);
  void *begin_ud;
  /* the request body */
  ring in;
  int in_eof;
  uint64_t in_total;
  /* the answer */
  int begun, finished, out_error;
  int status;
  char ctype[HEADER_MAX];
  int64_t length;
  char h[2][HEADER_MAX], v[2][HEADER_MAX];
  ring out;
  uint64_t out_sent;    /* bytes handed to libmicrohttpd */
  server_answer answer;
  /* a proxied answer (port_route.c): its own headers, and its upgrade */
  int proxied;
  common_buf passed;    /* "name\0value\0" pairs */
  int upgrade;          /* the answer is a 101: the socket is handed over */
  int up_fd;            /* the upgraded socket, -1 before */
  void *urh;
  char *up_extra;
  size_t up_extra_len;
  /* the hang-up watcher */
  int conn_fd;          /* the connection's socket (libmicrohttpd's) */
  int watch_fd, wake_fd[2];
  pthread_t watcher;
  int watching;
};

/* ---- rings ---- */

static int ring_init(ring *r) {
  r->data = malloc(RING_SIZE);
  r->head = r->len = 0;
  return r->data ? 0 : -1;
}

static size_t ring_put(ring *r, const char *p, size_t n) {
  size_t room = RING_SIZE - r->len;
  if (n > room) n = room;
  for (size_t done = 0; done < n;) {
    size_t at = (r->head + r->len) % RING_SIZE;
    size_t chunk = RING_SIZE - at;
    if (chunk > n - done) chunk = n - done;
    memcpy(r->data + at, p + done, chunk);
    r->len += chunk;
    done += chunk;
  }
  return n;
}

static size_t ring_get(ring *r, char *p, size_t n) {
  if (n > r->len) n = r->len;
  for (size_t done = 0; done < n;) {
    size_t chunk = RING_SIZE - r->head;
    if (chunk > n - done) chunk = n - done;
    memcpy(p + done, r->data + r->head, chunk);
    r->head = (r->head + chunk) % RING_SIZE;
    r->len -= chunk;
    done += chunk;
  }
  return n;
}

/* ---- life ---- */

server_stream *server_stream_new(struct MHD_Connection *conn, void (*begin)(void *ud), void *ud) {
  server_stream *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  if (ring_init(&s->in) != 0 || ring_init(&s->out) != 0) {
    free(s->in.data);
    free(s->out.data);
    free(s);
    return NULL;
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->refs = 1;
  s->conn = conn;
  s->begin_fn = begin;
  s->begin_ud = ud;
  s->length = -1;
  s->up_fd = -1;
  common_buf_init(&s->passed, PASSED_MAX);
  s->watch_fd = s->wake_fd[0] = s->wake_fd[1] = -1;
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  s->conn_fd = ci ? ci->connect_fd : -1;
  return s;
}

void server_stream_ref(server_stream *s) {
  pthread_mutex_lock(&s->mu);
  s->refs++;
  pthread_mutex_unlock(&s->mu);
}

void server_stream_unref(server_stream *s) {
  if (s == NULL) return;
  pthread_mutex_lock(&s->mu);
  int last = --s->refs == 0;
  pthread_mutex_unlock(&s->mu);
  if (!last) return;
  /* A request body may hold file content: wiped like buffered bodies. */
  OPENSSL_cleanse(s->in.data, RING_SIZE);
  free(s->in.data);
  free(s->out.data);
  if (s->answer.body) json_object_put(s->answer.body);
  common_buf_dispose(&s->passed);
  free(s->up_extra);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}

volatile int *server_stream_cancel_flag(server_stream *s) { return &s->cancel; }

int server_stream_cancelled(server_stream *s) {
  pthread_mutex_lock(&s->mu);
  int c = s->cancel;
  pthread_mutex_unlock(&s->mu);
  return c;
}

/* Under s->mu: lets the I/O side look again. */
static void wake(server_stream *s) {
  pthread_cond_broadcast(&s->cv);
  if (s->suspended && !s->conn_gone) {
    s->suspended = 0;
    MHD_resume_connection(s->conn);
  }
}

/* Under s->mu. */
static void suspend(server_stream *s) {
  if (!s->suspended && !s->conn_gone) {
    s->suspended = 1;
    MHD_suspend_connection(s->conn);
  }
}

/* ---- the hang-up watcher ---- */

static void *watch_main(void *arg) {
  server_stream *s = arg;
  struct pollfd p[2] = {{s->watch_fd, POLLRDHUP, 0}, {s->wake_fd[0], POLLIN, 0}};
  for (;;) {
    int n = poll(p, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || p[1].revents) break;
    if (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
      pthread_mutex_lock(&s->mu);
      if (!s->finished) s->cancel = 1;
      pthread_cond_broadcast(&s->cv);
      pthread_mutex_unlock(&s->mu);
      break;
    }
  }
  return NULL;
}

int server_stream_watch(server_stream *s) {
  if (s->conn_fd < 0) return -1;
  s->watch_fd = dup(s->conn_fd);
  if (s->watch_fd < 0) return -1;
  if (pipe(s->wake_fd) != 0) {
    close(s->watch_fd);
    s->watch_fd = -1;
    return -1;
  }
  if (pthread_create(&s->watcher, NULL, watch_main, s) != 0) {
    close(s->watch_fd);
    close(s->wake_fd[0]);
    close(s->wake_fd[1]);
    s->watch_fd = s->wake_fd[0] = s->wake_fd[1] = -1;
    return -1;
  }
  s->watching = 1;
  return 0;
}

static void unwatch(server_stream *s) {
  if (!s->watching) return;
  ssize_t w = write(s->wake_fd[1], "x", 1);
  (void)w;
  pthread_join(s->watcher, NULL);
  close(s->watch_fd);
  close(s->wake_fd[0]);
  close(s->wake_fd[1]);
  s->watching = 0;
}

/* ---- the call side ---- */

ssize_t server_stream_read(void *ud, char *buf, size_t len) {
  server_stream *s = ud;
  pthread_mutex_lock(&s->mu);
  while (s->in.len == 0 && !s->in_eof && !s->cancel && !s->conn_gone)
    pthread_cond_wait(&s->cv, &s->mu);
  ssize_t n;
  if (s->in.len > 0) {
    n = (ssize_t)ring_get(&s->in, buf, len);
    s->in_total += (uint64_t)n;
    if (s->in.len < PUSH_MARK / 2) wake(s);
  } else {
    n = s->in_eof ? 0 : -1;
  }
  pthread_mutex_unlock(&s->mu);
  return n;
}

uint64_t server_stream_read_total(server_stream *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t n = s->in_total;
  pthread_mutex_unlock(&s->mu);
  return n;
}

int server_stream_begin(server_stream *s, int status, const char *content_type, int64_t length,
                        const char *h1, const char *v1, const char *h2, const char *v2) {
  pthread_mutex_lock(&s->mu);
  s->status = status;
  snprintf(s->ctype, sizeof s->ctype, "%s", content_type ? content_type : "");
  s->length = length;
  snprintf(s->h[0], HEADER_MAX, "%s", h1 ? h1 : "");
  snprintf(s->v[0], HEADER_MAX, "%s", v1 ? v1 : "");
  snprintf(s->h[1], HEADER_MAX, "%s", h2 ? h2 : "");
  snprintf(s->v[1], HEADER_MAX, "%s", v2 ? v2 : "");
  s->begun = 1;
  int gone = s->conn_gone || s->cancel;
  wake(s);
  pthread_mutex_unlock(&s->mu);
  if (s->begin_fn) s->begin_fn(s->begin_ud);
  return gone ? -1 : 0;
}

int server_stream_begun(server_stream *s) {
  pthread_mutex_lock(&s->mu);
  int b = s->begun;
  pthread_mutex_unlock(&s->mu);
  return b;
}

int server_stream_write(void *ud, const char *data, size_t len) {
  server_stream *s = ud;
  pthread_mutex_lock(&s->mu);
  while (len > 0) {
    while (s->out.len == RING_SIZE && !s->cancel && !s->conn_gone)
      pthread_cond_wait(&s->cv, &s->mu);
    if (s->cancel || s->conn_gone) break;
    size_t n = ring_put(&s->out, data, len);
    data += n;
    len -= n;
    wake(s);
  }
  int rc = len > 0 ? -1 : 0;
  pthread_mutex_unlock(&s->mu);
  return rc;
}

void server_stream_finish(server_stream *s, int error, server_answer *answer) {
  pthread_mutex_lock(&s->mu);
  s->finished = 1;
  s->out_error = error;
  if (answer) {
    s->answer = *answer;
    answer->body = NULL;
  }
  wake(s);
  pthread_mutex_unlock(&s->mu);
  unwatch(s);
}

/* ---- the I/O side ---- */

server_stream_push_result server_stream_push(server_stream *s, const char *data, size_t len) {
  pthread_mutex_lock(&s->mu);
  server_stream_push_result r = SM_STREAM_DROPPED;
  if (!s->finished && !s->cancel) {
    /* The I/O side never takes more than a piece past the mark, so the
     * ring always has room for what libmicrohttpd hands over at once. */
    size_t n = ring_put(&s->in, data, len);
    if (n == len) {
      r = SM_STREAM_TAKEN;
      pthread_cond_broadcast(&s->cv);
      if (s->in.len > PUSH_MARK) suspend(s);
    } else {
      s->cancel = 1; /* cannot happen with libmicrohttpd's pieces (64 KiB) */
      pthread_cond_broadcast(&s->cv);
    }
  }
  pthread_mutex_unlock(&s->mu);
  return r;
}

server_stream_state server_stream_wait(server_stream *s, int body_done) {
  pthread_mutex_lock(&s->mu);
  if (body_done && !s->in_eof) {
    s->in_eof = 1;
    pthread_cond_broadcast(&s->cv);
  }
  server_stream_state st = s->begun      ? SM_STREAM_BEGUN
                           : s->finished ? SM_STREAM_ANSWERED
                                         : SM_STREAM_WAITING;
  if (st == SM_STREAM_WAITING) suspend(s);
  pthread_mutex_unlock(&s->mu);
  return st;
}

void server_stream_take_answer(server_stream *s, server_answer *out) {
  pthread_mutex_lock(&s->mu);
  *out = s->answer;
  s->answer.body = NULL;
  pthread_mutex_unlock(&s->mu);
}

void server_stream_head(server_stream *s, int *status, const char **content_type, int64_t *length,
                        const char **h1, const char **v1, const char **h2, const char **v2) {
  pthread_mutex_lock(&s->mu);
  *status = s->status;
  *content_type = s->ctype;
  *length = s->length;
  *h1 = s->h[0][0] ? s->h[0] : NULL;
  *v1 = s->v[0];
  *h2 = s->h[1][0] ? s->h[1] : NULL;
  *v2 = s->v[1];
  pthread_mutex_unlock(&s->mu);
}

ssize_t server_stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
  server_stream *s = cls;
  (void)pos;
  pthread_mutex_lock(&s->mu);
  ssize_t n;
  if (s->out.len > 0) {
    n = (ssize_t)ring_get(&s->out, buf, max);
    s->out_sent += (uint64_t)n;
    pthread_cond_broadcast(&s->cv);
  } else if (s->finished) {
    n = s->out_error ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
  } else {
    suspend(s);
    n = 0;
  }
  pthread_mutex_unlock(&s->mu);
  return n;
}

void server_stream_detach(server_stream *s) {
  pthread_mutex_lock(&s->mu);
  s->conn_gone = 1;
  s->suspended = 0;
  /* An answer of known length is complete once that much was sent: the
   * call may still be ending (its helper exiting), and is left to. */
  int complete = s->begun && s->length >= 0 && s->out_sent >= (uint64_t)s->length;
  if (!s->finished && !complete) s->cancel = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  server_stream_unref(s);
}

/* ---- proxied answers: their own headers, their upgrade ---- */

int server_stream_add_header(server_stream *s, const char *name, const char *value) {
  pthread_mutex_lock(&s->mu);
  s->proxied = 1;
  size_t nl = strlen(name), vl = strlen(value);
  int rc = -1;
  if (s->passed.len + nl + vl + 2 <= PASSED_MAX && !s->begun) {
    common_buf_append(&s->passed, name, nl + 1);
    common_buf_append(&s->passed, value, vl + 1);
    rc = 0;
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int server_stream_proxied(server_stream *s) {
  pthread_mutex_lock(&s->mu);
  int p = s->proxied;
  pthread_mutex_unlock(&s->mu);
  return p;
}

void server_stream_headers(server_stream *s, server_stream_header_fn fn, void *ud) {
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->passed.len;) {
    const char *name = s->passed.data + i;
    const char *value = name + strlen(name) + 1;
    i = (size_t)(value - s->passed.data) + strlen(value) + 1;
    fn(ud, name, value);
  }
  pthread_mutex_unlock(&s->mu);
}

int server_stream_begin_upgrade(server_stream *s) {
  pthread_mutex_lock(&s->mu);
  s->upgrade = 1;
  s->proxied = 1;
  pthread_mutex_unlock(&s->mu);
  return server_stream_begin(s, 101, "", 0, NULL, NULL, NULL, NULL);
}

int server_stream_upgrading(server_stream *s) {
  pthread_mutex_lock(&s->mu);
  int u = s->upgrade;
  pthread_mutex_unlock(&s->mu);
  return u;
}

void server_stream_on_upgrade(void *cls, struct MHD_Connection *conn, void *req_cls,
                              const char *extra, size_t extra_len, MHD_socket sock,
                              struct MHD_UpgradeResponseHandle *urh) {
  server_stream *s = cls;
  (void)conn, (void)req_cls;
  pthread_mutex_lock(&s->mu);
  if (extra_len > 0 && (s->up_extra = malloc(extra_len)) != NULL) {
    memcpy(s->up_extra, extra, extra_len);
    s->up_extra_len = extra_len;
  }
  s->urh = urh;
  s->up_fd = sock;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

int server_stream_take_socket(server_stream *s, int *fd, void **urh, char **extra,
                              size_t *extra_len) {
  pthread_mutex_lock(&s->mu);
  while (s->up_fd < 0 && !s->cancel && !s->conn_gone) pthread_cond_wait(&s->cv, &s->mu);
  int rc = s->up_fd >= 0 ? 0 : -1;
  if (rc == 0) {
    *fd = s->up_fd;
    *urh = s->urh;
    *extra = s->up_extra;
    *extra_len = s->up_extra_len;
    s->up_extra = NULL;
    s->up_extra_len = 0;
    s->up_fd = -1;
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}

void server_stream_release_socket(void *urh) {
  if (urh) MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}
