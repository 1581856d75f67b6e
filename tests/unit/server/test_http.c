/* The HTTP API end to end over a unix socket, with the sandbox layer
 * replaced by a fake (no engine needed): routes, the auth matrix, body
 * limits, leases and the scrubbing of their values, the environment
 * policy, workspaces, background handles and the clean stop. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"
#include <curl/curl.h>
#include <json-c/json.h>

#include <sandman/sandman.h>
#include <sandman/server.h>

#include "support/xalloc.h"

#define CONTROL "unit-test-control-token-0123456789"
#define SECRET "ghp_unit_secret_value_42"

static char g_dir[256], g_sock[300], g_ws_root[300];
static sm_server *g_srv;
static sm_config *g_cfg;
static sm_config_flags g_flags;

/* ---- the fake sandbox layer ---- */

static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int calls;
  char argv[8192];
  char env[8192];
  char secrets[1024];
  char workspace[1024];
  char mode[32];
  char run_id[64];
  char worker_id[64];
  char principal[200];
  double timeout_s;
} rec;

static void join(char *dst, size_t size, const char *const *v, size_t n, const char *sep) {
  dst[0] = '\0';
  size_t used = 0;
  for (size_t i = 0; i < n && used < size; i++)
    used += (size_t)snprintf(dst + used, size - used, "%s%s", i ? sep : "", v[i]);
}

static char *dupstr(const char *s, size_t *len) {
  *len = strlen(s);
  return xstrdup(s);
}

static int fake_run(void *ud, const sm_run_request *req, sm_run_result *out, sm_error *err) {
  (void)ud;
  (void)err;
  pthread_mutex_lock(&rec_mu);
  rec.calls++;
  join(rec.argv, sizeof rec.argv, req->argv, req->argc, " ");
  join(rec.env, sizeof rec.env, req->env, req->n_env, "\n");
  join(rec.secrets, sizeof rec.secrets, req->secret_env, req->n_secret_env, "\n");
  snprintf(rec.workspace, sizeof rec.workspace, "%s", req->workspace ? req->workspace : "");
  snprintf(rec.mode, sizeof rec.mode, "%s", sm_mode_name(req->settings.mode));
  snprintf(rec.run_id, sizeof rec.run_id, "%s", req->run_id ? req->run_id : "");
  snprintf(rec.worker_id, sizeof rec.worker_id, "%s", req->worker_id ? req->worker_id : "");
  snprintf(rec.principal, sizeof rec.principal, "%s", req->principal ? req->principal : "");
  rec.timeout_s = req->settings.timeout_s;
  pthread_mutex_unlock(&rec_mu);
  memset(out, 0, sizeof *out);
  out->mode = req->settings.mode;
  out->started = 1;
  out->credentials_passed = req->n_secret_env > 0;
  const char *cmd = req->argv[0];
  if (strcmp(cmd, "secret") == 0) {
    /* Prints the leased value, as a careless tool would. */
    const char *v = req->n_secret_env ? strchr(req->secret_env[0], '=') + 1 : "none";
    char buf[256];
    snprintf(buf, sizeof buf, "value=%s\n", v);
    out->stdout_data = dupstr(buf, &out->stdout_len);
    out->stderr_data = dupstr(v, &out->stderr_len);
    /* ... and names a file and a link after it (the copy out refuses the
     * link), in a sandbox replaced for a reason that quotes it too. */
    size_t l;
    snprintf(buf, sizeof buf, "cache/%s/link", v);
    out->refused = xcalloc(1, sizeof *out->refused);
    out->refused[0].path = dupstr(buf, &l);
    out->refused[0].reason = "link_absolute";
    out->n_refused = 1;
    snprintf(out->replaced_previous, sizeof out->replaced_previous, "0123abcd");
    snprintf(out->replaced_because, sizeof out->replaced_because, "image changed (%s)", v);
  } else if (strcmp(cmd, "sleep") == 0) {
    double secs = atof(req->argc > 1 ? req->argv[1] : "1");
    for (int i = 0; i < (int)(secs * 20); i++) {
      if (req->cancel && *req->cancel) {
        out->exit_code = 137;
        out->failure_kind = SM_FAIL_SANDBOX;
        snprintf(out->error, sizeof out->error, "cancelled");
        break;
      }
      if (req->on_output && i % 10 == 0) req->on_output(req->on_output_ud, 1, "tick\n", 5);
      usleep(50 * 1000);
    }
    out->stdout_data = dupstr("slept\n", &out->stdout_len);
  } else if (strcmp(cmd, "engine-down") == 0) {
    out->exit_code = 125;
    out->started = 0;
    out->credentials_passed = 0;
    out->failure_kind = SM_FAIL_ENGINE;
    snprintf(out->error, sizeof out->error, "engine unreachable");
  } else if (strcmp(cmd, "no-image") == 0 || strcmp(cmd, "sync-failed") == 0) {
    /* The sandbox could not be made (nothing ran), or failed after the tool. */
    out->exit_code = 125;
    out->started = strcmp(cmd, "sync-failed") == 0;
    out->credentials_passed = out->started && req->n_secret_env > 0;
    out->failure_kind = SM_FAIL_SANDBOX;
    snprintf(out->error, sizeof out->error, "%s", cmd);
  } else {
    char buf[4096];
    join(buf, sizeof buf, req->argv, req->argc, " ");
    size_t n = strlen(buf);
    buf[n] = '\n';
    buf[n + 1] = '\0';
    out->stdout_data = dupstr(buf, &out->stdout_len);
  }
  out->ok = out->exit_code == 0 && out->failure_kind == SM_FAIL_NONE;
  if (!out->ok && out->failure_kind == SM_FAIL_NONE) out->failure_kind = SM_FAIL_TOOL;
  return 0;
}

