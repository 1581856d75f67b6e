/* How a call finds its keyed sandbox (src/lib/sandbox/acquire.c), against the
 * fake engine (tests/support/fake_engine.h): a sandbox made ahead as a
 * resource (sm_sandbox_create) is used as it was made and never replaced;
 * one named by its container name likewise, and refused when it is gone,
 * stopped or another worker's; `sandman exec` (existing) never makes one;
 * a replacement says which settings changed and waits for no call in
 * flight; a sandbox paused behind the runner's back is resumed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>
#include <sandman/state.h>

#include "support/fake_engine.h"
#include "support/files.h"

#define OTHER_IMAGE "sandman-test/other:latest"

typedef fake_world fixture;

static int setup(void **state) {
  if (fake_world_setup(state, "unit-acquire") != 0) return -1;
  fixture *f = *state;
  fake_engine_add_image(f->fe, OTHER_IMAGE, "");
  sm_runner_set_agent(f->runner, 0); /* every call through the engine: what it asks is seen */
  return 0;
}

static const char *const echo_argv[] = {"echo", "in-it"};

static void keyed(fixture *f, sm_run_request *req, const char *run_id) {
  fake_world_request(f, req, SM_MODE_PER_RUN, echo_argv, 2);
  req->workspace = NULL;
  req->run_id = run_id;
}

/* The call ran in sandbox id (as it was: not made, not replaced). */
static void assert_ran_in(fixture *f, const sm_run_request *req, const char *id) {
  sm_run_result r;
  assert_int_equal(fake_world_run(f, req, &r, 1), 0);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "in-it\n");
  assert_string_equal(r.sandbox_id, id);
  assert_true(r.reused);
  assert_string_equal(r.replaced_previous, "");
  sm_run_result_dispose(&r);
}

/* The call is refused, with `words` in its error and the failure kind. */
static void assert_refused(fixture *f, const sm_run_request *req, sm_failure_kind kind,
                           const char *words) {
  sm_run_result r;
  assert_int_equal(fake_world_run(f, req, &r, 0), 0);
  if (strstr(r.error, words) == NULL || r.failure_kind != kind)
    print_error("kind %d: %s\n", (int)r.failure_kind, r.error);
  assert_int_equal(r.failure_kind, kind);
  assert_non_null(strstr(r.error, words));
  assert_false(r.started);
  sm_run_result_dispose(&r);
}

/* The name of the container id, into name. */
static void name_of(fixture *f, const char *id, char *name, size_t len) {
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  json_object *insp = NULL, *n = NULL;
  assert_int_equal(sm_runner_engine(f->runner, &e, &err), 0);
  assert_int_equal(sm_engine_container_inspect(e, id, &insp, &err), 0);
  assert_true(json_object_object_get_ex(insp, "Name", &n));
  snprintf(name, len, "%s", json_object_get_string(n) + 1);
  json_object_put(insp);
}

/* A sandbox made ahead: used by calls of its keys and by its name whatever
 * their settings, never made twice, and refused once it stopped. */
static void resource(void **state) {
  fixture *f = *state;
  sm_run_request req;
  keyed(f, &req, "res");
  char id[SM_ENGINE_ID_MAX], name[SM_NAME_MAX], again[SM_ENGINE_ID_MAX];
  sm_error err = SM_ERROR_INIT;
  const char *labels[] = {"team=core"};
  sm_sandbox_meta meta = {.template_name = NULL, .timeout_s = 0, .labels = labels, .n_labels = 1};
  req.meta = &meta;
  assert_int_equal(sm_sandbox_create(f->runner, &req, id, name, &err), 0);
  assert_true(id[0] != '\0');
  assert_int_equal(fake_engine_containers(f->fe), 1);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/exec"), 0); /* nothing ran in it */
  assert_int_equal(sm_sandbox_create(f->runner, &req, again, NULL, &err), SM_ECONFLICT);
  assert_string_equal(again, id);
  assert_non_null(strstr(err.message, "exists already"));
  req.meta = NULL; /* calls carry none */

  req.settings.memory += 64 * 1024 * 1024; /* another configuration: still this one */
  assert_ran_in(f, &req, id);
  sm_run_request named;
  keyed(f, &named, NULL);
  named.sandbox = name;
  named.settings.cpu = 1.5;
  assert_ran_in(f, &named, id);
  /* A leased call would run beside it with the call's settings: refused. */
  const char *secret[] = {"TOKEN=x"};
  req.secret_env = secret;
  req.n_secret_env = 1;
  assert_refused(f, &req, SM_FAIL_POLICY, "leased credentials");
  req.secret_env = NULL;
  req.n_secret_env = 0;

  assert_int_equal(fake_engine_stop_container(f->fe, id, 0), 0);
  assert_refused(f, &req, SM_FAIL_SANDBOX, "is not running");
  assert_refused(f, &named, SM_FAIL_SANDBOX, "never replaced by a call");
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 1);
}

