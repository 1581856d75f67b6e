/* /workspace read for a snapshot by the sandbox's agent (snap_agent.h).
 * What the agent sends is untrusted: it is kept as a tar like the
 * engine's, hashed by the same reader, and refused by it if broken. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sandman/log.h>
#include <sandman/util.h>

#include "common/durable.h"
#include "common/io.h"
#include "common/thread.h"
#include "sandbox/agent.h"
#include "sandbox/carry.h"
#include "sandbox/helper.h"
#include "sandbox/snap_agent.h"

#define SNAP_AGENT_DIAG 512
/* What the agent writes before the tar, once the processes are stopped
 * (src/agent/tar_out.h): anything else (the runtime's message that it
 * could not run the agent) is not a tar of its. */
#define SNAP_AGENT_MAGIC "sandman-tar 1\n"
#define SNAP_AGENT_MAGIC_LEN (sizeof SNAP_AGENT_MAGIC - 1)
#define SNAP_AGENT_PUMP_MS 20
#define SNAP_AGENT_TIMEOUT_MS (30 * 60 * 1000.0) /* a stream that stalls this long is given up */

typedef struct snap_agent_read {
  sandbox_tar_sink file;
  int tee;
  int failed; /* the file could not be written */
  int started;   /* the magic came: the processes are stopped */
  int foreign;   /* something else came instead: not a tar of the agent's */
  size_t magic_seen;
  const sandbox_snap_agent_hooks *hooks;
  char diag[SNAP_AGENT_DIAG];
  size_t diag_len;
} snap_agent_read;

static int snap_agent_output(void *ud, int stream, const char *data, size_t len) {
  snap_agent_read *r = ud;
  if (stream == 2) {
    size_t room = sizeof r->diag - 1 - r->diag_len;
    if (len < room) room = len;
    memcpy(r->diag + r->diag_len, data, room);
    r->diag_len += room;
    r->diag[r->diag_len] = '\0';
    return 0;
  }
  while (!r->started && !r->foreign && len > 0) {
    if (*data != SNAP_AGENT_MAGIC[r->magic_seen]) {
      r->foreign = 1;
      break;
    }
    data++, len--;
    if (++r->magic_seen == SNAP_AGENT_MAGIC_LEN) {
      r->started = 1;
      if (r->hooks && r->hooks->stopped) r->hooks->stopped(r->hooks->ud);
    }
  }
  if (r->failed || !r->started || len == 0) return 0;
  if (sandbox_tar_sink_write(&r->file, data, len) != 0) r->failed = errno ? errno : EIO;
  if (r->tee >= 0 && common_write_all(r->tee, data, len) != 0) r->tee = -1;
  return 0;
}

/* Runs the exec to its end: the host's word ("g") sent once hooks->done
 * says so. 0, or an error of the engine's stream. */
static int snap_agent_drive(sm_exec_stream *s, snap_agent_read *r, sm_error *err) {
  int said = 0;
  double deadline = sm_monotonic_ms() + SNAP_AGENT_TIMEOUT_MS;
  for (;;) {
    int go = !said && r->started && (r->hooks == NULL || r->hooks->done == NULL ||
                                      r->hooks->done(r->hooks->ud));
    size_t written = 0;
    int rc = sm_exec_stream_pump(s, go ? "g" : NULL, go ? 1 : 0, &written, SNAP_AGENT_PUMP_MS, err);
    if (written) said = 1;
    if (rc == 1) return 0;
    if (rc < 0) return rc;
    if (sm_monotonic_ms() > deadline) return sm_error_set(err, SM_ETIMEOUT, "the agent's tar stalled");
  }
}

static int snap_agent_exit_code(sm_engine *e, const char *exec_id, int *code, sm_error *err) {
  int running = 1;
  for (int i = 0; i < 100 && running; i++) {
    int rc = sm_engine_exec_inspect(e, exec_id, &running, code, NULL, err);
    if (rc) return rc;
    if (running) common_sleep_ms(20);
  }
  return running ? sm_error_set(err, SM_ETIMEOUT, "the agent's tar did not end") : 0;
}

