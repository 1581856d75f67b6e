/* The engine's swarm calls: what they send (paths, versions, filters,
 * bodies) to a recording engine on a unix socket, how they read its answers
 * (the swarm's "update out of sequence" and name conflicts as SM_ECONFLICT,
 * a worker's 503 as SM_EUNSUPPORTED), and the pure parsers of nodes and
 * tasks on answers shaped like the ones a real 20.10 swarm gave. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include "engine/engine_swarm.h"
#include "support/sock.h"

/* ---- a recording engine: one canned answer for every request ---- */
typedef struct recorder {
  int lfd;
  char dir[64];
  char sock[128];
  pthread_t thread;
  int status;            /* answer for everything but /_ping */
  const char *body;
  char method[16];
  char path[2048];
  char request_body[8192];
} recorder;

static recorder rec;

/* Serves one connection: requests one after another (keep-alive). */
static void serve(int fd) {
  char buf[16384];
  size_t have = 0;
  for (;;) {
    char *end = NULL;
    while ((end = strstr(buf, "\r\n\r\n")) == NULL) {
      if (have + 1 >= sizeof buf) return;
      /* Idle, and another client is waiting (or the teardown shut the
       * listener): this one was left open by a test that stopped early (a
       * failed assertion); serve the new one, or end. */
      struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = rec.lfd, .events = POLLIN}};
      if (have == 0 && poll(p, 2, -1) > 0 && !(p[0].revents & (POLLIN | POLLHUP)) && p[1].revents)
        return;
      ssize_t r = recv(fd, buf + have, sizeof buf - 1 - have, 0);
      if (r <= 0) return;
      have += (size_t)r;
      buf[have] = '\0';
    }
    size_t head = (size_t)(end - buf) + 4;
    size_t clen = 0;
    const char *cl = strcasestr(buf, "Content-Length:");
    if (cl && cl < end) clen = (size_t)strtoul(cl + 15, NULL, 10);
    while (have < head + clen && have + 1 < sizeof buf) {
      ssize_t r = recv(fd, buf + have, sizeof buf - 1 - have, 0);
      if (r <= 0) return;
      have += (size_t)r;
      buf[have] = '\0';
    }
    char method[16] = "", path[2048] = "";
    sscanf(buf, "%15s %2047s", method, path);
    int ping = strstr(path, "/_ping") != NULL;
    if (!ping) {
      snprintf(rec.method, sizeof rec.method, "%s", method);
      snprintf(rec.path, sizeof rec.path, "%s", path);
      snprintf(rec.request_body, sizeof rec.request_body, "%.*s", (int)clen, buf + head);
    }
    const char *body = ping ? "OK" : rec.body;
    int status = ping ? 200 : rec.status;
    char out[8192];
    int n = snprintf(out, sizeof out,
                     "HTTP/1.1 %d X\r\nApi-Version: 1.41\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     status, ping ? "text/plain" : "application/json", strlen(body), body);
    if (ts_send_all(fd, out, (size_t)n) != 0) return;
    memmove(buf, buf + head + clen, have - head - clen);
    have -= head + clen;
    buf[have] = '\0';
  }
}

static void *accept_loop(void *arg) {
  (void)arg;
  for (;;) {
    int fd = accept(rec.lfd, NULL, NULL);
    if (fd < 0) return NULL;
    serve(fd);
    close(fd);
  }
}

static int setup(void **s) {
  (void)s;
  memset(&rec, 0, sizeof rec);
  snprintf(rec.dir, sizeof rec.dir, "/tmp/sm-swarm-ut.XXXXXX");
  if (mkdtemp(rec.dir) == NULL) return -1;
  snprintf(rec.sock, sizeof rec.sock, "%s/engine.sock", rec.dir);
  rec.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", rec.sock);
  if (bind(rec.lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(rec.lfd, 4) != 0) return -1;
  return pthread_create(&rec.thread, NULL, accept_loop, NULL) == 0 ? 0 : -1;
}

static int teardown(void **s) {
  (void)s;
  shutdown(rec.lfd, SHUT_RDWR);
  close(rec.lfd);
  pthread_join(rec.thread, NULL);
  unlink(rec.sock);
  rmdir(rec.dir);
  return 0;
}

static sm_engine *engine(void) {
  char host[160];
  snprintf(host, sizeof host, "unix://%s", rec.sock);
  sm_engine_options o = SM_ENGINE_OPTIONS_INIT;
  o.host = host;
  o.tls_verify = 0;
  o.request_timeout_ms = 5000;
  sm_engine *e = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_engine_new(&e, &o, &err), 0);
  return e;
}

static void answer(int status, const char *body) {
  rec.status = status;
  rec.body = body;
  rec.method[0] = rec.path[0] = rec.request_body[0] = '\0';
}

