/* A runner's speed work (see pool.h): the warm pool of per_tool
 * containers, per_tool removals in the background, and agent sessions
 * opened ahead. (The lookup cache of keyed sandboxes is lookup.c.)
 *
 * Pools are keyed by configuration: the settings hash and the project (the
 * project is a label of every container). Calls come in "slots" (project,
 * agent, tool); a slot points at the pool of its current configuration.
 * When a slot's configuration changes and no other slot uses the old one,
 * the old pool is drained: its ready containers are removed.
 *
 * Background threads do the engine work: one prefers removing, the others
 * (one per refill allowed at once: sandbox_pool_set_limits) refilling, and each
 * does the other kind of work when it has none of its own. Each has its own
 * engine client (the runner's per-thread client). How many containers a
 * configuration keeps ready is its base size, more while its calls come
 * faster than containers are made (pool_demand.c), up to the pool's
 * maximum. A call that finds its pool empty while a container of its
 * configuration is being made waits for that one rather than making
 * another beside it (on two CPUs the two would slow each other).
 * A failing creation (image gone, engine down) backs off, doubling from 2 s
 * to 60 s, so a broken configuration never spins; calls then create their
 * own containers and report the real error. Every 30 s an idle thread
 * checks that the image of each pool still has the id its containers were
 * made from, and drains the pool when it was rebuilt.
 *
 * The three kinds of background work (refills, removals, sessions opened
 * ahead) stay in this one file because they share the two threads, one
 * lock and the order between them: removals and refills each have a
 * thread that prefers them, sessions wait until neither is running (on two
 * cores a session's two execs slowed a burst of calls), and removals that
 * are not overdue wait for the refills and sessions (the next burst needs
 * ready containers with their sessions, not the last one's gone). Split into
 * files, that order would have to cross a file boundary under one lock.
 * The lookup cache, which shares nothing of it, is lookup.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np */
#endif
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "common/thread.h"
#include "sandbox/agent.h"
#include "sandbox/pool.h"
#include "sandbox/network.h"
#include "sandbox/pool_demand.h"
#include "sandbox/rest.h"
#include "sandbox/sandbox_settings.h"
#include "sandbox/spec.h"

#define MAX_POOLS 16
#define MAX_SLOTS 256
#define WORKERS_MAX (1 + SM_POOL_MAX_PARALLEL)
#define MISS_WAIT_MIN_MS 1000.0  /* how long a call waits for a container being made... */
#define MISS_WAIT_MAX_MS 10000.0 /* ...at least and at most */
#define BACKOFF_MIN_MS 2000.0
#define BACKOFF_MAX_MS 60000.0
#define IMAGE_CHECK_MS 30000.0
#define IDLE_WAIT_MS 5000.0
/* Background work that no call waits for (removals, refills above a
 * quarter of the target, sessions, image checks) starts in a pause between
 * calls: none running and none begun or ended for QUIET_MS (an answer is
 * still on its way, or the next call of a burst is coming). Removals go
 * anyway once RM_BACKLOG wait or the oldest has waited RM_MAX_WAIT_MS. */
#define QUIET_MS 50.0
#define RM_BACKLOG 16
#define RM_MAX_WAIT_MS 5000.0

typedef struct cfg_pool {
  char key[65];              /* sha256(hash NUL project) */
  char hash[65];
  char project[SM_NAME_MAX];
  sm_sandbox_settings *settings;
  sandbox_pool_item *ready; /* oldest first; capacity SM_POOL_MAX_SIZE */
  unsigned n_ready;
  unsigned creating;
  unsigned in_flight;        /* calls running in containers taken from here */
  unsigned waiting;          /* calls waiting for a container being made */
  sandbox_pool_demand demand; /* how fast its calls come (the size it keeps) */
  unsigned refs;             /* slots pointing here */
  double last_use;           /* monotonic ms */
  double retry_at;           /* no creation before this (after a failure) */
  double backoff_ms;
  char image_id[SM_ENGINE_ID_MAX];
  double image_checked;
  unsigned long generation;  /* bumped when drained: late creations are not kept */
  int dead;                  /* dropped while creations or waiting calls were in flight: freed by the last */
} cfg_pool;

typedef struct slot {
  char key[65];              /* sha256(project NUL agent NUL tool) */
  cfg_pool *pool;
  double used;
} slot;

typedef struct removal {
  char name[SM_NAME_MAX];
  char volume[SM_NAME_MAX + 8];
  sm_state_lock *busy;
  int relay; /* it may have an egress relay (sandbox_remove) */
  double queued_at;
  struct removal *next;
} removal;

/* A keyed sandbox whose agent session is opened in the background after
 * its first call, so that its second call is fast too. */
typedef struct agent_prep {
  char id[SM_ENGINE_ID_MAX];
  char name[SM_NAME_MAX]; /* a keyed sandbox's, "" for a pool container */
  char user[32]; /* "uid:gid" the session runs as */
  struct agent_prep *next;
} agent_prep;
#define MAX_PREPS 64

struct sandbox_pool {
  const sandbox_ctx *ctx;    /* the runner's; the pool is its ctx->pool */
  pthread_mutex_t mu;
  pthread_cond_t cv_work;    /* a job may be there, or stop */
  pthread_cond_t cv_done;    /* a job finished (settle and drain wait on it) */
  unsigned size;             /* ready containers per configuration; 0: off */
  unsigned max_size;         /* ...at most, while calls come fast (>= size) */
  unsigned parallel;         /* creations at once, all configurations */
  unsigned width;            /* nodes it is kept on (a swarm's ready nodes; else 1) */
  int bg_remove;             /* per_tool removals off the caller's time */
  int stopping;
  pthread_t threads[WORKERS_MAX];
  int n_threads;
  cfg_pool *pools[MAX_POOLS];
  slot slots[MAX_SLOTS];
  double last_call;          /* a pool call began or ended then (monotonic ms) */
  removal *rm_head, *rm_tail;
  unsigned rm_queued, rm_running;
  agent_prep *prep_head;     /* LIFO; at most MAX_PREPS */
  unsigned n_preps, preps_running;
  unsigned long taken, missed, created, removed, failed;
};

