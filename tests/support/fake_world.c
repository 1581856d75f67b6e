/* A fake engine with a runner and folders for a test of calls
 * (fake_engine.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/fake_engine.h"
#include "support/files.h"

int fake_world_open(fake_world *w, const char *instance) {
  memset(w, 0, sizeof *w);
  if ((w->fe = fake_engine_start()) == NULL) {
    perror("fake engine");
    return -1;
  }
  fake_engine_add_image(w->fe, FAKE_ENGINE_IMAGE, "");
  if (tf_temp_dir(w->state, sizeof w->state, "sandman-test-state") != 0 ||
      tf_temp_dir(w->ws, sizeof w->ws, "sandman-test-ws") != 0) {
    perror("fake engine: a temporary folder");
    return -1;
  }
  w->runner = fake_engine_runner(w->fe, w->state, instance);
  return w->runner ? 0 : -1;
}

void fake_world_close(fake_world *w) {
  sm_runner_free(w->runner);
  fake_engine_stop(w->fe);
  if (w->state[0]) tf_rm_rf(w->state);
  if (w->ws[0]) tf_rm_rf(w->ws);
  memset(w, 0, sizeof *w);
}

int fake_world_setup(void **state, const char *instance) {
  fake_world *w = calloc(1, sizeof *w);
  *state = w;
  return w && fake_world_open(w, instance) == 0 ? 0 : -1;
}

int fake_world_teardown(void **state) {
  fake_world *w = *state;
  if (w) fake_world_close(w);
  free(w);
  *state = NULL;
  return 0;
}

void fake_world_request(const fake_world *w, sm_run_request *req, sm_mode mode,
                        const char *const *argv, size_t argc) {
  sm_run_request_init(req);
  req->settings.mode = mode;
  snprintf(req->settings.image, sizeof req->settings.image, "%s", FAKE_ENGINE_IMAGE);
  req->settings.timeout_s = 60;
  req->argv = argv;
  req->argc = argc;
  req->workspace = w->ws;
  req->tool = "shell";
}

int fake_world_run(fake_world *w, const sm_run_request *req, sm_run_result *out, int say_failure) {
  sm_error err = SM_ERROR_INIT;
  int rc = sm_run(w->runner, req, out, &err);
  if (rc != 0 || (say_failure && out->failure_kind > SM_FAIL_TIMEOUT)) {
    char *log = fake_engine_log(w->fe);
    fprintf(stderr,
            "sm_run: %d %s\nresult: %s (exit %d)\nstdout: %s\nstderr: %s\nengine log:\n%s\n", rc,
            err.message, out->error, out->exit_code, out->stdout_data ? out->stdout_data : "",
            out->stderr_data ? out->stderr_data : "", log ? log : "");
    free(log);
  }
  return rc;
}

int fake_world_expect(fake_world *w, const sm_run_request *req, const char *stdout_text) {
  sm_run_result r;
  int rc = fake_world_run(w, req, &r, 1);
  const char *got = r.stdout_data ? r.stdout_data : "";
  int bad = rc == 0 && (!r.ok || (stdout_text && strcmp(got, stdout_text) != 0));
  if (bad)
    fprintf(stderr, "expected ok and stdout \"%s\"; got ok %d, exit %d, stdout \"%s\", error %s\n",
            stdout_text ? stdout_text : "(any)", r.ok, r.exit_code, got, r.error);
  if (rc == 0) sm_run_result_dispose(&r);
  return rc || bad ? -1 : 0;
}
