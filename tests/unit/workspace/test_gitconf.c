/* The git configuration scan (src/lib/workspace/gitconf.c): a config file that
 * names a command in any spelling git reads is found; plain settings and
 * files git cannot read as configuration are not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workspace/ws.h"

static int runs(const char *text) { return workspace_gitconf_runs_text(text, strlen(text)); }

static void test_commands_found(void **state) {
  (void)state;
  static const char *const cases[] = {
      "[core]\n\tfsmonitor = touch X\n",
      "[core]\n\thooksPath = .evil\n",
      "[CORE]\n\tPAGER = less; touch X\n",
      "[core] editor = vi\n",                       /* a key on the header's line */
      "[core]sshCommand=ssh -oProxyCommand=x\n",
      "[core]\n\tunknownKeyOfTheFuture = 1\n",      /* core: only known plain keys pass */
      "[alias]\n\tst = !touch X\n",
      "[alias]\n\tst = -c core.pager=x status\n",  /* an alias without ! too */
      "[include]\n\tpath = ../elsewhere\n",
      "[includeIf \"gitdir:/\"]\n\tpath = x\n",
      "[pager]\n\tlog = touch X\n",
      "[diff \"x\"]\n\ttextconv = touch X\n",
      "[filter \"lfs\"]\n\tsmudge = touch X\n",
      "[merge \"m\"]\n\tdriver = touch X\n",
      "[credential]\n\thelper = !touch X\n",
      "[gpg]\n\tprogram = touch\n",
      "[sequence]\n\teditor = touch X\n",
      "[submodule \"s\"]\n\tupdate = !touch X\n",
      "[remote \"o\"]\n\turl = ext::sh -c touch% X\n",
      "[remote \"o\"]\n\turl = \"  ext::sh\"\n",
      "[url \"ext::sh -c x \"]\n\tinsteadOf = https://\n",
      "[protocol \"ext\"]\n\tallow = always\n",
      "[core.x]\n\tfsmonitor = y\n",                 /* the old [section.sub] form */
      "[core]\n\tfsmon\\\nitor = x\n",              /* no continuation in a name: an error */
      "\xef\xbb\xbf[core]\n\tfsmonitor = x\n",      /* a byte order mark */
      "[core]\r\n\tfsmonitor = x\r\n",
      "# comment\n; comment\n[user]\n\tname = \"a ; b\" # c\n[core]\n\tpager = x\n",
      "[user]\n\tname = \"unclosed\n[core]\n\tfsmonitor = x\n", /* after an error: on */
      "garbage line\n[core]\n\tfsmonitor = x\n",
      "[hook \"h\"]\n\tcommand = touch X\n",
      "[trailer \"t\"]\n\tcmd = touch X\n",
      "[init]\n\ttemplateDir = /tmp/t\n",
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (!runs(cases[i])) fail_msg("not found: %s", cases[i]);
}

static void test_plain_settings_pass(void **state) {
  (void)state;
  static const char *const cases[] = {
      "",
      "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n"
      "\tlogallrefupdates = true\n",
      "[user]\n\tname = T\n\temail = t@t\n[branch \"main\"]\n\tremote = origin\n",
      "[remote \"origin\"]\n\turl = https://example.invalid/x.git\n"
      "\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
      "[user]\n\tname = \"fsmonitor = x\" ; core.pager = x\n",
      "[user]\n\tname = a \\\n  [core] fsmonitor = x\n", /* a continued value */
      "Host example\n  ProxyCommand nc %h %p\n",       /* not git's: git refuses it */
      "key = value outside a section\n",
      "apiVersion: v1\nkind: Config\n",
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (runs(cases[i])) fail_msg("taken for a command: %s", cases[i]);
}

static void test_from_a_file(void **state) {
  (void)state;
  char path[] = "/tmp/sm-gitconf-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  /* Past the first read's buffer, and read from the start whatever the offset. */
  for (int i = 0; i < 5000; i++) assert_int_equal(write(fd, "[user]\n\tname = t\n", 17), 17);
  assert_int_equal(workspace_gitconf_runs_fd(fd), 0);
  assert_int_equal(write(fd, "[core]\n\tfsmonitor = x\n", 22), 22);
  assert_int_equal(workspace_gitconf_runs_fd(fd), 1);
  close(fd);
  /* A descriptor that cannot be read counts as naming commands. */
  assert_int_equal(workspace_gitconf_runs_fd(-1), 1);
}

static void test_names(void **state) {
  (void)state;
  assert_true(workspace_git_name_is("a/b/config", "config"));
  assert_true(workspace_git_name_is("CONFIG.", "config"));
  assert_true(workspace_git_name_is("x/Con\xe2\x80\x8c"
                                    "fig",
                                    "config"));
  assert_false(workspace_git_name_is("config/x", "config"));
  assert_true(workspace_git_in_dotgit(".git"));
  assert_true(workspace_git_in_dotgit("a/.GIT /objects"));
  assert_false(workspace_git_in_dotgit("a/.github/x"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_commands_found),
      cmocka_unit_test(test_plain_settings_pass),
      cmocka_unit_test(test_from_a_file),
      cmocka_unit_test(test_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
