/* The call driver (src/lib/sandbox/sandbox_call.c, exec.c, acquire.c, workspace/box.c)
 * walked by sm_run against the fake engine (tests/support/fake_engine.h):
 * acquire, copy in, exec, copy out and release, in a per_tool sandbox and
 * in a per_run one (its second call over the in-sandbox agent), with the
 * engine round trips each step costs; a timeout, stdin, a missing image, a
 * refused create, and a keyed sandbox removed behind the runner's back. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

#include "support/fake_engine.h"
#include "support/files.h"
#include "support/memio.h"
#include "support/xalloc.h"

#define IMAGE FAKE_ENGINE_IMAGE

typedef fake_world fixture;

static int setup(void **state) {
  fixture *f = xcalloc(1, sizeof *f);
  *state = f;
  return f && fake_world_open(f, "unit-call") == 0 ? 0 : -1;
}

static int teardown(void **state) {
  fake_world_close(*state);
  free(*state);
  return 0;
}

static void request(fixture *f, sm_run_request *req, sm_mode mode, const char *const *argv,
                    size_t argc) {
  fake_world_request(f, req, mode, argv, argc);
}

/* Runs req; fails the test (with the engine's log) when sm_run refused it. */
static void run(fixture *f, const sm_run_request *req, sm_run_result *out) {
  sm_error err = SM_ERROR_INIT;
  int rc = sm_run(f->runner, req, out, &err);
  if (rc != 0) {
    char *log = fake_engine_log(f->fe);
    print_error("sm_run: %d %s\nresult: %s (exit %d)\nstdout: %s\nstderr: %s\nengine log:\n%s", rc,
                err.message, out->error, out->exit_code, out->stdout_data ? out->stdout_data : "",
                out->stderr_data ? out->stderr_data : "", log);
    free(log);
  }
  assert_int_equal(rc, 0);
}

/* The call went well (the tool's exit code aside); else the engine's log. */
static void assert_ran(fixture *f, const sm_run_result *r) {
  if (r->failure_kind > SM_FAIL_TIMEOUT) {
    char *log = fake_engine_log(f->fe);
    print_error("result: %s (exit %d)\nstderr: %s\nengine log:\n%s", r->error, r->exit_code,
                r->stderr_data ? r->stderr_data : "", log);
    free(log);
  }
  assert_true(r->failure_kind <= SM_FAIL_TIMEOUT);
}

static char *host_file(fixture *f, const char *name) { return tf_read_at(f->ws, name); }

static void assert_file(fixture *f, const char *name, const char *text) {
  char *got = host_file(f, name);
  assert_non_null(got);
  assert_string_equal(got, text);
  free(got);
}

static int changed(const sm_run_result *r, const char *path) {
  for (size_t i = 0; i < r->n_files_changed; i++)
    if (strcmp(r->files_changed[i], path) == 0) return 1;
  return 0;
}

/* per_tool: a fresh container for the call, the workspace in by the
 * engine's upload, the tool's changes out, the container gone after. */
static void per_tool_walk(void **state) {
  fixture *f = *state;
  assert_int_equal(tf_write_at(f->ws, "in.txt", "from the host\n"), 0);
  assert_int_equal(tf_write_at(f->ws, "gone.txt", "delete me\n"), 0);
  char link[4200];
  snprintf(link, sizeof link, "%s/up", f->ws);
  assert_int_equal(symlink("../elsewhere", link), 0); /* made after the upload */
  const char *argv[] = {"sh", "-c",
                        "cat in.txt; echo made > out.txt; rm gone.txt; echo to-stderr >&2; "
                        "test \"$(readlink up)\" = ../elsewhere && "
                        "test \"$HOME\" -ef ."};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_TOOL, argv, 3);
  sm_run_result r;
  run(f, &req, &r);
  assert_ran(f, &r);
  assert_true(r.ok);
  assert_int_equal(r.exit_code, 0);
  assert_true(r.started);
  assert_string_equal(r.stdout_data, "from the host\n");
  assert_string_equal(r.stderr_data, "to-stderr\n");
  assert_int_equal(r.mode, SM_MODE_PER_TOOL);
  assert_true(r.sandbox_id[0] != '\0');
  assert_file(f, "out.txt", "made\n");
  assert_null(host_file(f, "gone.txt"));
  assert_true(changed(&r, "out.txt"));
  assert_true(changed(&r, "gone.txt"));
  sm_run_result_dispose(&r);
  /* The round trips of one per_tool call, and nothing left behind. */
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 1);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/*/start"), 1);
  assert_int_equal(fake_engine_count(f->fe, "PUT", "/archive"), 1);
  /* Four execs: the listing that waits for the upload, the link that the
   * engine's upload would refuse, the tool, the listing after it. */
  assert_int_equal(fake_engine_count(f->fe, "POST", "/exec/"), 4);
  assert_true(fake_engine_count(f->fe, "GET", "/archive") >= 1);
  assert_int_equal(fake_engine_count(f->fe, "DELETE", "/containers/"), 1);
  assert_int_equal(fake_engine_containers(f->fe), 0);
  assert_int_equal(fake_engine_volumes(f->fe), 0);
  /* The tool ran as the sandbox's user, not as the container's root. */
  char user[64];
  assert_int_equal(fake_engine_exec_user(f->fe, "cat in.txt", user, sizeof user), 0);
  assert_string_equal(user, "1000:1000");
}

