/* The raw connection of a hijacked exec: a unix or TCP socket, TLS over
 * it with OpenSSL (the context and a resumable session kept on the
 * client), non-blocking reads and writes that say what they wait for, and
 * the half-close that ends stdin. hijack.c speaks HTTP over it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include <openssl/x509v3.h>

#include <sandman/log.h>

#include "common/unconst.h"
#include "engine/conn.h"
#include "engine/transport.h"

int64_t engine_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void engine_conn_close(engine_conn *c) {
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
    int64_t left = deadline - engine_now_ms();
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

static int connect_unix(sm_engine *e, engine_conn *c, sm_error *err) {
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

static int connect_tcp(sm_engine *e, engine_conn *c, int64_t deadline, sm_error *err) {
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
    /* An engine that vanishes (its host or, on a swarm, its node died)
     * sends no FIN: keepalive probes end a quiet stream on it in ~11 s
     * instead of at the call's timeout. A live engine answers them. */
    int idle = 5, intvl = 2, cnt = 3;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
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
void engine_conn_keep_session(sm_engine *e, engine_conn *c) {
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

static int connect_tls(sm_engine *e, engine_conn *c, int64_t deadline, sm_error *err) {
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

/* One SSL_read (or SSL_write) of at most len bytes with SIGPIPE blocked:
 * its result, with the SSL error in *se and errno in *en. */
static int ssl_io(engine_conn *c, int writing, char *buf, size_t len, int *se, int *en) {
  ERR_clear_error();
  sigpipe_guard g;
  sigpipe_block(&g);
  int n = len > INT32_MAX ? INT32_MAX : (int)len;
  int r = writing ? SSL_write(c->ssl, buf, n) : SSL_read(c->ssl, buf, n);
  *se = r > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
  *en = errno;
  sigpipe_restore(&g);
  return r;
}

/* >0 bytes, 0 end of stream, ENGINE_IO_AGAIN (c->want says for what), or <0. */
ssize_t engine_conn_read(const char *host, engine_conn *c, char *buf, size_t len, sm_error *err) {
  if (c->ssl == NULL) {
    ssize_t n = recv(c->fd, buf, len, 0);
    if (n >= 0) return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      c->want = POLLIN;
      return -ENGINE_IO_AGAIN;
    }
    if (errno == ECONNRESET) return 0;
    return sm_error_set_errno(err, SM_EIO, errno, "exec start: reading from the engine at %s",
                              host);
  }
  int se, en;
  int r = ssl_io(c, 0, buf, len, &se, &en);
  if (r > 0) return r;
  switch (se) {
  case SSL_ERROR_WANT_READ:
    c->want = POLLIN;
    return -ENGINE_IO_AGAIN;
  case SSL_ERROR_WANT_WRITE:
    c->want = POLLOUT;
    return -ENGINE_IO_AGAIN;
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

ssize_t engine_conn_write(const char *host, engine_conn *c, const char *buf, size_t len,
                          sm_error *err) {
  if (c->ssl == NULL) {
    ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      c->want = POLLOUT;
      return -ENGINE_IO_AGAIN;
    }
    return sm_error_set_errno(err, SM_EIO, errno, "exec start: writing to the engine at %s",
                              host);
  }
  int se, en;
  int r = ssl_io(c, 1, SM_UNCONST(buf), len, &se, &en);
  if (r > 0) return r;
  if (se == SSL_ERROR_WANT_WRITE || se == SSL_ERROR_WANT_READ) {
    c->want = se == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
    return -ENGINE_IO_AGAIN;
  }
  if (se == SSL_ERROR_SYSCALL)
    return sm_error_set_errno(err, SM_EIO, en ? en : EPIPE,
                              "exec start: writing to the engine at %s", host);
  return tls_error_at(host, "writing", err);
}

/* Half-close: 0 done, -ENGINE_IO_AGAIN, or <0. */
int engine_conn_shutdown_write(const char *host, engine_conn *c, sm_error *err) {
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
    return -ENGINE_IO_AGAIN;
  }
  return tls_error_at(host, "closing stdin", err);
}

int engine_conn_open(sm_engine *e, engine_conn *c, int64_t deadline, sm_error *err) {
  if (e->addr.kind == ENGINE_ADDR_UNIX) return connect_unix(e, c, err);
  int rc = connect_tcp(e, c, deadline, err);
  if (rc == 0 && e->addr.tls) rc = connect_tls(e, c, deadline, err);
  return rc;
}
