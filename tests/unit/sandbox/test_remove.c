/* Removing a sandbox, against a recording engine on a unix socket: the
 * container, its volume, and its egress relay (network allowlist) looked
 * for only when the sandbox may have one. A per_tool call's removal at its
 * end knows from the call's settings: no relay lookup for network none
 * (the engine's 404 for "<name>-egress" on every call before), the relay
 * removed with it for allowlist. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include "sandbox/acquire.h"
#include "sandbox/context.h"
#include "sandbox/lifecycle.h"

#define MAX_SEEN 32

/* ---- a recording engine: every request line, a canned answer each ---- */
typedef struct recorder {
  int lfd;
  char dir[64];
  char sock[128];
  pthread_t thread;
  int conn;         /* the connection being served, -1 none */
  int relay_exists; /* GET /containers/<name>-egress/json answers a relay */
  pthread_mutex_t mu;
  char seen[MAX_SEEN][256];
  int n_seen;
} recorder;

static recorder rec;

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

static void answer_for(const char *method, const char *path, int *status, const char **body) {
  *status = 204;
  *body = "";
  if (strstr(path, "/_ping")) {
    *status = 200;
    *body = "OK";
  } else if (strcmp(method, "GET") == 0 && strstr(path, "-egress/json")) {
    *status = rec.relay_exists ? 200 : 404;
    *body = rec.relay_exists
                ? "{\"Id\":\"relay0123\",\"Config\":{\"Labels\":{\"io.sandman.egress\":\"relay\"}}}"
                : "{\"message\":\"No such container\"}";
  }
}

/* Serves one connection: requests one after another (keep-alive). */
static void serve(int fd) {
  char buf[16384];
  size_t have = 0;
  buf[0] = '\0';
  for (;;) {
    char *end = NULL;
    while ((end = strstr(buf, "\r\n\r\n")) == NULL) {
      if (have + 1 >= sizeof buf) return;
      ssize_t r = recv(fd, buf + have, sizeof buf - 1 - have, 0);
      if (r <= 0) return;
      have += (size_t)r;
      buf[have] = '\0';
    }
    size_t head = (size_t)(end - buf) + 4;
    size_t clen = 0;
    const char *cl = strcasestr(buf, "Content-Length:");
    if (cl && cl < end) clen = (size_t)strtoul(cl + 15, NULL, 10);
    while (have < head + clen && have + 1 < sizeof buf) {
      ssize_t r = recv(fd, buf + have, sizeof buf - 1 - have, 0);
      if (r <= 0) return;
      have += (size_t)r;
      buf[have] = '\0';
    }
    char method[16] = "", path[200] = "";
    sscanf(buf, "%15s %199s", method, path);
    int status = 0;
    const char *body = NULL;
    answer_for(method, path, &status, &body);
    if (strstr(path, "/_ping") == NULL) {
      pthread_mutex_lock(&rec.mu);
      if (rec.n_seen < MAX_SEEN)
        snprintf(rec.seen[rec.n_seen++], sizeof rec.seen[0], "%s %s", method, path);
      pthread_mutex_unlock(&rec.mu);
    }
    char out[1024];
    int n = snprintf(out, sizeof out,
                     "HTTP/1.1 %d X\r\nApi-Version: 1.41\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     status, strlen(body), body);
    if (send_all(fd, out, (size_t)n) != 0) return;
    memmove(buf, buf + head + clen, have - head - clen);
    have -= head + clen;
    buf[have] = '\0';
  }
}

static void *accept_loop(void *arg) {
  (void)arg;
  for (;;) {
    int fd = accept(rec.lfd, NULL, NULL);
    if (fd < 0) return NULL;
    pthread_mutex_lock(&rec.mu);
    rec.conn = fd;
    pthread_mutex_unlock(&rec.mu);
    serve(fd);
    pthread_mutex_lock(&rec.mu);
    rec.conn = -1;
    pthread_mutex_unlock(&rec.mu);
    close(fd);
  }
}

static int setup(void **s) {
  (void)s;
  memset(&rec, 0, sizeof rec);
  rec.conn = -1;
  pthread_mutex_init(&rec.mu, NULL);
  snprintf(rec.dir, sizeof rec.dir, "/tmp/sm-remove-ut.XXXXXX");
  if (mkdtemp(rec.dir) == NULL) return -1;
  snprintf(rec.sock, sizeof rec.sock, "%s/engine.sock", rec.dir);
  rec.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", rec.sock);
  if (bind(rec.lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(rec.lfd, 4) != 0) return -1;
  return pthread_create(&rec.thread, NULL, accept_loop, NULL) == 0 ? 0 : -1;
}

static int teardown(void **s) {
  (void)s;
  shutdown(rec.lfd, SHUT_RDWR);
  close(rec.lfd);
  /* A failed check leaves the client's connection open: end it too. */
  pthread_mutex_lock(&rec.mu);
  if (rec.conn >= 0) shutdown(rec.conn, SHUT_RDWR);
  pthread_mutex_unlock(&rec.mu);
  pthread_join(rec.thread, NULL);
  unlink(rec.sock);
  /* The state folders sandbox_remove's bookkeeping made. */
  const char *subs[] = {"busy", "keys", "last-used", "workspaces", "state"};
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
    char d[160];
    snprintf(d, sizeof d, "%s/%s", rec.dir, subs[i]);
    rmdir(d);
  }
  rmdir(rec.dir);
  pthread_mutex_destroy(&rec.mu);
  return 0;
}

static sm_engine *engine(void) {
  char host[160];
  snprintf(host, sizeof host, "unix://%s", rec.sock);
  sm_engine_options o = SM_ENGINE_OPTIONS_INIT;
  o.host = host;
  o.tls_verify = 0;
  o.request_timeout_ms = 5000;
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_engine_new(&e, &o, &err), 0);
  return e;
}