/* per_run: the first call makes the sandbox and copies in through sandman's
 * unpacker; the second finds it in the runner's cache, runs over an agent
 * session and sees what the first left in the sandbox. */
static void per_run_walk(void **state) {
  fixture *f = *state;
  assert_int_equal(tf_write_at(f->ws, "in.txt", "one\n"), 0);
  const char *first[] = {"sh", "-c", "cat in.txt; echo kept > /tmp/state; echo 1 > out.txt"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_RUN, first, 3);
  req.run_id = "walk";
  sm_run_result r;
  run(f, &req, &r);
  assert_ran(f, &r);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "one\n");
  assert_false(r.reused);
  assert_file(f, "out.txt", "1\n");
  char id[SM_ENGINE_ID_MAX];
  snprintf(id, sizeof id, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 1);
  assert_int_equal(fake_engine_count(f->fe, "PUT", "/archive"), 0); /* the unpacker did it */
  char user[64];
  assert_int_equal(fake_engine_exec_user(f->fe, "untar", user, sizeof user), 0);
  assert_string_equal(user, "1000:1000");

  assert_int_equal(tf_write_at(f->ws, "in.txt", "two\n"), 0);
  const char *second[] = {"sh", "-c", "cat in.txt /tmp/state; echo 2 > out.txt"};
  req.argv = second;
  fake_engine_clear_log(f->fe);
  run(f, &req, &r);
  assert_ran(f, &r);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "two\nkept\n");
  assert_true(r.reused);
  assert_string_equal(r.sandbox_id, id);
  assert_file(f, "out.txt", "2\n");
  sm_run_result_dispose(&r);
  sm_agent_stats st;
  sm_runner_agent_stats(f->runner, &st);
  assert_int_equal(st.sessions_opened, 1);
  assert_true(st.calls >= 1);
  /* Found in the cache (no inspect); one exec, the agent's session, and
   * over it the call and the workspace's listing and upload. */
  assert_int_equal(fake_engine_count(f->fe, "GET", "/containers/*/json"), 0);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/*/exec"), 1);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 0);
  assert_int_equal(fake_engine_containers(f->fe), 1); /* kept for the run's next call */
}

/* A keyed sandbox removed behind the runner's back: the next call finds
 * its cached entry stale, looks again and makes it anew. */
static void per_run_gone(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "cat in.txt"};
  assert_int_equal(tf_write_at(f->ws, "in.txt", "hi\n"), 0);
  sm_run_request req;
  request(f, &req, SM_MODE_PER_RUN, argv, 3);
  req.run_id = "gone";
  sm_runner_set_agent(f->runner, 0);
  sm_run_result r;
  run(f, &req, &r);
  assert_ran(f, &r);
  assert_true(r.ok);
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_engine(f->runner, &e, &err), 0);
  assert_int_equal(sm_engine_container_remove(e, r.sandbox_id, 1, 1, &err), 0);
  sm_run_result_dispose(&r);
  run(f, &req, &r);
  assert_ran(f, &r);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "hi\n");
  assert_false(r.reused);
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 2);
}

