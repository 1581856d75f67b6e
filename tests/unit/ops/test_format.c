/* Ages, durations, the engine's summaries, the table and the JSON shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/ops.h>
#include <sandman/util.h>

#include "support/xalloc.h"

static void test_ago(void **state) {
  (void)state;
  static const struct {
    double s;
    const char *want;
  } cases[] = {
      {-5, "Less than a second ago"},  {0, "Less than a second ago"},
      {0.9, "Less than a second ago"}, {1, "1 second ago"},
      {45, "45 seconds ago"},          {59.9, "59 seconds ago"},
      {60, "About a minute ago"},      {119, "About a minute ago"},
      {120, "2 minutes ago"},          {300, "5 minutes ago"},
      {3599, "59 minutes ago"},        {3600, "About an hour ago"},
      {5399, "About an hour ago"},     {5400, "2 hours ago"},
      {47 * 3600, "47 hours ago"},     {48 * 3600, "2 days ago"},
      {13 * 86400, "13 days ago"},     {14 * 86400, "2 weeks ago"},
      {59 * 86400, "8 weeks ago"},     {60 * 86400, "2 months ago"},
      {729 * 86400, "24 months ago"},  {3 * 365 * 86400, "3 years ago"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[64];
    sm_ops_format_ago(cases[i].s, buf, sizeof buf);
    assert_string_equal(buf, cases[i].want);
  }
}

static void test_duration(void **state) {
  (void)state;
  static const struct {
    double s;
    const char *want;
  } cases[] = {{0, "0s"},        {-1, "0s"},         {0.5, "0.5s"},     {1, "1s"},
               {45, "45s"},      {60, "1m"},         {90, "1m30s"},     {600, "10m"},
               {3600, "1h"}, {7200, "2h"},       {7500, "2h5m"},    {86400, "1d"},
               {93600, "1d2h"},  {7 * 86400, "7d"},  {3661, "1h1m"},    {12.25, "12s"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[64];
    sm_ops_format_duration(cases[i].s, buf, sizeof buf);
    assert_string_equal(buf, cases[i].want);
  }
  /* What the CLI accepts comes back in the same words. */
  static const char *round_trip[] = {"90s", "10m", "2h", "7d"};
  static const char *expect[] = {"1m30s", "10m", "2h", "7d"};
  for (size_t i = 0; i < 4; i++) {
    double s = 0;
    char buf[32];
    assert_int_equal(sm_parse_duration(round_trip[i], &s, NULL), 0);
    sm_ops_format_duration(s, buf, sizeof buf);
    assert_string_equal(buf, expect[i]);
  }
}

static json_object *summary(const char *id, const char *name, const char *state,
                            const char *status, const char *mode, const char *run,
                            const char *created) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "Id", json_object_new_string(id));
  json_object *names = json_object_new_array();
  json_object_array_add(names, json_object_new_string(name));
  json_object_object_add(o, "Names", names);
  json_object_object_add(o, "Image", json_object_new_string("sandman/minimal:latest"));
  json_object_object_add(o, "State", json_object_new_string(state));
  json_object_object_add(o, "Status", json_object_new_string(status));
  json_object_object_add(o, "Created", json_object_new_int64(1000));
  json_object *labels = json_object_new_object();
  json_object_object_add(labels, "io.sandman.managed", json_object_new_string("true"));
  json_object_object_add(labels, "io.sandman.instance", json_object_new_string("default"));
  json_object_object_add(labels, "io.sandman.mode", json_object_new_string(mode));
  json_object_object_add(labels, "io.sandman.project", json_object_new_string("proj"));
  json_object_object_add(labels, "io.sandman.run", json_object_new_string(run));
  json_object_object_add(labels, "io.sandman.worker", json_object_new_string(""));
  json_object_object_add(labels, "io.sandman.agent", json_object_new_string("coder"));
  if (created) json_object_object_add(labels, "io.sandman.created", json_object_new_string(created));
  json_object_object_add(o, "Labels", labels);
  return o;
}

