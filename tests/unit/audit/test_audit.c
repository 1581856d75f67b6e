/* The audit trail: OCSF fields per event, rotation with retention, appends
 * from several processes, a cut line, filters, and following a rotation. */
#include <setjmp.h>
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

#include <sandman/sandman.h>

static char dir[] = "/tmp/sandman-audit-test-XXXXXX";

static void path_in(char *out, size_t len, const char *name) { snprintf(out, len, "%s/%s", dir, name); }

static const char *get_str(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (!json_object_object_get_ex(o, a, &x)) return NULL;
  if (b == NULL) return json_object_get_string(x);
  if (!json_object_object_get_ex(x, b, &y)) return NULL;
  return json_object_get_string(y);
}

static int get_int(json_object *o, const char *key) {
  json_object *x = NULL;
  return json_object_object_get_ex(o, key, &x) ? json_object_get_int(x) : -1;
}

static void test_event_fields(void **state) {
  (void)state;
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = "egress.denied";
  ev.time = 1700000000.25;
  ev.agent = "bot";
  ev.run_id = "r1";
  ev.project = "p";
  ev.sandbox = "sandman-x-per_run-abc";
  ev.rule = "agents.bot.egress.allow does not include denied.test:443";
  ev.dst_host = "denied.test";
  ev.dst_port = 443;
  ev.src_ip = "172.30.0.5";
  json_object *o = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_audit_event_to_json(&ev, &o, &err), 0);
  assert_int_equal(get_int(o, "class_uid"), 4001);
  assert_int_equal(get_int(o, "activity_id"), 5);
  assert_int_equal(get_int(o, "category_uid"), 4);
  assert_int_equal(get_int(o, "disposition_id"), 2);
  assert_string_equal(get_str(o, "disposition", NULL), "Blocked");
  assert_string_equal(get_str(o, "status", NULL), "Failure");
  json_object *t = NULL;
  assert_true(json_object_object_get_ex(o, "type_uid", &t));
  assert_int_equal(json_object_get_int64(t), 400105);
  assert_true(json_object_object_get_ex(o, "time", &t));
  assert_int_equal(json_object_get_int64(t), 1700000000250LL);
  assert_string_equal(get_str(o, "time_dt", NULL), "2023-11-14T22:13:20.250Z");
  assert_string_equal(get_str(o, "dst_endpoint", "hostname"), "denied.test");
  assert_string_equal(get_str(o, "policy", "name"), ev.rule);
  assert_string_equal(get_str(o, "actor", "app_name"), "bot");
  assert_string_equal(get_str(o, "unmapped", "event"), "egress.denied");
  assert_string_equal(get_str(o, "unmapped", "run_id"), "r1");
  assert_string_equal(get_str(o, "metadata", "log_name"), "sandman-audit");
  assert_null(get_str(o, "traffic", NULL));
  json_object_put(o);

  /* Lifecycle events carry no disposition: they are not decisions. */
  ev = (sm_audit_event)SM_AUDIT_EVENT_INIT;
  ev.name = "sandbox.created";
  assert_int_equal(sm_audit_event_to_json(&ev, &o, &err), 0);
  assert_int_equal(get_int(o, "class_uid"), 3004);
  assert_int_equal(get_int(o, "disposition_id"), -1);
  json_object_put(o);

  ev.name = "no.such.event";
  assert_int_equal(sm_audit_event_to_json(&ev, &o, &err), SM_EINVAL);
  assert_null(o);

  /* Every name in the table turns into an event with a class. */
  for (const char *const *n = sm_audit_event_names(); *n; n++) {
    ev.name = *n;
    assert_int_equal(sm_audit_event_to_json(&ev, &o, &err), 0);
    assert_true(get_int(o, "class_uid") > 1000);
    json_object_put(o);
  }
}

typedef struct collected {
  int n;
  char events[64][32];
} collected;

static int collect(void *ud, json_object *ev) {
  collected *c = ud;
  const char *name = get_str(ev, "unmapped", "event");
  if (c->n < 64) snprintf(c->events[c->n], sizeof c->events[0], "%s", name ? name : "?");
  c->n++;
  return 0;
}

static void record(sm_audit *a, const char *name, const char *agent, const char *run) {
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = name;
  ev.agent = agent;
  ev.run_id = run;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_audit_record(a, &ev, &err), 0);
}