/* The call outlives its timeout: killed, 124. */
static void timeout(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sleep", "30"};
  /* per_tool, then per_run twice: through the engine, then over the agent. */
  for (int keyed = 0; keyed < 3; keyed++) {
    sm_run_request req;
    request(f, &req, keyed ? SM_MODE_PER_RUN : SM_MODE_PER_TOOL, argv, 2);
    req.run_id = "timeout";
    req.workspace = NULL;
    req.settings.timeout_s = 0.3;
    sm_run_result r;
    run(f, &req, &r);
    assert_true(r.timed_out);
    assert_int_equal(r.exit_code, 124);
    assert_false(r.ok);
    sm_run_result_dispose(&r);
  }
  /* per_tool: the container was killed; per_run: the call's processes, by
   * sandman's kill script in the sandbox. */
  assert_int_equal(fake_engine_count(f->fe, "POST", "/kill"), 1);
  sm_agent_stats st;
  sm_runner_agent_stats(f->runner, &st);
  assert_int_equal(st.calls, 1);
  char user[64];
  assert_int_equal(fake_engine_exec_user(f->fe, "sandman-kill", user, sizeof user), 0);
  assert_string_equal(user, "1000:1000");
}

typedef struct stopper {
  fake_engine *fe;
  sm_runner *runner;
  int done;
} stopper;

/* An output callback that stops the sandbox the way the kernel's OOM killer
 * takes a container down, once the tool has said something. */
static int stop_on_output(void *ud, int stream, const char *data, size_t len) {
  (void)stream;
  (void)data;
  (void)len;
  stopper *s = ud;
  if (s->done++) return 0;
  json_object *list = NULL;
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  const char *labels[] = {"io.sandman.instance=unit-call"};
  /* Another engine client: this thread's is in the middle of the call. */
  sm_engine_options o = SM_ENGINE_OPTIONS_INIT;
  o.host = fake_engine_host(s->fe);
  if (sm_engine_new(&e, &o, &err) == 0 &&
      sm_engine_container_list(e, 1, labels, 1, &list, &err) == 0) {
    for (size_t i = 0; i < json_object_array_length(list); i++) {
      json_object *id = NULL;
      json_object_object_get_ex(json_object_array_get_idx(list, i), "Id", &id);
      fake_engine_stop_container(s->fe, json_object_get_string(id), 1);
    }
  }
  json_object_put(list);
  sm_engine_free(e);
  return 0;
}

/* The sandbox dies of OOM under the call: 137 and oom_killed, through the
 * engine's exec (per_tool) and over an agent session (per_run). */
static void out_of_memory(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "echo start; exec sleep 30"};
  for (int i = 0; i < 2; i++) {
    sm_run_request req;
    request(f, &req, i ? SM_MODE_PER_RUN : SM_MODE_PER_TOOL, argv, 3);
    req.workspace = NULL;
    req.run_id = "oom";
    sm_run_result r;
    if (i) {
      const char *warm[] = {"true"};
      req.argv = warm;
      req.argc = 1;
      run(f, &req, &r); /* the next call goes over an agent session */
      sm_run_result_dispose(&r);
      req.argv = argv;
      req.argc = 3;
    }
    stopper st = {f->fe, f->runner, 0};
    req.on_output = stop_on_output;
    req.on_output_ud = &st;
    run(f, &req, &r);
    assert_int_equal(r.exit_code, 137);
    assert_true(r.oom_killed);
    assert_int_equal(r.failure_kind, SM_FAIL_TOOL);
    sm_run_result_dispose(&r);
  }
  sm_agent_stats as;
  sm_runner_agent_stats(f->runner, &as);
  assert_int_equal(as.calls, 1);
}

/* The runtime could not start the call's wrapper: sandman's failure, in
 * words that say what is missing. */
static void not_started(void **state) {
  fixture *f = *state;
  const char *argv[] = {"true"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_TOOL, argv, 1);
  req.workspace = NULL;
  fake_engine_fail_exec(f->fe, "sandman-call",
                        "OCI runtime exec failed: exec failed: unable to "
                        "start container process: exec: \"/bin/sh\": stat /bin/sh: no such file "
                        "or directory: unknown",
                        126, 1);
  sm_run_result r;
  run(f, &req, &r);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "no /bin/sh"));
  sm_run_result_dispose(&r);
  fake_engine_fail_exec(f->fe, "sandman-call",
                        "OCI runtime exec failed: exec failed: "
                        "container_linux.go: starting container process caused: \"/bin/sh -c "
                        "exec 3>&2\": resource temporarily unavailable: unknown",
                        126, 1);
  run(f, &req, &r);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "could not start the call"));
  assert_non_null(strstr(r.error, "/bin/sh -c ...")); /* the wrapper's text left out */
  sm_run_result_dispose(&r);
}

/* Leased credentials: in a per_run sandbox the call runs in a container of
 * its own that shares the sandbox's /workspace, through the engine's exec
 * (never the agent), bound to the runner by a watcher; that container goes
 * with the call. */
