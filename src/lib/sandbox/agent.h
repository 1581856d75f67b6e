/* Internal to src/lib/sandbox: the in-sandbox agent, host side (agent.c). */
#ifndef SANDMAN_SANDBOX_AGENT_H
#define SANDMAN_SANDBOX_AGENT_H

#include <stddef.h>

#include <sandman/engine.h>
#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/terminal.h>

#include "common/buf.h"

typedef struct sandbox_agents sandbox_agents;               /* a runner's sessions */
typedef struct sandbox_agent_session sandbox_agent_session; /* one agent exec */

sandbox_agents *sandbox_agents_new(void);
void sandbox_agents_free(sandbox_agents *a);
void sandbox_agents_set_enabled(sandbox_agents *a, int on);
int sandbox_agents_enabled(sandbox_agents *a);
/* Whether a session of container cid is parked (idle or resting): a call
 * there would likely take it (another call may take it first). */
int sandbox_agents_parked(sandbox_agents *a, const char *cid);
void sandbox_agents_stats(sandbox_agents *a, unsigned long *opened, unsigned long *calls,
                          unsigned long *fallbacks);

/* How sandbox_agent_take opens a session when there is no idle one. */
enum {
  SM_AGENT_IDLE_ONLY = 0,  /* none: use the engine's exec */
  SM_AGENT_OPEN = 1,       /* installing the agent first unless this runner did */
  /* Opened at once, the agent taken to be there (a copy in through the
   * unpacker, which is the agent binary, installed it); installed and
   * opened again only when that fails. */
  SM_AGENT_OPEN_INSTALLED = 2,
};

/* An idle session in container cid (*out), or a new one as open_new
 * (SM_AGENT_*) says. *out NULL: use the engine's exec. Returns
 * SM_ENOTFOUND/SM_ECONFLICT when the container is gone or stopped, else 0
 * (an agent that cannot work there is remembered, not an error). */
int sandbox_agent_take(sandbox_agents *a, sm_engine *e, const char *cid, const char *user,
                       int open_new, sandbox_agent_session **out);
/* After a call that ended cleanly: parks the session (or closes it). */
void sandbox_agent_give_back(sandbox_agents *a, sandbox_agent_session *s);
void sandbox_agent_close(sandbox_agent_session *s);
/* Where the agent binary lives in a sandbox (it is also the workspace's
 * unpacker: `PATH untar DIR`). */
void sandbox_agent_binary_path(char *out, size_t len);
/* Puts the agent binary into the container (as root, into /.sandman)
 * unless it is there; a may be NULL. */
int sandbox_agent_install(sandbox_agents *a, sm_engine *e, const char *cid, sm_error *err);
/* Installs the agent in a new container and parks a session (the pool). */
int sandbox_agent_prepare(sandbox_agents *a, sm_engine *e, const char *cid, const char *user);
void sandbox_agent_note_fallback(sandbox_agents *a);
/* Container cid's processes ended or it is gone (a sandbox stopped,
 * hibernated or rolled back): its idle sessions close, and what is known
 * about it (the agent installed, or unusable there) is forgotten. */
void sandbox_agents_forget(sandbox_agents *a, const char *cid);
/* Container cid was frozen (no call in flight): one of its idle sessions
 * is kept apart from the idle ones' cap, for its first call after the
 * thaw (at most one per container, and a bounded number in all: past
 * that, the one frozen longest ago closes); its others close. */
void sandbox_agents_rest(sandbox_agents *a, const char *cid);
/* Counts a tool call made over a session (sm_runner_agent_stats). */
void sandbox_agent_note_call(sandbox_agents *a);

/* A call over a session: its outgoing frames and its stdin. */
typedef struct sandbox_agent_feed {
  common_buf frame; /* frames being written */
  size_t off;      /* how much of frame is out */
  int began;       /* a byte of the call's frame went: the agent may run it */
  sm_read_fn in;   /* the call's stdin; NULL: none */
  void *in_ud;
  int in_open;
  char *chunk;     /* SM_FRAME_DATA_MAX bytes, with in */
  uint64_t not_after_ms; /* set before the start: the call may not start after
                          * this wall-clock time (SM_FRAME_NOT_AFTER); 0: none */
} sandbox_agent_feed;