static double mono_ms(void) { return sm_monotonic_ms(); }

/* Ready containers kept for cp now: what its calls ask for within the
 * pool's bounds, on each node. */
static unsigned target(const sandbox_pool *p, const cfg_pool *cp, double now) {
  unsigned want = sandbox_pool_demand_target(&cp->demand, p->size, p->max_size, now);
  unsigned long n = (unsigned long)want * (p->width ? p->width : 1);
  return n > SM_POOL_MAX_SIZE ? SM_POOL_MAX_SIZE : (unsigned)n;
}

/* Calls running in pool containers or waiting for one being made, all
 * configurations (hold p->mu). A waiting call is no pause: a removal or a
 * session started then slows the creation it waits for. */
static int calls_in_flight(const sandbox_pool *p) {
  for (int i = 0; i < MAX_POOLS; i++)
    if (p->pools[i] && (p->pools[i]->in_flight > 0 || p->pools[i]->waiting > 0)) return 1;
  return 0;
}

/* A pause between calls (hold p->mu): see QUIET_MS. */
static int calls_quiet(const sandbox_pool *p, double now) {
  return !calls_in_flight(p) && now - p->last_call >= QUIET_MS;
}

static unsigned creating_total(const sandbox_pool *p) {
  unsigned n = 0;
  for (int i = 0; i < MAX_POOLS; i++)
    if (p->pools[i]) n += p->pools[i]->creating;
  return n;
}

/* ---- small helpers (hold p->mu) ---- */

/* sha256 of the escaped fields joined by ':' (sandbox_key_append): injective,
 * so two configurations never share a pool. */
static void key_of(char out[65], const char *a, const char *b, const char *c) {
  char buf[SM_KEY_MAX];
  size_t used = 0;
  const char *fields[3] = {a, b, c};
  for (int i = 0; i < 3; i++) {
    if (sandbox_key_append(buf, sizeof buf, &used, fields[i], NULL) != 0) {
      /* Names are checked before a call gets here; a field this long
       * cannot happen, but must never truncate into another key. */
      sandbox_sha256_hex("\0overlong", 9, out);
      return;
    }
  }
  sandbox_sha256_hex(buf, used, out);
}

static const char *project_of(const sm_run_request *req) {
  return req->project && *req->project ? req->project : "default";
}

static void queue_removal(sandbox_pool *p, const char *name, const char *volume,
                          sm_state_lock *busy, int relay, removal *r) {
  snprintf(r->name, sizeof r->name, "%s", name);
  snprintf(r->volume, sizeof r->volume, "%s", volume);
  r->busy = busy;
  r->relay = relay;
  r->queued_at = sm_monotonic_ms();
  r->next = NULL;
  if (p->rm_tail) p->rm_tail->next = r;
  else p->rm_head = r;
  p->rm_tail = r;
  p->rm_queued++;
}

static void ensure_threads(sandbox_pool *p);

/* Queues opening an agent session in a container (hold p->mu). Newest
 * first: the container most likely to be used next. */
static void queue_prep(sandbox_pool *p, const char *container_id, const char *name,
                       const char *user) {
  if (p->stopping || p->n_preps >= MAX_PREPS) return;
  for (agent_prep *i = p->prep_head; i; i = i->next)
    if (strcmp(i->id, container_id) == 0) return;
  agent_prep *ap = malloc(sizeof *ap);
  if (ap == NULL) return;
  ensure_threads(p);
  snprintf(ap->id, sizeof ap->id, "%s", container_id);
  snprintf(ap->name, sizeof ap->name, "%s", name ? name : "");
  snprintf(ap->user, sizeof ap->user, "%s", user ? user : "");
  ap->next = p->prep_head;
  p->prep_head = ap;
  p->n_preps++;
  pthread_cond_broadcast(&p->cv_work);
}

/* Moves ready containers of cp beyond `keep` to the removal queue. A
 * container that cannot be queued (out of memory) stays ready. */
static void trim_pool(sandbox_pool *p, cfg_pool *cp, unsigned keep) {
  while (cp->n_ready > keep) {
    removal *r = malloc(sizeof *r);
    if (r == NULL) break;
    sandbox_pool_item *it = &cp->ready[cp->n_ready - 1];
    sm_log(SM_LOG_DEBUG, "pool: removing spare container %s", it->name);
    queue_removal(p, it->name, it->volume, NULL, sandbox_allowlist(cp->settings), r);
    cp->n_ready--;
  }
}

static void free_pool(cfg_pool *cp) {
  if (cp == NULL) return;
  free(cp->settings);
  free(cp->ready);
  free(cp);
}

static int pool_index(sandbox_pool *p, const cfg_pool *cp);

/* A dropped pool goes once no creation and no waiting call holds it. */
static void free_if_unheld(sandbox_pool *p, cfg_pool *cp) {
  if (!cp->dead || cp->creating > 0 || cp->waiting > 0) return;
  int i = pool_index(p, cp);
  if (i >= 0) p->pools[i] = NULL;
  free_pool(cp);
}

/* Drains and forgets pool i (its ready containers go, creations in flight
 * are removed when they finish). */
