/* The host-tool route, host side (see tool_route.h, sandman/hostroute.h
 * and docs/host-tools.md).
 *
 * Who a request comes from is decided here, from what the kernel says,
 * never from what the sandbox sends: the relay reads the process the
 * kernel names as the request's writer (SCM_CREDENTIALS) and its
 * ancestors with their start times (the peer
 * block of agent/route_peer.h), and a request gets the identity of the
 * call with the route whose first process (pid and start time, from the
 * call's preamble: sandbox_route_started) is among them. A process of no
 * live call (one a call left behind was handed to the sandbox's init when
 * its call ended), of a call without host tools, or of sandman's own
 * execs, gets none. Several calls at once in one sandbox each get their
 * own identity. A request that arrives before a call beside it has said
 * its first process waits for that (bounded): it may be that call's.
 *
 * Threads: one pump per route (the exec stream is used by one thread at a
 * time), one per request in flight (handlers may block: approvals, host
 * tools), bounded per route and, by the bytes of the requests they hold,
 * for the whole process (sandbox_routes_set_memory). The pump cannot be
 * woken from outside its poll, so it polls briefly while answers may be
 * coming and long otherwise; sm_exec_stream_shutdown ends it at once. */
#include "sandbox/tool_route.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sandman/hostroute.h>
#include <sandman/log.h>
#include <sandman/util.h>

#include "agent/frame.h"
#include "agent/route_peer.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "sandbox/helper.h"
#include "sandbox/sandbox_settings.h"

_Static_assert(SM_FRAME_ROUTE_REQUEST_MAX == SM_ROUTE_REQUEST_MAX + SM_FRAME_ROUTE_PEER_MAX,
               "route request caps differ");
_Static_assert(SM_FRAME_ROUTE_RESPONSE_MAX == SM_ROUTE_RESPONSE_MAX, "route response caps differ");

#define START_TIMEOUT_MS 30000
#define MAX_IN_FLIGHT 32         /* requests being answered per route (the relay's own bound) */
#define POLL_BUSY_MS 2           /* while answers may be coming */
#define POLL_IDLE_MS 1000
#define PATH_MAX_LEN 3000
#define ROOT_WAIT_MS 10000       /* for a call beside the request to say its first process */
#define MEMORY_DEFAULT ((size_t)32 << 20) /* request bytes held at once, all routes */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* The string fields of sm_route_caller, for copying it. */
#define CALLER_FIELDS(X)                                                                    \
  X(container_id) X(sandbox) X(mode) X(runtime) X(project) X(agent) X(tool) X(user) X(run_id) \
  X(worker_id) X(principal) X(call_id)

typedef struct route route;

struct sandbox_route_call {
  sandbox_route_call *next;
  sandbox_routes *rs;
  route *r;
  sm_route_caller *who; /* one allocation with its strings */
  /* under rs->mu: the call's first process, from its preamble */
  int rooted;
  uint32_t pid;
  uint64_t start;
};

struct route {
  route *next;
  sandbox_routes *rs;
  char cid[SM_ENGINE_ID_MAX];
  char name[256];
  sm_exec_stream *stream;
  agent_frame_reader reader; /* pump thread only (and the opener before it) */
  pthread_t thread;
  int has_thread;
  /* under rs->mu */
  int starting, dead, stopping, hello;
  sm_host_route handler;
  sandbox_route_call *active; /* the calls with the route, oldest first */
  int in_flight;
  common_buf out; /* frames for the relay, not yet taken by the pump */
  char path[PATH_MAX_LEN + 1];
  char diag[1024];
  size_t diag_len;
};

struct sandbox_routes {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  route *list;
  /* Calls whose route ended under them (r NULL): the container's next
   * route takes them in. */
  sandbox_route_call *orphans;
  unsigned long started;
  size_t mem_used, mem_max; /* request bytes held by handlers, all routes */
};