/* Tests assert on a copy: a failing assertion must not leave the lock held. */
static __typeof__(rec) seen;
static void take_snapshot(void) {
  pthread_mutex_lock(&rec_mu);
  seen = rec;
  pthread_mutex_unlock(&rec_mu);
}

/* ---- HTTP client ---- */

typedef struct resp {
  long status;
  char body[65536];
  size_t len;
  char request_id[64];
  char allow[64]; /* the Allow header, if any */
  json_object *json;
} resp;

static size_t on_body(char *data, size_t size, size_t n, void *ud) {
  resp *r = ud;
  size_t len = size * n;
  if (r->len + len >= sizeof r->body) len = sizeof r->body - 1 - r->len;
  memcpy(r->body + r->len, data, len);
  r->len += len;
  r->body[r->len] = '\0';
  return size * n;
}

/* Copies the value of header line data (name and ": " of length skip)
 * into out, without its line end. */
static void header_value(const char *data, size_t len, size_t skip, char *out, size_t cap) {
  size_t k = len - skip;
  while (k > 0 && (data[skip + k - 1] == '\r' || data[skip + k - 1] == '\n')) k--;
  if (k >= cap) k = cap - 1;
  memcpy(out, data + skip, k);
  out[k] = '\0';
}

static size_t on_header(char *data, size_t size, size_t n, void *ud) {
  resp *r = ud;
  size_t len = size * n;
  if (len > 14 && strncasecmp(data, "X-Request-Id: ", 14) == 0)
    header_value(data, len, 14, r->request_id, sizeof r->request_id);
  if (len > 7 && strncasecmp(data, "Allow: ", 7) == 0)
    header_value(data, len, 7, r->allow, sizeof r->allow);
  return len;
}

static void http(const char *method, const char *path, const char *token, const char *body,
                 resp *r) {
  memset(r, 0, sizeof *r);
  CURL *c = curl_easy_init();
  char url[512];
  snprintf(url, sizeof url, "http://runner%s", path);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, g_sock);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
  struct curl_slist *h = NULL;
  char auth[512];
  if (token) {
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    h = curl_slist_append(h, auth);
  }
  h = curl_slist_append(h, "Expect:");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  if (body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
  }
  CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) fail_msg("%s %s: %s", method, path, curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  r->json = json_tokener_parse(r->body);
}

static void resp_free(resp *r) {
  if (r->json) json_object_put(r->json);
  r->json = NULL;
}

static const char *jstr(json_object *o, const char *key) {
  json_object *v = NULL;
  if (o == NULL || !json_object_object_get_ex(o, key, &v) || v == NULL) return NULL;
  return json_object_get_string(v);
}

static void expect(const char *method, const char *path, const char *token, const char *body,
                   long status, const char *needle) {
  resp r;
  http(method, path, token, body, &r);
  if (r.status != status || (needle && strstr(r.body, needle) == NULL))
    fail_msg("%s %s %s: got %ld %s, want %ld with '%s'", method, path, body ? body : "", r.status,
             r.body, status, needle ? needle : "");
  if (r.status >= 400) {
    assert_non_null(jstr(r.json, "error"));
    assert_non_null(jstr(r.json, "failure_kind"));
  }
  assert_int_equal(strlen(r.request_id), 16);
  resp_free(&r);
}

static void worker_token(const char *key, char out[65]) {
  assert_int_equal(sm_token_derive(CONTROL, key, out, NULL), 0);
}

/* ---- set up ---- */

