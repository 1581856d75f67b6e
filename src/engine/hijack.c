/* Exec start over a hijacked connection. The Engine API answers
 * POST /exec/{id}/start with "101 Switching Protocols" when asked to
 * upgrade (Connection: Upgrade, Upgrade: tcp), and from then on the socket
 * carries stdin one way and the multiplexed stdout/stderr the other. libcurl
 * cannot hand such a connection over with a half-close, so this file speaks
 * that one request itself, on its own socket (plain or OpenSSL), and runs a
 * poll loop that reads output as it arrives while it writes stdin, so that
 * a tool which writes a lot before it reads all its input never deadlocks.
 * stdin ends with a half-close: shutdown(SHUT_WR) on a plain socket, a TLS
 * close_notify (SSL_shutdown) over TLS; the engine sees EOF either way and
 * keeps sending output. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <sandman/log.h>

#include "engine/internal.h"

#define STDIN_CHUNK (64u << 10)
#define READ_CHUNK (64u << 10)
/* Exec streams read in smaller steps: their frames are small, and every
 * thread that pumps one keeps the buffer's stack pages resident (a runner
 * has 16+ such threads). */
#define STREAM_READ_CHUNK (16u << 10)
#define CANCEL_POLL_MS 100

enum { IO_AGAIN = 1 };

typedef struct conn {
  int fd;
  SSL_CTX *ctx; /* borrowed from the client */
  SSL *ssl;
  int want; /* POLLIN/POLLOUT an SSL call waits for */
} conn;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void conn_close(conn *c) {
  if (c->ssl) SSL_free(c->ssl);
  /* c->ctx is the client's (e->tls_ctx). */
  if (c->fd >= 0) close(c->fd);
  c->ssl = NULL;
  c->ctx = NULL;
  c->fd = -1;
}

/* SSL writes go through write(2): keep a dead peer from raising SIGPIPE in
 * the application (the library must not change its signal handlers). */
typedef struct sigpipe_guard {
  sigset_t old;
  int was_pending;
} sigpipe_guard;

static void sigpipe_block(sigpipe_guard *g) {
  sigset_t set, pending;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  sigpending(&pending);
  g->was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

static void sigpipe_restore(sigpipe_guard *g) {
  if (!g->was_pending) {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE)) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      struct timespec zero = {0, 0};
      while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR) {
      }
    }
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return 0;
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

static void ssl_errors(char *buf, size_t len) {
  unsigned long e;
  buf[0] = '\0';
  size_t used = 0;
  while ((e = ERR_get_error()) != 0) {
    if (used + 4 >= len) continue;
    if (used) used += (size_t)snprintf(buf + used, len - used, "; ");
    ERR_error_string_n(e, buf + used, len - used);
    used = strlen(buf);
  }
  if (buf[0] == '\0') snprintf(buf, len, "no details from OpenSSL");
}

static int connect_unix(sm_engine *e, conn *c, sm_error *err) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, e->addr.socket_path, strlen(e->addr.socket_path) + 1);
  c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "exec start: socket");
  /* A unix connect only blocks when the engine's backlog is full; the send
   * timeout bounds that wait (Linux applies it to connect). */
  struct timeval tv = {e->connect_timeout_ms / 1000, (e->connect_timeout_ms % 1000) * 1000};
  setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int en = errno;
    if (en == EAGAIN || en == EINPROGRESS)
      return sm_error_set(err, SM_ETIMEOUT,
                          "timed out after %ld ms connecting to the Docker engine at %s; is it "
                          "overloaded?",
                          e->connect_timeout_ms, e->addr.host);
    return engine_unreachable_error(e, en, strerror(en), err);
  }
  struct timeval zero = {0, 0};
  setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &zero, sizeof zero);
  int fl = fcntl(c->fd, F_GETFL);
  if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return sm_error_set_errno(err, SM_EIO, errno, "exec start: fcntl");
  return 0;
}

