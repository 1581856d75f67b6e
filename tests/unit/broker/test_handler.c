/* The route's handler on raw HTTP requests, with real host processes:
 * listing by policy, calls with hostile arguments (one argument each),
 * limits (rate, timeout, output cap, the process group), approvals,
 * environment and credentials, the HTTP relay, bad requests, and the audit
 * rows each decision leaves (secrets never in them). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include <sandman/sandman.h>

static char dir[256], audit_path[300], host_file[300];
static int http_port;

static const char *config_text(void) {
  static char y[8192];
  snprintf(y, sizeof y,
           "broker:\n  tools:\n"
           "    read_host:\n      description: reads a host file\n"
           "      input_schema: {type: object, properties: {path: {type: string}}, required: [path]}\n"
           "      argv: [cat, \"{path}\"]\n"
           "    echo_args:\n"
           "      input_schema:\n        type: object\n        properties:\n"
           "          a: {type: string}\n          b: {type: array, items: {type: string}}\n"
           "          token: {type: string}\n"
           "      secret: [token]\n"
           "      allow_dash: [b]\n"
           "      argv: [printf, \"%%s\\n\", \"{a}\", \"{b}\"]\n"
           "    show_ref:\n"
           "      input_schema: {type: object, properties: {ref: {type: string}, n: {type: integer}}}\n"
           "      argv: [printf, \"[%%s]\\n\", \"{ref}\", \"{n}\"]\n"
           "    slow: {argv: [sleep, \"30\"], timeout: 1s}\n"
           "    rated: {argv: [\"true\"], rate: 2}\n"
           "    bg: {argv: [sh, -c, \"sleep 300 & echo $!\"]}\n"
           "    big: {argv: [seq, \"1\", \"100000\"], max_output: 1k}\n"
           "    fails: {argv: [sh, -c, \"echo oops >&2; exit 3\"]}\n"
           "    envs: {argv: [env], env: [SM_BK_VISIBLE]}\n"
           "    creds: {argv: [env], credentials: [svc]}\n"
           "    gated: {argv: [echo, approved], approval: required, approval_timeout: 1s}\n"
           "    relay:\n      http: {url: \"http://127.0.0.1:%d/x\", headers: {X-Test: yes}}\n"
           "      input_schema: {type: object, properties: {q: {type: string}}}\n"
           "    other: {argv: [\"true\"]}\n"
           "agents:\n  coder:\n    broker:\n      allow: [\"*\"]\n      deny: [other]\n"
           "  reader:\n    broker:\n      allow: [read_host]\n",
           http_port);
  return y;
}

/* A one-request-at-a-time HTTP server: answers {"got": BODY}. */
static void *http_server(void *ud) {
  int ls = *(int *)ud;
  for (;;) {
    int c = accept(ls, NULL, NULL);
    if (c < 0) return NULL;
    char buf[8192];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(c, buf + n, sizeof buf - 1 - n)) > 0) {
      n += (size_t)r;
      buf[n] = '\0';
      char *h = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "content-length:");
      if (h && cl && n - (size_t)(h + 4 - buf) >= (size_t)atoi(cl + 15)) break;
    }
    char *body = strstr(buf, "\r\n\r\n");
    char out[9000];
    int header_seen = strcasestr(buf, "X-Test: yes") != NULL;
    int len = snprintf(out, sizeof out, "{\"got\": %s, \"header\": %s}", body ? body + 4 : "null",
                       header_seen ? "true" : "false");
    char head[200];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                      "Connection: close\r\n\r\n",
                      len);
    if (write(c, head, (size_t)hl) < 0 || write(c, out, (size_t)len) < 0) {}
    close(c);
  }
}

static int cred_fn(void *ud, const char *service, sm_broker_add_env_fn add, void *add_ud,
                   sm_error *err) {
  (void)ud;
  if (strcmp(service, "svc")) return sm_error_set(err, SM_ENOTFOUND, "no service");
  return add(add_ud, "SVC_TOKEN", "s3cr3t-cred-value");
}

typedef struct fixture {
  sm_config *cfg;
  sm_audit *audit;
  sm_broker *b;      /* approvals on, credentials */
  sm_broker *plain;  /* a one-shot CLI's broker */
} fixture;

