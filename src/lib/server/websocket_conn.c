/* A WebSocket connection of the runner: see websocket_conn.h. One thread
 * per connection polls its socket and a wake descriptor; messages queued
 * by other threads are written by it, so no sender ever blocks on a slow
 * peer. */
#include "server/websocket_conn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sandman/error.h>
#include <sandman/log.h>
#include <sandman/util.h>

#define DEFAULT_MAX_FRAME ((size_t)1 << 20)
#define DEFAULT_MAX_MESSAGE ((size_t)1 << 20)
#define DEFAULT_MAX_QUEUED ((size_t)8 << 20)
#define DEFAULT_PING_MS 30000
#define CLOSE_WAIT_MS 2000 /* for the peer's answer to our close */
#define READ_CHUNK 65536

struct server_ws_conn {
  server_ws_group *g;
  server_ws_conn *next; /* in g's list, under g->mu */
  int fd, wake;
  server_ws_limits lim;
  server_ws_handler h;
  void (*release)(void *);
  void *release_ud;
  server_ws_reader reader; /* the connection's thread only */
  double last_heard;       /* the thread only */
  int ping_sent;           /* the thread only */
  int peer_code;           /* the thread only: the peer's close code, 0 before */
  pthread_mutex_t mu;      /* guards what follows */
  int refs;
  unsigned char *out;
  size_t out_off, out_len, out_cap;
  int close_sent; /* our close frame is queued: nothing else may follow */
  double close_deadline;
  int ended;
};

struct server_ws_group {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  server_ws_conn *list;
  size_t n;
};

struct server_ws_upgrade {
  server_ws_group *g;
  server_ws_limits lim;
  server_ws_handler h;
  int taken;
};

/* ---- the group ---- */

server_ws_group *server_ws_group_new(void) {
  server_ws_group *g = calloc(1, sizeof *g);
  if (g == NULL) return NULL;
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  return g;
}

size_t server_ws_group_count(server_ws_group *g) {
  pthread_mutex_lock(&g->mu);
  size_t n = g->n;
  pthread_mutex_unlock(&g->mu);
  return n;
}

static int group_wait(server_ws_group *g, int wait_ms) {
  double until = sm_monotonic_ms() + wait_ms;
  pthread_mutex_lock(&g->mu);
  while (g->n > 0) {
    double left = until - sm_monotonic_ms();
    if (left <= 0) break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ns = ts.tv_nsec + (long long)(left * 1e6);
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&g->cv, &g->mu, &ts);
  }
  size_t n = g->n;
  pthread_mutex_unlock(&g->mu);
  return n == 0;
}

void server_ws_group_close_all(server_ws_group *g, int wait_ms) {
  if (g == NULL) return;
  pthread_mutex_lock(&g->mu);
  for (server_ws_conn *c = g->list; c; c = c->next)
    server_ws_close(c, SERVER_WS_GOING_AWAY, "the runner is stopping");
  pthread_mutex_unlock(&g->mu);
  if (group_wait(g, wait_ms)) return;
  /* Peers that do not answer: their sockets end now. */
  pthread_mutex_lock(&g->mu);
  for (server_ws_conn *c = g->list; c; c = c->next) shutdown(c->fd, SHUT_RDWR);
  pthread_mutex_unlock(&g->mu);
  group_wait(g, wait_ms);
}

void server_ws_group_free(server_ws_group *g) {
  if (g == NULL) return;
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g);
}

/* ---- references and the queue ---- */

void server_ws_conn_ref(server_ws_conn *c) {
  pthread_mutex_lock(&c->mu);
  c->refs++;
  pthread_mutex_unlock(&c->mu);
}

void server_ws_conn_unref(server_ws_conn *c) {
  if (c == NULL) return;
  pthread_mutex_lock(&c->mu);
  int last = --c->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (!last) return;
  server_ws_reader_dispose(&c->reader);
  if (c->wake >= 0) close(c->wake);
  pthread_mutex_destroy(&c->mu);
  free(c->out);
  free(c);
}

static void poke(server_ws_conn *c) {
  uint64_t one = 1;
  (void)!write(c->wake, &one, sizeof one);
}

