/* `sandman-agent ports` (port_relay.h): TCP connections to the sandbox's
 * loopback carried over the exec's stdin and stdout in frames.
 *
 * For each connection the host opens (SM_FRAME_PORT_OPEN) the relay
 * connects to 127.0.0.1:PORT (then [::1]:PORT, where servers that listen
 * on "localhost" may be) and moves bytes both ways. Flow control is a
 * window per connection and direction (SM_PORT_WINDOW): the relay reads a
 * socket only while the host has room for what it sends, and holds at
 * most a window of the host's bytes per connection, so a slow reader on
 * either side stops its own connection and never the others, and memory
 * stays bounded. Frames go out with blocking writes: the host always reads
 * them (it never blocks on anything but the exec stream). One thread,
 * poll(2); libc only, like the rest of the agent. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/frame.h"
#include "agent/port_relay.h"
#include "common/io.h"

#define ACK_EVERY (32u << 10) /* bytes written to a socket before they are acknowledged */

typedef struct pconn {
  int used;
  uint32_t id;
  int fd;
  int connecting, tried_v6;
  unsigned port;
  unsigned char *in; /* the host's bytes not yet written to the socket: [off, len) */
  size_t off, len;
  uint32_t credit;   /* bytes we may still send the host */
  uint32_t written;  /* written to the socket, not yet acknowledged */
  int host_eof, sock_eof, wr_shut;
} pconn;

static pconn conns[AGENT_PORTS_MAX_CONNS];
static int host_gone, broken;
static unsigned char frame_out[SM_FRAME_HEADER + SM_FRAME_DATA_MAX];

/* The payload is already in frame_out after the header. */
static void send_frame(int type, uint32_t id, uint32_t len) {
  agent_frame_header(frame_out, type, id, len);
  if (common_write_all(1, frame_out, SM_FRAME_HEADER + (size_t)len) != 0) host_gone = 1;
}

static void send_u32(int type, uint32_t id, uint32_t v) {
  agent_frame_put_u32(frame_out + SM_FRAME_HEADER, v);
  send_frame(type, id, 4);
}

static void conn_free(pconn *c) {
  if (c->fd >= 0) close(c->fd);
  free(c->in);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

/* The connection is over for us: the host hears it once. */
static void conn_end(pconn *c) {
  send_frame(SM_FRAME_PORT_CLOSE, c->id, 0);
  conn_free(c);
}

static pconn *find(uint32_t id) {
  for (int i = 0; i < AGENT_PORTS_MAX_CONNS; i++)
    if (conns[i].used && conns[i].id == id) return &conns[i];
  return NULL;
}

/* Starts a non-blocking connect to the loopback of the family: 0 (done or
 * in progress) or an errno. */
static int start_connect(pconn *c, int v6) {
  if (c->fd >= 0) close(c->fd);
  c->fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) return errno;
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int rc;
  if (v6) {
    struct sockaddr_in6 a;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons((uint16_t)c->port);
    a.sin6_addr = in6addr_loopback;
    rc = connect(c->fd, (struct sockaddr *)&a, sizeof a);
  } else {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)c->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = connect(c->fd, (struct sockaddr *)&a, sizeof a);
  }
  if (rc == 0) {
    c->connecting = 0;
    return 0;
  }
  if (errno == EINPROGRESS) {
    c->connecting = 1;
    return 0;
  }
  return errno;
}

/* The connect's outcome: told to the host; a failure on IPv4 tries IPv6
 * first (a server listening on "localhost" may be there only). */
static void connected(pconn *c, int e) {
  if (e != 0 && !c->tried_v6) {
    c->tried_v6 = 1;
    int e6 = start_connect(c, 1);
    if (e6 == 0 && c->connecting) return;
    if (e6 == 0) e = 0;
  }
  c->connecting = 0;
  send_u32(SM_FRAME_PORT_OPENED, c->id, (uint32_t)e);
  if (e != 0) conn_free(c);
}