static fixture F;

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/broker-unit-XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(audit_path, sizeof audit_path, "%s/audit.jsonl", dir);
  snprintf(host_file, sizeof host_file, "%s/only-on-host.txt", dir);
  FILE *f = fopen(host_file, "w");
  fputs("host secret content\n", f);
  fclose(f);
  static int ls;
  ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(ls, 8), 0);
  getsockname(ls, (struct sockaddr *)&a, &al);
  http_port = ntohs(a.sin_port);
  pthread_t t;
  pthread_create(&t, NULL, http_server, &ls);
  pthread_detach(t);
  setenv("SM_BK_VISIBLE", "yes", 1);
  setenv("SM_BK_HIDDEN", "must-not-pass", 1);
  sm_error err = SM_ERROR_INIT;
  const char *y = config_text();
  assert_int_equal(sm_config_load_string(&F.cfg, "h.yaml", y, strlen(y), &err), 0);
  sm_audit_options ao = SM_AUDIT_OPTIONS_INIT;
  ao.file = audit_path;
  assert_int_equal(sm_audit_open(&F.audit, &ao, &err), 0);
  sm_broker_options o = {F.cfg, F.audit, 1, cred_fn, NULL};
  assert_int_equal(sm_broker_new(&F.b, &o, &err), 0);
  sm_broker_options p = {F.cfg, F.audit, 0, NULL, NULL};
  assert_int_equal(sm_broker_new(&F.plain, &p, &err), 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  sm_broker_free(F.b);
  sm_broker_free(F.plain);
  sm_audit_close(F.audit);
  sm_config_free(F.cfg);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (strncmp(dir, "/tmp/broker-unit-", 17) == 0 && fork() == 0) execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
  return 0;
}

static sm_route_caller caller(const char *agent, int active) {
  sm_route_caller w = {active, "c0ffee-container", "sm-box", "per_run", "", "proj", agent,
                       "shell", "alice", "run-1", "", "control", "call-42", 4242, 1000};
  return w;
}

/* Sends one raw request; returns the status, *body the parsed JSON. */
static int send_raw(sm_broker *b, const sm_route_caller *w, const char *raw, size_t len,
                    json_object **body) {
  sm_host_route r = sm_broker_route(b);
  char *resp = NULL;
  size_t rl = 0;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(r.handle(r.ud, w, raw, len, &resp, &rl, &err), 0);
  int status = 0;
  assert_int_equal(sscanf(resp, "HTTP/1.1 %d", &status), 1);
  char *h = strstr(resp, "\r\n\r\n");
  assert_non_null(h);
  char *cl = strstr(resp, "Content-Length: ");
  assert_non_null(cl);
  assert_int_equal((size_t)atoi(cl + 16), rl - (size_t)(h + 4 - resp));
  if (body) *body = json_tokener_parse(h + 4);
  free(resp);
  return status;
}

static int req(sm_broker *b, const sm_route_caller *w, const char *method, const char *path,
               const char *json, json_object **body) {
  char raw[16384];
  size_t n = json ? strlen(json) : 0;
  int len = snprintf(raw, sizeof raw, "%s %s HTTP/1.1\r\nHost: sandman\r\nContent-Length: %zu\r\n\r\n%s",
                     method, path, n, json ? json : "");
  return send_raw(b, w, raw, (size_t)len, body);
}

static const char *get(json_object *o, const char *k) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : NULL;
}

static const char *text0(json_object *o) {
  json_object *c = json_object_object_get(o, "content");
  return get(json_object_array_get_idx(c, 0), "text");
}

static void list_by_policy(void **state) {
  (void)state;
  sm_route_caller coder = caller("coder", 1), reader = caller("reader", 1), stranger = caller("x", 1);
  json_object *o = NULL;
  assert_int_equal(req(F.b, &coder, "GET", "/v1/tools", NULL, &o), 200);
  const char *s = json_object_to_json_string(o);
  assert_non_null(strstr(s, "\"read_host\""));
  assert_non_null(strstr(s, "\"inputSchema\""));
  assert_null(strstr(s, "\"other\"")); /* denied: not listed either */
  json_object_put(o);
  assert_int_equal(req(F.b, &reader, "GET", "/v1/tools", NULL, &o), 200);
  assert_int_equal(json_object_array_length(json_object_object_get(o, "tools")), 1);
  json_object_put(o);
  assert_int_equal(req(F.b, &stranger, "GET", "/v1/tools", NULL, &o), 200);
  assert_int_equal(json_object_array_length(json_object_object_get(o, "tools")), 0);
  json_object_put(o);
  /* one tool: visible, invisible and unknown (the same 404) */
  assert_int_equal(req(F.b, &reader, "GET", "/v1/tools/read_host", NULL, &o), 200);
  assert_string_equal(get(o, "name"), "read_host");
  json_object_put(o);
  json_object *a = NULL, *b = NULL;
  assert_int_equal(req(F.b, &reader, "POST", "/v1/tools/other/call", "{}", &a), 404);
  assert_int_equal(req(F.b, &reader, "POST", "/v1/tools/nonesuch/call", "{}", &b), 404);
  assert_string_equal(get(a, "reason"), get(b, "reason"));
  assert_null(get(a, "rule"));
  json_object_put(a);
  json_object_put(b);
}

