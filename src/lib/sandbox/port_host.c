/* The host side of port forwarding (sandman/ports.h): the relay's frames
 * (agent/frame.h, SM_FRAME_PORT_*) to and from `sandman-agent ports`, and
 * the client sockets they carry.
 *
 * Two threads meet here. The call's thread (sm_run) hands over what the
 * program in the sandbox wrote (on_output): it only appends the bytes to
 * an inbox and wakes the stepping thread, so it never blocks on a client.
 * Everything else, every connection's state included, belongs to the
 * stepping thread: it parses the inbox, writes to the client sockets,
 * reads them within each connection's window and queues frames for the
 * program's stdin (the call's input channel, sm_tty). */
#include <sandman/ports.h>
#include <sandman/terminal.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/frame.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "sandbox/agent.h"

#define ACK_EVERY (32u << 10) /* bytes written to a client before they are acknowledged */
/* Frames waiting for the program's input channel; sockets are not read
 * while more than this waits. */
#define PENDING_HIGH ((size_t)256 << 10)
/* The program's bytes not yet parsed: each connection's window, and room
 * for its small frames. */
#define INBOX_MAX ((size_t)SM_PORT_RELAY_CONNS_MAX * (SM_PORT_WINDOW + 4096) + (64u << 10))
#define RETRY_MS 5 /* the input channel was full: try again this soon */
/* Frames queued at most: PENDING_HIGH, one more data frame, and the
 * connections' small frames (acknowledgements, ends) meanwhile. */
#define PENDING_MAX ((size_t)4 << 20)

typedef struct hconn {
  int used;
  uint32_t id;
  int fd;
  unsigned port;
  int opened;            /* the program connected to the port */
  unsigned char *out;    /* the program's bytes for the client: [off, len) */
  size_t off, len;
  uint32_t credit;       /* bytes we may still send the program */
  uint32_t written;      /* written to the client, not yet acknowledged */
  int sock_eof;          /* the client sent its end (told to the program) */
  int far_eof, wr_shut;  /* the program's side ended; passed on to the client */
  int far_closed;        /* the program is done with it */
  unsigned long long bytes_in, bytes_out;
} hconn;

struct sm_port_relay {
  sm_tty *tty;
  char program[128];
  const char *argv[2];
  int wake;                  /* eventfd: the inbox has bytes */
  pthread_mutex_t mu;        /* guards inbox, ready */
  common_buf inbox;
  int inbox_over, ready;
  /* the stepping thread's own */
  agent_frame_reader reader;
  common_buf pending; /* frames for the program not yet queued */
  size_t pending_off;
  hconn conns[SM_PORT_RELAY_CONNS_MAX];
  uint32_t next_id;
  int broken;
  sm_port_event_fn on_event;
  void *event_ud;
};

/* ---- the call's thread ---- */

static int relay_output(void *ud, int stream, const char *data, size_t len) {
  sm_port_relay *r = ud;
  if (stream == 2) return 0; /* its diagnostics: the call's result keeps them */
  pthread_mutex_lock(&r->mu);
  if (common_buf_append(&r->inbox, data, len) != 0)
    r->inbox_over = 1; /* the program sent past every window: a broken relay */
  pthread_mutex_unlock(&r->mu);
  uint64_t one = 1;
  (void)!write(r->wake, &one, sizeof one);
  return 0;
}

/* ---- frames to the program ---- */

static void queue_frame(sm_port_relay *r, int type, uint32_t id, const void *p, uint32_t len) {
  unsigned char h[SM_FRAME_HEADER];
  agent_frame_header(h, type, id, len);
  if (common_buf_append(&r->pending, h, sizeof h) != 0 ||
      (len > 0 && common_buf_append(&r->pending, p, len) != 0))
    r->broken = 1;
}

static void queue_u32(sm_port_relay *r, int type, uint32_t id, uint32_t v) {
  unsigned char b[4];
  agent_frame_put_u32(b, v);
  queue_frame(r, type, id, b, 4);
}

/* Moves pending frames into the input channel as far as it takes them. */
static void flush_pending(sm_port_relay *r) {
  while (r->pending_off < r->pending.len) {
    size_t n = r->pending.len - r->pending_off;
    if (n > SM_FRAME_DATA_MAX) n = SM_FRAME_DATA_MAX;
    sm_error err = SM_ERROR_INIT;
    if (sm_tty_write(r->tty, r->pending.data + r->pending_off, n, &err) != 0) return;
    r->pending_off += n;
  }
  common_buf_reset(&r->pending);
  r->pending_off = 0;
}

