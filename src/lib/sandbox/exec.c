/* One tool call inside a container: an exec through the wrapper (see
 * spec.c), output captured as it arrives, the exit code, and what happens
 * on a timeout (the tool's processes are killed from inside the sandbox),
 * on an out-of-memory kill, and when the command cannot be started. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/cleanup.h"
#include "common/text.h"
#include "common/thread.h"
#include "sandbox/agent.h"
#include "sandbox/capture.h"
#include "sandbox/exec.h"
#include "sandbox/exec_thaw.h"
#include "sandbox/helper.h"
#include "sandbox/preamble.h"
#include "sandbox/sandbox_result.h"
#include "sandbox/spec.h"
#include "sandbox/tty.h"

#define HELPER_TIMEOUT_S 20.0
#define HELPER_OUTPUT_CAP 4096
#define KILL_UNSTARTED_MS 10000 /* how long a killed call's start is waited for */

/* Runs a short sandman script in the container (as the container's user,
 * with the container's environment) with up to three arguments and keeps
 * its stdout. */
static int run_helper(const sandbox_exec_target *t, const char *script, const char *name,
                      const char *a1, const char *a2, const char *a3, common_buf *out,
                      int *exit_code, sm_error *err) {
  const char *argv[] = {"/bin/sh", "-c", script, name, a1 ? a1 : "", a2 ? a2 : "", a3 ? a3 : ""};
  return sandbox_exec_helper(t->engine, t->container_id, argv, 7, t->user, NULL, NULL,
                             HELPER_TIMEOUT_S, out, exit_code, err);
}

/* Kills every process of the call inside the sandbox (sm_exec_kill_script:
 * by the preamble's pid and start time, however the tool detached) and
 * waits until the exec is over. */
static void kill_call(const sandbox_exec_target *t, const char *exec_id,
                      const sandbox_call_watch *w) {
  sm_error err = SM_ERROR_INIT;
  if (t->per_tool) {
    /* A fresh container holds nothing else: kill it all at once (it is
     * removed right after). */
    if (sm_engine_container_kill(t->engine, t->container_id, "KILL", &err) != 0)
      sm_log(SM_LOG_WARN, "killing sandbox %s after a timeout: %s", t->container_id, err.message);
    return;
  }
  int started = w->state == SM_CALL_WATCH_STARTED;
  int killed = 0;
  for (int attempt = 0; attempt < 5 && !killed; attempt++) {
    common_buf out;
    common_buf_init(&out, HELPER_OUTPUT_CAP);
    int code = -1;
    int rc = run_helper(t, sm_exec_kill_script, "sandman-kill", w->token,
                        started ? w->pid : "", started ? w->start : "", &out, &code, &err);
    common_buf_dispose(&out);
    if (rc == 0 && code == 0) {
      killed = 1;
    } else if (rc == SM_ECONFLICT || rc == SM_ENOTFOUND) {
      /* The sandbox stopped or went: nothing of the call is left to kill. */
      return;
    } else {
      /* A sandbox at its pids limit may refuse even the killer: retry. */
      sm_log(SM_LOG_DEBUG, "killing call %s: %s (exit %d), retrying", w->token,
             rc ? err.message : "helper failed", code);
      common_sleep_ms(200 * (attempt + 1));
    }
  }
  if (!killed)
    sm_log(SM_LOG_WARN, "could not kill the timed-out tool in sandbox %s: %s", t->container_id,
           err.message);
  int running = exec_id != NULL;
  for (int i = 0; i < 100 && running; i++) {
    if (sm_engine_exec_inspect(t->engine, exec_id, &running, NULL, NULL, &err) != 0) break;
    if (running) common_sleep_ms(50);
  }
}

/* The container's Running and OOMKilled; returns the inspect's code
 * (SM_ENOTFOUND: it is gone, and *running is 0). */
