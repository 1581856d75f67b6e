/* The transport and the exec hijack against a fake engine on a unix socket:
 * version prefix and keep-alive, over-cap, truncated, garbage and silent
 * answers (errors, never crashes or hangs), and the hijacked exec stream:
 * 101, frames split across writes, stdin half-close, a server that writes
 * a lot before it reads, error answers, cut streams, timeouts, cancel. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/engine.h>

#include "common/unconst.h"
#include "support/memio.h"
#include "support/sock.h"
#include "support/xalloc.h"

typedef enum {
  M_NORMAL,      /* ping 1.41, JSON answers, exec echo */
  M_OLD,         /* ping says 1.30 */
  M_NOVERSION,   /* ping without Api-Version */
  M_BIG,         /* 2 MB body */
  M_TRUNCATED,   /* Content-Length 100, 10 bytes, close */
  M_GARBAGE,     /* not HTTP */
  M_SILENT,      /* never answers */
  M_CLOSE,       /* closes without answering */
  M_HTML500,     /* 500 with an HTML body */
  M_EXEC_404,    /* exec start answered 404 with a length, connection kept */
  M_EXEC_CUT,    /* exec stream cut inside a frame */
  M_EXEC_FLOOD,  /* 4 MB of output before reading stdin */
  M_EXEC_HANG,   /* 101, then nothing */
} mode;

typedef struct server {
  int lfd;
  char dir[64];
  char path[128];
  pthread_t thread;
  volatile int stop;
  mode m;
  int connections;
  int requests;
  char last_path[512];
  size_t stdin_bytes;
  int saw_stdin_eof;
} server;

static server srv;

static int say(int fd, const char *s) { return ts_send_all(fd, s, strlen(s)); }

/* Reads a request head (and a Content-Length body). 0 on EOF. */
static int read_request(int fd, char *head, size_t cap, char *method, char *path) {
  size_t len = 0;
  for (;;) {
    if (len + 1 >= cap) return -1;
    ssize_t n = recv(fd, head + len, 1, 0);
    if (n <= 0) return 0;
    len++;
    if (len >= 4 && memcmp(head + len - 4, "\r\n\r\n", 4) == 0) break;
  }
  head[len] = '\0';
  sscanf(head, "%15s %511s", method, path);
  const char *cl = strstr(head, "Content-Length: ");
  if (cl) {
    long n = strtol(cl + 16, NULL, 10);
    char tmp[256];
    while (n > 0) {
      ssize_t r = recv(fd, tmp, n < (long)sizeof tmp ? (size_t)n : sizeof tmp, 0);
      if (r <= 0) return 0;
      n -= r;
    }
  }
  if (strstr(head, "Transfer-Encoding: chunked")) {
    /* Drain until the last chunk. */
    char last[5] = {0};
    char c;
    while (recv(fd, &c, 1, 0) == 1) {
      memmove(last, last + 1, 4);
      last[4] = c;
      if (memcmp(last, "0\r\n\r\n", 5) == 0) break;
    }
  }
  return 1;
}

static void answer_json(int fd, int status, const char *body) {
  char h[256];
  snprintf(h, sizeof h,
           "HTTP/1.1 %d X\r\nApi-Version: 1.41\r\nContent-Type: application/json\r\n"
           "Content-Length: %zu\r\n\r\n",
           status, strlen(body));
  say(fd, h);
  say(fd, body);
}

/* The hijacked exec: echoes stdin to stdout in awkwardly split frames
 * until the client half-closes, then says "bye" on stderr and closes. */
static void exec_echo(int fd) {
  say(fd, "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
          "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n");
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      srv.saw_stdin_eof = n == 0;
      break;
    }
    srv.stdin_bytes += (size_t)n;
    unsigned char h[8];
    ts_mux_head(h, 1, (uint32_t)n);
    /* Header split in two writes, payload in two more. */
    ts_send_all(fd, h, 3);
    usleep(1000);
    ts_send_all(fd, h + 3, 5);
    ts_send_all(fd, buf, (size_t)n / 2);
    ts_send_all(fd, buf + n / 2, (size_t)n - (size_t)n / 2);
  }
  unsigned char z[8];
  ts_mux_head(z, 1, 0);
  ts_send_all(fd, z, 8);
  unsigned char h[8];
  ts_mux_head(h, 2, 4);
  ts_send_all(fd, h, 8);
  ts_send_all(fd, "bye\n", 4);
}

