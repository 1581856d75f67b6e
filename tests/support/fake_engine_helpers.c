/* sandman's own helpers that the fake engine does itself instead of running
 * them (fake_engine.h), and the commands it never runs. In a container,
 * `sandman-kill` sweeps /proc for the call's processes and `sandman-watch`
 * (a leased call's watcher) ends with `kill -KILL -1`: run on the host, the
 * sweep would reach the host's processes, and kill -1 as root all of them.
 * So the fake does to the container, and to nothing else, what they would
 * do in it: kill the call's process tree; stop the container when the
 * watcher's stdin ends. And it refuses to run any other command that
 * signals every process (kill -1, kill 1, killall, pkill). */
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
  const char *name = arg(cmd, 3), *first = arg(cmd, 0);
  int sh = first && strcmp(first, "/bin/sh") == 0 && name;
  if (sh && strcmp(name, "sandman-watch") == 0) return FE_HELPER_WATCH;
  if (!sh || strcmp(name, "sandman-kill") != 0) return FE_HELPER_NONE;
  pthread_mutex_lock(&fe->mu);
  pid_t roots[PIDS_MAX];
  size_t n = exec_roots(fe, cid, roots);
  kill_call(roots, n, arg(cmd, 4), arg(cmd, 5));
  pthread_mutex_unlock(&fe->mu);
  return FE_HELPER_DONE;
}

/* Does text run kill (or killall, pkill) on every process: a target of -1
 * or 1 among the words after "kill" up to the end of that command? */
static int kills_all(const char *text) {
  if (strstr(text, "killall") || strstr(text, "pkill")) return 1;
  for (const char *k = strstr(text, "kill"); k; k = strstr(k + 4, "kill")) {
    if (k > text && !strchr(" \t\n;|&(", k[-1])) continue;
    const char *p = k + 4;
    while (*p && !strchr(";|&\n", *p)) {
      while (*p == ' ' || *p == '\t') p++;
      size_t len = strcspn(p, " \t;|&\n");
      if ((len == 2 && strncmp(p, "-1", 2) == 0) || (len == 1 && *p == '1')) return 1;
      p += len;
    }
  }
  return 0;
}

const char *fe_refused(json_object *cmd) {
  for (size_t i = 0; i < fe_len(cmd); i++) {
    const char *a = arg(cmd, i);
    if (a && kills_all(a)) return a;
  }
  return NULL;
}
