/* MCP over the host-tool route (`/mcp`, src/lib/broker/route_mcp.c) and host
 * MCP servers (broker.mcp_servers, src/lib/broker/mcp_servers.c), on raw HTTP
 * requests through the broker's route handler, with real host processes:
 * the fake MCP server of tests/unit/mcp (python3) relayed with a prefix and
 * a tools filter. Checks: sessions belong to their sandbox, each request is
 * answered for its own caller (policy), an inactive caller is refused and
 * audited, refusals are tool errors or -32602, relayed calls and a tool
 * exposed under another name (broker.tools.X.mcp), the scrubbed
 * environment, GET/DELETE, and a name clash between servers. No engine. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

static char dir[256], audit_path[300], host_file[300], fake[512];

static sm_config *cfg;
static sm_audit *audit;
static sm_broker *broker;

static int setup(void **state) {
  (void)state;
  const char *src = getenv("SANDMAN_SOURCE_DIR");
  snprintf(fake, sizeof fake, "%s/tests/unit/mcp/fake_mcp_server.py", src ? src : ".");
  snprintf(dir, sizeof dir, "/tmp/hostmcp-unit-XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(audit_path, sizeof audit_path, "%s/audit.jsonl", dir);
  snprintf(host_file, sizeof host_file, "%s/only-on-host.txt", dir);
  FILE *f = fopen(host_file, "w");
  fputs("host content 42\n", f);
  fclose(f);
  setenv("SM_HM_VISIBLE", "given", 1);
  setenv("SM_HM_HIDDEN", "must-not-pass", 1);
  char y[4096];
  snprintf(y, sizeof y,
           "broker:\n  tools:\n"
           "    read_host:\n      description: reads a host file\n"
           "      input_schema: {type: object, properties: {path: {type: string}}, required: [path]}\n"
           "      argv: [cat, \"{path}\"]\n"
           "    other: {argv: [\"true\"]}\n"
           "    say:\n      description: the fake server's echo under another name\n"
           "      input_schema: {type: object, properties: {text: {type: string}}}\n"
           "      mcp: {server: fake, tool: echo}\n"
           "    big_short:\n      input_schema: {type: object, properties: {bytes: {type: integer}}}\n"
           "      mcp: {server: fake, tool: big}\n      max_output: 100\n"
           "  mcp_servers:\n"
           "    fake:\n      command: [python3, \"%s\"]\n      env: [SM_HM_VISIBLE]\n"
           "      tools: [echo, env, \"fail*\"]\n      prefix: fk_\n"
           "agents:\n  coder:\n    broker:\n      allow: [\"*\"]\n      deny: [other, fk_fails]\n"
           "  reader:\n    broker:\n      allow: [read_host]\n",
           fake);
  sm_error err = SM_ERROR_INIT;
  if (sm_config_load_string(&cfg, "m.yaml", y, strlen(y), &err)) fail_msg("config: %s", err.message);
  sm_audit_options ao = SM_AUDIT_OPTIONS_INIT;
  ao.file = audit_path;
  assert_int_equal(sm_audit_open(&audit, &ao, &err), 0);
  sm_broker_options o = {.config = cfg, .audit = audit, .approvals = 0};
  if (sm_broker_new(&broker, &o, &err)) fail_msg("broker: %s", err.message);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  sm_broker_free(broker);
  sm_audit_close(audit);
  sm_config_free(cfg);
  /* Everything the test and the audit trail (its lock file too) wrote. */
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) unlinkat(dirfd(d), e->d_name, 0);
  if (d) closedir(d);
  assert_int_equal(rmdir(dir), 0);
  return 0;
}

static sm_route_caller caller(const char *container, const char *agent, int active) {
  sm_route_caller w = {active, container, "sm-box", "per_run", "", "proj", agent,
                       "shell", "alice", "run-1", "", "control", "call-7", 77, 1000};
  return w;
}

typedef struct answer {
  int status;
  char session[80];
  char allow[80];
  json_object *body;
} answer;

