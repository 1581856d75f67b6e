/* The egress programs themselves (src/egress_proxy/) on this host: the
 * proxy (`sandman-egress serve`) on a unix socket and a relay
 * (`sandman-egress relay`) on a loopback port with a policy file that lists
 * the loopback address of a local upstream; a plain request relayed, a
 * CONNECT tunnelled, a name and an address the policy does not list
 * refused, a malformed head refused, a relay with no policy refused, each
 * decision one JSON line on the proxy's stdout. In the sanitizer tree it is
 * the sanitized build of the programs that runs. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/files.h"
#include "support/xalloc.h"

#ifndef SANDMAN_EGRESS_PATH
#error "SANDMAN_EGRESS_PATH must name the built sandman-egress"
#endif

#define WAIT_MS 30000

typedef struct fixture {
  char dir[4096]; /* the proxy's socket and the policy file */
  char sock[4200], policy[4200];
  pid_t proxy, relay;
  int out_fd;    /* the proxy's stdout: its log lines */
  int relay_out; /* the relay's stdout: its ready line */
  char log[65536];
  size_t log_len;
  int port;  /* the relay's */
  int up_fd; /* the upstream's listening socket */
  int up_port;
  pthread_t up_thread;
} fixture;

/* A free loopback port (bound and let go: the proxy binds it next). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0)
    return -1;
  close(fd);
  return ntohs(a.sin_port);
}

/* The upstream: each connection gets "hello" after its request head. */
static void *upstream(void *p) {
  fixture *f = p;
  for (;;) {
    int fd = accept(f->up_fd, NULL, NULL);
    if (fd < 0) return NULL;
    char buf[4096];
    size_t n = 0;
    while (n < sizeof buf - 1) {
      ssize_t r = recv(fd, buf + n, sizeof buf - 1 - n, 0);
      if (r <= 0) break;
      n += (size_t)r;
      buf[n] = '\0';
      if (strstr(buf, "\r\n\r\n")) break;
    }
    static const char reply[] =
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    if (send(fd, reply, sizeof reply - 1, MSG_NOSIGNAL) < 0) perror("upstream");
    close(fd);
  }
}

/* Reads fd (a program's stdout) into buf until it holds text (bounded). */
static int read_until(int fd, char *buf, size_t cap, size_t *len, const char *text) {
  for (int waited = 0; !strstr(buf, text) && waited < WAIT_MS; waited += 50) {
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, 50) > 0) {
      ssize_t r = read(fd, buf + *len, cap - 1 - *len);
      if (r <= 0) break;
      *len += (size_t)r;
      buf[*len] = '\0';
    }
  }
  return strstr(buf, text) != NULL;
}

static int log_has(fixture *f, const char *text) {
  return read_until(f->out_fd, f->log, sizeof f->log, &f->log_len, text);
}

/* Runs the program with args, its stdout to *out; its pid, or -1. */
static pid_t run(char *const args[], int *out) {
  int p[2];
  if (pipe(p) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    execv(SANDMAN_EGRESS_PATH, args);
    _exit(127);
  }
  close(p[1]);
  *out = p[0];
  return pid;
}

static int start_proxy(fixture *f) {
  char a0[] = "sandman-egress", serve[] = "serve", o_sock[] = "--socket",
       o_head[] = "--head-timeout", five[] = "5";
  char *args[] = {a0, serve, o_sock, f->sock, o_head, five, NULL};
  f->proxy = run(args, &f->out_fd);
  return f->proxy > 0 && log_has(f, "proxy.ready") ? 0 : -1;
}

/* The relay on a free port: a few tries, someone may take the port meanwhile. */
static int start_relay(fixture *f) {
  for (int i = 0; i < 5; i++) {
    char port[16], seen[4096] = "", a0[] = "sandman-egress", relay[] = "relay",
                   o_sock[] = "--socket", o_pol[] = "--policy", o_port[] = "--port";
    size_t len = 0;
    f->port = free_port();
    snprintf(port, sizeof port, "%d", f->port);
    char *args[] = {a0, relay, o_sock, f->sock, o_pol, f->policy, o_port, port, NULL};
    f->relay = run(args, &f->relay_out);
    if (f->relay > 0 && read_until(f->relay_out, seen, sizeof seen, &len, "relay.ready")) return 0;
    if (f->relay > 0) {
      kill(f->relay, SIGKILL);
      waitpid(f->relay, NULL, 0);
    }
    close(f->relay_out);
  }
  return -1;
}