static int connect_tcp(sm_engine *e, conn *c, int64_t deadline, sm_error *err) {
  char port[16];
  snprintf(port, sizeof port, "%d", e->addr.port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int g = getaddrinfo(e->addr.tcp_host, port, &hints, &res);
  if (g != 0) return engine_unreachable_error(e, 0, gai_strerror(g), err);
  int last = ECONNREFUSED;
  int timed_out = 0;
  for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    ai->ai_protocol);
    if (fd < 0) {
      last = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      int n = wait_fd(fd, POLLOUT, deadline);
      if (n == 0) {
        timed_out = 1;
        close(fd);
        break;
      }
      int soerr = 0;
      socklen_t sl = sizeof soerr;
      if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0) soerr = errno;
      rc = soerr ? -1 : 0;
      errno = soerr;
    }
    if (rc == 0) {
      c->fd = fd;
      freeaddrinfo(res);
      return 0;
    }
    last = errno;
    close(fd);
  }
  freeaddrinfo(res);
  if (timed_out)
    return sm_error_set(err, SM_ETIMEOUT,
                        "timed out after %ld ms connecting to the Docker engine at %s; is it "
                        "running and answering?",
                        e->connect_timeout_ms, e->addr.host);
  return engine_unreachable_error(e, last, strerror(last), err);
}

static int tls_error_at(const char *host, const char *doing, sm_error *err) {
  char detail[512];
  ssl_errors(detail, sizeof detail);
  return sm_error_set(err, SM_ETLS,
                      "TLS with the engine at %s failed while %s: %s (check the CA, "
                      "certificate and key in DOCKER_CERT_PATH)",
                      host, doing, detail);
}

static int tls_error(sm_engine *e, const char *doing, sm_error *err) {
  return tls_error_at(e->addr.host, doing, err);
}

/* The context is made once per client: loading the CA, certificate and
 * key on every exec would cost more than the exec. */
static int tls_context(sm_engine *e, SSL_CTX **out, sm_error *err) {
  if (e->tls_ctx != NULL) {
    *out = e->tls_ctx;
    return 0;
  }
  ERR_clear_error();
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == NULL) return tls_error(e, "creating a context", err);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
  /* A peer closing without close_notify is the end of the stream; the
   * demultiplexer still catches a stream cut inside a frame. */
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
  char doing[PATH_MAX + 64];
  int rc = 0;
  if (SSL_CTX_load_verify_locations(ctx, e->addr.ca, NULL) != 1) {
    snprintf(doing, sizeof doing, "loading the CA file %s", e->addr.ca);
    rc = tls_error(e, doing, err);
  } else if (SSL_CTX_use_certificate_chain_file(ctx, e->addr.cert) != 1) {
    snprintf(doing, sizeof doing, "loading the client certificate %s", e->addr.cert);
    rc = tls_error(e, doing, err);
  } else if (SSL_CTX_use_PrivateKey_file(ctx, e->addr.key, SSL_FILETYPE_PEM) != 1 ||
             SSL_CTX_check_private_key(ctx) != 1) {
    snprintf(doing, sizeof doing, "loading the client key %s", e->addr.key);
    rc = tls_error(e, doing, err);
  }
  if (rc != 0) {
    SSL_CTX_free(ctx);
    return rc;
  }
  e->tls_ctx = ctx;
  *out = ctx;
  return 0;
}

void engine_tls_dispose(sm_engine *e) {
  if (e->tls_session) SSL_SESSION_free(e->tls_session);
  if (e->tls_ctx) SSL_CTX_free(e->tls_ctx);
  e->tls_session = NULL;
  e->tls_ctx = NULL;
}

