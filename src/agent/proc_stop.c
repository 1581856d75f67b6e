/* See proc_stop.h. Plain libc: the static agent. What /proc says of a
 * process is read as it is; a process that ends meanwhile is simply gone
 * from the next look. */
#include "agent/proc_stop.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/tar_out.h"

#define STOP_WAIT_MS 2000
#define STOP_POLL_MS 2
#define PIDS_MAX 65536

/* The state letter of /proc/<pid>[/task/<tid>]/stat (after the last ')':
 * a command name may hold one); 0 when gone. */
static char proc_stop_state(const char *stat_path) {
  char buf[512];
  int fd = open(stat_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' ? p[2] : 0;
}

static int proc_stop_is_still(char st) {
  return st == 'T' || st == 't' || st == 'Z' || st == 'X' || st == 'x' || st == 0;
}

/* Every thread of pid stopped (or gone)? */
static int proc_stop_all_threads(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (d == NULL) return 1;
  int still = 1;
  struct dirent *de;
  while (still && (de = readdir(d)) != NULL) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
    char stat[128];
    snprintf(stat, sizeof stat, "/proc/%d/task/%.16s/stat", (int)pid, de->d_name);
    still = proc_stop_is_still(proc_stop_state(stat));
  }
  closedir(d);
  return still;
}

/* The real and saved uids of pid (the ones kill(2) compares); -1 when gone. */
static int proc_stop_uids(pid_t pid, long *real, long *saved) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char *u = strstr(buf, "\nUid:");
  long eff = 0;
  if (u == NULL || sscanf(u + 5, "%ld %ld %ld", real, &eff, saved) != 3) return -1;
  return 0;
}

static int proc_stop_listed(const agent_proc_stop *s, pid_t pid) {
  for (size_t i = 0; i < s->n; i++)
    if (s->pids[i] == pid) return 1;
  return 0;
}

static int proc_stop_add(agent_proc_stop *s, pid_t pid) {
  if (proc_stop_listed(s, pid)) return 0;
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    if (cap > PIDS_MAX) return -1;
    pid_t *p = realloc(s->pids, cap * sizeof *p);
    if (p == NULL) return -1;
    s->pids = p;
    s->cap = cap;
  }
  s->pids[s->n++] = pid;
  return 0;
}

/* One look at every process: 1 when all the ones that matter are still,
 * 0 when some are not yet (they are sent SIGSTOP again), -1 when one can
 * never be (*why says which). stopped_before: those already stopped at
 * the first look, which stay stopped after. */
static int proc_stop_look(agent_proc_stop *s, agent_proc_stop *stopped_before, int first,
                          char *why, size_t why_len) {
  DIR *d = opendir("/proc");
  if (d == NULL) return snprintf(why, why_len, "/proc cannot be read"), -1;
  long me = (long)getuid();
  pid_t self = getpid();
  int all = 1;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char *end = NULL;
    long v = strtol(de->d_name, &end, 10);
    if (v <= 1 || *end != '\0' || (pid_t)v == self) continue;
    pid_t pid = (pid_t)v;
    long real = 0, saved = 0;
    if (proc_stop_uids(pid, &real, &saved) != 0) continue; /* gone */
    char stat[64];
    snprintf(stat, sizeof stat, "/proc/%d/stat", (int)pid);
    char st = proc_stop_state(stat);
    if (real != me && saved != me) {
      if (real == 0 && me != 0) continue; /* the engine's or sandman's own */
      if (proc_stop_is_still(st)) continue;
      snprintf(why, why_len, "process %d of user %ld runs and cannot be stopped", (int)pid, real);
      closedir(d);
      return -1;
    }
    if (first && (st == 'T' || st == 't')) {
      if (proc_stop_add(stopped_before, pid) != 0) goto too_many;
      continue;
    }
    if (proc_stop_listed(stopped_before, pid)) continue;
    if (proc_stop_add(s, pid) != 0) goto too_many;
    if (!proc_stop_all_threads(pid)) {
      all = 0;
      kill(pid, SIGSTOP);
    }
  }
  closedir(d);
  return all;
too_many:
  closedir(d);
  snprintf(why, why_len, "too many processes");
  return -1;
}

int agent_proc_stop_all(agent_proc_stop *s) {
  agent_proc_stop before = {0};
  char why[160] = "";
  s->n = 0;
  int r = proc_stop_look(s, &before, 1, why, sizeof why);
  if (r >= 0) {
    kill(-1, SIGSTOP); /* every process this one may signal, but itself and init */
    struct timespec nap = {0, STOP_POLL_MS * 1000000L};
    for (int waited = 0; (r = proc_stop_look(s, &before, 0, why, sizeof why)) == 0; waited += STOP_POLL_MS) {
      if (waited >= STOP_WAIT_MS) {
        snprintf(why, sizeof why, "a process did not stop within %d ms", STOP_WAIT_MS);
        r = -1;
        break;
      }
      nanosleep(&nap, NULL);
    }
  }
  free(before.pids);
  if (r == 1) return 0;
  agent_proc_continue_all(s);
  fprintf(stderr, "tar: the sandbox's processes cannot all be stopped: %s\n", why);
  return AGENT_TAR_CANNOT;
}

void agent_proc_continue_all(agent_proc_stop *s) {
  for (size_t i = 0; i < s->n; i++) kill(s->pids[i], SIGCONT);
  free(s->pids);
  s->pids = NULL;
  s->n = s->cap = 0;
}