static int setup(void **state) {
  (void)state;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  snprintf(g_dir, sizeof g_dir, "/tmp/sm-http-XXXXXX");
  if (mkdtemp(g_dir) == NULL) return -1;
  snprintf(g_sock, sizeof g_sock, "%s/run/s.sock", g_dir);
  snprintf(g_ws_root, sizeof g_ws_root, "%s/ws", g_dir);
  mkdir(g_ws_root, 0700);
  char p[512];
  snprintf(p, sizeof p, "%s/agent-a", g_ws_root);
  mkdir(p, 0700);
  snprintf(p, sizeof p, "%s/hooked", g_ws_root);
  mkdir(p, 0700);
  snprintf(p, sizeof p, "%s/hooked/.sandman", g_ws_root);
  mkdir(p, 0700);
  snprintf(p, sizeof p, "%s/hooked/.sandman/worker-env.sh", g_ws_root);
  FILE *f = fopen(p, "w");
  fputs("export FROM_HOOK=1\n", f);
  fclose(f);
  snprintf(p, sizeof p, "%s/escape", g_ws_root);
  if (symlink("/tmp", p) != 0) return -1;
  /* Workers' own directories. */
  const char *const wdirs[] = {"w1", "w1/proj", "w2", "w2/proj"};
  for (size_t i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s/%s", g_ws_root, wdirs[i]);
    mkdir(p, 0700);
  }
  snprintf(p, sizeof p, "%s/w1/escape", g_ws_root);
  if (symlink("../w2/proj", p) != 0) return -1;
  /* A worker leases only what the configuration grants its key. */
  static const char cfg_text[] = "workers:\n  w1:\n    services: [github]\n";
  sm_error cerr = SM_ERROR_INIT;
  if (sm_config_load_string(&g_cfg, "unit.yaml", cfg_text, sizeof cfg_text - 1, &cerr) != 0) {
    fprintf(stderr, "config: %s\n", cerr.message);
    return -1;
  }
  char creds[512];
  snprintf(creds, sizeof creds, "%s/creds.json", g_dir);
  f = fopen(creds, "w");
  fputs("{\"github\": {\"GH_TOKEN\": \"" SECRET "\"}, \"other\": {\"OTHER_KEY\": \"zzzzzz\"}}",
        f);
  fclose(f);
  chmod(creds, 0600);

  setenv("SMUNIT_PASS", "passed", 1);
  setenv("GH_TOKEN", "host-value-never-passed", 1);
  setenv("SANDMAN_SMUNIT", "never", 1);
  memset(&g_flags, 0, sizeof g_flags);
  g_flags.mode = "per_run";
  sm_string_list_add(&g_flags.env_passthrough, "SMUNIT_*", NULL);
  sm_string_list_add(&g_flags.env_passthrough, "GH_*", NULL);
  sm_string_list_add(&g_flags.env_passthrough, "SANDMAN_*", NULL);

  sm_server_options o;
  memset(&o, 0, sizeof o);
  o.listen = NULL;
  char listen[400];
  snprintf(listen, sizeof listen, "unix:%s", g_sock);
  o.listen = listen;
  o.token = CONTROL;
  o.threads = 4;
  o.max_body = 64 * 1024;
  o.credentials_file = creds;
  o.workspaces_root = g_ws_root;
  o.pool = "unit";
  o.flags = &g_flags;
  o.mode = SM_MODE_PER_RUN;
  o.run = fake_run;
  o.config = g_cfg;
  sm_error err = SM_ERROR_INIT;
  if (sm_server_start(&g_srv, &o, &err) != 0) {
    fprintf(stderr, "start: %s\n", err.message);
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (g_srv) {
    sm_server_stop(g_srv);
    sm_server_free(g_srv);
  }
  sm_config_free(g_cfg);
  if (strncmp(g_dir, "/tmp/sm-http-", 13) == 0) {
    pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/rm", "rm", "-rf", g_dir, (char *)NULL);
      _exit(1);
    }
    waitpid(pid, NULL, 0);
  }
  curl_global_cleanup();
  return 0;
}

/* ---- tests ---- */

