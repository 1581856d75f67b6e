/* `sandman-agent route`: the relay of the host-tool route inside a sandbox
 * (see sandman/hostroute.h and docs/host-tools.md).
 *
 * sandman starts it as a long-lived engine exec as root without
 * capabilities, so the sandbox's user can neither signal, trace nor replace
 * it, nor unlink its socket (/.sandman is root's). It listens on
 * SM_ROUTE_SOCKET, reads ONE request per connection (the head, then the
 * body by Content-Length), sends its bytes to the host as a frame, writes
 * the host's answer back and closes. It parses no more than it must to find
 * the request's end: the host parses it again. In front of the request
 * goes who sent it: the process the kernel names and its ancestors
 * (route_peer.h), from which the host knows the call it belongs to. What
 * it refuses itself (too large, chunked, malformed, too many connections,
 * too slow) it answers itself. When fd 0 ends (sandman went away) it removes the socket and
 * exits. One thread, poll(2). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <sandman/hostroute.h>

#include "agent/frame.h"
#include "common/io.h"
#include "agent/route.h"
#include "agent/route_http.h"
#include "agent/route_peer.h"

#define MAX_CONNS 32
#define READ_TIMEOUT_MS 10000  /* a request must arrive whole within this */
#define WRITE_TIMEOUT_MS 30000 /* and its answer be taken within this */
#define PATH_HELLO_MAX 3000

enum { C_FREE = 0, C_READ, C_WAIT, C_WRITE };

typedef struct conn {
  int state, fd;
  uint32_t id;
  char *buf;            /* C_READ: the request; C_WRITE: the answer */
  size_t len, cap, off; /* off: what of an answer is written */
  route_head head;
  int head_done, continued;
  long long deadline;   /* ms, monotonic; 0 none (waiting for the host) */
  route_peer peer;      /* who wrote the request, read at its first bytes */
  int writer_known;
  pid_t writer;
} conn;

static conn conns[MAX_CONNS];
static uint32_t next_id = 1;
static int host_gone;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void conn_close(conn *c) {
  if (c->fd >= 0) close(c->fd);
  free(c->buf);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

/* Frames go out with blocking writes: the host always reads them. A
 * frame's payload may come in two parts (the peer block, the request). */
static void send_frame2(int type, uint32_t id, const void *a, uint32_t alen, const void *b,
                        uint32_t blen) {
  unsigned char head[SM_FRAME_HEADER];
  agent_frame_header(head, type, id, alen + blen);
  if (common_write_all(1, head, sizeof head) != 0 || common_write_all(1, a, alen) != 0 ||
      (blen && common_write_all(1, b, blen) != 0))
    host_gone = 1;
}

static void send_frame(int type, uint32_t id, const void *payload, uint32_t len) {
  send_frame2(type, id, payload, len, NULL, 0);
}

/* Reads what the connection holds, with the credentials the kernel
 * attaches to it (SO_PASSCRED: SCM_CREDENTIALS, the pid of the process
 * that wrote it, in our pid namespace; 0 when it is outside it or, under
 * gVisor, gone). The request's writer is who is asking: its ancestors are
 * read at its first bytes, while it is there. Bytes of another process, or
 * of none the kernel names, leave the request no peer (fail closed).
 * (SO_PEERCRED would name the connecting process, but gVisor answers it
 * with the caller's own credentials.) */
static ssize_t read_with_peer(conn *c, char *buf, size_t room) {
  struct iovec iov = {buf, room};
  union {
    char buf[CMSG_SPACE(sizeof(struct ucred))];
    struct cmsghdr align;
  } ctl;
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl.buf;
  m.msg_controllen = sizeof ctl.buf;
  ssize_t n = recvmsg(c->fd, &m, MSG_CMSG_CLOEXEC);
  if (n <= 0) return n;
  struct ucred cr = {0, 0, 0};
  int have = 0;
  for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
    if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
      /* Nobody sends us descriptors: close what came. */
      int *fds = (int *)CMSG_DATA(h);
      for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) close(fds[i]);
    } else if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_CREDENTIALS &&
               h->cmsg_len >= CMSG_LEN(sizeof cr)) {
      memcpy(&cr, CMSG_DATA(h), sizeof cr);
      have = 1;
    }
  }
  if (!c->writer_known) {
    c->writer_known = 1;
    c->writer = have ? cr.pid : 0;
    c->peer.uid = have ? (uint32_t)cr.uid : UINT32_MAX;
    c->peer.gid = have ? (uint32_t)cr.gid : UINT32_MAX;
    if (c->writer > 0)
      agent_route_peer_walk("/proc", (long)c->writer, agent_route_peer_now_ticks(), &c->peer);
  } else if (!have || cr.pid != c->writer) {
    c->peer.n = 0; /* another writer: nobody's */
  }
  return n;
}

/* An answer of the relay's own; the connection then writes it and closes. */
static void answer_locally(conn *c, int status, const char *message) {
  char text[1024];
  size_t n = agent_route_http_error(status, message, text, sizeof text);
  char *copy = malloc(n ? n : 1);
  free(c->buf);
  c->buf = copy;
  c->len = copy ? n : 0;
  if (copy) memcpy(copy, text, n);
  c->off = 0;
  c->state = C_WRITE;
  c->deadline = now_ms() + WRITE_TIMEOUT_MS;
}