static void leased(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "echo ready > /workspace/shared.txt"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_RUN, argv, 3);
  req.workspace = NULL;
  req.run_id = "leased";
  sm_run_result r;
  run(f, &req, &r); /* makes the sandbox */
  assert_true(r.ok);
  char keyed[SM_ENGINE_ID_MAX];
  snprintf(keyed, sizeof keyed, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
  const char *secret[] = {"LEASED_TOKEN=s3cret"};
  const char *show[] = {"sh", "-c",
                        "cat shared.txt; test \"$LEASED_TOKEN\" = s3cret && echo has-it; "
                        "echo left > from-lease.txt"};
  req.argv = show;
  req.secret_env = secret;
  req.n_secret_env = 1;
  run(f, &req, &r);
  assert_ran(f, &r);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "ready\nhas-it\n");
  sm_run_result_dispose(&r);
  sm_agent_stats st;
  sm_runner_agent_stats(f->runner, &st);
  assert_int_equal(st.calls, 0);
  /* Its own container, watched as root, gone after the call. */
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 2);
  char user[64];
  assert_int_equal(fake_engine_exec_user(f->fe, "sandman-watch", user, sizeof user), 0);
  assert_string_equal(user, "0:0");
  assert_int_equal(fake_engine_containers(f->fe), 1);
  /* What it left in /workspace, the sandbox's next call sees. */
  const char *look[] = {"cat", "from-lease.txt"};
  req.argv = look;
  req.argc = 2;
  req.secret_env = NULL;
  req.n_secret_env = 0;
  run(f, &req, &r);
  assert_string_equal(r.stdout_data, "left\n");
  assert_string_equal(r.sandbox_id, keyed);
  sm_run_result_dispose(&r);
}

static void with_stdin(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "tr a-z A-Z; exit 7"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_TOOL, argv, 3);
  req.workspace = NULL;
  mem_reader in = {"quiet words\n", 12, 0, 4};
  req.stdin_read = read_mem;
  req.stdin_ud = &in;
  sm_run_result r;
  run(f, &req, &r);
  assert_int_equal(r.exit_code, 7);
  assert_false(r.ok);
  assert_int_equal(r.failure_kind, SM_FAIL_TOOL);
  assert_string_equal(r.stdout_data, "QUIET WORDS\n");
  sm_run_result_dispose(&r);
}

/* Nothing is made when the image is missing or the engine refuses the
 * container; the result says why. */
static void refusals(void **state) {
  fixture *f = *state;
  const char *argv[] = {"true"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_TOOL, argv, 1);
  req.workspace = NULL;
  snprintf(req.settings.image, sizeof req.settings.image, "no/such:image");
  sm_run_result r;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_run(f->runner, &req, &r, &err), 0);
  assert_false(r.started);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "not present"));
  sm_run_result_dispose(&r);
  snprintf(req.settings.image, sizeof req.settings.image, "%s", IMAGE);
  fake_engine_fail(f->fe, "POST", "/containers/create", 500, "no space left on device", 1);
  assert_int_equal(sm_run(f->runner, &req, &r, &err), 0);
  assert_false(r.started);
  assert_non_null(strstr(r.error, "no space left on device"));
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/exec"), 0);
  assert_int_equal(fake_engine_containers(f->fe), 0);
  assert_int_equal(fake_engine_volumes(f->fe), 0);
}

/* A runner of its own (no lookup cache) on the same state and instance. */
static sm_runner *fresh_runner(fixture *f) {
  sm_runner *r = fake_engine_runner(f->fe, f->state, "unit-call");
  assert_non_null(r);
  return r;
}

static void run_with(fixture *f, sm_runner *runner, const sm_run_request *req, sm_run_result *out) {
  sm_runner *mine = f->runner;
  f->runner = runner;
  run(f, req, out);
  f->runner = mine;
}

/* A keyed sandbox found by a runner that did not make it: used as it is,
 * replaced when its configuration changed or it stopped, refused when
 * another instance made it. */