static size_t pending_len(const sm_port_relay *r) { return r->pending.len - r->pending_off; }

/* ---- connections ---- */

static hconn *find(sm_port_relay *r, uint32_t id) {
  for (size_t i = 0; i < SM_PORT_RELAY_CONNS_MAX; i++)
    if (r->conns[i].used && r->conns[i].id == id) return &r->conns[i];
  return NULL;
}

static void event(sm_port_relay *r, sm_port_event ev, const hconn *c, int e) {
  if (r->on_event) r->on_event(r->event_ud, ev, c->port, e, c->bytes_in, c->bytes_out);
}

static void conn_free(sm_port_relay *r, hconn *c, int tell_far) {
  if (tell_far && !c->far_closed) queue_frame(r, SM_FRAME_PORT_CLOSE, c->id, NULL, 0);
  if (c->opened) event(r, SM_PORT_CLOSED, c, 0);
  if (c->fd >= 0) close(c->fd);
  free(c->out);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

/* A connection the client or the relay broke: the client sees a reset. */
static void conn_reset(sm_port_relay *r, hconn *c) {
  struct linger lg = {1, 0};
  if (c->fd >= 0) setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  conn_free(r, c, 1);
}

/* The program's bytes for the client; past the window it broke the flow
 * control, and the connection ends. */
static void take_data(sm_port_relay *r, hconn *c, const unsigned char *p, uint32_t len) {
  if (!c->opened || c->far_eof || c->len - c->off + len > SM_PORT_WINDOW) {
    conn_reset(r, c);
    return;
  }
  if (c->out == NULL && (c->out = malloc(SM_PORT_WINDOW)) == NULL) {
    conn_reset(r, c);
    return;
  }
  if (c->len + len > SM_PORT_WINDOW) {
    memmove(c->out, c->out + c->off, c->len - c->off);
    c->len -= c->off;
    c->off = 0;
  }
  memcpy(c->out + c->len, p, len);
  c->len += len;
}

static int on_frame(void *ud, int type, uint32_t id, const unsigned char *p, uint32_t len) {
  sm_port_relay *r = ud;
  if (type == SM_FRAME_HELLO) {
    size_t hl = sizeof SM_PORTS_HELLO - 1;
    if (len != hl || memcmp(p, SM_PORTS_HELLO, hl) != 0) return -1;
    pthread_mutex_lock(&r->mu);
    r->ready = 1;
    pthread_mutex_unlock(&r->mu);
    return 0;
  }
  if (type != SM_FRAME_PORT_OPENED && type != SM_FRAME_PORT_DATA && type != SM_FRAME_PORT_ACK &&
      type != SM_FRAME_PORT_EOF && type != SM_FRAME_PORT_CLOSE)
    return -1; /* nothing the relay ever sends */
  hconn *c = find(r, id);
  if (c == NULL) return 0; /* over: its frames crossed ours on the wire */
  switch (type) {
  case SM_FRAME_PORT_OPENED: {
    uint32_t e = len == 4 ? agent_frame_get_u32(p) : EPROTO;
    if (c->opened) return -1;
    if (e != 0) {
      event(r, SM_PORT_REFUSED, c, (int)e);
      c->far_closed = 1; /* the program forgot it already */
      conn_reset(r, c);
      return 0;
    }
    c->opened = 1;
    c->credit = SM_PORT_WINDOW;
    event(r, SM_PORT_OPENED, c, 0);
    return 0;
  }
  case SM_FRAME_PORT_DATA:
    if (len > 0) take_data(r, c, p, len);
    return 0;
  case SM_FRAME_PORT_ACK: {
    uint32_t n = len == 4 ? agent_frame_get_u32(p) : UINT32_MAX;
    if ((uint64_t)c->credit + n <= SM_PORT_WINDOW) c->credit += n;
    else conn_reset(r, c); /* more acknowledged than was sent */
    return 0;
  }
  case SM_FRAME_PORT_EOF:
    c->far_eof = 1;
    return 0;
  case SM_FRAME_PORT_CLOSE:
    c->far_closed = 1;
    return 0;
  default:
    return -1;
  }
}

/* Writes what the client takes; acknowledges it; passes the program's end
 * on once everything is out; frees the connection once both are done. */
static void flush_to_client(sm_port_relay *r, hconn *c) {
  while (c->off < c->len) {
    ssize_t n = send(c->fd, c->out + c->off, c->len - c->off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) {
      conn_reset(r, c);
      return;
    }
    c->off += (size_t)n;
    c->written += (uint32_t)n;
    c->bytes_out += (unsigned long long)n;
  }
  if (c->off == c->len) c->off = c->len = 0;
  if (c->written >= ACK_EVERY || (c->written > 0 && c->len == 0)) {
    if (!c->far_closed) queue_u32(r, SM_FRAME_PORT_ACK, c->id, c->written);
    c->written = 0;
  }
  if ((c->far_eof || c->far_closed) && c->len == 0 && !c->wr_shut) {
    shutdown(c->fd, SHUT_WR);
    c->wr_shut = 1;
  }
  if (c->far_closed && c->len == 0) conn_free(r, c, 0);
}

/* One read from the client within the program's room, sent as one frame. */
static void read_client(sm_port_relay *r, hconn *c) {
  unsigned char buf[SM_FRAME_DATA_MAX];
  size_t room = c->credit < sizeof buf ? c->credit : sizeof buf;
  ssize_t n = recv(c->fd, buf, room, 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n < 0) {
    conn_reset(r, c);
    return;
  }
  if (n == 0) {
    c->sock_eof = 1;
    queue_frame(r, SM_FRAME_PORT_EOF, c->id, NULL, 0);
    return;
  }
  c->credit -= (uint32_t)n;
  c->bytes_in += (unsigned long long)n;
  queue_frame(r, SM_FRAME_PORT_DATA, c->id, buf, (uint32_t)n);
}

/* The events a connection waits for now (0: none). */
static short wanted(const sm_port_relay *r, const hconn *c) {
  short ev = 0;
  if (c->opened && !c->sock_eof && !c->far_closed && c->credit > 0 && pending_len(r) < PENDING_HIGH)
    ev |= POLLIN;
  if (c->off < c->len) ev |= POLLOUT;
  return ev;
}

/* ---- the stepping thread ---- */

/* Parses what the program sent since the last round. */
static int take_inbox(sm_port_relay *r, sm_error *err) {
  uint64_t v;
  (void)!read(r->wake, &v, sizeof v);
  pthread_mutex_lock(&r->mu);
  common_buf in = r->inbox;
  int over = r->inbox_over;
  common_buf_init(&r->inbox, INBOX_MAX);
  pthread_mutex_unlock(&r->mu);
  int rc = over ? -1 : agent_frame_reader_feed(&r->reader, (const unsigned char *)in.data, in.len);
  common_buf_dispose(&in);
  if (rc != 0) {
    r->broken = 1;
    return sm_error_set(err, SM_EPROTOCOL, "sandman's port relay in the sandbox broke its protocol");
  }
  return 0;
}

int sm_port_relay_step(sm_port_relay *r, struct pollfd *extra, size_t n_extra, int timeout_ms,
                       sm_error *err) {
  if (r->broken)
    return sm_error_set(err, SM_EPROTOCOL, "sandman's port relay in the sandbox broke its protocol");
  struct pollfd pf[1 + SM_PORT_RELAY_CONNS_MAX + 8];
  int idx[SM_PORT_RELAY_CONNS_MAX];
  if (n_extra > 8) return sm_error_set(err, SM_EINVAL, "at most 8 descriptors of the caller");
  nfds_t np = 0;
  pf[np++] = (struct pollfd){.fd = r->wake, .events = POLLIN};
  for (size_t i = 0; i < n_extra; i++) pf[np++] = extra[i];
  for (size_t i = 0; i < SM_PORT_RELAY_CONNS_MAX; i++) {
    idx[i] = -1;
    short ev = r->conns[i].used ? wanted(r, &r->conns[i]) : 0;
    if (ev) {
      idx[i] = (int)np;
      pf[np++] = (struct pollfd){.fd = r->conns[i].fd, .events = ev};
    }
  }
  if (pending_len(r) > 0 && (timeout_ms < 0 || timeout_ms > RETRY_MS)) timeout_ms = RETRY_MS;
  int n = poll(pf, np, timeout_ms);
  if (n < 0 && errno != EINTR) return sm_error_set_errno(err, SM_EIO, errno, "poll");
  for (size_t i = 0; i < n_extra; i++) extra[i].revents = n > 0 ? pf[1 + i].revents : 0;
  for (size_t i = 0; n > 0 && i < SM_PORT_RELAY_CONNS_MAX; i++) {
    hconn *c = &r->conns[i];
    short re = idx[i] >= 0 ? pf[idx[i]].revents : 0;
    if (re & (POLLOUT | POLLERR | POLLHUP)) flush_to_client(r, c);
    if (c->used && (re & (POLLIN | POLLERR | POLLHUP)) && wanted(r, c) & POLLIN) read_client(r, c);
  }
  int rc = n > 0 && pf[0].revents ? take_inbox(r, err) : 0;
  /* What the frames changed: bytes to write, ends to pass on. */
  for (size_t i = 0; rc == 0 && i < SM_PORT_RELAY_CONNS_MAX; i++)
    if (r->conns[i].used && r->conns[i].opened) flush_to_client(r, &r->conns[i]);
  flush_pending(r);
  if (rc == 0 && r->broken)
    rc = sm_error_set(err, SM_ENOMEM, "no memory for the port relay's frames");
  return rc;
}

int sm_port_relay_add(sm_port_relay *r, int fd, unsigned port, sm_error *err) {
  cleanup_fd int held = fd; /* ours until a connection slot takes it */
  if (port < 1 || port > 65535)
    return sm_error_set(err, SM_EINVAL, "port %u is not between 1 and 65535", port);
  hconn *c = NULL;
  for (size_t i = 0; i < SM_PORT_RELAY_CONNS_MAX && c == NULL; i++)
    if (!r->conns[i].used) c = &r->conns[i];
  if (c == NULL)
    return sm_error_set(err, SM_EBUSY, "%d connections are relayed already",
                        SM_PORT_RELAY_CONNS_MAX);
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
    return sm_error_set_errno(err, SM_EIO, errno, "fcntl");
  memset(c, 0, sizeof *c);
  c->used = 1;
  c->id = r->next_id++;
  c->fd = common_steal_fd(&held);
  c->port = port;
  unsigned char p[2] = {(unsigned char)(port >> 8), (unsigned char)port};
  queue_frame(r, SM_FRAME_PORT_OPEN, c->id, p, 2);
  flush_pending(r);
  return 0;
}

/* ---- life ---- */

int sm_port_relay_new(sm_port_relay **out, sm_error *err) {
  *out = NULL;
  cleanup_free sm_port_relay *r = calloc(1, sizeof *r);
  if (r == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  int rc = sm_tty_new(&r->tty, 0, 0, err);
  if (rc != 0) return rc;
  r->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (r->wake < 0) {
    sm_tty_free(r->tty);
    return sm_error_set_errno(err, SM_EIO, errno, "eventfd");
  }
  pthread_mutex_init(&r->mu, NULL);
  common_buf_init(&r->inbox, INBOX_MAX);
  common_buf_init(&r->pending, PENDING_MAX);
  agent_frame_reader_init(&r->reader, SM_FRAME_DATA_MAX, on_frame, r);
  for (size_t i = 0; i < SM_PORT_RELAY_CONNS_MAX; i++) r->conns[i].fd = -1;
  r->next_id = 1;
  sandbox_agent_binary_path(r->program, sizeof r->program);
  r->argv[0] = r->program;
  r->argv[1] = "ports";
  *out = steal_pointer(&r);
  return 0;
}

void sm_port_relay_free(sm_port_relay *r) {
  if (r == NULL) return;
  for (size_t i = 0; i < SM_PORT_RELAY_CONNS_MAX; i++)
    if (r->conns[i].used) conn_free(r, &r->conns[i], 0);
  agent_frame_reader_dispose(&r->reader);
  common_buf_dispose(&r->inbox);
  common_buf_dispose(&r->pending);
  pthread_mutex_destroy(&r->mu);
  close(r->wake);
  sm_tty_free(r->tty);
  free(r);
}

void sm_port_relay_on_event(sm_port_relay *r, sm_port_event_fn fn, void *ud) {
  r->on_event = fn;
  r->event_ud = ud;
}

void sm_port_relay_request(sm_port_relay *r, sm_run_request *req) {
  req->argv = r->argv;
  req->argc = 2;
  req->tty = r->tty;
  req->on_output = relay_output;
  req->on_output_ud = r;
  req->stdout_forward_only = 1;
  req->settings.timeout_s = 0;
  req->workspace = NULL;
}

int sm_port_relay_ready(sm_port_relay *r) {
  pthread_mutex_lock(&r->mu);
  int ready = r->ready;
  pthread_mutex_unlock(&r->mu);
  return ready;
}

size_t sm_port_relay_connections(sm_port_relay *r) {
  size_t n = 0;
  for (size_t i = 0; i < SM_PORT_RELAY_CONNS_MAX; i++) n += r->conns[i].used != 0;
  return n;
}

void sm_port_relay_end(sm_port_relay *r) { sm_tty_end_input(r->tty); }