static void reads_a_host_file(void **state) {
  (void)state;
  sm_route_caller w = caller("reader", 1);
  char body[600];
  snprintf(body, sizeof body, "{\"arguments\": {\"path\": \"%s\"}}", host_file);
  json_object *o = NULL;
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/read_host/call", body, &o), 200);
  assert_string_equal(text0(o), "host secret content\n");
  assert_string_equal(get(o, "ok"), "true");
  assert_string_equal(get(o, "is_error"), "false");
  assert_non_null(strstr(get(o, "call_id"), "ht-"));
  json_object_put(o);
}

static void hostile_arguments_stay_one_argument_each(void **state) {
  (void)state;
  sm_route_caller w = caller("coder", 1);
  const char *body =
      "{\"arguments\": {\"a\": \"x; rm -rf / && $(id) `id` | cat > /tmp/p 'q' \\\"d\\\" *\","
      " \"b\": [\"two words\", \"--flag=$HOME\", \"\"], \"token\": \"tok-SECRET-123\"}}";
  json_object *o = NULL;
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/echo_args/call", body, &o), 200);
  assert_string_equal(text0(o),
                      "x; rm -rf / && $(id) `id` | cat > /tmp/p 'q' \"d\" *\ntwo words\n"
                      "--flag=$HOME\n\n");
  json_object_put(o);
}

/* Issue 25, finding 5: a value that starts with '-' would be an option of
 * the host program (git log {ref} with ref=--output=FILE writes FILE): it
 * is refused before anything runs (400 schema, naming the argument, never
 * the value), a negative number too, unless allow_dash names the argument
 * (echo_args' b: the test above passes "--flag=$HOME"). */
static void values_never_become_options(void **state) {
  (void)state;
  sm_route_caller w = caller("coder", 1);
  const char *bad[] = {"{\"arguments\": {\"ref\": \"--output=/tmp/sm-injected\"}}",
                       "{\"arguments\": {\"ref\": \"-p\"}}", "{\"arguments\": {\"n\": -1}}"};
  json_object *o = NULL;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(req(F.b, &w, "POST", "/v1/tools/show_ref/call", bad[i], &o), 400);
    assert_string_equal(get(o, "reason"), "schema");
    assert_non_null(strstr(get(o, "error"), "may not start with '-'"));
    assert_null(strstr(get(o, "error"), "sm-injected"));
    json_object_put(o);
  }
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/echo_args/call",
                       "{\"arguments\": {\"a\": \"-n\"}}", &o),
                   400);
  assert_non_null(strstr(get(o, "error"), "argument 'a'"));
  json_object_put(o);
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/show_ref/call",
                       "{\"arguments\": {\"ref\": \"main-x\", \"n\": 3}}", &o),
                   200);
  assert_string_equal(text0(o), "[main-x]\n[3]\n");
  json_object_put(o);
}

static void failures_timeouts_and_caps(void **state) {
  (void)state;
  sm_route_caller w = caller("coder", 1);
  json_object *o = NULL;
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/fails/call", NULL, &o), 200);
  assert_string_equal(get(o, "is_error"), "true");
  assert_string_equal(get(o, "ok"), "false");
  assert_string_equal(text0(o), "oops\n");
  assert_string_equal(get(json_object_object_get(o, "structured"), "exit_code"), "3");
  json_object_put(o);
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/slow/call", "{}", &o), 504);
  assert_string_equal(get(o, "reason"), "timeout");
  json_object_put(o);
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/big/call", "{}", &o), 200);
  assert_int_equal(strlen(text0(o)), 1024);
  json_object *c = json_object_object_get(o, "content");
  assert_non_null(strstr(get(json_object_array_get_idx(c, 1), "text"), "truncated at 1024 bytes"));
  json_object_put(o);
  /* what the tool left running is killed with its group */
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/bg/call", "{}", &o), 200);
  int pid = atoi(text0(o));
  assert_true(pid > 1);
  json_object_put(o);
  int alive = 1;
  for (int i = 0; i < 200 && alive; i++) {
    char p[64], st[512] = "";
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f) alive = 0;
    else {
      if (!fgets(st, sizeof st, f)) st[0] = '\0';
      fclose(f);
      char *rp = strrchr(st, ')');
      if (rp && rp[2] == 'Z') alive = 0;
      else usleep(10000); /* waiting for a condition, bounded */
    }
  }
  assert_int_equal(alive, 0);
}

