/* The peer of a route connection and its ancestors (see route_peer.h). */
#include "agent/route_peer.h"

#include "agent/frame.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

_Static_assert(ROUTE_PEER_BLOCK_MAX == SM_FRAME_ROUTE_PEER_MAX, "peer block caps differ");

int agent_route_peer_parse_stat(const char *line, size_t len, long *ppid,
                                unsigned long long *start) {
  const char *close = NULL;
  for (size_t i = 0; i < len; i++)
    if (line[i] == ')') close = line + i;
  if (close == NULL) return -1;
  const char *p = close + 1, *end = line + len;
  /* After ") ": state, ppid, then 17 more fields; starttime is the 20th. */
  long parent = -1;
  unsigned long long st = 0;
  int field = 0, have = 0;
  while (p < end && field < 20) {
    while (p < end && *p == ' ') p++;
    if (p >= end) break;
    const char *tok = p;
    while (p < end && *p != ' ' && *p != '\n') p++;
    size_t n = (size_t)(p - tok);
    if (field == 1 || field == 19) {
      unsigned long long v = 0;
      if (n == 0 || n > 20) return -1;
      for (size_t i = 0; i < n; i++) {
        if (tok[i] < '0' || tok[i] > '9') return -1;
        v = v * 10 + (unsigned)(tok[i] - '0');
      }
      if (field == 1) {
        if (v > 0x7fffffff) return -1;
        parent = (long)v;
      } else {
        st = v;
        have = 1;
      }
    }
    field++;
    if (p < end && *p == '\n') break;
  }
  if (parent < 0 || !have) return -1;
  *ppid = parent;
  *start = st;
  return 0;
}

static int read_stat(const char *proc, long pid, long *ppid, unsigned long long *start) {
  char path[128], line[1024];
  snprintf(path, sizeof path, "%s/%ld/stat", proc, pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  ssize_t n;
  while ((n = read(fd, line, sizeof line)) < 0 && errno == EINTR) {
  }
  close(fd);
  if (n <= 0) return -1;
  return agent_route_peer_parse_stat(line, (size_t)n, ppid, start);
}

void agent_route_peer_walk(const char *proc, long pid, unsigned long long not_after,
                           route_peer *out) {
  unsigned long long younger = not_after ? not_after : ~0ULL;
  out->n = 0;
  while (pid > 1 && out->n < ROUTE_PEER_CHAIN_MAX) {
    long ppid = 0;
    unsigned long long st = 0;
    if (read_stat(proc, pid, &ppid, &st) != 0) break; /* gone */
    /* A parent is never younger than its child: one that is holds a pid
     * its true parent left (or the peer's pid was used again). */
    if (st > younger) break;
    out->pid[out->n] = (uint32_t)pid;
    out->start[out->n] = st;
    out->n++;
    younger = st;
    pid = ppid;
  }
}

unsigned long long agent_route_peer_now_ticks(void) {
  struct timespec ts;
  long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) != 0) return 0;
  /* One tick ahead: a start time is rounded, never a bound to trip on. */
  return (unsigned long long)ts.tv_sec * (unsigned long long)hz +
         (unsigned long long)ts.tv_nsec / (1000000000ULL / (unsigned long long)hz) + 1;
}

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

size_t agent_route_peer_encode(const route_peer *p, unsigned char *out, size_t cap) {
  if (p->n > ROUTE_PEER_CHAIN_MAX) return 0;
  size_t len = 12u + (size_t)p->n * 12u;
  if (len > cap) return 0;
  put32(out, p->uid);
  put32(out + 4, p->gid);
  put32(out + 8, p->n);
  for (uint32_t i = 0; i < p->n; i++) {
    unsigned char *e = out + 12 + (size_t)i * 12;
    put32(e, p->pid[i]);
    put32(e + 4, (uint32_t)(p->start[i] >> 32));
    put32(e + 8, (uint32_t)p->start[i]);
  }
  return len;
}

size_t agent_route_peer_decode(const unsigned char *in, size_t len, route_peer *out) {
  if (len < 12) return 0;
  uint32_t n = get32(in + 8);
  if (n > ROUTE_PEER_CHAIN_MAX || len < 12u + (size_t)n * 12u) return 0;
  out->uid = get32(in);
  out->gid = get32(in + 4);
  out->n = n;
  for (uint32_t i = 0; i < n; i++) {
    const unsigned char *e = in + 12 + (size_t)i * 12;
    out->pid[i] = get32(e);
    out->start[i] = (uint64_t)get32(e + 4) << 32 | get32(e + 8);
  }
  return 12u + (size_t)n * 12u;
}
