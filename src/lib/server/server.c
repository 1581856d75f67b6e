/* The runner service's life cycle: options, the listening socket, the
 * call threads (jobs.c), the health thread and the clean stop. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include <sandman/log.h>
#include <sandman/ops.h>
#include <sandman/util.h>
#include <sandman/version.h>

#include "common/cleanup.h"
#include "server/code_queue.h"
#include "server/server_core.h"
#include "server/handles.h"
#include "server/terminal.h"
#include "server/port_tunnel.h"
#include "server/preview.h"
#include "server/server_watch.h"
#include "server/websocket_conn.h"
#include "server/mcp_route.h"

#define DEFAULT_THREADS 16
#define DEFAULT_IO_THREADS 2
#define DEFAULT_MAX_CONNECTIONS 256
#define DEFAULT_MAX_QUEUE 1024
#define DEFAULT_MAX_BODY (4u * 1024 * 1024)
#define DEFAULT_MAX_FILE_BODY ((size_t)1 << 30)
#define DEFAULT_BACKGROUND_MAX 3600.0
#define DEFAULT_MAX_HANDLES 1024
#define MAX_LEASES 4096
#define HEALTH_PERIOD_S 10
#define IDLE_REAP_PERIOD_S 60
#define MCP_SESSION_IDLE_S 600

/* ---- health ---- */

static void health_check(sm_server *srv) {
  if (srv->opts.runner == NULL) return;
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  int up = 0;
  char version[64] = "", api[16] = "", host[256] = "";
  if (sm_runner_engine(srv->opts.runner, &e, &err) == 0) {
    snprintf(host, sizeof host, "%s", sm_engine_host(e));
    if (sm_engine_negotiate(e, &err) == 0 && sm_engine_ping(e, &err) == 0) {
      up = 1;
      json_object *v = NULL;
      if (sm_engine_version(e, &v, &err) == 0 && v) {
        json_object *f = NULL;
        if (json_object_object_get_ex(v, "Version", &f))
          snprintf(version, sizeof version, "%s", json_object_get_string(f));
        json_object_put(v);
      }
      snprintf(api, sizeof api, "%s", sm_engine_api_version(e) ? sm_engine_api_version(e) : "");
    }
  }
  pthread_mutex_lock(&srv->mu);
  if (up != srv->engine_up)
    sm_log(up ? SM_LOG_INFO : SM_LOG_WARN, "engine %s: %s", up ? "answers" : "does not answer",
           up ? host : err.message);
  srv->engine_up = up;
  if (host[0]) snprintf(srv->engine_host, sizeof srv->engine_host, "%s", host);
  if (up) {
    snprintf(srv->engine_version, sizeof srv->engine_version, "%s", version);
    snprintf(srv->engine_api, sizeof srv->engine_api, "%s", api);
    srv->engine_error[0] = '\0';
  } else {
    snprintf(srv->engine_error, sizeof srv->engine_error, "%s", err.message);
  }
  pthread_mutex_unlock(&srv->mu);
}

static double idle_timeout(sm_server *srv) {
  sm_resolved r;
  sm_error err = SM_ERROR_INIT;
  if (sm_config_resolve(sm_server_config(srv), NULL, NULL, NULL,
                        srv->have_flags ? &srv->flags : NULL, &r, &err) != 0)
    return 0;
  return r.settings.idle_timeout_s;
}

/* The lifecycle (docs/state.md#the-idle-lifecycle): keyed sandboxes
 * unused for its times are frozen, stopped, removed. Before the idle reap,
 * so that a sandbox due to rest goes to rest rather than away. */
static void lifecycle_tick(sm_server *srv) {
  sm_ops_report rep;
  memset(&rep, 0, sizeof rep);
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_lifecycle(srv->opts.runner, sm_server_config(srv), 0, &rep, &err) != 0)
    sm_log(SM_LOG_WARN, "lifecycle: %s", err.message);
  else
    sm_ops_report_audit(&rep, "sandbox.reaped", sm_runner_audit(srv->opts.runner));
  sm_ops_report_dispose(&rep);
}

/* snapshots: {older_than, keep} of the configuration: the runner reaps
 * snapshots by itself as `sandman snapshot reap` does. */
