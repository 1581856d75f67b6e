/* A fake Docker Engine for the unit tests (curl's tests/server/ are the
 * model): a thread in the test's own process serving the Engine API on a
 * unix socket in a temporary folder, so that the library's real code (the
 * engine client, the call driver, the workspace copies, the in-sandbox
 * agent) runs in a unit test or a debugger without Docker.
 *
 * What it answers (API 1.41, any /v1.NN prefix):
 *   /_ping (Api-Version header), /version, /info (runtimes runc and runsc)
 *   images: inspect of the images added with fake_engine_add_image or
 *     committed (POST /commit: an image with the container's image's user,
 *     no files of its own)
 *   containers: create, start, inspect, list by label, wait, stop, kill,
 *     pause, unpause, rename, remove; each has a folder on the host for its own
 *     files, its tmpfs mounts and its volumes (named volumes live on until
 *     removed); a paused container refuses execs (409) but its processes
 *     run on (the pause is recorded, not applied)
 *   volumes: create, list, remove
 *   exec: create, start over the hijacked stream (101, then stdin in and the
 *     8-byte-header multiplexed stdout/stderr out), inspect (exit code)
 *   archive: PUT (a tar extracted into the container's folder), GET (a tar
 *     of it, named as the engine names it), HEAD (the path stat header)
 *
 * An exec runs its command as a process on the host, as the test's user,
 * in its own session. The host is the container's root file system but
 * for the container's mounts: wherever a mount's path (/workspace, /tmp,
 * /.sandman) stands in an argument, the environment or the working folder,
 * it is replaced by the mount's host folder. The same is done to the
 * call frames a session of sandman's agent (src/shared/agent/frame.h) is sent, so
 * a copy in through sandman's unpacker, a listing with find and stat, and
 * a call over an agent session all run for real. Tools run by a test must
 * therefore name only such paths (or relative ones). The exec's user is
 * recorded, not applied. sandman's own helpers that would reach the host's
 * processes are never run on the host: the fake kills a call's process
 * tree for `sandman-kill` (a sweep of /proc) and stops the container when
 * a leased call's watcher (`read; kill -KILL -1`) sees its stdin end
 * (fake_engine_helpers.c); any other command that would signal every
 * process (kill -1, kill 1, killall, pkill) is refused. Containers made
 * with AutoRemove go when they stop.
 *
 * Every request is recorded ("METHOD /path?query", without the version
 * prefix), so a test can assert which engine round trips a call made. */
#ifndef SANDMAN_TESTS_FAKE_ENGINE_H
#define SANDMAN_TESTS_FAKE_ENGINE_H

#include <stddef.h>

#include <sandman/runner.h>
#include <sandman/mode.h>
#include <sandman/run.h>

typedef struct fake_engine fake_engine;

/* Starts the server; NULL (errno set) when it cannot. */
fake_engine *fake_engine_start(void);
/* Kills what its execs left running, stops the server, removes its folder. */
void fake_engine_stop(fake_engine *fe);
/* "unix://<folder>/engine.sock": for sm_engine_options.host or DOCKER_HOST. */
const char *fake_engine_host(const fake_engine *fe);

/* A runner on this engine with its state in state_dir and the instance
 * named so (the caller frees it); NULL, said on stderr, when it cannot be
 * made. */
sm_runner *fake_engine_runner(fake_engine *fe, const char *state_dir, const char *instance);

/* What a test of calls against the fake engine holds: the engine, which
 * has FAKE_ENGINE_IMAGE (its user ""), a runner on it with its state in
 * state, and an empty folder ws for a workspace. */
#define FAKE_ENGINE_IMAGE "sandman-test/fake:latest"
typedef struct fake_world {
  fake_engine *fe;
  sm_runner *runner;
  char state[4096];
  char ws[4096];
} fake_world;

/* 0, or -1 (said on stderr; fake_world_close cleans up what was made). */
int fake_world_open(fake_world *w, const char *instance);
void fake_world_close(fake_world *w);

/* cmocka's setup and teardown of a test of calls: *state a fake_world
 * opened with this instance name (the setup returns -1 when it cannot be),
 * then closed and freed. */
int fake_world_setup(void **state, const char *instance);
int fake_world_teardown(void **state);

/* A call's request in w: mode, FAKE_ENGINE_IMAGE, a 60 s timeout, argv,
 * w->ws as its workspace, tool "shell". */
void fake_world_request(const fake_world *w, sm_run_request *req, sm_mode mode,
                        const char *const *argv, size_t argc);
/* sm_run on w's runner: its return code; when not 0, or when the result
 * is a failure of sandman's (not the tool's exit code, nor a timeout) and
 * say_failure is set, the error, the result and the engine's log go to
 * stderr. */
int fake_world_run(fake_world *w, const sm_run_request *req, sm_run_result *out, int say_failure);
/* Runs req, which must go well (ok) and print exactly stdout_text (NULL:
 * anything): 0, or -1 said on stderr with the result and the engine's log.
 * The result is disposed of. */
int fake_world_expect(fake_world *w, const sm_run_request *req, const char *stdout_text);

/* An image the engine has (ref as given in a request, e.g.
 * "sandman-test/fake:latest"); user is its Config.User ("" for root). */
void fake_engine_add_image(fake_engine *fe, const char *ref, const char *user);

/* How many requests were seen with this method (NULL: any) whose path and
 * query contain part (NULL: any); a '*' in part stands for any bytes but
 * '/' and '?' ("/containers/ * /start" without the spaces). */
size_t fake_engine_count(fake_engine *fe, const char *method, const char *part);
/* The requests seen so far, one a line (the caller frees it). */
char *fake_engine_log(fake_engine *fe);
void fake_engine_clear_log(fake_engine *fe);

/* The next `times` requests with this method (NULL: any) whose path
 * contains part are answered with status and {"message": message}. */
void fake_engine_fail(fake_engine *fe, const char *method, const char *part, int status,
                      const char *message, int times);
/* The same, once `after` such requests have been answered as usual (the
 * second copy out of a call, not the first). */
void fake_engine_fail_after(fake_engine *fe, const char *method, const char *part, int after,
                            int status, const char *message, int times);

/* The next `times` execs with an argument that contains part cannot start:
 * the stream says message on stdout, as the runtime does, and the exit
 * code is code (126 or 127 for runc). */
void fake_engine_fail_exec(fake_engine *fe, const char *part, const char *message, int code,
                           int times);

/* Containers that exist now. */
size_t fake_engine_containers(fake_engine *fe);
/* Volumes that exist now. */
size_t fake_engine_volumes(fake_engine *fe);
/* The host path of path in container ref (a name or an id); 0, or -1 when
 * there is no such container. */
int fake_engine_path(fake_engine *fe, const char *ref, const char *path, char *out, size_t len);
/* The name of container ref (a name or an id) into out; 0, or -1 when
 * there is no such container. */
int fake_engine_name_of(fake_engine *fe, const char *ref, char *out, size_t len);
/* Stops container ref as if it had died (oom: the kernel's OOM killer);
 * its execs are killed. 0, or -1 when there is no such container. */
int fake_engine_stop_container(fake_engine *fe, const char *ref, int oom);
/* The User of the newest exec with an argument that contains part (into
 * out, "" when it named none); 0 when found, -1 when none matched. */
int fake_engine_exec_user(fake_engine *fe, const char *part, char *out, size_t len);

#endif