static void test_from_engine(void **state) {
  (void)state;
  sm_ops_sandbox sb;
  sm_error err = SM_ERROR_INIT;
  json_object *s = summary("0123456789abcdef0123", "/sandman-default-per_run-ab12", "running",
                           "Up 5 minutes", "per_run", "r1", "2026-11-22T01:00:00Z");
  assert_int_equal(sm_ops_sandbox_from_engine(s, &sb, &err), 0);
  assert_string_equal(sb.name, "sandman-default-per_run-ab12");
  assert_string_equal(sb.mode, "per_run");
  assert_string_equal(sb.run_id, "r1");
  assert_string_equal(sb.worker_id, "");
  assert_string_equal(sb.volume, "sandman-default-per_run-ab12-ws");
  assert_string_equal(sb.state, "running");
  assert_true(sb.created_at == sm_parse_time("2026-11-22T01:00:00Z"));
  assert_true(sb.last_used_at == sb.created_at);

  json_object *j = sm_ops_sandbox_to_json(&sb);
  static const char *keys[] = {"id",     "name",       "mode",         "project",
                               "run_id", "worker_id",  "agent",        "image",
                               "status", "created_at", "last_used_at", "busy"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    json_object *v = NULL;
    assert_true(json_object_object_get_ex(j, keys[i], &v));
  }
  json_object *v = NULL;
  json_object_object_get_ex(j, "worker_id", &v);
  assert_null(v); /* an empty label is null */
  json_object_object_get_ex(j, "created_at", &v);
  assert_string_equal(json_object_get_string(v), "2026-11-22T01:00:00Z");
  json_object_object_get_ex(j, "status", &v);
  assert_string_equal(json_object_get_string(v), "running");
  json_object_object_get_ex(j, "busy", &v);
  assert_false(json_object_get_boolean(v));
  json_object_put(j);
  json_object_put(s);

  /* No created label: the engine's Created; no Id: an error. */
  s = summary("ff", "/x", "exited", "Exited (0) 1 second ago", "per_tool", "", NULL);
  assert_int_equal(sm_ops_sandbox_from_engine(s, &sb, &err), 0);
  assert_true(sb.created_at == 1000);
  json_object_object_del(s, "Id");
  assert_int_equal(sm_ops_sandbox_from_engine(s, &sb, &err), SM_EPROTOCOL);
  json_object_put(s);
}

static void test_table(void **state) {
  (void)state;
  sm_ops_sandbox items[2];
  memset(items, 0, sizeof items);
  snprintf(items[0].id, sizeof items[0].id, "0123456789abcdef");
  snprintf(items[0].name, sizeof items[0].name, "sandman-default-per_run-ab12");
  snprintf(items[0].mode, sizeof items[0].mode, "per_run");
  snprintf(items[0].project, sizeof items[0].project, "proj");
  snprintf(items[0].run_id, sizeof items[0].run_id, "r1");
  snprintf(items[0].agent, sizeof items[0].agent, "coder\x1b[31m");
  snprintf(items[0].image, sizeof items[0].image, "sandman/minimal:latest");
  snprintf(items[0].state, sizeof items[0].state, "running");
  snprintf(items[0].status_text, sizeof items[0].status_text, "Up 5 minutes");
  items[0].created_at = 100000;
  items[0].last_used_at = 100000 + 240;
  items[0].busy = 1;
  snprintf(items[1].id, sizeof items[1].id, "fedcba9876543210ff");
  snprintf(items[1].mode, sizeof items[1].mode, "per_worker");
  snprintf(items[1].worker_id, sizeof items[1].worker_id, "w-long-worker-name");
  snprintf(items[1].state, sizeof items[1].state, "exited");
  items[1].created_at = 100000 - 7200;
  items[1].last_used_at = items[1].created_at;
  sm_ops_sandbox_list list = {2, items};
  char *t = sm_ops_list_table(&list, 100000 + 300);
  assert_non_null(t);
  char *line1 = t, *line2 = strchr(t, '\n') + 1, *line3 = strchr(line2, '\n') + 1;
  assert_int_equal(strncmp(line1, "SANDBOX", 7), 0);
  /* Columns line up: each heading starts where its cells start. */
  static const char *heads[] = {"MODE", "PROJECT", "RUN", "WORKER", "AGENT", "IMAGE", "STATUS",
                                "CREATED", "LAST USED"};
  static const char *row1[] = {"per_run", "proj", "r1", "-", "coder?[31m", "sandman/minimal:latest",
                               "Up 5 minutes (busy)", "5 minutes ago", "About a minute ago"};
  for (size_t i = 0; i < 9; i++) {
    char *h = strstr(line1, heads[i]);
    char *c = strstr(line2, row1[i]);
    assert_non_null(h);
    assert_non_null(c);
    assert_int_equal(h - line1, c - line2);
  }
  assert_int_equal(strncmp(line2, "0123456789ab   ", 15), 0);
  assert_int_equal(strncmp(line3, "fedcba987654   per_worker", 25), 0);
  assert_non_null(strstr(line3, "w-long-worker-name"));
  assert_non_null(strstr(line3, "exited"));
  assert_non_null(strstr(line3, "2 hours ago"));
  assert_null(strchr(t, '\x1b')); /* no escape sequences reach the terminal */
  assert_null(strstr(t, " \n"));  /* no trailing blanks */
  free(t);

  sm_ops_sandbox_list empty = {0, NULL};
  t = sm_ops_list_table(&empty, 0);
  assert_string_equal(t, "SANDBOX   MODE   PROJECT   RUN   WORKER   AGENT   IMAGE   STATUS   "
                         "CREATED   LAST USED\n");
  free(t);
  json_object *a = sm_ops_list_to_json(&empty);
  assert_string_equal(json_object_to_json_string(a), "[ ]");
  json_object_put(a);
}

