/* sandman's own helpers that the fake engine does itself instead of running
 * them (fake_engine.h). In a container, `sandman-kill` and `sandman-thaw`
 * sweep /proc for the call's processes and `sandman-agent quiet` stops
 * every process of the user (kill -1): run on the host, the sweep would
 * reach the host's processes, and kill -1 as root all of them. So the fake
 * does to the processes of the container's execs, and to nothing else,
 * what they would do in the container: kill the call's process tree, stop
 * them all, let them all go on. Their exit code is 0, as theirs is. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "support/fake_engine_internal.h"
#include "support/proc.h"

#define PIDS_MAX 256

/* The parent of pid, or 0. */
static pid_t parent_of(pid_t pid) {
  pid_t ppid = 0;
  return tp_stat(pid, NULL, &ppid) == 0 ? ppid : 0;
}

/* Is pid one of roots or below one of them? */
static int below(pid_t pid, const pid_t *roots, size_t n) {
  for (int depth = 0; pid > 1 && depth < 4096; depth++) {
    for (size_t i = 0; i < n; i++)
      if (pid == roots[i]) return 1;
    pid = parent_of(pid);
  }
  return 0;
}

/* The processes below roots (roots included) get sig. */
static void signal_below(const pid_t *roots, size_t n, int sig, pid_t except) {
  DIR *d = opendir("/proc");
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL) {
    char *end = NULL;
    long pid = strtol(de->d_name, &end, 10);
    if (end == de->d_name || *end != '\0' || pid <= 1 || pid == except) continue;
    if (below((pid_t)pid, roots, n)) kill((pid_t)pid, sig);
  }
  if (d) closedir(d);
}

/* The running execs' processes of container cid (fe->mu held). */
static size_t exec_roots(fake_engine *fe, const char *cid, pid_t *out) {
  size_t n = 0;
  for (fe_exec *x = fe->execs; x && n < PIDS_MAX; x = x->next)
    if (x->pid > 0 && strcmp(x->container, cid) == 0) out[n++] = x->pid;
  return n;
}

/* Does process pid carry the call's marker SANDMAN_CALL=token? */
static int has_marker(long pid, const char *token) {
  char path[64], want[160], buf[65536];
  snprintf(path, sizeof path, "/proc/%ld/environ", pid);
  int n = snprintf(want, sizeof want, "SANDMAN_CALL=%s", token);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  size_t len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  for (size_t i = 0; i + (size_t)n < len + 1; i += strlen(buf + i) + 1)
    if (strncmp(buf + i, want, (size_t)n) == 0 && buf[i + (size_t)n] == '\0') return 1;
  return 0;
}

/* The call's pid, when the preamble never gave it: a process of the
 * container's that carries its marker. */
static long find_call(const pid_t *roots, size_t n, const char *token) {
  DIR *d = opendir("/proc");
  struct dirent *de;
  long found = 0;
  while (d && !found && (de = readdir(d)) != NULL) {
    char *end = NULL;
    long pid = strtol(de->d_name, &end, 10);
    if (end == de->d_name || *end != '\0' || pid <= 1) continue;
    if (below((pid_t)pid, roots, n) && has_marker(pid, token)) found = pid;
  }
  if (d) closedir(d);
  return found;
}

/* The call's processes: the tree of its pid, when that is the container's. */
static void kill_call(const pid_t *roots, size_t n, const char *token, const char *pid_text) {
  long pid = pid_text && *pid_text ? strtol(pid_text, NULL, 10) : 0;
  if (pid == 0 && token && *token) pid = find_call(roots, n, token);
  if (pid <= 1 || !below((pid_t)pid, roots, n)) return;
  pid_t call = (pid_t)pid;
  kill(-call, SIGKILL);
  signal_below(&call, 1, SIGKILL, 0);
}

static const char *arg(json_object *cmd, size_t i) {
  return i < fe_len(cmd) ? json_object_get_string(json_object_array_get_idx(cmd, i)) : NULL;
}

int fe_helper_emulate(fake_engine *fe, const char *cid, json_object *cmd) {
  const char *name = arg(cmd, 3), *first = arg(cmd, 0), *mode = arg(cmd, 1);
  int helper_script = first && strcmp(first, "/bin/sh") == 0 && name &&
                      (strcmp(name, "sandman-kill") == 0 || strcmp(name, "sandman-thaw") == 0);
  int quiet = first && strncmp(first, "/.sandman/agent-", 16) == 0 && mode &&
              strcmp(mode, "quiet") == 0 && fe_len(cmd) == 2;
  if (!helper_script && !quiet) return 0;
  pthread_mutex_lock(&fe->mu);
  pid_t roots[PIDS_MAX];
  size_t n = exec_roots(fe, cid, roots);
  if (helper_script) kill_call(roots, n, arg(cmd, 4), arg(cmd, 5));
  if (quiet) signal_below(roots, n, SIGSTOP, 0);
  if (helper_script && strcmp(name, "sandman-thaw") == 0) signal_below(roots, n, SIGCONT, 0);
  pthread_mutex_unlock(&fe->mu);
  return 1;
}
