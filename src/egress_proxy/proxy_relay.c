/* sandman-egress relay: the one way out of an allowlist sandbox.
 *
 * The sandbox has no network of its own (network mode none: loopback only).
 * This relay runs in a container of its own that shares the sandbox's
 * network namespace and nothing else (not its processes, files or user),
 * listens on the sandbox's loopback (127.0.0.1:3128, what HTTP_PROXY names)
 * and carries each connection to the instance's proxy over a unix socket
 * in a volume that no sandbox mounts. Before any byte of the sandbox's, it
 * sends the sandbox's policy, read from its own file, which only sandman
 * writes (over the Engine API): the proxy judges the connection by it.
 * The relay parses nothing the sandbox sends; it passes bytes both ways.
 *
 * Static, libc only, the same binary and image as the proxy. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "egress/egress_policy.h"
#include "egress_proxy/proxy_io.h"

#define POLICY_RETRIES 50 /* a policy file being rewritten: up to ~1 s */

typedef struct relay_conf {
  const char *socket_path, *policy_path;
  int port, max_conns, idle_s;
} relay_conf;

static relay_conf R = {NULL, NULL, 3128, 64, 300};
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int active;

static void answer(int fd, int status, const char *text, const char *reason) {
  char msg[512];
  int bl = (int)strlen(reason) + (int)sizeof "sandman egress: \n" - 1;
  int n = snprintf(msg, sizeof msg,
                   "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                   "Connection: close\r\n\r\nsandman egress: %s\n",
                   status, text, bl, reason);
  if (n > 0 && (size_t)n < sizeof msg) eg_send_all(fd, msg, (size_t)n);
}

static int complete(const char *t, size_t n) {
  return (n == 4 && memcmp(t, "end\n", 4) == 0) || (n > 4 && memcmp(t + n - 5, "\nend\n", 5) == 0);
}

/* The sandbox's policy as sandman last wrote it, read again while it is
 * being rewritten (no "end" line yet). Whatever it holds goes to the proxy,
 * which refuses what does not parse. Returns its length. */
static size_t read_policy(char *text, size_t cap) {
  size_t n = 0;
  for (int attempt = 0;; attempt++) {
    n = 0;
    int fd = open(R.policy_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      for (;;) {
        ssize_t r = read(fd, text + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
        if (n == cap) break;
      }
      close(fd);
    }
    if (complete(text, n) || attempt >= POLICY_RETRIES) return n;
    eg_nap_ms(20);
  }
}

static int connect_proxy(void) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t pl = strlen(R.socket_path);
  if (pl >= sizeof a.sun_path) return -1;
  memcpy(a.sun_path, R.socket_path, pl);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void carry(int cfd) {
  enum { CAP = EG_POLICY_MAX_BYTES + 1 };
  char *policy = malloc(CAP);
  if (policy == NULL) {
    answer(cfd, 503, "Service Unavailable", "the relay is out of memory");
    return;
  }
  size_t n = read_policy(policy, CAP);
  int ufd = connect_proxy();
  if (ufd < 0) {
    answer(cfd, 502, "Bad Gateway", "the egress proxy is not running");
    free(policy);
    return;
  }
  char pre[EG_PREAMBLE_MAX];
  int pn = snprintf(pre, sizeof pre, EG_RELAY_MAGIC "%zu\n", n);
  if (eg_send_all(ufd, pre, (size_t)pn) == 0 && eg_send_all(ufd, policy, n) == 0) {
    long long up = 0, down = 0;
    eg_pump(cfd, ufd, R.idle_s, -1, &up, &down);
  }
  close(ufd);
  free(policy);
}

static void *conn_thread(void *arg) {
  int cfd = (int)(intptr_t)arg;
  carry(cfd);
  close(cfd);
  pthread_mutex_lock(&mu);
  active--;
  pthread_mutex_unlock(&mu);
  return NULL;
}

/* 127.0.0.1 only: the sandbox's own loopback, in the namespace it shares. */
static int listen_on(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  if (fd < 0) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

static int parse_args(int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = v == NULL;
    if (!bad && !strcmp(a, "--socket")) R.socket_path = v;
    else if (!bad && !strcmp(a, "--policy")) R.policy_path = v;
    else if (!bad && !strcmp(a, "--port")) bad = eg_int_arg(v, 1, 65535, &R.port);
    else if (!bad && !strcmp(a, "--max-connections")) bad = eg_int_arg(v, 1, 100000, &R.max_conns);
    else if (!bad && !strcmp(a, "--idle-timeout")) bad = eg_int_arg(v, 1, 86400, &R.idle_s);
    else bad = 1;
    if (bad) return -1;
    i++;
  }
  return R.socket_path && R.policy_path ? 0 : -1;
}

int eg_relay_main(int argc, char **argv) {
  if (parse_args(argc, argv) != 0) {
    fprintf(stderr, "usage: sandman-egress relay --socket PATH --policy FILE [--port N] [--max-connections N]\n"
                    "                            [--idle-timeout S]\n");
    return 2;
  }
  int lfd = listen_on(R.port);
  if (lfd < 0) {
    fprintf(stderr, "sandman-egress relay: cannot listen on 127.0.0.1:%d: %s\n", R.port, strerror(errno));
    return 1;
  }
  char ready[160];
  int rn = snprintf(ready, sizeof ready, "{\"event\":\"relay.ready\",\"time\":%.3f,\"port\":%d}\n", eg_now_s(),
                    R.port);
  if (write(STDOUT_FILENO, ready, (size_t)rn) < 0) return 1;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS) {
        eg_nap_ms(50);
        continue;
      }
      fprintf(stderr, "sandman-egress relay: accept: %s\n", strerror(errno));
      return 1;
    }
    pthread_mutex_lock(&mu);
    int over = active >= R.max_conns;
    if (!over) active++;
    pthread_mutex_unlock(&mu);
    pthread_t t;
    if (!over && pthread_create(&t, &attr, conn_thread, (void *)(intptr_t)fd) == 0) continue;
    if (!over) {
      pthread_mutex_lock(&mu);
      active--;
      pthread_mutex_unlock(&mu);
    }
    answer(fd, 503, "Service Unavailable", "too many connections at once from this sandbox");
    close(fd);
  }
}