/* ---- what the calls send and how they read the answers ---- */

static void test_service_update_names_its_version(void **s) {
  (void)s;
  sm_engine *e = engine();
  sm_error err = SM_ERROR_INIT;
  json_object *spec = json_tokener_parse("{\"Name\":\"sb\",\"Labels\":{\"a\":\"b\"}}");
  answer(200, "{\"Warnings\":null}");
  assert_int_equal(engine_service_update(e, "svc1", 26, spec, &err), 0);
  assert_string_equal(rec.method, "POST");
  assert_string_equal(rec.path, "/v1.41/services/svc1/update?version=26");
  assert_non_null(strstr(rec.request_body, "\"Labels\""));
  /* The answer a real swarm gives to a stale version: a conflict. */
  answer(500, "{\"message\":\"rpc error: code = Unknown desc = update out of sequence\"}");
  assert_int_equal(engine_service_update(e, "svc1", 26, spec, &err), SM_ECONFLICT);
  assert_int_equal(err.code, SM_ECONFLICT);
  /* Any other 500 stays an engine error. */
  answer(500, "{\"message\":\"rpc error: code = Unknown desc = raft is gone\"}");
  assert_int_equal(engine_service_update(e, "svc1", 27, spec, &err), SM_EENGINE);
  /* Names that would need escaping never reach the engine. */
  answer(200, "{}");
  assert_int_equal(engine_service_update(e, "../containers/x", 1, spec, &err), SM_EINVAL);
  assert_string_equal(rec.path, "");
  json_object_put(spec);
  sm_engine_free(e);
}

static void test_service_create_conflict_and_id(void **s) {
  (void)s;
  sm_engine *e = engine();
  sm_error err = SM_ERROR_INIT;
  char id[SM_ENGINE_ID_MAX];
  json_object *spec = json_tokener_parse("{\"Name\":\"sandman-x-per_run-0123\"}");
  answer(201, "{\"ID\":\"8k4r4rczezlng9dw3iz07k9my\"}");
  assert_int_equal(engine_service_create(e, spec, id, &err), 0);
  assert_string_equal(id, "8k4r4rczezlng9dw3iz07k9my");
  assert_string_equal(rec.path, "/v1.41/services/create");
  assert_string_equal(rec.request_body, "{\"Name\":\"sandman-x-per_run-0123\"}");
  answer(409, "{\"message\":\"rpc error: code = AlreadyExists desc = name conflicts with an "
              "existing object: service sandman-x-per_run-0123 already exists\"}");
  assert_int_equal(engine_service_create(e, spec, id, &err), SM_ECONFLICT);
  assert_non_null(strstr(err.message, "already exists"));
  assert_string_equal(id, "");
  answer(201, "{\"ID\":\"../bad\"}");
  assert_int_equal(engine_service_create(e, spec, id, &err), SM_EPROTOCOL);
  json_object_put(spec);
  sm_engine_free(e);
}

static void test_lists_send_encoded_filters(void **s) {
  (void)s;
  sm_engine *e = engine();
  sm_error err = SM_ERROR_INIT;
  json_object *out = NULL;
  const char *labels[] = {"io.sandman.managed=true", "io.sandman.instance=ci 1"};
  answer(200, "[]");
  assert_int_equal(engine_service_list(e, labels, 2, &out, &err), 0);
  assert_string_equal(rec.path,
                      "/v1.41/services?filters=%7B%22label%22%3A%5B%22io.sandman.managed%3Dtrue%"
                      "22%2C%22io.sandman.instance%3Dci%201%22%5D%7D");
  json_object_put(out);
  answer(200, "[]");
  assert_int_equal(engine_task_list(e, "svc1", &out, &err), 0);
  assert_string_equal(rec.path, "/v1.41/tasks?filters=%7B%22service%22%3A%5B%22svc1%22%5D%7D");
  json_object_put(out);
  answer(200, "{\"not\":\"an array\"}");
  assert_int_equal(sm_engine_network_list(e, labels, 1, &out, &err), SM_EPROTOCOL);
  assert_null(out);
  answer(200, "[]");
  assert_int_equal(sm_engine_network_list(e, NULL, 0, &out, &err), 0);
  assert_string_equal(rec.path, "/v1.41/networks");
  json_object_put(out);
  sm_engine_free(e);
}