static int setup(void **state) {
  fixture *f = xcalloc(1, sizeof *f);
  if (f == NULL || tf_temp_dir(f->dir, sizeof f->dir, "sandman-test-proxy") != 0) return -1;
  snprintf(f->sock, sizeof f->sock, "%s/proxy.sock", f->dir);
  snprintf(f->policy, sizeof f->policy, "%s/policy", f->dir);
  f->up_fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (bind(f->up_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(f->up_fd, 16) != 0 ||
      getsockname(f->up_fd, (struct sockaddr *)&a, &len) != 0)
    return -1;
  f->up_port = ntohs(a.sin_port);
  pthread_create(&f->up_thread, NULL, upstream, f);
  char policy[1024];
  snprintf(policy, sizeof policy,
           "sandman-egress-policy 2\nsandbox sandman-unit-proxy\nagent coder\nproject demo\n"
           "run r1\nworker -\nlevel defaults\nallow 127.0.0.1:%d\nallow allowed.test\nend\n",
           f->up_port);
  if (tf_write_str(f->policy, policy) != 0 || start_proxy(f) != 0 || start_relay(f) != 0) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  pid_t pids[] = {f->relay, f->proxy};
  for (size_t i = 0; i < 2; i++) {
    kill(pids[i], SIGTERM);
    waitpid(pids[i], NULL, 0);
  }
  shutdown(f->up_fd, SHUT_RDWR);
  close(f->up_fd);
  pthread_join(f->up_thread, NULL);
  close(f->out_fd);
  close(f->relay_out);
  tf_rm_rf(f->dir);
  free(f);
  return 0;
}

/* Sends text through the proxy and reads its answer until it closes. */
static void exchange(fixture *f, const char *text, char *out, size_t cap) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)f->port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_true(send(fd, text, strlen(text), MSG_NOSIGNAL) == (ssize_t)strlen(text));
  size_t n = 0;
  for (;;) {
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, WAIT_MS) <= 0 || n + 1 >= cap) break;
    ssize_t r = recv(fd, out + n, cap - 1 - n, 0);
    if (r <= 0) break;
    n += (size_t)r;
    /* A tunnel stays open: once the upstream's answer is through, done. */
    out[n] = '\0';
    if (strstr(out, "Connection established") && strstr(out, "hello")) break;
  }
  out[n] = '\0';
  close(fd);
}

static void relayed(void **state) {
  fixture *f = *state;
  char req[512], out[8192];
  snprintf(req, sizeof req, "GET http://127.0.0.1:%d/x HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
           f->up_port, f->up_port);
  exchange(f, req, out, sizeof out);
  assert_non_null(strstr(out, "200 OK"));
  assert_non_null(strstr(out, "hello"));
  assert_true(log_has(f, "\"event\":\"egress.allowed\""));
  assert_true(log_has(f, "\"sandbox\":\"sandman-unit-proxy\""));
  snprintf(req, sizeof req,
           "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\nGET / HTTP/1.1\r\n\r\n",
           f->up_port, f->up_port);
  exchange(f, req, out, sizeof out);
  assert_non_null(strstr(out, "200 Connection established"));
  assert_non_null(strstr(out, "hello"));
}

static void refused(void **state) {
  fixture *f = *state;
  char out[8192];
  exchange(f, "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n", out, sizeof out);
  assert_non_null(strstr(out, "403 Forbidden"));
  assert_true(log_has(f, "\"dst_host\":\"denied.test\""));
  exchange(f, "this is not HTTP\r\n\r\n", out, sizeof out);
  assert_non_null(strstr(out, "400 Bad Request"));
  /* An address the policy does not list, by name or literal. */
  exchange(f, "CONNECT 127.0.0.2:22 HTTP/1.1\r\nHost: 127.0.0.2:22\r\n\r\n", out, sizeof out);
  assert_non_null(strstr(out, "403 Forbidden"));
  /* No policy in the relay: nothing at all. The proxy refuses before it
   * reads the request, so the relay may close on unread bytes and the 403
   * be lost to a reset: its decision is read from its log. */
  assert_int_equal(unlink(f->policy), 0);
  exchange(f, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", out, sizeof out);
  assert_null(strstr(out, "200"));
  assert_true(log_has(f, "\"reason\":\"the sandbox's egress policy"));
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(relayed),
      T(refused),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
