/* sandman-egress serve: the egress proxy of network mode allowlist, one
 * per instance, in its own container on its outbound network (see
 * docs/network.md). It listens on nothing but a unix socket in a volume
 * that only the sandboxes' relays mount (proxy_relay.c). For each
 * connection: the policy the relay brings in its preamble (proxy_io.h),
 * which sandman wrote into that sandbox's relay; the request head parsed
 * with hard caps; the destination checked by name, then resolved here and
 * each address checked, and the connection made to an address that passed
 * (no gap for DNS rebinding). CONNECT is tunnelled untouched (no TLS
 * interception); plain HTTP must come in absolute form with a Host that
 * agrees. Every decision is one JSON line on stdout, which sandman collects
 * from the container's log into the audit trail.
 *
 * Static, libc only (built with musl when there), no shell in its image. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "egress/egress_http.h"
#include "egress/egress_policy.h"
#include "egress_proxy/proxy_io.h"

#define MAX_ADDRS 16
#define SOURCES 1024

typedef struct conf {
  const char *socket_path;
  int max_conns, max_per_sandbox;
  int idle_s, head_s, connect_s;
} conf;

static conf C = {NULL, 512, 64, 300, 30, 10};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int active;
/* Connections at once per sandbox, by the name its policy gives. */
static struct {
  char sandbox[EG_ID_MAX];
  int n;
} sources[SOURCES];

/* ---- log lines ---- */

typedef struct line {
  char buf[4096];
  size_t n;
} line;

static void put(line *l, const char *s) {
  size_t k = strlen(s);
  if (l->n + k >= sizeof l->buf - 2) k = sizeof l->buf - 2 - l->n;
  memcpy(l->buf + l->n, s, k);
  l->n += k;
}

static void put_str(line *l, const char *key, const char *v) {
  if (v == NULL || *v == '\0') return;
  char tmp[1200];
  size_t t = 0;
  int w = snprintf(tmp, sizeof tmp, ",\"%s\":\"", key);
  t = (size_t)(w > 0 ? w : 0);
  for (const unsigned char *p = (const unsigned char *)v; *p && t < sizeof tmp - 8; p++) {
    if (*p == '"' || *p == '\\') {
      tmp[t++] = '\\';
      tmp[t++] = (char)*p;
    } else if (*p < 0x20 || *p >= 0x7f) {
      t += (size_t)snprintf(tmp + t, sizeof tmp - t, "\\u%04x", *p);
    } else {
      tmp[t++] = (char)*p;
    }
  }
  tmp[t++] = '"';
  tmp[t] = '\0';
  put(l, tmp);
}

static void put_num(line *l, const char *key, long long v) {
  char tmp[64];
  snprintf(tmp, sizeof tmp, ",\"%s\":%lld", key, v);
  put(l, tmp);
}

