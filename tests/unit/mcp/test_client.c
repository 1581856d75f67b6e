/* The stdio MCP client (sandman/mcp_client.h) against a tiny fake server
 * (fake_mcp_server.py, next to this file): handshake, paginated tools/list,
 * tools/call, the scrubbed environment and descriptors, timeouts and
 * cancellation (notifications/cancelled reaches the server), the one
 * restart, the message cap, requests from the server refused. No engine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/mcp_client.h>

#include "support/xalloc.h"

static char script[4096];

static sm_mcp_client *start_mode(const char *mode, const char *const *env, size_t max_message,
                                 int *rc_out, sm_error *err) {
  const char *argv[] = {"python3", script, mode, NULL};
  sm_mcp_client_options o = {.name = "fake", .argv = argv, .env = env, .timeout_s = 30,
                             .max_message = max_message};
  sm_mcp_client *c = NULL;
  *rc_out = sm_mcp_client_start(&c, &o, err);
  return c;
}

static sm_mcp_client *start_fake(void) {
  sm_error err = SM_ERROR_INIT;
  int rc;
  sm_mcp_client *c = start_mode("normal", NULL, 0, &rc, &err);
  if (rc) fail_msg("start: %s", err.message);
  return c;
}

/* The text of the first content block of a call of tool with args (JSON text). */
static char *call_text(sm_mcp_client *c, const char *tool, const char *args, int *is_error) {
  sm_mcp_result r;
  sm_mcp_result_init(&r);
  sm_error err = SM_ERROR_INIT;
  json_object *a = args ? json_tokener_parse(args) : NULL;
  int rc = sm_mcp_client_call(c, tool, a, 30, NULL, &r, &err);
  json_object_put(a);
  if (rc) fail_msg("call %s: %s", tool, err.message);
  json_object *block = json_object_array_get_idx(r.content, 0), *t = NULL;
  assert_true(json_object_object_get_ex(block, "text", &t));
  char *s = xstrdup(json_object_get_string(t));
  if (is_error) *is_error = r.is_error;
  sm_mcp_result_dispose(&r);
  return s;
}

static void test_list_and_call(void **state) {
  (void)state;
  sm_mcp_client *c = start_fake();
  json_object *tools = NULL;
  sm_error err = SM_ERROR_INIT;
  /* Eight tools over four pages: every page followed. */
  assert_int_equal(sm_mcp_client_tools(c, &tools, &err), 0);
  assert_int_equal(json_object_array_length(tools), 8);
  json_object *last = json_object_array_get_idx(tools, 7), *n = NULL;
  assert_true(json_object_object_get_ex(last, "name", &n));
  assert_string_equal(json_object_get_string(n), "fails");
  json_object_put(tools);

  sm_mcp_result r;
  sm_mcp_result_init(&r);
  json_object *args = json_tokener_parse("{\"text\":\"a b; $(rm -rf /)\"}");
  assert_int_equal(sm_mcp_client_call(c, "echo", args, 30, NULL, &r, &err), 0);
  json_object_put(args);
  assert_false(r.is_error);
  json_object *t = NULL, *e = NULL;
  assert_true(json_object_object_get_ex(json_object_array_get_idx(r.content, 0), "text", &t));
  assert_string_equal(json_object_get_string(t), "a b; $(rm -rf /)");
  assert_true(json_object_object_get_ex(r.structured, "echo", &e));
  sm_mcp_result_dispose(&r);

  int is_error = 0;
  char *s = call_text(c, "fails", NULL, &is_error);
  assert_true(is_error);
  assert_string_equal(s, "it failed");
  free(s);

  /* A JSON-RPC error of the server's is SM_EPROTOCOL with its message. */
  sm_mcp_result_init(&r);
  assert_int_equal(sm_mcp_client_call(c, "nope", NULL, 30, NULL, &r, &err), SM_EPROTOCOL);
  assert_non_null(strstr(err.message, "unknown tool: nope"));
  sm_mcp_result_dispose(&r);

  /* A request from the server is answered "method not found". */
  s = call_text(c, "ask", NULL, NULL);
  assert_string_equal(s, "-32601");
  free(s);
  sm_mcp_client_free(c);
}