static void drop_pool(sandbox_pool *p, int i, const char *why) {
  if (i < 0) return;
  cfg_pool *cp = p->pools[i];
  if (cp == NULL || cp->dead) return;
  sm_log(SM_LOG_INFO, "pool: draining configuration %.12s (project %s): %s", cp->hash,
         cp->project, why);
  trim_pool(p, cp, 0);
  if (cp->n_ready > 0) {
    /* Out of memory for the queue: keep the pool, drained later. */
    cp->refs = 0;
    return;
  }
  for (int s = 0; s < MAX_SLOTS; s++)
    if (p->slots[s].pool == cp) p->slots[s].pool = NULL;
  cp->refs = 0;
  if (cp->creating > 0 || cp->waiting > 0) {
    cp->dead = 1;
  } else {
    free_pool(cp);
    p->pools[i] = NULL;
  }
  pthread_cond_broadcast(&p->cv_work);
}

static int pool_index(sandbox_pool *p, const cfg_pool *cp) {
  for (int i = 0; i < MAX_POOLS; i++)
    if (p->pools[i] == cp) return i;
  return -1;
}

static cfg_pool *find_pool(sandbox_pool *p, const char *key) {
  for (int i = 0; i < MAX_POOLS; i++)
    if (p->pools[i] && !p->pools[i]->dead && strcmp(p->pools[i]->key, key) == 0)
      return p->pools[i];
  return NULL;
}

static cfg_pool *new_pool(sandbox_pool *p, const char *key, const sm_run_request *req,
                          const char *hash) {
  int free_i = -1;
  for (int i = 0; i < MAX_POOLS && free_i < 0; i++)
    if (p->pools[i] == NULL) free_i = i;
  if (free_i < 0) {
    /* Full: the least recently used configuration gives way. */
    int lru = -1;
    for (int i = 0; i < MAX_POOLS; i++)
      if (!p->pools[i]->dead && (lru < 0 || p->pools[i]->last_use < p->pools[lru]->last_use))
        lru = i;
    if (lru < 0) return NULL;
    drop_pool(p, lru, "more configurations than pools");
    if (p->pools[lru] != NULL) return NULL;
    free_i = lru;
  }
  cfg_pool *cp = calloc(1, sizeof *cp);
  if (cp == NULL) return NULL;
  cp->settings = malloc(sizeof *cp->settings);
  cp->ready = calloc(SM_POOL_MAX_SIZE, sizeof *cp->ready);
  if (cp->settings == NULL || cp->ready == NULL) {
    free_pool(cp);
    return NULL;
  }
  snprintf(cp->key, sizeof cp->key, "%s", key);
  snprintf(cp->hash, sizeof cp->hash, "%s", hash);
  snprintf(cp->project, sizeof cp->project, "%s", project_of(req));
  *cp->settings = req->settings;
  sandbox_pool_demand_init(&cp->demand);
  cp->last_use = mono_ms();
  p->pools[free_i] = cp;
  sm_log(SM_LOG_DEBUG, "pool: new configuration %.12s (project %s, image %s)", hash, cp->project,
         req->settings.image);
  return cp;
}

/* The pool of req's configuration, its slot pointed at it (draining the
 * slot's previous pool when nothing else uses it). NULL: no pool. */
static cfg_pool *pool_for(sandbox_pool *p, const sm_run_request *req, const char *hash) {
  char pkey[65], skey[65];
  key_of(pkey, hash, project_of(req), NULL);
  key_of(skey, project_of(req), req->agent, req->tool);
  double now = mono_ms();
  slot *sl = NULL, *lru = &p->slots[0];
  for (int s = 0; s < MAX_SLOTS; s++) {
    if (p->slots[s].key[0] && strcmp(p->slots[s].key, skey) == 0) {
      sl = &p->slots[s];
      break;
    }
    if (p->slots[s].used < lru->used) lru = &p->slots[s];
  }
  if (sl && sl->pool && strcmp(sl->pool->key, pkey) == 0) {
    sl->used = now;
    sl->pool->last_use = now;
    return sl->pool;
  }
  if (sl == NULL) {
    sl = lru; /* an empty slot has used == 0, the oldest of all */
    if (sl->key[0] && sl->pool && --sl->pool->refs == 0)
      drop_pool(p, pool_index(p, sl->pool), "its last caller has not called for long");
    memset(sl, 0, sizeof *sl);
    snprintf(sl->key, sizeof sl->key, "%s", skey);
  } else if (sl->pool) {
    /* The configuration of this caller changed. */
    cfg_pool *old = sl->pool;
    sl->pool = NULL;
    if (--old->refs == 0) drop_pool(p, pool_index(p, old), "its configuration changed");
  }
  cfg_pool *cp = find_pool(p, pkey);
  if (cp == NULL) cp = new_pool(p, pkey, req, hash);
  sl->used = now;
  if (cp) {
    sl->pool = cp;
    cp->refs++;
    cp->last_use = now;
  }
  return cp;
}

/* cp has fewer containers ready or being made than its calls want. */
static int pool_short(const sandbox_pool *p, const cfg_pool *cp, double now) {
  return !p->stopping && !cp->dead && p->size > 0 && now >= cp->retry_at &&
         cp->n_ready + cp->creating < target(p, cp, now) + cp->waiting;
}

/* ...and its refill may start now. It waits for a pause between calls:
 * creating a container keeps the engine busy, and on two cores that slows
 * the calls running and the next ones of a burst. Not when calls need
 * containers: the pool is empty, calls wait, or it is down to a quarter
 * of what it wants. */
static int pool_wants(const sandbox_pool *p, const cfg_pool *cp, double now) {
  if (!pool_short(p, cp, now)) return 0;
  return cp->n_ready == 0 || cp->waiting > 0 || cp->n_ready * 4 <= target(p, cp, now) ||
         calls_quiet(p, now);
}