static void socket_is_private(void **state) {
  (void)state;
  struct stat st;
  assert_int_equal(stat(g_sock, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0600);
  char dir[400];
  snprintf(dir, sizeof dir, "%s/run", g_dir);
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  assert_string_equal(sm_server_address(g_srv) + 5, g_sock);
}

static void healthz_needs_no_token(void **state) {
  (void)state;
  resp r;
  http("GET", "/healthz", NULL, NULL, &r);
  assert_int_equal(r.status, 200);
  assert_string_equal(jstr(r.json, "status"), "ok");
  assert_string_equal(jstr(r.json, "mode"), "per_run");
  assert_non_null(jstr(r.json, "version"));
  json_object *e = NULL;
  assert_true(json_object_object_get_ex(r.json, "engine", &e));
  resp_free(&r);
}

static void auth_matrix(void **state) {
  (void)state;
  char w1[65], w2[65];
  worker_token("w1", w1);
  worker_token("w2", w2);
  const char *body_w1 = "{\"argv\":[\"echo\",\"hi\"],\"worker_key\":\"w1\",\"run_id\":\"r\"}";
  const char *body_none = "{\"argv\":[\"echo\",\"hi\"],\"run_id\":\"r\"}";
  resp r;
  char first401[512] = "";
  struct {
    const char *token;
    const char *body;
    long status;
  } cases[] = {
      {NULL, body_w1, 401},
      {"wrong-token-wrong-token-wrong-token", body_w1, 401},
      {CONTROL "x", body_w1, 401},
      {w2, body_w1, 401},       /* another worker's token */
      {w1, body_none, 401},     /* a worker token without a worker key */
      {CONTROL, body_w1, 200},
      {CONTROL, body_none, 200},
      {w1, body_w1, 200},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    http("POST", "/v1/execute", cases[i].token, cases[i].body, &r);
    if (r.status != cases[i].status) fail_msg("case %zu: %ld %s", i, r.status, r.body);
    if (r.status == 401) {
      /* The same answer whatever was wrong. */
      if (first401[0] == '\0') snprintf(first401, sizeof first401, "%s", r.body);
      assert_string_equal(r.body, first401);
    } else {
      assert_string_equal(jstr(r.json, "stdout"), "echo hi\n");
    }
    resp_free(&r);
  }
  /* Malformed Authorization headers. */
  CURL *c = curl_easy_init();
  struct curl_slist *h = curl_slist_append(NULL, "Authorization: Basic " CONTROL);
  memset(&r, 0, sizeof r);
  curl_easy_setopt(c, CURLOPT_URL, "http://runner/metrics");
  curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, g_sock);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
  assert_int_equal(curl_easy_perform(c), CURLE_OK);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  assert_int_equal(r.status, 401);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  /* Admin routes take the control token only. */
  expect("GET", "/metrics", w1, NULL, 401, NULL);
  expect("GET", "/v1/sandboxes", w1, NULL, 401, NULL);
  expect("POST", "/v1/sandboxes/reap", w1, "{\"older_than_s\":1}", 401, NULL);
  expect("GET", "/metrics", CONTROL, NULL, 200, "sandman_calls_total");
  /* Approvals: a made-up 64-character token and a worker's token get the
   * very answer of any bad token (issue 25, finding 13). */
  const char *made_up = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  const char *approvals_tokens[] = {made_up, w1};
  for (size_t i = 0; i < 2; i++) {
    http("GET", "/v1/approvals", approvals_tokens[i], NULL, &r);
    assert_int_equal(r.status, 401);
    assert_string_equal(r.body, first401);
    resp_free(&r);
    http("POST", "/v1/approvals/abcd", approvals_tokens[i], "{\"approve\": true}", &r);
    assert_int_equal(r.status, 401);
    assert_string_equal(r.body, first401);
    resp_free(&r);
  }
  expect("GET", "/v1/approvals", CONTROL, NULL, 200, "approvals");
}

static void errors(void **state) {
  (void)state;
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":", 400, "not valid JSON");
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"a\"],\"nope\":1}", 400, "unknown field");
  expect("POST", "/v1/execute", CONTROL, "", 400, "empty request body");
  expect("GET", "/v2/nothing", CONTROL, NULL, 404, "no such route");
  expect("GET", "/v1/handles/0123456789abcdef0123456789abcdef", CONTROL, NULL, 404,
         "no such handle");
  expect("GET", "/v1/handles/not-hex", CONTROL, NULL, 404, NULL);
  expect("DELETE", "/v1/execute", CONTROL, NULL, 405, NULL);
  /* A 405 names the methods the route answers (RFC 9110 15.5.6). */
  static const struct {
    const char *method, *path, *allow;
  } not_allowed[] = {
      {"DELETE", "/v1/execute", "POST"},
      {"GET", "/v1/sandboxes/reap", "POST"},
      {"GET", "/v1/leases", "POST"},
      {"POST", "/healthz", "GET"},
      {"POST", "/metrics", "GET"},
      {"POST", "/v1/audit", "GET"},
      {"DELETE", "/v1/sandboxes", "GET, POST"},
      {"POST", "/v1/handles/0123456789abcdef0123456789abcdef", "GET, DELETE"},
      {"GET", "/v1/approvals/0123456789abcdef0123456789abcdef", "POST"},
  };
  for (size_t i = 0; i < sizeof not_allowed / sizeof *not_allowed; i++) {
    resp r;
    http(not_allowed[i].method, not_allowed[i].path, CONTROL, NULL, &r);
    if (r.status != 405 || strcmp(r.allow, not_allowed[i].allow) != 0)
      fail_msg("%s %s: got %ld, Allow '%s'; want 405, Allow '%s'", not_allowed[i].method,
               not_allowed[i].path, r.status, r.allow, not_allowed[i].allow);
    resp_free(&r);
  }
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"engine-down\"],\"run_id\":\"r\"}", 503,
         "\"failure_kind\":\"engine\"");
  /* A sandbox that cannot be had is refused (503), not answered as a call. */
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"no-image\"],\"mode\":\"per_tool\"}", 503,
         "\"failure_kind\":\"sandbox\"");
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"sync-failed\"]}", 200,
         "\"failure_kind\":\"sandbox\"");
  /* Bodies over the limit: 413 before the body is read. */
  size_t big = 200 * 1024;
  char *b = xmalloc(big + 1);
  memset(b, ' ', big);
  b[big] = '\0';
  expect("POST", "/v1/execute", CONTROL, b, 413, "larger than");
  expect("POST", "/v1/execute", NULL, b, 401, NULL);
  free(b);
  expect("GET", "/healthz", NULL, NULL, 200, "\"status\"");
}