static int container_state(const sandbox_exec_target *t, int *running, int *oom) {
  json_object *insp = NULL, *st = NULL, *v = NULL;
  sm_error err = SM_ERROR_INIT;
  *running = 1;
  *oom = 0;
  int rc = sm_engine_container_inspect(t->engine, t->container_id, &insp, &err);
  if (rc != 0) {
    if (rc == SM_ENOTFOUND) *running = 0;
    return rc;
  }
  if (json_object_object_get_ex(insp, "State", &st)) {
    if (json_object_object_get_ex(st, "Running", &v)) *running = json_object_get_boolean(v);
    if (json_object_object_get_ex(st, "OOMKilled", &v)) *oom = json_object_get_boolean(v);
  }
  json_object_put(insp);
  return 0;
}

static int state_oom_killed(const sandbox_exec_target *t) {
  int running = 1, oom = 0;
  container_state(t, &running, &oom);
  return oom;
}

/* Exit 137 is SIGKILL; it was the kernel's OOM killer if the memory
 * cgroup's oom_kill counter went up during the call (the preamble gave its
 * value before the call). Where the counter cannot be read (gVisor), the
 * container's State.OOMKilled decides, which is exact for a fresh per_tool
 * container and sticky for a reused one. */
static int check_oom(const sandbox_exec_target *t, const sandbox_call_watch *w) {
  common_buf out;
  common_buf_init(&out, HELPER_OUTPUT_CAP);
  sm_error err = SM_ERROR_INIT;
  int rc = run_helper(t, sm_exec_oom_script, "sandman-oom", NULL, NULL, NULL, &out, NULL, &err);
  long long now = -1;
  if (rc == 0 && out.data) {
    const char *p = strstr(out.data, "counts ");
    if (p) sscanf(p, "counts %lld", &now);
  }
  common_buf_dispose(&out);
  if (w->oom_before >= 0 && now >= 0) {
    if (now > w->oom_before) return 1;
    return t->per_tool ? state_oom_killed(t) : 0;
  }
  return state_oom_killed(t);
}

static const char *find_token(const common_strv *env) {
  for (size_t i = env->n; i-- > 0;)
    if (strncmp(env->v[i], "SANDMAN_CALL=", 13) == 0) return env->v[i] + 13;
  return NULL;
}

/* gVisor quotes the whole command it could not start, sandman's wrapper
 * script included, which says nothing to the reader: the quoted command
 * becomes "/bin/sh -c ...". */
static void elide_wrapper(char *text) {
  char *q = strstr(text, "\"/bin/sh -c ");
  if (q == NULL) return;
  char *from = q + 12;
  char *end = from;
  while (*end && !(end[0] == '"' && end[-1] != '\\')) end++;
  if (*end == '\0') return;
  static const char dots[] = "...";
  memmove(from + sizeof dots - 1, end, strlen(end) + 1);
  memcpy(from, dots, sizeof dots - 1);
}

/* The runtime's words say /bin/sh itself is missing (runc: exec: "/bin/sh":
 * stat /bin/sh: no such file or directory), not merely that they quote it. */
static int names_missing_shell(const char *text) {
  const char *p = strstr(text, "/bin/sh");
  if (p == NULL) return 0;
  return strstr(p, "no such file") != NULL || strstr(p, "not found") != NULL;
}

/* The wrapper never printed its preamble: the tool never started, and what
 * came back is the runtime's, reported as sandman's error. */
static int not_started(const sandbox_call_watch *w, int code, sm_error *err) {
  char text[SM_CALL_RUNTIME_TEXT_MAX];
  if (!sandbox_call_watch_runtime_text(w, text, sizeof text))
    snprintf(text, sizeof text, "the call's wrapper exited with %d before the tool started", code);
  elide_wrapper(text);
  if (names_missing_shell(text))
    return sm_error_set(err, SM_ESANDBOX,
                        "the image has no /bin/sh, which sandman runs every call through: %s",
                        text);
  return sm_error_set(err, SM_ESANDBOX,
                      "the runtime could not start the call (is the sandbox at its process "
                      "limit?): %s",
                      text);
}

/* The runtime's last words at the end of the tool's stderr (gVisor: "waiting
 * on pid N: ..."): their length, 0 when the last line is not theirs. */