int sandbox_agent_feed_init(sandbox_agent_feed *f, sm_read_fn in, void *in_ud, sm_error *err);
void sandbox_agent_feed_dispose(sandbox_agent_feed *f);
/* Puts the call frame (and, without stdin, its end) into f; output goes to
 * out as it arrives. */
int sandbox_agent_start(sandbox_agent_session *s, sandbox_agent_feed *f, const char *cwd,
                        const char *const *argv, size_t argc, const char *const *env, size_t envc,
                        sm_output_fn out, void *out_ud, sm_error *err);
/* A call sent to an agent that is still frozen, ahead of the thaw (a
 * frozen sandbox's first call, docs/state.md): writes the whole of what f
 * holds now (0), within timeout_ms. */
int sandbox_agent_flush(sandbox_agent_session *s, sandbox_agent_feed *f, int timeout_ms,
                        sm_error *err);
/* After a thaw that failed: reads until the agent answered anything for
 * the call (1: it started it, or refused it as late: see
 * sandbox_agent_came_late) or the wall clock passes until_ms (0: it can no
 * longer start it). */
int sandbox_agent_await_answer(sandbox_agent_session *s, uint64_t until_ms);
/* The call was refused as read after its f->not_after_ms: it never ran. */
int sandbox_agent_came_late(const sandbox_agent_session *s);
/* Pumps until the call ends (0; sandbox_agent_call_state says how), the agent's
 * exec ends (1), deadline_ms passes (SM_ETIMEOUT; 0: none), *cancel is set
 * (SM_ECANCELLED) or an error (negative; the session is then broken). */
int sandbox_agent_drive(sandbox_agent_session *s, sandbox_agent_feed *f, double deadline_ms,
                        volatile int *cancel, sm_error *err);
/* After a call's end or kill: waits for the agent's report and writes the
 * rest of a half-written frame, so the next call starts on a frame
 * boundary; a session that cannot is marked broken. */
void sandbox_agent_settle(sandbox_agent_session *s, sandbox_agent_feed *f);
/* One bounded step of a call being killed: writes what is left of its
 * frame and reads what arrives for up to wait_ms. 1 once the call ended
 * or the session broke, else 0. */
int sandbox_agent_step(sandbox_agent_session *s, sandbox_agent_feed *f, int wait_ms);
/* 1 (exited: *exit_code), 2 (could not start: *fail_errno, *fail_msg) or 0. */
int sandbox_agent_call_state(const sandbox_agent_session *s, int *exit_code, int *fail_errno,
                             const char **fail_msg);
/* Runs argv (cwd "/", the agent's environment) to its end: stdin from in
 * (NULL: none), output to out. 0 with *exit_code, or an error (the session
 * is then broken unless the program merely could not start). */
int sandbox_agent_run(sandbox_agent_session *s, const char *const *argv, size_t argc, sm_read_fn in,
                      void *in_ud, sm_output_fn out, void *out_ud, int timeout_ms, int *exit_code,
                      sm_error *err);
/* A session of its own in container cid for one long call (a terminal),
 * the agent installed first if needed, whether sessions are on for calls
 * or not: 0 with *out, or why it cannot be had. Closed after (never
 * parked). */
int sandbox_agent_open(sandbox_agents *a, sm_engine *e, const char *cid, const char *user,
                       sandbox_agent_session **out, sm_error *err);
/* Like sandbox_agent_start for a call on a pseudo-terminal of tty's size that
 * the agent opens in the sandbox; f has no stdin reader (the tty is). */
int sandbox_agent_start_tty(sandbox_agent_session *s, sandbox_agent_feed *f, struct sm_tty *tty,
                            const char *cwd, const char *const *argv, size_t argc,
                            const char *const *env, size_t envc, sm_output_fn out, void *out_ud,
                            sm_error *err);
/* Like sandbox_agent_drive for it: what is typed and the size's changes go to
 * the agent as they come (typed input only once *started: nothing may
 * reach the terminal before the call's wrapper has named its process). */
int sandbox_agent_drive_tty(sandbox_agent_session *s, sandbox_agent_feed *f, struct sm_tty *tty,
                            const int *started, double deadline_ms, volatile int *cancel,
                            sm_error *err);
void sandbox_agent_mark_broken(sandbox_agent_session *s);
int sandbox_agent_broken(const sandbox_agent_session *s);

#endif