static void open_conn(uint32_t id, const unsigned char *p, uint32_t len) {
  if (id == 0 || find(id) != NULL) {
    fprintf(stderr, "sandman-agent ports: protocol error: connection id %u reused\n", id);
    broken = 1;
    return;
  }
  unsigned port = len == 2 ? (unsigned)p[0] << 8 | p[1] : 0;
  pconn *c = NULL;
  for (int i = 0; i < AGENT_PORTS_MAX_CONNS && c == NULL; i++)
    if (!conns[i].used) c = &conns[i];
  if (port == 0 || c == NULL) {
    send_u32(SM_FRAME_PORT_OPENED, id, port == 0 ? EINVAL : EMFILE);
    return;
  }
  memset(c, 0, sizeof *c);
  c->used = 1;
  c->id = id;
  c->fd = -1;
  c->port = port;
  c->credit = SM_PORT_WINDOW;
  int e = start_connect(c, 0);
  if (e != 0 || !c->connecting) connected(c, e);
}

/* Bytes from the host for the socket; past the window the host broke its
 * side of the flow control, and the connection ends. */
static void take_data(pconn *c, const unsigned char *p, uint32_t len) {
  if (c->connecting || c->host_eof || c->len - c->off + len > SM_PORT_WINDOW) {
    conn_end(c);
    return;
  }
  if (c->in == NULL && (c->in = malloc(SM_PORT_WINDOW)) == NULL) {
    conn_end(c);
    return;
  }
  if (c->len + len > SM_PORT_WINDOW) {
    memmove(c->in, c->in + c->off, c->len - c->off);
    c->len -= c->off;
    c->off = 0;
  }
  memcpy(c->in + c->len, p, len);
  c->len += len;
}

static void flush_to_socket(pconn *c);

static int on_host_frame(void *ud, int type, uint32_t id, const unsigned char *p, uint32_t len) {
  (void)ud;
  if (type == SM_FRAME_PORT_OPEN) {
    open_conn(id, p, len);
    return broken ? -1 : 0;
  }
  pconn *c = find(id);
  switch (type) {
    case SM_FRAME_PORT_DATA:
      if (c && len > 0) take_data(c, p, len);
      return 0;
    case SM_FRAME_PORT_ACK: {
      if (len != 4) {
        fprintf(stderr, "sandman-agent ports: protocol error: an acknowledgement of %u bytes\n",
                len);
        return -1;
      }
      uint32_t n = agent_frame_get_u32(p);
      if (c && (uint64_t)c->credit + n <= SM_PORT_WINDOW) c->credit += n;
      else if (c) conn_end(c); /* more acknowledged than was sent */
      return 0;
    }
    case SM_FRAME_PORT_EOF:
      /* Passed on now when nothing waits to be written: no poll event
       * would bring the connection back here otherwise. */
      if (c) c->host_eof = 1;
      if (c && !c->connecting) flush_to_socket(c);
      return 0;
    case SM_FRAME_PORT_CLOSE:
      if (c) conn_free(c);
      return 0;
    default:
      fprintf(stderr, "sandman-agent ports: protocol error: frame type '%c'\n", type);
      return -1;
  }
}

/* Writes what the socket takes of the host's bytes; acknowledges them;
 * half-closes once the host's side ended and everything is out. */
static void flush_to_socket(pconn *c) {
  while (c->off < c->len) {
    ssize_t n = write(c->fd, c->in + c->off, c->len - c->off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) {
      conn_end(c);
      return;
    }
    c->off += (size_t)n;
    c->written += (uint32_t)n;
  }
  if (c->off == c->len) c->off = c->len = 0;
  if (c->written >= ACK_EVERY || (c->written > 0 && c->len == 0)) {
    send_u32(SM_FRAME_PORT_ACK, c->id, c->written);
    c->written = 0;
  }
  if (c->host_eof && c->len == 0 && !c->wr_shut) {
    shutdown(c->fd, SHUT_WR);
    c->wr_shut = 1;
  }
  if (c->wr_shut && c->sock_eof) conn_end(c);
}