static void policy_on_modes(void **state) {
  (void)state;
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"x\"],\"mode\":\"none\"}", 403,
         "calls may not run on the host");
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"x\"],\"mode\":\"per_worker\"}", 400,
         "worker_key");
  expect("POST", "/v1/execute", CONTROL,
         "{\"argv\":[\"x\"],\"mode\":\"per_worker\",\"worker_key\":\"w9\"}", 200, NULL);
  take_snapshot();
  assert_string_equal(seen.mode, "per_worker");
  assert_string_equal(seen.worker_id, "w9");
  /* The control token naming a worker acts for that worker. */
  assert_string_equal(seen.principal, "worker:w9");
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"x\"],\"run_id\":\"r7\",\"timeout_s\":9}",
         200, NULL);
  take_snapshot();
  assert_string_equal(seen.mode, "per_run");
  assert_string_equal(seen.run_id, "r7");
  assert_true(seen.timeout_s == 9);
  assert_string_equal(seen.principal, "control");
  /* A worker token's calls are its own. */
  char w3[65];
  assert_int_equal(sm_token_derive(CONTROL, "w3", w3, NULL), 0);
  expect("POST", "/v1/execute", w3, "{\"argv\":[\"x\"],\"run_id\":\"r7\",\"worker_key\":\"w3\"}",
         200, NULL);
  take_snapshot();
  assert_string_equal(seen.principal, "worker:w3");
}

static void commands_and_templates(void **state) {
  (void)state;
  expect("POST", "/v1/execute", CONTROL, "{\"command\":\"echo a b\",\"run_id\":\"r\"}", 200,
         "\"stdout\":\"sh -c echo a b\\n\"");
  expect("POST", "/v1/execute", CONTROL,
         "{\"tool\":\"shell\",\"command\":\"ls -l\",\"run_id\":\"r\"}", 200, NULL);
  take_snapshot();
  assert_non_null(strstr(seen.argv, "ls -l"));
}

static void environment_policy(void **state) {
  (void)state;
  expect("POST", "/v1/execute", CONTROL,
         "{\"argv\":[\"x\"],\"run_id\":\"r\",\"env\":{\"MINE\":\"1\",\"SMUNIT_PASS\":\"override\"}}",
         200, NULL);
  take_snapshot();
  assert_non_null(strstr(seen.env, "MINE=1"));
  assert_non_null(strstr(seen.env, "SMUNIT_PASS=override"));
  assert_null(strstr(seen.env, "SMUNIT_PASS=passed"));
  assert_null(strstr(seen.env, "GH_TOKEN"));
  assert_null(strstr(seen.env, "SANDMAN_"));
  assert_null(strstr(seen.env, CONTROL));
  assert_string_equal(seen.secrets, "");
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"x\"],\"run_id\":\"r\"}", 200, NULL);
  take_snapshot();
  assert_non_null(strstr(seen.env, "SMUNIT_PASS=passed"));
  expect("POST", "/v1/execute", CONTROL,
         "{\"argv\":[\"x\"],\"env\":{\"SANDMAN_TOKEN\":\"x\"}}", 400, "belong to sandman");
}

static char *create_lease(const char *token, const char *body) {
  resp r;
  http("POST", "/v1/leases", token, body, &r);
  if (r.status != 200) fail_msg("lease: %ld %s", r.status, r.body);
  assert_non_null(jstr(r.json, "expires_at"));
  char *id = xstrdup(jstr(r.json, "lease_id"));
  resp_free(&r);
  return id;
}