/* Keeps the connection's session for the next exec if it can resume. */
static void tls_keep_session(sm_engine *e, conn *c) {
  if (c->ssl == NULL) return;
  SSL_SESSION *s = SSL_get1_session(c->ssl);
  if (s == NULL) return;
  if (!SSL_SESSION_is_resumable(s)) {
    SSL_SESSION_free(s);
    return;
  }
  if (e->tls_session) SSL_SESSION_free(e->tls_session);
  e->tls_session = s;
}

static int connect_tls(sm_engine *e, conn *c, int64_t deadline, sm_error *err) {
  int rc = tls_context(e, &c->ctx, err);
  if (rc != 0) return rc;
  c->ssl = SSL_new(c->ctx);
  if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1) return tls_error(e, "setting up", err);
  if (e->tls_session) SSL_set_session(c->ssl, e->tls_session);
  unsigned char tmp[sizeof(struct in6_addr)];
  if (inet_pton(AF_INET, e->addr.tcp_host, tmp) == 1 ||
      inet_pton(AF_INET6, e->addr.tcp_host, tmp) == 1) {
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), e->addr.tcp_host) != 1)
      return tls_error(e, "setting the expected address", err);
  } else {
    SSL_set_tlsext_host_name(c->ssl, e->addr.tcp_host);
    if (SSL_set1_host(c->ssl, e->addr.tcp_host) != 1)
      return tls_error(e, "setting the expected host name", err);
  }
  for (;;) {
    sigpipe_guard g;
    sigpipe_block(&g);
    int r = SSL_connect(c->ssl);
    int se = r == 1 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
    sigpipe_restore(&g);
    if (r == 1) {
      sm_log(SM_LOG_DEBUG, "exec: TLS to %s, %s, %s", e->addr.host, SSL_get_version(c->ssl),
             SSL_session_reused(c->ssl) ? "session resumed" : "full handshake");
      return 0;
    }
    short ev = se == SSL_ERROR_WANT_READ ? POLLIN : se == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (ev == 0) {
      long vr = SSL_get_verify_result(c->ssl);
      if (vr != X509_V_OK) {
        ERR_clear_error();
        return sm_error_set(err, SM_ETLS,
                            "TLS with the engine at %s failed: the engine's certificate was "
                            "refused: %s (is ca.pem in DOCKER_CERT_PATH the engine's CA?)",
                            e->addr.host, X509_verify_cert_error_string(vr));
      }
      return tls_error(e, "shaking hands", err);
    }
    int n = wait_fd(c->fd, ev, deadline);
    if (n == 0)
      return sm_error_set(err, SM_ETIMEOUT, "TLS handshake with the engine at %s timed out",
                          e->addr.host);
    if (n < 0) return sm_error_set_errno(err, SM_EIO, errno, "exec start: poll");
  }
}

/* >0 bytes, 0 end of stream, IO_AGAIN (c->want says for what), or <0. */
static ssize_t conn_read(const char *host, conn *c, char *buf, size_t len, sm_error *err) {
  if (c->ssl == NULL) {
    ssize_t n = recv(c->fd, buf, len, 0);
    if (n >= 0) return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      c->want = POLLIN;
      return -IO_AGAIN;
    }
    if (errno == ECONNRESET) return 0;
    return sm_error_set_errno(err, SM_EIO, errno, "exec start: reading from the engine at %s",
                              host);
  }
  ERR_clear_error();
  sigpipe_guard g;
  sigpipe_block(&g);
  int r = SSL_read(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
  int se = r > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
  int en = errno;
  sigpipe_restore(&g);
  if (r > 0) return r;
  switch (se) {
  case SSL_ERROR_WANT_READ:
    c->want = POLLIN;
    return -IO_AGAIN;
  case SSL_ERROR_WANT_WRITE:
    c->want = POLLOUT;
    return -IO_AGAIN;
  case SSL_ERROR_ZERO_RETURN:
    return 0;
  case SSL_ERROR_SYSCALL:
    if (en == 0 || en == ECONNRESET) return 0;
    return sm_error_set_errno(err, SM_EIO, en, "exec start: reading from the engine at %s",
                              host);
  default:
    return tls_error_at(host, "reading", err);
  }
}