static void test_swarm_inspect_on_a_worker(void **s) {
  (void)s;
  sm_engine *e = engine();
  sm_error err = SM_ERROR_INIT;
  json_object *out = NULL;
  answer(503, "{\"message\":\"This node is not a swarm manager. Worker nodes can't be used to "
              "view or modify cluster state.\"}");
  assert_int_equal(engine_swarm_inspect(e, &out, &err), SM_EUNSUPPORTED);
  assert_non_null(strstr(err.message, "not a swarm manager"));
  assert_non_null(strstr(err.message, "docs/scale-out.md"));
  assert_null(out);
  answer(200, "{\"ID\":\"abc\",\"Version\":{\"Index\":10}}");
  assert_int_equal(engine_swarm_inspect(e, &out, &err), 0);
  uint64_t v = 0;
  assert_int_equal(engine_swarm_version(out, &v), 0);
  assert_int_equal(v, 10);
  json_object_put(out);
  sm_engine_free(e);
}

static void test_network_create_body_and_in_use(void **s) {
  (void)s;
  sm_engine *e = engine();
  sm_error err = SM_ERROR_INIT;
  char id[SM_ENGINE_ID_MAX];
  json_object *labels = json_tokener_parse("{\"io.sandman.managed\":\"true\"}");
  answer(201, "{\"Id\":\"lole2kxnu0zda4p7q8m64u4ty\",\"Warning\":\"\"}");
  assert_int_equal(sm_engine_network_create(e, "sandman-x-net", "overlay", 1, labels, id, &err), 0);
  assert_string_equal(id, "lole2kxnu0zda4p7q8m64u4ty");
  json_object *body = json_tokener_parse(rec.request_body);
  assert_non_null(body);
  json_object *v = NULL;
  assert_true(json_object_object_get_ex(body, "Internal", &v) && json_object_get_boolean(v));
  assert_true(json_object_object_get_ex(body, "Attachable", &v) && !json_object_get_boolean(v));
  assert_true(json_object_object_get_ex(body, "Driver", &v));
  assert_string_equal(json_object_get_string(v), "overlay");
  assert_true(json_object_object_get_ex(body, "Labels", &v));
  json_object_put(body);
  answer(409, "{\"message\":\"network with name sandman-x-net already exists\"}");
  assert_int_equal(sm_engine_network_create(e, "sandman-x-net", "overlay", 1, NULL, id, &err),
                   SM_ECONFLICT);
  answer(500, "{\"message\":\"rpc error: code = FailedPrecondition desc = network lole2 is in "
              "use by task 2wt0l\"}");
  assert_int_equal(sm_engine_network_remove(e, "lole2", &err), SM_ECONFLICT);
  answer(404, "{\"message\":\"network lole2 not found\"}");
  assert_int_equal(sm_engine_network_remove(e, "lole2", &err), SM_ENOTFOUND);
  assert_string_equal(rec.method, "DELETE");
  assert_string_equal(rec.path, "/v1.41/networks/lole2");
  json_object_put(labels);
  sm_engine_free(e);
}

/* ---- parsers ---- */

static void test_node_parse(void **s) {
  (void)s;
  sm_error err = SM_ERROR_INIT;
  engine_swarm_node n;
  json_object *mgr = json_tokener_parse(
      "{\"ID\":\"q5vfca4ha1rbh53x5pbnt2131\",\"Version\":{\"Index\":9},"
      "\"Spec\":{\"Labels\":{\"sandman.zone\":\"z1\"},\"Role\":\"manager\",\"Availability\":\"active\"},"
      "\"Description\":{\"Hostname\":\"n1\",\"Engine\":{\"EngineVersion\":\"20.10.24+dfsg1\"}},"
      "\"Status\":{\"State\":\"ready\",\"Addr\":\"0.0.0.0\"},"
      "\"ManagerStatus\":{\"Leader\":true,\"Reachability\":\"reachable\",\"Addr\":\"172.29.1.11:2377\"}}");
  assert_int_equal(engine_swarm_node_parse(mgr, &n, &err), 0);
  assert_string_equal(n.hostname, "n1");
  /* A manager that reports 0.0.0.0 is reached at its advertised address. */
  assert_string_equal(n.addr, "172.29.1.11");
  assert_true(n.ready && n.manager && n.leader && n.reachable);
  assert_string_equal(n.engine_version, "20.10.24+dfsg1");
  json_object_put(mgr);

  json_object *down = json_tokener_parse(
      "{\"ID\":\"ejh6zbrkt899xh7a9lbrj3b2p\",\"Spec\":{\"Availability\":\"active\"},"
      "\"Description\":{\"Hostname\":\"n3\"},"
      "\"Status\":{\"State\":\"down\",\"Message\":\"heartbeat failure\",\"Addr\":\"172.29.1.13\"}}");
  assert_int_equal(engine_swarm_node_parse(down, &n, &err), 0);
  assert_string_equal(n.addr, "172.29.1.13");
  assert_false(n.ready);
  assert_false(n.manager);
  json_object_put(down);

  json_object *drained = json_tokener_parse(
      "{\"ID\":\"x\",\"Spec\":{\"Availability\":\"drain\"},\"Status\":{\"State\":\"ready\","
      "\"Addr\":\"10.0.0.2\"}}");
  assert_int_equal(engine_swarm_node_parse(drained, &n, &err), 0);
  assert_false(n.ready);
  json_object_put(drained);

  json_object *bad = json_tokener_parse("{\"ID\":\"x\",\"Status\":{\"State\":\"ready\"}}");
  assert_int_equal(engine_swarm_node_parse(bad, &n, &err), SM_EPROTOCOL);
  assert_non_null(strstr(err.message, "Status.Addr"));
  json_object_put(bad);
}