static void snapshot_tick(sm_server *srv) {
  double older = 0;
  size_t keep = 0;
  sm_config_snapshot_reap(sm_server_config(srv), &older, &keep);
  if (older <= 0 && keep == 0) return;
  sm_snapshot_list removed = {0, NULL};
  sm_error err = SM_ERROR_INIT;
  if (sm_snapshot_reap(srv->opts.runner, older, keep, 0, &removed, &err) != 0) {
    sm_log(SM_LOG_WARN, "snapshot reap: %s", err.message);
    return;
  }
  for (size_t i = 0; i < removed.n; i++)
    sm_log(SM_LOG_INFO, "snapshot reap removed snapshot %s of %s", removed.items[i].name,
           removed.items[i].owner);
  sm_snapshot_list_dispose(&removed);
}

/* MCP sessions idle past --mcp-session-idle end (their own sandboxes go),
 * the lifecycle moves idle sandboxes to rest, then sandboxes idle past
 * their idle timeout (their own label's, else the configuration's) are
 * reaped, and snapshots past the configuration's snapshots: limits. */
static void reap_idle(sm_server *srv) {
  server_mcp_route_expire(srv);
  if (!srv->engine_up) return;
  lifecycle_tick(srv);
  snapshot_tick(srv);
  sm_ops_report rep;
  memset(&rep, 0, sizeof rep);
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_reap_idle(srv->opts.runner, idle_timeout(srv), &rep, &err) == 0) {
    if (rep.n_removed) sm_log(SM_LOG_INFO, "idle reap removed %zu sandbox(es)", rep.n_removed);
    sm_ops_report_dispose(&rep);
  } else {
    sm_log(SM_LOG_WARN, "idle reap: %s", err.message);
  }
}

static void *health_main(void *arg) {
  sm_server *srv = arg;
  sm_log_set_request_id("health");
  /* The first reap at start: what a crash of an earlier runner left (a
   * per_tool or lease container whose owner is gone) goes at once. */
  double reap_ms = srv->opts.reap_interval_s * 1000.0;
  double last_reap = sm_monotonic_ms() - reap_ms - 1, last_health = 0;
  /* The loop wakes for whichever comes first: a health check, a reap. */
  double tick_ms = reap_ms < HEALTH_PERIOD_S * 1000.0 ? reap_ms : HEALTH_PERIOD_S * 1000.0;
  pthread_mutex_lock(&srv->mu);
  while (!srv->health_stop) {
    pthread_mutex_unlock(&srv->mu);
    if (sm_monotonic_ms() - last_health >= HEALTH_PERIOD_S * 1000.0 - tick_ms / 2) {
      last_health = sm_monotonic_ms();
      health_check(srv);
    }
    if (srv->opts.runner && sm_monotonic_ms() - last_reap >= reap_ms - tick_ms / 2) {
      last_reap = sm_monotonic_ms();
      reap_idle(srv);
    }
    pthread_mutex_lock(&srv->mu);
    if (srv->health_stop) break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = (long)(tick_ms * 1e6);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec += ns % 1000000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&srv->cv_health, &srv->mu, &ts);
  }
  pthread_mutex_unlock(&srv->mu);
  return NULL;
}

/* ---- the listening socket ---- */

int sm_server_default_socket(char *buf, size_t len, sm_error *err) {
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  int n;
  if (geteuid() == 0) n = snprintf(buf, len, "/run/sandman/sandman.sock");
  else if (xdg && xdg[0] == '/') n = snprintf(buf, len, "%s/sandman/sandman.sock", xdg);
  else n = snprintf(buf, len, "/tmp/sandman-%u/sandman.sock", (unsigned)geteuid());
  if (n < 0 || (size_t)n >= len) return sm_error_set(err, SM_EINVAL, "socket path too long");
  return 0;
}

/* mkdir -p with 0700 for the parts we create; the last directory must end
 * up ours and closed to others when we created it. */