static ssize_t conn_write(const char *host, conn *c, const char *buf, size_t len, sm_error *err) {
  if (c->ssl == NULL) {
    ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      c->want = POLLOUT;
      return -IO_AGAIN;
    }
    return sm_error_set_errno(err, SM_EIO, errno, "exec start: writing to the engine at %s",
                              host);
  }
  ERR_clear_error();
  sigpipe_guard g;
  sigpipe_block(&g);
  int r = SSL_write(c->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
  int se = r > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
  int en = errno;
  sigpipe_restore(&g);
  if (r > 0) return r;
  if (se == SSL_ERROR_WANT_WRITE || se == SSL_ERROR_WANT_READ) {
    c->want = se == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
    return -IO_AGAIN;
  }
  if (se == SSL_ERROR_SYSCALL)
    return sm_error_set_errno(err, SM_EIO, en ? en : EPIPE,
                              "exec start: writing to the engine at %s", host);
  return tls_error_at(host, "writing", err);
}

/* Half-close: 0 done, -IO_AGAIN, or <0. */
static int conn_shutdown_write(const char *host, conn *c, sm_error *err) {
  if (c->ssl == NULL) {
    if (shutdown(c->fd, SHUT_WR) == 0 || errno == ENOTCONN) return 0;
    return sm_error_set_errno(err, SM_EIO, errno, "exec start: closing stdin");
  }
  ERR_clear_error();
  sigpipe_guard g;
  sigpipe_block(&g);
  int r = SSL_shutdown(c->ssl);
  int se = r >= 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
  sigpipe_restore(&g);
  /* 0: our close_notify is out, the peer's is still to come; reading
   * goes on until then. */
  if (r >= 0) return 0;
  if (se == SSL_ERROR_WANT_WRITE || se == SSL_ERROR_WANT_READ) {
    c->want = se == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
    return -IO_AGAIN;
  }
  return tls_error_at(host, "closing stdin", err);
}

/* The body of a chunked error answer, decoded in place as far as it is
 * complete. Returns its length. */
static size_t dechunk(char *s, size_t len) {
  size_t in = 0, out = 0;
  while (in < len) {
    size_t n = 0;
    int digits = 0;
    while (in < len) {
      char ch = s[in];
      int v = ch >= '0' && ch <= '9' ? ch - '0'
              : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
      if (v < 0 || n > (len >> 4)) break;
      n = n * 16 + (size_t)v;
      digits++;
      in++;
    }
    const char *eol = digits ? memchr(s + in, '\n', len - in) : NULL;
    if (eol == NULL || n == 0) break;
    in = (size_t)(eol - s) + 1;
    if (n > len - in) n = len - in;
    memmove(s + out, s + in, n);
    out += n;
    in += n;
    while (in < len && (s[in] == '\r' || s[in] == '\n')) in++;
  }
  return out;
}

/* Is the error answer after the head complete? */
static int error_body_complete(const char *body, size_t len, long long clen, int chunked) {
  if (clen >= 0) return (long long)len >= clen;
  if (chunked) {
    if (len >= 5 && memcmp(body, "0\r\n\r\n", 5) == 0) return 1;
    for (size_t i = 0; i + 7 <= len; i++)
      if (memcmp(body + i, "\r\n0\r\n\r\n", 7) == 0) return 1;
  }
  return 0;
}

typedef struct hijack {
  sm_engine *e;
  const sm_exec_io *io;
  conn c;
  sm_buf head;           /* the response head, then an error body */
  int streaming;         /* the head said 101/200: output follows */
  int status;
  size_t head_len;
  long long clen;
  int chunked;
  engine_mux mux;
  /* outgoing: the request, then stdin */
  char *out;
  size_t out_len, out_off;
  char *stdin_buf;
  int stdin_open;  /* still reading from io->stdin_read */
  int stdin_done;  /* half-close sent */
  int write_broken; /* the engine stopped taking stdin: drop the rest */
  int stop_when_streaming; /* exec streams: return once the upgrade is in */
} hijack;

