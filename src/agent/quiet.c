/* sandman-agent quiet: a call with leased credentials in a sandbox where
 * earlier calls ran must run with no other process of the sandbox's user
 * alive to read its /proc/<pid>/environ or memory or to trace it. This
 * mode stops them all (SIGSTOP cannot be caught or ignored); the host
 * resumes them after the call (kill -CONT -1).
 *
 * The host runs it with the user's uid and a group id none of the user's
 * processes has. Signalling a process needs only the uid to match, so it
 * can stop them all; tracing it, reading its memory or its /proc files
 * needs uid and gid to match (or CAP_SYS_PTRACE, which nothing in a
 * sandbox has), so none of them can take it over before it acts, however
 * fast it polls /proc. kill(-1) reaches every process we may signal (all
 * of the user's but pid 1 and ourselves) in one pass that no fork can slip
 * past; the rounds after it only confirm, thread by thread, that
 * everything of the user has stopped (a process in uninterruptible sleep
 * stops when it returns). Processes of other users (the container's own,
 * as root) are out of the user's reach and are left alone. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/quiet.h"

#define ROUNDS 2000

/* The state letter and real/saved uids of task path (/proc/P/task/T). */
static int task_info(const char *path, char *state, long *ruid, long *suid) {
  char file[128];
  snprintf(file, sizeof file, "%s/status", path);
  FILE *f = fopen(file, "r");
  if (f == NULL) return -1; /* gone meanwhile */
  char line[256];
  int have = 0;
  while (fgets(line, sizeof line, f)) {
    long e, fs;
    if (strncmp(line, "State:", 6) == 0) {
      const char *p = line + 6;
      while (*p == ' ' || *p == '\t') p++;
      *state = *p;
      have |= 1;
    } else if (sscanf(line, "Uid: %ld %ld %ld %ld", ruid, &e, suid, &fs) == 4) {
      have |= 2;
    }
  }
  fclose(f);
  return have == 3 ? 0 : -1;
}

static int numeric(const char *s) {
  if (*s == '\0') return 0;
  for (; *s; s++)
    if (!isdigit((unsigned char)*s)) return 0;
  return 1;
}

/* How many threads of our user (but ours) are not stopped yet. */
static int still_running(long uid, pid_t me) {
  DIR *proc = opendir("/proc");
  if (proc == NULL) return -1;
  int n = 0;
  struct dirent *d;
  while ((d = readdir(proc)) != NULL) {
    if (!numeric(d->d_name)) continue;
    long pid = strtol(d->d_name, NULL, 10);
    if (pid == me || pid == 1) continue;
    char dir[48];
    snprintf(dir, sizeof dir, "/proc/%ld/task", pid);
    DIR *tasks = opendir(dir);
    if (tasks == NULL) continue; /* gone meanwhile */
    struct dirent *t;
    while ((t = readdir(tasks)) != NULL) {
      if (!numeric(t->d_name)) continue;
      char path[96], state = '?';
      long ruid = -1, suid = -1;
      if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, t->d_name) >= sizeof path) continue;
      if (task_info(path, &state, &ruid, &suid) != 0) continue;
      if (ruid != uid && suid != uid) continue; /* not ours to stop (root) */
      if (strchr("TtZXx", state) == NULL) n++;
    }
    closedir(tasks);
  }
  closedir(proc);
  return n;
}

int agent_quiet(void) {
  pid_t me = getpid();
  long uid = (long)getuid();
  if (uid == 0) {
    fputs("sandman-agent quiet: the sandbox's user is root, whose processes cannot be told "
          "apart from the container's own\n",
          stderr);
    return 1;
  }
  int left = -1;
  for (int round = 0; round < ROUNDS; round++) {
    if (kill(-1, SIGSTOP) != 0 && errno != ESRCH) {
      perror("sandman-agent quiet: kill");
      return 1;
    }
    left = still_running(uid, me);
    if (left == 0) return 0;
    if (left < 0) {
      perror("sandman-agent quiet: /proc");
      return 1;
    }
    struct timespec ts = {0, 1000000L * (round < 50 ? 1 : 10)};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "sandman-agent quiet: %d thread(s) of the sandbox's user did not stop\n", left);
  return 1;
}
