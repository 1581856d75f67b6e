/* The in-sandbox agent, host side: sessions with sandman-agent (src/agent)
 * and the runner's cache of idle ones.
 *
 * An engine exec costs a create, a start and an inspect (three requests, a
 * runc exec: ~45 ms here). A runner that makes many calls in the same
 * sandbox instead keeps one long-lived exec of sandman-agent per concurrent
 * call and sends each call as a frame over its hijacked stream; the agent
 * forks the call's wrapper and streams its output back (a few ms).
 *
 * The agent binary is built with sandman and embedded in the library
 * (sandbox/agent_blob.h), so it works with any image that has /bin/sh and with a
 * remote engine. It is installed once per container into /.sandman, a
 * tmpfs owned by root (the install exec runs as root, with no
 * capabilities), so the sandbox's user cannot replace it; it runs as the
 * sandbox's user, like every call. What it sends back is untrusted: frames
 * are parsed against hard caps and a session that breaks the protocol is
 * closed.
 *
 * When sessions are used: a keyed sandbox (per_run, per_worker) from its
 * second call in this runner (a one-shot CLI call never pays for the
 * install), and per_tool containers of the warm pool, whose session is
 * opened in the background when the pool makes them. Anything that does
 * not work (an old container without /.sandman, an image without /bin/sh,
 * gVisor refusing something) marks the container, and its calls go
 * through the engine's exec as before. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "sandbox/agent_blob.h"
#include "agent/frame.h"
#include "sandbox/agent.h"
#include "sandbox/helper.h"
#include "sandbox/spec.h"
#include "sandbox/tty.h"

#define MAX_IDLE 64              /* idle sessions kept per runner */
#define MAX_RESTING 256          /* frozen sandboxes' sessions kept (one each), at most */
#define MAX_IDLE_PER_CONTAINER 8
#define MAX_UNUSABLE 256         /* containers remembered as agent-less */
#define INSTALL_TIMEOUT_S 30.0
#define AGENT_DIR "/.sandman"
#define DIAG_CAP 2048            /* the agent's own stderr, kept for a log line */
#define CANCEL_POLL_MS 100
#define SETTLE_MS 10000          /* after a call's end or kill: the agent's report, the frame's rest */

struct sandbox_agent_session {
  sm_exec_stream *stream;
  char container_id[SM_ENGINE_ID_MAX];
  agent_frame_reader reader;
  uint32_t call_id;
  int hello;
  int broken;        /* protocol error or end: never reuse */
  /* the call in progress: where its output goes */
  sm_output_fn out;
  void *out_ud;
  int exited, exit_code;
  int failed, fail_errno;
  int heard;         /* a frame of the call in progress arrived */
  char fail_msg[256];
  char diag[DIAG_CAP];
  size_t diag_len;
  sandbox_agent_session *next;
};

struct sandbox_agents {
  pthread_mutex_t mu;
  int enabled;
  sandbox_agent_session *idle;
  unsigned n_idle;
  /* One parked session per frozen sandbox, apart from the idle ones (whose
   * cap busy sandboxes would otherwise push them out of): its first call
   * after the thaw takes it instead of an engine exec. */
  sandbox_agent_session *resting;
  unsigned n_resting, max_resting;
  char unusable[MAX_UNUSABLE][SM_ENGINE_ID_MAX];
  unsigned n_unusable, next_unusable;
  char installed[MAX_UNUSABLE][SM_ENGINE_ID_MAX];
  unsigned next_installed;
  /* what the sessions did, for tests and metrics */
  unsigned long opened, calls, fallbacks;
};

sandbox_agents *sandbox_agents_new(void) {
  sandbox_agents *a = calloc(1, sizeof *a);
  if (a == NULL) return NULL;
  pthread_mutex_init(&a->mu, NULL);
  a->enabled = 1;
  /* Each is a descriptor: at most a quarter of ours. */
  struct rlimit rl;
  rlim_t fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
  a->max_resting = fds == RLIM_INFINITY || fds / 4 > MAX_RESTING ? MAX_RESTING : (unsigned)(fds / 4);
  return a;
}

void sandbox_agent_close(sandbox_agent_session *s) {
  if (s == NULL) return;
  sm_exec_stream_close(s->stream);
  agent_frame_reader_dispose(&s->reader);
  free(s);
}

/* Closes every session of a list linked by next (taken off the idle list
 * under the lock, closed outside it). */
static void close_all(sandbox_agent_session *s) {
  while (s) {
    sandbox_agent_session *next = s->next;
    sandbox_agent_close(s);
    s = next;
  }
}

void sandbox_agents_free(sandbox_agents *a) {
  if (a == NULL) return;
  close_all(a->idle);
  close_all(a->resting);
  pthread_mutex_destroy(&a->mu);
  free(a);
}

void sandbox_agents_set_enabled(sandbox_agents *a, int on) {
  if (a == NULL) return;
  pthread_mutex_lock(&a->mu);
  a->enabled = on;
  sandbox_agent_session *s = on ? NULL : a->idle, *r = on ? NULL : a->resting;
  if (!on) {
    a->idle = a->resting = NULL;
    a->n_idle = a->n_resting = 0;
  }
  pthread_mutex_unlock(&a->mu);
  close_all(s);
  close_all(r);
}