static int feed_head(hijack *h, const char *data, size_t len, sm_error *err) {
  if (h->streaming) return engine_mux_feed(&h->mux, data, len, err);
  if (sm_buf_append(&h->head, data, len) != 0)
    return sm_error_set(err, SM_EPROTOCOL,
                        "exec start: the engine at %s sent an over-long answer",
                        h->e->addr.host);
  if (h->head_len == 0) {
    int st = 0;
    size_t hl = 0;
    long long clen = -1;
    int chunked = 0;
    int r = engine_http_parse_head(h->head.data, h->head.len, &st, &hl, &clen, &chunked);
    if (r < 0)
      return sm_error_set(err, SM_EPROTOCOL,
                          "exec start: the engine at %s sent a malformed HTTP answer",
                          h->e->addr.host);
    if (r == 0) return 0;
    if (st == 100) { /* an interim answer: drop it, wait for the real one */
      size_t rest = h->head.len - hl;
      memmove(h->head.data, h->head.data + hl, rest);
      h->head.len = rest;
      h->head.data[rest] = '\0';
      return rest ? feed_head(h, "", 0, err) : 0;
    }
    h->status = st;
    h->head_len = hl;
    h->clen = clen;
    h->chunked = chunked;
    if (st == 101 || st == 200) {
      h->streaming = 1;
      size_t rest = h->head.len - hl;
      int rc = rest ? engine_mux_feed(&h->mux, h->head.data + hl, rest, err) : 0;
      sm_buf_dispose(&h->head);
      return rc;
    }
  }
  return 0;
}

static int error_answer(hijack *h, const char *what, sm_error *err) {
  char *body = h->head.data + h->head_len;
  size_t blen = h->head.len - h->head_len;
  if (h->chunked) blen = dechunk(body, blen);
  if (h->status < 400)
    return sm_error_set(err, SM_EPROTOCOL, "%s: unexpected HTTP status %d from the engine", what,
                        h->status);
  return engine_error_from_response(h->status, body, blen, what, err);
}

/* Next bytes to send: the request first, then stdin as the reader gives it. */
static int fill_out(hijack *h, sm_error *err) {
  if (h->out_off < h->out_len || !h->streaming || !h->stdin_open || h->write_broken) return 0;
  ssize_t n = h->io->stdin_read(h->io->stdin_ud, h->stdin_buf, STDIN_CHUNK);
  if (n < 0)
    return sm_error_set(err, (int)n, "exec start: the stdin reader failed (%s)",
                        sm_error_name((int)n));
  if ((size_t)n > STDIN_CHUNK)
    return sm_error_set(err, SM_EINVAL, "exec start: the stdin reader overran its buffer");
  if (n == 0) {
    h->stdin_open = 0;
    return 0;
  }
  h->out = h->stdin_buf;
  h->out_len = (size_t)n;
  h->out_off = 0;
  return 0;
}

