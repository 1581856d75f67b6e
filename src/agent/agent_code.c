/* sandman-agent code start|send: see agent_code.h. libc only, like the rest of
 * the agent. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_code.h"
#include "agent/code_driver.h"
#include "common/io.h"

#define PATH_LEN 96
#define READY_FD 3
#define START_WAIT_MS 60000
#define LOG_TAIL 1500

extern char **environ;

/* The driver's folder, AGENT_CODE_ROOT/<the driver's hash, 12 digits>: a
 * driver of another sandman version (a sandbox older than this binary)
 * keeps its own folder and contexts, and never gets requests it does not
 * know. */
static char dir_path[PATH_LEN - 16], sock_path[PATH_LEN], lock_path[PATH_LEN], log_path[PATH_LEN];

/* A folder made 0700 when missing; refused unless it is a folder (not a
 * link) of ours that nobody else may enter. */
static int private_dir(const char *path) {
  if (mkdir(path, 0700) != 0 && errno != EEXIST) {
    fprintf(stderr, "sandman-code: cannot make %s: %s\n", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
      (st.st_mode & 077) != 0) {
    fprintf(stderr, "sandman-code: %s is not a private folder of this user (uid %u)\n", path,
            (unsigned)getuid());
    return -1;
  }
  return 0;
}

static int check_root(void) {
  snprintf(dir_path, sizeof dir_path, "%s/%.12s", AGENT_CODE_ROOT, agent_code_driver_sha256);
  snprintf(sock_path, sizeof sock_path, "%s/ctl.sock", dir_path);
  snprintf(lock_path, sizeof lock_path, "%s/start.lock", dir_path);
  snprintf(log_path, sizeof log_path, "%s/driver.log", dir_path);
  return private_dir(AGENT_CODE_ROOT) == 0 && private_dir(dir_path) == 0 ? 0 : -1;
}

/* A connected socket to the driver, or -1 with errno. */
static int dial(void) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/* The caller's environment less every SANDMAN_ variable (the call's marker
 * among them): what the driver and its kernels start from. */
static char **driver_env(void) {
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 1, sizeof *env);
  if (env == NULL) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "SANDMAN_", 8) != 0) env[o++] = environ[i];
  env[o] = NULL;
  return env;
}

/* The number a /proc/self/fd entry names, or -1. */
static int fd_number(const char *s) {
  long v = 0;
  if (*s == '\0') return -1;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || v > 1000000) return -1;
    v = v * 10 + (*s - '0');
  }
  return (int)v;
}

/* Closes every descriptor from `first` up (in the driver's process, before
 * its exec: nothing of the call's may reach it). */
static void close_from(int first) {
  DIR *d = opendir("/proc/self/fd");
  if (d == NULL) {
    for (int fd = first; fd < 1024; fd++) close(fd);
    return;
  }
  int dfd = dirfd(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int fd = fd_number(e->d_name);
    if (fd >= first && fd != dfd) close(fd);
  }
  closedir(d);
}

/* The driver's process, after the second fork: descriptors 0-2 to
 * /dev/null and the log, the ready pipe as READY_FD, then python3. */
static void exec_driver(int ready_w) {
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  int log = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (null < 0 || log < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0 ||
      dup2(ready_w, READY_FD) < 0)
    _exit(126);
  close_from(READY_FD + 1);
  char *src = malloc(agent_code_driver_len + 1);
  char **env = driver_env();
  if (src == NULL || env == NULL) _exit(126);
  memcpy(src, agent_code_driver, agent_code_driver_len);
  src[agent_code_driver_len] = '\0';
  char fdarg[16];
  snprintf(fdarg, sizeof fdarg, "%d", READY_FD);
  static char python[] = "python3", isolated[] = "-I", command[] = "-c";
  char *argv[] = {python, isolated, command, src, dir_path, fdarg, NULL};
  environ = env;
  execvp(python, argv);
  fprintf(stderr, "sandman-code: cannot run python3: %s: code contexts need an image with "
                  "python3 and a Jupyter kernel (e.g. sandman/general)\n", strerror(errno));
  _exit(127);
}