static int make_socket_dir(const char *sock, sm_error *err) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", sock);
  char *slash = strrchr(dir, '/');
  if (slash == NULL || slash == dir) return 0;
  *slash = '\0';
  for (char *p = dir + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
      return sm_error_set_errno(err, SM_EIO, errno, "creating %s", dir);
    *p = '/';
  }
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return sm_error_set_errno(err, SM_EIO, errno, "creating %s", dir);
  struct stat st;
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return sm_error_set(err, SM_EUNSAFE, "socket directory %s is not a directory", dir);
  if (st.st_uid != geteuid() && st.st_uid != 0)
    return sm_error_set(err, SM_EUNSAFE,
                        "socket directory %s belongs to uid %u: refusing to listen there", dir,
                        (unsigned)st.st_uid);
  if ((st.st_mode & 0022) && !(st.st_mode & S_ISVTX))
    return sm_error_set(err, SM_EUNSAFE,
                        "socket directory %s is writable by others: refusing to listen there",
                        dir);
  return 0;
}

static int listen_unix(sm_server *srv, const char *path, sm_error *err) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof sa.sun_path)
    return sm_error_set(err, SM_EINVAL, "unix socket path %s is longer than %zu bytes", path,
                        sizeof sa.sun_path - 1);
  memcpy(sa.sun_path, path, strlen(path) + 1);
  int rc = make_socket_dir(path, err);
  if (rc != 0) return rc;
  cleanup_fd int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "socket");
  /* A socket file left by a runner that died is replaced; one that answers
   * belongs to a live runner and is not. */
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return sm_error_set(err, SM_EUNSAFE, "%s exists and is not a socket", path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
      return sm_error_set(err, SM_EBUSY, "another runner listens on %s", path);
    unlink(path);
    close(fd);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "socket");
  }
  mode_t old = umask(0177);
  int b = bind(fd, (struct sockaddr *)&sa, sizeof sa);
  int e = errno;
  umask(old);
  if (b != 0)
    return sm_error_set_errno(err, SM_EIO, e, "cannot bind %s", path);
  if (chmod(path, 0600) != 0 || listen(fd, 128) != 0 || lstat(path, &st) != 0) {
    e = errno;
    unlink(path);
    return sm_error_set_errno(err, SM_EIO, e, "cannot listen on %s", path);
  }
  srv->listen_fd = common_steal_fd(&fd);
  snprintf(srv->sock_path, sizeof srv->sock_path, "%s", path);
  srv->sock_dev = st.st_dev;
  srv->sock_ino = st.st_ino;
  snprintf(srv->address, sizeof srv->address, "unix:%s", path);
  return 0;
}

static int listen_tcp(sm_server *srv, const char *hostport, sm_error *err) {
  char host[256];
  const char *colon = strrchr(hostport, ':');
  if (colon == NULL || colon == hostport || (size_t)(colon - hostport) >= sizeof host)
    return sm_error_set(err, SM_EINVAL, "--listen tcp://HOST:PORT: bad address '%s'", hostport);
  memcpy(host, hostport, (size_t)(colon - hostport));
  host[colon - hostport] = '\0';
  if (host[0] == '[' && host[strlen(host) - 1] == ']') {
    memmove(host, host + 1, strlen(host));
    host[strlen(host) - 1] = '\0';
  }
  int64_t port;
  if (sm_parse_int(colon + 1, 0, 65535, &port, NULL) != 0)
    return sm_error_set(err, SM_EINVAL, "--listen: bad port '%s'", colon + 1);
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  int g = getaddrinfo(host, colon + 1, &hints, &ai);
  if (g != 0)
    return sm_error_set(err, SM_EINVAL, "--listen: cannot resolve %s: %s", host, gai_strerror(g));
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    freeaddrinfo(ai);
    return sm_error_set_errno(err, SM_EIO, e, "cannot listen on tcp://%s: %s", hostport,
                              strerror(e));
  }
  freeaddrinfo(ai);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  char nhost[NI_MAXHOST] = "", nport[NI_MAXSERV] = "";
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
    getnameinfo((struct sockaddr *)&ss, sl, nhost, sizeof nhost, nport, sizeof nport,
                NI_NUMERICHOST | NI_NUMERICSERV);
  srv->listen_fd = fd;
  if (strchr(nhost, ':'))
    snprintf(srv->address, sizeof srv->address, "tcp://[%s]:%s", nhost, nport);
  else
    snprintf(srv->address, sizeof srv->address, "tcp://%s:%s", nhost, nport);
  return 0;
}