static void leases(void **state) {
  (void)state;
  char body[512];
  char *id = create_lease(CONTROL, "{\"tool\":\"shell\",\"services\":[\"github\"]}");
  snprintf(body, sizeof body, "{\"tool\":\"shell\",\"argv\":[\"secret\"],\"run_id\":\"r\","
           "\"lease_id\":\"%s\"}", id);
  resp r;
  http("POST", "/v1/execute", CONTROL, body, &r);
  assert_int_equal(r.status, 200);
  /* The value reached the exec, and only as a secret. */
  take_snapshot();
  assert_string_equal(seen.secrets, "GH_TOKEN=" SECRET);
  assert_null(strstr(seen.env, SECRET));
  assert_null(strstr(seen.argv, SECRET));
  /* ... and is scrubbed out of the answer. */
  assert_null(strstr(r.body, SECRET));
  assert_string_equal(jstr(r.json, "stdout"), "value=[REDACTED]\n");
  json_object *refused = NULL, *replaced = NULL;
  assert_true(json_object_object_get_ex(r.json, "refused", &refused));
  assert_string_equal(jstr(json_object_array_get_idx(refused, 0), "path"), "cache/[REDACTED]/link");
  assert_true(json_object_object_get_ex(r.json, "replaced", &replaced));
  assert_string_equal(jstr(replaced, "because"), "image changed ([REDACTED])");
  resp_free(&r);
  /* Replay. */
  http("POST", "/v1/execute", CONTROL, body, &r);
  assert_int_equal(r.status, 403);
  assert_string_equal(jstr(r.json, "error"), "lease invalid or expired");
  assert_string_equal(jstr(r.json, "failure_kind"), "policy");
  resp_free(&r);
  free(id);

  /* Refused with 503 before anything ran (issue 25, item 16): the use is
   * given back; once the tool ran, it is spent. */
  id = create_lease(CONTROL, "{\"tool\":\"shell\",\"services\":[\"github\"]}");
  snprintf(body, sizeof body, "{\"tool\":\"shell\",\"argv\":[\"no-image\"],\"run_id\":\"r\","
           "\"lease_id\":\"%s\"}", id);
  expect("POST", "/v1/execute", CONTROL, body, 503, "no-image");
  snprintf(body, sizeof body, "{\"tool\":\"shell\",\"argv\":[\"engine-down\"],\"run_id\":\"r\","
           "\"lease_id\":\"%s\"}", id);
  expect("POST", "/v1/execute", CONTROL, body, 503, "engine unreachable");
  snprintf(body, sizeof body, "{\"tool\":\"shell\",\"argv\":[\"sync-failed\"],\"run_id\":\"r\","
           "\"lease_id\":\"%s\"}", id);
  expect("POST", "/v1/execute", CONTROL, body, 200, "sync-failed");
  snprintf(body, sizeof body, "{\"tool\":\"shell\",\"argv\":[\"secret\"],\"run_id\":\"r\","
           "\"lease_id\":\"%s\"}", id);
  expect("POST", "/v1/execute", CONTROL, body, 403, "lease invalid or expired");
  free(id);

  /* Another tool. */
  id = create_lease(CONTROL, "{\"tool\":\"python\",\"services\":[\"github\"],\"max_uses\":2}");
  snprintf(body, sizeof body, "{\"tool\":\"shell\",\"argv\":[\"secret\"],\"lease_id\":\"%s\"}",
           id);
  expect("POST", "/v1/execute", CONTROL, body, 403, "lease invalid or expired");
  snprintf(body, sizeof body, "{\"tool\":\"python\",\"argv\":[\"secret\"],\"run_id\":\"r\","
           "\"lease_id\":\"%s\"}", id);
  expect("POST", "/v1/execute", CONTROL, body, 200, "[REDACTED]");
  expect("POST", "/v1/execute", CONTROL, body, 200, "[REDACTED]");
  expect("POST", "/v1/execute", CONTROL, body, 403, "lease invalid or expired");
  free(id);

  /* Expired. */
  id = create_lease(CONTROL, "{\"tool\":\"shell\",\"services\":[\"github\"],\"ttl_s\":1}");
  usleep(1300 * 1000);
  snprintf(body, sizeof body, "{\"tool\":\"shell\",\"argv\":[\"secret\"],\"lease_id\":\"%s\"}",
           id);
  expect("POST", "/v1/execute", CONTROL, body, 403, "lease invalid or expired");
  free(id);
  expect("POST", "/v1/execute", CONTROL,
         "{\"tool\":\"shell\",\"argv\":[\"x\"],\"lease_id\":\"0123456789abcdef0123456789abcdef\"}",
         403, "lease invalid or expired");

  /* Bad lease requests. */
  expect("POST", "/v1/leases", CONTROL, "{\"tool\":\"shell\",\"services\":[\"nope\"]}", 400,
         "unknown service 'nope'");
  expect("POST", "/v1/leases", CONTROL,
         "{\"tool\":\"shell\",\"services\":[\"github\"],\"max_uses\":11}", 400, "max_uses");
  expect("POST", "/v1/leases", NULL, "{\"tool\":\"shell\",\"services\":[\"github\"]}", 401,
         NULL);

  /* A worker's lease serves that worker only. */
  char w1[65], w2[65];
  worker_token("w1", w1);
  worker_token("w2", w2);
  expect("POST", "/v1/leases", w1, "{\"tool\":\"shell\",\"services\":[\"github\"]}", 401, NULL);
  expect("POST", "/v1/leases", w2,
         "{\"tool\":\"shell\",\"services\":[\"github\"],\"worker_key\":\"w1\"}", 401, NULL);
  /* It leases only the services granted to its key, and learns nothing
   * about the others: one answer whether they exist or not. */
  resp other, missing;
  http("POST", "/v1/leases", w1,
       "{\"tool\":\"shell\",\"services\":[\"other\"],\"worker_key\":\"w1\"}", &other);
  http("POST", "/v1/leases", w1,
       "{\"tool\":\"shell\",\"services\":[\"nope\"],\"worker_key\":\"w1\"}", &missing);
  assert_int_equal(other.status, 403);
  assert_int_equal(missing.status, 403);
  assert_string_equal(jstr(other.json, "failure_kind"), "policy");
  assert_non_null(strstr(jstr(other.json, "error"), "is not one worker 'w1' may lease"));
  assert_non_null(strstr(jstr(missing.json, "error"), "is not one worker 'w1' may lease"));
  resp_free(&other);
  resp_free(&missing);
  expect("POST", "/v1/leases", w2,
         "{\"tool\":\"shell\",\"services\":[\"github\"],\"worker_key\":\"w2\"}", 403,
         "is not one worker 'w2' may lease");
  id = create_lease(w1, "{\"tool\":\"shell\",\"services\":[\"github\"],\"worker_key\":\"w1\","
                        "\"max_uses\":2}");
  snprintf(body, sizeof body, "{\"tool\":\"shell\",\"argv\":[\"secret\"],\"worker_key\":\"w2\","
           "\"run_id\":\"r\",\"lease_id\":\"%s\"}", id);
  expect("POST", "/v1/execute", w2, body, 403, "lease invalid or expired");
  snprintf(body, sizeof body, "{\"tool\":\"shell\",\"argv\":[\"secret\"],\"worker_key\":\"w1\","
           "\"run_id\":\"r\",\"lease_id\":\"%s\"}", id);
  expect("POST", "/v1/execute", w1, body, 200, "[REDACTED]");
  free(id);

  /* Nothing of the value in the metrics. */
  resp m;
  http("GET", "/metrics", CONTROL, NULL, &m);
  assert_null(strstr(m.body, SECRET));
  assert_non_null(strstr(m.body, "sandman_leases_total{event=\"refused\"}"));
  resp_free(&m);
}