/* A sandbox named by its container name: used as it is; refused when it
 * is another worker's or gone. */
static void named_refusals(void **state) {
  fixture *f = *state;
  sm_run_request req;
  keyed(f, &req, "named");
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  char id[SM_ENGINE_ID_MAX];
  snprintf(id, sizeof id, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
  char name[SM_NAME_MAX];
  name_of(f, id, name, sizeof name);
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_engine(f->runner, &e, &err), 0);

  sm_run_request named;
  keyed(f, &named, NULL);
  named.sandbox = name;
  assert_ran_in(f, &named, id);
  /* A runner that has not used it (this one's cache knows it by name). */
  char worker[256];
  assert_int_equal(sm_principal_worker("w-other", worker, sizeof worker, &err), 0);
  named.principal = worker;
  /* This runner's cache knows it, found by another principal's call: the
   * cache is not a way around the owner label. */
  assert_refused(f, &named, SM_FAIL_POLICY, "belongs to another worker");
  sm_runner *mine = f->runner;
  f->runner = fake_engine_runner(f->fe, f->state, "unit-acquire");
  assert_non_null(f->runner);
  assert_refused(f, &named, SM_FAIL_POLICY, "belongs to another worker");
  sm_runner_free(f->runner);
  f->runner = mine;
  named.principal = NULL;
  assert_int_equal(sm_engine_container_remove(e, id, 1, 1, &err), 0);
  assert_refused(f, &named, SM_FAIL_SANDBOX, "no such sandbox");
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 1);
  /* Named in mode per_tool: refused, never run in a fresh container. */
  named.settings.mode = SM_MODE_PER_TOOL;
  sm_error bad = SM_ERROR_INIT;
  assert_int_equal(sm_run(f->runner, &named, &r, &bad), SM_EINVAL);
  assert_non_null(strstr(bad.message, "per_run or per_worker"));
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 1);
}

/* `sandman exec` (existing) uses the run's sandbox and never makes one. */
static void existing_only(void **state) {
  fixture *f = *state;
  sm_run_request req;
  keyed(f, &req, "exec-only");
  req.existing = 1;
  assert_refused(f, &req, SM_FAIL_SANDBOX, "it is made by a call (sandman run) first");
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 0);
  req.existing = 0;
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  char id[SM_ENGINE_ID_MAX];
  snprintf(id, sizeof id, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
  req.existing = 1;
  assert_ran_in(f, &req, id);
}

/* A replacement says what changed, in the settings' own names. */
static void replace_reasons(void **state) {
  fixture *f = *state;
  sm_run_request req;
  keyed(f, &req, "reasons");
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  sm_run_result_dispose(&r);
  snprintf(req.settings.image, sizeof req.settings.image, "%s", OTHER_IMAGE);
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_string_equal(r.replaced_because,
                      "image changed (" FAKE_ENGINE_IMAGE " -> " OTHER_IMAGE ")");
  sm_run_result_dispose(&r);
  req.settings.cpu = 0.5;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_string_equal(r.replaced_because, "cpu changed");
  sm_run_result_dispose(&r);
  req.settings.memory += 100 * 1024 * 1024;
  req.settings.pids = 77;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_string_equal(r.replaced_because, "memory, pids changed");
  assert_true(r.ok);
  sm_run_result_dispose(&r);
  /* A setting the reasons do not name (the read-only root). */
  req.settings.read_only_root = !req.settings.read_only_root;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_string_equal(r.replaced_because, "its configuration changed");
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_containers(f->fe), 1);
}

