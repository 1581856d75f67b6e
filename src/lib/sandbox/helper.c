/* Engine execs of sandman's own in a sandbox (helper.h). Below both the
 * agent's host side (agent.c installs and opens sessions with them) and the
 * call's exec (exec.c), so that neither needs the other for this. */
#include <time.h>

#include "common/text.h"
#include "common/thread.h"
#include "sandbox/helper.h"

static int helper_output(void *ud, int stream, const char *data, size_t len) {
  common_buf *b = ud;
  if (stream == 1) common_buf_append_capped(b, data, len);
  return 0;
}

json_object *sandbox_exec_config(const char *const *argv, size_t argc, const char *user,
                                 int attach_stdin) {
  json_object *cfg = json_object_new_object();
  json_object_object_add(cfg, "Cmd", common_json_strings(argv, argc));
  if (user) json_object_object_add(cfg, "User", json_object_new_string(user));
  json_object_object_add(cfg, "WorkingDir", json_object_new_string("/"));
  json_object_object_add(cfg, "AttachStdin", json_object_new_boolean(attach_stdin));
  json_object_object_add(cfg, "AttachStdout", json_object_new_boolean(1));
  json_object_object_add(cfg, "AttachStderr", json_object_new_boolean(1));
  json_object_object_add(cfg, "Tty", json_object_new_boolean(0));
  return cfg;
}

int sandbox_exec_helper(sm_engine *e, const char *cid, const char *const *argv, size_t argc,
                        const char *user, sm_read_fn in, void *in_ud, double timeout_s,
                        common_buf *out, int *exit_code, sm_error *err) {
  json_object *cfg = sandbox_exec_config(argv, argc, user, in != NULL);
  char id[SM_ENGINE_ID_MAX];
  int rc = sm_engine_exec_create(e, cid, cfg, id, err);
  json_object_put(cfg);
  if (rc) return rc;
  sm_exec_io io = SM_EXEC_IO_INIT;
  io.output = out ? helper_output : NULL;
  io.output_ud = out;
  io.stdin_read = in;
  io.stdin_ud = in_ud;
  io.timeout_s = timeout_s;
  rc = sm_engine_exec_start(e, id, &io, err);
  if (rc) return rc;
  if (exit_code) {
    int running = 1;
    for (int i = 0; i < 100 && running; i++) {
      rc = sm_engine_exec_inspect(e, id, &running, exit_code, NULL, err);
      if (rc) return rc;
      if (running) common_sleep_ms(20);
    }
  }
  return 0;
}