/* ---- start and stop ---- */

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static int setup(sm_server *srv, const sm_server_options *o, sm_error *err) {
  srv->opts = *o;
  if (o->token == NULL || !server_token_valid(o->token))
    return sm_error_set(err, SM_EINVAL, "the runner needs a control token of %d to %d "
                        "visible characters", SM_TOKEN_MIN_LEN, SM_TOKEN_MAX_LEN);
  srv->token = strdup(o->token);
  srv->pool = dup_or_null(o->pool);
  srv->project = dup_or_null(o->project);
  srv->project_environment = dup_or_null(o->project_environment);
  if (srv->token == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  srv->opts.token = srv->token;
  srv->opts.pool = srv->pool;
  srv->opts.project = srv->project;
  srv->opts.project_environment = srv->project_environment;
  if (o->flags) {
    srv->flags = *o->flags;
    srv->have_flags = 1;
  }
  srv->opts.flags = NULL;
  if (!srv->opts.threads) srv->opts.threads = DEFAULT_THREADS;
  if (!srv->opts.io_threads) srv->opts.io_threads = DEFAULT_IO_THREADS;
  if (!srv->opts.max_connections) srv->opts.max_connections = DEFAULT_MAX_CONNECTIONS;
  if (!srv->opts.max_queue) srv->opts.max_queue = DEFAULT_MAX_QUEUE;
  if (!srv->opts.max_body) srv->opts.max_body = DEFAULT_MAX_BODY;
  if (!srv->opts.max_file_body) srv->opts.max_file_body = DEFAULT_MAX_FILE_BODY;
  if (srv->opts.background_max_s <= 0) srv->opts.background_max_s = DEFAULT_BACKGROUND_MAX;
  if (srv->opts.mcp_session_idle_s <= 0) srv->opts.mcp_session_idle_s = MCP_SESSION_IDLE_S;
  if (srv->opts.reap_interval_s <= 0) srv->opts.reap_interval_s = IDLE_REAP_PERIOD_S;
  if (!srv->opts.max_handles) srv->opts.max_handles = DEFAULT_MAX_HANDLES;
  if (srv->opts.threads > 1024 || srv->opts.io_threads > 64)
    return sm_error_set(err, SM_EINVAL, "too many threads (at most 1024 call threads and 64 "
                        "I/O threads)");
  srv->opts.listen = NULL;
  srv->opts.credentials_file = NULL;
  srv->opts.workspaces_root = NULL;

  if (o->workspaces_root) {
    if (realpath(o->workspaces_root, srv->ws_root) == NULL)
      return sm_error_set_errno(err, SM_EINVAL, errno, "--workspaces-root %s: %s",
                                o->workspaces_root, strerror(errno));
    struct stat st;
    if (stat(srv->ws_root, &st) != 0 || !S_ISDIR(st.st_mode))
      return sm_error_set(err, SM_EINVAL, "--workspaces-root %s is not a directory",
                          o->workspaces_root);
  }
  if (o->credentials_file) {
    int rc = server_creds_load(&srv->creds, o->credentials_file, err);
    if (rc != 0) return rc;
    sm_log(SM_LOG_INFO, "credentials: %zu service(s) from %s", server_creds_count(srv->creds),
           o->credentials_file);
  }
  server_broker_attach(srv, o->broker);
  srv->leases = server_lease_store_new(MAX_LEASES);
  srv->metrics = server_metrics_new();
  srv->handles = calloc(srv->opts.max_handles, sizeof *srv->handles);
  srv->code_queue = server_code_queue_new();
  server_terminal_limits tl = {o->terminal_grace_s, o->terminals_per_sandbox, o->max_terminals,
                               o->terminal_scrollback};
  srv->ws = server_ws_group_new();
  srv->terminals = srv->ws ? server_terminals_new(srv, &tl) : NULL;
  srv->previews = server_previews_new(SERVER_PREVIEW_MAX_TOTAL, SERVER_PREVIEW_MAX_PER_SANDBOX);
  srv->port_tunnels =
      server_port_tunnels_new(SERVER_PORT_TUNNELS_PER_SANDBOX, SERVER_PORT_TUNNELS_MAX);
  server_watch_limits wl = {o->watches_per_sandbox, o->watches_per_token, o->watch_queue};
  srv->watches = server_watches_new(srv, &wl);
  if (!srv->previews || !srv->port_tunnels || !srv->leases || !srv->metrics || !srv->handles || !srv->terminals || !srv->watches ||
      !srv->code_queue)
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  /* The io.sandman.owner its per_tool sandboxes carry. */
  sm_sandbox_owner_label(srv->owner_label, sizeof srv->owner_label);

  const char *listen_addr = o->listen;
  char def[PATH_MAX];
  if (listen_addr == NULL) {
    int rc = sm_server_default_socket(def, sizeof def, err);
    if (rc != 0) return rc;
    return listen_unix(srv, def, err);
  }
  if (strncmp(listen_addr, "unix://", 7) == 0) return listen_unix(srv, listen_addr + 7, err);
  if (strncmp(listen_addr, "unix:", 5) == 0) return listen_unix(srv, listen_addr + 5, err);
  if (strncmp(listen_addr, "tcp://", 6) == 0) return listen_tcp(srv, listen_addr + 6, err);
  return sm_error_set(err, SM_EINVAL, "--listen takes unix:PATH or tcp://HOST:PORT, not '%s'",
                      listen_addr);
}

int sm_server_start(sm_server **out, const sm_server_options *o, sm_error *err) {
  *out = NULL;
  sm_server *srv = calloc(1, sizeof *srv);
  if (srv == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  srv->listen_fd = -1;
  pthread_mutex_init(&srv->mu, NULL);
  pthread_cond_init(&srv->cv_job, NULL);
  pthread_cond_init(&srv->cv_idle, NULL);
  pthread_cond_init(&srv->cv_health, NULL);
  int rc = setup(srv, o, err);
  if (rc == 0) {
    srv->threads = calloc(srv->opts.threads, sizeof *srv->threads);
    if (srv->threads == NULL) rc = sm_error_set(err, SM_ENOMEM, "out of memory");
    for (unsigned i = 0; rc == 0 && i < srv->opts.threads; i++) {
      if (pthread_create(&srv->threads[i], NULL, server_job_thread, srv) != 0)
        rc = sm_error_set(err, SM_ENOMEM, "cannot start call thread %u", i);
      else srv->n_threads++;
    }
  }
  if (rc == 0 && srv->opts.runner) {
    health_check(srv);
    if (pthread_create(&srv->health_thread, NULL, health_main, srv) == 0)
      srv->health_started = 1;
  }
  if (rc == 0) rc = server_mcp_route_start(srv, err);
  if (rc == 0) rc = server_http_start(srv, err);
  if (rc != 0) {
    sm_server_stop(srv);
    sm_server_free(srv);
    return rc;
  }
  sm_log(SM_LOG_INFO, "runner listening on %s (%u call threads, body limit %zu bytes)",
         srv->address, srv->opts.threads, srv->opts.max_body);
  *out = srv;
  return 0;
}

const char *sm_server_address(const sm_server *srv) { return srv->address; }

static void unlink_socket(sm_server *srv) {
  if (srv->sock_path[0] == '\0') return;
  struct stat st;
  /* Only our own socket file: a newer runner may have replaced it. */
  if (lstat(srv->sock_path, &st) == 0 && st.st_dev == srv->sock_dev &&
      st.st_ino == srv->sock_ino)
    unlink(srv->sock_path);
  srv->sock_path[0] = '\0';
}

/* per_tool sandboxes this process created and that survived (a call
 * interrupted in the middle, for instance). Others' are not touched. */
static void sweep_per_tool(sm_server *srv) {
  if (srv->opts.runner == NULL) return;
  sm_ops_scope scope;
  sm_ops_sandbox_list list = {0, NULL};
  sm_error err = SM_ERROR_INIT;
  if (sm_ops_scope_from_runner(&scope, srv->opts.runner, &err) != 0 ||
      sm_ops_list(&scope, 1, &list, &err) != 0) {
    sm_log(SM_LOG_WARN, "stop: cannot list per_tool sandboxes: %s", err.message);
    return;
  }
  const char **refs = calloc(list.n + 1, sizeof *refs);
  size_t n = 0;
  for (size_t i = 0; refs && i < list.n; i++)
    if (strcmp(list.items[i].mode, "per_tool") == 0 && !list.items[i].pool &&
        strcmp(list.items[i].owner, srv->owner_label) == 0)
      refs[n++] = list.items[i].id;
  if (n > 0) {
    sm_ops_rm_options ro = SM_OPS_RM_OPTIONS_INIT;
    ro.refs = refs;
    ro.n_refs = n;
    ro.force = 1;
    sm_ops_report rep;
    memset(&rep, 0, sizeof rep);
    if (sm_ops_rm(&scope, &ro, &rep, &err) == 0) {
      sm_log(SM_LOG_INFO, "stop: removed %zu per_tool sandbox(es)", rep.n_removed);
      sm_ops_report_dispose(&rep);
    } else {
      sm_log(SM_LOG_WARN, "stop: removing per_tool sandboxes: %s", err.message);
    }
  }
  free(refs);
  sm_ops_sandbox_list_dispose(&list);
}

void sm_server_stop(sm_server *srv) {
  if (srv == NULL) return;
  pthread_mutex_lock(&srv->mu);
  int was = srv->draining;
  srv->draining = 1;
  pthread_mutex_unlock(&srv->mu);
  if (was) return;
  sm_log(SM_LOG_INFO, "stopping: no new connections; waiting for calls in flight");
  server_http_quiesce(srv);
  unlink_socket(srv);
  /* Terminals run until someone ends them: they are ended now, and their
   * clients' connections (open requests until they close) let go. */
  server_terminals_stop(srv->terminals);
  server_ws_group_close_all(srv->ws, 2000);
  /* WebSockets through the ports route: their upgraded sockets must be
   * given back before libmicrohttpd stops. */
  server_port_tunnels_close_all(srv->port_tunnels, 5000);
  /* Watches too: each stream's last event says the runner stopped. */
  server_watches_stop(srv->watches);
  pthread_mutex_lock(&srv->mu);
  while (srv->requests_open > 0) pthread_cond_wait(&srv->cv_idle, &srv->mu);
  pthread_mutex_unlock(&srv->mu);
  server_handles_kill_all(srv);
  server_http_stop(srv);
  pthread_mutex_lock(&srv->mu);
  srv->workers_stop = 1;
  srv->health_stop = 1;
  pthread_cond_broadcast(&srv->cv_job);
  pthread_cond_broadcast(&srv->cv_health);
  pthread_mutex_unlock(&srv->mu);
  for (unsigned i = 0; i < srv->n_threads; i++) pthread_join(srv->threads[i], NULL);
  srv->n_threads = 0;
  if (srv->health_started) pthread_join(srv->health_thread, NULL);
  srv->health_started = 0;
  /* After the call threads: an MCP call of a client that went away may
   * still have been running in one. Sessions end, their sandboxes go. */
  server_mcp_route_stop(srv);
  /* The warm pool's containers go, and per_tool removals still queued are
   * waited for, before the sweep looks for leftovers. */
  sm_runner_pool_drain(srv->opts.runner);
  sweep_per_tool(srv);
  sm_log(SM_LOG_INFO, "stopped");
}

void sm_server_free(sm_server *srv) {
  if (srv == NULL) return;
  pthread_mutex_lock(&srv->mu);
  long bg = srv->bg_running;
  pthread_mutex_unlock(&srv->mu);
  /* A background call that ignored its kill still uses the server: leave
   * it allocated (the process is ending) rather than free it under it. */
  if (bg > 0) return;
  if (srv->listen_fd >= 0) close(srv->listen_fd);
  unlink_socket(srv);
  server_handles_free(srv);
  server_terminals_free(srv->terminals);
  server_previews_free(srv->previews);
  server_port_tunnels_free(srv->port_tunnels);
  server_watches_free(srv->watches);
  server_ws_group_free(srv->ws);
  while (srv->head) {
    server_job *j = srv->head;
    srv->head = j->next;
    free(j);
  }
  free(srv->threads);
  free(srv->handles);
  server_broker_detach(srv);
  server_creds_free(srv->creds);
  server_lease_store_free(srv->leases);
  server_metrics_free(srv->metrics);
  server_code_queue_free(srv->code_queue);
  if (srv->token) {
    OPENSSL_cleanse(srv->token, strlen(srv->token));
    free(srv->token);
  }
  char *owned[] = {srv->pool, srv->project, srv->project_environment};
  for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) free(owned[i]);
  pthread_mutex_destroy(&srv->mu);
  pthread_cond_destroy(&srv->cv_job);
  pthread_cond_destroy(&srv->cv_idle);
  pthread_cond_destroy(&srv->cv_health);
  free(srv);
}
