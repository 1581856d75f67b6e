/* Connections before libmicrohttpd. The runner accepts connections itself
 * and hands one to libmicrohttpd only once its whole request head has
 * arrived (seen with MSG_PEEK, so libmicrohttpd reads it as sent):
 *
 * - a client that trickles its head holds a file descriptor for at most
 *   GATE_HEAD_TIMEOUT_MS, never one of libmicrohttpd's connections, and the
 *   oldest waiting connection makes room when too many wait;
 * - libmicrohttpd's connections are shared out by what the head says:
 *   GET /healthz may use every one, the control token all but the health
 *   checks' share, every other request (worker tokens, no token) at most
 *   three quarters of that, so unauthenticated clients never hold the
 *   whole runner;
 * - a refused connection gets a short answer (408, 431, 503) before it is
 *   closed.
 *
 * One thread, one epoll set; the counters are shared with libmicrohttpd's
 * threads through the connection notifications. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "common/thread.h"
#include "server/server_core.h"

#define GATE_HEAD_TIMEOUT_MS 10000.0 /* from accept to a complete request head */
#define GATE_HEAD_MAX (32 * 1024)    /* a request head larger than this gets 431 */
#define GATE_PEEKS_MAX 64            /* arrivals of one head before it is given up */
#define GATE_PENDING_MAX 1024        /* heads waiting at once (fewer with few fds) */
#define GATE_ACCEPTS_PER_WAKE 64
#define TAG_LISTEN UINT64_MAX
#define TAG_WAKE (UINT64_MAX - 1)

typedef server_gate_class conn_class;
#define CLS_HEALTH SM_GATE_HEALTH
#define CLS_CONTROL SM_GATE_CONTROL
#define CLS_OTHER SM_GATE_OTHER
#define CLS_N SM_GATE_CLASSES

typedef struct pending {
  int fd;               /* -1: free slot */
  uint32_t gen;         /* tells a stale epoll event from the slot's new use */
  double deadline;
  int peeks;
  struct sockaddr_storage addr;
  socklen_t addr_len;
  int prev, next;       /* oldest first */
} pending;

struct server_gate {
  sm_server *srv;
  int listen_fd, epfd, wake_fd;
  pthread_t thread;
  int started;
  pending *slots;
  size_t n_slots, n_pending;
  int head, tail;       /* the oldest and the newest waiting connection */
  char *peek;           /* GATE_HEAD_MAX */
  /* Shared with libmicrohttpd's threads. */
  pthread_mutex_t mu;
  unsigned char *class_of_fd; /* set before a hand-over, read when it starts */
  size_t n_fds;
  long open[CLS_N];     /* libmicrohttpd connections by class... */
  long handed[CLS_N];   /* ...and those handed over, not yet started */
  unsigned long dropped[SM_GATE_DROP_N];
  unsigned limit_all, limit_control, limit_other;
};

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- the waiting list ---- */

static void list_unlink(server_gate *g, int i) {
  pending *p = &g->slots[i];
  if (p->prev >= 0) g->slots[p->prev].next = p->next;
  else g->head = p->next;
  if (p->next >= 0) g->slots[p->next].prev = p->prev;
  else g->tail = p->prev;
  p->prev = p->next = -1;
}

static void list_append(server_gate *g, int i) {
  pending *p = &g->slots[i];
  p->prev = g->tail;
  p->next = -1;
  if (g->tail >= 0) g->slots[g->tail].next = i;
  else g->head = i;
  g->tail = i;
}

/* Takes the connection out of the waiting list and the epoll set; the fd
 * stays open (the caller closes or hands it over). */
static int release_slot(server_gate *g, int i) {
  pending *p = &g->slots[i];
  int fd = p->fd;
  epoll_ctl(g->epfd, EPOLL_CTL_DEL, fd, NULL);
  list_unlink(g, i);
  p->fd = -1;
  p->gen++;
  __atomic_sub_fetch(&g->n_pending, 1, __ATOMIC_RELAXED);
  return fd;
}