static void test_task_current(void **s) {
  (void)s;
  sm_error err = SM_ERROR_INIT;
  engine_swarm_task t;
  /* A first task that failed, then a newer running one. */
  json_object *tasks = json_tokener_parse(
      "[{\"ID\":\"old\",\"NodeID\":\"n2\",\"CreatedAt\":\"2026-11-23T20:21:53.314420809Z\","
      "\"DesiredState\":\"shutdown\",\"Status\":{\"State\":\"failed\",\"Err\":\"no such image\"}},"
      "{\"ID\":\"new\",\"NodeID\":\"n1\",\"CreatedAt\":\"2026-11-23T20:21:54.1Z\","
      "\"DesiredState\":\"running\",\"Status\":{\"State\":\"running\",\"Message\":\"started\","
      "\"ContainerStatus\":{\"ContainerID\":\"6200c43a784d\"}}}]");
  assert_int_equal(engine_swarm_task_current(tasks, &t, &err), 0);
  assert_string_equal(t.id, "new");
  assert_string_equal(t.node_id, "n1");
  assert_string_equal(t.container_id, "6200c43a784d");
  assert_string_equal(t.state, "running");
  assert_string_equal(t.message, "started");
  json_object_put(tasks);

  /* Only failed tasks: the newest one, with its error. */
  tasks = json_tokener_parse(
      "[{\"ID\":\"a\",\"CreatedAt\":\"2026-11-23T20:21:53.9Z\",\"DesiredState\":\"shutdown\","
      "\"Status\":{\"State\":\"rejected\",\"Err\":\"first\"}},"
      "{\"ID\":\"b\",\"CreatedAt\":\"2026-11-23T20:21:53.95Z\",\"DesiredState\":\"shutdown\","
      "\"Status\":{\"State\":\"rejected\",\"Err\":\"second\"}}]");
  assert_int_equal(engine_swarm_task_current(tasks, &t, &err), 0);
  assert_string_equal(t.id, "b");
  assert_string_equal(t.message, "second");
  assert_true(engine_swarm_task_state_final(t.state));
  json_object_put(tasks);

  tasks = json_tokener_parse("[]");
  assert_int_equal(engine_swarm_task_current(tasks, &t, &err), SM_ENOTFOUND);
  json_object_put(tasks);
  assert_false(engine_swarm_task_state_final("running"));
  assert_false(engine_swarm_task_state_final("pending"));
  assert_true(engine_swarm_task_state_final("orphaned"));
}

static void test_refs_and_versions(void **s) {
  (void)s;
  assert_true(engine_swarm_ref_valid("sandman-ci.1_x-per_run-0123456789abcdef"));
  assert_false(engine_swarm_ref_valid(""));
  assert_false(engine_swarm_ref_valid(NULL));
  assert_false(engine_swarm_ref_valid("a/b"));
  assert_false(engine_swarm_ref_valid("a?b"));
  assert_false(engine_swarm_ref_valid("a b"));
  char big[300];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_false(engine_swarm_ref_valid(big));
  uint64_t v = 0;
  json_object *o = json_tokener_parse("{\"Version\":{\"Index\":-3}}");
  assert_int_equal(engine_swarm_version(o, &v), -1);
  json_object_put(o);
  o = json_tokener_parse("{\"Version\":{}}");
  assert_int_equal(engine_swarm_version(o, &v), -1);
  json_object_put(o);
  char path[40];
  sm_error err = SM_ERROR_INIT;
  const char *vals[] = {"a-long-enough-value-to-overflow"};
  assert_int_equal(engine_swarm_filter_path(path, sizeof path, "/tasks", "service", vals, 1, &err),
                   SM_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_service_update_names_its_version),
      cmocka_unit_test(test_service_create_conflict_and_id),
      cmocka_unit_test(test_lists_send_encoded_filters),
      cmocka_unit_test(test_swarm_inspect_on_a_worker),
      cmocka_unit_test(test_network_create_body_and_in_use),
      cmocka_unit_test(test_node_parse),
      cmocka_unit_test(test_task_current),
      cmocka_unit_test(test_refs_and_versions),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