/* ---- the background threads ---- */

static void remove_one(sandbox_pool *p, sm_engine *e, removal *r) {
  sm_error err = SM_ERROR_INIT;
  int rc = e ? p->ctx->backend->discard(p->ctx, e, r->name, r->volume, r->relay, &err)
             : SM_EUNREACHABLE;
  if (rc != 0)
    sm_log(SM_LOG_WARN, "removing %s in the background: %s (a reap will remove it)", r->name,
           e ? err.message : "no engine client");
  else
    sm_log(SM_LOG_DEBUG, "removed %s in the background", r->name);
  /* Removed: its busy lock file goes with it. */
  if (rc == 0) sm_state_unlock_remove(r->busy);
  else sm_state_unlock(r->busy);
  pthread_mutex_lock(&p->mu);
  p->removed += rc == 0;
  p->rm_running--;
  pthread_cond_broadcast(&p->cv_done);
  pthread_cond_broadcast(&p->cv_work); /* a session may have waited for this */
  pthread_mutex_unlock(&p->mu);
  free(r);
}

static void create_one(sandbox_pool *p, sm_engine *e, cfg_pool *cp) {
  /* cp stays allocated while cp->creating > 0 (see drop_pool); what it
   * holds may change meanwhile, so the request gets copies. */
  static const char *const no_argv[] = {"true"};
  unsigned long gen = cp->generation;
  char project[SM_NAME_MAX];
  snprintf(project, sizeof project, "%s", cp->project);
  sm_run_request *req = malloc(sizeof *req);
  if (req) {
    sm_run_request_init(req);
    req->settings = *cp->settings;
    req->settings.mode = SM_MODE_PER_TOOL;
    req->project = project;
    req->argv = no_argv;
    req->argc = 1;
  }
  pthread_mutex_unlock(&p->mu);

  double t0 = mono_ms();
  sandbox_pool_item item;
  memset(&item, 0, sizeof item);
  sm_error err = SM_ERROR_INIT;
  int rc = req == NULL ? sm_error_set(&err, SM_ENOMEM, NULL)
           : e == NULL ? sm_error_set(&err, SM_EUNREACHABLE, "no engine client")
                       : p->ctx->backend->prewarm(p->ctx, e, req, &item, &err);
  free(req);

  pthread_mutex_lock(&p->mu);
  cp->creating--;
  if (rc != 0) {
    p->failed++;
    if (!cp->dead) {
      cp->backoff_ms = cp->backoff_ms < BACKOFF_MIN_MS ? BACKOFF_MIN_MS : cp->backoff_ms * 2;
      if (cp->backoff_ms > BACKOFF_MAX_MS) cp->backoff_ms = BACKOFF_MAX_MS;
      cp->retry_at = mono_ms() + cp->backoff_ms;
    }
    sm_log(SM_LOG_WARN, "pool: cannot prepare a container (next try in %.0fs): %s",
           cp->backoff_ms / 1000.0, err.message);
  } else {
    p->created++;
    sandbox_pool_demand_made(&cp->demand, mono_ms() - t0);
    /* Waiting calls take what is made for them, beyond the target. */
    if (!cp->dead && cp->generation == gen && !p->stopping && cp->n_ready < SM_POOL_MAX_SIZE &&
        cp->n_ready < target(p, cp, mono_ms()) + cp->waiting) {
      cp->ready[cp->n_ready++] = item;
      cp->backoff_ms = 0;
      /* Its agent session is opened next, as a job of its own: the
       * container counts as ready at once (a call taking it before the
       * session is there uses the engine's exec), so a burst of calls
       * does not wait for sessions to be made. */
      /* (On a swarm the call opens it on the node.) */
      if (sandbox_agents_enabled(p->ctx->agents) && !p->ctx->backend->sessions_at_once) {
        char user[32];
        snprintf(user, sizeof user, "%d:%d", item.uid, item.gid);
        queue_prep(p, item.id, NULL, user);
      }
      sm_log(SM_LOG_DEBUG, "pool: %s ready (%u/%u for %.12s)", item.name, cp->n_ready,
             target(p, cp, mono_ms()), cp->hash);
    } else {
      removal *r = malloc(sizeof *r);
      if (r) queue_removal(p, item.name, item.volume, NULL, sandbox_allowlist(cp->settings), r);
      else sm_log(SM_LOG_WARN, "pool: out of memory: %s is left for a reap", item.name);
    }
  }
  free_if_unheld(p, cp);
  pthread_cond_broadcast(&p->cv_done);
  pthread_cond_broadcast(&p->cv_work);
}

/* Checks the image of each pool now and then: a rebuilt image (same
 * reference, new id) drains the containers made from the old one. Called
 * without the lock. */
static void check_images(sandbox_pool *p, sm_engine *e) {
  char image[SM_NAME_MAX], key[65];
  for (int i = 0; i < MAX_POOLS; i++) {
    pthread_mutex_lock(&p->mu);
    cfg_pool *cp = p->pools[i];
    double now = mono_ms();
    if (cp == NULL || cp->dead || now - cp->image_checked < IMAGE_CHECK_MS) {
      pthread_mutex_unlock(&p->mu);
      continue;
    }
    cp->image_checked = now;
    snprintf(image, sizeof image, "%s", cp->settings->image);
    snprintf(key, sizeof key, "%s", cp->key);
    pthread_mutex_unlock(&p->mu);

    json_object *img = NULL, *id = NULL;
    sm_error err = SM_ERROR_INIT;
    char id_now[SM_ENGINE_ID_MAX] = "";
    if (sm_engine_image_inspect(e, image, &img, &err) == 0 &&
        json_object_object_get_ex(img, "Id", &id))
      snprintf(id_now, sizeof id_now, "%s", json_object_get_string(id));
    json_object_put(img);
    if (id_now[0] == '\0') continue;

    pthread_mutex_lock(&p->mu);
    cp = find_pool(p, key);
    if (cp && cp->image_id[0] && strcmp(cp->image_id, id_now) != 0) {
      sm_log(SM_LOG_INFO, "pool: image %s was rebuilt: replacing its ready containers", image);
      trim_pool(p, cp, 0);
      cp->generation++;
    }
    if (cp) snprintf(cp->image_id, sizeof cp->image_id, "%s", id_now);
    pthread_mutex_unlock(&p->mu);
  }
}