static int run_loop(hijack *h, int64_t deadline, int64_t head_deadline, sm_error *err) {
  char buf[READ_CHUNK];
  const sm_exec_io *io = h->io;
  for (;;) {
    if (io->cancel && *io->cancel)
      return sm_error_set(err, SM_ECANCELLED, "exec start: cancelled");

    /* Read everything available: output must never back up. */
    int read_again = 0;
    for (;;) {
      ssize_t n = conn_read(h->e->addr.host, &h->c, buf, sizeof buf, err);
      if (n == -IO_AGAIN) {
        read_again = 1;
        break;
      }
      if (n < 0) return (int)n;
      if (n == 0) {
        if (h->streaming) return engine_mux_finish(&h->mux, err);
        if (h->head_len > 0) return error_answer(h, "exec start", err);
        return sm_error_set(err, SM_EPROTOCOL,
                            "exec start: the engine at %s closed the connection without "
                            "answering",
                            h->e->addr.host);
      }
      int rc = feed_head(h, buf, (size_t)n, err);
      if (rc != 0) return rc;
      if (!h->streaming && h->head_len > 0 &&
          error_body_complete(h->head.data + h->head_len, h->head.len - h->head_len, h->clen,
                              h->chunked))
        return error_answer(h, "exec start", err);
    }
    short want_read = h->c.want;
    if (h->stop_when_streaming && h->streaming) return 0;

    /* Write what is pending, then half-close once stdin has ended. */
    short want_write = 0;
    for (;;) {
      int rc = fill_out(h, err);
      if (rc != 0) return rc;
      if (h->out_off < h->out_len && !h->write_broken) {
        ssize_t n = conn_write(h->e->addr.host, &h->c, h->out + h->out_off, h->out_len - h->out_off, err);
        if (n == -IO_AGAIN) {
          want_write = h->c.want;
          break;
        }
        if (n < 0) {
          /* Before the head the request did not get through: fatal. After
           * it, the process may just have stopped reading; keep reading its
           * output. */
          if (!h->streaming) return (int)n;
          h->write_broken = 1;
          sm_error_clear(err);
          break;
        }
        h->out_off += (size_t)n;
        continue;
      }
      if (h->streaming && io->stdin_read != NULL && !h->stdin_done &&
          (!h->stdin_open || h->write_broken)) {
        int r = conn_shutdown_write(h->e->addr.host, &h->c, err);
        if (r == -IO_AGAIN) {
          want_write = h->c.want;
          break;
        }
        if (r < 0) {
          h->write_broken = 1;
          sm_error_clear(err);
        }
        h->stdin_done = 1;
      }
      break;
    }

    int64_t now = now_ms();
    int64_t until = deadline;
    if (!h->streaming && (until == 0 || head_deadline < until)) until = head_deadline;
    int timeout = -1;
    if (until > 0) {
      if (now >= until) {
        if (!h->streaming)
          return sm_error_set(err, SM_ETIMEOUT,
                              "exec start: the engine at %s did not answer in time",
                              h->e->addr.host);
        return sm_error_set(err, SM_ETIMEOUT,
                            "exec start: output did not end within %.1f s; the process may "
                            "still be running in the container",
                            io->timeout_s);
      }
      int64_t left = until - now;
      timeout = left > 1000000 ? 1000000 : (int)left;
    }
    if (io->cancel && (timeout < 0 || timeout > CANCEL_POLL_MS)) timeout = CANCEL_POLL_MS;
    struct pollfd p = {h->c.fd, (short)((read_again ? want_read : 0) | want_write), 0};
    if (p.events == 0) p.events = POLLIN;
    int n = poll(&p, 1, timeout);
    if (n < 0 && errno != EINTR) return sm_error_set_errno(err, SM_EIO, errno, "exec start: poll");
  }
}

/* The POST /exec/{id}/start request asking for the upgrade. */
static int start_request(sm_engine *e, const char *exec_id, sm_buf *req, sm_error *err) {
  sm_buf rel, path;
  sm_buf_init(&rel, 4096);
  sm_buf_init(&path, 4096);
  int rc = 0;
  if (sm_buf_append(&rel, "/exec/", 6) != 0 || engine_url_escape(&rel, exec_id, NULL) != 0 ||
      sm_buf_append(&rel, "/start", 6) != 0)
    rc = sm_error_set(err, SM_EINVAL, "exec id too long");
  if (rc == 0) rc = engine_versioned_path(e, &path, rel.data, err);
  if (rc == 0) {
    static const char body[] = "{\"Detach\":false,\"Tty\":false}";
    char hosthdr[ENGINE_HOST_MAX];
    if (e->addr.kind == ENGINE_ADDR_UNIX)
      snprintf(hosthdr, sizeof hosthdr, "docker");
    else
      snprintf(hosthdr, sizeof hosthdr, "%s", e->base_url + (e->addr.tls ? 8 : 7));
    if (sm_buf_printf(req,
                      "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sandman/%s\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n%s",
                      path.data, hosthdr, SANDMAN_VERSION, sizeof body - 1, body) != 0)
      rc = sm_error_set(err, SM_ENOMEM, "exec start: out of memory");
  }
  sm_buf_dispose(&rel);
  sm_buf_dispose(&path);
  return rc;
}