int sandbox_agents_enabled(sandbox_agents *a) {
  if (a == NULL) return 0;
  pthread_mutex_lock(&a->mu);
  int on = a->enabled;
  pthread_mutex_unlock(&a->mu);
  return on;
}

void sandbox_agents_stats(sandbox_agents *a, unsigned long *opened, unsigned long *calls,
                          unsigned long *fallbacks) {
  *opened = *calls = *fallbacks = 0;
  if (a == NULL) return;
  pthread_mutex_lock(&a->mu);
  *opened = a->opened;
  *calls = a->calls;
  *fallbacks = a->fallbacks;
  pthread_mutex_unlock(&a->mu);
}

static int in_list(char (*list)[SM_ENGINE_ID_MAX], unsigned n, const char *cid) {
  for (unsigned i = 0; i < n; i++)
    if (strcmp(list[i], cid) == 0) return 1;
  return 0;
}

static void mark_unusable(sandbox_agents *a, const char *cid, const char *why) {
  sm_log(SM_LOG_DEBUG, "agent: not used in %.12s: %s; calls there use the engine's exec", cid,
         why);
  pthread_mutex_lock(&a->mu);
  if (!in_list(a->unusable, a->n_unusable, cid)) {
    snprintf(a->unusable[a->next_unusable], SM_ENGINE_ID_MAX, "%s", cid);
    a->next_unusable = (a->next_unusable + 1) % MAX_UNUSABLE;
    if (a->n_unusable < MAX_UNUSABLE) a->n_unusable++;
  }
  pthread_mutex_unlock(&a->mu);
}

/* Moves the sessions of container cid off list (*n of them) onto *out. */
static void unlink_of(sandbox_agent_session **list, unsigned *n, const char *cid,
                      sandbox_agent_session **out) {
  sandbox_agent_session **pp = list;
  while (*pp) {
    sandbox_agent_session *s = *pp;
    if (strcmp(s->container_id, cid) == 0) {
      *pp = s->next;
      (*n)--;
      s->next = *out;
      *out = s;
      continue;
    }
    pp = &s->next;
  }
}

void sandbox_agents_forget(sandbox_agents *a, const char *cid) {
  if (a == NULL || cid == NULL || *cid == '\0') return;
  sandbox_agent_session *drop = NULL;
  pthread_mutex_lock(&a->mu);
  for (unsigned i = 0; i < MAX_UNUSABLE; i++) {
    if (strcmp(a->installed[i], cid) == 0) a->installed[i][0] = '\0';
    if (strcmp(a->unusable[i], cid) == 0) a->unusable[i][0] = '\0';
  }
  unlink_of(&a->idle, &a->n_idle, cid, &drop);
  unlink_of(&a->resting, &a->n_resting, cid, &drop);
  pthread_mutex_unlock(&a->mu);
  close_all(drop);
}

void sandbox_agents_rest(sandbox_agents *a, const char *cid) {
  if (a == NULL || cid == NULL || *cid == '\0') return;
  sandbox_agent_session *found = NULL, *dead = NULL, *evicted = NULL;
  pthread_mutex_lock(&a->mu);
  unlink_of(&a->idle, &a->n_idle, cid, &found);
  unlink_of(&a->resting, &a->n_resting, cid, &found);
  /* Those of sandboxes removed since have ended by themselves. */
  sandbox_agent_session **pp = &a->resting;
  while (*pp) {
    sandbox_agent_session *s = *pp;
    if (!sm_exec_stream_quiet(s->stream)) {
      *pp = s->next;
      a->n_resting--;
      s->next = dead;
      dead = s;
      continue;
    }
    pp = &s->next;
  }
  /* One that still answers is enough for its next call; the others close. */
  sandbox_agent_session *extra = NULL;
  if (found && !sm_exec_stream_quiet(found->stream)) {
    sandbox_agent_session **q = &found->next;
    while (*q && !sm_exec_stream_quiet((*q)->stream)) q = &(*q)->next;
    if (*q) { /* a live one to the front */
      sandbox_agent_session *live = *q;
      *q = live->next;
      live->next = found;
      found = live;
    }
  }
  if (found) extra = found->next;
  if (found && a->max_resting > 0) {
    found->next = a->resting;
    a->resting = found;
    a->n_resting++;
    found = NULL;
    if (a->n_resting > a->max_resting) {
      /* Over the cap: the sandbox frozen longest ago (the tail) loses its session. */
      sandbox_agent_session **tail = &a->resting;
      while ((*tail)->next) tail = &(*tail)->next;
      evicted = *tail;
      *tail = NULL;
      a->n_resting--;
    }
  } else if (found) {
    found->next = NULL;
  }
  pthread_mutex_unlock(&a->mu);
  close_all(found);
  close_all(extra);
  close_all(dead);
  close_all(evicted);
}

/* ---- frames from the agent ---- */