static void test_rotation_and_retention(void **state) {
  (void)state;
  char file[512], p[600];
  path_in(file, sizeof file, "rot/audit.jsonl");
  sm_audit_options o = SM_AUDIT_OPTIONS_INIT;
  o.file = file;
  o.max_bytes = 2000; /* a few events per file */
  o.keep = 2;
  sm_audit *a = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_audit_open(&a, &o, &err), 0);
  for (int i = 0; i < 40; i++) record(a, "call.allowed", "bot", "r1");
  sm_audit_close(a);
  struct stat st;
  assert_int_equal(stat(file, &st), 0);
  assert_true(st.st_size <= 2000);
  assert_int_equal(st.st_mode & 0777, 0600);
  snprintf(p, sizeof p, "%s.1", file);
  assert_int_equal(stat(p, &st), 0);
  snprintf(p, sizeof p, "%s.2", file);
  assert_int_equal(stat(p, &st), 0);
  snprintf(p, sizeof p, "%s.3", file);
  assert_int_not_equal(stat(p, &st), 0); /* retention: two rotated files only */
  collected c = {0};
  size_t skipped = 9;
  assert_int_equal(sm_audit_read(file, 2, NULL, collect, &c, &skipped, &err), 0);
  assert_int_equal(skipped, 0);
  assert_true(c.n > 2 && c.n < 40); /* the oldest were dropped */
}

static void test_several_processes(void **state) {
  (void)state;
  char file[512];
  path_in(file, sizeof file, "multi/audit.jsonl");
  enum { KIDS = 4, EACH = 200 };
  pid_t pids[KIDS];
  for (int k = 0; k < KIDS; k++) {
    pids[k] = fork();
    assert_true(pids[k] >= 0);
    if (pids[k] == 0) {
      sm_audit_options o = SM_AUDIT_OPTIONS_INIT;
      o.file = file;
      o.max_bytes = 64 * 1024; /* rotations happen while others write */
      o.keep = 20;
      sm_audit *a = NULL;
      if (sm_audit_open(&a, &o, NULL) != 0) _exit(1);
      char run[16];
      snprintf(run, sizeof run, "kid%d", k);
      for (int i = 0; i < EACH; i++) {
        sm_audit_event ev = SM_AUDIT_EVENT_INIT;
        ev.name = "call.allowed";
        ev.run_id = run;
        if (sm_audit_record(a, &ev, NULL) != 0) _exit(2);
      }
      sm_audit_close(a);
      _exit(0);
    }
  }
  for (int k = 0; k < KIDS; k++) {
    int status = 0;
    waitpid(pids[k], &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  collected c = {0};
  size_t skipped = 9;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_audit_read(file, 20, NULL, collect, &c, &skipped, &err), 0);
  assert_int_equal(skipped, 0);
  assert_int_equal(c.n, KIDS * EACH); /* nothing lost, nothing torn */
  sm_audit_filter f = SM_AUDIT_FILTER_INIT;
  f.run_id = "kid2";
  c.n = 0;
  assert_int_equal(sm_audit_read(file, 20, &f, collect, &c, NULL, &err), 0);
  assert_int_equal(c.n, EACH);
}

static void test_cut_line_and_filters(void **state) {
  (void)state;
  char file[512];
  path_in(file, sizeof file, "cut/audit.jsonl");
  sm_audit_options o = SM_AUDIT_OPTIONS_INIT;
  o.file = file;
  sm_audit *a = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_audit_open(&a, &o, &err), 0);
  record(a, "call.allowed", "bot", "r1");
  /* A writer that died mid-line. */
  FILE *f = fopen(file, "a");
  assert_non_null(f);
  fputs("{\"time\": 17000", f);
  fclose(f);
  record(a, "call.refused", "bot", "r2");
  record(a, "egress.denied", "other", "r1");
  record(a, "sandbox.created", "bot", "r1");
  sm_audit_close(a);

  collected c = {0};
  size_t skipped = 0;
  assert_int_equal(sm_audit_read(file, -1, NULL, collect, &c, &skipped, &err), 0);
  assert_int_equal(skipped, 1);
  assert_int_equal(c.n, 4);
  assert_string_equal(c.events[1], "call.refused"); /* kept whole after the cut line */

  sm_audit_filter flt = SM_AUDIT_FILTER_INIT;
  flt.denied_only = 1;
  c.n = 0;
  assert_int_equal(sm_audit_read(file, -1, &flt, collect, &c, NULL, &err), 0);
  assert_int_equal(c.n, 2);
  flt.agent = "bot";
  c.n = 0;
  assert_int_equal(sm_audit_read(file, -1, &flt, collect, &c, NULL, &err), 0);
  assert_int_equal(c.n, 1);
  assert_string_equal(c.events[0], "call.refused");
  flt = (sm_audit_filter)SM_AUDIT_FILTER_INIT;
  flt.since = sm_now() + 3600; /* nothing from the future */
  c.n = 0;
  assert_int_equal(sm_audit_read(file, -1, &flt, collect, &c, NULL, &err), 0);
  assert_int_equal(c.n, 0);

  /* A missing trail is empty, not an error. */
  char none[512];
  path_in(none, sizeof none, "none/audit.jsonl");
  c.n = 0;
  assert_int_equal(sm_audit_read(none, -1, NULL, collect, &c, NULL, &err), 0);
  assert_int_equal(c.n, 0);
}

