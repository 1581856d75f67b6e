/* An MCP client over stdio (sandman/mcp_client.h): one server process,
 * newline-delimited JSON-RPC on its stdin and stdout, a reader thread that
 * hands each answer to the request waiting for its id.
 *
 * The server's stdin is one end of a socket pair, so that writing to a
 * server that died is an error (MSG_NOSIGNAL) rather than a SIGPIPE. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sandman/mcp_client.h>
#include <sandman/util.h>
#include <sandman/version.h>

#include "common/buf.h"
#include "common/strv.h"
#include "common/thread.h"
#include "mcp/mcp_internal.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define WAIT_SLICE_MS 50   /* how often a waiting request looks at its cancel flag */
#define STOP_GRACE_MS 2000 /* TERM to KILL */

typedef struct pending {
  long id;
  int done;
  json_object *msg; /* the answer (owned) */
  struct pending *next;
} pending;

struct sm_mcp_client {
  pthread_mutex_t life; /* start, restart, stop */
  pthread_mutex_t mu;   /* the fields below, but the options */
  pthread_mutex_t wmu;  /* one message written at a time */
  pthread_cond_t cv;
  /* options (read-only once made) */
  char *name, *cwd;
  common_strv argv, env;
  double timeout_s;
  size_t max_message;
  int stderr_fd;
  /* the running server */
  pid_t pid;
  int in_fd, out_fd;
  pthread_t reader;
  int has_reader;
  volatile int stopping;
  int dead;       /* no server to talk to (never started, exited, stopped) */
  char why[256];  /* why it is dead */
  int restarted;  /* the one restart was used */
  long next_id;
  pending *waiting;
};

int sm_mcp_client_pid(sm_mcp_client *c) {
  pthread_mutex_lock(&c->mu);
  int pid = c->dead ? 0 : (int)c->pid;
  pthread_mutex_unlock(&c->mu);
  return pid;
}

/* ---- the process ---- */

/* The value of NAME in env ("NAME=value" entries), or NULL. */
static const char *env_get(char *const *env, const char *name) {
  size_t n = strlen(name);
  for (; env && *env; env++)
    if (strncmp(*env, name, n) == 0 && (*env)[n] == '=') return *env + n + 1;
  return NULL;
}

/* argv[0] as an absolute path: as is when it has a slash, else the first
 * executable of that name in path. */
static int resolve(const char *cmd, const char *path, char *out, size_t len) {
  if (strchr(cmd, '/')) {
    if ((size_t)snprintf(out, len, "%s", cmd) >= len) return -1;
    return access(out, X_OK);
  }
  while (path && *path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    if (n > 0 && (size_t)snprintf(out, len, "%.*s/%s", (int)n, path, cmd) < len) {
      struct stat st;
      if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0) return 0;
    }
    path = end ? end + 1 : NULL;
  }
  return -1;
}

/* In the child: its own process group, the pipes as stdio, no other
 * descriptor, default signals; then exec. Reports errno on report_fd
 * (close-on-exec) when exec fails. */
static void child(sm_mcp_client *c, const char *path, int in, int out, int report_fd) {
  setpgid(0, 0);
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
  int errfd = c->stderr_fd > 2 ? c->stderr_fd : open("/dev/null", O_WRONLY);
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || errfd < 0 || dup2(errfd, 2) < 0) goto fail;
  /* Everything but stdio and the report pipe (now 3, close-on-exec) goes. */
  if (report_fd != 3 && dup3(report_fd, 3, O_CLOEXEC) < 0) goto fail;
  report_fd = 3;
  close_range(4, ~0U, 0);
  if (chdir(c->cwd ? c->cwd : "/") != 0) goto fail;
  execve(path, c->argv.v, c->env.v);
fail:;
  int e = errno;
  ssize_t w = write(report_fd, &e, sizeof e);
  (void)w;
  _exit(127);
}

static void *reader_main(void *arg);