static void test_environment_scrubbed(void **state) {
  (void)state;
  setenv("HOSTMCP_SECRET", "do-not-pass", 1);
  const char *env[] = {"KEEP_ME=yes", NULL};
  sm_error err = SM_ERROR_INIT;
  int rc;
  sm_mcp_client *c = start_mode("normal", env, 0, &rc, &err);
  assert_int_equal(rc, 0);
  char *s = call_text(c, "env", NULL, NULL);
  json_object *o = json_tokener_parse(s), *e = NULL, *fds = NULL, *v = NULL;
  free(s);
  assert_true(json_object_object_get_ex(o, "env", &e));
  assert_true(json_object_object_get_ex(e, "KEEP_ME", &v));
  assert_string_equal(json_object_get_string(v), "yes");
  assert_false(json_object_object_get_ex(e, "HOSTMCP_SECRET", NULL));
  assert_true(json_object_object_get_ex(e, "PATH", &v)); /* the default one */
  assert_string_equal(json_object_get_string(v), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  /* stdin, stdout, stderr and the listing's own descriptor: nothing of ours. */
  assert_true(json_object_object_get_ex(o, "fds", &fds));
  assert_int_equal(json_object_array_length(fds), 4);
  json_object_put(o);
  sm_mcp_client_free(c);
  unsetenv("HOSTMCP_SECRET");
}

static void test_timeout_and_cancel(void **state) {
  (void)state;
  sm_mcp_client *c = start_fake();
  sm_mcp_result r;
  sm_mcp_result_init(&r);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_client_call(c, "slow", NULL, 0.2, NULL, &r, &err), SM_ETIMEOUT);
  volatile int cancel = 1;
  assert_int_equal(sm_mcp_client_call(c, "slow", NULL, 30, &cancel, &r, &err), SM_ECANCELLED);
  sm_mcp_result_dispose(&r);
  /* Both requests' cancellations reached the server (what it recorded). */
  char *s = call_text(c, "cancelled", NULL, NULL);
  json_object *ids = json_tokener_parse(s);
  free(s);
  assert_int_equal(json_object_array_length(ids), 2);
  assert_int_not_equal(json_object_get_int(json_object_array_get_idx(ids, 0)),
                       json_object_get_int(json_object_array_get_idx(ids, 1)));
  json_object_put(ids);
  /* The server still answers. */
  s = call_text(c, "echo", "{\"text\":\"still here\"}", NULL);
  assert_string_equal(s, "still here");
  free(s);
  sm_mcp_client_free(c);
}

static void test_restart_once(void **state) {
  (void)state;
  sm_mcp_client *c = start_fake();
  int pid1 = sm_mcp_client_pid(c);
  assert_true(pid1 > 0);
  sm_mcp_result r;
  sm_mcp_result_init(&r);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_mcp_client_call(c, "die", NULL, 30, NULL, &r, &err), SM_EIO);
  assert_non_null(strstr(err.message, "ended"));
  /* Next use: started again, and it works. */
  char *s = call_text(c, "echo", "{\"text\":\"again\"}", NULL);
  assert_string_equal(s, "again");
  free(s);
  int pid2 = sm_mcp_client_pid(c);
  assert_true(pid2 > 0);
  assert_int_not_equal(pid1, pid2);
  /* A second death is final. */
  assert_int_equal(sm_mcp_client_call(c, "die", NULL, 30, NULL, &r, &err), SM_EIO);
  assert_int_equal(sm_mcp_client_call(c, "echo", NULL, 30, NULL, &r, &err), SM_EIO);
  assert_non_null(strstr(err.message, "after its restart"));
  sm_mcp_result_dispose(&r);
  sm_mcp_client_free(c);
}

static void test_message_cap(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  int rc;
  sm_mcp_client *c = start_mode("normal", NULL, 4096, &rc, &err);
  assert_int_equal(rc, 0);
  char *s = call_text(c, "big", "{\"bytes\":1000}", NULL);
  assert_int_equal(strlen(s), 1000);
  free(s);
  sm_mcp_result r;
  sm_mcp_result_init(&r);
  json_object *args = json_tokener_parse("{\"bytes\":100000}");
  assert_int_equal(sm_mcp_client_call(c, "big", args, 30, NULL, &r, &err), SM_EIO);
  json_object_put(args);
  assert_non_null(strstr(err.message, "larger than the limit"));
  sm_mcp_result_dispose(&r);
  sm_mcp_client_free(c);
}

static void test_start_failures(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  const char *missing[] = {"hostmcp-no-such-command", NULL};
  sm_mcp_client_options o = {.name = "missing", .argv = missing};
  sm_mcp_client *c = NULL;
  assert_int_equal(sm_mcp_client_start(&c, &o, &err), SM_ENOTFOUND);
  assert_null(c);
  int rc;
  c = start_mode("oldproto", NULL, 0, &rc, &err);
  assert_int_equal(rc, SM_EPROTOCOL);
  assert_non_null(strstr(err.message, "1999-01-01"));
  assert_null(c);
  const char *argv[] = {"python3", script, "silent", NULL};
  sm_mcp_client_options so = {.name = "silent", .argv = argv, .timeout_s = 0.3};
  assert_int_equal(sm_mcp_client_start(&c, &so, &err), SM_ETIMEOUT);
  assert_null(c);
  const char *none[] = {NULL};
  sm_mcp_client_options no = {.name = "none", .argv = none};
  assert_int_equal(sm_mcp_client_start(&c, &no, &err), SM_EINVAL);
}

int main(void) {
  const char *src = getenv("SANDMAN_SOURCE_DIR");
  snprintf(script, sizeof script, "%s/tests/unit/mcp/fake_mcp_server.py", src ? src : ".");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_list_and_call),     cmocka_unit_test(test_environment_scrubbed),
      cmocka_unit_test(test_timeout_and_cancel), cmocka_unit_test(test_restart_once),
      cmocka_unit_test(test_message_cap),        cmocka_unit_test(test_start_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