/* Waits on cv (hold p->mu) for at most ms. */
static void wait_until(sandbox_pool *p, pthread_cond_t *cv, double ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long long ns = (long long)ts.tv_nsec + (long long)(ms * 1e6);
  ts.tv_sec += (time_t)(ns / 1000000000LL);
  ts.tv_nsec = (long)(ns % 1000000000LL);
  pthread_cond_timedwait(cv, &p->mu, &ts);
}

/* *at_ms = t when t is later than now and sooner than *at_ms: a time
 * that has passed is no reason to wake (a broadcast will come). */
static void sooner(double *at_ms, double t, double now) {
  if (t > now && t < *at_ms) *at_ms = t;
}

typedef struct worker_arg {
  sandbox_pool *pool;
  int prefer_removal;
} worker_arg;

/* Opens ap's session. A keyed sandbox is held as a call holds it (its busy
 * lock, shared) and skipped when it is at rest or someone holds it alone:
 * an exec that starts while the engine freezes the container never ends
 * (runc waits on the frozen cgroup) and wedges the engine's hold on that
 * container, so no session is opened under a pause. */
static void prepare_one(sandbox_pool *p, sm_engine *e, const agent_prep *ap) {
  sm_state_lock *busy = NULL;
  if (ap->name[0]) {
    sm_error err = SM_ERROR_INIT;
    if (sm_state_busy_try(p->ctx->state_dir, ap->name, &busy, &err) != 0) return;
    if (sandbox_rest_resting(p->ctx->state_dir, ap->name)) {
      sm_state_unlock(busy);
      return;
    }
  }
  sandbox_agent_prepare(p->ctx->agents, e, ap->id, ap->user);
  sm_state_unlock(busy);
}