static void count_drop(server_gate *g, server_gate_drop why) {
  pthread_mutex_lock(&g->mu);
  g->dropped[why]++;
  pthread_mutex_unlock(&g->mu);
}

/* A short answer, then the connection is closed. The socket buffer holds
 * it; a client that does not read it loses nothing it was owed. */
static void answer_and_close(int fd, int status, const char *reason, const char *error,
                             const char *kind) {
  char body[256], msg[640], id[17];
  server_random_hex(id, 8);
  int bl = snprintf(body, sizeof body, "{\"error\":\"%s\",\"failure_kind\":\"%s\"}\n", error,
                    kind);
  int n = snprintf(msg, sizeof msg,
                   "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                   "X-Request-Id: %s\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n%s",
                   status, reason, bl, id, body);
  if (n > 0 && (size_t)n < sizeof msg) (void)!send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd, SHUT_WR);
  close(fd);
}

static void drop_slot(server_gate *g, int i, server_gate_drop why) {
  int fd = release_slot(g, i);
  count_drop(g, why);
  switch (why) {
    case SM_GATE_DROP_HEAD_TIMEOUT:
    case SM_GATE_DROP_EVICTED:
      answer_and_close(fd, 408, "Request Timeout",
                       "the request head did not arrive in time", "policy");
      break;
    case SM_GATE_DROP_HEAD_TOO_LARGE:
      answer_and_close(fd, 431, "Request Header Fields Too Large",
                       "the request head is larger than 32 KiB", "policy");
      break;
    default:
      close(fd);
  }
}

/* ---- what the head says ---- */

/* The value of header name in the NUL-terminated head, or NULL; *len is
 * its length without surrounding blanks. */
static const char *header_value(const char *head, const char *name, size_t *len) {
  size_t nl = strlen(name);
  const char *line = strchr(head, '\n');
  while (line && line[1] && line[1] != '\r' && line[1] != '\n') {
    line++;
    if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
      const char *v = line + nl + 1;
      while (*v == ' ' || *v == '\t') v++;
      const char *end = v;
      while (*end && *end != '\r' && *end != '\n') end++;
      while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
      *len = (size_t)(end - v);
      return v;
    }
    line = strchr(line, '\n');
  }
  return NULL;
}

size_t server_gate_head_length(const char *buf, size_t n) {
  /* The head ends at the first empty line: CRLF CRLF, or LF LF. */
  const char *a = memmem(buf, n, "\r\n\r\n", 4);
  const char *b = memmem(buf, n, "\n\n", 2);
  if (a && (!b || a < b)) return (size_t)(a - buf) + 4;
  if (b) return (size_t)(b - buf) + 2;
  return 0;
}

server_gate_class server_gate_head_class(const char *head, size_t len, const char *control_token) {
  char buf[GATE_HEAD_MAX + 1];
  if (len > GATE_HEAD_MAX) len = GATE_HEAD_MAX;
  memcpy(buf, head, len);
  buf[len] = '\0'; /* a NUL inside cuts the head short: it only narrows the class */
  int get = strncmp(buf, "GET ", 4) == 0 || strncmp(buf, "HEAD ", 5) == 0;
  const char *target = strchr(buf, ' ');
  if (get && target && strncmp(target + 1, "/healthz", 8) == 0 &&
      (target[9] == ' ' || target[9] == '?'))
    return CLS_HEALTH;
  size_t vlen = 0;
  const char *auth = header_value(buf, "Authorization", &vlen);
  server_gate_class cls = CLS_OTHER;
  if (auth != NULL && vlen > 7 && strncasecmp(auth, "Bearer ", 7) == 0) {
    auth += 7;
    vlen -= 7;
    while (vlen > 0 && *auth == ' ') auth++, vlen--;
    char token[SM_TOKEN_MAX_LEN + 1];
    if (vlen > 0 && vlen <= SM_TOKEN_MAX_LEN) {
      memcpy(token, auth, vlen);
      token[vlen] = '\0';
      if (control_token && sm_token_equal(token, control_token)) cls = CLS_CONTROL;
      OPENSSL_cleanse(token, vlen);
    }
  }
  OPENSSL_cleanse(buf, len);
  return cls;
}