/* Under c->mu: appends a frame to the queue. -1 when out of memory. */
static int queue_frame(server_ws_conn *c, int opcode, const void *data, size_t len) {
  unsigned char head[SERVER_WS_HEADER_MAX];
  size_t hn = server_ws_header(head, 1, opcode, len, NULL);
  if (c->out_off > 0 && c->out_off == c->out_len) c->out_off = c->out_len = 0;
  size_t need = c->out_len + hn + len;
  if (need > c->out_cap && c->out_off > 0) {
    memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
    c->out_len -= c->out_off;
    c->out_off = 0;
    need = c->out_len + hn + len;
  }
  if (need > c->out_cap) {
    size_t cap = c->out_cap ? c->out_cap : 4096;
    while (cap < need) cap *= 2;
    unsigned char *o = realloc(c->out, cap);
    if (o == NULL) return -1;
    c->out = o;
    c->out_cap = cap;
  }
  memcpy(c->out + c->out_len, head, hn);
  if (len) memcpy(c->out + c->out_len + hn, data, len);
  c->out_len += hn + len;
  return 0;
}

/* Under c->mu: writes what the socket takes now (it never blocks). -1
 * when the socket is broken (the connection's thread ends it). */
static int write_out(server_ws_conn *c) {
  while (c->out_off < c->out_len) {
    ssize_t n =
        send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return 0;
    if (n <= 0) return -1;
    c->out_off += (size_t)n;
  }
  return 0;
}

/* Under c->mu: our close frame, after which nothing else goes. */
static void queue_close(server_ws_conn *c, int code, const char *reason) {
  if (c->close_sent || c->ended) return;
  unsigned char p[SERVER_WS_CONTROL_MAX];
  size_t n = code == SERVER_WS_NO_STATUS ? 0 : server_ws_close_payload(p, code, reason);
  queue_frame(c, SERVER_WS_CLOSE, p, n);
  c->close_sent = 1;
  c->close_deadline = sm_monotonic_ms() + CLOSE_WAIT_MS;
}

int server_ws_send(server_ws_conn *c, int opcode, const void *data, size_t len) {
  pthread_mutex_lock(&c->mu);
  if (c->close_sent || c->ended) {
    pthread_mutex_unlock(&c->mu);
    return SM_ECONFLICT;
  }
  size_t queued = c->out_len - c->out_off;
  int rc = 0;
  if (queued + len + SERVER_WS_HEADER_MAX > c->lim.max_queued) {
    queue_close(c, SERVER_WS_POLICY, "the client does not read fast enough");
    rc = SM_EBUSY;
  } else if (queue_frame(c, opcode, data, len) != 0) {
    queue_close(c, SERVER_WS_INTERNAL, "out of memory");
    rc = SM_ENOMEM;
  } else if (queued == 0) {
    /* Nothing was waiting: the socket most likely takes it now, without
     * waking the connection's thread (a keystroke's echo is one hop
     * shorter). What it does not take, the thread writes. */
    write_out(c);
  }
  int more = c->out_off < c->out_len || c->close_sent;
  pthread_mutex_unlock(&c->mu);
  if (more) poke(c);
  return rc;
}

void server_ws_close(server_ws_conn *c, int code, const char *reason) {
  pthread_mutex_lock(&c->mu);
  queue_close(c, code, reason);
  pthread_mutex_unlock(&c->mu);
  poke(c);
}

/* ---- the connection's thread ---- */

/* Frames from the peer (the reader's callback). */
static int on_frame(void *ud, int opcode, const unsigned char *data, size_t len) {
  server_ws_conn *c = ud;
  switch (opcode) {
  case SERVER_WS_PING:
    pthread_mutex_lock(&c->mu);
    if (!c->close_sent) queue_frame(c, SERVER_WS_PONG, data, len);
    pthread_mutex_unlock(&c->mu);
    return 0;
  case SERVER_WS_PONG:
    c->ping_sent = 0;
    return 0;
  case SERVER_WS_CLOSE: {
    int code = server_ws_close_code(data, len);
    c->peer_code = code > 0 ? code : SERVER_WS_PROTOCOL_ERROR;
    pthread_mutex_lock(&c->mu);
    queue_close(c, code == SERVER_WS_NO_STATUS ? SERVER_WS_NORMAL : code, NULL);
    pthread_mutex_unlock(&c->mu);
    return -1; /* nothing the peer sends after its close counts */
  }
  default: {
    pthread_mutex_lock(&c->mu);
    int closing = c->close_sent;
    pthread_mutex_unlock(&c->mu);
    if (closing) return 0;
    int rc = c->h.on_message ? c->h.on_message(c->h.ud, c, opcode, data, len) : 0;
    if (rc > 0) server_ws_close(c, rc, NULL);
    return 0;
  }
  }
}