/* One raw request to /mcp for who. */
static answer mcp(const sm_route_caller *who, const char *method, const char *sid, const char *json) {
  char raw[8192];
  size_t n = json ? strlen(json) : 0;
  char sid_line[128] = "";
  if (sid) snprintf(sid_line, sizeof sid_line, "Mcp-Session-Id: %s\r\n", sid);
  int len = snprintf(raw, sizeof raw,
                     "%s /mcp HTTP/1.1\r\nHost: sandman\r\nAccept: application/json, "
                     "text/event-stream\r\nContent-Type: application/json\r\n%s"
                     "Content-Length: %zu\r\n\r\n%s",
                     method, sid_line, n, json ? json : "");
  sm_host_route r = sm_broker_route(broker);
  char *resp = NULL;
  size_t rl = 0;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(r.handle(r.ud, who, raw, (size_t)len, &resp, &rl, &err), 0);
  answer a = {0, "", "", NULL};
  assert_int_equal(sscanf(resp, "HTTP/1.1 %d", &a.status), 1);
  const char *h = strstr(resp, "Mcp-Session-Id: ");
  if (h) sscanf(h + 16, "%64[0-9a-f]", a.session);
  h = strstr(resp, "Allow: ");
  if (h) sscanf(h + 7, "%79[^\r]", a.allow);
  const char *body = strstr(resp, "\r\n\r\n");
  assert_non_null(body);
  if (body[4]) a.body = json_tokener_parse(body + 4);
  free(resp);
  return a;
}