/* Whether libmicrohttpd has room for a connection of that class. */
static int admit(server_gate *g, conn_class cls, int fd) {
  pthread_mutex_lock(&g->mu);
  long all = 0;
  for (int c = 0; c < CLS_N; c++) all += g->open[c] + g->handed[c];
  int ok = cls == CLS_HEALTH    ? all < (long)g->limit_all
           : cls == CLS_CONTROL ? all < (long)g->limit_control
                                : all < (long)g->limit_control &&
                                      g->open[CLS_OTHER] + g->handed[CLS_OTHER] <
                                          (long)g->limit_other;
  if (ok) {
    g->handed[cls]++;
    if ((size_t)fd < g->n_fds) g->class_of_fd[fd] = (unsigned char)cls;
  } else {
    g->dropped[SM_GATE_DROP_OVERLOADED]++;
  }
  pthread_mutex_unlock(&g->mu);
  return ok;
}

/* A head is complete: libmicrohttpd takes the connection, or it is
 * answered 503. */
static void hand_over(server_gate *g, int i, const char *head, size_t len) {
  conn_class cls = server_gate_head_class(head, len, g->srv->token);
  struct sockaddr_storage addr = g->slots[i].addr;
  socklen_t alen = g->slots[i].addr_len;
  int fd = release_slot(g, i);
  if (!admit(g, cls, fd)) {
    answer_and_close(fd, 503, "Service Unavailable",
                     "the runner is overloaded: too many open connections; try again later",
                     "sandbox");
    return;
  }
  /* libmicrohttpd owns (and on failure closes) the socket from here. */
  if (MHD_add_connection(g->srv->mhd, fd, (struct sockaddr *)&addr, alen) != MHD_YES) {
    pthread_mutex_lock(&g->mu);
    if (g->handed[cls] > 0) g->handed[cls]--;
    g->dropped[SM_GATE_DROP_OVERLOADED]++;
    pthread_mutex_unlock(&g->mu);
  }
}

/* New bytes on a waiting connection: is its head complete? hup: the client
 * will send nothing more. */
static void on_readable(server_gate *g, int i, int hup) {
  pending *p = &g->slots[i];
  if (++p->peeks > GATE_PEEKS_MAX) {
    drop_slot(g, i, SM_GATE_DROP_HEAD_TIMEOUT);
    return;
  }
  ssize_t n = recv(p->fd, g->peek, GATE_HEAD_MAX, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    drop_slot(g, i, SM_GATE_DROP_CLOSED);
    return;
  }
  if (n < 0) return;
  size_t len = server_gate_head_length(g->peek, (size_t)n);
  if (len == 0) {
    if (n >= GATE_HEAD_MAX) drop_slot(g, i, SM_GATE_DROP_HEAD_TOO_LARGE);
    else if (hup) drop_slot(g, i, SM_GATE_DROP_CLOSED);
    return;
  }
  hand_over(g, i, g->peek, len);
}

static void expire(server_gate *g, double now) {
  while (g->head >= 0 && g->slots[g->head].deadline <= now)
    drop_slot(g, g->head, SM_GATE_DROP_HEAD_TIMEOUT);
}

static int free_slot(server_gate *g) {
  for (size_t i = 0; i < g->n_slots; i++)
    if (g->slots[i].fd < 0) return (int)i;
  return -1;
}