/* Follow: a second process writes past a rotation; the follower sees every
 * event once and stops when told. */
typedef struct follow_state {
  collected c;
  volatile int stop;
  int want;
  int go_fd; /* told once the follower has read what was there */
} follow_state;

static int follow_collect(void *ud, json_object *ev) {
  follow_state *s = ud;
  collect(&s->c, ev);
  if (s->c.n == 1 && write(s->go_fd, "g", 1) != 1) return -1;
  if (s->c.n >= s->want) s->stop = 1;
  return 0;
}

static void test_follow_across_rotation(void **state) {
  (void)state;
  char file[512];
  path_in(file, sizeof file, "follow/audit.jsonl");
  sm_audit_options o = SM_AUDIT_OPTIONS_INIT;
  o.file = file;
  o.max_bytes = 3000;
  o.keep = 5;
  sm_audit *a = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_audit_open(&a, &o, &err), 0);
  record(a, "call.allowed", "bot", "before");
  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t kid = fork();
  assert_true(kid >= 0);
  if (kid == 0) {
    /* Written once the follower has read the first event: through at
     * least one rotation. */
    char g;
    if (read(go[0], &g, 1) != 1) _exit(3);
    for (int i = 0; i < 8; i++) {
      sm_audit_event ev = SM_AUDIT_EVENT_INIT;
      ev.name = "call.allowed";
      ev.run_id = "after";
      if (sm_audit_record(a, &ev, NULL) != 0) _exit(2);
    }
    _exit(0);
  }
  follow_state s = {.want = 9, .go_fd = go[1]};
  assert_int_equal(sm_audit_follow(file, 5, NULL, follow_collect, &s, &s.stop, 20, &err), 0);
  int status = 0;
  waitpid(kid, &status, 0);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(s.c.n, 9);
  char rotated[600];
  snprintf(rotated, sizeof rotated, "%s.1", file);
  struct stat st;
  assert_int_equal(stat(rotated, &st), 0); /* it did rotate meanwhile */
  sm_audit_close(a);
  close(go[0]);
  close(go[1]);
}

static void test_stderr_only_and_null(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  sm_audit_event ev = SM_AUDIT_EVENT_INIT;
  ev.name = "token.refused";
  assert_int_equal(sm_audit_record(NULL, &ev, &err), 0); /* no trail: nothing */
  sm_audit_options o = SM_AUDIT_OPTIONS_INIT;
  o.keep = SM_AUDIT_MAX_KEEP + 1;
  sm_audit *a = NULL;
  assert_int_equal(sm_audit_open(&a, &o, &err), SM_EINVAL);
  o.keep = -1;
  assert_int_equal(sm_audit_open(&a, &o, &err), 0);
  assert_null(sm_audit_file(a));
  ev.name = "nope";
  assert_int_equal(sm_audit_record(a, &ev, &err), SM_EINVAL);
  sm_audit_close(a);
}

static int setup(void **state) {
  (void)state;
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "%s", dir);
  /* Small tree: remove with nftw would be longer than this. */
  pid_t p = fork();
  if (p == 0) {
    execlp("rm", "rm", "-rf", cmd, (char *)NULL);
    _exit(127);
  }
  waitpid(p, NULL, 0);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_event_fields),
      cmocka_unit_test(test_rotation_and_retention),
      cmocka_unit_test(test_several_processes),
      cmocka_unit_test(test_cut_line_and_filters),
      cmocka_unit_test(test_follow_across_rotation),
      cmocka_unit_test(test_stderr_only_and_null),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