static size_t runtime_tail(const sandbox_capture *cap, size_t *start) {
  const common_buf *b = &cap->err;
  if (b->data == NULL || b->len == 0) return 0;
  size_t end = b->len;
  while (end > 0 && b->data[end - 1] == '\n') end--;
  size_t s = end;
  while (s > 0 && b->data[s - 1] != '\n') s--;
  const char *l = b->data + s;
  size_t n = end - s;
  if ((n > 15 && strncmp(l, "waiting on pid ", 15) == 0) ||
      (n > 11 && strncmp(l, "OCI runtime", 11) == 0)) {
    *start = s;
    return n;
  }
  return 0;
}

/* The sandbox stopped under the call: 137, and an OOM is the tool's
 * verdict (0), anything else sandman's failure with the runtime's words. */
static int stopped_verdict(sandbox_exec_outcome *out, int oom, const char *words, sm_error *err) {
  out->exit_code = 137;
  out->oom_killed = oom;
  if (oom) {
    sm_error_clear(err);
    return 0;
  }
  return sm_error_set(err, SM_ESANDBOX, "the sandbox stopped during the call%s%s",
                      words[0] ? ": " : "", words);
}

/* A call that timed out or was cancelled: if the whole sandbox stopped
 * under it (gVisor's sentry is killed when the sandbox exceeds its memory;
 * the engine may not end the exec's stream then, so the timeout is what
 * noticed), fills out and returns 1 with *rc the call's verdict; 0 when
 * the call's processes are still there to kill. */
static int sandbox_stopped(const sandbox_exec_target *t, sandbox_exec_outcome *out, int *rc,
                           sm_error *err) {
  int running = 1, oom = 0;
  if (!t->per_tool) container_state(t, &running, &oom);
  if (running) return 0;
  *rc = stopped_verdict(out, oom, "", err);
  return 1;
}

/* A call that ended with a signal's code and the runtime's words at the end
 * of its stderr: when the sandbox stopped under it, that is sandman's
 * failure, reported with those words (taken out of the tool's stderr).
 * 1 with *rc the verdict (an OOM is the tool's); 0 otherwise. */
static int died_with_runtime(const sandbox_exec_target *t, sandbox_capture *cap,
                             sandbox_exec_outcome *out, int *rc, sm_error *err) {
  size_t start = 0, n = runtime_tail(cap, &start);
  if (n == 0) return 0;
  int running = 1, oom = 0;
  container_state(t, &running, &oom);
  if (running) return 0;
  char words[420];
  snprintf(words, sizeof words, "%.*s", (int)(n > 400 ? 400 : n), cap->err.data + start);
  cap->err.len = start;
  cap->err.data[start] = '\0';
  *rc = stopped_verdict(out, oom, words, err);
  return 1;
}

/* After the kill: what a timeout or a cancel reports. */
static void stopped_call(int rc, sandbox_exec_outcome *out, sm_error *err) {
  if (rc == SM_ETIMEOUT) {
    out->timed_out = 1;
    out->exit_code = 124;
  } else {
    out->cancelled = 1;
    out->exit_code = 137;
  }
  sm_error_clear(err);
}

/* A call that ended with an exit code: the tool's, unless the wrapper never
 * started it or the sandbox stopped under it. */
static int finish(const sandbox_exec_target *t, const sandbox_call_watch *w, sandbox_capture *cap,
                  int code, sandbox_exec_outcome *out, sm_error *err) {
  if (w->state != SM_CALL_WATCH_STARTED) return not_started(w, code, err);
  int verdict = 0;
  if ((code >= 128 || code == 126) && died_with_runtime(t, cap, out, &verdict, err))
    return verdict;
  out->exit_code = code;
  if (code == 137) out->oom_killed = check_oom(t, w);
  return 0;
}

/* Kills a timed-out or cancelled call over the agent. A cancel may come
 * before the wrapper reported its start: the killer then looks for the
 * call by its marker, and a process the agent starts a moment later would
 * be missed and run on (a cancelled `sleep 600` that kept its sandbox
 * busy). So until the start is reported (then it is killed by its pid) or
 * the call ends, it is killed again as soon as its start arrives. */
static void agent_kill(const sandbox_exec_target *t, sandbox_agent_session *s,
                       sandbox_agent_feed *f, sandbox_call_watch *w) {
  double until = sm_monotonic_ms() + KILL_UNSTARTED_MS;
  for (;;) {
    int started = w->state == SM_CALL_WATCH_STARTED;
    kill_call(t, NULL, w);
    if (started) break;
    int ended = 0;
    while (!ended && w->state != SM_CALL_WATCH_STARTED && sm_monotonic_ms() < until)
      ended = sandbox_agent_step(s, f, 50);
    if (ended || w->state != SM_CALL_WATCH_STARTED) break;
  }
  sandbox_agent_settle(s, f);
}