/* The exec of the agent's tar into fd; its exit code in *code. */
static int snap_agent_run(sm_engine *e, const char *cid, const char *user, snap_agent_read *r,
                          int *code, sm_error *err) {
  char agent[128];
  sandbox_agent_binary_path(agent, sizeof agent);
  const char *argv[] = {agent, "tar", "/workspace", "--stop"};
  json_object *cfg = sandbox_exec_config(argv, 4, user, 1);
  char id[SM_ENGINE_ID_MAX];
  int rc = sm_engine_exec_create(e, cid, cfg, id, err);
  json_object_put(cfg);
  if (rc) return rc;
  sm_exec_stream *s = NULL;
  rc = sm_engine_exec_open(e, id, snap_agent_output, r, &s, err);
  if (rc == 0) rc = snap_agent_drive(s, r, err);
  /* Closing the stream ends the agent's stdin: a stream given up on still
   * lets the sandbox's processes go on. */
  sm_exec_stream_close(s);
  if (rc == 0) rc = snap_agent_exit_code(e, id, code, err);
  return rc;
}

int sandbox_snap_agent_read(sm_engine *e, const char *cid, const char *user, const char *path,
                            int tee, const sandbox_snap_agent_hooks *hooks, int64_t *bytes,
                            int *fell_back, sm_error *err) {
  *fell_back = 0;
  if (user == NULL || *user == '\0') {
    *fell_back = 1;
    return 0;
  }
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path) >= (int)sizeof tmp)
    return sm_error_set(err, SM_EINVAL, "path too long: %s", path);
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) return sm_error_set_errno(err, SM_EIO, errno, "creating %s", tmp);
  snap_agent_read r = {.file = {fd, 0, INT64_MAX}, .tee = tee, .hooks = hooks};
  int code = -1;
  int rc = snap_agent_run(e, cid, user, &r, &code, err);
  if (rc == 0 && !r.started && (code == 126 || code == 127)) {
    /* Not installed yet (the runtime could not run it): installed, then
     * run again. An exec of its own costs more than this guess. */
    sm_error why = SM_ERROR_INIT;
    if (sandbox_agent_install(NULL, e, cid, &why) == 0) {
      r.diag_len = 0;
      r.diag[0] = '\0';
      r.foreign = 0;
      r.magic_seen = 0;
      rc = snap_agent_run(e, cid, user, &r, &code, err);
    } else {
      sm_log(SM_LOG_DEBUG, "snapshot of %s: no agent to read /workspace: %s", cid, why.message);
    }
  }
  if (rc == 0 && r.failed) rc = sm_error_set_errno(err, SM_EIO, r.failed, "writing %s", tmp);
  if (rc == 0 && (code != 0 || !r.started)) {
    sm_log(SM_LOG_DEBUG, "snapshot of %s: the agent did not read /workspace (exit %d): %s", cid,
           code, r.diag);
    *fell_back = 1;
  }
  if (rc == 0 && !*fell_back && fsync(fd) != 0) rc = sm_error_set_errno(err, SM_EIO, errno, "writing %s", tmp);
  if (close(fd) != 0 && rc == 0 && !*fell_back) rc = sm_error_set_errno(err, SM_EIO, errno, "writing %s", tmp);
  if (rc == 0 && !*fell_back && rename(tmp, path) != 0)
    rc = sm_error_set_errno(err, SM_EIO, errno, "renaming %s", tmp);
  if (rc || *fell_back) {
    unlink(tmp);
    return rc ? sm_error_wrap(err, "reading /workspace through the agent") : 0;
  }
  common_sync_dir_of(path);
  if (bytes) *bytes = r.file.bytes;
  return 0;
}