static void *worker_main(void *arg) {
  worker_arg wa = *(worker_arg *)arg;
  free(arg);
  sandbox_pool *p = wa.pool;
  sm_log_set_request_id(wa.prefer_removal ? "pool-rm" : "pool");
  /* Named for top -H, strace and the benchmark's request counts. */
  pthread_setname_np(pthread_self(), wa.prefer_removal ? "sandman-pool-rm" : "sandman-pool");
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  if (p->ctx->engine(p->ctx->runner, &e, &err) != 0) {
    sm_log(SM_LOG_WARN, "pool: no engine client: %s", err.message);
    e = NULL;
  }
  double last_image_check = mono_ms();
  unsigned width = e ? p->ctx->backend->width(p->ctx, e) : 1;
  pthread_mutex_lock(&p->mu);
  p->width = width;
  for (;;) {
    double now = mono_ms();
    cfg_pool *want = NULL;
    double next_retry = now + IDLE_WAIT_MS;
    int may_create = creating_total(p) < p->parallel;
    for (int i = 0; i < MAX_POOLS; i++) {
      cfg_pool *cp = p->pools[i];
      if (cp == NULL) continue;
      if (may_create && pool_wants(p, cp, now)) {
        if (want == NULL || cp->n_ready + cp->creating < want->n_ready + want->creating) want = cp;
      } else if (!p->stopping && p->size > 0 && cp->retry_at > now && cp->retry_at < next_retry) {
        next_retry = cp->retry_at;
      } else if (pool_short(p, cp, now)) {
        sooner(&next_retry, p->last_call + QUIET_MS, now); /* the pause it waits for */
      }
    }
    /* Removals come last: after the refills and the sessions the next
     * calls need (a burst's containers are ready sooner), unless they pile
     * up or have waited long. */
    int rm_urgent = p->rm_head != NULL && (p->rm_queued >= RM_BACKLOG || p->stopping ||
                                           now - p->rm_head->queued_at >= RM_MAX_WAIT_MS);
    int refilling = want != NULL || creating_total(p) > 0 || p->prep_head || p->preps_running;
    int can_remove = p->rm_head != NULL && (rm_urgent || (calls_quiet(p, now) && !refilling));
    if (p->rm_head && !can_remove) {
      sooner(&next_retry, p->last_call + QUIET_MS, now);
      sooner(&next_retry, p->rm_head->queued_at + RM_MAX_WAIT_MS, now);
    }
    if (can_remove && (wa.prefer_removal || want == NULL)) {
      removal *r = p->rm_head;
      p->rm_head = r->next;
      if (p->rm_head == NULL) p->rm_tail = NULL;
      p->rm_queued--;
      p->rm_running++;
      pthread_mutex_unlock(&p->mu);
      remove_one(p, e, r);
      pthread_mutex_lock(&p->mu);
      continue;
    }
    if (want) {
      want->creating++;
      create_one(p, e, want); /* unlocks while it works */
      continue;
    }
    /* Sessions wait for a quiet moment: opening one is two execs, and on
     * two CPUs it would slow the creations and removals of a burst of
     * calls (whose containers then go without: a call taking a container
     * drops its queued session), and a call running in a pool container. */
    int engine_busy = p->rm_running > 0 || creating_total(p) > 0 || !calls_quiet(p, now);
    if (p->prep_head && !p->stopping && e && !engine_busy) {
      agent_prep *ap = p->prep_head;
      p->prep_head = ap->next;
      p->n_preps--;
      p->preps_running++;
      pthread_mutex_unlock(&p->mu);
      prepare_one(p, e, ap);
      free(ap);
      pthread_mutex_lock(&p->mu);
      p->preps_running--;
      pthread_cond_broadcast(&p->cv_done);
      pthread_cond_broadcast(&p->cv_work); /* removals may have waited for it */
      continue;
    }
    if (p->stopping) break;
    /* The image check waits for no call to be running, like sessions. */
    if (e && !wa.prefer_removal && now - last_image_check >= IMAGE_CHECK_MS &&
        calls_quiet(p, now)) {
      last_image_check = now;
      pthread_mutex_unlock(&p->mu);
      check_images(p, e);
      width = p->ctx->backend->width(p->ctx, e);
      pthread_mutex_lock(&p->mu);
      p->width = width;
      continue;
    }
    if (p->prep_head && !p->stopping && e) sooner(&next_retry, p->last_call + QUIET_MS, now);
    /* Otherwise what it waits for (a call's end, a creation or removal
     * done) broadcasts cv_work. */
    double wait_ms = next_retry - now;
    wait_until(p, &p->cv_work, wait_ms < 1 ? 1 : wait_ms);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* Starts the threads on first need, and more when more refills may run at
 * once (hold p->mu): one that prefers removals, one per refill. */
static void ensure_threads(sandbox_pool *p) {
  if (p->stopping) return;
  while (p->n_threads < 1 + (int)p->parallel && p->n_threads < WORKERS_MAX) {
    worker_arg *wa = malloc(sizeof *wa);
    if (wa == NULL) break;
    wa->pool = p;
    wa->prefer_removal = p->n_threads == 1;
    if (common_thread_start(&p->threads[p->n_threads], NULL, worker_main, wa) != 0) {
      free(wa);
      break;
    }
    p->n_threads++;
  }
  if (p->n_threads == 0) sm_log(SM_LOG_WARN, "pool: cannot start its threads");
}

/* ---- the pool's life ---- */

sandbox_pool *sandbox_pool_new(const sandbox_ctx *ctx) {
  sandbox_pool *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->ctx = ctx;
  p->max_size = SM_POOL_DEFAULT_MAX;
  p->parallel = SM_POOL_DEFAULT_PARALLEL;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv_work, NULL);
  pthread_cond_init(&p->cv_done, NULL);
  return p;
}

static int all_settled(const sandbox_pool *p, int only_removals) {
  if (p->rm_head || p->rm_running) return 0;
  if (!only_removals && (p->prep_head || p->preps_running)) return 0;
  double now = mono_ms();
  for (int i = 0; i < MAX_POOLS; i++) {
    const cfg_pool *cp = p->pools[i];
    if (cp == NULL) continue;
    if (cp->creating) return 0;
    if (!only_removals && pool_short(p, cp, now) && p->n_threads > 0) return 0;
  }
  return 1;
}

static void drain_all(sandbox_pool *p) {
  for (int i = 0; i < MAX_POOLS; i++)
    if (p->pools[i]) drop_pool(p, i, "the pool is being emptied");
  for (int s = 0; s < MAX_SLOTS; s++) memset(&p->slots[s], 0, sizeof p->slots[s]);
  pthread_cond_broadcast(&p->cv_work);
}

/* Waits (hold p->mu) until the work matching only_removals is done, or
 * deadline_ms (monotonic; < 0: none) passes. 0 or SM_ETIMEOUT. */
static int wait_settled(sandbox_pool *p, int only_removals, double deadline_ms, sm_error *err) {
  while (!all_settled(p, only_removals)) {
    if (p->n_threads == 0) {
      /* No thread to do the work (could not start): nothing will change. */
      return sm_error_set(err, SM_EBUSY, "the pool's threads could not start");
    }
    double now = mono_ms();
    if (deadline_ms >= 0 && now >= deadline_ms)
      return sm_error_set(err, SM_ETIMEOUT, "background work still running at the deadline");
    wait_until(p, &p->cv_done,
               deadline_ms >= 0 && deadline_ms - now < 200 ? deadline_ms - now : 200);
  }
  return 0;
}

void sandbox_pool_free(sandbox_pool *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->mu);
  p->size = 0;
  /* Sessions nobody will use: not worth waiting for. */
  while (p->prep_head) {
    agent_prep *ap = p->prep_head;
    p->prep_head = ap->next;
    free(ap);
  }
  p->n_preps = 0;
  drain_all(p);
  if (p->rm_head && p->n_threads == 0) ensure_threads(p);
  /* Nothing may leak: wait for every removal, however long the engine takes
   * (each request is bounded by the engine client's own timeouts). */
  wait_settled(p, 1, -1, NULL);
  p->stopping = 1;
  pthread_cond_broadcast(&p->cv_work);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
  /* Removals that no thread could do (threads never started): here. */
  removal *r = p->rm_head;
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  if (r && p->ctx->engine(p->ctx->runner, &e, &err) != 0) e = NULL;
  while (r) {
    removal *next = r->next;
    p->rm_running++;
    remove_one(p, e, r);
    r = next;
  }
  for (int i = 0; i < MAX_POOLS; i++) free_pool(p->pools[i]);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv_work);
  pthread_cond_destroy(&p->cv_done);
  free(p);
}

/* ---- what sm_run uses ---- */