static void workspaces(void **state) {
  (void)state;
  expect("POST", "/v1/execute", CONTROL,
         "{\"argv\":[\"x\"],\"run_id\":\"r\",\"workspace\":\"agent-a\"}", 200, NULL);
  char want[512], real[512];
  snprintf(want, sizeof want, "%s/agent-a", g_ws_root);
  assert_non_null(realpath(want, real));
  take_snapshot();
  assert_string_equal(seen.workspace, real);
  assert_string_equal(seen.argv, "x");
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"x\"],\"workspace\":\"../..\"}", 403,
         "below the workspaces root");
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"x\"],\"workspace\":\"escape\"}", 403,
         "below the workspaces root");
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"x\"],\"workspace\":\"/etc\"}", 403, NULL);
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"x\"],\"workspace\":\".\"}", 403, NULL);
  /* A missing workspace gets the answer of one outside the root: a request
   * learns nothing about the host's files. */
  resp out, miss;
  http("POST", "/v1/execute", CONTROL, "{\"argv\":[\"x\"],\"workspace\":\"../../etc\"}", &out);
  http("POST", "/v1/execute", CONTROL, "{\"argv\":[\"x\"],\"workspace\":\"../../nothing\"}", &miss);
  assert_int_equal(out.status, 403);
  assert_int_equal(miss.status, 403);
  assert_string_equal(jstr(out.json, "failure_kind"), "policy");
  assert_string_equal(strstr(jstr(out.json, "error"), "' is not"),
                      strstr(jstr(miss.json, "error"), "' is not"));
  resp_free(&out);
  resp_free(&miss);
  expect("POST", "/v1/execute", CONTROL, "{\"argv\":[\"x\"],\"workspace\":\"missing\"}", 403,
         "is not a directory this call may use");
  /* A worker token: its own directory only, one answer for the rest. */
  char w1[65];
  worker_token("w1", w1);
  expect("POST", "/v1/execute", w1,
         "{\"argv\":[\"x\"],\"worker_key\":\"w1\",\"run_id\":\"r\",\"workspace\":\"w1/proj\"}",
         200, NULL);
  take_snapshot();
  snprintf(want, sizeof want, "%s/w1/proj", g_ws_root);
  assert_non_null(realpath(want, real));
  assert_string_equal(seen.workspace, real);
  static const char *const not_mine[] = {"w2/proj", "w2/missing", "w1/escape", "w1/../w2/proj",
                                         "agent-a", "w1", "..", "/etc"};
  for (size_t i = 0; i < sizeof not_mine / sizeof not_mine[0]; i++) {
    char body[256];
    snprintf(body, sizeof body,
             "{\"argv\":[\"x\"],\"worker_key\":\"w1\",\"run_id\":\"r\",\"workspace\":\"%s\"}",
             not_mine[i]);
    expect("POST", "/v1/execute", w1, body, 403, "is not a directory this call may use");
  }
  /* The control token reaches every worker's directory. */
  expect("POST", "/v1/execute", CONTROL,
         "{\"argv\":[\"x\"],\"run_id\":\"r\",\"workspace\":\"w2/proj\"}", 200, NULL);
  /* A shell call in a workspace with a hook runs through the hook runner. */
  expect("POST", "/v1/execute", CONTROL,
         "{\"command\":\"echo hi\",\"run_id\":\"r\",\"workspace\":\"hooked\"}", 200, NULL);
  take_snapshot();
  assert_true(strncmp(seen.argv, "bash -c ", 8) == 0);
  assert_non_null(strstr(seen.argv, "export FROM_HOOK=1"));
  assert_non_null(strstr(seen.argv, "sh -c echo hi"));
  /* Not for other tools. */
  expect("POST", "/v1/execute", CONTROL,
         "{\"tool\":\"read_file\",\"argv\":[\"cat\",\"f\"],\"run_id\":\"r\",\"workspace\":\"hooked\"}",
         200, NULL);
  take_snapshot();
  assert_string_equal(seen.argv, "cat f");
}