static const char init_msg[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
    "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}";

static void open_session(const sm_route_caller *who, char sid[80]) {
  answer a = mcp(who, "POST", NULL, init_msg);
  assert_int_equal(a.status, 200);
  assert_int_equal(strlen(a.session), 64);
  memcpy(sid, a.session, 80);
  json_object_put(a.body);
  a = mcp(who, "POST", sid, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
  assert_int_equal(a.status, 202);
}

/* The sorted names of tools/list's answer, space-separated. */
static void tool_names(json_object *body, char *out, size_t len) {
  json_object *tools = json_object_object_get(json_object_object_get(body, "result"), "tools");
  assert_non_null(tools);
  size_t n = json_object_array_length(tools);
  const char *names[64];
  assert_true(n < 64);
  for (size_t i = 0; i < n; i++)
    names[i] = json_object_get_string(json_object_object_get(json_object_array_get_idx(tools, i), "name"));
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (strcmp(names[j], names[i]) < 0) {
        const char *t = names[i];
        names[i] = names[j];
        names[j] = t;
      }
  out[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    if (i) strncat(out, " ", len - strlen(out) - 1);
    strncat(out, names[i], len - strlen(out) - 1);
  }
}

static answer call(const sm_route_caller *who, const char *sid, const char *name, const char *args) {
  char msg[2048];
  snprintf(msg, sizeof msg,
           "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
           "\"arguments\":%s}}",
           name, args ? args : "{}");
  return mcp(who, "POST", sid, msg);
}

static const char *result_text(json_object *body) {
  json_object *c = json_object_object_get(json_object_object_get(body, "result"), "content");
  return json_object_get_string(json_object_object_get(json_object_array_get_idx(c, 0), "text"));
}

static int result_is_error(json_object *body) {
  return json_object_get_boolean(json_object_object_get(json_object_object_get(body, "result"), "isError"));
}

static int error_code(json_object *body) {
  return json_object_get_int(json_object_object_get(json_object_object_get(body, "error"), "code"));
}

static void test_list_by_caller(void **state) {
  (void)state;
  sm_route_caller coder = caller("box-a", "coder", 1), reader = caller("box-a", "reader", 1);
  char sid[80], names[512];
  open_session(&coder, sid);
  const char *list = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}";
  answer a = mcp(&coder, "POST", sid, list);
  assert_int_equal(a.status, 200);
  tool_names(a.body, names, sizeof names);
  /* The server's echo and env (prefixed), not its denied fails, not its
   * unexported slow/die/...; the configuration's tools but the denied other. */
  assert_string_equal(names, "big_short fk_echo fk_env read_host say");
  json_object_put(a.body);
  /* The same session, another caller (a later call of another agent in
   * the sandbox): the list is that caller's. */
  a = mcp(&reader, "POST", sid, list);
  tool_names(a.body, names, sizeof names);
  assert_string_equal(names, "read_host");
  json_object_put(a.body);
  a = call(&reader, sid, "fk_echo", "{\"text\":\"x\"}");
  assert_int_equal(error_code(a.body), -32602);
  json_object_put(a.body);
  assert_int_equal(mcp(&coder, "DELETE", sid, NULL).status, 204);
}

static void test_calls(void **state) {
  (void)state;
  sm_route_caller coder = caller("box-a", "coder", 1);
  char sid[80], args[600];
  open_session(&coder, sid);
  snprintf(args, sizeof args, "{\"path\":\"%s\"}", host_file);
  answer a = call(&coder, sid, "read_host", args);
  assert_int_equal(a.status, 200);
  assert_false(result_is_error(a.body));
  assert_string_equal(result_text(a.body), "host content 42\n");
  json_object_put(a.body);
  /* Relayed to the host MCP server, by its re-exported name and by another name. */
  a = call(&coder, sid, "fk_echo", "{\"text\":\"a b; $(id)\"}");
  assert_string_equal(result_text(a.body), "a b; $(id)");
  json_object_put(a.body);
  a = call(&coder, sid, "say", "{\"text\":\"renamed\"}");
  assert_string_equal(result_text(a.body), "renamed");
  json_object_put(a.body);
  /* A relayed answer is held to the tool's max_output. */
  a = call(&coder, sid, "big_short", "{\"bytes\":5000}");
  assert_int_equal(strlen(result_text(a.body)), 100);
  json_object *content = json_object_object_get(json_object_object_get(a.body, "result"), "content");
  assert_string_equal(json_object_get_string(json_object_object_get(json_object_array_get_idx(content, 1), "text")),
                      "[output truncated at 100 bytes]");
  json_object_put(a.body);
  /* The server got only the variables its entry names. */
  a = call(&coder, sid, "fk_env", NULL);
  const char *env = result_text(a.body);
  assert_non_null(strstr(env, "\"SM_HM_VISIBLE\": \"given\""));
  assert_null(strstr(env, "must-not-pass"));
  json_object_put(a.body);
  /* Denied (fk_fails), unknown to the policy (other), never exported
   * (fk_slow): all the same unknown tool. */
  const char *hidden[] = {"fk_fails", "other", "fk_slow", "nonesuch"};
  for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++) {
    a = call(&coder, sid, hidden[i], NULL);
    assert_int_equal(error_code(a.body), -32602);
    json_object_put(a.body);
  }
  /* A refusal after policy (schema) is a tool error that says why. */
  a = call(&coder, sid, "read_host", "{\"nope\":1}");
  assert_true(result_is_error(a.body));
  assert_non_null(strstr(result_text(a.body), "refused"));
  json_object_put(a.body);
  a = mcp(&coder, "GET", sid, NULL);
  assert_int_equal(a.status, 405);
  assert_string_equal(a.allow, "POST, DELETE");
  json_object_put(a.body);
  assert_int_equal(mcp(&coder, "DELETE", sid, NULL).status, 204);
  a = mcp(&coder, "POST", sid, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}");
  assert_int_equal(a.status, 404);
  json_object_put(a.body);
}