/* Takes cp's oldest ready container into out (hold p->mu; n_ready > 0). */
static void take_ready(sandbox_pool *p, cfg_pool *cp, sandbox_pool_item *out) {
  *out = cp->ready[0];
  memmove(&cp->ready[0], &cp->ready[1], (cp->n_ready - 1) * sizeof cp->ready[0]);
  cp->n_ready--;
  cp->in_flight++;
  /* A session not opened yet will not be: the call uses an engine exec. */
  for (agent_prep **pp = &p->prep_head; *pp; pp = &(*pp)->next) {
    if (strcmp((*pp)->id, out->id) == 0) {
      agent_prep *gone = *pp;
      *pp = gone->next;
      p->n_preps--;
      free(gone);
      break;
    }
  }
  snprintf(out->pool_key, sizeof out->pool_key, "%s", cp->key);
  p->taken++;
}

/* The pool is empty, but a container of cp is being made that no other
 * waiting call has claimed, or one can start now: waits for it (hold
 * p->mu), up to about twice a container's making time. Sooner than making
 * another beside it, which would compete with it for the engine. Not while
 * its creations fail (backing off): the call then makes its own and
 * reports the real error. 1 when one is ready. */
static int wait_for_making(sandbox_pool *p, cfg_pool *cp) {
  double now = mono_ms();
  int coming = cp->creating > cp->waiting || creating_total(p) < p->parallel;
  /* A pool that has made nothing yet is empty because it is new: its
   * first call makes its own (it would wait as long, for a container not
   * yet measured). */
  if (!coming || p->n_threads == 0 || now < cp->retry_at || cp->demand.made == 0) return 0;
  double budget = cp->demand.make_ms * 2;
  if (budget < MISS_WAIT_MIN_MS) budget = MISS_WAIT_MIN_MS;
  if (budget > MISS_WAIT_MAX_MS) budget = MISS_WAIT_MAX_MS;
  double deadline = now + budget;
  cp->waiting++;
  pthread_cond_broadcast(&p->cv_work); /* the refill counts waiting calls */
  while (cp->n_ready == 0 && !cp->dead && !p->stopping && p->size > 0) {
    now = mono_ms();
    if (now >= deadline || (cp->creating == 0 && now < cp->retry_at)) break;
    wait_until(p, &p->cv_done, deadline - now);
  }
  cp->waiting--;
  return !cp->dead && !p->stopping && cp->n_ready > 0;
}

int sandbox_pool_take(sandbox_pool *p, const sm_run_request *req, const char *hash,
                      sandbox_pool_item *out) {
  if (p == NULL) return 0;
  pthread_mutex_lock(&p->mu);
  if (p->size == 0 || p->stopping) {
    pthread_mutex_unlock(&p->mu);
    return 0;
  }
  int got = 0, waited = 0;
  double t0 = mono_ms();
  p->last_call = t0;
  cfg_pool *cp = pool_for(p, req, hash);
  if (cp)
    sandbox_pool_demand_call(&cp->demand, t0, cp->n_ready == 0, p->size,
                             cp->in_flight + cp->waiting > 0);
  ensure_threads(p);
  if (cp && cp->n_ready == 0) {
    waited = 1;
    if (wait_for_making(p, cp)) got = 1;
    if (cp->dead) {
      free_if_unheld(p, cp);
      cp = NULL;
      got = 0;
    }
  } else if (cp) {
    got = 1;
  }
  if (got) take_ready(p, cp, out);
  if (!got || waited) p->missed++; /* found it empty: waited, or makes its own */
  /* Only when there is work for them: a call that took a container leaves
   * its refill until it ends (pool_wants), and wakes nobody meanwhile. */
  if (cp && pool_wants(p, cp, mono_ms())) pthread_cond_broadcast(&p->cv_work);
  pthread_mutex_unlock(&p->mu);
  if (got && waited)
    sm_log(SM_LOG_DEBUG, "pool: call takes %s after %.0f ms waiting for it to be made", out->name,
           mono_ms() - t0);
  else if (got)
    sm_log(SM_LOG_DEBUG, "pool: call takes %s", out->name);
  else
    sm_log(SM_LOG_DEBUG, "pool: empty for %.12s: the call creates its container", hash);
  return got;
}

void sandbox_pool_call_done(sandbox_pool *p, const char *pool_key) {
  if (p == NULL || pool_key == NULL || pool_key[0] == '\0') return;
  pthread_mutex_lock(&p->mu);
  cfg_pool *cp = find_pool(p, pool_key);
  if (cp && cp->in_flight > 0) cp->in_flight--;
  p->last_call = mono_ms();
  if (cp) sandbox_pool_demand_done(&cp->demand, p->last_call);
  pthread_cond_broadcast(&p->cv_work);
  pthread_mutex_unlock(&p->mu);
}

void sandbox_pool_forget(sandbox_pool *p, const sm_run_request *req, const char *hash) {
  if (p == NULL) return;
  char pkey[65];
  key_of(pkey, hash, project_of(req), NULL);
  pthread_mutex_lock(&p->mu);
  cfg_pool *cp = find_pool(p, pkey);
  if (cp && cp->n_ready > 0) {
    sm_log(SM_LOG_INFO, "pool: a ready container of %.12s was gone: replacing the others too",
           hash);
    trim_pool(p, cp, 0);
    cp->generation++;
    ensure_threads(p);
    pthread_cond_broadcast(&p->cv_work);
  }
  pthread_mutex_unlock(&p->mu);
}

void sandbox_pool_prepare_agent_later(sandbox_pool *p, const char *container_id, const char *name,
                                      const char *user) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->mu);
  if (p->bg_remove) queue_prep(p, container_id, name, user);
  pthread_mutex_unlock(&p->mu);
}

