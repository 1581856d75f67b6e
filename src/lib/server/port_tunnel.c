/* WebSocket tunnels through the ports route (port_tunnel.h): the table of
 * open ones under a lock, and the pump that joins a client's upgraded
 * socket to the relay's connection. Bytes are not parsed: the WebSocket's
 * frames and its close handshake are the client's and the server's. */
#include "server/port_tunnel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <sandman/util.h>

#define STEP_MS 500 /* how often a pump looks at its flags and token */

struct server_port_tunnel {
  server_port_tunnel *next;
  char container_id[SM_ENGINE_ID_MAX];
  char token[SERVER_PREVIEW_TOKEN_LEN + 1]; /* "" for the route's */
  int fd;                                   /* the client's socket while pumping, else -1 */
  int ended;                                /* under t->mu */
  server_port_tunnels *t;
};

struct server_port_tunnels {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  size_t per_sandbox, total, n;
  int closing;
  server_port_tunnel *list;
};

server_port_tunnels *server_port_tunnels_new(size_t per_sandbox, size_t total) {
  server_port_tunnels *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  t->per_sandbox = per_sandbox;
  t->total = total;
  return t;
}

void server_port_tunnels_free(server_port_tunnels *t) {
  if (t == NULL) return;
  while (t->list) { /* none after close_all; a forced stop leaves them */
    server_port_tunnel *e = t->list;
    t->list = e->next;
    free(e);
  }
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv);
  free(t);
}

int server_port_tunnels_reserve(server_port_tunnels *t, const char *container_id,
                                const char *preview_token, server_port_tunnel **out) {
  pthread_mutex_lock(&t->mu);
  size_t mine = 0;
  for (server_port_tunnel *e = t->list; e; e = e->next)
    mine += strcmp(e->container_id, container_id) == 0;
  server_port_tunnel *e = NULL;
  if (!t->closing && t->n < t->total && mine < t->per_sandbox && (e = calloc(1, sizeof *e))) {
    snprintf(e->container_id, sizeof e->container_id, "%s", container_id);
    snprintf(e->token, sizeof e->token, "%s", preview_token ? preview_token : "");
    e->fd = -1;
    e->t = t;
    e->next = t->list;
    t->list = e;
    t->n++;
  }
  pthread_mutex_unlock(&t->mu);
  *out = e;
  return e ? 0 : -1;
}

void server_port_tunnels_release(server_port_tunnels *t, server_port_tunnel *e) {
  if (e == NULL) return;
  pthread_mutex_lock(&t->mu);
  for (server_port_tunnel **pp = &t->list; *pp; pp = &(*pp)->next)
    if (*pp == e) {
      *pp = e->next;
      t->n--;
      break;
    }
  free(e);
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

/* Under t->mu. */
static void end_one(server_port_tunnel *e) {
  e->ended = 1;
  if (e->fd >= 0) shutdown(e->fd, SHUT_RDWR);
}

size_t server_port_tunnels_end(server_port_tunnels *t, const char *container_id, int previews_only) {
  size_t n = 0;
  if (t == NULL || container_id == NULL || !container_id[0]) return 0;
  pthread_mutex_lock(&t->mu);
  for (server_port_tunnel *e = t->list; e; e = e->next)
    if (strcmp(e->container_id, container_id) == 0 && (!previews_only || e->token[0])) {
      end_one(e);
      n++;
    }
  pthread_mutex_unlock(&t->mu);
  return n;
}

/* Under t->mu: tunnels to container_id (NULL: any). */
static size_t count_of(server_port_tunnels *t, const char *container_id) {
  size_t n = 0;
  for (server_port_tunnel *e = t->list; e; e = e->next)
    n += container_id == NULL || strcmp(e->container_id, container_id) == 0;
  return n;
}

/* Under t->mu: waits until no tunnel to container_id (NULL: any) is left,
 * at most until the monotonic time until. */
static void wait_gone(server_port_tunnels *t, const char *container_id, double until) {
  while (count_of(t, container_id) > 0 && sm_monotonic_ms() < until) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&t->cv, &t->mu, &ts);
  }
}

void server_port_tunnels_end_wait(server_port_tunnels *t, const char *container_id, int wait_ms) {
  if (t == NULL || container_id == NULL || !container_id[0]) return;
  double until = sm_monotonic_ms() + wait_ms;
  server_port_tunnels_end(t, container_id, 0);
  pthread_mutex_lock(&t->mu);
  wait_gone(t, container_id, until);
  pthread_mutex_unlock(&t->mu);
}

void server_port_tunnels_close_all(server_port_tunnels *t, int wait_ms) {
  if (t == NULL) return;
  double until = sm_monotonic_ms() + wait_ms;
  pthread_mutex_lock(&t->mu);
  t->closing = 1;
  for (server_port_tunnel *e = t->list; e; e = e->next) end_one(e);
  wait_gone(t, NULL, until);
  pthread_mutex_unlock(&t->mu);
}

size_t server_port_tunnels_count(server_port_tunnels *t) {
  pthread_mutex_lock(&t->mu);
  size_t n = t->n;
  pthread_mutex_unlock(&t->mu);
  return n;
}

const char *server_port_tunnel_end_name(server_tunnel_end e) {
  switch (e) {
  case SERVER_TUNNEL_CLOSED: return "closed";
  case SERVER_TUNNEL_ENDED: return "ended by the runner";
  case SERVER_TUNNEL_IDLE: return "idle";
  default: return "the relay ended";
  }
}

/* ---- the pump ---- */

typedef struct way {
  char *buf;
  size_t off, len;
  int eof;  /* its source ended */
  int shut; /* its destination was told (shutdown for writing) */
} way;