static void background_handles(void **state) {
  (void)state;
  char w1[65], w2[65];
  worker_token("w1", w1);
  worker_token("w2", w2);
  resp r;
  http("POST", "/v1/execute", w1,
       "{\"argv\":[\"sleep\",\"30\"],\"worker_key\":\"w1\",\"run_id\":\"r\",\"timeout_s\":0.3,"
       "\"background_on_timeout\":true}",
       &r);
  assert_int_equal(r.status, 200);
  const char *h = jstr(r.json, "handle");
  assert_non_null(h);
  assert_string_equal(jstr(r.json, "state"), "running");
  char path[128];
  snprintf(path, sizeof path, "/v1/handles/%s", h);
  resp_free(&r);
  take_snapshot();
  assert_true(seen.timeout_s >= 3600); /* the background limit, not 0.3 */
  expect("GET", path, w1, NULL, 200, "\"state\":\"running\"");
  expect("GET", path, CONTROL, NULL, 200, "tick");
  expect("GET", path, w2, NULL, 401, NULL);
  expect("DELETE", path, w2, NULL, 401, NULL);
  expect("DELETE", path, w1, NULL, 200, "\"state\":\"killed\"");
  expect("GET", path, CONTROL, NULL, 404, NULL);

  /* A call that ends in time answers normally, without a handle. */
  http("POST", "/v1/execute", CONTROL,
       "{\"argv\":[\"sleep\",\"0.1\"],\"run_id\":\"r\",\"timeout_s\":20,"
       "\"background_on_timeout\":true}",
       &r);
  assert_int_equal(r.status, 200);
  assert_null(jstr(r.json, "handle"));
  assert_string_equal(jstr(r.json, "stdout"), "slept\n");
  resp_free(&r);

  /* A finished handle keeps its result until it is deleted. */
  http("POST", "/v1/execute", CONTROL,
       "{\"argv\":[\"sleep\",\"0.6\"],\"run_id\":\"r\",\"timeout_s\":0.1,"
       "\"background_on_timeout\":true}",
       &r);
  snprintf(path, sizeof path, "/v1/handles/%s", jstr(r.json, "handle"));
  resp_free(&r);
  for (int i = 0; i < 100; i++) {
    http("GET", path, CONTROL, NULL, &r);
    int done = strstr(r.body, "\"state\":\"finished\"") != NULL;
    if (done) assert_non_null(strstr(r.body, "\"result\":{"));
    resp_free(&r);
    if (done) break;
    usleep(100 * 1000);
  }
  expect("GET", path, CONTROL, NULL, 200, "\"state\":\"finished\"");
  expect("DELETE", path, CONTROL, NULL, 200, "\"removed\":true");
}

typedef struct par {
  int i;
  long status;
  int ok;
} par;

static void *par_call(void *arg) {
  par *p = arg;
  char body[256];
  snprintf(body, sizeof body, "{\"argv\":[\"echo\",\"n%d\"],\"run_id\":\"r%d\"}", p->i, p->i % 10);
  resp r;
  http("POST", "/v1/execute", CONTROL, body, &r);
  char want[64];
  snprintf(want, sizeof want, "echo n%d\n", p->i);
  p->status = r.status;
  p->ok = r.status == 200 && jstr(r.json, "stdout") && strcmp(jstr(r.json, "stdout"), want) == 0;
  resp_free(&r);
  return NULL;
}

static void concurrent_calls(void **state) {
  (void)state;
  pthread_t t[64];
  par p[64];
  for (int i = 0; i < 64; i++) {
    p[i].i = i;
    pthread_create(&t[i], NULL, par_call, &p[i]);
  }
  for (int i = 0; i < 64; i++) {
    pthread_join(t[i], NULL);
    if (!p[i].ok) fail_msg("call %d: status %ld", i, p[i].status);
  }
}

static void *slow_call(void *arg) {
  resp *r = arg;
  http("POST", "/v1/execute", CONTROL, "{\"argv\":[\"sleep\",\"1\"],\"run_id\":\"r\"}", r);
  return NULL;
}

static void stop_lets_calls_finish(void **state) {
  (void)state;
  static resp r;
  pthread_t t;
  pthread_create(&t, NULL, slow_call, &r);
  usleep(300 * 1000);
  sm_server_stop(g_srv);
  pthread_join(t, NULL);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "slept"));
  resp_free(&r);
  struct stat st;
  assert_int_equal(stat(g_sock, &st), -1); /* socket removed */
  sm_server_free(g_srv);
  g_srv = NULL;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(socket_is_private),
      cmocka_unit_test(healthz_needs_no_token),
      cmocka_unit_test(auth_matrix),
      cmocka_unit_test(errors),
      cmocka_unit_test(policy_on_modes),
      cmocka_unit_test(commands_and_templates),
      cmocka_unit_test(environment_policy),
      cmocka_unit_test(leases),
      cmocka_unit_test(workspaces),
      cmocka_unit_test(background_handles),
      cmocka_unit_test(concurrent_calls),
      cmocka_unit_test(stop_lets_calls_finish),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