/* Under rs->mu: appends c to a list. */
static void calls_append(sandbox_route_call **list, sandbox_route_call *c) {
  c->next = NULL;
  while (*list) list = &(*list)->next;
  *list = c;
}

/* Under rs->mu: moves r's calls to the orphans (r is going away). */
static void calls_orphan(sandbox_routes *rs, route *r) {
  while (r->active) {
    sandbox_route_call *c = r->active;
    r->active = c->next;
    c->r = NULL;
    calls_append(&rs->orphans, c);
  }
}

/* Under rs->mu: r (live now) takes the orphaned calls of its container,
 * oldest first. */
static void calls_adopt(sandbox_routes *rs, route *r) {
  sandbox_route_call **pp = &rs->orphans, *taken = NULL;
  while (*pp) {
    sandbox_route_call *c = *pp;
    if (strcmp(c->who->container_id, r->cid) == 0) {
      *pp = c->next;
      c->r = r;
      calls_append(&taken, c);
    } else {
      pp = &c->next;
    }
  }
  if (taken) {
    sandbox_route_call **tail = &taken;
    while (*tail) tail = &(*tail)->next;
    *tail = r->active;
    r->active = taken;
  }
}

typedef struct job {
  route *r;
  uint32_t conn;
  char *req;
  size_t len;
  route_peer peer; /* who sent the request, as the relay read it */
  sm_host_route handler;
} job;

/* ---- identities ---- */

static sm_route_caller *caller_dup(const sm_route_caller *src) {
  size_t total = 0;
#define LEN(f) total += strlen(src->f ? src->f : "") + 1;
  CALLER_FIELDS(LEN)
#undef LEN
  sm_route_caller *c = malloc(sizeof *c + total);
  if (c == NULL) return NULL;
  *c = *src;
  char *p = (char *)(c + 1);
#define COPY(f)                                                                             \
  {                                                                                         \
    size_t n = strlen(src->f ? src->f : "") + 1;                                            \
    memcpy(p, src->f ? src->f : "", n);                                                     \
    c->f = p;                                                                               \
    p += n;                                                                                 \
  }
  CALLER_FIELDS(COPY)
#undef COPY
  return c;
}

/* Who a request of peer comes from (under rs->mu): 1 with *out the call
 * whose first process is among peer's chain; 0 with *out none; with
 * may_wait, -1 (*out NULL) while a call of r has not said its first
 * process yet. *out NULL with 0 or 1: out of memory. */
static int caller_of(route *r, const route_peer *peer, int may_wait, sm_route_caller **out) {
  sm_route_caller none = {.active = 0, .container_id = r->cid, .sandbox = r->name};
  const sm_route_caller *found = &none;
  int pending = 0;
  for (const sandbox_route_call *c = r->active; c && found == &none; c = c->next) {
    if (!c->rooted) pending = 1;
    for (uint32_t i = 0; c->rooted && i < peer->n; i++)
      if (peer->pid[i] == c->pid && peer->start[i] == c->start) found = c->who;
  }
  *out = NULL;
  if (found == &none && pending && may_wait) return -1;
  sm_route_caller who = *found;
  who.peer_pid = peer->n ? (long)peer->pid[0] : -1;
  who.peer_uid = peer->uid == UINT32_MAX ? -1 : (long)peer->uid;
  *out = caller_dup(&who);
  return found != &none;
}

/* The caller for job j: waits (bounded) while a call beside it has not
 * said its first process (then, past the bound, that call lends nothing).
 * NULL: out of memory. */