static void on_accept(server_gate *g) {
  for (int k = 0; k < GATE_ACCEPTS_PER_WAKE; k++) {
    struct sockaddr_storage addr;
    socklen_t alen = sizeof addr;
    cleanup_fd int fd = accept4(g->listen_fd, (struct sockaddr *)&addr, &alen,
                                SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && g->head >= 0) {
        /* Out of descriptors: the oldest waiting connection goes. */
        drop_slot(g, g->head, SM_GATE_DROP_EVICTED);
        continue;
      }
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        sm_log(SM_LOG_WARN, "http: cannot accept a connection: %s", strerror(errno));
        sleep_ms(20);
      }
      return;
    }
    /* Full: the oldest waiting connection makes room for the newest. */
    if (g->n_pending >= g->n_slots) drop_slot(g, g->head, SM_GATE_DROP_EVICTED);
    int i = free_slot(g);
    if (i < 0) continue;
    pending *p = &g->slots[i];
    p->fd = fd;
    p->deadline = sm_monotonic_ms() + GATE_HEAD_TIMEOUT_MS;
    p->peeks = 0;
    p->addr = addr;
    p->addr_len = alen;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                             .data.u64 = ((uint64_t)p->gen << 32) | (uint32_t)i};
    if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      p->fd = -1;
      continue;
    }
    (void)common_steal_fd(&fd); /* the slot's now */
    list_append(g, i);
    __atomic_add_fetch(&g->n_pending, 1, __ATOMIC_RELAXED);
    /* A head that came with the connection is there already. */
    on_readable(g, i, 0);
  }
}