static int on_frame(void *ud, int type, uint32_t call_id, const unsigned char *p, uint32_t len) {
  sandbox_agent_session *s = ud;
  if (type == SM_FRAME_HELLO) {
    if (s->hello || len != strlen(SM_AGENT_HELLO) || memcmp(p, SM_AGENT_HELLO, len) != 0)
      return -1;
    s->hello = 1;
    return 0;
  }
  /* Everything else belongs to the call in progress, after the hello. */
  if (!s->hello || s->out == NULL || call_id != s->call_id || s->exited || s->failed)
    return -1;
  s->heard = 1;
  switch (type) {
  case SM_FRAME_STDOUT:
  case SM_FRAME_STDERR: {
    int rc = s->out(s->out_ud, type == SM_FRAME_STDOUT ? 1 : 2, (const char *)p, len);
    return rc ? rc : 0;
  }
  case SM_FRAME_EXIT:
    if (len != 4) return -1;
    s->exit_code = (int)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
    if (s->exit_code < 0 || s->exit_code > 255) return -1;
    s->exited = 1;
    return 0;
  case SM_FRAME_FAIL:
    if (len < 4) return -1;
    s->fail_errno = (int)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
    snprintf(s->fail_msg, sizeof s->fail_msg, "%.*s", (int)(len - 4), (const char *)p + 4);
    s->failed = 1;
    return 0;
  default:
    return -1; /* a host -> agent type coming back */
  }
}

/* The exec's output: stdout carries frames, stderr the agent's own words. */
static int on_output(void *ud, int stream, const char *data, size_t len) {
  sandbox_agent_session *s = ud;
  if (stream == 2) {
    size_t room = sizeof s->diag - 1 - s->diag_len;
    if (len > room) len = room;
    memcpy(s->diag + s->diag_len, data, len);
    s->diag_len += len;
    s->diag[s->diag_len] = '\0';
    return 0;
  }
  int rc = agent_frame_reader_feed(&s->reader, (const unsigned char *)data, len);
  if (rc != 0) {
    /* -1 is the reader's own verdict; other codes come from the output
     * callback (a full buffer, say). Either way the stream is out of step. */
    s->broken = 1;
    return rc == -1 ? SM_EPROTOCOL : rc;
  }
  return 0;
}

/* ---- install and open ---- */

typedef struct blob_reader {
  size_t off;
} blob_reader;

static ssize_t read_blob(void *ud, char *buf, size_t len) {
  blob_reader *b = ud;
  size_t left = sm_agent_blob_len - b->off;
  if (len > left) len = left;
  memcpy(buf, sm_agent_blob + b->off, len);
  b->off += len;
  return (ssize_t)len;
}

static void agent_path(char *out, size_t len) {
  snprintf(out, len, AGENT_DIR "/agent-%.16s", sm_agent_blob_sha256);
}

void sandbox_agent_binary_path(char *out, size_t len) { agent_path(out, len); }

/* Writes the binary into the container's /.sandman as root (a tmpfs the
 * sandbox user cannot write), unless it is there already. checked: learn
 * the exit code (one more engine request, and a wait while the engine
 * still calls the exec running); a session opened right after needs no
 * check, its hello proves the binary is there. */
static int install(sm_engine *e, const char *cid, int checked, sm_error *err) {
  char path[128], script[512];
  agent_path(path, sizeof path);
  snprintf(script, sizeof script,
           "f=%s; [ -x \"$f\" ] && exit 0; umask 022; t=\"$f.$$\"; "
           "cat > \"$t\" && chmod 0555 \"$t\" && mv -f \"$t\" \"$f\"",
           path);
  const char *argv[] = {"/bin/sh", "-c", script};
  blob_reader br = {0};
  int code = 0;
  int rc = sandbox_exec_helper(e, cid, argv, 3, "0:0", read_blob, &br, INSTALL_TIMEOUT_S, NULL,
                               checked ? &code : NULL, err);
  if (rc) return rc;
  if (code != 0)
    return sm_error_set(err, SM_ESANDBOX, "installing the agent exited with %d (no %s?)", code,
                        AGENT_DIR);
  return 0;
}