static void keyed_found(void **state) {
  fixture *f = *state;
  const char *argv[] = {"sh", "-c", "echo here"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_RUN, argv, 3);
  req.workspace = NULL;
  req.run_id = "found";
  sm_run_result r;
  run(f, &req, &r);
  assert_ran(f, &r);
  char first[SM_ENGINE_ID_MAX];
  snprintf(first, sizeof first, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);

  sm_runner *other = fresh_runner(f);
  run_with(f, other, &req, &r);
  assert_ran(f, &r);
  assert_true(r.reused);
  assert_string_equal(r.sandbox_id, first);
  sm_run_result_dispose(&r);
  assert_int_equal(fake_engine_count(f->fe, "POST", "/containers/create"), 1);

  req.settings.memory = 256 * 1024 * 1024;
  run_with(f, other, &req, &r);
  assert_ran(f, &r);
  assert_false(r.reused);
  assert_string_equal(r.replaced_previous, first);
  assert_non_null(strstr(r.replaced_because, "memory"));
  char second[SM_ENGINE_ID_MAX];
  snprintf(second, sizeof second, "%s", r.sandbox_id);
  sm_run_result_dispose(&r);
  sm_runner_free(other);

  assert_int_equal(fake_engine_stop_container(f->fe, second, 0), 0);
  other = fresh_runner(f);
  run_with(f, other, &req, &r);
  assert_ran(f, &r);
  assert_string_equal(r.replaced_previous, second);
  assert_string_equal(r.replaced_because, "it was not running");
  sm_run_result_dispose(&r);
  sm_runner_free(other);

  /* The same name on a container of someone else's. */
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_runner_engine(f->runner, &e, &err), 0);
  json_object *insp = NULL, *name = NULL;
  run(f, &req, &r);
  assert_int_equal(sm_engine_container_inspect(e, r.sandbox_id, &insp, &err), 0);
  assert_true(json_object_object_get_ex(insp, "Name", &name));
  char taken[300];
  snprintf(taken, sizeof taken, "%s", json_object_get_string(name) + 1);
  json_object_put(insp);
  assert_int_equal(sm_engine_container_remove(e, r.sandbox_id, 1, 1, &err), 0);
  sm_run_result_dispose(&r);
  json_object *cfg = json_object_new_object(), *labels = json_object_new_object();
  json_object_object_add(cfg, "Image", json_object_new_string(IMAGE));
  json_object_object_add(labels, "io.sandman.managed", json_object_new_string("true"));
  json_object_object_add(labels, "io.sandman.instance", json_object_new_string("someone-else"));
  json_object_object_add(cfg, "Labels", labels);
  char foreign[SM_ENGINE_ID_MAX];
  assert_int_equal(sm_engine_container_create(e, taken, cfg, foreign, NULL, &err), 0);
  json_object_put(cfg);
  assert_int_equal(sm_engine_container_start(e, foreign, &err), 0);
  other = fresh_runner(f);
  run_with(f, other, &req, &r);
  assert_int_equal(r.failure_kind, SM_FAIL_SANDBOX);
  assert_non_null(strstr(r.error, "did not make"));
  assert_false(r.started);
  sm_run_result_dispose(&r);
  sm_runner_free(other);
}

/* A per_worker sandbox is pinned to the project of its first call. */
static void worker_pinned(void **state) {
  fixture *f = *state;
  const char *argv[] = {"true"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_WORKER, argv, 1);
  req.workspace = NULL;
  req.worker_id = "w1";
  req.project = "p1";
  sm_run_result r;
  run(f, &req, &r);
  assert_ran(f, &r);
  assert_true(r.ok);
  sm_run_result_dispose(&r);
  req.project = "p2";
  run(f, &req, &r);
  assert_int_equal(r.failure_kind, SM_FAIL_POLICY);
  assert_non_null(strstr(r.error, "pinned to project 'p1'"));
  sm_run_result_dispose(&r);
}

/* Between two calls in a per_run sandbox the host deletes a file and adds
 * a link that leaves the workspace: the sandbox gets both (through the
 * engine's execs, the agent being off); with its manifest spoiled, the
 * sandbox's side is cleared before the copy. */