static void emit(line *l) {
  l->buf[l->n++] = '}';
  l->buf[l->n++] = '\n';
  pthread_mutex_lock(&mu);
  size_t off = 0;
  while (off < l->n) {
    ssize_t w = write(STDOUT_FILENO, l->buf + off, l->n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += (size_t)w;
  }
  pthread_mutex_unlock(&mu);
}

/* ---- one connection ---- */

typedef struct conn {
  int cfd, ufd;
  double t0_ms, t0;
  eg_policy pol;
  int have_pol, counted;
  eg_request req;
  int have_req;
  char dst_ip[64];
  long long bytes_in, bytes_out;
  char buf[EG_HEAD_MAX + 1];
  size_t len;
} conn;

static void log_event(conn *c, const char *event, int status, const char *rule, const char *reason) {
  line l = {.n = 0};
  char t[64];
  snprintf(t, sizeof t, "{\"event\":\"%s\",\"time\":%.3f", event, c->t0);
  put(&l, t);
  if (c->have_pol) {
    put_str(&l, "sandbox", c->pol.sandbox);
    put_str(&l, "agent", c->pol.agent);
    put_str(&l, "project", c->pol.project);
    put_str(&l, "run_id", c->pol.run);
    put_str(&l, "worker", c->pol.worker);
  }
  if (c->have_req) {
    put_str(&l, "method", c->req.method);
    put_str(&l, "dst_host", c->req.target.host);
    put_num(&l, "dst_port", c->req.target.port);
  }
  put_str(&l, "dst_ip", c->dst_ip);
  if (status) put_num(&l, "status", status);
  put_str(&l, "rule", rule);
  put_str(&l, "reason", reason);
  if (strcmp(event, "egress.denied") != 0) {
    put_num(&l, "bytes_in", c->bytes_in);
    put_num(&l, "bytes_out", c->bytes_out);
  }
  put_num(&l, "duration_ms", (long long)(eg_mono_ms() - c->t0_ms + 0.5));
  emit(&l);
}

static void answer(conn *c, int status, const char *text, const char *reason) {
  char body[1200], head[256];
  int bl = snprintf(body, sizeof body, "sandman egress: %s\n", reason ? reason : text);
  if (bl < 0) bl = 0;
  if ((size_t)bl >= sizeof body) bl = (int)sizeof body - 1;
  int hl = snprintf(head, sizeof head,
                    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                    "Connection: close\r\n\r\n",
                    status, text, bl);
  if (eg_send_all(c->cfd, head, (size_t)hl) == 0) eg_send_all(c->cfd, body, (size_t)bl);
}

static void deny(conn *c, int status, const char *text, const char *rule, const char *reason) {
  char msg[1200];
  if (c->have_req)
    snprintf(msg, sizeof msg, "%s:%d refused: %s", c->req.target.host, c->req.target.port,
             rule ? rule : reason);
  else
    snprintf(msg, sizeof msg, "refused: %s", rule ? rule : reason);
  answer(c, status, text, msg);
  log_event(c, "egress.denied", status, rule, reason);
}

static void addr_from_sockaddr(const struct sockaddr_storage *ss, eg_addr *out) {
  memset(out, 0, sizeof *out);
  if (ss->ss_family == AF_INET) {
    out->family = 4;
    memcpy(out->b, &((const struct sockaddr_in *)ss)->sin_addr, 4);
  } else {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a)) {
      out->family = 4;
      memcpy(out->b, a->s6_addr + 12, 4);
    } else {
      out->family = 6;
      memcpy(out->b, a->s6_addr, 16);
    }
  }
}

