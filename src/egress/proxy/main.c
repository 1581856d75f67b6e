/* sandman-egress: the egress proxy of network mode allowlist.
 *
 * Runs in its own container on the sandboxes' internal network (see
 * docs/network.md). For each connection: the source address picks the
 * sandbox's policy file (written by sandman over the Engine API) read once,
 * when the connection opens; the request head is parsed with hard caps;
 * the destination is checked by name, then resolved here and each address
 * checked, and the connection goes to an address that passed (no gap for
 * DNS rebinding). CONNECT is tunnelled untouched (no TLS interception);
 * plain HTTP must come in absolute form with a Host that agrees. Every
 * decision is one JSON line on stdout, which sandman collects from the
 * container's log into the audit trail.
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
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "egress/http.h"
#include "egress/policy.h"

#define MAX_ADDRS 16
#define RELAY_BUF 16384
#define POLICY_RETRIES 50 /* a policy file being rewritten: up to ~1 s */
#define SOURCES 1024

typedef struct conf {
  int port;
  const char *policy_dir;
  int max_conns, max_per_source;
  int idle_s, head_s, connect_s;
} conf;

static conf C = {3128, "/policy", 512, 64, 300, 30, 10};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int active;
static struct {
  eg_addr a;
  int n;
} sources[SOURCES];

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

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
  eg_addr peer, local;
  char peer_text[64];
  double t0_ms, t0;
  eg_policy pol;
  int have_pol;
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
  put_str(&l, "src_ip", c->peer_text);
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
  put_num(&l, "duration_ms", (long long)(mono_ms() - c->t0_ms + 0.5));
  emit(&l);
}

static int send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
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
  if (send_all(c->cfd, head, (size_t)hl) == 0) send_all(c->cfd, body, (size_t)bl);
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