/* The end of the driver's log, on our stderr: why it did not start. */
static void show_log(void) {
  int fd = open(log_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  char buf[LOG_TAIL + 1];
  off_t end = lseek(fd, 0, SEEK_END);
  if (end > LOG_TAIL) lseek(fd, end - LOG_TAIL, SEEK_SET);
  else lseek(fd, 0, SEEK_SET);
  ssize_t n = common_read_retry(fd, buf, LOG_TAIL);
  close(fd);
  if (n > 0) common_write_all(2, buf, (size_t)n);
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for the driver's "ready" line on r: 0, or -1 when it ended first
 * or did not come in time. */
static int wait_ready(int r) {
  char buf[16];
  size_t have = 0;
  long long deadline = now_ms() + START_WAIT_MS;
  while (have < sizeof buf) {
    long long left = deadline - now_ms();
    if (left <= 0) return -1;
    struct pollfd pf = {.fd = r, .events = POLLIN};
    int p = poll(&pf, 1, (int)left);
    if (p < 0 && errno == EINTR) continue;
    if (p <= 0) return -1;
    ssize_t n = common_read_retry(r, buf + have, sizeof buf - have);
    if (n <= 0) break;
    have += (size_t)n;
    if (have >= 6 && memcmp(buf, "ready\n", 6) == 0) return 0;
  }
  return -1;
}

static int code_start(void) {
  if (check_root() != 0) return 3;
  /* One start at a time: a second caller finds the first one's driver. */
  int lock = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) {
    fprintf(stderr, "sandman-code: cannot lock %s: %s\n", lock_path, strerror(errno));
    return 3;
  }
  int fd = dial();
  if (fd >= 0) {
    close(fd);
    puts("running");
    return 0;
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    perror("sandman-code: pipe");
    return 3;
  }
  pid_t child = fork();
  if (child < 0) {
    perror("sandman-code: fork");
    return 3;
  }
  if (child == 0) {
    /* A session of its own, then orphaned at once: the driver is no
     * descendant of this call's processes. */
    close(p[0]);
    if (setsid() < 0) _exit(126);
    pid_t g = fork();
    if (g == 0) exec_driver(p[1]);
    _exit(g < 0 ? 126 : 0);
  }
  close(p[1]);
  int st = 0;
  while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
  }
  int ok = wait_ready(p[0]) == 0;
  close(p[0]);
  if (!ok) {
    fprintf(stderr, "sandman-code: the code driver did not start:\n");
    show_log();
    return 3;
  }
  puts("started");
  return 0;
}

/* The request on stdin, whole (one line, at most AGENT_CODE_REQUEST_MAX). */
static char *read_request(size_t *len) {
  size_t cap = 64 * 1024, n = 0;
  char *buf = malloc(cap);
  if (buf == NULL) return NULL;
  for (;;) {
    if (n == cap) {
      if (cap >= AGENT_CODE_REQUEST_MAX) break;
      cap = cap * 2 > AGENT_CODE_REQUEST_MAX ? AGENT_CODE_REQUEST_MAX : cap * 2;
      char *bigger = realloc(buf, cap);
      if (bigger == NULL) break;
      buf = bigger;
    }
    ssize_t r = common_read_retry(0, buf + n, cap - n);
    if (r < 0) break;
    if (r == 0) {
      *len = n;
      return buf;
    }
    n += (size_t)r;
  }
  free(buf);
  return NULL;
}

static int code_send(void) {
  size_t len = 0;
  char *req = read_request(&len);
  if (req == NULL || len == 0 || req[len - 1] != '\n') {
    fprintf(stderr, "sandman-code: the request must be one line of at most %u bytes\n",
            AGENT_CODE_REQUEST_MAX);
    free(req);
    return 2;
  }
  int fd = check_root() == 0 ? dial() : -1;
  if (fd < 0) {
    free(req);
    puts("{\"event\":\"fail\",\"code\":\"no_server\",\"message\":\"no code driver runs "
         "in this sandbox\"}");
    return 0;
  }
  int rc = common_write_all(fd, req, len);
  free(req);
  if (rc != 0) {
    close(fd);
    puts("{\"event\":\"fail\",\"code\":\"no_server\",\"message\":\"the code driver "
         "closed the connection\"}");
    return 0;
  }
  /* The answer as it comes; the write side stays open: the driver takes
   * our hang-up for a cancel. */
  static char buf[65536];
  for (;;) {
    ssize_t n = common_read_retry(fd, buf, sizeof buf);
    if (n <= 0) break;
    if (common_write_all(1, buf, (size_t)n) != 0) break;
  }
  close(fd);
  return 0;
}

int agent_code_main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc == 2 && strcmp(argv[1], "start") == 0) return code_start();
  if (argc == 2 && strcmp(argv[1], "send") == 0) return code_send();
  fprintf(stderr, "usage: sandman-agent code start | send\n");
  return 2;
}