/* Reads what arrived. 0 to go on, 1 when the peer's side is over. */
static int read_peer(server_ws_conn *c) {
  unsigned char buf[READ_CHUNK];
  ssize_t n = recv(c->fd, buf, sizeof buf, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  if (n <= 0) return 1;
  c->last_heard = sm_monotonic_ms();
  if (c->peer_code) return 0; /* after its close: dropped */
  int rc = server_ws_reader_feed(&c->reader, buf, (size_t)n);
  if (rc > 0) server_ws_close(c, rc, "protocol error");
  return 0;
}

/* Writes what the socket takes. -1 when it is broken. */
static int write_peer(server_ws_conn *c) {
  pthread_mutex_lock(&c->mu);
  int rc = write_out(c);
  pthread_mutex_unlock(&c->mu);
  return rc;
}

/* Pings a silent peer; 1 when it stayed silent for two intervals. */
static int keepalive(server_ws_conn *c, double now) {
  double quiet = now - c->last_heard;
  if (quiet >= 2.0 * c->lim.ping_ms) return 1;
  if (quiet >= c->lim.ping_ms && !c->ping_sent) {
    pthread_mutex_lock(&c->mu);
    if (!c->close_sent) queue_frame(c, SERVER_WS_PING, "", 0);
    pthread_mutex_unlock(&c->mu);
    c->ping_sent = 1;
  }
  return 0;
}

/* One round of the loop. 0 to go on, else the connection is over. */
static int step(server_ws_conn *c) {
  pthread_mutex_lock(&c->mu);
  int want_write = c->out_off < c->out_len;
  int close_sent = c->close_sent;
  double deadline = c->close_deadline;
  pthread_mutex_unlock(&c->mu);
  double now = sm_monotonic_ms();
  if (close_sent && !want_write && c->peer_code) return 1; /* the handshake is done */
  if (close_sent && now >= deadline) return 1;
  if (!close_sent && keepalive(c, now)) return 1;
  double until =
      close_sent ? deadline : c->last_heard + c->lim.ping_ms * (c->ping_sent ? 2.0 : 1.0);
  int timeout = until - now > 0 ? (int)(until - now) + 1 : 0;
  struct pollfd p[2] = {{c->fd, (short)(POLLIN | (want_write ? POLLOUT : 0)), 0},
                        {c->wake, POLLIN, 0}};
  int n = poll(p, 2, timeout);
  if (n < 0 && errno != EINTR) return 1;
  if (n <= 0) return 0;
  if (p[1].revents) {
    uint64_t v;
    (void)!read(c->wake, &v, sizeof v);
  }
  if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && read_peer(c)) return 1;
  if (write_peer(c) != 0) return 1;
  return 0;
}