static sm_route_caller *caller_for(const job *j) {
  sandbox_routes *rs = j->r->rs;
  sm_route_caller *who = NULL;
  double deadline = sm_monotonic_ms() + ROOT_WAIT_MS;
  pthread_mutex_lock(&rs->mu);
  while (caller_of(j->r, &j->peer, 1, &who) < 0) {
    double left = deadline - sm_monotonic_ms();
    if (left <= 0) {
      caller_of(j->r, &j->peer, 0, &who);
      break;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = (long long)ts.tv_nsec + (long long)(left * 1e6);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    pthread_cond_timedwait(&rs->cv, &rs->mu, &ts);
  }
  pthread_mutex_unlock(&rs->mu);
  return who;
}

/* ---- frames to the relay ---- */

/* Queues an answer for connection conn (under rs->mu). */
static void queue_answer(route *r, uint32_t conn, const char *resp, size_t len) {
  unsigned char head[SM_FRAME_HEADER];
  agent_frame_header(head, SM_FRAME_ROUTE_RESPONSE, conn, (uint32_t)len);
  if (common_buf_append(&r->out, head, sizeof head) != 0) return;
  if (common_buf_append(&r->out, resp, len) != 0) r->out.len -= sizeof head;
}

static void queue_error(route *r, uint32_t conn, int status, const char *reason,
                        const char *message) {
  char body[384], resp[640];
  int bl = snprintf(body, sizeof body, "{\"error\": \"%s\", \"reason\": \"%s\", \"rule\": null}\n",
                    message, reason);
  int n = snprintf(resp, sizeof resp,
                   "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                   "Connection: close\r\n\r\n%s",
                   status, status == 503 ? "Service Unavailable" : "Internal Server Error", bl,
                   body);
  if (bl > 0 && (size_t)bl < sizeof body && n > 0 && (size_t)n < sizeof resp)
    queue_answer(r, conn, resp, (size_t)n);
}

/* ---- requests ---- */

static void job_free(job *j) {
  free(j->req);
  free(j);
}

static void *answer_thread(void *arg) {
  job *j = arg;
  route *r = j->r;
  char *resp = NULL;
  size_t resp_len = 0;
  sm_error err = SM_ERROR_INIT;
  sm_route_caller *who = caller_for(j);
  int rc = who ? j->handler.handle(j->handler.ud, who, j->req, j->len, &resp, &resp_len, &err)
               : -1;
  if (rc == 0 && (resp == NULL || resp_len > SM_ROUTE_RESPONSE_MAX)) {
    sm_log(SM_LOG_WARN, "host-tool route: the handler's answer is %s; answering 500",
           resp ? "over the route's limit" : "missing");
    rc = -1;
  }
  pthread_mutex_lock(&r->rs->mu);
  if (rc == 0) queue_answer(r, j->conn, resp, resp_len);
  else queue_error(r, j->conn, 500, "internal", "the host could not answer");
  r->in_flight--;
  r->rs->mem_used -= j->len;
  pthread_cond_broadcast(&r->rs->cv);
  pthread_mutex_unlock(&r->rs->mu);
  free(resp);
  free(who);
  job_free(j);
  return NULL;
}

/* A request of connection conn (the peer block, then its bytes) goes to a
 * thread of its own, within the route's bound and the process's bound on
 * the bytes held; past them the relay is answered 503 at once. */
static int dispatch(route *r, uint32_t conn, const unsigned char *p, uint32_t len) {
  sandbox_routes *rs = r->rs;
  cleanup_free job *j = calloc(1, sizeof *j);
  if (j == NULL) {
    pthread_mutex_lock(&rs->mu);
    queue_error(r, conn, 503, "busy", "the host is out of memory");
    pthread_mutex_unlock(&rs->mu);
    return 0;
  }
  size_t used = agent_route_peer_decode(p, len, &j->peer);
  if (used == 0) return -1; /* a relay that breaks its protocol ends its route */
  const unsigned char *req = p + used;
  size_t req_len = len - used;
  pthread_mutex_lock(&rs->mu);
  const char *why = r->handler.handle == NULL || r->in_flight >= MAX_IN_FLIGHT
                        ? "the host-tool route is busy: too many requests at once"
                    : rs->mem_used + req_len > rs->mem_max
                        ? "the host holds too many host-tool requests at once (their bytes are "
                          "over its bound, worker start --host-tool-memory): try again later"
                        : NULL;
  if (why == NULL) {
    r->in_flight++;
    rs->mem_used += req_len;
    j->handler = r->handler;
  } else {
    queue_error(r, conn, 503, "busy", why);
  }
  pthread_mutex_unlock(&rs->mu);
  if (why) return 0;
  j->req = malloc(req_len ? req_len : 1);
  if (j->req) memcpy(j->req, req, req_len);
  j->r = r;
  j->conn = conn;
  j->len = req_len;
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int trc = j->req ? pthread_create(&t, &attr, answer_thread, j) : -1;
  pthread_attr_destroy(&attr);
  if (trc != 0) {
    pthread_mutex_lock(&rs->mu);
    r->in_flight--;
    rs->mem_used -= req_len;
    queue_error(r, conn, 503, "busy", "the host-tool route is busy: no thread");
    pthread_cond_broadcast(&rs->cv);
    pthread_mutex_unlock(&rs->mu);
    job_free(steal_pointer(&j));
  } else {
    j = NULL; /* answer_thread's now */
  }
  return 0;
}

/* The relay's frames: its hello once, then requests. Anything else is a
 * broken relay, and the route ends. */
static int on_frame(void *ud, int type, uint32_t id, const unsigned char *p, uint32_t len) {
  route *r = ud;
  if (type == SM_FRAME_HELLO) {
    size_t hl = sizeof SM_ROUTE_HELLO; /* with its NUL */
    if (r->hello || len < hl || memcmp(p, SM_ROUTE_HELLO, hl) != 0) return -1;
    size_t plen = len - hl;
    if (plen > PATH_MAX_LEN || memchr(p + hl, '\0', plen) != NULL) return -1;
    pthread_mutex_lock(&r->rs->mu);
    memcpy(r->path, p + hl, plen);
    r->path[plen] = '\0';
    r->hello = 1;
    pthread_mutex_unlock(&r->rs->mu);
    return 0;
  }
  if (type == SM_FRAME_ROUTE_REQUEST && r->hello && id != 0) return dispatch(r, id, p, len);
  return -1;
}

static int on_output(void *ud, int stream, const char *data, size_t len) {
  route *r = ud;
  if (stream == 2) {
    size_t room = sizeof r->diag - 1 - r->diag_len;
    if (len > room) len = room;
    memcpy(r->diag + r->diag_len, data, len);
    r->diag_len += len;
    r->diag[r->diag_len] = '\0';
    return 0;
  }
  int rc = agent_frame_reader_feed(&r->reader, (const unsigned char *)data, len);
  return rc == 0 ? 0 : SM_EPROTOCOL;
}

/* ---- the pump ---- */

static void *pump_thread(void *arg) {
  route *r = arg;
  sandbox_routes *rs = r->rs;
  common_buf sending;
  common_buf_init(&sending, r->out.max);
  size_t off = 0;
  sm_error err = SM_ERROR_INIT;
  int rc = 0;
  for (;;) {
    pthread_mutex_lock(&rs->mu);
    if (r->stopping) {
      pthread_mutex_unlock(&rs->mu);
      break;
    }
    if (off == sending.len && r->out.len > 0) {
      /* Take the queued frames whole (swap the buffers). */
      common_buf t = sending;
      sending = r->out;
      r->out = t;
      common_buf_reset(&r->out);
      off = 0;
    }
    int busy = r->in_flight > 0 || off < sending.len;
    pthread_mutex_unlock(&rs->mu);
    size_t w = 0;
    rc = sm_exec_stream_pump(r->stream, sending.data + off, sending.len - off, &w,
                             busy ? POLL_BUSY_MS : POLL_IDLE_MS, &err);
    off += w;
    if (off == sending.len) {
      common_buf_reset(&sending);
      off = 0;
    }
    if (rc != 0) break;
  }
  common_buf_dispose(&sending);
  pthread_mutex_lock(&rs->mu);
  if (!r->stopping)
    sm_log(SM_LOG_DEBUG, "host-tool route of %s ended%s%s%s", r->name, rc < 0 ? ": " : "",
           rc < 0 ? err.message : "", r->diag_len ? r->diag : "");
  r->dead = 1;
  pthread_cond_broadcast(&rs->cv);
  pthread_mutex_unlock(&rs->mu);
  return NULL;
}

/* ---- start and stop ---- */

static void route_destroy(sandbox_routes *rs, route *r) {
  pthread_mutex_lock(&rs->mu);
  r->stopping = 1;
  pthread_mutex_unlock(&rs->mu);
  /* The relay sees its stdin end, removes its socket and exits. */
  if (r->stream) sm_exec_stream_shutdown(r->stream);
  if (r->has_thread) pthread_join(r->thread, NULL);
  pthread_mutex_lock(&rs->mu);
  while (r->in_flight > 0) pthread_cond_wait(&rs->cv, &rs->mu);
  pthread_mutex_unlock(&rs->mu);
  sm_exec_stream_close(r->stream);
  agent_frame_reader_dispose(&r->reader);
  common_buf_dispose(&r->out);
  free(r);
}

/* Installs the agent, starts the relay as root and waits for its hello
 * (its socket listens then). On the caller's thread, before the pump. */
static int route_open(route *r, sandbox_agents *agents, sm_engine *e, sm_error *err) {
  int rc = sandbox_agent_install(agents, e, r->cid, err);
  if (rc) return sm_error_wrap(err, "installing sandman's agent for the host-tool route");
  char path[128];
  sandbox_agent_binary_path(path, sizeof path);
  const char *argv[] = {path, "route"};
  json_object *cfg = sandbox_exec_config(argv, 2, "0:0", 1);
  if (cfg == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  char id[SM_ENGINE_ID_MAX];
  rc = sm_engine_exec_create(e, r->cid, cfg, id, err);
  json_object_put(cfg);
  if (rc == 0) rc = sm_engine_exec_open(e, id, on_output, r, &r->stream, err);
  double deadline = sm_monotonic_ms() + START_TIMEOUT_MS;
  while (rc == 0 && !r->hello) {
    int left = (int)(deadline - sm_monotonic_ms());
    if (left <= 0) {
      rc = sm_error_set(err, SM_ETIMEOUT, "the host-tool route's relay did not start in time");
      break;
    }
    rc = sm_exec_stream_pump(r->stream, NULL, 0, NULL, left, err);
    if (rc == 1)
      rc = sm_error_set(err, SM_ESANDBOX, "the host-tool route's relay ended at once%s%s",
                        r->diag_len ? ": " : "", r->diag);
    else if (rc == SM_EPROTOCOL)
      rc = sm_error_set(err, SM_EPROTOCOL, "the host-tool route's relay broke its protocol");
  }
  if (rc == 0 && pthread_create(&r->thread, NULL, pump_thread, r) != 0)
    rc = sm_error_set(err, SM_ENOMEM, "no thread for the host-tool route");
  if (rc == 0) r->has_thread = 1;
  return rc;
}

/* The container's live route (made if needed), under rs->mu on return
 * with 0. Only one caller starts a container's route; others wait for it. */
static int route_get(sandbox_routes *rs, sandbox_agents *agents, sm_engine *e, const char *cid,
                     const char *name, route **out, sm_error *err) {
  pthread_mutex_lock(&rs->mu);
  for (;;) {
    route **pp = &rs->list, *r = NULL;
    while (*pp && strcmp((*pp)->cid, cid) != 0) pp = &(*pp)->next;
    r = *pp;
    if (r && r->starting) {
      pthread_cond_wait(&rs->cv, &rs->mu);
      continue;
    }
    if (r && !r->dead) {
      *out = r;
      return 0;
    }
    if (r) {
      /* Ended (the container was removed or restarted): start afresh. A
       * call still holding the old one frees it when it ends. */
      *pp = r->next;
      calls_orphan(rs, r);
      pthread_mutex_unlock(&rs->mu);
      route_destroy(rs, r);
      pthread_mutex_lock(&rs->mu);
      continue;
    }
    break;
  }
  route *r = calloc(1, sizeof *r);
  if (r == NULL) {
    pthread_mutex_unlock(&rs->mu);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  r->rs = rs;
  snprintf(r->cid, sizeof r->cid, "%s", cid);
  snprintf(r->name, sizeof r->name, "%s", name ? name : "");
  common_buf_init(&r->out, (size_t)MAX_IN_FLIGHT * (SM_ROUTE_RESPONSE_MAX + SM_FRAME_HEADER));
  agent_frame_reader_init(&r->reader, SM_ROUTE_REQUEST_MAX, on_frame, r);
  r->starting = 1;
  r->next = rs->list;
  rs->list = r;
  rs->started++;
  pthread_mutex_unlock(&rs->mu);

  int rc = route_open(r, agents, e, err);
  pthread_mutex_lock(&rs->mu);
  r->starting = 0;
  if (rc) r->dead = 1; /* the next caller removes it */
  pthread_cond_broadcast(&rs->cv);
  if (rc) {
    pthread_mutex_unlock(&rs->mu);
    return rc;
  }
  calls_adopt(rs, r);
  *out = r;
  return 0;
}

/* PATH with SM_ROUTE_BIN_DIR appended (the call's own PATH if it set one,
 * else the container's as the relay saw it). No variable of sandman's: the
 * socket is at its fixed place, SM_ROUTE_SOCKET. */
static int route_env(const route *r, common_strv *env, sm_error *err) {
  const char *base = r->path[0] ? r->path : DEFAULT_PATH;
  size_t at = env->n;
  for (size_t i = 0; i < env->n; i++)
    if (strncmp(env->v[i], "PATH=", 5) == 0) at = i;
  if (at < env->n) base = env->v[at] + 5;
  size_t n = strlen(base) + sizeof "PATH=:" SM_ROUTE_BIN_DIR;
  char *path = malloc(n);
  if (path == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  snprintf(path, n, "PATH=%s%s" SM_ROUTE_BIN_DIR, base, *base ? ":" : "");
  int rc = 0;
  if (at < env->n) {
    free(env->v[at]);
    env->v[at] = path;
  } else {
    rc = common_strv_add(env, path);
    free(path);
  }
  return rc ? sm_error_set(err, SM_ENOMEM, NULL) : 0;
}

static const char *or_empty(const char *s) { return s ? s : ""; }

int sandbox_route_begin(sandbox_routes *rs, sandbox_agents *agents, sm_engine *e, const char *cid,
                        const char *name, const sm_run_request *req, common_strv *env,
                        sandbox_route_call **out, sm_error *err) {
  *out = NULL;
  /* A call without the route is not tracked: its processes find no call
   * with the route among their ancestors. */
  if (req->host_route == NULL) return 0;
  if (rs == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  if (req->host_route->handle == NULL)
    return sm_error_set(err, SM_EINVAL, "no handler for the host-tool route");
  char call_id[33] = "";
  int rc = sm_random_hex(call_id, 16, err);
  if (rc) return rc;
  sm_route_caller me = {
      .active = 1,
      .container_id = cid,
      .sandbox = name,
      .mode = sm_mode_name(req->settings.mode),
      .runtime = or_empty(req->settings.runtime),
      .project = req->project && *req->project ? req->project : "default",
      .agent = or_empty(req->agent),
      .tool = or_empty(req->tool),
      .user = or_empty(req->user),
      .run_id = or_empty(req->run_id),
      .worker_id = or_empty(req->worker_id),
      .principal = req->principal && *req->principal ? req->principal : SM_PRINCIPAL_CONTROL,
      .call_id = call_id,
      .peer_pid = -1,
      .peer_uid = -1,
  };
  cleanup_free sandbox_route_call *c = calloc(1, sizeof *c);
  if (c == NULL || (c->who = caller_dup(&me)) == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  route *r = NULL;
  rc = route_get(rs, agents, e, cid, name, &r, err);
  if (rc) {
    free(c->who);
    return sm_error_wrap(err, "starting the host-tool route in %s", name);
  }
  /* Under rs->mu: the call is active from here until sandbox_route_end;
   * its processes get its identity once its preamble names the first. */
  r->handler = *req->host_route;
  c->rs = rs;
  c->r = r;
  sandbox_route_call *active = steal_pointer(&c); /* the route's list holds it now */
  calls_append(&r->active, active);
  rc = route_env(r, env, err);
  pthread_mutex_unlock(&rs->mu);
  if (rc) {
    sandbox_route_end(rs, active, 0);
    return rc;
  }
  *out = active;
  return 0;
}

void sandbox_route_started(void *call, const char *pid, const char *start) {
  sandbox_route_call *c = call;
  if (c == NULL || pid == NULL || start == NULL) return;
  char *end1 = NULL, *end2 = NULL;
  unsigned long long p = strtoull(pid, &end1, 10), st = strtoull(start, &end2, 10);
  if (*pid == '\0' || *end1 != '\0' || *start == '\0' || *end2 != '\0' || p == 0 ||
      p > UINT32_MAX)
    return; /* never said: nothing of the call's is lent */
  pthread_mutex_lock(&c->rs->mu);
  c->pid = (uint32_t)p;
  c->start = st;
  c->rooted = 1;
  pthread_cond_broadcast(&c->rs->cv);
  pthread_mutex_unlock(&c->rs->mu);
}

void sandbox_route_end(sandbox_routes *rs, sandbox_route_call *c, int close) {
  if (rs == NULL || c == NULL) return;
  route *drop = NULL;
  pthread_mutex_lock(&rs->mu);
  route *r = c->r; /* read under the lock: a route's start or end moves calls */
  sandbox_route_call **pp = r ? &r->active : &rs->orphans;
  while (*pp && *pp != c) pp = &(*pp)->next;
  if (*pp) *pp = c->next;
  if (r != NULL && close && r->active == NULL) {
    route **rp = &rs->list;
    while (*rp && *rp != r) rp = &(*rp)->next;
    if (*rp) {
      *rp = r->next;
      drop = r;
    }
  }
  pthread_cond_broadcast(&rs->cv); /* a request waiting for its first process */
  pthread_mutex_unlock(&rs->mu);
  free(c->who);
  free(c);
  if (drop) route_destroy(rs, drop);
}

sandbox_routes *sandbox_routes_new(void) {
  sandbox_routes *rs = calloc(1, sizeof *rs);
  if (rs == NULL) return NULL;
  pthread_mutex_init(&rs->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* caller_for's bounded wait */
  pthread_cond_init(&rs->cv, &ca);
  pthread_condattr_destroy(&ca);
  rs->mem_max = MEMORY_DEFAULT;
  return rs;
}

void sandbox_routes_set_memory(sandbox_routes *rs, size_t bytes) {
  if (rs == NULL) return;
  pthread_mutex_lock(&rs->mu);
  rs->mem_max = bytes ? bytes : MEMORY_DEFAULT;
  pthread_mutex_unlock(&rs->mu);
}

void sandbox_routes_free(sandbox_routes *rs) {
  if (rs == NULL) return;
  pthread_mutex_lock(&rs->mu);
  route *list = rs->list;
  rs->list = NULL;
  pthread_mutex_unlock(&rs->mu);
  while (list) {
    route *next = list->next;
    route_destroy(rs, list);
    list = next;
  }
  pthread_cond_destroy(&rs->cv);
  pthread_mutex_destroy(&rs->mu);
  free(rs);
}

unsigned long sandbox_routes_started(sandbox_routes *rs) {
  if (rs == NULL) return 0;
  pthread_mutex_lock(&rs->mu);
  unsigned long n = rs->started;
  pthread_mutex_unlock(&rs->mu);
  return n;
}