static void keyed_workspace(void **state) {
  fixture *f = *state;
  sm_runner_set_agent(f->runner, 0);
  assert_int_equal(tf_write_at(f->ws, "keep.txt", "k\n"), 0);
  assert_int_equal(tf_write_at(f->ws, "drop.txt", "d\n"), 0);
  const char *list[] = {"sh", "-c", "ls -A | sort | tr '\\n' ' '; echo stale > /workspace/.stale"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_RUN, list, 3);
  req.run_id = "ws";
  req.sync = SM_SYNC_IN;
  sm_run_result r;
  run(f, &req, &r);
  assert_ran(f, &r);
  assert_string_equal(r.stdout_data, "drop.txt keep.txt ");
  sm_run_result_dispose(&r);
  char path[4200];
  snprintf(path, sizeof path, "%s/drop.txt", f->ws);
  assert_int_equal(unlink(path), 0);
  snprintf(path, sizeof path, "%s/up", f->ws);
  assert_int_equal(symlink("../somewhere-else", path), 0);
  run(f, &req, &r);
  assert_ran(f, &r);
  assert_string_equal(r.stdout_data, ".stale keep.txt up ");
  sm_run_result_dispose(&r);
  /* A manifest that cannot be read: the next copy clears the sandbox's
   * side first, or what the sandbox holds would pass for the host's. */
  char manifests[4200];
  snprintf(manifests, sizeof manifests, "%s/workspaces", f->state);
  DIR *d = opendir(manifests);
  assert_non_null(d);
  int spoiled = 0;
  for (struct dirent *de; (de = readdir(d)) != NULL;) {
    if (de->d_name[0] == '.') continue;
    assert_int_equal(tf_write_at(manifests, de->d_name, "not a manifest\n"), 0);
    spoiled++;
  }
  closedir(d);
  assert_int_equal(spoiled, 1);
  run(f, &req, &r);
  assert_ran(f, &r);
  assert_string_equal(r.stdout_data, "keep.txt up ");
  sm_run_result_dispose(&r);
}

/* The warm pool makes a per_tool sandbox ahead, with an agent session: the
 * call takes it and runs over the session, the pool makes the next one,
 * and the used one goes in the background. */
static void warm_pool(void **state) {
  fixture *f = *state;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(tf_write_at(f->ws, "in.txt", "pooled\n"), 0);
  const char *argv[] = {"sh", "-c", "cat in.txt; echo back > out.txt"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_TOOL, argv, 3);
  assert_int_equal(sm_runner_pool_set_size(f->runner, 1, &err), 0);
  assert_int_equal(sm_runner_pool_prepare(f->runner, &req, &err), 0);
  assert_int_equal(sm_runner_settle(f->runner, 60, &err), 0);
  sm_pool_stats ps;
  sm_runner_pool_stats(f->runner, &ps);
  assert_int_equal(ps.ready, 1);
  fake_engine_clear_log(f->fe);
  sm_run_result r;
  run(f, &req, &r);
  assert_ran(f, &r);
  assert_true(r.ok);
  assert_string_equal(r.stdout_data, "pooled\n");
  assert_file(f, "out.txt", "back\n");
  sm_run_result_dispose(&r);
  sm_agent_stats as;
  sm_runner_agent_stats(f->runner, &as);
  assert_int_equal(as.calls, 1);
  /* No inspect of the sandbox (the background removal of the used one
   * looks for its egress relay, "<name>-egress"). */
  assert_int_equal(fake_engine_count(f->fe, "GET", "/containers/*/json"),
                   fake_engine_count(f->fe, "GET", "-egress/json"));
  assert_int_equal(sm_runner_settle(f->runner, 60, &err), 0);
  sm_runner_pool_stats(f->runner, &ps);
  assert_int_equal(ps.taken, 1);
  assert_int_equal(ps.ready, 1);
  assert_int_equal(fake_engine_containers(f->fe), 1); /* the next one, ready */
  sm_runner_pool_drain(f->runner);
  assert_int_equal(fake_engine_containers(f->fe), 0);
}

/* The tool kills the agent that runs it: 137, and the copy out falls back
 * to the engine's execs. */
static void agent_killed(void **state) {
  fixture *f = *state;
  const char *warm[] = {"true"};
  sm_run_request req;
  request(f, &req, SM_MODE_PER_RUN, warm, 1);
  req.run_id = "killer";
  sm_run_result r;
  run(f, &req, &r);
  assert_ran(f, &r);
  sm_run_result_dispose(&r);
  const char *argv[] = {"sh", "-c", "echo made > out.txt; kill -9 $PPID; sleep 30"};
  req.argv = argv;
  req.argc = 3;
  run(f, &req, &r);
  assert_ran(f, &r);
  assert_int_equal(r.exit_code, 137);
  assert_false(r.oom_killed);
  sm_run_result_dispose(&r);
  assert_file(f, "out.txt", "made\n");
  sm_agent_stats as;
  sm_runner_agent_stats(f->runner, &as);
  assert_int_equal(as.calls, 1);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(per_tool_walk), T(per_run_walk),    T(per_run_gone), T(timeout),      T(with_stdin),
      T(out_of_memory), T(not_started),     T(leased),       T(refusals),     T(keyed_found),
      T(worker_pinned), T(keyed_workspace), T(warm_pool),    T(agent_killed),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