/* The requests seen, "METHOD path" joined by '\n' (query strings cut). */
static void seen(char *out, size_t len) {
  size_t k = 0;
  out[0] = '\0';
  pthread_mutex_lock(&rec.mu);
  for (int i = 0; i < rec.n_seen && k < len; i++) {
    char line[256];
    snprintf(line, sizeof line, "%s", rec.seen[i]);
    char *q = strchr(line, '?');
    if (q) *q = '\0';
    /* "/v1.41/containers/x" -> "/containers/x" */
    char *v = strstr(line, "/v1.");
    if (v) {
      char *rest = strchr(v + 1, '/');
      if (rest) memmove(v, rest, strlen(rest) + 1);
    }
    k += (size_t)snprintf(out + k, len - k, "%s%s", i ? "\n" : "", line);
  }
  rec.n_seen = 0;
  pthread_mutex_unlock(&rec.mu);
}

static void test_remove_relay_flag(void **s) {
  (void)s;
  sm_engine *e = engine();
  sm_error err = SM_ERROR_INIT;
  char got[4096];
  /* Known to have no relay: nothing is asked about one. */
  assert_int_equal(sandbox_remove(e, rec.dir, "sbx", "sbx-ws", 0, &err), 0);
  seen(got, sizeof got);
  assert_string_equal(got, "DELETE /containers/sbx\nDELETE /volumes/sbx-ws");
  /* May have one: looked for (none here), then the sandbox. */
  assert_int_equal(sandbox_remove(e, rec.dir, "sbx", "sbx-ws", 1, &err), 0);
  seen(got, sizeof got);
  assert_string_equal(got, "GET /containers/sbx-egress/json\nDELETE /containers/sbx\n"
                           "DELETE /volumes/sbx-ws");
  /* Has one: it goes first. */
  rec.relay_exists = 1;
  assert_int_equal(sandbox_remove(e, rec.dir, "sbx", "sbx-ws", 1, &err), 0);
  seen(got, sizeof got);
  assert_string_equal(got, "GET /containers/sbx-egress/json\nDELETE /containers/relay0123\n"
                           "DELETE /containers/sbx\nDELETE /volumes/sbx-ws");
  sm_engine_free(e);
}

/* The end of a per_tool call (no pool: removed at once): its network
 * setting decides. */
static void test_per_tool_release(void **s) {
  (void)s;
  sm_engine *e = engine();
  sandbox_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.state_dir = rec.dir;
  rec.relay_exists = 1;
  const char *nets[] = {"none", "bridge", "allowlist"};
  const char *want[] = {
      "DELETE /containers/sandman-t-tool-1\nDELETE /volumes/sandman-t-tool-1-ws",
      "DELETE /containers/sandman-t-tool-1\nDELETE /volumes/sandman-t-tool-1-ws",
      "GET /containers/sandman-t-tool-1-egress/json\nDELETE /containers/relay0123\n"
      "DELETE /containers/sandman-t-tool-1\nDELETE /volumes/sandman-t-tool-1-ws"};
  for (int i = 0; i < 3; i++) {
    sm_run_request req;
    memset(&req, 0, sizeof req);
    snprintf(req.settings.network, sizeof req.settings.network, "%s", nets[i]);
    req.settings.mode = SM_MODE_PER_TOOL;
    sandbox_box sb;
    memset(&sb, 0, sizeof sb);
    sb.mode = SM_MODE_PER_TOOL;
    snprintf(sb.id, sizeof sb.id, "c0ffee");
    snprintf(sb.name, sizeof sb.name, "sandman-t-tool-1");
    snprintf(sb.volume, sizeof sb.volume, "sandman-t-tool-1-ws");
    sandbox_release(&ctx, e, &req, &sb);
    char got[4096];
    seen(got, sizeof got);
    assert_string_equal(got, want[i]);
  }
  sm_engine_free(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_remove_relay_flag, setup, teardown),
      cmocka_unit_test_setup_teardown(test_per_tool_release, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