/* Reads exactly n bytes before the deadline: 0, or -1. */
static int read_exact(int fd, char *p, size_t n, double deadline) {
  while (n > 0) {
    int left = (int)(deadline - eg_mono_ms());
    if (left <= 0 || eg_wait_fd(fd, POLLIN, left) <= 0) return -1;
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* The relay's preamble: the sandbox's policy (proxy_io.h). The line is read
 * a byte at a time so that nothing of the request after it is taken. */
static int read_policy(conn *c, char *why, size_t why_len) {
  double deadline = eg_mono_ms() + C.head_s * 1000.0;
  char pre[EG_PREAMBLE_MAX + 1];
  size_t n = 0;
  for (;;) {
    if (n == EG_PREAMBLE_MAX || read_exact(c->cfd, pre + n, 1, deadline) != 0)
      return egress_fail(why, why_len, "no relay preamble (not a sandbox's relay)");
    if (pre[n++] == '\n') break;
  }
  pre[n - 1] = '\0';
  size_t ml = sizeof EG_RELAY_MAGIC - 1, len = 0;
  if (n - 1 <= ml || memcmp(pre, EG_RELAY_MAGIC, ml) != 0)
    return egress_fail(why, why_len, "a bad relay preamble");
  for (const char *d = pre + ml; *d; d++) {
    if (*d < '0' || *d > '9' || len > EG_POLICY_MAX_BYTES)
      return egress_fail(why, why_len, "a bad relay preamble (the policy's length)");
    len = len * 10 + (size_t)(*d - '0');
  }
  if (len > EG_POLICY_MAX_BYTES)
    return egress_fail(why, why_len, "the policy is over %d bytes", EG_POLICY_MAX_BYTES);
  char *text = malloc(len + 1);
  if (text == NULL) return egress_fail(why, why_len, "out of memory reading the policy");
  int rc = read_exact(c->cfd, text, len, deadline);
  if (rc == 0) {
    char sub[EG_WHY_MAX];
    rc = egress_policy_parse(text, len, &c->pol, sub, sizeof sub);
    if (rc != 0) egress_fail(why, why_len, "the sandbox's egress policy: %s", sub);
  } else {
    egress_fail(why, why_len, "the relay's policy did not arrive whole");
  }
  free(text);
  return rc;
}

/* Reads the request head within C.head_s. Returns egress_request_parse's
 * verdict, or -3 on timeout/close. */
static int read_head(conn *c, char *why, size_t why_len) {
  double deadline = eg_mono_ms() + C.head_s * 1000.0;
  for (;;) {
    int rc = egress_request_parse(c->buf, c->len, &c->req, why, why_len);
    if (rc != 0) return rc;
    int left = (int)(deadline - eg_mono_ms());
    if (left <= 0 || eg_wait_fd(c->cfd, POLLIN, left) <= 0) {
      snprintf(why, why_len, "no complete request head within %d s", C.head_s);
      return -3;
    }
    ssize_t r = recv(c->cfd, c->buf + c->len, sizeof c->buf - 1 - c->len, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      snprintf(why, why_len, "the client closed before a complete request head");
      return -3;
    }
    c->len += (size_t)r;
  }
}

static int connect_to(const eg_addr *a, int port, int timeout_s) {
  struct sockaddr_storage ss;
  socklen_t sl;
  memset(&ss, 0, sizeof ss);
  if (a->family == 4) {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    memcpy(&s4->sin_addr, a->b, 4);
    sl = sizeof *s4;
  } else {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    memcpy(&s6->sin6_addr, a->b, 16);
    sl = sizeof *s6;
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&ss, sl) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  if (eg_wait_fd(fd, POLLOUT, timeout_s * 1000) <= 0) {
    close(fd);
    errno = ETIMEDOUT;
    return -1;
  }
  int soerr = 0;
  socklen_t el = sizeof soerr;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el) != 0 || soerr != 0) {
    close(fd);
    errno = soerr ? soerr : EIO;
    return -1;
  }
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/* Counts a connection of the sandbox in (delta 1) or out (-1); returns its
 * connections now (a full table counts as over any limit). */
static int source_add(const char *sandbox, int delta) {
  pthread_mutex_lock(&mu);
  int free_slot = -1, found = -1;
  for (int i = 0; i < SOURCES; i++) {
    if (sources[i].n > 0 && strcmp(sources[i].sandbox, sandbox) == 0) {
      found = i;
      break;
    }
    if (sources[i].n == 0 && free_slot < 0) free_slot = i;
  }
  if (found < 0 && delta > 0 && free_slot >= 0) {
    found = free_slot;
    snprintf(sources[found].sandbox, sizeof sources[found].sandbox, "%s", sandbox);
  }
  if (found >= 0) {
    sources[found].n += delta;
    if (sources[found].n < 0) sources[found].n = 0;
  }
  int count = found >= 0 ? sources[found].n : 1 << 30;
  pthread_mutex_unlock(&mu);
  return count;
}

/* The destination's addresses that the policy lets this sandbox use:
 * the count (0: none, why says which refusal), or -1 when the name does
 * not resolve (why says so). */
static int resolve_usable(conn *c, eg_addr usable[MAX_ADDRS], char *why, size_t why_len) {
  int n = 0;
  why[0] = '\0';
  if (c->req.target.is_addr) {
    if (egress_policy_addr_ok(&c->pol, &c->req.target.addr, c->req.target.port, why, why_len))
      usable[n++] = c->req.target.addr;
    return n;
  }
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  /* No AAAA question where the proxy has no IPv6 (the engine's default):
   * it would only wait on the engine's upstream resolver for nothing. */
  hints.ai_flags = AI_ADDRCONFIG;
  int g = getaddrinfo(c->req.target.host, NULL, &hints, &res);
  if (g != 0) {
    snprintf(why, why_len, "%s does not resolve (%s)", c->req.target.host, gai_strerror(g));
    return -1;
  }
  for (struct addrinfo *ai = res; ai && n < MAX_ADDRS; ai = ai->ai_next) {
    eg_addr a;
    addr_from_sockaddr((struct sockaddr_storage *)ai->ai_addr, &a);
    char w[EG_WHY_MAX];
    if (egress_policy_addr_ok(&c->pol, &a, c->req.target.port, w, sizeof w)) {
      int dup = 0;
      for (int i = 0; i < n; i++) dup |= memcmp(&usable[i], &a, sizeof a) == 0;
      if (!dup) usable[n++] = a;
    } else if (why[0] == '\0') {
      snprintf(why, why_len, "%s: %s", c->req.target.host, w);
    }
  }
  freeaddrinfo(res);
  return n;
}

/* Connected upstream: the tunnel, or the request in origin form and then
 * the response. */
static void forward(conn *c) {
  size_t extra = c->len - c->req.head_len;
  const char *after = c->buf + c->req.head_len;
  if (c->req.is_connect) {
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (eg_send_all(c->cfd, ok, sizeof ok - 1) == 0 && (extra == 0 || eg_send_all(c->ufd, after, extra) == 0)) {
      c->bytes_out += (long long)extra;
      eg_pump(c->cfd, c->ufd, C.idle_s, -1, &c->bytes_out, &c->bytes_in);
    }
  } else {
    enum { HEAD_CAP = EG_HEAD_MAX + 256 };
    char *head = malloc(HEAD_CAP);
    long hl = head ? egress_request_upstream_head(c->buf, &c->req, head, HEAD_CAP) : -1;
    long long body = c->req.content_length > 0 ? c->req.content_length : 0;
    if ((long long)extra > body) extra = (size_t)body; /* pipelined requests are not forwarded */
    if (hl > 0 && eg_send_all(c->ufd, head, (size_t)hl) == 0 &&
        (extra == 0 || eg_send_all(c->ufd, after, extra) == 0)) {
      c->bytes_out += hl + (long long)extra;
      eg_pump(c->cfd, c->ufd, C.idle_s, body - (long long)extra, &c->bytes_out, &c->bytes_in);
    }
    free(head);
  }
}

/* Connects to the first usable address (each was checked): the socket, or
 * -1 with the failure answered and logged. */
static int connect_upstream(conn *c, const eg_addr *usable, int n_usable, const char *rule) {
  int fd = -1, last_errno = 0;
  for (int i = 0; i < n_usable && fd < 0; i++) {
    egress_addr_format(&usable[i], c->dst_ip, sizeof c->dst_ip);
    fd = connect_to(&usable[i], c->req.target.port, C.connect_s);
    if (fd < 0) last_errno = errno;
  }
  if (fd >= 0) return fd;
  char why[EG_WHY_MAX];
  snprintf(why, sizeof why, "connecting to %s port %d: %s", c->dst_ip, c->req.target.port, strerror(last_errno));
  int timeout = last_errno == ETIMEDOUT;
  answer(c, timeout ? 504 : 502, timeout ? "Gateway Timeout" : "Bad Gateway", why);
  log_event(c, "egress.failed", timeout ? 504 : 502, rule, why);
  return -1;
}

/* What the request asks for, decided: 0 to go on (rule filled), -1 when it
 * was answered already. */
static int decide(conn *c, char *rule, size_t rule_len) {
  char why[EG_WHY_MAX];
  if (source_add(c->pol.sandbox, 1) > C.max_per_sandbox) {
    c->counted = 1;
    snprintf(why, sizeof why, "more than %d connections at once from this sandbox", C.max_per_sandbox);
    deny(c, 503, "Service Unavailable", NULL, why);
    return -1;
  }
  c->counted = 1;
  int rc = read_head(c, why, sizeof why);
  if (rc == -3) {
    log_event(c, "egress.denied", 408, NULL, why);
    return -1;
  }
  if (rc < 0) {
    c->have_req = c->req.target_ok; /* the destination, when it got that far */
    deny(c, rc == -2 ? 431 : 400, rc == -2 ? "Request Header Fields Too Large" : "Bad Request", NULL, why);
    return -1;
  }
  c->have_req = 1;
  if (!egress_policy_decide(&c->pol, &c->req.target, rule, rule_len)) {
    deny(c, 403, "Forbidden", rule, NULL);
    return -1;
  }
  return 0;
}

static void handle(conn *c) {
  char why[EG_WHY_MAX], rule[EG_WHY_MAX];
  if (read_policy(c, why, sizeof why) != 0) {
    deny(c, 403, "Forbidden", NULL, why);
    return;
  }
  c->have_pol = 1;
  if (decide(c, rule, sizeof rule) == 0) {
    /* Where it really goes: every address checked, then used as checked. */
    eg_addr usable[MAX_ADDRS];
    int n_usable = resolve_usable(c, usable, why, sizeof why);
    if (n_usable < 0) {
      answer(c, 502, "Bad Gateway", why);
      log_event(c, "egress.failed", 502, rule, why);
    } else if (n_usable == 0) {
      deny(c, 403, "Forbidden", NULL, why);
    } else if ((c->ufd = connect_upstream(c, usable, n_usable, rule)) >= 0) {
      forward(c);
      close(c->ufd);
      log_event(c, "egress.allowed", 0, rule, NULL);
    }
  }
  if (c->counted) source_add(c->pol.sandbox, -1);
  egress_policy_dispose(&c->pol);
}

static void *conn_thread(void *arg) {
  conn *c = arg;
  handle(c);
  close(c->cfd);
  free(c);
  pthread_mutex_lock(&mu);
  active--;
  pthread_mutex_unlock(&mu);
  return NULL;
}

/* The socket only relays reach: a stale one (a proxy before this one) is
 * replaced; mode 0600, the relays run as the proxy's user. */
static int listen_on(const char *path) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof a.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(a.sun_path, path, strlen(path));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  unlink(path);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || chmod(path, 0600) != 0 || listen(fd, 512) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

static void usage(void) {
  fprintf(stderr,
          "usage: sandman-egress serve --socket PATH [--max-connections N] [--max-per-sandbox N]\n"
          "                            [--idle-timeout S] [--head-timeout S] [--connect-timeout S]\n");
}

static int parse_args(int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = v == NULL;
    if (!bad && !strcmp(a, "--socket")) C.socket_path = v;
    else if (!bad && !strcmp(a, "--max-connections")) bad = eg_int_arg(v, 1, 100000, &C.max_conns);
    else if (!bad && !strcmp(a, "--max-per-sandbox")) bad = eg_int_arg(v, 1, 100000, &C.max_per_sandbox);
    else if (!bad && !strcmp(a, "--idle-timeout")) bad = eg_int_arg(v, 1, 86400, &C.idle_s);
    else if (!bad && !strcmp(a, "--head-timeout")) bad = eg_int_arg(v, 1, 3600, &C.head_s);
    else if (!bad && !strcmp(a, "--connect-timeout")) bad = eg_int_arg(v, 1, 600, &C.connect_s);
    else bad = 1;
    if (bad) return -1;
    i++;
  }
  return C.socket_path ? 0 : -1;
}