/* Reads fd into w; 1 when bytes came, 0 for nothing now, -1 when fd
 * failed. At its end w->eof is set. */
static int way_fill(way *w, int fd) {
  if (w->off > 0 && w->off == w->len) w->off = w->len = 0;
  if (w->len == SERVER_PORT_TUNNEL_BUF && w->off > 0) {
    memmove(w->buf, w->buf + w->off, w->len - w->off);
    w->len -= w->off;
    w->off = 0;
  }
  if (w->len == SERVER_PORT_TUNNEL_BUF) return 0;
  ssize_t n = recv(fd, w->buf + w->len, SERVER_PORT_TUNNEL_BUF - w->len, MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
  if (n == 0) w->eof = 1;
  w->len += (size_t)n;
  return n > 0;
}

/* Writes w to fd; 1 when bytes went, 0 for none, -1 when fd failed. */
static int way_flush(way *w, int fd) {
  if (w->off == w->len) return 0;
  ssize_t n = send(fd, w->buf + w->off, w->len - w->off, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
  w->off += (size_t)n;
  if (w->off == w->len) w->off = w->len = 0; /* all out: the whole room again */
  return n > 0;
}

static short way_events(const way *from, const way *to) {
  short ev = 0;
  if (!from->eof && (from->len < SERVER_PORT_TUNNEL_BUF || from->off > 0)) ev |= POLLIN;
  if (to->off < to->len) ev |= POLLOUT;
  return ev;
}

static int tunnel_ended(server_port_tunnel *e) {
  pthread_mutex_lock(&e->t->mu);
  int ended = e->ended;
  pthread_mutex_unlock(&e->t->mu);
  return ended;
}

static void tunnel_fd(server_port_tunnel *e, int fd) {
  pthread_mutex_lock(&e->t->mu);
  e->fd = fd;
  if (e->ended && fd >= 0) shutdown(fd, SHUT_RDWR);
  pthread_mutex_unlock(&e->t->mu);
}

/* One round of moves between the two sockets. 1 when a byte moved, 0 for
 * none, -1 when a socket failed. */
static int moves(struct pollfd *s, struct pollfd *c, way *up, way *down) {
  int moved = 0, rc;
  if ((c->revents & (POLLIN | POLLHUP | POLLERR)) && (c->events & POLLIN)) {
    if ((rc = way_fill(up, c->fd)) < 0) return -1;
    moved |= rc;
  } else if (c->revents & (POLLHUP | POLLERR)) {
    return -1;
  }
  if ((s->revents & (POLLIN | POLLHUP | POLLERR)) && (s->events & POLLIN)) {
    if ((rc = way_fill(down, s->fd)) < 0) return -1;
    moved |= rc;
  }
  if ((rc = way_flush(up, s->fd)) < 0) return -1;
  moved |= rc;
  if ((rc = way_flush(down, c->fd)) < 0) return -1;
  moved |= rc;
  if (up->eof && up->off == up->len && !up->shut) up->shut = 1, shutdown(s->fd, SHUT_WR);
  if (down->eof && down->off == down->len && !down->shut) down->shut = 1, shutdown(c->fd, SHUT_WR);
  return moved;
}

server_tunnel_end server_port_tunnel_pump(server_port_tunnel *e, sm_port_relay *relay, int done_fd,
                                          int client_fd, int sandbox_fd, const char *to_client,
                                          size_t n_to_client, const char *to_sandbox,
                                          size_t n_to_sandbox, server_previews *previews,
                                          const char *token) {
  way up = {malloc(SERVER_PORT_TUNNEL_BUF), 0, 0, 0, 0}, down = {malloc(SERVER_PORT_TUNNEL_BUF), 0, 0, 0, 0};
  server_tunnel_end why = SERVER_TUNNEL_RELAY_GONE;
  if (up.buf == NULL || down.buf == NULL || n_to_client > SERVER_PORT_TUNNEL_BUF ||
      n_to_sandbox > SERVER_PORT_TUNNEL_BUF) {
    free(up.buf);
    free(down.buf);
    return why;
  }
  if (n_to_sandbox) memcpy(up.buf, to_sandbox, up.len = n_to_sandbox);
  if (n_to_client) memcpy(down.buf, to_client, down.len = n_to_client);
  int fl = fcntl(client_fd, F_GETFL);
  if (fl >= 0) fcntl(client_fd, F_SETFL, fl | O_NONBLOCK);
  tunnel_fd(e, client_fd);
  double last = sm_monotonic_ms();
  for (;;) {
    double now = sm_monotonic_ms();
    server_preview p;
    if (tunnel_ended(e) ||
        (token && server_previews_find(previews, token, now, &p) != 0)) {
      why = SERVER_TUNNEL_ENDED;
      break;
    }
    if (now - last > SERVER_PORT_TUNNEL_IDLE_MS) {
      why = SERVER_TUNNEL_IDLE;
      break;
    }
    if (up.shut && down.shut) {
      why = SERVER_TUNNEL_CLOSED;
      break;
    }
    struct pollfd ex[3] = {{done_fd, POLLIN, 0},
                           {sandbox_fd, way_events(&down, &up), 0},
                           {client_fd, way_events(&up, &down), 0}};
    sm_error err = SM_ERROR_INIT;
    if (sm_port_relay_step(relay, ex, 3, STEP_MS, &err) != 0 || ex[0].revents) break;
    int rc = moves(&ex[1], &ex[2], &up, &down);
    if (rc < 0) {
      why = tunnel_ended(e) ? SERVER_TUNNEL_ENDED : SERVER_TUNNEL_CLOSED;
      break;
    }
    if (rc > 0) last = sm_monotonic_ms();
  }
  tunnel_fd(e, -1);
  free(up.buf);
  free(down.buf);
  return why;
}
