/* A fake engine with a runner and folders for a test of calls
 * (fake_engine.h). */
#include <stdio.h>
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
