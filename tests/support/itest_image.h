/* The images the C integration tests use besides sandman/minimal:latest:
 * built for the tests by scripts/test-images.sh under their own tag
 * (sandman-test/NAME:<inputs hash>, reused while nothing it is made from
 * changed), never a user's sandman/NAME:latest. */
#ifndef SANDMAN_TESTS_ITEST_IMAGE_H
#define SANDMAN_TESTS_ITEST_IMAGE_H

#include <errno.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

extern char **environ;

/* Fills out with the tag of images/<name> built for the tests, building it
 * first when missing (minutes, the first time on an engine); fails the
 * test when it cannot be had. The build's progress goes to stderr. */
static inline void itest_test_image(const char *name, char *out, size_t cap) {
  const char *src = getenv("SANDMAN_SOURCE_DIR");
  char script[1024];
  snprintf(script, sizeof script, "%s/scripts/test-images.sh", src && *src ? src : ".");
  char *const argv[] = {"bash", script, "ensure", (char *)name, NULL};
  int fds[2];
  if (pipe(fds) != 0) fail_msg("pipe: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = posix_spawnp(&pid, "bash", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  size_t n = 0;
  ssize_t got = 0;
  while (rc == 0 && n + 1 < cap && (got = read(fds[0], out + n, cap - 1 - n)) > 0) n += (size_t)got;
  close(fds[0]);
  out[n] = '\0';
  while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' ')) out[--n] = '\0';
  int status = 0;
  if (rc == 0) waitpid(pid, &status, 0);
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || n == 0)
    fail_msg("the test image %s: %s ensure %s failed (its message is above)", name, script, name);
}

#endif