/* One read from the socket, within the host's room, sent as one frame. */
static void read_socket(pconn *c) {
  size_t room = c->credit < SM_FRAME_DATA_MAX ? c->credit : SM_FRAME_DATA_MAX;
  ssize_t n = read(c->fd, frame_out + SM_FRAME_HEADER, room);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n < 0) {
    conn_end(c); /* reset */
    return;
  }
  if (n == 0) {
    c->sock_eof = 1;
    send_frame(SM_FRAME_PORT_EOF, c->id, 0);
    if (c->wr_shut) conn_end(c);
    return;
  }
  c->credit -= (uint32_t)n;
  send_frame(SM_FRAME_PORT_DATA, c->id, (uint32_t)n);
}

static void read_host(agent_frame_reader *r) {
  static unsigned char in[65536];
  ssize_t n = read(0, in, sizeof in);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    host_gone = 1;
    return;
  }
  if (agent_frame_reader_feed(r, in, (size_t)n) != 0) broken = 1;
}

/* The events a connection waits for (0: none now). */
static short wanted(const pconn *c) {
  if (c->connecting) return POLLOUT;
  short ev = 0;
  if (!c->sock_eof && c->credit > 0) ev |= POLLIN;
  if (c->off < c->len) ev |= POLLOUT;
  return ev;
}

static void serve(pconn *c, short revents) {
  if (c->connecting) {
    int e = 0;
    socklen_t el = sizeof e;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0) e = errno;
    connected(c, e);
    return;
  }
  if (revents & (POLLOUT | POLLERR | POLLHUP)) flush_to_socket(c);
  if (c->used && (revents & (POLLIN | POLLERR | POLLHUP)) && !c->sock_eof && c->credit > 0)
    read_socket(c);
}

int agent_ports(void) {
  for (int fd = 0; fd < 3; fd++)
    if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return 1;
  signal(SIGPIPE, SIG_IGN);
  for (int i = 0; i < AGENT_PORTS_MAX_CONNS; i++) conns[i].fd = -1;
  memcpy(frame_out + SM_FRAME_HEADER, SM_PORTS_HELLO, sizeof SM_PORTS_HELLO - 1);
  send_frame(SM_FRAME_HELLO, 0, sizeof SM_PORTS_HELLO - 1);
  agent_frame_reader reader;
  agent_frame_reader_init(&reader, SM_FRAME_DATA_MAX, on_host_frame, NULL);
  static struct pollfd pf[1 + AGENT_PORTS_MAX_CONNS];
  static int idx[AGENT_PORTS_MAX_CONNS];
  while (!host_gone && !broken) {
    int np = 0;
    pf[np++] = (struct pollfd){.fd = 0, .events = POLLIN};
    for (int i = 0; i < AGENT_PORTS_MAX_CONNS; i++) {
      idx[i] = -1;
      short ev = conns[i].used ? wanted(&conns[i]) : 0;
      if (ev) {
        idx[i] = np;
        pf[np++] = (struct pollfd){.fd = conns[i].fd, .events = ev};
      }
    }
    if (poll(pf, (nfds_t)np, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    /* The sockets before the host's frames: a frame may end a connection
     * and another take its slot, which this poll knew nothing of. */
    for (int i = 0; i < AGENT_PORTS_MAX_CONNS && !host_gone; i++)
      if (idx[i] >= 0 && pf[idx[i]].revents && conns[i].used) serve(&conns[i], pf[idx[i]].revents);
    if (pf[0].revents && !host_gone) read_host(&reader);
  }
  for (int i = 0; i < AGENT_PORTS_MAX_CONNS; i++)
    if (conns[i].used) conn_free(&conns[i]);
  agent_frame_reader_dispose(&reader);
  return broken ? 2 : 0;
}