static int connect_engine(sm_engine *e, conn *c, int64_t deadline, sm_error *err) {
  if (e->addr.kind == ENGINE_ADDR_UNIX) return connect_unix(e, c, err);
  int rc = connect_tcp(e, c, deadline, err);
  if (rc == 0 && e->addr.tls) rc = connect_tls(e, c, deadline, err);
  return rc;
}

int engine_exec_hijack(sm_engine *e, const char *exec_id, const sm_exec_io *io, sm_error *err) {
  int64_t start = now_ms();
  int64_t deadline = io->timeout_s > 0 ? start + (int64_t)(io->timeout_s * 1000.0) : 0;
  int64_t connect_deadline = start + e->connect_timeout_ms;
  if (deadline > 0 && deadline < connect_deadline) connect_deadline = deadline;
  int64_t head_deadline = start + e->request_timeout_ms;

  sm_buf req;
  sm_buf_init(&req, 8192);
  hijack h;
  memset(&h, 0, sizeof h);
  h.e = e;
  h.io = io;
  h.c.fd = -1;
  sm_buf_init(&h.head, ENGINE_MAX_HTTP_HEAD + ENGINE_MAX_ERROR_BODY);
  engine_mux_init(&h.mux, io->max_frame_bytes, io->output, io->output_ud);

  int rc = start_request(e, exec_id, &req, err);
  if (rc == 0 && io->stdin_read != NULL) {
    h.stdin_buf = malloc(STDIN_CHUNK);
    if (h.stdin_buf == NULL) rc = sm_error_set(err, SM_ENOMEM, "exec start: out of memory");
    h.stdin_open = 1;
  }
  if (rc == 0) rc = connect_engine(e, &h.c, connect_deadline, err);
  if (rc == 0) {
    h.out = req.data;
    h.out_len = req.len;
    /* Without stdin the write side is closed once the request is out. */
    rc = run_loop(&h, deadline, head_deadline, err);
  }
  if (rc != 0 && err && err->code == SM_EUNREACHABLE) sm_error_wrap(err, "exec start");
  if (rc == 0) tls_keep_session(e, &h.c);
  conn_close(&h.c);
  free(h.stdin_buf);
  sm_buf_dispose(&h.head);
  sm_buf_dispose(&req);
  return rc;
}

/* ---- exec streams: an exec kept attached for a conversation ----
 * The same upgrade as above, but the caller keeps the connection and pumps
 * it: the in-sandbox agent (src/agent) speaks its protocol over it. After
 * the open the stream needs nothing of the client (an SSL object holds its
 * own reference to the context), so it may move between threads. */
struct sm_exec_stream {
  hijack h;
  sm_exec_io io;
  char host[ENGINE_HOST_MAX];
  int ended;
};