/* A connection over the limit is refused at once, in this thread. */
static void start_conn(int fd, pthread_attr_t *attr) {
  conn *c = calloc(1, sizeof *c);
  if (c == NULL) {
    close(fd);
    return;
  }
  c->cfd = fd;
  c->ufd = -1;
  c->t0 = eg_now_s();
  c->t0_ms = eg_mono_ms();
  pthread_mutex_lock(&mu);
  int over = active >= C.max_conns;
  if (!over) active++;
  pthread_mutex_unlock(&mu);
  pthread_t t;
  if (over) {
    char why[128];
    snprintf(why, sizeof why, "the proxy is at its limit of %d connections", C.max_conns);
    deny(c, 503, "Service Unavailable", NULL, why);
  } else if (pthread_create(&t, attr, conn_thread, c) == 0) {
    return;
  } else {
    deny(c, 503, "Service Unavailable", NULL, "the proxy cannot start a thread");
    pthread_mutex_lock(&mu);
    active--;
    pthread_mutex_unlock(&mu);
  }
  close(fd);
  free(c);
}

int eg_serve_main(int argc, char **argv) {
  if (parse_args(argc, argv) != 0) {
    usage();
    return 2;
  }
  int lfd = listen_on(C.socket_path);
  if (lfd < 0) {
    fprintf(stderr, "sandman-egress: cannot listen on %s: %s\n", C.socket_path, strerror(errno));
    return 1;
  }
  char ready[160];
  int rn = snprintf(ready, sizeof ready, "{\"event\":\"proxy.ready\",\"time\":%.3f}\n", eg_now_s());
  if (write(STDOUT_FILENO, ready, (size_t)rn) < 0) return 1;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
      start_conn(fd, &attr);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
      eg_nap_ms(50);
      continue;
    }
    fprintf(stderr, "sandman-egress: accept: %s\n", strerror(errno));
    return 1;
  }
}