static void rate_limit(void **state) {
  (void)state;
  sm_route_caller w = caller("coder", 1), other_box = caller("coder", 1);
  other_box.container_id = "another-container";
  json_object *o = NULL;
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/rated/call", "{}", NULL), 200);
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/rated/call", "{}", NULL), 200);
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/rated/call", "{}", &o), 429);
  assert_string_equal(get(o, "reason"), "rate");
  json_object_put(o);
  /* per sandbox: another one still may */
  assert_int_equal(req(F.b, &other_box, "POST", "/v1/tools/rated/call", "{}", NULL), 200);
}

static void environment_and_credentials(void **state) {
  (void)state;
  sm_route_caller w = caller("coder", 1);
  json_object *o = NULL;
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/envs/call", "{}", &o), 200);
  assert_non_null(strstr(text0(o), "SM_BK_VISIBLE=yes"));
  assert_non_null(strstr(text0(o), "PATH="));
  assert_null(strstr(text0(o), "SM_BK_HIDDEN"));
  json_object_put(o);
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/creds/call", "{}", &o), 200);
  assert_non_null(strstr(text0(o), "SVC_TOKEN=s3cr3t-cred-value"));
  json_object_put(o);
  assert_int_equal(req(F.plain, &w, "POST", "/v1/tools/creds/call", "{}", &o), 403);
  assert_non_null(strstr(get(o, "error"), "credentials file"));
  json_object_put(o);
}

static void *approver(void *ud) {
  sm_broker *b = ud;
  for (int i = 0; i < 500; i++) {
    json_object *p = NULL;
    sm_error err = SM_ERROR_INIT;
    sm_broker_approvals(b, &p, &err);
    if (json_object_array_length(p) > 0) {
      const char *id = get(json_object_array_get_idx(p, 0), "id");
      sm_broker_approve(b, id, 1, "operator-jo", &err);
      json_object_put(p);
      return NULL;
    }
    json_object_put(p);
    usleep(10000); /* waiting for the call to show up, bounded */
  }
  return NULL;
}

static void approvals(void **state) {
  (void)state;
  sm_route_caller w = caller("coder", 1);
  json_object *o = NULL;
  /* a one-shot CLI call: nobody to ask */
  assert_int_equal(req(F.plain, &w, "POST", "/v1/tools/gated/call", "{}", &o), 403);
  assert_non_null(strstr(get(o, "error"), "needs an operator: run it through the runner"));
  json_object_put(o);
  /* nobody answers: refused at approval_timeout */
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/gated/call", "{}", &o), 504);
  assert_string_equal(get(o, "reason"), "approval_timeout");
  json_object_put(o);
  /* an operator approves */
  pthread_t t;
  pthread_create(&t, NULL, approver, F.b);
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/gated/call", "{}", &o), 200);
  assert_string_equal(text0(o), "approved\n");
  json_object_put(o);
  pthread_join(t, NULL);
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_broker_approve(F.b, "nope", 1, "x", &err), SM_ENOTFOUND);
}

static void http_relay(void **state) {
  (void)state;
  sm_route_caller w = caller("coder", 1);
  json_object *o = NULL;
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/relay/call", "{\"arguments\": {\"q\": \"a b\"}}", &o), 200);
  json_object *s = json_object_object_get(o, "structured");
  assert_string_equal(get(json_object_object_get(s, "got"), "q"), "a b");
  assert_string_equal(get(s, "header"), "true");
  json_object_put(o);
}