/* Starts the process and its reader (c->life held). */
static int spawn(sm_mcp_client *c, sm_error *err) {
  char path[PATH_MAX];
  const char *search = env_get(c->env.v, "PATH");
  if (resolve(c->argv.v[0], search ? search : DEFAULT_PATH, path, sizeof path) != 0)
    return sm_error_set(err, SM_ENOTFOUND, "MCP server '%s': command '%s' not found (PATH %s)",
                        c->name, c->argv.v[0], search ? search : DEFAULT_PATH);
  int in[2] = {-1, -1}, out[2] = {-1, -1}, rep[2] = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0 || pipe2(out, O_CLOEXEC) != 0 ||
      pipe2(rep, O_CLOEXEC) != 0) {
    int e = errno;
    for (int i = 0; i < 2; i++) {
      if (in[i] >= 0) close(in[i]);
      if (out[i] >= 0) close(out[i]);
      if (rep[i] >= 0) close(rep[i]);
    }
    return sm_error_set_errno(err, SM_EIO, e, "MCP server '%s': pipes", c->name);
  }
  pid_t pid = fork();
  if (pid == 0) child(c, path, in[1], out[1], rep[1]);
  int fork_errno = errno;
  close(in[1]);
  close(out[1]);
  close(rep[1]);
  if (pid < 0) {
    close(in[0]);
    close(out[0]);
    close(rep[0]);
    return sm_error_set_errno(err, SM_EIO, fork_errno, "MCP server '%s': fork", c->name);
  }
  setpgid(pid, pid); /* as the child does: whichever runs first */
  int child_errno = 0;
  ssize_t r;
  while ((r = read(rep[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  close(rep[0]);
  if (r == (ssize_t)sizeof child_errno) {
    close(in[0]);
    close(out[0]);
    waitpid(pid, NULL, 0);
    return sm_error_set_errno(err, child_errno == ENOENT ? SM_ENOTFOUND : SM_EIO, child_errno,
                              "MCP server '%s': starting %s", c->name, path);
  }
  pthread_mutex_lock(&c->mu);
  c->pid = pid;
  c->in_fd = in[0];
  c->out_fd = out[0];
  c->dead = 0;
  c->why[0] = '\0';
  c->stopping = 0;
  pthread_mutex_unlock(&c->mu);
  if (common_thread_start(&c->reader, NULL, reader_main, c) != 0) {
    pthread_mutex_lock(&c->mu);
    c->dead = 1;
    pthread_mutex_unlock(&c->mu);
    return sm_error_set(err, SM_ENOMEM, "MCP server '%s': a reader thread", c->name);
  }
  c->has_reader = 1;
  return 0;
}

/* Ends the process group and the reader; fails what still waits
 * (c->life held). */
static void stop(sm_mcp_client *c) {
  pthread_mutex_lock(&c->mu);
  pid_t pid = c->pid;
  c->stopping = 1;
  c->dead = 1;
  if (!c->why[0]) snprintf(c->why, sizeof c->why, "it was stopped");
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  if (c->in_fd >= 0) shutdown(c->in_fd, SHUT_WR); /* end of input: a polite server exits */
  if (pid > 0) {
    int status, gone = 0;
    for (int waited = 0; waited < 200 && !gone; waited += 10) {
      gone = waitpid(pid, &status, WNOHANG) == pid;
      if (!gone) common_sleep_ms(10);
      if (!gone && waited == 100) kill(-pid, SIGTERM);
    }
    for (int waited = 0; !gone && waited < STOP_GRACE_MS; waited += 10) {
      gone = waitpid(pid, &status, WNOHANG) == pid;
      if (!gone) common_sleep_ms(10);
    }
    kill(-pid, SIGKILL); /* the group: whatever it left behind */
    if (!gone) waitpid(pid, &status, 0);
  }
  if (c->has_reader) pthread_join(c->reader, NULL);
  c->has_reader = 0;
  if (c->in_fd >= 0) close(c->in_fd);
  if (c->out_fd >= 0) close(c->out_fd);
  c->in_fd = c->out_fd = -1;
  pthread_mutex_lock(&c->mu);
  c->pid = 0;
  pthread_mutex_unlock(&c->mu);
}

/* ---- messages ---- */

/* Marks the server dead with why (c->mu held) and wakes every waiter. */
static void die_locked(sm_mcp_client *c, const char *why) {
  if (!c->dead) {
    c->dead = 1;
    snprintf(c->why, sizeof c->why, "%s", why);
  }
  pthread_cond_broadcast(&c->cv);
}

static int send_message(sm_mcp_client *c, json_object *msg) {
  size_t len = 0;
  const char *text = json_object_to_json_string_length(msg, JSON_C_TO_STRING_PLAIN, &len);
  if (text == NULL) return -1;
  int rc = 0;
  pthread_mutex_lock(&c->wmu);
  for (int part = 0; part < 2 && rc == 0; part++) {
    const char *p = part == 0 ? text : "\n";
    size_t left = part == 0 ? len : 1;
    while (left > 0) {
      ssize_t w = send(c->in_fd, p, left, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        rc = -1;
        break;
      }
      p += w;
      left -= (size_t)w;
    }
  }
  pthread_mutex_unlock(&c->wmu);
  if (rc) {
    pthread_mutex_lock(&c->mu);
    die_locked(c, "its input is closed");
    pthread_mutex_unlock(&c->mu);
  }
  return rc;
}

static json_object *new_message(const char *method, json_object *params) {
  json_object *m = json_object_new_object();
  json_object_object_add(m, "jsonrpc", json_object_new_string("2.0"));
  json_object_object_add(m, "method", json_object_new_string(method));
  if (params) json_object_object_add(m, "params", params);
  return m;
}

/* A request of the server's (sampling, roots, elicitation): we offer none. */
static void refuse_request(sm_mcp_client *c, json_object *id) {
  json_object *a = mcp_error(id, MCP_METHOD_NOT_FOUND, "sandman's MCP client offers no methods");
  send_message(c, a);
  json_object_put(a);
}

/* One message from the server. */
static void on_message(sm_mcp_client *c, json_object *msg) {
  json_object *id = NULL, *method = NULL;
  if (!json_object_is_type(msg, json_type_object)) return;
  int has_id = json_object_object_get_ex(msg, "id", &id);
  if (json_object_object_get_ex(msg, "method", &method)) {
    if (has_id) refuse_request(c, id);
    return; /* a notification (logging, progress, list changed): nothing to do */
  }
  if (!json_object_is_type(id, json_type_int)) return;
  long want = (long)json_object_get_int64(id);
  pthread_mutex_lock(&c->mu);
  for (pending *p = c->waiting; p; p = p->next)
    if (p->id == want && !p->done) {
      p->done = 1;
      p->msg = json_object_get(msg);
      pthread_cond_broadcast(&c->cv);
      break;
    }
  pthread_mutex_unlock(&c->mu);
}

/* Reads the server's stdout line by line until it ends, breaks the size
 * cap, or the client stops. */
static void *reader_main(void *arg) {
  sm_mcp_client *c = arg;
  common_buf line;
  common_buf_init(&line, c->max_message);
  char chunk[16384];
  const char *why = "it exited";
  for (;;) {
    struct pollfd pfd = {c->out_fd, POLLIN, 0};
    int pr = poll(&pfd, 1, 100);
    if (c->stopping) {
      why = "it was stopped";
      break;
    }
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) break;
    if (pr == 0) continue;
    ssize_t n = read(c->out_fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size_t start = 0, i = 0;
    int broke = 0;
    for (; i < (size_t)n; i++) {
      if (chunk[i] != '\n') continue;
      if (line.len + (i - start) > c->max_message) {
        broke = 1;
        break;
      }
      if (common_buf_append(&line, chunk + start, i - start) != 0) {
        broke = 1;
        break;
      }
      json_object *msg = NULL;
      const char *perr = NULL;
      /* A line that is not JSON (a stray log line) is skipped. */
      if (line.len > 0 && mcp_parse(line.data, line.len, c->max_message, &msg, &perr) == 0) {
        on_message(c, msg);
        json_object_put(msg);
      }
      line.len = 0;
      start = i + 1;
    }
    if (!broke && line.len + ((size_t)n - start) > c->max_message) broke = 1;
    if (!broke && common_buf_append(&line, chunk + start, (size_t)n - start) != 0) broke = 1;
    if (broke) {
      why = "it sent a message larger than the limit";
      /* Fail closed: a server that breaks the cap is ended. */
      pthread_mutex_lock(&c->mu);
      pid_t pid = c->pid;
      pthread_mutex_unlock(&c->mu);
      if (pid > 0) kill(-pid, SIGKILL);
      break;
    }
  }
  common_buf_dispose(&line);
  pthread_mutex_lock(&c->mu);
  die_locked(c, why);
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

static double deadline_after(double seconds) { return sm_monotonic_ms() + seconds * 1000.0; }

/* Sends request method (params owned) and waits for its answer's result
 * (*result, owned by the caller). */
static int request(sm_mcp_client *c, const char *method, json_object *params, double timeout_s,
                   volatile int *cancel, json_object **result, sm_error *err) {
  *result = NULL;
  pending p = {0, 0, NULL, NULL};
  pthread_mutex_lock(&c->mu);
  if (c->dead) {
    pthread_mutex_unlock(&c->mu);
    json_object_put(params);
    return sm_error_set(err, SM_EIO, "MCP server '%s' is not running: %s", c->name, c->why);
  }
  p.id = ++c->next_id;
  p.next = c->waiting;
  c->waiting = &p;
  pthread_mutex_unlock(&c->mu);

  json_object *msg = new_message(method, params);
  json_object_object_add(msg, "id", json_object_new_int64(p.id));
  int sent = send_message(c, msg);
  json_object_put(msg);

  int rc = 0;
  double deadline = deadline_after(timeout_s);
  pthread_mutex_lock(&c->mu);
  while (sent == 0 && !p.done && !c->dead) {
    if (cancel && *cancel) {
      rc = SM_ECANCELLED;
      break;
    }
    double now = sm_monotonic_ms();
    if (now >= deadline) {
      rc = SM_ETIMEOUT;
      break;
    }
    double wait = deadline - now < WAIT_SLICE_MS ? deadline - now : WAIT_SLICE_MS;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long ns = ts.tv_nsec + (long)(wait * 1e6);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
  }
  for (pending **pp = &c->waiting; *pp; pp = &(*pp)->next)
    if (*pp == &p) {
      *pp = p.next;
      break;
    }
  char why[sizeof c->why];
  snprintf(why, sizeof why, "%s", c->why);
  pthread_mutex_unlock(&c->mu);

  if (rc == SM_ECANCELLED || rc == SM_ETIMEOUT) {
    json_object *cp = json_object_new_object();
    json_object_object_add(cp, "requestId", json_object_new_int64(p.id));
    json_object_object_add(cp, "reason", json_object_new_string(rc == SM_ETIMEOUT ? "timed out" : "cancelled"));
    json_object *note = new_message("notifications/cancelled", cp);
    send_message(c, note);
    json_object_put(note);
    json_object_put(p.msg);
    if (rc == SM_ETIMEOUT)
      return sm_error_set(err, rc, "MCP server '%s' did not answer %s within %gs", c->name, method,
                          timeout_s);
    return sm_error_set(err, rc, "%s on MCP server '%s' was cancelled", method, c->name);
  }
  if (!p.done) return sm_error_set(err, SM_EIO, "MCP server '%s' ended: %s", c->name, why);
  json_object *e = NULL, *r = NULL;
  if (json_object_object_get_ex(p.msg, "error", &e)) {
    json_object *m = NULL;
    const char *text = json_object_object_get_ex(e, "message", &m) ? json_object_get_string(m) : NULL;
    rc = sm_error_set(err, SM_EPROTOCOL, "MCP server '%s' answered %s with an error: %s", c->name,
                      method, text ? text : "(no message)");
  } else if (!json_object_object_get_ex(p.msg, "result", &r) ||
             !json_object_is_type(r, json_type_object)) {
    rc = sm_error_set(err, SM_EPROTOCOL, "MCP server '%s' answered %s without a result", c->name,
                      method);
  } else {
    *result = json_object_get(r);
  }
  json_object_put(p.msg);
  return rc;
}

/* initialize + notifications/initialized (c->life held). */
static int handshake(sm_mcp_client *c, sm_error *err) {
  json_object *params = json_object_new_object();
  json_object_object_add(params, "protocolVersion", json_object_new_string(SM_MCP_PROTOCOL_LATEST));
  json_object_object_add(params, "capabilities", json_object_new_object());
  json_object *info = json_object_new_object();
  json_object_object_add(info, "name", json_object_new_string("sandman"));
  json_object_object_add(info, "version", json_object_new_string(sm_version()));
  json_object_object_add(params, "clientInfo", info);
  json_object *r = NULL, *pv = NULL;
  int rc = request(c, "initialize", params, c->timeout_s, NULL, &r, err);
  if (rc) return rc;
  if (!json_object_object_get_ex(r, "protocolVersion", &pv) ||
      !sm_mcp_protocol_supported(json_object_get_string(pv))) {
    rc = sm_error_set(err, SM_EPROTOCOL, "MCP server '%s' speaks protocol version %s, which sandman does not",
                      c->name, pv ? json_object_get_string(pv) : "(none)");
  }
  json_object_put(r);
  if (rc) return rc;
  json_object *note = new_message("notifications/initialized", NULL);
  int sent = send_message(c, note);
  json_object_put(note);
  return sent ? sm_error_set(err, SM_EIO, "MCP server '%s' ended: %s", c->name, c->why) : 0;
}

/* Starts the server (c->life held); stops it again when the handshake fails. */
static int start(sm_mcp_client *c, sm_error *err) {
  int rc = spawn(c, err);
  if (rc == 0 && (rc = handshake(c, err)) != 0) stop(c);
  return rc;
}

/* A server that died is started once more. */
static int ensure_running(sm_mcp_client *c, sm_error *err) {
  pthread_mutex_lock(&c->life);
  pthread_mutex_lock(&c->mu);
  int dead = c->dead;
  char why[sizeof c->why];
  snprintf(why, sizeof why, "%s", c->why);
  pthread_mutex_unlock(&c->mu);
  int rc = 0;
  if (dead && c->restarted) {
    rc = sm_error_set(err, SM_EIO, "MCP server '%s' ended (%s) after its restart; sandman does not start it again",
                      c->name, why);
  } else if (dead) {
    stop(c);
    c->restarted = 1;
    rc = start(c, err);
  }
  pthread_mutex_unlock(&c->life);
  return rc;
}

/* ---- the API ---- */

int sm_mcp_client_start(sm_mcp_client **out, const sm_mcp_client_options *o, sm_error *err) {
  *out = NULL;
  if (o == NULL || o->argv == NULL || o->argv[0] == NULL || o->argv[0][0] == '\0')
    return sm_error_set(err, SM_EINVAL, "an MCP server needs a command");
  sm_mcp_client *c = calloc(1, sizeof *c);
  if (c == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  pthread_mutex_init(&c->life, NULL);
  pthread_mutex_init(&c->mu, NULL);
  pthread_mutex_init(&c->wmu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->cv, &ca);
  pthread_condattr_destroy(&ca);
  c->in_fd = c->out_fd = -1;
  c->dead = 1;
  c->timeout_s = o->timeout_s > 0 ? o->timeout_s : 30;
  c->max_message = o->max_message ? o->max_message : SM_MCP_DEFAULT_MAX_MESSAGE;
  c->stderr_fd = o->stderr_fd > 2 ? o->stderr_fd : -1;
  int oom = (c->name = strdup(o->name ? o->name : o->argv[0])) == NULL ||
            (o->cwd && (c->cwd = strdup(o->cwd)) == NULL);
  for (size_t i = 0; !oom && o->argv[i]; i++) oom = common_strv_add(&c->argv, o->argv[i]) != 0;
  for (size_t i = 0; !oom && o->env && o->env[i]; i++)
    oom = common_strv_add(&c->env, o->env[i]) != 0;
  if (!oom && env_get(c->env.v, "PATH") == NULL)
    oom = common_strv_add(&c->env, "PATH=" DEFAULT_PATH) != 0;
  if (oom) {
    sm_mcp_client_free(c);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  pthread_mutex_lock(&c->life);
  int rc = start(c, err);
  pthread_mutex_unlock(&c->life);
  if (rc) {
    sm_mcp_client_free(c);
    return rc;
  }
  *out = c;
  return 0;
}

void sm_mcp_client_free(sm_mcp_client *c) {
  if (c == NULL) return;
  pthread_mutex_lock(&c->life);
  stop(c);
  pthread_mutex_unlock(&c->life);
  free(c->name);
  free(c->cwd);
  common_strv_dispose(&c->argv);
  common_strv_dispose(&c->env);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->wmu);
  pthread_mutex_destroy(&c->mu);
  pthread_mutex_destroy(&c->life);
  free(c);
}

int sm_mcp_client_tools(sm_mcp_client *c, json_object **tools, sm_error *err) {
  *tools = NULL;
  int rc = ensure_running(c, err);
  if (rc) return rc;
  json_object *all = json_object_new_array();
  if (all == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  char *cursor = NULL;
  for (int page = 0; rc == 0; page++) {
    if (page == SM_MCP_CLIENT_MAX_PAGES) {
      rc = sm_error_set(err, SM_ETOOBIG, "MCP server '%s' lists its tools over more than %d pages",
                        c->name, SM_MCP_CLIENT_MAX_PAGES);
      break;
    }
    json_object *params = json_object_new_object(), *r = NULL, *list = NULL, *next = NULL;
    if (cursor) json_object_object_add(params, "cursor", json_object_new_string(cursor));
    free(cursor);
    cursor = NULL;
    if ((rc = request(c, "tools/list", params, c->timeout_s, NULL, &r, err)) != 0) break;
    if (!json_object_object_get_ex(r, "tools", &list) || !json_object_is_type(list, json_type_array)) {
      rc = sm_error_set(err, SM_EPROTOCOL, "MCP server '%s' answered tools/list without tools", c->name);
    }
    for (size_t i = 0; rc == 0 && i < json_object_array_length(list); i++) {
      json_object *t = json_object_array_get_idx(list, i), *n = NULL;
      if (!json_object_object_get_ex(t, "name", &n) || !json_object_is_type(n, json_type_string)) {
        rc = sm_error_set(err, SM_EPROTOCOL, "MCP server '%s' listed a tool without a name", c->name);
      } else if (json_object_array_length(all) >= SM_MCP_CLIENT_MAX_TOOLS) {
        rc = sm_error_set(err, SM_ETOOBIG, "MCP server '%s' lists more than %d tools", c->name,
                          SM_MCP_CLIENT_MAX_TOOLS);
      } else {
        json_object_array_add(all, json_object_get(t));
      }
    }
    if (rc == 0 && json_object_object_get_ex(r, "nextCursor", &next) &&
        json_object_is_type(next, json_type_string) && json_object_get_string_len(next) > 0)
      cursor = strdup(json_object_get_string(next));
    json_object_put(r);
    if (rc == 0 && cursor == NULL) break;
  }
  free(cursor);
  if (rc) {
    json_object_put(all);
    return rc;
  }
  *tools = all;
  return 0;
}

int sm_mcp_client_call(sm_mcp_client *c, const char *tool, json_object *args, double timeout_s,
                       volatile int *cancel, sm_mcp_result *out, sm_error *err) {
  int rc = ensure_running(c, err);
  if (rc) return rc;
  json_object *params = json_object_new_object(), *r = NULL, *content = NULL, *sc = NULL, *ie = NULL;
  json_object_object_add(params, "name", json_object_new_string(tool));
  json_object_object_add(params, "arguments", args ? json_object_get(args) : json_object_new_object());
  rc = request(c, "tools/call", params, timeout_s > 0 ? timeout_s : 60, cancel, &r, err);
  if (rc) return rc;
  if (!json_object_object_get_ex(r, "content", &content) || !json_object_is_type(content, json_type_array)) {
    json_object_put(r);
    return sm_error_set(err, SM_EPROTOCOL, "MCP server '%s' answered tools/call %s without content",
                        c->name, tool);
  }
  json_object_put(out->content);
  out->content = json_object_get(content);
  if (json_object_object_get_ex(r, "structuredContent", &sc) && json_object_is_type(sc, json_type_object))
    sm_mcp_result_structured(out, json_object_get(sc));
  out->is_error = json_object_object_get_ex(r, "isError", &ie) && json_object_get_boolean(ie);
  json_object_put(r);
  return 0;
}