int sm_engine_exec_open(sm_engine *e, const char *exec_id, sm_output_fn output, void *ud,
                        sm_exec_stream **out, sm_error *err) {
  *out = NULL;
  if (e == NULL) return sm_error_set(err, SM_EINVAL, "no engine client");
  int rc = engine_check_ref(exec_id, "exec id", err);
  if (rc != 0) return rc;
  sm_exec_stream *s = calloc(1, sizeof *s);
  if (s == NULL) return sm_error_set(err, SM_ENOMEM, "exec stream: out of memory");
  sm_exec_io io = SM_EXEC_IO_INIT;
  s->io = io;
  s->io.output = output;
  s->io.output_ud = ud;
  snprintf(s->host, sizeof s->host, "%s", e->addr.host);
  hijack *h = &s->h;
  h->e = e;
  h->io = &s->io;
  h->c.fd = -1;
  sm_buf_init(&h->head, ENGINE_MAX_HTTP_HEAD + ENGINE_MAX_ERROR_BODY);
  engine_mux_init(&h->mux, 0, output, ud);

  int64_t start = now_ms();
  sm_buf req;
  sm_buf_init(&req, 8192);
  rc = start_request(e, exec_id, &req, err);
  if (rc == 0) rc = connect_engine(e, &h->c, start + e->connect_timeout_ms, err);
  if (rc == 0) {
    /* The exec start's own loop, up to the upgrade (bytes after it go to
     * the demultiplexer and on to output). */
    h->out = req.data;
    h->out_len = req.len;
    h->stop_when_streaming = 1;
    rc = run_loop(h, 0, start + e->request_timeout_ms, err);
    h->out = NULL;
    h->out_len = h->out_off = 0;
  }
  sm_buf_dispose(&req);
  if (rc != 0 && err && err->code == SM_EUNREACHABLE) sm_error_wrap(err, "exec start");
  if (rc != 0) {
    sm_exec_stream_close(s);
    return rc;
  }
  tls_keep_session(e, &h->c);
  h->e = NULL; /* nothing of the client is used from here on */
  *out = s;
  return 0;
}

int sm_exec_stream_pump(sm_exec_stream *s, const void *data, size_t len, size_t *written,
                        int timeout_ms, sm_error *err) {
  if (written) *written = 0;
  if (s->ended) return 1;
  hijack *h = &s->h;
  char buf[STREAM_READ_CHUNK];
  size_t done = 0;
  for (int round = 0; round < 2; round++) {
    int progress = 0;
    /* Read everything available first: output must never back up. */
    short want = 0;
    for (;;) {
      ssize_t n = conn_read(s->host, &h->c, buf, sizeof buf, err);
      if (n == -IO_AGAIN) {
        want = h->c.want;
        break;
      }
      if (n < 0) return (int)n;
      if (n == 0) {
        s->ended = 1;
        int rc = engine_mux_finish(&h->mux, err);
        return rc ? rc : 1;
      }
      progress = 1;
      int rc = engine_mux_feed(&h->mux, buf, (size_t)n, err);
      if (rc != 0) return rc;
    }
    while (done < len) {
      ssize_t n = conn_write(s->host, &h->c, (const char *)data + done, len - done, err);
      if (n == -IO_AGAIN) {
        want |= h->c.want;
        break;
      }
      if (n < 0) return (int)n;
      done += (size_t)n;
      progress = 1;
    }
    if (written) *written = done;
    if (progress || round == 1 || timeout_ms == 0) return 0;
    if (done < len) want |= POLLOUT;
    struct pollfd p = {h->c.fd, want ? want : POLLIN, 0};
    int n = poll(&p, 1, timeout_ms);
    if (n < 0 && errno != EINTR) return sm_error_set_errno(err, SM_EIO, errno, "exec stream: poll");
    if (n == 0) return 0;
  }
  return 0;
}

int sm_exec_stream_quiet(sm_exec_stream *s) {
  if (s->ended || s->h.c.fd < 0) return 0;
  if (s->h.c.ssl && SSL_pending(s->h.c.ssl) > 0) return 0;
  struct pollfd p = {s->h.c.fd, POLLIN, 0};
  int n = poll(&p, 1, 0);
  return n == 0;
}

void sm_exec_stream_close(sm_exec_stream *s) {
  if (s == NULL) return;
  conn_close(&s->h.c);
  sm_buf_dispose(&s->h.head);
  free(s);
}