/* The call's command line (NULL-terminated, *argc set; NULL when out of
 * memory): the tool through the wrapper, which prints the call's preamble
 * and execs it; a helper call (sandman-agent's own command, argv[0] its
 * path) as `sandman-agent call TOKEN ...`, which prints the same preamble
 * itself (src/shared/agent/call_preamble.h): no shell before it. */
static const char **call_argv(const sm_run_request *req, const char *token, size_t *argc) {
  int helper = req->helper && req->argc > 1;
  *argc = helper ? 2 + req->argc : 5 + req->argc; /* the token besides */
  const char **argv = calloc(*argc + 1, sizeof *argv);
  if (argv == NULL) return NULL;
  size_t o = 0;
  if (helper) {
    argv[o++] = req->argv[0];
    argv[o++] = "call";
  } else {
    argv[o++] = "/bin/sh";
    argv[o++] = "-c";
    argv[o++] = sm_exec_wrapper_script;
    argv[o++] = "sh"; /* $0: the shell's own errors read "sh: ...", not as sandman's */
  }
  argv[o++] = token;
  for (size_t i = helper ? 1 : 0; i < req->argc; i++) argv[o++] = req->argv[i];
  return argv;
}

/* The call's frame goes to the session (on a terminal when the request
 * has one); 0 once it is on its way. */