static void accept_one(int lfd) {
  int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  conn *c = NULL;
  for (int i = 0; i < MAX_CONNS && c == NULL; i++)
    if (conns[i].state == C_FREE) c = &conns[i];
  if (c == NULL) {
    /* Over the bound: a best-effort answer, never a wait. */
    char text[512];
    size_t n = agent_route_http_error(503, "the host-tool route is busy: too many connections",
                                      text, sizeof text);
    ssize_t w = write(fd, text, n);
    (void)w;
    close(fd);
    return;
  }
  memset(c, 0, sizeof *c);
  c->fd = fd;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
  c->state = C_READ;
  c->id = next_id++;
  if (next_id == 0) next_id = 1;
  c->deadline = now_ms() + READ_TIMEOUT_MS;
}

static void read_request(conn *c) {
  size_t total_max = SM_ROUTE_REQUEST_MAX;
  size_t want = c->head_done ? c->head.head_len + c->head.body_len : ROUTE_HEAD_MAX;
  if (c->len >= want) return;
  if (c->cap < want) {
    /* Grow by doubling up to what the request needs, never past the cap. */
    size_t cap = c->cap ? c->cap : 4096;
    while (cap < want && cap < total_max) cap *= 2;
    if (cap > total_max) cap = total_max;
    if (cap < c->len + 1) cap = c->len + 1;
    char *b = realloc(c->buf, cap);
    if (b == NULL) {
      answer_locally(c, 503, "the relay is out of memory");
      return;
    }
    c->buf = b;
    c->cap = cap;
  }
  size_t room = (c->cap < want ? c->cap : want) - c->len;
  ssize_t n = read_with_peer(c, c->buf + c->len, room);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    conn_close(c); /* gone before its request was whole */
    return;
  }
  c->len += (size_t)n;
  if (!c->head_done) {
    int st = agent_route_http_head(c->buf, c->len, total_max, &c->head);
    if (st == 0) return;
    if (st != 1) {
      answer_locally(c, st, st == 411 ? "send the body with a Content-Length (no chunked bodies)"
                            : st == 413 ? "the request is over the route's limit"
                            : st == 431 ? "the request head is over 64 KiB"
                                        : "malformed request");
      return;
    }
    c->head_done = 1;
  }
  size_t total = c->head.head_len + c->head.body_len;
  if (c->len < total) {
    if (c->head.expect_continue && !c->continued) {
      static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
      ssize_t w = write(c->fd, cont, sizeof cont - 1);
      (void)w;
      c->continued = 1;
    }
    return;
  }
  /* Whole: bytes past it (a pipelined second request) are not read. The
   * host gets who sent it in front of it. */
  unsigned char peer[ROUTE_PEER_BLOCK_MAX];
  size_t plen = agent_route_peer_encode(&c->peer, peer, sizeof peer);
  send_frame2(SM_FRAME_ROUTE_REQUEST, c->id, peer, (uint32_t)plen, c->buf, (uint32_t)total);
  free(c->buf);
  c->buf = NULL;
  c->len = c->cap = 0;
  c->state = C_WAIT;
  c->deadline = 0;
}

static void write_answer(conn *c) {
  while (c->off < c->len) {
    ssize_t n = write(c->fd, c->buf + c->off, c->len - c->off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) break;
    c->off += (size_t)n;
  }
  conn_close(c);
}

static int on_host_frame(void *ud, int type, uint32_t id, const unsigned char *payload,
                         uint32_t len) {
  (void)ud;
  if (type != SM_FRAME_ROUTE_RESPONSE) return -1;
  for (int i = 0; i < MAX_CONNS; i++) {
    conn *c = &conns[i];
    if (c->state != C_WAIT || c->id != id) continue;
    c->buf = malloc(len ? len : 1);
    if (c->buf == NULL) {
      conn_close(c);
      return 0;
    }
    memcpy(c->buf, payload, len);
    c->len = len;
    c->off = 0;
    c->state = C_WRITE;
    c->deadline = now_ms() + WRITE_TIMEOUT_MS;
    return 0;
  }
  return 0; /* its connection is gone (timed out): dropped */
}

/* sandman-tools on the call's PATH: SM_ROUTE_BIN_DIR/sandman-tools -> self,
 * replaced atomically. */
