/* Small I/O pieces of sandman-egress (proxy_io.h). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "egress_proxy/proxy_io.h"

#define PUMP_BUF 16384

double eg_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double eg_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

void eg_nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int eg_send_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int eg_wait_fd(int fd, short events, int ms) {
  struct pollfd p = {fd, events, 0};
  for (;;) {
    int r = poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

void eg_pump(int a, int b, int idle_s, long long a_budget, long long *a_to_b, long long *b_to_a) {
  char *buf = malloc(PUMP_BUF);
  if (buf == NULL) return;
  int a_open = a_budget != 0, b_open = 1; /* a plain request already sent whole: nothing more goes up */
  while (b_open || (a_open && a_budget != 0)) {
    /* A side that is done is left out (-1): its hang-up must not wake us. */
    struct pollfd p[2] = {{a_open ? a : -1, POLLIN, 0}, {b_open ? b : -1, POLLIN, 0}};
    int r = poll(p, 2, idle_s * 1000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break; /* idle */
    if (a_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      size_t want = PUMP_BUF;
      if (a_budget >= 0 && (long long)want > a_budget) want = (size_t)a_budget;
      ssize_t n = recv(a, buf, want, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        a_open = 0;
        shutdown(b, SHUT_WR);
        if (a_budget < 0 && !b_open) break;
      } else {
        if (eg_send_all(b, buf, (size_t)n) != 0) break;
        *a_to_b += n;
        if (a_budget > 0) {
          a_budget -= n;
          if (a_budget == 0) a_open = 0;
        }
      }
    }
    if (b_open && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = recv(b, buf, PUMP_BUF, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        b_open = 0;
        shutdown(a, SHUT_WR);
        if (a_budget >= 0 || !a_open) break; /* plain HTTP ends with the response */
      } else {
        if (eg_send_all(a, buf, (size_t)n) != 0) break;
        *b_to_a += n;
      }
    }
  }
  free(buf);
}

int eg_int_arg(const char *s, int min, int max, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max) return -1;
  *out = (int)v;
  return 0;
}