static int agent_start(const sandbox_exec_target *t, const sm_run_request *req,
                       const common_strv *env, sandbox_call_watch *w, sandbox_agent_feed *f,
                       uint64_t not_after_ms, sm_error *err) {
  sandbox_agent_session *s = t->agent;
  size_t argc = 0;
  const char **argv = call_argv(req, w->token, &argc);
  if (argv == NULL) {
    sandbox_agent_mark_broken(s);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  const char *cwd = req->cwd ? req->cwd : "/workspace";
  const char *const *ev = (const char *const *)env->v;
  int rc = sandbox_agent_feed_init(f, req->tty ? NULL : req->stdin_read, req->stdin_ud, err);
  f->not_after_ms = not_after_ms;
  if (rc == 0 && req->tty)
    rc = sandbox_agent_start_tty(s, f, req->tty, cwd, argv, argc, ev, env->n,
                                 sandbox_call_watch_output, w, err);
  else if (rc == 0)
    rc = sandbox_agent_start(s, f, cwd, argv, argc, ev, env->n, sandbox_call_watch_output, w, err);
  free(argv);
  if (rc == 0) sandbox_agent_note_call(t->agents);
  return rc;
}

static int agent_drive(const sandbox_exec_target *t, const sm_run_request *req,
                       sandbox_agent_feed *f, const int *started, double deadline, sm_error *err) {
  if (req->tty) return sandbox_agent_drive_tty(t->agent, f, req->tty, started, deadline, req->cancel, err);
  return sandbox_agent_drive(t->agent, f, deadline, req->cancel, err);
}

static int agent_call(const sandbox_exec_target *t, const sm_run_request *req,
                      const common_strv *env, sandbox_call_watch *w, const int *started,
                      sandbox_exec_outcome *out, sm_error *err) {
  sandbox_agent_session *s = t->agent;
  if (req->cancel && *req->cancel) {
    /* Cancelled before it was sent: nothing to start, nothing to kill. */
    stopped_call(SM_ECANCELLED, out, err);
    return 0;
  }
  sandbox_agent_feed f;
  int thawing = t->thaw && !req->tty;
  uint64_t not_after = thawing ? (uint64_t)(sm_now() * 1000.0) + SM_THAW_LATE_MS : 0;
  int rc = agent_start(t, req, env, w, &f, not_after, err);
  double t0 = sm_monotonic_ms();
  double deadline = req->settings.timeout_s > 0 ? t0 + req->settings.timeout_s * 1000.0 : 0;
  if (rc == 0 && thawing) rc = sandbox_exec_thaw_drive(t, req, &f, deadline, err);
  else if (rc == 0) rc = agent_drive(t, req, &f, started, deadline, err);
  if (rc == 0 && sandbox_agent_came_late(s)) {
    /* Thawed after its time (a slow engine): it never ran; sent again. */
    sandbox_agent_settle(s, &f);
    sandbox_agent_feed_dispose(&f);
    rc = agent_start(t, req, env, w, &f, 0, err);
    if (rc == 0) rc = agent_drive(t, req, &f, started, deadline, err);
  }
  out->duration_ms = sm_monotonic_ms() - t0;

  if (rc == SM_ETIMEOUT || rc == SM_ECANCELLED) {
    int verdict = 0;
    if (sandbox_stopped(t, out, &verdict, err)) {
      sandbox_agent_mark_broken(s);
      sandbox_agent_feed_dispose(&f);
      return verdict;
    }
    /* Stopped before a byte of the call went: it never reaches the agent
     * (sending it now would start it after the kill). Not f.off: a
     * terminal's driver empties its frame between keystrokes, and a killed
     * terminal left what its program had detached running. */
    if (f.began) agent_kill(t, s, &f, w);
    sandbox_agent_feed_dispose(&f);
    out->duration_ms = sm_monotonic_ms() - t0;
    stopped_call(rc, out, err);
    return 0;
  }
  if (rc == 1) {
    /* The agent's exec ended under the call: the container stopped or was
     * removed, or the tool killed every process of its user (kill -9 -1),
     * the agent included, which an engine exec reports as 137 too. */
    sandbox_agent_feed_dispose(&f);
    int running = 0, oom = 0;
    int irc = container_state(t, &running, &oom);
    int had_output = w->state != SM_CALL_WATCH_WAITING;
    if (irc == SM_ENOTFOUND && !had_output)
      return sm_error_set(err, SM_ENOTFOUND, "the sandbox is gone");
    if (irc == 0 && !running && !had_output && !oom)
      return sm_error_set(err, SM_ECONFLICT, "the sandbox is not running");
    sm_error_clear(err);
    if (running) kill_call(t, NULL, w);
    out->exit_code = 137;
    out->oom_killed = running ? check_oom(t, w) : oom;
    if (!running && !oom) return sm_error_set(err, SM_ESANDBOX, "the sandbox stopped during the call");
    return 0;
  }
  if (rc != 0) {
    sandbox_agent_feed_dispose(&f);
    sandbox_agent_mark_broken(s);
    kill_call(t, NULL, w);
    return sm_error_wrap(err, "running the tool through the sandbox's agent");
  }
  sandbox_agent_settle(s, &f);
  sandbox_agent_feed_dispose(&f);

  int code = 0, en = 0;
  const char *msg = NULL;
  if (sandbox_agent_call_state(s, &code, &en, &msg) == 2) {
    if (en == ENOENT && strstr(msg, "/bin/sh"))
      return sm_error_set(err, SM_ESANDBOX,
                          "the image has no /bin/sh, which sandman runs every call through: %s",
                          msg);
    return sm_error_set(err, SM_ESANDBOX, "the call could not start in the sandbox: %s", msg);
  }
  return finish(t, w, w->cap, code, out, err);
}

static int engine_call(const sandbox_exec_target *t, const sm_run_request *req,
                       const common_strv *env, sandbox_call_watch *w, sandbox_exec_outcome *out,
                       sm_error *err) {
  cleanup_json json_object *cfg = json_object_new_object();
  size_t argc = 0;
  const char **argv = call_argv(req, w->token, &argc);
  if (argv == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  json_object_object_add(cfg, "Cmd", common_json_strings(argv, argc));
  free(argv);
  json_object_object_add(cfg, "Env", common_json_strings((const char *const *)env->v, env->n));
  if (t->user) json_object_object_add(cfg, "User", json_object_new_string(t->user));
  json_object_object_add(cfg, "WorkingDir",
                         json_object_new_string(req->cwd ? req->cwd : "/workspace"));
  json_object_object_add(cfg, "AttachStdin", json_object_new_boolean(req->stdin_read != NULL));
  json_object_object_add(cfg, "AttachStdout", json_object_new_boolean(1));
  json_object_object_add(cfg, "AttachStderr", json_object_new_boolean(1));
  json_object_object_add(cfg, "Tty", json_object_new_boolean(0));
  char exec_id[SM_ENGINE_ID_MAX];
  int rc = sm_engine_exec_create(t->engine, t->container_id, cfg, exec_id, err);
  json_object_put(steal_pointer(&cfg)); /* not held through the exec */
  if (rc == SM_ECONFLICT)
    return sm_error_wrap(err, "the sandbox is not running");
  if (rc) return rc;

  sm_exec_io io = SM_EXEC_IO_INIT;
  io.stdin_read = req->stdin_read;
  io.stdin_ud = req->stdin_ud;
  io.output = sandbox_call_watch_output;
  io.output_ud = w;
  io.timeout_s = req->settings.timeout_s > 0 ? req->settings.timeout_s : 0;
  io.cancel = req->cancel;
  double t0 = sm_monotonic_ms();
  rc = sm_engine_exec_start(t->engine, exec_id, &io, err);
  out->duration_ms = sm_monotonic_ms() - t0;

  if (rc == SM_ETIMEOUT || rc == SM_ECANCELLED) {
    int verdict = 0;
    if (sandbox_stopped(t, out, &verdict, err)) {
      out->duration_ms = sm_monotonic_ms() - t0;
      return verdict;
    }
    kill_call(t, exec_id, w);
    out->duration_ms = sm_monotonic_ms() - t0;
    stopped_call(rc, out, err);
    return 0;
  }
  if (rc) {
    /* The stream broke (engine gone?): do not leave the tool running. */
    kill_call(t, exec_id, w);
    return sm_error_wrap(err, "running the tool");
  }

  int running = 1, code = -1;
  for (int i = 0; i < 200 && running; i++) {
    rc = sm_engine_exec_inspect(t->engine, exec_id, &running, &code, NULL, err);
    if (rc) return sm_error_wrap(err, "reading the tool's exit code");
    if (running) common_sleep_ms(10);
  }
  if (running) return sm_error_set(err, SM_EENGINE, "the engine still reports the tool running");
  return finish(t, w, w->cap, code, out, err);
}

/* A terminal's call: its program has started once the wrapper named it. */
typedef struct tty_watch {
  sm_tty *tty;
  const char *container_id;
  int started;
  void (*next)(void *ud, const char *pid, const char *start);
  void *next_ud;
} tty_watch;

static void tty_started(void *ud, const char *pid, const char *start) {
  tty_watch *tw = ud;
  tw->started = 1;
  sandbox_tty_started(tw->tty, tw->container_id);
  if (tw->next) tw->next(tw->next_ud, pid, start);
}

int sandbox_exec_call(const sandbox_exec_target *t, const sm_run_request *req,
                      const common_strv *env, sandbox_capture *cap, sandbox_exec_outcome *out,
                      sm_error *err) {
  memset(out, 0, sizeof *out);
  const char *token = find_token(env);
  if (token == NULL) return sm_error_set(err, SM_EINVAL, "exec without a call marker");
  /* The agent opens the terminal: no other way in has one. */
  if (req->tty && t->agent == NULL)
    return sm_error_set(err, SM_EUNSUPPORTED, "a terminal needs sandman's agent in the sandbox");
  sandbox_call_watch w;
  sandbox_call_watch_init(&w, token, cap);
  w.on_start = t->on_start;
  w.on_start_ud = t->on_start_ud;
  tty_watch tw = {req->tty, t->container_id, 0, t->on_start, t->on_start_ud};
  if (req->tty) {
    w.on_start = tty_started;
    w.on_start_ud = &tw;
  }
  int rc = 0;
  /* Still frozen with no session to send the call to ahead: thawed first. */
  if ((t->agent == NULL || req->tty) && t->thaw) rc = t->thaw(t->thaw_ud, err);
  if (rc == 0 && t->agent) rc = agent_call(t, req, env, &w, &tw.started, out, err);
  else if (rc == 0) rc = engine_call(t, req, env, &w, out, err);
  out->began = w.state == SM_CALL_WATCH_STARTED;
  sandbox_call_watch_dispose(&w);
  return rc;
}