static void *gate_main(void *arg) {
  server_gate *g = arg;
  sm_log_set_request_id("http");
  struct epoll_event evs[64];
  for (;;) {
    double now = sm_monotonic_ms();
    int timeout = -1;
    if (g->head >= 0) {
      double left = g->slots[g->head].deadline - now;
      timeout = left <= 0 ? 0 : (int)left + 1;
    }
    int n = epoll_wait(g->epfd, evs, 64, timeout);
    if (n < 0 && errno != EINTR) {
      sm_log(SM_LOG_WARN, "http: epoll_wait: %s", strerror(errno));
      sleep_ms(20);
    }
    for (int k = 0; k < n; k++) {
      uint64_t tag = evs[k].data.u64;
      if (tag == TAG_WAKE) return NULL;
      if (tag == TAG_LISTEN) {
        on_accept(g);
        continue;
      }
      uint32_t i = (uint32_t)tag, gen = (uint32_t)(tag >> 32);
      if (i >= g->n_slots || g->slots[i].fd < 0 || g->slots[i].gen != gen) continue;
      on_readable(g, (int)i, (evs[k].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
    }
    expire(g, sm_monotonic_ms());
  }
}

/* ---- life cycle, seen from server_http.c ---- */

int server_gate_start(sm_server *srv, sm_error *err) {
  server_gate *g = calloc(1, sizeof *g);
  if (g == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  srv->gate = g;
  g->srv = srv;
  g->listen_fd = srv->listen_fd;
  g->epfd = g->wake_fd = -1;
  g->head = g->tail = -1;
  pthread_mutex_init(&g->mu, NULL);
  unsigned max = srv->opts.max_connections;
  unsigned reserve = max / 8 < 16 ? (max / 8 ? max / 8 : 1) : 16;
  g->limit_all = max;
  g->limit_control = max - reserve;
  g->limit_other = (max - reserve) * 3 / 4 ? (max - reserve) * 3 / 4 : 1;
  /* Waiting connections use descriptors: keep them to a quarter of ours. */
  struct rlimit rl;
  size_t fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (size_t)rl.rlim_cur
                   : 65536;
  g->n_slots = fds / 4 < GATE_PENDING_MAX ? fds / 4 : GATE_PENDING_MAX;
  if (g->n_slots < 16) g->n_slots = 16;
  g->n_fds = fds < (1u << 20) ? fds : (1u << 20);
  g->slots = calloc(g->n_slots, sizeof *g->slots);
  g->class_of_fd = calloc(g->n_fds, 1);
  g->peek = malloc(GATE_HEAD_MAX);
  if (!g->slots || !g->class_of_fd || !g->peek)
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  for (size_t i = 0; i < g->n_slots; i++) {
    g->slots[i].fd = -1;
    g->slots[i].prev = g->slots[i].next = -1;
  }
  int fl = fcntl(g->listen_fd, F_GETFL);
  g->epfd = epoll_create1(EPOLL_CLOEXEC);
  g->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event lev = {.events = EPOLLIN, .data.u64 = TAG_LISTEN};
  struct epoll_event wev = {.events = EPOLLIN, .data.u64 = TAG_WAKE};
  if (fl < 0 || fcntl(g->listen_fd, F_SETFL, fl | O_NONBLOCK) != 0 || g->epfd < 0 ||
      g->wake_fd < 0 || epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->listen_fd, &lev) != 0 ||
      epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->wake_fd, &wev) != 0)
    return sm_error_set_errno(err, SM_EIO, errno, "cannot watch %s: %s", srv->address,
                              strerror(errno));
  if (common_thread_start(&g->thread, NULL, gate_main, g) != 0)
    return sm_error_set(err, SM_ENOMEM, "cannot start the connection thread");
  g->started = 1;
  return 0;
}

void server_gate_stop(sm_server *srv) {
  server_gate *g = srv->gate;
  if (g == NULL) return;
  if (g->started) {
    uint64_t one = 1;
    (void)!write(g->wake_fd, &one, sizeof one);
    pthread_join(g->thread, NULL);
    g->started = 0;
  }
  /* No new clients: the listening socket goes, and so do the heads still
   * waiting (their requests never started). */
  while (g->head >= 0) drop_slot(g, g->head, SM_GATE_DROP_CLOSED);
  if (g->listen_fd >= 0) close(g->listen_fd);
  g->listen_fd = srv->listen_fd = -1;
}

void server_gate_free(sm_server *srv) {
  server_gate *g = srv->gate;
  if (g == NULL) return;
  server_gate_stop(srv);
  if (g->epfd >= 0) close(g->epfd);
  if (g->wake_fd >= 0) close(g->wake_fd);
  pthread_mutex_destroy(&g->mu);
  free(g->slots);
  free(g->class_of_fd);
  free(g->peek);
  free(g);
  srv->gate = NULL;
}

/* MHD_OPTION_NOTIFY_CONNECTION: *ctx remembers the class (plus one). */
void server_gate_connection(sm_server *srv, struct MHD_Connection *conn, void **ctx, int started) {
  server_gate *g = srv->gate;
  if (g == NULL) return;
  pthread_mutex_lock(&g->mu);
  if (started) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci ? ci->connect_fd : -1;
    conn_class cls = fd >= 0 && (size_t)fd < g->n_fds ? (conn_class)g->class_of_fd[fd] : CLS_OTHER;
    g->open[cls]++;
    if (g->handed[cls] > 0) g->handed[cls]--;
    *ctx = (void *)(uintptr_t)(cls + 1);
  } else if (*ctx != NULL) {
    conn_class cls = (conn_class)((uintptr_t)*ctx - 1);
    if (cls < CLS_N && g->open[cls] > 0) g->open[cls]--;
    *ctx = NULL;
  }
  pthread_mutex_unlock(&g->mu);
}

void server_gate_read_stats(sm_server *srv, server_gate_stats *out) {
  memset(out, 0, sizeof *out);
  server_gate *g = srv->gate;
  if (g == NULL) return;
  pthread_mutex_lock(&g->mu);
  out->open = g->open[CLS_HEALTH] + g->open[CLS_CONTROL] + g->open[CLS_OTHER];
  memcpy(out->dropped, g->dropped, sizeof out->dropped);
  pthread_mutex_unlock(&g->mu);
  /* The gate thread keeps no lock for it: a gauge may be a moment old. */
  out->pending = (long)__atomic_load_n(&g->n_pending, __ATOMIC_RELAXED);
}
