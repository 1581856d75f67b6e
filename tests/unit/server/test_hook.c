/* The worker-env.sh runner, run with the host's bash exactly as the
 * sandbox would run it, and the reading of hooks from a workspace. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include "common/unconst.h"
#include "server/server_internal.h"
#include "support/files.h"
#include "support/xalloc.h"

#define NONCE "00112233445566778899aabbccddeeff"
#define OWNED "HOME XDG_CONFIG_HOME GH_TOKEN"

static void append(char **buf, size_t *len, const char *data, size_t n) {
  *buf = xrealloc(*buf, *len + n + 1);
  memcpy(*buf + *len, data, n);
  *len += n;
  (*buf)[*len] = '\0';
}

/* Runs the hook runner around argv with env; fills a result as sm_run would. */
static void run_hook(const char *hook, const char *const *argv, size_t argc, const char *const *env,
                     sm_run_result *r) {
  char **wrapped = NULL;
  size_t wn = 0;
  assert_int_equal(server_hook_wrap(argv, argc, hook, NONCE, OWNED, &wrapped, &wn, NULL), 0);
  int out[2], err[2];
  assert_int_equal(pipe(out), 0);
  assert_int_equal(pipe(err), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  posix_spawn_file_actions_addclose(&fa, err[0]);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid;
  assert_int_equal(posix_spawnp(&pid, "bash", &fa, NULL, wrapped, SM_UNCONST(env)), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  close(err[1]);
  memset(r, 0, sizeof *r);
  struct pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(p, 2, -1) < 0 && errno == EINTR) continue;
    for (int i = 0; i < 2; i++) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[65536];
      ssize_t n = read(p[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(p[i].fd);
        p[i].fd = -1;
        open_fds--;
      } else if (i == 0) {
        append(&r->stdout_data, &r->stdout_len, buf, (size_t)n);
      } else {
        append(&r->stderr_data, &r->stderr_len, buf, (size_t)n);
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r->ok = r->exit_code == 0;
  r->failure_kind = r->ok ? SM_FAIL_NONE : SM_FAIL_TOOL;
  common_strings_free(wrapped, wn);
  server_hook_finish(NONCE, r);
}

static const char *const base_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/ws",
                                 "XDG_CONFIG_HOME=/ws/.config", "GH_TOKEN=leased-value",
                                 "KEEP=1", NULL};

static void exports_overlay_and_owned_names_stay(void **state) {
  (void)state;
  const char *hook =
      "echo noise; echo more noise >&2\n"
      "export FOO=bar\nexport MULTI='a\nb'\nNOT_EXPORTED=1\n"
      "export HOME=/elsewhere XDG_CONFIG_HOME=/x GH_TOKEN=stolen SANDMAN_X=1\n"
      "cd /\n";
  const char *argv[] = {"sh", "-c",
                        "echo \"FOO=$FOO HOME=$HOME XCH=$XDG_CONFIG_HOME GH=$GH_TOKEN "
                        "NE=${NOT_EXPORTED-unset} SX=${SANDMAN_X-unset} KEEP=$KEEP\"; "
                        "printf '%s|' \"$MULTI\"; pwd; echo err-line >&2"};
  sm_run_result r;
  run_hook(hook, argv, 3, base_env, &r);
  assert_int_equal(r.exit_code, 0);
  assert_int_equal(r.ok, 1);
  assert_int_equal(r.failure_kind, SM_FAIL_NONE);
  char cwd[4096];
  assert_non_null(getcwd(cwd, sizeof cwd));
  char want[8192];
  snprintf(want, sizeof want,
           "FOO=bar HOME=/ws XCH=/ws/.config GH=leased-value NE=unset SX=unset KEEP=1\n"
           "a\nb|%s\n",
           cwd);
  assert_string_equal(r.stdout_data, want);
  /* Only the tool's stderr: the start marker is gone, the hook's output
   * is not shown on success. */
  assert_string_equal(r.stderr_data, "err-line\n");
  sm_run_result_dispose(&r);
}

static void tool_gets_stdin_and_argv_intact(void **state) {
  (void)state;
  const char *argv[] = {"printf", "[%s]", "-n", "two words", "$HOME"};
  sm_run_result r;
  run_hook("export A=1", argv, 5, base_env, &r);
  assert_string_equal(r.stdout_data, "[-n][two words][$HOME]");
  sm_run_result_dispose(&r);
}

static void tool_exit_code_passes_through(void **state) {
  (void)state;
  const char *argv[] = {"sh", "-c", "exit 7"};
  sm_run_result r;
  run_hook("export A=1", argv, 3, base_env, &r);
  assert_int_equal(r.exit_code, 7);
  assert_int_equal(r.failure_kind, SM_FAIL_TOOL);
  assert_string_equal(r.error, "");
  sm_run_result_dispose(&r);
  const char *nf[] = {"no-such-command-xyz"};
  run_hook("export A=1", nf, 1, base_env, &r);
  assert_int_equal(r.exit_code, 127);
  assert_null(strstr(r.error, "worker-env.sh"));
  sm_run_result_dispose(&r);
}

static void failures_name_the_hook(void **state) {
  (void)state;
  static const struct {
    const char *hook;
    const char *needle;
  } cases[] = {
      {"exit 3", "exited with status 3"},
      {"echo before; false", "exited with status 1"},
      {"export BIG=$(head -c 40000 /dev/zero | tr '\\0' a)", "larger than 32 KiB"},
      {"for i in 1 2 3 4 5; do export V$i=$(head -c 30000 /dev/zero | tr '\\0' b); done",
       "more than 128 KiB"},
      {"head -c 300000 /dev/zero | tr '\\0' c", "more than 256 KiB"},
      {"syntax error (", "exited with status"},
  };
  const char *argv[] = {"sh", "-c", "echo tool-ran"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sm_run_result r;
    run_hook(cases[i].hook, argv, 3, base_env, &r);
    if (r.ok || r.failure_kind != SM_FAIL_TOOL ||
        strstr(r.error, ".sandman/worker-env.sh failed: ") == NULL ||
        strstr(r.error, cases[i].needle) == NULL)
      fail_msg("case %zu: ok %d kind %d error '%s'", i, r.ok, r.failure_kind, r.error);
    assert_null(strstr(r.stdout_data ? r.stdout_data : "", "tool-ran"));
    assert_null(strstr(r.stderr_data ? r.stderr_data : "", "sandman-hook-"));
    sm_run_result_dispose(&r);
  }
}

static void slow_hook_times_out(void **state) {
  (void)state;
  const char *argv[] = {"sh", "-c", "echo tool-ran"};
  sm_run_result r;
  run_hook("sleep 60 & sleep 30", argv, 3, base_env, &r);
  assert_int_equal(r.ok, 0);
  assert_non_null(strstr(r.error, "timed out after 10 s"));
  sm_run_result_dispose(&r);
}

static void missing_bash_is_explained(void **state) {
  (void)state;
  sm_run_result r;
  memset(&r, 0, sizeof r);
  r.exit_code = 127;
  r.failure_kind = SM_FAIL_TOOL;
  r.stdout_data = xstrdup("OCI runtime exec failed: exec: \"bash\": executable file not found");
  r.stdout_len = strlen(r.stdout_data);
  server_hook_finish(NONCE, &r);
  assert_int_equal(r.failure_kind, SM_FAIL_TOOL);
  assert_non_null(strstr(r.error, "bash is not available"));
  assert_non_null(strstr(r.error, ".sandman/worker-env.sh"));
  sm_run_result_dispose(&r);
  /* An engine failure keeps its kind. */
  memset(&r, 0, sizeof r);
  r.exit_code = 125;
  r.failure_kind = SM_FAIL_ENGINE;
  server_hook_finish(NONCE, &r);
  assert_int_equal(r.failure_kind, SM_FAIL_ENGINE);
}

static void strip_for_streamed_output(void **state) {
  (void)state;
  char buf[128];
  size_t n = (size_t)snprintf(buf, sizeof buf, "\036sandman-hook-" NONCE " begin\nrest");
  server_hook_strip(NONCE, buf, &n);
  assert_string_equal(buf, "rest");
  assert_int_equal(n, 4);
  n = (size_t)snprintf(buf, sizeof buf, "no marker");
  server_hook_strip(NONCE, buf, &n);
  assert_string_equal(buf, "no marker");
}

static void loading_from_a_workspace(void **state) {
  (void)state;
  char tmpl[] = "/tmp/sm-hook-XXXXXX";
  char *dir = mkdtemp(tmpl);
  assert_non_null(dir);
  char ws[4096], path[4096], outside[4096];
  assert_non_null(realpath(dir, ws));
  char *content = NULL;
  size_t len = 0;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(server_hook_load(ws, &content, &len, &err), 0);
  assert_null(content);

  snprintf(path, sizeof path, "%s/.sandman", ws);
  assert_int_equal(mkdir(path, 0700), 0);
  snprintf(path, sizeof path, "%s/.sandman/worker-env.sh", ws);
  assert_int_equal(tf_write(path, "export A=1\n", 11), 0);
  assert_int_equal(server_hook_load(ws, &content, &len, &err), 0);
  assert_string_equal(content, "export A=1\n");
  free(content);

  /* A link inside the workspace is followed; one out of it is refused. */
  unlink(path);
  char inner[4096];
  snprintf(inner, sizeof inner, "%s/real-hook.sh", ws);
  assert_int_equal(tf_write(inner, "export B=2\n", 11), 0);
  assert_int_equal(symlink("../real-hook.sh", path), 0);
  assert_int_equal(server_hook_load(ws, &content, &len, &err), 0);
  assert_string_equal(content, "export B=2\n");
  free(content);
  unlink(path);
  snprintf(outside, sizeof outside, "%s-outside.sh", ws);
  assert_int_equal(tf_write(outside, "export C=3\n", 11), 0);
  assert_int_equal(symlink(outside, path), 0);
  assert_int_equal(server_hook_load(ws, &content, &len, &err), SM_EUNSAFE);
  assert_non_null(strstr(err.message, "outside the workspace"));
  assert_null(content);
  unlink(path);
  unlink(outside);

  char *big = xmalloc(70000);
  memset(big, '#', 70000);
  assert_int_equal(tf_write(path, big, 70000), 0);
  free(big);
  assert_int_equal(server_hook_load(ws, &content, &len, &err), SM_ETOOBIG);
  assert_non_null(strstr(err.message, "64 KiB"));
  unlink(path);
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(server_hook_load(ws, &content, &len, &err), SM_EUNSAFE);
  rmdir(path);
  unlink(inner);
  snprintf(path, sizeof path, "%s/.sandman", ws);
  rmdir(path);
  rmdir(ws);
}

int main(void) {
  if (access("/bin/bash", X_OK) != 0 && access("/usr/bin/bash", X_OK) != 0) {
    printf("no bash on this host: nothing to test\n");
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(exports_overlay_and_owned_names_stay),
      cmocka_unit_test(tool_gets_stdin_and_argv_intact),
      cmocka_unit_test(tool_exit_code_passes_through),
      cmocka_unit_test(failures_name_the_hook),
      cmocka_unit_test(slow_hook_times_out),
      cmocka_unit_test(missing_bash_is_explained),
      cmocka_unit_test(strip_for_streamed_output),
      cmocka_unit_test(loading_from_a_workspace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