static void exec_flood(int fd) {
  say(fd, "HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n");
  static char chunk[65536];
  memset(chunk, 'f', sizeof chunk);
  for (int i = 0; i < 64; i++) {
    unsigned char h[8];
    ts_mux_head(h, 1, sizeof chunk);
    if (ts_send_all(fd, h, 8) != 0 || ts_send_all(fd, chunk, sizeof chunk) != 0) return;
  }
  char buf[65536];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) srv.stdin_bytes += (size_t)n;
  srv.saw_stdin_eof = n == 0;
  char msg[64];
  int len = snprintf(msg, sizeof msg, "%zu", srv.stdin_bytes);
  unsigned char h[8];
  ts_mux_head(h, 2, (uint32_t)len);
  ts_send_all(fd, h, 8);
  ts_send_all(fd, msg, (size_t)len);
}

/* Serves one connection; returns when it is closed. */
static void serve(int fd) {
  char head[8192], method[16] = "", path[512] = "";
  for (;;) {
    int r = read_request(fd, head, sizeof head, method, path);
    if (r <= 0) return;
    srv.requests++;
    snprintf(srv.last_path, sizeof srv.last_path, "%s %s", method, path);
    int is_ping = strcmp(path, "/_ping") == 0;
    if (is_ping && srv.m != M_OLD && srv.m != M_NOVERSION) {
      say(fd, "HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nContent-Length: 2\r\n\r\nOK");
      continue;
    }
    int is_exec = strstr(path, "/exec/") && strstr(path, "/start");
    switch (srv.m) {
    case M_OLD:
      say(fd, "HTTP/1.1 200 OK\r\nApi-Version: 1.30\r\nContent-Length: 2\r\n\r\nOK");
      continue;
    case M_NOVERSION:
      say(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK");
      continue;
    case M_BIG: {
      say(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2097152\r\n\r\n");
      static char chunk[65536];
      memset(chunk, ' ', sizeof chunk);
      for (int i = 0; i < 32; i++)
        if (ts_send_all(fd, chunk, sizeof chunk) != 0) return;
      continue;
    }
    case M_TRUNCATED:
      say(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"a\":\"0123");
      return;
    case M_GARBAGE:
      say(fd, "SSH-2.0-OpenSSH_9.2\r\n\x01\x02\x03 not http at all\r\n\r\n");
      return;
    case M_SILENT: {
      struct pollfd p = {fd, POLLIN, 0};
      while (!srv.stop && poll(&p, 1, 50) == 0) {
      }
      return;
    }
    case M_CLOSE:
      return;
    case M_HTML500:
      say(fd, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 24\r\n\r\n<html>it broke</html>\r\n\r\n");
      continue;
    case M_EXEC_404:
      if (is_exec) {
        answer_json(fd, 404, "{\"message\":\"No such exec instance: abc\"}");
        continue; /* keep-alive: the client must not wait for a close */
      }
      break;
    case M_EXEC_CUT:
      if (is_exec) {
        say(fd, "HTTP/1.1 101 UPGRADED\r\n\r\n");
        unsigned char h[8];
        ts_mux_head(h, 1, 100);
        ts_send_all(fd, h, 8);
        ts_send_all(fd, "only part", 9);
        return;
      }
      break;
    case M_EXEC_FLOOD:
      if (is_exec) {
        exec_flood(fd);
        return;
      }
      break;
    case M_EXEC_HANG:
      if (is_exec) {
        say(fd, "HTTP/1.1 101 UPGRADED\r\n\r\n");
        struct pollfd p = {fd, POLLIN, 0};
        char tmp[256];
        while (!srv.stop) {
          if (poll(&p, 1, 50) > 0 && recv(fd, tmp, sizeof tmp, 0) <= 0) break;
        }
        return;
      }
      break;
    default:
      break;
    }
    if (is_exec) {
      exec_echo(fd);
      return;
    }
    answer_json(fd, 200, "{\"Version\":\"fake\",\"ApiVersion\":\"1.41\"}");
  }
}

static volatile int active;

static void *conn_main(void *arg) {
  int fd = (int)(intptr_t)arg;
  serve(fd);
  close(fd);
  __atomic_sub_fetch(&active, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* A thread per connection: the client's kept-alive connection and its
 * hijacked exec connection are open at the same time. */
static void *server_main(void *arg) {
  (void)arg;
  while (!srv.stop) {
    struct pollfd p = {srv.lfd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    int fd = accept(srv.lfd, NULL, NULL);
    if (fd < 0) continue;
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    __atomic_add_fetch(&srv.connections, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&active, 1, __ATOMIC_SEQ_CST);
    pthread_t t;
    if (pthread_create(&t, NULL, conn_main, (void *)(intptr_t)fd) != 0) {
      close(fd);
      __atomic_sub_fetch(&active, 1, __ATOMIC_SEQ_CST);
      continue;
    }
    pthread_detach(t);
  }
  for (int i = 0; i < 200 && active > 0; i++) usleep(10000);
  return NULL;
}

static int server_start(void **state) {
  (void)state;
  memset(&srv, 0, sizeof srv);
  snprintf(srv.dir, sizeof srv.dir, "/tmp/sandman-ut-engine-XXXXXX");
  if (mkdtemp(srv.dir) == NULL) return -1;
  snprintf(srv.path, sizeof srv.path, "%s/d.sock", srv.dir);
  srv.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", srv.path);
  if (bind(srv.lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(srv.lfd, 8) != 0) return -1;
  return pthread_create(&srv.thread, NULL, server_main, NULL);
}

static int server_stop(void **state) {
  (void)state;
  srv.stop = 1;
  pthread_join(srv.thread, NULL);
  close(srv.lfd);
  unlink(srv.path);
  rmdir(srv.dir);
  return 0;
}

static sm_engine *client(mode m, size_t max_body, long timeout_ms) {
  srv.m = m;
  srv.connections = 0;
  srv.requests = 0;
  srv.stdin_bytes = 0;
  srv.saw_stdin_eof = 0;
  char host[200];
  snprintf(host, sizeof host, "unix://%s", srv.path);
  sm_engine_options o = SM_ENGINE_OPTIONS_INIT;
  o.host = host;
  o.max_response_bytes = max_body;
  o.request_timeout_ms = timeout_ms;
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_new(&e, &o, &err) != 0) fail_msg("new: %s", err.message);
  return e;
}

static void test_version_prefix_keepalive(void **s) {
  (void)s;
  sm_engine *e = client(M_NORMAL, 0, 0);
  sm_error err = SM_ERROR_INIT;
  json_object *v = NULL;
  assert_int_equal(sm_engine_version(e, &v, &err), 0);
  json_object_put(v);
  assert_string_equal(srv.last_path, "GET /v1.41/version");
  assert_int_equal(sm_engine_info(e, &v, &err), 0);
  json_object_put(v);
  assert_string_equal(srv.last_path, "GET /v1.41/info");
  int status = 0;
  assert_int_equal(sm_engine_request_json(e, "DELETE", "/containers/x?force=1", NULL, &status,
                                          NULL, &err), 0);
  assert_string_equal(srv.last_path, "DELETE /v1.41/containers/x?force=1");
  const char *labels[] = {"io.sandman.managed=true"};
  json_object *l = NULL;
  assert_int_equal(sm_engine_container_list(e, 1, labels, 1, &l, &err), SM_EPROTOCOL);
  assert_string_equal(srv.last_path,
                      "GET /v1.41/containers/json?all=1&filters=%7B%22label%22%3A%5B%22io."
                      "sandman.managed%3Dtrue%22%5D%7D");
  /* Ping, version, info, delete, list: one connection, kept alive. */
  assert_int_equal(srv.requests, 5);
  assert_int_equal(srv.connections, 1);
  sm_engine_free(e);
}

static void test_negotiation_failures(void **s) {
  (void)s;
  sm_error err = SM_ERROR_INIT;
  sm_engine *e = client(M_OLD, 0, 0);
  assert_int_equal(sm_engine_negotiate(e, &err), SM_EUNSUPPORTED);
  assert_non_null(strstr(err.message, "1.30"));
  json_object *v = NULL;
  assert_int_equal(sm_engine_version(e, &v, &err), SM_EUNSUPPORTED);
  assert_null(sm_engine_api_version(e));
  sm_engine_free(e);
  e = client(M_NOVERSION, 0, 0);
  assert_int_equal(sm_engine_negotiate(e, &err), SM_EPROTOCOL);
  sm_engine_free(e);
}

static void test_bad_answers(void **s) {
  (void)s;
  sm_error err = SM_ERROR_INIT;
  json_object *v = NULL;
  sm_engine *e = client(M_BIG, 1 << 20, 0);
  assert_int_equal(sm_engine_version(e, &v, &err), SM_ETOOBIG);
  assert_non_null(strstr(err.message, "1048576"));
  assert_null(v);
  sm_engine_free(e);

  e = client(M_TRUNCATED, 0, 0);
  assert_int_equal(sm_engine_version(e, &v, &err), SM_EPROTOCOL);
  assert_null(v);
  sm_engine_free(e);

  e = client(M_GARBAGE, 0, 0);
  assert_int_equal(sm_engine_version(e, &v, &err), SM_EPROTOCOL);
  sm_engine_free(e);

  e = client(M_CLOSE, 0, 0);
  assert_int_equal(sm_engine_version(e, &v, &err), SM_EPROTOCOL);
  assert_non_null(strstr(err.message, "without answering"));
  sm_engine_free(e);

  e = client(M_HTML500, 0, 0);
  assert_int_equal(sm_engine_version(e, &v, &err), SM_EENGINE);
  assert_int_equal(err.http_status, 500);
  assert_non_null(strstr(err.message, "<html>it broke</html>"));
  sm_engine_free(e);

  e = client(M_SILENT, 0, 1000);
  assert_int_equal(sm_engine_version(e, &v, &err), SM_ETIMEOUT);
  assert_non_null(strstr(err.message, "did not answer in time"));
  sm_engine_free(e);
}

typedef struct out {
  char stdout_buf[1 << 16];
  size_t out_len, total_out;
  char err_buf[256];
  size_t err_len;
} out;

static int collect(void *ud, int stream, const char *data, size_t len) {
  out *o = ud;
  if (stream == 1) {
    size_t take = len;
    if (o->out_len + take > sizeof o->stdout_buf) take = sizeof o->stdout_buf - o->out_len;
    memcpy(o->stdout_buf + o->out_len, data, take);
    o->out_len += take;
    o->total_out += len;
  } else {
    size_t take = len < sizeof o->err_buf - o->err_len - 1 ? len : sizeof o->err_buf - o->err_len - 1;
    memcpy(o->err_buf + o->err_len, data, take);
    o->err_len += take;
    o->err_buf[o->err_len] = '\0';
  }
  return 0;
}

static void test_exec_echo(void **st) {
  (void)st;
  sm_engine *e = client(M_NORMAL, 0, 0);
  sm_error err = SM_ERROR_INIT;
  static out o;
  memset(&o, 0, sizeof o);
  mem_reader in = {"the quick brown fox\njumps over\n", 0, 0, 5};
  in.len = strlen(in.data);
  sm_exec_io io = SM_EXEC_IO_INIT;
  io.stdin_read = read_mem;
  io.stdin_ud = &in;
  io.output = collect;
  io.output_ud = &o;
  io.timeout_s = 20;
  assert_int_equal(sm_engine_exec_start(e, "abc", &io, &err), 0);
  assert_int_equal(o.out_len, in.len);
  assert_memory_equal(o.stdout_buf, in.data, in.len);
  assert_string_equal(o.err_buf, "bye\n");
  assert_true(srv.saw_stdin_eof);
  assert_string_equal(srv.last_path, "POST /v1.41/exec/abc/start");
  sm_engine_free(e);
}

static void test_exec_flood(void **st) {
  (void)st;
  /* The server writes 4 MB before it reads any stdin; the client sends 4
   * MB of stdin. Without reading while writing both would block. */
  sm_engine *e = client(M_EXEC_FLOOD, 0, 0);
  sm_error err = SM_ERROR_INIT;
  static out o;
  memset(&o, 0, sizeof o);
  size_t n = 4u << 20;
  char *data = xcalloc(1, n);
  mem_reader in = {data, n, 0, 0};
  sm_exec_io io = SM_EXEC_IO_INIT;
  io.stdin_read = read_mem;
  io.stdin_ud = &in;
  io.output = collect;
  io.output_ud = &o;
  io.timeout_s = 60;
  assert_int_equal(sm_engine_exec_start(e, "abc", &io, &err), 0);
  assert_int_equal(o.total_out, 64u * 65536u);
  char want[32];
  snprintf(want, sizeof want, "%zu", n);
  assert_string_equal(o.err_buf, want);
  free(data);
  sm_engine_free(e);
}

static void test_exec_errors(void **st) {
  (void)st;
  sm_error err = SM_ERROR_INIT;
  sm_exec_io io = SM_EXEC_IO_INIT;
  io.timeout_s = 20;
  /* A 404 on a kept-alive connection is read by its length, no hang. */
  sm_engine *e = client(M_EXEC_404, 0, 0);
  assert_int_equal(sm_engine_exec_start(e, "abc", &io, &err), SM_ENOTFOUND);
  assert_int_equal(err.http_status, 404);
  assert_non_null(strstr(err.message, "No such exec instance: abc"));
  sm_engine_free(e);

  e = client(M_EXEC_CUT, 0, 0);
  assert_int_equal(sm_engine_exec_start(e, "abc", &io, &err), SM_EPROTOCOL);
  assert_non_null(strstr(err.message, "cut inside a frame"));
  sm_engine_free(e);

  /* Garbage answers to exec start (the ping succeeded first). */
  e = client(M_NORMAL, 0, 0);
  assert_int_equal(sm_engine_negotiate(e, &err), 0);
  srv.m = M_GARBAGE;
  assert_int_equal(sm_engine_exec_start(e, "abc", &io, &err), SM_EPROTOCOL);
  srv.m = M_CLOSE;
  assert_int_equal(sm_engine_exec_start(e, "abc", &io, &err), SM_EPROTOCOL);
  sm_engine_free(e);

  /* A frame over the caller's cap. */
  e = client(M_EXEC_CUT, 0, 0);
  io.max_frame_bytes = 50;
  assert_int_equal(sm_engine_exec_start(e, "abc", &io, &err), SM_ETOOBIG);
  sm_engine_free(e);
}

static void *cancel_soon(void *p) {
  usleep(200000);
  *(volatile int *)p = 1;
  return NULL;
}

static void test_exec_timeout_cancel(void **st) {
  (void)st;
  sm_error err = SM_ERROR_INIT;
  sm_engine *e = client(M_EXEC_HANG, 0, 0);
  sm_exec_io io = SM_EXEC_IO_INIT;
  io.timeout_s = 0.3;
  assert_int_equal(sm_engine_exec_start(e, "abc", &io, &err), SM_ETIMEOUT);
  assert_non_null(strstr(err.message, "still be running"));

  volatile int cancel = 0;
  pthread_t t;
  pthread_create(&t, NULL, cancel_soon, SM_UNCONST(&cancel));
  io.timeout_s = 0;
  io.cancel = &cancel;
  assert_int_equal(sm_engine_exec_start(e, "abc", &io, &err), SM_ECANCELLED);
  pthread_join(t, NULL);

  /* The head never comes: the request timeout applies. */
  sm_engine_free(e);
  e = client(M_NORMAL, 0, 1000);
  assert_int_equal(sm_engine_negotiate(e, &err), 0);
  srv.m = M_SILENT;
  io.cancel = NULL;
  assert_int_equal(sm_engine_exec_start(e, "abc", &io, &err), SM_ETIMEOUT);
  assert_non_null(strstr(err.message, "did not answer in time"));
  sm_engine_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version_prefix_keepalive),
      cmocka_unit_test(test_negotiation_failures),
      cmocka_unit_test(test_bad_answers),
      cmocka_unit_test(test_exec_echo),
      cmocka_unit_test(test_exec_flood),
      cmocka_unit_test(test_exec_errors),
      cmocka_unit_test(test_exec_timeout_cancel),
  };
  return cmocka_run_group_tests(tests, server_start, server_stop);
}