static void test_report(void **state) {
  (void)state;
  sm_ops_report r;
  memset(&r, 0, sizeof r);
  r.removed = xcalloc(1, sizeof *r.removed);
  r.n_removed = 1;
  snprintf(r.removed[0].id, sizeof r.removed[0].id, "abc");
  snprintf(r.removed[0].name, sizeof r.removed[0].name, "sb1");
  snprintf(r.removed[0].reason, sizeof r.removed[0].reason, "idle for 5m (limit 0s)");
  r.spared = xcalloc(1, sizeof *r.spared);
  r.n_spared = 1;
  r.spared[0].kind = SM_OPS_ITEM_VOLUME;
  snprintf(r.spared[0].name, sizeof r.spared[0].name, "sb2-ws");
  snprintf(r.spared[0].reason, sizeof r.spared[0].reason, "busy");
  json_object *j = sm_ops_report_to_json(&r);
  assert_string_equal(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
                      "{\"removed\":[{\"id\":\"abc\",\"name\":\"sb1\",\"reason\":\"idle for 5m "
                      "(limit 0s)\",\"kind\":\"sandbox\"}],\"spared\":[{\"id\":null,\"name\":"
                      "\"sb2-ws\",\"reason\":\"busy\",\"kind\":\"volume\",\"failed\":false}],"
                      "\"moved\":[],\"dry_run\":false}");
  json_object_put(j);
  char *t = sm_ops_report_text(&r);
  assert_non_null(t);
  assert_non_null(strstr(t, "removed sb1 (abc): idle for 5m (limit 0s)\n"));
  assert_non_null(strstr(t, "spared volume sb2-ws: busy\n"));
  assert_non_null(strstr(t, "1 removed, 1 spared\n"));
  free(t);
  r.dry_run = 1;
  t = sm_ops_report_text(&r);
  assert_non_null(t);
  assert_non_null(strstr(t, "would remove sb1"));
  assert_non_null(strstr(t, "dry run: nothing changed"));
  free(t);
  sm_ops_report_dispose(&r);
  assert_null(r.removed);
}

static void test_reap_options_json(void **state) {
  (void)state;
  sm_ops_reap_options o;
  sm_error err = SM_ERROR_INIT;
  json_object *b = json_tokener_parse("{\"older_than_s\": 90, \"dry_run\": true, \"force\": false}");
  assert_int_equal(sm_ops_reap_options_from_json(b, &o, &err), 0);
  assert_true(o.older_than_s == 90);
  assert_true(o.dry_run);
  assert_false(o.force);
  json_object_put(b);
  assert_int_equal(sm_ops_reap_options_from_json(NULL, &o, &err), 0);
  assert_true(o.older_than_s < 0);
  static const char *bad[] = {"{\"older_than_s\": -1}", "{\"older_than_s\": \"10m\"}",
                              "{\"dry_run\": 1}", "[1]"};
  for (size_t i = 0; i < 4; i++) {
    b = json_tokener_parse(bad[i]);
    assert_int_equal(sm_ops_reap_options_from_json(b, &o, &err), SM_EINVAL);
    json_object_put(b);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ago),         cmocka_unit_test(test_duration),
      cmocka_unit_test(test_from_engine), cmocka_unit_test(test_table),
      cmocka_unit_test(test_report),      cmocka_unit_test(test_reap_options_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