static int link_tools(const char *self) {
  if (mkdir(SM_ROUTE_BIN_DIR, 0755) != 0 && errno != EEXIST) return -1;
  char tmp[256];
  snprintf(tmp, sizeof tmp, SM_ROUTE_BIN_DIR "/.sandman-tools.%ld", (long)getpid());
  unlink(tmp);
  if (symlink(self, tmp) != 0) return -1;
  if (rename(tmp, SM_ROUTE_BIN_DIR "/sandman-tools") != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* One relay serves a sandbox: it holds /.sandman/route.lock (root's, 0600)
 * for its life. The relay of another sandman process keeps it, and this
 * one refuses to start (its process would otherwise answer the other's
 * calls). One that is exiting (its sandman let it go) gets 2 seconds. */
static int take_lock(void) {
  int fd = open("/.sandman/route.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return -1;
  for (int i = 0; i < 40; i++) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    if (errno != EWOULDBLOCK && errno != EINTR) break;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  close(fd);
  errno = EBUSY;
  return -1;
}

/* Binds under a temporary name and renames it over SM_ROUTE_SOCKET (a
 * stale socket of an earlier relay is replaced, never half there). */
static int listen_socket(struct stat *mine) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  int one = 1; /* bytes come with their writer's credentials (read_with_peer) */
  setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "/.sandman/.tools.sock.%ld", (long)getpid());
  unlink(a.sun_path);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || chmod(a.sun_path, 0666) != 0 ||
      listen(fd, 64) != 0 || rename(a.sun_path, SM_ROUTE_SOCKET) != 0 ||
      stat(SM_ROUTE_SOCKET, mine) != 0) {
    int e = errno;
    unlink(a.sun_path);
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

static void hello(void) {
  char payload[sizeof SM_ROUTE_HELLO + PATH_HELLO_MAX + 1];
  size_t n = sizeof SM_ROUTE_HELLO; /* with its NUL */
  memcpy(payload, SM_ROUTE_HELLO, n);
  const char *path = getenv("PATH");
  if (path && strlen(path) <= PATH_HELLO_MAX) {
    memcpy(payload + n, path, strlen(path));
    n += strlen(path);
  }
  send_frame(SM_FRAME_HELLO, 0, payload, (uint32_t)n);
}

static void read_host(agent_frame_reader *r) {
  static unsigned char in[65536];
  ssize_t n = read(0, in, sizeof in);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0 || agent_frame_reader_feed(r, in, (size_t)n) != 0) host_gone = 1;
}

static void expire(long long now) {
  for (int i = 0; i < MAX_CONNS; i++) {
    conn *c = &conns[i];
    if (c->state == C_FREE || c->deadline == 0 || now < c->deadline) continue;
    if (c->state == C_READ) answer_locally(c, 408, "the request did not arrive in time");
    else conn_close(c);
  }
}

int agent_route(const char *self) {
  for (int fd = 0; fd < 3; fd++)
    if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return 1;
  signal(SIGPIPE, SIG_IGN);
  umask(022);
  for (int i = 0; i < MAX_CONNS; i++) conns[i].fd = -1;
  if (self == NULL || self[0] != '/' || link_tools(self) != 0) {
    fprintf(stderr, "sandman-agent route: cannot link %s/sandman-tools: %s\n", SM_ROUTE_BIN_DIR,
            strerror(errno));
    return 1;
  }
  if (take_lock() < 0) {
    fprintf(stderr, "sandman-agent route: %s\n",
            errno == EBUSY ? "another sandman process serves the host-tool route of this sandbox"
                           : strerror(errno));
    return 3;
  }
  struct stat mine;
  int lfd = listen_socket(&mine);
  if (lfd < 0) {
    fprintf(stderr, "sandman-agent route: cannot listen on %s: %s\n", SM_ROUTE_SOCKET,
            strerror(errno));
    return 1;
  }
  hello();
  agent_frame_reader reader;
  agent_frame_reader_init(&reader, SM_FRAME_ROUTE_RESPONSE_MAX, on_host_frame, NULL);
  while (!host_gone) {
    struct pollfd pf[2 + MAX_CONNS];
    int idx[MAX_CONNS], np = 0;
    pf[np++] = (struct pollfd){.fd = 0, .events = POLLIN};
    pf[np++] = (struct pollfd){.fd = lfd, .events = POLLIN};
    long long now = now_ms(), next = 0;
    for (int i = 0; i < MAX_CONNS; i++) {
      conn *c = &conns[i];
      idx[i] = -1;
      if (c->state == C_READ || c->state == C_WRITE) {
        idx[i] = np;
        pf[np++] = (struct pollfd){.fd = c->fd, .events = c->state == C_READ ? POLLIN : POLLOUT};
      }
      if (c->deadline && (next == 0 || c->deadline < next)) next = c->deadline;
    }
    int timeout = next ? (int)(next > now ? next - now : 0) : -1;
    if (poll(pf, (nfds_t)np, timeout) < 0 && errno != EINTR) break;
    if (pf[0].revents) read_host(&reader);
    if (pf[1].revents & POLLIN) accept_one(lfd);
    for (int i = 0; i < MAX_CONNS; i++) {
      if (idx[i] < 0 || !pf[idx[i]].revents) continue;
      if (conns[i].state == C_READ) read_request(&conns[i]);
      else if (conns[i].state == C_WRITE) write_answer(&conns[i]);
    }
    expire(now_ms());
  }
  /* sandman is gone: the route goes with it (unless a newer relay's socket
   * replaced ours). */
  struct stat now_there;
  if (stat(SM_ROUTE_SOCKET, &now_there) == 0 && now_there.st_ino == mine.st_ino &&
      now_there.st_dev == mine.st_dev)
    unlink(SM_ROUTE_SOCKET);
  agent_frame_reader_dispose(&reader);
  return 0;
}