static void refusals_and_bad_requests(void **state) {
  (void)state;
  sm_route_caller w = caller("coder", 1), gone = caller("coder", 0);
  json_object *o = NULL;
  assert_int_equal(req(F.b, &gone, "GET", "/v1/tools", NULL, &o), 403);
  assert_string_equal(get(o, "reason"), "no_active_call");
  json_object_put(o);
  assert_int_equal(req(F.b, &gone, "POST", "/v1/tools/read_host/call", "{}", &o), 403);
  assert_string_equal(get(o, "error"), "no active call");
  json_object_put(o);
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/read_host/call", "{\"arguments\": {\"path\": 1}}", &o), 400);
  assert_string_equal(get(o, "reason"), "schema");
  json_object_put(o);
  assert_int_equal(req(F.b, &w, "POST", "/v1/tools/read_host/call", "{\"arguments\": [", &o), 400);
  json_object_put(o);
  /* A repeated key (issue 25): json-c would keep the last one, so the
   * schema would check one value and a second reader see another. */
  const char *dups[] = {"{\"arguments\": {\"path\": \"/a\", \"path\": \"/b\"}}",
                        "{\"arguments\": {\"path\": \"/a\", \"\\u0070ath\": \"/b\"}}",
                        "{\"arguments\": {\"path\": \"/a\"}, \"arguments\": {\"path\": \"/b\"}}"};
  for (size_t i = 0; i < sizeof dups / sizeof dups[0]; i++) {
    assert_int_equal(req(F.b, &w, "POST", "/v1/tools/read_host/call", dups[i], &o), 400);
    assert_string_equal(get(o, "reason"), "bad_request");
    assert_non_null(strstr(get(o, "error"), "repeats a key"));
    json_object_put(o);
  }
  assert_int_equal(req(F.b, &w, "DELETE", "/v1/tools", NULL, NULL), 405);
  assert_int_equal(req(F.b, &w, "GET", "/v1/tools/read_host/call", NULL, NULL), 405);
  assert_int_equal(req(F.b, &w, "GET", "/v2/else", NULL, NULL), 404);
  /* /mcp is MCP (unit/broker/test_route_mcp.c): a message without
   * Content-Type: application/json is 415 there. */
  assert_int_equal(req(F.b, &w, "POST", "/mcp", "{}", NULL), 415);
  const char *chunked = "POST /v1/tools/x/call HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
  assert_int_equal(send_raw(F.b, &w, chunked, strlen(chunked), NULL), 501);
  const char *partial = "GET /v1/tools HTTP/1.1\r\nHost: x\r\n";
  assert_int_equal(send_raw(F.b, &w, partial, strlen(partial), NULL), 400);
  const char *mismatch = "POST /v1/tools/x/call HTTP/1.1\r\nContent-Length: 50\r\n\r\n{}";
  assert_int_equal(send_raw(F.b, &w, mismatch, strlen(mismatch), NULL), 400);
  const char *nolen = "POST /v1/tools/x/call HTTP/1.1\r\n\r\n{}";
  assert_int_equal(send_raw(F.b, &w, nolen, strlen(nolen), NULL), 411);
  const char *garbage = "\x01\x02 / HTTP/1.1\r\n\r\n";
  assert_int_equal(send_raw(F.b, &w, garbage, strlen(garbage), NULL), 400);
}

typedef struct tally {
  int list, allowed, call, refused, approval, secret_seen, cred_seen;
  int refused_rule, approved_by;
} tally;

static int count_rows(void *ud, json_object *ev) {
  tally *t = ud;
  const char *s = json_object_to_json_string(ev);
  json_object *um = json_object_object_get(ev, "unmapped");
  const char *name = get(um, "event");
  if (strstr(s, "tok-SECRET-123")) t->secret_seen++;
  if (strstr(s, "s3cr3t-cred-value")) t->cred_seen++;
  if (!name) return 0;
  if (!strcmp(name, "host_tool.list")) t->list++;
  if (!strcmp(name, "host_tool.allowed")) t->allowed++;
  if (!strcmp(name, "host_tool.call")) t->call++;
  if (!strcmp(name, "host_tool.refused")) {
    t->refused++;
    if (get(um, "rule") && strstr(get(um, "rule"), "agents.reader.broker.allow does not include other"))
      t->refused_rule++;
  }
  if (!strcmp(name, "host_tool.approval")) {
    t->approval++;
    if (get(um, "approved_by") && !strcmp(get(um, "approved_by"), "operator-jo")) t->approved_by++;
  }
  return 0;
}

static void audit_rows(void **state) {
  (void)state;
  tally t = {0};
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_audit_read(audit_path, 0, NULL, count_rows, &t, NULL, &err), 0);
  assert_true(t.list >= 3);
  assert_true(t.allowed >= 5);
  assert_true(t.call >= 5);
  assert_true(t.refused >= 5);
  assert_int_equal(t.refused_rule, 1); /* the audit sees the rule the sandbox does not */
  assert_true(t.approval >= 4);        /* requested + expired, requested + approved */
  assert_int_equal(t.approved_by, 1);
  assert_int_equal(t.secret_seen, 0);
  assert_int_equal(t.cred_seen, 0);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(list_by_policy),
      cmocka_unit_test(reads_a_host_file),
      cmocka_unit_test(hostile_arguments_stay_one_argument_each),
      cmocka_unit_test(values_never_become_options),
      cmocka_unit_test(failures_timeouts_and_caps),
      cmocka_unit_test(rate_limit),
      cmocka_unit_test(environment_and_credentials),
      cmocka_unit_test(approvals),
      cmocka_unit_test(http_relay),
      cmocka_unit_test(refusals_and_bad_requests),
      cmocka_unit_test(audit_rows),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
