/* A helper call's preamble (call_preamble.h), read as the wrapper reads
 * it: libc only, like the rest of the agent. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/call_preamble.h"
#include "agent/route_peer.h"
#include "common/io.h"

/* The whole of a small file into buf (NUL-terminated): its length, or -1. */
static int read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = common_read_retry(fd, buf + n, cap - 1 - n);
    if (r < 0) {
      close(fd);
      return -1;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  return (int)n;
}

/* The oom_kill counter of the first cgroup file that can be read (v1,
 * then v2), as the wrapper takes it: "" when that file has none. */
static void oom_kills(char *out, size_t cap) {
  static const char *const files[] = {"/sys/fs/cgroup/memory/memory.oom_control",
                                      "/sys/fs/cgroup/memory.events"};
  out[0] = '\0';
  char buf[1024];
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    if (read_small(files[i], buf, sizeof buf) < 0) continue;
    for (char *line = buf; *line;) {
      if (strncmp(line, "oom_kill ", 9) == 0) {
        size_t len = strspn(line + 9, "0123456789");
        if (len > 0 && len < cap) {
          memcpy(out, line + 9, len);
          out[len] = '\0';
        }
      }
      char *nl = strchr(line, '\n');
      if (nl == NULL) break;
      line = nl + 1;
    }
    return;
  }
}

/* This process's start time (/proc/self/stat field 22), read as the
 * host-tool route reads a peer's (route_peer.c): 0, or -1. */
static int start_time(unsigned long long *out) {
  char buf[1024];
  int n = read_small("/proc/self/stat", buf, sizeof buf);
  long ppid = 0;
  return n > 0 ? agent_route_peer_parse_stat(buf, (size_t)n, &ppid, out) : -1;
}

int agent_call_preamble(const char *token, char *out, size_t cap) {
  size_t tlen = token ? strlen(token) : 0;
  if (tlen == 0 || tlen > 64 || strcspn(token, " \t\r\n") != tlen) return -1;
  unsigned long long start = 0;
  char oom[32];
  if (start_time(&start) != 0) return -1;
  oom_kills(oom, sizeof oom);
  int n = snprintf(out, cap, "sandman-call %s %ld %llu %s\n", token, (long)getpid(), start,
                   oom[0] ? oom : "-");
  return n < 0 || (size_t)n >= cap ? -1 : n;
}

int agent_call_preamble_print(const char *token) {
  char line[192];
  int n = agent_call_preamble(token, line, sizeof line);
  if (n < 0) return -1;
  return common_write_all(1, line, (size_t)n);
}