/* While a call is in flight in the sandbox (its busy lock held), neither a
 * replacement nor a leased call (which needs the sandbox alone) goes
 * ahead: each waits up to its timeout, then is refused, and nothing was
 * removed. Once the call is over both go. */
static void busy_sandbox(void **state) {
  fixture *f = *state;
  sm_run_request req;
  keyed(f, &req, "busy");
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  char id[SM_ENGINE_ID_MAX], name[SM_NAME_MAX];
  snprintf(id, sizeof id, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
  name_of(f, id, name, sizeof name);
  sm_state_lock *in_flight = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_state_busy_acquire(f->state, name, &in_flight, &err), 0);

  req.settings.timeout_s = 1; /* how long each waits */
  int64_t memory = req.settings.memory;
  req.settings.memory += 200 * 1024 * 1024;
  assert_refused(f, &req, SM_FAIL_SANDBOX, "must be replaced");
  req.settings.memory = memory;
  const char *secret[] = {"TOKEN=x"};
  req.secret_env = secret;
  req.n_secret_env = 1;
  assert_refused(f, &req, SM_FAIL_SANDBOX, "is needed alone by a call with leased credentials");
  assert_int_equal(fake_engine_count(f->fe, "DELETE", "/containers/"), 0);

  sm_state_unlock(in_flight);
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_true(r.ok);
  sm_run_result_dispose(&r);
  req.secret_env = NULL;
  req.n_secret_env = 0;
  req.settings.memory += 200 * 1024 * 1024;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_string_equal(r.replaced_previous, id);
  sm_run_result_dispose(&r);
}

/* Paused behind the runner's back (docker pause): the cached sandbox
 * refuses the exec, the call looks again, resumes it and runs. */
static void paused_behind(void **state) {
  fixture *f = *state;
  sm_run_request req;
  keyed(f, &req, "paused");
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  char id[SM_ENGINE_ID_MAX];
  snprintf(id, sizeof id, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_engine(f->runner, &e, &err), 0);
  assert_int_equal(sm_engine_container_pause(e, id, &err), 0);
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "in-it\n");
  assert_string_equal(r.sandbox_id, id);
  assert_string_equal(r.resumed, "frozen");
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/unpause"), 1);
}

/* Another worker's call naming a sandbox at rest by its id is refused
 * before the sandbox is brought back: it stays frozen. */
static void rest_owner_first(void **state) {
  fixture *f = *state;
  sm_run_request req;
  keyed(f, &req, "resting");
  sm_run_result r;
  assert_int_equal(fake_world_run(f, &req, &r, 1), 0);
  char id[SM_ENGINE_ID_MAX];
  snprintf(id, sizeof id, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
  char name[SM_NAME_MAX];
  name_of(f, id, name, sizeof name);
  sm_error err = SM_ERROR_INIT;
  sm_rest_options o = SM_REST_OPTIONS_INIT;
  sm_rest_report rep;
  assert_int_equal(sm_sandbox_pause(f->runner, name, &o, &rep, &err), 0);
  assert_string_equal(rep.state, "frozen");

  sm_run_request named;
  keyed(f, &named, NULL);
  named.sandbox = name;
  char worker[256];
  assert_int_equal(sm_principal_worker("w-other", worker, sizeof worker, &err), 0);
  named.principal = worker;
  assert_refused(f, &named, SM_FAIL_POLICY, "belongs to another worker");
  assert_int_equal(fake_engine_count(f->fe, "POST", "/unpause"), 0);
  /* Its owner's call brings it back. */
  named.principal = NULL;
  assert_int_equal(fake_world_run(f, &named, &r, 1), 0);
  assert_string_equal(r.resumed, "frozen");
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/unpause"), 1);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, fake_world_teardown)
  const struct CMUnitTest tests[] = {
      T(resource),        T(named_refusals), T(existing_only),
      T(replace_reasons), T(busy_sandbox),   T(paused_behind),
      T(rest_owner_first),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