static void test_sessions_belong_to_the_sandbox(void **state) {
  (void)state;
  sm_route_caller a1 = caller("box-a", "coder", 1), b1 = caller("box-b", "coder", 1);
  char sid[80];
  open_session(&a1, sid);
  const char *list = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}";
  answer a = mcp(&b1, "POST", sid, list);
  assert_int_equal(a.status, 404);
  json_object_put(a.body);
  a = mcp(&b1, "DELETE", sid, NULL);
  assert_int_equal(a.status, 404);
  json_object_put(a.body);
  /* After the call that made it: refused, nothing answered, audited. */
  sm_route_caller gone = caller("box-a", "", 0);
  a = mcp(&gone, "POST", sid, list);
  assert_int_equal(a.status, 403);
  assert_string_equal(json_object_get_string(json_object_object_get(a.body, "error")), "no active call");
  json_object_put(a.body);
  a = mcp(&gone, "POST", NULL, init_msg);
  assert_int_equal(a.status, 403);
  json_object_put(a.body);
  /* The session is still the sandbox's, for its next call. */
  a = mcp(&a1, "POST", sid, list);
  assert_int_equal(a.status, 200);
  json_object_put(a.body);
  assert_int_equal(mcp(&a1, "DELETE", sid, NULL).status, 204);
  /* A sandbox has at most 8 sessions at once. */
  char sids[8][80];
  for (int i = 0; i < 8; i++) open_session(&b1, sids[i]);
  a = mcp(&b1, "POST", NULL, init_msg);
  assert_int_equal(a.status, 503);
  json_object_put(a.body);
  for (int i = 0; i < 8; i++) assert_int_equal(mcp(&b1, "DELETE", sids[i], NULL).status, 204);

  FILE *f = fopen(audit_path, "r");
  assert_non_null(f);
  char line[8192];
  int refused = 0, relayed = 0;
  while (fgets(line, sizeof line, f)) {
    if (strstr(line, "\"host_tool.refused\"") && strstr(line, "no_active_call")) refused++;
    if (strstr(line, "\"host_tool.call\"") && strstr(line, "\"fk_echo\"")) relayed++;
  }
  fclose(f);
  assert_true(refused >= 2);
  assert_true(relayed >= 1); /* from test_calls */
}

/* Processes whose command line has word as an argument. */
static int processes_with(const char *word) {
  DIR *d = opendir("/proc");
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], buf[4096];
    snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1) {
      buf[len] = '\0';
      if (strcmp(buf + i, word) == 0) {
        n++;
        break;
      }
    }
  }
  closedir(d);
  return n;
}

/* Two servers offering one name without a prefix: a configuration error
 * when the catalog is first needed, and nothing listed. */
static void test_name_clash(void **state) {
  (void)state;
  char y[2048], marker[64];
  snprintf(marker, sizeof marker, "hostmcp-clash-%d", (int)getpid());
  snprintf(y, sizeof y,
           "broker:\n  mcp_servers:\n"
           "    one: {command: [python3, \"%s\", normal, %s], tools: [echo]}\n"
           "    two: {command: [python3, \"%s\", normal, %s], tools: [echo]}\n"
           "agents:\n  coder:\n    broker:\n      allow: [\"*\"]\n",
           fake, marker, fake, marker);
  sm_config *c2 = NULL;
  sm_broker *b2 = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_config_load_string(&c2, "clash.yaml", y, strlen(y), &err), 0);
  sm_broker_options o = {.config = c2};
  assert_int_equal(sm_broker_new(&b2, &o, &err), 0);
  sm_route_caller who = caller("box-c", "coder", 1);
  json_object *tools = NULL;
  assert_int_equal(sm_broker_list(b2, &who, &tools, &err), SM_ECONFIG);
  assert_non_null(strstr(err.message, "prefix"));
  assert_null(tools);
  /* Both servers were started (to list them), and end with the broker. */
  assert_int_equal(processes_with(marker), 2);
  sm_broker_free(b2);
  assert_int_equal(processes_with(marker), 0);
  sm_config_free(c2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_list_by_caller),
      cmocka_unit_test(test_calls),
      cmocka_unit_test(test_sessions_belong_to_the_sandbox),
      cmocka_unit_test(test_name_clash),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