static int open_session(sm_engine *e, const char *cid, const char *user,
                        sandbox_agent_session **out, sm_error *err) {
  *out = NULL;
  char path[128];
  agent_path(path, sizeof path);
  const char *argv[] = {path};
  json_object *cfg = sandbox_exec_config(argv, 1, user, 1);
  char id[SM_ENGINE_ID_MAX];
  int rc = sm_engine_exec_create(e, cid, cfg, id, err);
  json_object_put(cfg);
  if (rc) return rc;
  sandbox_agent_session *s = calloc(1, sizeof *s);
  if (s == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  snprintf(s->container_id, sizeof s->container_id, "%s", cid);
  agent_frame_reader_init(&s->reader, SM_FRAME_DATA_MAX, on_frame, s);
  rc = sm_engine_exec_open(e, id, on_output, s, &s->stream, err);
  /* Wait for the hello: it proves the agent runs (a missing binary ends
   * the stream with the runtime's message instead). */
  double deadline = sm_monotonic_ms() + INSTALL_TIMEOUT_S * 1000.0;
  while (rc == 0 && !s->hello && !s->broken) {
    int left = (int)(deadline - sm_monotonic_ms());
    if (left <= 0) {
      rc = sm_error_set(err, SM_ETIMEOUT, "the agent did not start in time");
      break;
    }
    rc = sm_exec_stream_pump(s->stream, NULL, 0, NULL, left, err);
    if (rc == 1)
      rc = sm_error_set(err, SM_ESANDBOX, "the agent ended at once%s%s",
                        s->diag_len ? ": " : "", s->diag);
  }
  if (rc == 0 && s->broken) rc = sm_error_set(err, SM_EPROTOCOL, "the agent's hello was wrong");
  if (rc) {
    sandbox_agent_close(s);
    return rc;
  }
  *out = s;
  return 0;
}

/* The first quiet session of container cid on list (*n of them), taken
 * off it; the others met before it go onto *stale. */
static sandbox_agent_session *take_from(sandbox_agent_session **list, unsigned *n, const char *cid,
                                        sandbox_agent_session **stale) {
  sandbox_agent_session **pp = list;
  while (*pp) {
    sandbox_agent_session *s = *pp;
    if (strcmp(s->container_id, cid) == 0) {
      *pp = s->next;
      (*n)--;
      s->next = NULL;
      /* Anything that arrived on an idle session (its end, above all:
       * the container is gone) makes it useless. */
      if (sm_exec_stream_quiet(s->stream)) return s;
      s->next = *stale;
      *stale = s;
      continue;
    }
    pp = &s->next;
  }
  return NULL;
}

int sandbox_agents_parked(sandbox_agents *a, const char *cid) {
  if (a == NULL) return 0;
  int found = 0;
  pthread_mutex_lock(&a->mu);
  for (sandbox_agent_session *s = a->resting; s && !found; s = s->next)
    found = strcmp(s->container_id, cid) == 0;
  for (sandbox_agent_session *s = a->idle; s && !found; s = s->next)
    found = strcmp(s->container_id, cid) == 0;
  pthread_mutex_unlock(&a->mu);
  return found;
}

static sandbox_agent_session *take_idle(sandbox_agents *a, const char *cid) {
  sandbox_agent_session *stale = NULL;
  pthread_mutex_lock(&a->mu);
  sandbox_agent_session *found = take_from(&a->idle, &a->n_idle, cid, &stale);
  if (found == NULL) found = take_from(&a->resting, &a->n_resting, cid, &stale);
  pthread_mutex_unlock(&a->mu);
  close_all(stale);
  return found;
}

static void note_installed(sandbox_agents *a, const char *cid) {
  pthread_mutex_lock(&a->mu);
  snprintf(a->installed[a->next_installed], SM_ENGINE_ID_MAX, "%s", cid);
  a->next_installed = (a->next_installed + 1) % MAX_UNUSABLE;
  pthread_mutex_unlock(&a->mu);
}

int sandbox_agent_install(sandbox_agents *a, sm_engine *e, const char *cid, sm_error *err) {
  if (sm_agent_blob_len == 0) return sm_error_set(err, SM_ESANDBOX, "no agent binary was built");
  if (a) {
    /* Installed by this runner already: no exec (the files API calls this
     * before each of its operations). */
    pthread_mutex_lock(&a->mu);
    int installed = in_list(a->installed, MAX_UNUSABLE, cid);
    pthread_mutex_unlock(&a->mu);
    if (installed) return 0;
  }
  int rc = install(e, cid, 1, err);
  if (rc == 0 && a) note_installed(a, cid);
  return rc;
}

int sandbox_agent_take(sandbox_agents *a, sm_engine *e, const char *cid, const char *user,
                       int open_new, sandbox_agent_session **out) {
  *out = NULL;
  if (a == NULL || sm_agent_blob_len == 0) return 0;
  pthread_mutex_lock(&a->mu);
  int usable = a->enabled && !in_list(a->unusable, a->n_unusable, cid);
  int installed = in_list(a->installed, MAX_UNUSABLE, cid);
  pthread_mutex_unlock(&a->mu);
  if (!usable) return 0;
  sandbox_agent_session *s = take_idle(a, cid);
  if (s == NULL && open_new) {
    sm_error err = SM_ERROR_INIT;
    int rc = 0;
    if (!installed && open_new == SM_AGENT_OPEN_INSTALLED) {
      /* The runtime's "no such file" ends the exec at once (SM_ESANDBOX). */
      rc = open_session(e, cid, user, &s, &err);
      if (rc == SM_ENOTFOUND || rc == SM_ECONFLICT) return rc;
      if (rc) sm_error_clear(&err);
    }
    if (s == NULL) {
      rc = installed ? 0 : install(e, cid, 0, &err);
      if (rc == SM_ENOTFOUND || rc == SM_ECONFLICT) return rc; /* the container is gone */
      if (rc == 0) rc = open_session(e, cid, user, &s, &err);
    }
    if (rc == 0 && !installed) note_installed(a, cid); /* the hello proved it */
    if (rc == SM_ENOTFOUND || rc == SM_ECONFLICT) return rc;
    if (rc) {
      mark_unusable(a, cid, err.message);
      s = NULL;
    } else {
      pthread_mutex_lock(&a->mu);
      a->opened++;
      pthread_mutex_unlock(&a->mu);
    }
  }
  *out = s;
  return 0;
}

void sandbox_agent_give_back(sandbox_agents *a, sandbox_agent_session *s) {
  if (s == NULL) return;
  if (a == NULL || s->broken || !agent_frame_reader_idle(&s->reader)) {
    sandbox_agent_close(s);
    return;
  }
  s->out = NULL;
  sandbox_agent_session *drop = NULL, *dead = NULL;
  pthread_mutex_lock(&a->mu);
  /* Sessions whose container went away (a drained pool, a reap) end by
   * themselves: drop them here rather than keep their sockets. */
  sandbox_agent_session **pp = &a->idle;
  while (*pp) {
    sandbox_agent_session *i = *pp;
    if (!sm_exec_stream_quiet(i->stream)) {
      *pp = i->next;
      a->n_idle--;
      i->next = dead;
      dead = i;
      continue;
    }
    pp = &i->next;
  }
  unsigned same = 0;
  for (sandbox_agent_session *i = a->idle; i; i = i->next)
    same += strcmp(i->container_id, s->container_id) == 0;
  if (!a->enabled || same >= MAX_IDLE_PER_CONTAINER) {
    drop = s;
  } else {
    s->next = a->idle;
    a->idle = s;
    a->n_idle++;
    /* Over the cap: the oldest (the list's tail) goes. */
    if (a->n_idle > MAX_IDLE) {
      sandbox_agent_session **tail = &a->idle;
      while ((*tail)->next) tail = &(*tail)->next;
      drop = *tail;
      *tail = NULL;
      a->n_idle--;
    }
  }
  pthread_mutex_unlock(&a->mu);
  sandbox_agent_close(drop);
  close_all(dead);
}

int sandbox_agent_run(sandbox_agent_session *s, const char *const *argv, size_t argc, sm_read_fn in,
                      void *in_ud, sm_output_fn out, void *out_ud, int timeout_ms, int *exit_code,
                      sm_error *err) {
  *exit_code = -1;
  /* The agent runs argv[0] as a path; a bare name is found on PATH by the
   * shell, as an engine exec would find it. */
  const char **via_sh = NULL;
  if (argc > 0 && strchr(argv[0], '/') == NULL) {
    via_sh = calloc(argc + 4, sizeof *via_sh);
    if (via_sh == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
    via_sh[0] = "/bin/sh";
    via_sh[1] = "-c";
    via_sh[2] = "exec \"$0\" \"$@\"";
    memcpy(via_sh + 3, argv, argc * sizeof *argv);
    argv = via_sh;
    argc += 3;
  }
  sandbox_agent_feed f;
  int rc = sandbox_agent_feed_init(&f, in, in_ud, err);
  if (rc == 0) rc = sandbox_agent_start(s, &f, "/", argv, argc, NULL, 0, out, out_ud, err);
  if (rc == 0) rc = sandbox_agent_drive(s, &f, sm_monotonic_ms() + timeout_ms, NULL, err);
  if (rc == 1)
    rc = sm_error_set(err, SM_ESANDBOX, "the sandbox's agent ended during '%s'", argv[0]);
  if (rc == 0) sandbox_agent_settle(s, &f);
  else s->broken = 1;
  if (rc == 0 && s->failed)
    rc = sm_error_set(err, SM_ESANDBOX, "'%s' could not start in the sandbox: %s", argv[0],
                      s->fail_msg);
  else if (rc == 0 && !s->exited)
    rc = sm_error_set(err, SM_ESANDBOX, "the sandbox's agent lost track of '%s'", argv[0]);
  else if (rc == 0)
    *exit_code = s->exit_code;
  s->out = NULL;
  sandbox_agent_feed_dispose(&f);
  free(via_sh);
  return rc;
}

static int drop_output(void *ud, int stream, const char *data, size_t len) { return 0; }

int sandbox_agent_prepare(sandbox_agents *a, sm_engine *e, const char *cid, const char *user) {
  sandbox_agent_session *s = NULL;
  int rc = sandbox_agent_take(a, e, cid, user, 1, &s);
  if (s) {
    /* One call through the same wrapper warms what the first real call
     * would find cold in a new container (its overlay's dentries, the
     * shell's pages): ~1 ms off that call. */
    const char *argv[] = {"/bin/sh", "-c", sm_exec_wrapper_script, "sandman", "warmup", "true"};
    int code = 0;
    sm_error err = SM_ERROR_INIT;
    sandbox_agent_run(s, argv, 6, NULL, NULL, drop_output, NULL, 10000, &code, &err);
    sandbox_agent_give_back(a, s);
  }
  return rc;
}

void sandbox_agent_note_call(sandbox_agents *a) {
  if (a == NULL) return;
  pthread_mutex_lock(&a->mu);
  a->calls++;
  pthread_mutex_unlock(&a->mu);
}

void sandbox_agent_note_fallback(sandbox_agents *a) {
  if (a == NULL) return;
  pthread_mutex_lock(&a->mu);
  a->fallbacks++;
  pthread_mutex_unlock(&a->mu);
}

/* ---- one call ---- */

static int append_str(common_buf *b, const char *s) {
  return common_buf_append(b, s, strlen(s) + 1);
}

/* A data or end-of-stdin frame of the current call, appended to frame. */
static void frame_data(sandbox_agent_session *s, int type, const void *data, size_t len,
                       common_buf *frame) {
  unsigned char head[SM_FRAME_HEADER];
  agent_frame_header(head, type, s->call_id, (uint32_t)len);
  common_buf_append(frame, (const char *)head, sizeof head);
  if (len) common_buf_append(frame, data, len);
}

static int pump(sandbox_agent_session *s, const void *data, size_t len, size_t *written,
                int timeout_ms, sm_error *err) {
  int rc = sm_exec_stream_pump(s->stream, data, len, written, timeout_ms, err);
  if (rc != 0) s->broken = 1;
  if (rc == SM_EPROTOCOL)
    sm_error_set(err, SM_EPROTOCOL, "the sandbox's agent broke its protocol%s%s",
                 s->diag_len ? ": " : "", s->diag);
  return rc;
}

int sandbox_agent_feed_init(sandbox_agent_feed *f, sm_read_fn in, void *in_ud, sm_error *err) {
  memset(f, 0, sizeof *f);
  common_buf_init(&f->frame, SM_FRAME_CALL_MAX + 2 * SM_FRAME_HEADER);
  f->in = in;
  f->in_ud = in_ud;
  f->in_open = in != NULL;
  if (in && (f->chunk = malloc(SM_FRAME_DATA_MAX)) == NULL)
    return sm_error_set(err, SM_ENOMEM, NULL);
  return 0;
}

void sandbox_agent_feed_dispose(sandbox_agent_feed *f) {
  common_buf_dispose(&f->frame);
  free(f->chunk);
  f->chunk = NULL;
}

/* The call frame (SM_FRAME_TTY with a size when rows is not 0). */
static int start_call(sandbox_agent_session *s, sandbox_agent_feed *f, unsigned rows, unsigned cols,
                      const char *cwd, const char *const *argv, size_t argc, const char *const *env,
                      size_t envc, sm_output_fn out, void *out_ud, sm_error *err) {
  s->call_id++;
  s->out = out;
  s->out_ud = out_ud;
  s->exited = s->failed = s->heard = 0;
  s->exit_code = -1;
  s->fail_errno = 0;
  s->fail_msg[0] = '\0';
  s->diag_len = 0;
  s->diag[0] = '\0';
  common_buf *frame = &f->frame;
  common_buf_reset(frame);
  f->off = 0;
  unsigned char head[SM_FRAME_HEADER] = {0}, size[4], until[8];
  if (f->not_after_ms) {
    agent_frame_put_u64(until, f->not_after_ms);
    frame_data(s, SM_FRAME_NOT_AFTER, until, sizeof until, frame);
  }
  size_t base = frame->len; /* where the call's frame begins */
  char num[24];
  snprintf(num, sizeof num, "%zu", argc);
  agent_frame_size_put(size, rows, cols);
  size_t pre = rows ? sizeof size : 0;
  int bad = common_buf_append(frame, (const char *)head, sizeof head) ||
            (pre && common_buf_append(frame, (const char *)size, pre)) || append_str(frame, cwd) ||
            append_str(frame, num);
  for (size_t i = 0; !bad && i < argc; i++) bad = append_str(frame, argv[i]);
  for (size_t i = 0; !bad && i < envc; i++) bad = append_str(frame, env[i]);
  if (bad || frame->len - base - SM_FRAME_HEADER - pre > SM_FRAME_CALL_MAX)
    return sm_error_set(err, SM_ETOOBIG, "the call's arguments and environment are too large");
  agent_frame_header(head, rows ? SM_FRAME_TTY : SM_FRAME_CALL, s->call_id,
                     (uint32_t)(frame->len - base - SM_FRAME_HEADER));
  memcpy(frame->data + base, head, sizeof head);
  if (!f->in_open && !rows) frame_data(s, SM_FRAME_EOF, NULL, 0, frame);
  return 0;
}

int sandbox_agent_start(sandbox_agent_session *s, sandbox_agent_feed *f, const char *cwd,
                        const char *const *argv, size_t argc, const char *const *env, size_t envc,
                        sm_output_fn out, void *out_ud, sm_error *err) {
  return start_call(s, f, 0, 0, cwd, argv, argc, env, envc, out, out_ud, err);
}

int sandbox_agent_start_tty(sandbox_agent_session *s, sandbox_agent_feed *f, sm_tty *tty,
                            const char *cwd, const char *const *argv, size_t argc,
                            const char *const *env, size_t envc, sm_output_fn out, void *out_ud,
                            sm_error *err) {
  unsigned rows, cols;
  sm_tty_size(tty, &rows, &cols);
  if (f->chunk == NULL && (f->chunk = malloc(SM_FRAME_DATA_MAX)) == NULL)
    return sm_error_set(err, SM_ENOMEM, NULL);
  sm_exec_stream_set_wake(s->stream, sandbox_tty_fd(tty));
  f->in_open = 1; /* pipes: until the input's end is sent */
  return start_call(s, f, rows, cols, cwd, argv, argc, env, envc, out, out_ud, err);
}

/* What waits in the terminal, as frames: its new size, and (once the
 * program has started) what was typed, up to one data frame at a time;
 * on pipes, the end of the input once all of it went. */
static void tty_frames(sandbox_agent_session *s, sandbox_agent_feed *f, sm_tty *tty, int started) {
  int resized = 0, ended = 0;
  unsigned rows = 0, cols = 0;
  size_t n = sandbox_tty_take(tty, (unsigned char *)f->chunk, started ? SM_FRAME_DATA_MAX : 0,
                              &resized, &rows, &cols, &ended);
  if (ended && started && rows == 0 && f->in_open) {
    f->in_open = 0; /* sent once */
    if (n) frame_data(s, SM_FRAME_STDIN, f->chunk, n, &f->frame);
    frame_data(s, SM_FRAME_EOF, NULL, 0, &f->frame);
    return;
  }
  if (resized && rows) {
    unsigned char size[4];
    agent_frame_size_put(size, rows, cols);
    frame_data(s, SM_FRAME_RESIZE, size, sizeof size, &f->frame);
  }
  if (n) frame_data(s, SM_FRAME_STDIN, f->chunk, n, &f->frame);
}

/* Typed input written straight onto the stream by the typing thread
 * (sandbox_tty_set_direct) while the call's thread has no frame of its
 * own half out; mu is held by whichever of the two writes frames. */
typedef struct tty_direct {
  pthread_mutex_t mu;
  sandbox_agent_session *s;
  sandbox_agent_feed *f;
  int on; /* registered with the terminal */
} tty_direct;

#define TTY_DIRECT_MAX 4096

static int tty_direct_send(void *ud, const void *data, size_t len) {
  tty_direct *d = ud;
  if (len > TTY_DIRECT_MAX || pthread_mutex_trylock(&d->mu) != 0) return -1;
  sandbox_agent_feed *f = d->f;
  int rc = -1;
  if (f->off == f->frame.len) {
    unsigned char frame[SM_FRAME_HEADER + TTY_DIRECT_MAX];
    size_t total = SM_FRAME_HEADER + len;
    agent_frame_header(frame, SM_FRAME_STDIN, d->s->call_id, (uint32_t)len);
    memcpy(frame + SM_FRAME_HEADER, data, len);
    ssize_t n = sm_engine_exec_send_now(d->s->stream, frame, total);
    if (n == (ssize_t)total) {
      rc = 0;
    } else if (n > 0) {
      /* The rest goes out first in the driver's next round; the room for
       * it was reserved when this was registered, so this cannot fail. */
      common_buf_reset(&f->frame);
      f->off = 0;
      rc = common_buf_append(&f->frame, (const char *)frame + n, total - (size_t)n) == 0 ? 1 : -1;
    }
  }
  pthread_mutex_unlock(&d->mu);
  return rc;
}

/* Once the program runs, over a connection two threads may write: room
 * for a direct frame's rest reserved, then registered. */
static void tty_direct_start(tty_direct *d, sm_tty *tty) {
  sandbox_agent_feed *f = d->f;
  static const char room[SM_FRAME_HEADER + TTY_DIRECT_MAX];
  d->on = -1; /* tried */
  if (sm_engine_exec_send_now(d->s->stream, NULL, 0) != 0) return;
  if (common_buf_append(&f->frame, room, sizeof room) != 0) return;
  common_buf_reset(&f->frame);
  d->on = 1;
  sandbox_tty_set_direct(tty, tty_direct_send, d);
}

static int drive_tty_loop(sandbox_agent_session *s, sandbox_agent_feed *f, sm_tty *tty,
                          tty_direct *d, const int *started, double deadline_ms,
                          volatile int *cancel, sm_error *err) {
  for (;;) {
    if (s->exited || s->failed) return 0;
    if (cancel && *cancel) return sm_error_set(err, SM_ECANCELLED, "cancelled");
    pthread_mutex_lock(&d->mu);
    if (f->off == f->frame.len) {
      common_buf_reset(&f->frame);
      f->off = 0;
      if (*started && d->on == 0) tty_direct_start(d, tty);
      tty_frames(s, f, tty, *started);
    }
    size_t out = f->frame.len - f->off;
    /* With nothing of its own to write, the typing thread may write. */
    if (out == 0) pthread_mutex_unlock(&d->mu);
    int wait = -1;
    if (deadline_ms > 0) {
      double left = deadline_ms - sm_monotonic_ms();
      if (left <= 0) {
        if (out) pthread_mutex_unlock(&d->mu);
        return sm_error_set(err, SM_ETIMEOUT, "the call did not end in time");
      }
      wait = left > 1e6 ? 1000000 : (int)left + 1;
    }
    if (cancel && (wait < 0 || wait > CANCEL_POLL_MS)) wait = CANCEL_POLL_MS;
    size_t w = 0;
    int rc = pump(s, out ? f->frame.data + f->off : NULL, out, &w, wait, err);
    if (out) {
      f->off += w;
      f->began |= w > 0;
      pthread_mutex_unlock(&d->mu);
    }
    if (rc) return rc;
  }
}

int sandbox_agent_drive_tty(sandbox_agent_session *s, sandbox_agent_feed *f, sm_tty *tty,
                            const int *started, double deadline_ms, volatile int *cancel,
                            sm_error *err) {
  tty_direct d = {.s = s, .f = f};
  pthread_mutex_init(&d.mu, NULL);
  int rc = drive_tty_loop(s, f, tty, &d, started, deadline_ms, cancel, err);
  /* Under the terminal's lock: no direct write is under way after this. */
  if (d.on == 1) sandbox_tty_set_direct(tty, NULL, NULL);
  pthread_mutex_destroy(&d.mu);
  return rc;
}

int sandbox_agent_open(sandbox_agents *a, sm_engine *e, const char *cid, const char *user,
                       sandbox_agent_session **out, sm_error *err) {
  *out = NULL;
  if (sm_agent_blob_len == 0) return sm_error_set(err, SM_ESANDBOX, "no agent binary was built");
  int rc = sandbox_agent_install(a, e, cid, err);
  if (rc == 0) rc = open_session(e, cid, user, out, err);
  if (rc == 0 && a) {
    pthread_mutex_lock(&a->mu);
    a->opened++;
    pthread_mutex_unlock(&a->mu);
  }
  return rc;
}

int sandbox_agent_drive(sandbox_agent_session *s, sandbox_agent_feed *f, double deadline_ms,
                        volatile int *cancel, sm_error *err) {
  for (;;) {
    if (s->exited || s->failed) return 0;
    if (cancel && *cancel) return sm_error_set(err, SM_ECANCELLED, "cancelled");
    /* Stdin is read only once the previous frame is out: the agent's
     * backpressure reaches the reader. */
    if (f->off == f->frame.len && f->in_open) {
      common_buf_reset(&f->frame);
      f->off = 0;
      ssize_t n = f->in(f->in_ud, f->chunk, SM_FRAME_DATA_MAX);
      if (n < 0)
        return sm_error_set(err, (int)n, "the stdin reader failed (%s)", sm_error_name((int)n));
      if ((size_t)n > SM_FRAME_DATA_MAX)
        return sm_error_set(err, SM_EINVAL, "the stdin reader overran its buffer");
      if (n == 0) f->in_open = 0;
      frame_data(s, n ? SM_FRAME_STDIN : SM_FRAME_EOF, f->chunk, (size_t)n, &f->frame);
    }
    int wait = -1;
    if (deadline_ms > 0) {
      double left = deadline_ms - sm_monotonic_ms();
      if (left <= 0) return sm_error_set(err, SM_ETIMEOUT, "the call did not end in time");
      wait = left > 1e6 ? 1000000 : (int)left + 1;
    }
    if (cancel && (wait < 0 || wait > CANCEL_POLL_MS)) wait = CANCEL_POLL_MS;
    size_t w = 0;
    int rc = pump(s, f->frame.data + f->off, f->frame.len - f->off, &w, wait, err);
    f->off += w;
    f->began |= w > 0;
    if (rc) return rc;
  }
}

int sandbox_agent_flush(sandbox_agent_session *s, sandbox_agent_feed *f, int timeout_ms,
                        sm_error *err) {
  double deadline = sm_monotonic_ms() + timeout_ms;
  while (f->off < f->frame.len) {
    int left = (int)(deadline - sm_monotonic_ms());
    if (left <= 0) {
      s->broken = 1; /* not SM_ETIMEOUT: that is the call's own timeout */
      return sm_error_set(err, SM_ESANDBOX, "the call could not be sent to the sandbox's agent in time");
    }
    size_t w = 0;
    int rc = pump(s, f->frame.data + f->off, f->frame.len - f->off, &w, left, err);
    f->off += w;
    f->began |= w > 0;
    if (rc == 1) rc = sm_error_set(err, SM_ESANDBOX, "the sandbox's agent ended");
    if (rc) return rc;
  }
  return 0;
}

static uint64_t wall_ms(void) { return (uint64_t)(sm_now() * 1000.0); }

int sandbox_agent_await_answer(sandbox_agent_session *s, uint64_t until_ms) {
  sm_error ignore = SM_ERROR_INIT;
  while (!s->heard && !s->broken) {
    uint64_t now = wall_ms();
    if (now > until_ms) break;
    uint64_t left = until_ms - now + 1;
    if (sm_exec_stream_pump(s->stream, NULL, 0, NULL, left > 1000 ? 1000 : (int)left, &ignore) != 0)
      s->broken = 1;
    sm_error_clear(&ignore);
  }
  return s->heard;
}

int sandbox_agent_came_late(const sandbox_agent_session *s) {
  return s->failed && s->fail_errno == ETIME &&
         strncmp(s->fail_msg, SM_AGENT_LATE, strlen(SM_AGENT_LATE)) == 0;
}

void sandbox_agent_settle(sandbox_agent_session *s, sandbox_agent_feed *f) {
  double until = sm_monotonic_ms() + SETTLE_MS;
  sm_error ignore = SM_ERROR_INIT;
  while (!s->broken && (f->off < f->frame.len || !(s->exited || s->failed))) {
    int left = (int)(until - sm_monotonic_ms());
    if (left <= 0) {
      s->broken = 1;
      break;
    }
    size_t w = 0;
    pump(s, f->frame.data + f->off, f->frame.len - f->off, &w, left, &ignore);
    f->off += w;
  }
}

int sandbox_agent_step(sandbox_agent_session *s, sandbox_agent_feed *f, int wait_ms) {
  if (s->broken || s->exited || s->failed) return 1;
  size_t w = 0;
  sm_error ignore = SM_ERROR_INIT;
  pump(s, f->frame.data + f->off, f->frame.len - f->off, &w, wait_ms, &ignore);
  f->off += w;
  return s->broken || s->exited || s->failed;
}

int sandbox_agent_call_state(const sandbox_agent_session *s, int *exit_code, int *fail_errno,
                             const char **fail_msg) {
  if (s->exited) {
    *exit_code = s->exit_code;
    return 1;
  }
  if (s->failed) {
    *fail_errno = s->fail_errno;
    *fail_msg = s->fail_msg;
    return 2;
  }
  return 0;
}

void sandbox_agent_mark_broken(sandbox_agent_session *s) { s->broken = 1; }

int sandbox_agent_broken(const sandbox_agent_session *s) { return s->broken; }