/* The sandbox's policy, read once when the connection opens. */
static int load_policy(conn *c, char *why, size_t why_len) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", C.policy_dir, c->peer_text);
  for (int attempt = 0;; attempt++) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      snprintf(why, why_len, "no egress policy for %s (not a sandbox of this proxy)", c->peer_text);
      return -1;
    }
    enum { CAP = EG_POLICY_MAX_BYTES + 1 };
    char *text = malloc(CAP);
    if (text == NULL) {
      close(fd);
      snprintf(why, why_len, "out of memory reading the policy");
      return -1;
    }
    size_t n = 0;
    for (;;) {
      ssize_t r = read(fd, text + n, CAP - n);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      n += (size_t)r;
      if (n == CAP) break;
    }
    close(fd);
    int rc = eg_policy_parse(text, n, &c->pol, why, why_len);
    free(text);
    if (rc == 0) return 0;
    /* Cut short while sandman rewrites it: read it again. */
    if (strstr(why, "cut short") == NULL || attempt >= POLICY_RETRIES) return -1;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static int wait_fd(int fd, short ev, int ms) {
  struct pollfd p = {fd, ev, 0};
  for (;;) {
    int r = poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

/* Reads the request head within C.head_s. Returns eg_request_parse's
 * verdict, or -3 on timeout/close. */
static int read_head(conn *c, char *why, size_t why_len) {
  double deadline = mono_ms() + C.head_s * 1000.0;
  for (;;) {
    int rc = eg_request_parse(c->buf, c->len, &c->req, why, why_len);
    if (rc != 0) return rc;
    int left = (int)(deadline - mono_ms());
    if (left <= 0 || wait_fd(c->cfd, POLLIN, left) <= 0) {
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
  if (wait_fd(fd, POLLOUT, timeout_s * 1000) <= 0) {
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

/* Copies both ways until both sides are done or nothing moves for
 * C.idle_s. up_budget: bytes the client may still send upstream (-1: no
 * limit, a tunnel). */
static void relay(conn *c, long long up_budget) {
  char *b = malloc(RELAY_BUF);
  if (b == NULL) return;
  int client_open = 1, up_open = 1;
  if (up_budget == 0) {
    client_open = 0; /* a plain request is complete: nothing more goes up */
  }
  while (up_open || (client_open && up_budget != 0)) {
    /* A side that is done is left out (-1): its hang-up must not wake us. */
    struct pollfd p[2] = {{client_open ? c->cfd : -1, POLLIN, 0}, {up_open ? c->ufd : -1, POLLIN, 0}};
    int r = poll(p, 2, C.idle_s * 1000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break; /* idle */
    if (client_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      size_t want = RELAY_BUF;
      if (up_budget >= 0 && (long long)want > up_budget) want = (size_t)up_budget;
      ssize_t n = recv(c->cfd, b, want, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        client_open = 0;
        shutdown(c->ufd, SHUT_WR);
        if (up_budget < 0 && !up_open) break;
      } else {
        if (send_all(c->ufd, b, (size_t)n) != 0) break;
        c->bytes_out += n;
        if (up_budget > 0) {
          up_budget -= n;
          if (up_budget == 0) client_open = 0;
        }
      }
    }
    if (up_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = recv(c->ufd, b, RELAY_BUF, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        up_open = 0;
        shutdown(c->cfd, SHUT_WR);
        if (up_budget >= 0 || !client_open) break; /* plain HTTP ends with the response */
      } else {
        if (send_all(c->cfd, b, (size_t)n) != 0) break;
        c->bytes_in += n;
      }
    }
  }
  free(b);
}

static void source_add(const eg_addr *a, int delta, int *out_count) {
  pthread_mutex_lock(&mu);
  int free_slot = -1, found = -1;
  for (int i = 0; i < SOURCES; i++) {
    if (sources[i].n > 0 && memcmp(&sources[i].a, a, sizeof *a) == 0) {
      found = i;
      break;
    }
    if (sources[i].n == 0 && free_slot < 0) free_slot = i;
  }
  if (found < 0 && delta > 0 && free_slot >= 0) {
    found = free_slot;
    sources[found].a = *a;
  }
  if (found >= 0) {
    sources[found].n += delta;
    if (sources[found].n < 0) sources[found].n = 0;
  }
  *out_count = found >= 0 ? sources[found].n : 1 << 30;
  pthread_mutex_unlock(&mu);
}

/* The destination's addresses that the policy lets this sandbox use:
 * the count (0: none, why says which refusal), or -1 when the name does
 * not resolve (why says so). */
static int resolve_usable(conn *c, eg_addr usable[MAX_ADDRS], char *why, size_t why_len) {
  int n = 0;
  why[0] = '\0';
  if (c->req.target.is_addr) {
    if (eg_policy_addr_ok(&c->pol, &c->req.target.addr, c->req.target.port, why, why_len))
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
    if (eg_policy_addr_ok(&c->pol, &a, c->req.target.port, w, sizeof w)) {
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
    if (send_all(c->cfd, ok, sizeof ok - 1) == 0 &&
        (extra == 0 || send_all(c->ufd, after, extra) == 0)) {
      c->bytes_out += (long long)extra;
      relay(c, -1);
    }
  } else {
    enum { HEAD_CAP = EG_HEAD_MAX + 256 };
    char *head = malloc(HEAD_CAP);
    long hl = head ? eg_request_upstream_head(c->buf, &c->req, head, HEAD_CAP) : -1;
    long long body = c->req.content_length > 0 ? c->req.content_length : 0;
    if ((long long)extra > body) extra = (size_t)body; /* pipelined requests are not forwarded */
    if (hl > 0 && send_all(c->ufd, head, (size_t)hl) == 0 &&
        (extra == 0 || send_all(c->ufd, after, extra) == 0)) {
      c->bytes_out += hl + (long long)extra;
      relay(c, body - (long long)extra);
    }
    free(head);
  }
}

static void handle(conn *c) {
  char why[EG_WHY_MAX], rule[EG_WHY_MAX];
  int count = 0;
  source_add(&c->peer, 1, &count);
  if (load_policy(c, why, sizeof why) != 0) {
    deny(c, 403, "Forbidden", NULL, why);
    goto out;
  }
  c->have_pol = 1;
  if (!c->pol.have_subnet || !eg_addr_in(&c->peer, &c->pol.subnet, c->pol.subnet_prefix) ||
      !eg_addr_in(&c->local, &c->pol.subnet, c->pol.subnet_prefix)) {
    deny(c, 403, "Forbidden", NULL, "the connection did not come in on the sandbox's internal network");
    goto out;
  }
  if (count > C.max_per_source) {
    snprintf(why, sizeof why, "more than %d connections at once from this sandbox", C.max_per_source);
    deny(c, 503, "Service Unavailable", NULL, why);
    goto out;
  }
  int rc = read_head(c, why, sizeof why);
  if (rc == -3) {
    log_event(c, "egress.denied", 408, NULL, why);
    goto out;
  }
  if (rc < 0) {
    c->have_req = c->req.target_ok; /* the destination, when it got that far */
    deny(c, rc == -2 ? 431 : 400, rc == -2 ? "Request Header Fields Too Large" : "Bad Request", NULL, why);
    goto out;
  }
  c->have_req = 1;
  if (!eg_policy_decide(&c->pol, &c->req.target, rule, sizeof rule)) {
    deny(c, 403, "Forbidden", rule, NULL);
    goto out;
  }
  /* Where it really goes: every address checked, then used as checked. */
  eg_addr usable[MAX_ADDRS];
  int n_usable = resolve_usable(c, usable, why, sizeof why);
  if (n_usable < 0) {
    answer(c, 502, "Bad Gateway", why);
    log_event(c, "egress.failed", 502, rule, why);
    goto out;
  }
  if (n_usable == 0) {
    deny(c, 403, "Forbidden", NULL, why);
    goto out;
  }
  c->ufd = -1;
  int last_errno = 0;
  for (int i = 0; i < n_usable && c->ufd < 0; i++) {
    eg_addr_format(&usable[i], c->dst_ip, sizeof c->dst_ip);
    c->ufd = connect_to(&usable[i], c->req.target.port, C.connect_s);
    if (c->ufd < 0) last_errno = errno;
  }
  if (c->ufd < 0) {
    snprintf(why, sizeof why, "connecting to %s port %d: %s", c->dst_ip, c->req.target.port,
             strerror(last_errno));
    answer(c, last_errno == ETIMEDOUT ? 504 : 502, last_errno == ETIMEDOUT ? "Gateway Timeout" : "Bad Gateway",
           why);
    log_event(c, "egress.failed", last_errno == ETIMEDOUT ? 504 : 502, rule, why);
    goto out;
  }
  forward(c);
  close(c->ufd);
  log_event(c, "egress.allowed", 0, rule, NULL);
out:
  source_add(&c->peer, -1, &count);
  if (c->have_pol) eg_policy_dispose(&c->pol);
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

static int listen_on(int port) {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1, zero = 0;
  if (fd >= 0) {
    struct sockaddr_in6 a;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons((uint16_t)port);
    a.sin6_addr = in6addr_any;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 512) == 0) return fd;
    close(fd);
  }
  /* No IPv6 in this network namespace (the engine's default). */
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a4;
  memset(&a4, 0, sizeof a4);
  a4.sin_family = AF_INET;
  a4.sin_port = htons((uint16_t)port);
  a4.sin_addr.s_addr = htonl(INADDR_ANY);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&a4, sizeof a4) != 0 || listen(fd, 512) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int int_arg(const char *s, int min, int max, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) return -1;
  *out = (int)v;
  return 0;
}

static void usage(void) {
  fprintf(stderr,
          "usage: sandman-egress [--port N] [--policy-dir DIR] [--max-connections N]\n"
          "                      [--max-per-sandbox N] [--idle-timeout S] [--head-timeout S]\n"
          "                      [--connect-timeout S]\n");
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = v == NULL;
    if (!bad && !strcmp(a, "--port")) bad = int_arg(v, 1, 65535, &C.port);
    else if (!bad && !strcmp(a, "--policy-dir")) C.policy_dir = v;
    else if (!bad && !strcmp(a, "--max-connections")) bad = int_arg(v, 1, 100000, &C.max_conns);
    else if (!bad && !strcmp(a, "--max-per-sandbox")) bad = int_arg(v, 1, 100000, &C.max_per_source);
    else if (!bad && !strcmp(a, "--idle-timeout")) bad = int_arg(v, 1, 86400, &C.idle_s);
    else if (!bad && !strcmp(a, "--head-timeout")) bad = int_arg(v, 1, 3600, &C.head_s);
    else if (!bad && !strcmp(a, "--connect-timeout")) bad = int_arg(v, 1, 600, &C.connect_s);
    else bad = 1;
    if (bad) {
      usage();
      return 2;
    }
    i++;
  }
  signal(SIGPIPE, SIG_IGN);
  int lfd = listen_on(C.port);
  if (lfd < 0) {
    fprintf(stderr, "sandman-egress: cannot listen on port %d: %s\n", C.port, strerror(errno));
    return 1;
  }
  char ready[160];
  int rn = snprintf(ready, sizeof ready, "{\"event\":\"proxy.ready\",\"time\":%.3f,\"port\":%d}\n", now_s(),
                    C.port);
  if (write(STDOUT_FILENO, ready, (size_t)rn) < 0) return 1;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  for (;;) {
    struct sockaddr_storage peer, local;
    socklen_t pl = sizeof peer, ll = sizeof local;
    int fd = accept4(lfd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        continue;
      }
      fprintf(stderr, "sandman-egress: accept: %s\n", strerror(errno));
      return 1;
    }
    conn *c = calloc(1, sizeof *c);
    if (c == NULL || getsockname(fd, (struct sockaddr *)&local, &ll) != 0) {
      free(c);
      close(fd);
      continue;
    }
    c->cfd = fd;
    c->ufd = -1;
    c->t0 = now_s();
    c->t0_ms = mono_ms();
    addr_from_sockaddr(&peer, &c->peer);
    addr_from_sockaddr(&local, &c->local);
    eg_addr_format(&c->peer, c->peer_text, sizeof c->peer_text);
    pthread_mutex_lock(&mu);
    int over = active >= C.max_conns;
    if (!over) active++;
    pthread_mutex_unlock(&mu);
    pthread_t t;
    if (over) {
      char why[128];
      snprintf(why, sizeof why, "the proxy is at its limit of %d connections", C.max_conns);
      deny(c, 503, "Service Unavailable", NULL, why);
      close(fd);
      free(c);
      continue;
    }
    if (pthread_create(&t, &attr, conn_thread, c) != 0) {
      deny(c, 503, "Service Unavailable", NULL, "the proxy cannot start a thread");
      close(fd);
      free(c);
      pthread_mutex_lock(&mu);
      active--;
      pthread_mutex_unlock(&mu);
    }
  }
}
