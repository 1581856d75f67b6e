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
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <sandman/log.h>

#include "common/cleanup.h"
#include "engine/engine_call.h"
#include "engine/conn.h"
#include "engine/hijack.h"
#include "engine/mux.h"
#include "engine/path.h"
#include "engine/response.h"

#define STDIN_CHUNK (64u << 10)
#define READ_CHUNK (64u << 10)
/* Exec streams read in smaller steps: their frames are small, and every
 * thread that pumps one keeps the buffer's stack pages resident (a runner
 * has 16+ such threads). */
#define STREAM_READ_CHUNK (16u << 10)
#define CANCEL_POLL_MS 100

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
  engine_conn c;
  common_buf head;       /* the response head, then an error body */
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
  if (common_buf_append(&h->head, data, len) != 0)
    return sm_error_set(err, SM_EPROTOCOL,
                        "exec start: the engine at %s sent an over-long answer",
                        h->e->addr.host);
  if (h->head_len == 0) {
    int st = 0;
    size_t hl = 0;
    long long clen = -1;
    int chunked = 0;
    int r = engine_http_parse_head(h->head.data, h->head.len, &st, &hl, &clen, &chunked, err);
    if (r < 0) {
      sm_error_wrap(err, "exec start: the engine at %s sent a malformed HTTP answer",
                    h->e->addr.host);
      return r;
    }
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
      common_buf_dispose(&h->head);
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
      ssize_t n = engine_conn_read(h->e->addr.host, &h->c, buf, sizeof buf, err);
      if (n == -ENGINE_IO_AGAIN) {
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
        ssize_t n = engine_conn_write(h->e->addr.host, &h->c, h->out + h->out_off,
                                      h->out_len - h->out_off, err);
        if (n == -ENGINE_IO_AGAIN) {
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
        int r = engine_conn_shutdown_write(h->e->addr.host, &h->c, err);
        if (r == -ENGINE_IO_AGAIN) {
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

    int64_t now = engine_now_ms();
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
static int start_request(sm_engine *e, const char *exec_id, common_buf *req, sm_error *err) {
  cleanup_buf common_buf rel;
  common_buf_init(&rel, 4096);
  cleanup_buf common_buf path;
  common_buf_init(&path, 4096);
  int rc = engine_ref_path(&rel, "/exec/", exec_id, NULL, "/start", "exec id", err);
  if (rc == 0) rc = engine_versioned_path(e, &path, rel.data, err);
  if (rc == 0) {
    static const char body[] = "{\"Detach\":false,\"Tty\":false}";
    char hosthdr[ENGINE_HOST_MAX];
    if (e->addr.kind == ENGINE_ADDR_UNIX)
      snprintf(hosthdr, sizeof hosthdr, "docker");
    else
      snprintf(hosthdr, sizeof hosthdr, "%s", e->base_url + (e->addr.tls ? 8 : 7));
    if (common_buf_printf(req,
                          "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: sandman/%s\r\n"
                          "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                          "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n%s",
                          path.data, hosthdr, SANDMAN_VERSION, sizeof body - 1, body) != 0)
      rc = sm_error_set(err, SM_ENOMEM, "exec start: out of memory");
  }
  return rc;
}

int engine_exec_hijack(sm_engine *e, const char *exec_id, const sm_exec_io *io, sm_error *err) {
  int64_t start = engine_now_ms();
  int64_t deadline = io->timeout_s > 0 ? start + (int64_t)(io->timeout_s * 1000.0) : 0;
  int64_t connect_deadline = start + e->connect_timeout_ms;
  if (deadline > 0 && deadline < connect_deadline) connect_deadline = deadline;
  int64_t head_deadline = start + e->request_timeout_ms;

  cleanup_buf common_buf req;
  common_buf_init(&req, 8192);
  hijack h;
  memset(&h, 0, sizeof h);
  h.e = e;
  h.io = io;
  h.c.fd = -1;
  common_buf_init(&h.head, ENGINE_MAX_HTTP_HEAD + ENGINE_MAX_ERROR_BODY);
  engine_mux_init(&h.mux, io->max_frame_bytes, io->output, io->output_ud);

  int rc = start_request(e, exec_id, &req, err);
  if (rc == 0 && io->stdin_read != NULL) {
    h.stdin_buf = malloc(STDIN_CHUNK);
    if (h.stdin_buf == NULL) rc = sm_error_set(err, SM_ENOMEM, "exec start: out of memory");
    h.stdin_open = 1;
  }
  if (rc == 0) rc = engine_conn_open(e, &h.c, connect_deadline, err);
  if (rc == 0) {
    h.out = req.data;
    h.out_len = req.len;
    /* Without stdin the write side is closed once the request is out. */
    rc = run_loop(&h, deadline, head_deadline, err);
  }
  if (rc != 0 && err && err->code == SM_EUNREACHABLE) sm_error_wrap(err, "exec start");
  if (rc == 0) engine_conn_keep_session(e, &h.c);
  engine_conn_close(&h.c);
  free(h.stdin_buf);
  common_buf_dispose(&h.head);
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
  int wake_fd; /* -1, or a descriptor whose readability ends a pump's wait */
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
  s->wake_fd = -1;
  s->io.output = output;
  s->io.output_ud = ud;
  snprintf(s->host, sizeof s->host, "%s", e->addr.host);
  hijack *h = &s->h;
  h->e = e;
  h->io = &s->io;
  h->c.fd = -1;
  common_buf_init(&h->head, ENGINE_MAX_HTTP_HEAD + ENGINE_MAX_ERROR_BODY);
  engine_mux_init(&h->mux, 0, output, ud);

  int64_t start = engine_now_ms();
  cleanup_buf common_buf req;
  common_buf_init(&req, 8192);
  rc = start_request(e, exec_id, &req, err);
  if (rc == 0) rc = engine_conn_open(e, &h->c, start + e->connect_timeout_ms, err);
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
  if (rc != 0 && err && err->code == SM_EUNREACHABLE) sm_error_wrap(err, "exec start");
  if (rc != 0) {
    sm_exec_stream_close(s);
    return rc;
  }
  engine_conn_keep_session(e, &h->c);
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
      ssize_t n = engine_conn_read(s->host, &h->c, buf, sizeof buf, err);
      if (n == -ENGINE_IO_AGAIN) {
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
      ssize_t n = engine_conn_write(s->host, &h->c, (const char *)data + done, len - done, err);
      if (n == -ENGINE_IO_AGAIN) {
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
    struct pollfd p[2] = {{h->c.fd, want ? want : POLLIN, 0}, {s->wake_fd, POLLIN, 0}};
    int n = poll(p, s->wake_fd >= 0 ? 2 : 1, timeout_ms);
    if (n < 0 && errno != EINTR) return sm_error_set_errno(err, SM_EIO, errno, "exec stream: poll");
    if (n == 0) return 0;
    if (s->wake_fd >= 0 && p[1].revents && !p[0].revents) return 0;
  }
  return 0;
}

void sm_exec_stream_set_wake(sm_exec_stream *s, int fd) { s->wake_fd = fd; }

ssize_t sm_engine_exec_send_now(sm_exec_stream *s, const void *data, size_t len) {
  /* A TLS session's state belongs to the pumping thread; a plain socket
   * takes a write beside another thread's reads. */
  if (s->h.c.fd < 0 || s->h.c.ssl != NULL) return -1;
  if (len == 0) return 0;
  ssize_t n = send(s->h.c.fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n >= 0) return n;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
}

int sm_exec_stream_quiet(sm_exec_stream *s) {
  if (s->ended || s->h.c.fd < 0) return 0;
  if (s->h.c.ssl && SSL_pending(s->h.c.ssl) > 0) return 0;
  struct pollfd p = {s->h.c.fd, POLLIN, 0};
  int n = poll(&p, 1, 0);
  return n == 0;
}

void sm_exec_stream_shutdown(sm_exec_stream *s) {
  /* Only the socket: the TLS state belongs to the pumping thread. */
  if (s && s->h.c.fd >= 0) shutdown(s->h.c.fd, SHUT_RDWR);
}

void sm_exec_stream_close(sm_exec_stream *s) {
  if (s == NULL) return;
  engine_conn_close(&s->h.c);
  common_buf_dispose(&s->h.head);
  free(s);
}