int sandbox_pool_remove_later(sandbox_pool *p, const char *name, const char *volume,
                              sm_state_lock *busy, int relay) {
  if (p == NULL) return -1;
  cleanup_free removal *r = malloc(sizeof *r);
  if (r == NULL) return -1;
  pthread_mutex_lock(&p->mu);
  if (p->stopping || (!p->bg_remove && busy != NULL)) {
    pthread_mutex_unlock(&p->mu);
    return -1;
  }
  ensure_threads(p);
  if (p->n_threads == 0) {
    pthread_mutex_unlock(&p->mu);
    return -1;
  }
  queue_removal(p, name, volume, busy, relay, steal_pointer(&r));
  pthread_cond_broadcast(&p->cv_work);
  pthread_mutex_unlock(&p->mu);
  return 0;
}

/* ---- what the runner's public functions do (sandbox.h, runner.c) ---- */

int sandbox_pool_set_size(sandbox_pool *p, unsigned size, sm_error *err) {
  if (size > SM_POOL_MAX_SIZE)
    return sm_error_set(err, SM_EINVAL, "pool size %u is more than the %d allowed", size,
                        SM_POOL_MAX_SIZE);
  if (p == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  pthread_mutex_lock(&p->mu);
  p->size = size;
  if (size == 0) {
    drain_all(p);
  } else {
    for (int i = 0; i < MAX_POOLS; i++)
      if (p->pools[i]) trim_pool(p, p->pools[i], target(p, p->pools[i], mono_ms()));
  }
  if (p->rm_head || size > 0) ensure_threads(p);
  pthread_cond_broadcast(&p->cv_work);
  pthread_mutex_unlock(&p->mu);
  sm_log(SM_LOG_DEBUG, "pool: %u ready container(s) per configuration", size);
  return 0;
}

int sandbox_pool_set_limits(sandbox_pool *p, unsigned max_size, unsigned parallel, sm_error *err) {
  if (max_size > SM_POOL_MAX_SIZE)
    return sm_error_set(err, SM_EINVAL, "pool maximum %u is more than the %d allowed", max_size,
                        SM_POOL_MAX_SIZE);
  if (parallel < 1 || parallel > SM_POOL_MAX_PARALLEL)
    return sm_error_set(err, SM_EINVAL, "refills at once must be 1 to %d, not %u",
                        SM_POOL_MAX_PARALLEL, parallel);
  if (p == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  pthread_mutex_lock(&p->mu);
  p->max_size = max_size;
  p->parallel = parallel;
  if (p->n_threads > 0) ensure_threads(p);
  pthread_cond_broadcast(&p->cv_work);
  pthread_mutex_unlock(&p->mu);
  return 0;
}

void sandbox_pool_set_background_removal(sandbox_pool *p, int on) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->mu);
  p->bg_remove = on != 0;
  pthread_mutex_unlock(&p->mu);
}

unsigned sandbox_pool_size(sandbox_pool *p) {
  if (p == NULL) return 0;
  pthread_mutex_lock(&p->mu);
  unsigned n = p->size;
  pthread_mutex_unlock(&p->mu);
  return n;
}

int sandbox_pool_prepare(sandbox_pool *p, const sm_run_request *req, sm_error *err) {
  if (req == NULL) return sm_error_set(err, SM_EINVAL, "no request");
  if (req->settings.mode != SM_MODE_PER_TOOL)
    return sm_error_set(err, SM_EINVAL, "the warm pool is for mode per_tool, not %s",
                        sm_mode_name(req->settings.mode));
  if (req->settings.image[0] == '\0') return sm_error_set(err, SM_EINVAL, "no image given");
  if (p == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  char hash[65];
  sm_sandbox_settings_hash(&req->settings, hash);
  pthread_mutex_lock(&p->mu);
  if (p->size > 0 && !p->stopping) {
    if (pool_for(p, req, hash) == NULL) {
      pthread_mutex_unlock(&p->mu);
      return sm_error_set(err, SM_ENOMEM, "no room for another pool");
    }
    ensure_threads(p);
    pthread_cond_broadcast(&p->cv_work);
  }
  pthread_mutex_unlock(&p->mu);
  return 0;
}

void sandbox_pool_drain(sandbox_pool *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->mu);
  p->size = 0;
  drain_all(p);
  if (p->rm_head) ensure_threads(p);
  wait_settled(p, 1, -1, NULL);
  pthread_mutex_unlock(&p->mu);
}

int sandbox_pool_settle(sandbox_pool *p, double timeout_s, sm_error *err) {
  if (p == NULL) return 0;
  pthread_mutex_lock(&p->mu);
  int rc = wait_settled(p, 0, timeout_s >= 0 ? mono_ms() + timeout_s * 1000.0 : -1, err);
  pthread_mutex_unlock(&p->mu);
  if (rc == SM_ETIMEOUT)
    return sm_error_set(err, rc, "background work still running after %gs", timeout_s);
  return rc;
}

void sandbox_pool_stats_get(sandbox_pool *p, sm_pool_stats *out) {
  memset(out, 0, sizeof *out);
  if (p == NULL) return;
  pthread_mutex_lock(&p->mu);
  out->size = p->size;
  out->max_size = p->max_size < p->size ? p->size : p->max_size;
  out->parallel = p->parallel;
  for (int i = 0; i < MAX_POOLS; i++) {
    if (p->pools[i] == NULL) continue;
    out->configurations += !p->pools[i]->dead;
    if (!p->pools[i]->dead) out->wanted += target(p, p->pools[i], mono_ms());
    out->ready += p->pools[i]->n_ready;
    out->creating += p->pools[i]->creating;
  }
  out->removals_pending = p->rm_queued + p->rm_running;
  out->agents_preparing = p->n_preps + p->preps_running;
  out->taken = p->taken;
  out->missed = p->missed;
  out->created = p->created;
  out->removed = p->removed;
  out->failed = p->failed;
  pthread_mutex_unlock(&p->mu);
}