static void *conn_main(void *arg) {
  server_ws_conn *c = arg;
  if (c->h.on_open) c->h.on_open(c->h.ud, c);
  while (step(c) == 0) {
  }
  pthread_mutex_lock(&c->mu);
  c->ended = 1;
  pthread_mutex_unlock(&c->mu);
  if (c->h.on_close) c->h.on_close(c->h.ud, c, c->peer_code ? c->peer_code : SERVER_WS_ABNORMAL);
  if (c->release) c->release(c->release_ud);
  else close(c->fd);
  server_ws_group *g = c->g;
  pthread_mutex_lock(&g->mu);
  for (server_ws_conn **pp = &g->list; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  g->n--;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  server_ws_conn_unref(c);
  return NULL;
}

static void fill_limits(server_ws_limits *l, const server_ws_limits *in) {
  if (in) *l = *in;
  else memset(l, 0, sizeof *l);
  if (l->max_frame == 0) l->max_frame = DEFAULT_MAX_FRAME;
  if (l->max_message == 0) l->max_message = DEFAULT_MAX_MESSAGE;
  if (l->max_queued == 0) l->max_queued = DEFAULT_MAX_QUEUED;
  if (l->ping_ms <= 0) l->ping_ms = DEFAULT_PING_MS;
}

int server_ws_conn_start(server_ws_group *g, int fd, const char *extra, size_t extra_len,
                         const server_ws_limits *lim, const server_ws_handler *h,
                         void (*release)(void *), void *release_ud, sm_error *err) {
  server_ws_conn *c = calloc(1, sizeof *c);
  if (c == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory starting a websocket connection");
  c->g = g;
  c->fd = fd;
  c->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  fill_limits(&c->lim, lim);
  c->h = *h;
  c->release = release;
  c->release_ud = release_ud;
  c->refs = 1;
  c->last_heard = sm_monotonic_ms();
  pthread_mutex_init(&c->mu, NULL);
  server_ws_reader_init(&c->reader, 1, c->lim.max_frame, c->lim.max_message, on_frame, c);
  if (c->wake < 0) {
    int e = errno;
    server_ws_conn_unref(c);
    return sm_error_set_errno(err, SM_EIO, e, "websocket connection: eventfd");
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  /* Bytes the peer sent with its request: its first frames. */
  if (extra_len > 0) {
    int rc = server_ws_reader_feed(&c->reader, (const unsigned char *)extra, extra_len);
    if (rc > 0) queue_close(c, rc, "protocol error");
  }
  pthread_mutex_lock(&g->mu);
  c->next = g->list;
  g->list = c;
  g->n++;
  pthread_mutex_unlock(&g->mu);
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&t, &attr, conn_main, c);
  pthread_attr_destroy(&attr);
  if (e != 0) {
    pthread_mutex_lock(&g->mu);
    for (server_ws_conn **pp = &g->list; *pp; pp = &(*pp)->next)
      if (*pp == c) {
        *pp = c->next;
        break;
      }
    g->n--;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    c->h.on_message = NULL;
    server_ws_conn_unref(c);
    return sm_error_set_errno(err, SM_EIO, e, "websocket connection: starting its thread");
  }
  return 0;
}

/* ---- libmicrohttpd's upgrade ---- */

static void release_urh(void *urh) { MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE); }

static void on_upgrade(void *cls, struct MHD_Connection *conn, void *req_cls, const char *extra,
                       size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
  server_ws_upgrade *u = cls;
  (void)conn;
  (void)req_cls;
  u->taken = 1;
  sm_error err = SM_ERROR_INIT;
  if (server_ws_conn_start(u->g, sock, extra, extra_len, &u->lim, &u->h, release_urh, urh,
                           &err) != 0) {
    sm_log(SM_LOG_WARN, "websocket: %s", err.message);
    if (u->h.discard) u->h.discard(u->h.ud);
    release_urh(urh);
  }
}

server_ws_upgrade *server_ws_upgrade_new(server_ws_group *g, const server_ws_limits *lim,
                                         const server_ws_handler *h) {
  server_ws_upgrade *u = calloc(1, sizeof *u);
  if (u == NULL) return NULL;
  u->g = g;
  fill_limits(&u->lim, lim);
  u->h = *h;
  return u;
}

struct MHD_Response *server_ws_upgrade_response(server_ws_upgrade *u, const char *accept) {
  struct MHD_Response *r = MHD_create_response_for_upgrade(on_upgrade, u);
  if (r == NULL) return NULL;
  MHD_add_response_header(r, "Upgrade", "websocket");
  MHD_add_response_header(r, "Connection", "Upgrade");
  MHD_add_response_header(r, "Sec-WebSocket-Accept", accept);
  return r;
}

void server_ws_upgrade_done(server_ws_upgrade *u) {
  if (u == NULL) return;
  if (!u->taken && u->h.discard) u->h.discard(u->h.ud);
  free(u);
}
