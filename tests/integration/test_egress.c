/* Egress by allowlist against a stand-in internet on this machine: two
 * servers (allowed.test, denied.test; HTTP on 80, HTTPS on 443 and 8443)
 * on an internal network of their own, which is also the proxy's outbound
 * network, so no packet leaves the machine. Two sandboxes with different
 * allowlists call them through sandman's egress proxy with curl and
 * Python's urllib; every refusal the issue lists is tried; a policy change
 * reaches a running sandbox; every decision lands in the audit trail once,
 * with the right sandbox and rule. */
#include "support/egress_world.h"
#include "support/itest.h"

static sm_engine *E;
static ew_world W;
static char allowed_id[SM_ENGINE_ID_MAX], denied_id[SM_ENGINE_ID_MAX];
static char allowed_ip[64], denied_ip[64];
static char sb1[SM_ENGINE_ID_MAX], sb2[SM_ENGINE_ID_MAX], sb1_name[128], sb2_name[128];
static sm_egress_net NET;
static sm_egress_proxy_options PO = SM_EGRESS_PROXY_OPTIONS_INIT;
static const char *const pinned[] = {"metadata.test=169.254.169.254", "loop.test=127.0.0.1"};

typedef ew_capture capture;

static int sh(const char *cid, const char *script, capture *c) {
  int code = ew_sh(&W, cid, script, c);
  if (code < 0) fail_msg("%s", c->out);
  return code;
}

/* A sandbox as network mode allowlist makes it: no network of its own, no
 * capabilities, the proxy variables (its relay comes with its policy). */
static void start_sandbox_rt(const char *name, const char *runtime, char id[SM_ENGINE_ID_MAX], char *out_name,
                             size_t name_len) {
  char vars[SM_EGRESS_ENV_COUNT][128];
  const char *env[SM_EGRESS_ENV_COUNT];
  size_t n = sm_egress_env(&NET, vars, SM_EGRESS_ENV_COUNT);
  assert_int_equal(n, SM_EGRESS_ENV_COUNT);
  for (size_t i = 0; i < n; i++) env[i] = vars[i];
  snprintf(out_name, name_len, "%s-%s", W.instance, name);
  assert_int_equal(ew_start_client(&W, name, SM_EGRESS_SANDBOX_NETWORK, env, n, runtime, id), 0);
}

static void start_sandbox(const char *name, char id[SM_ENGINE_ID_MAX], char *out_name, size_t name_len) {
  start_sandbox_rt(name, NULL, id, out_name, name_len);
}

static void set_policy(const char *cid, const char *name, const char *agent, const char *const *allow, size_t n_allow,
                       const char *const *deny, size_t n_deny) {
  sm_egress_level levels[1] = {{"defaults", allow, n_allow, deny, n_deny}};
  sm_egress_policy p = {name, agent, "egress-test", "r1", NULL, levels, 1};
  sm_error err = SM_ERROR_INIT;
  if (sm_egress_set_policy(E, &PO, &NET, cid, &p, &err) != 0) fail_msg("set policy: %s", err.message);
}

/* ---- set-up ---- */

static int setup(void **state) {
  (void)state;
  E = itest_engine();
  if (ew_setup(&W, E, itest_instance("test_egress"), 1) != 0) fail_msg("the stand-in internet");
  PO.instance = W.instance;
  PO.network = W.network;
  PO.hosts = pinned;
  PO.n_hosts = 2;
  assert_int_equal(ew_start_server(&W, "allowed", "allowed.test", allowed_id), 0);
  assert_int_equal(ew_start_server(&W, "denied", "denied.test", denied_id), 0);
  assert_int_equal(ew_ip_on(&W, allowed_id, W.network, allowed_ip, sizeof allowed_ip), 0);
  assert_int_equal(ew_ip_on(&W, denied_id, W.network, denied_ip, sizeof denied_ip), 0);
  sm_error err = SM_ERROR_INIT;
  if (sm_egress_prepare(E, &PO, &NET, &err) != 0) fail_msg("prepare: %s", err.message);
  start_sandbox("sb1", sb1, sb1_name, sizeof sb1_name);
  start_sandbox("sb2", sb2, sb2_name, sizeof sb2_name);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  ew_teardown(&W);
  if (sm_egress_teardown(E, &PO, &err) != 0) print_message("teardown: %s\n", err.message);
  sm_engine_free(E);
  return 0;
}

/* ---- the checks ---- */

static const char curl_fmt[] = "printf '%%s' \"$CA_PEM\" > /tmp/ca.pem; curl -sS --max-time 20 --cacert /tmp/ca.pem %s 2>&1";

static int curl(const char *cid, const char *args, capture *c) {
  char script[1024];
  snprintf(script, sizeof script, curl_fmt, args);
  return sh(cid, script, c);
}

static void allowed_policy_sb1(void) {
  char ip32[80];
  snprintf(ip32, sizeof ip32, "%s/32", allowed_ip);
  /* allowed.test (its address listed: the stand-in lives on an engine
   * network), names that resolve to link-local and loopback without their
   * addresses listed. */
  const char *allow[] = {"allowed.test:443", "allowed.test:80", ip32, "metadata.test", "loop.test"};
  const char *deny[] = {"*.blocked.test"};
  set_policy(sb1, sb1_name, "coder", allow, 5, deny, 1);
}

static void test_allowed_and_refused(void **state) {
  (void)state;
  allowed_policy_sb1();
  char ip32[80];
  snprintf(ip32, sizeof ip32, "%s/32", denied_ip);
  const char *allow2[] = {"denied.test:443", ip32};
  set_policy(sb2, sb2_name, "other", allow2, 2, NULL, 0);
  capture c;

  /* Allowed: curl over HTTPS (CONNECT) and plain HTTP, Python's urllib both. */
  assert_int_equal(curl(sb1, "https://allowed.test/", &c), 0);
  assert_string_equal(c.out, "hello from allowed.test via allowed.test\n");
  assert_int_equal(curl(sb1, "http://allowed.test/", &c), 0);
  assert_string_equal(c.out, "hello from allowed.test via allowed.test\n");
  assert_int_equal(sh(sb1,
                      "printf '%s' \"$CA_PEM\" > /tmp/ca.pem; python3 -c \"import ssl, urllib.request as u; "
                      "ctx = ssl.create_default_context(cafile='/tmp/ca.pem'); "
                      "print(u.urlopen('https://allowed.test/', context=ctx, timeout=20).read().decode(), end=''); "
                      "print(u.urlopen('http://allowed.test/', timeout=20).read().decode(), end='')\" 2>&1",
                      &c),
                   0);
  assert_string_equal(c.out, "hello from allowed.test via allowed.test\nhello from allowed.test via allowed.test\n");
  /* A body goes up by Content-Length. */
  assert_int_equal(curl(sb1, "-d 12345 http://allowed.test/post", &c), 0);
  assert_string_equal(c.out, "allowed.test got 5 bytes\n");

  /* Refused: a name not listed, an IP literal, the metadata address, names
   * that resolve to link-local or loopback, an unlisted port, a deny. */
  static const struct {
    const char *args, *want;
  } refused[] = {
      {"https://denied.test/", "403"},
      {"http://denied.test/", "denied.test:80 refused: defaults.egress.allow does not include denied.test:80"},
      {"http://169.254.169.254/latest/meta-data/", "169.254.169.254:80 refused: defaults.egress.allow does not include"},
      {"http://metadata.test/", "link-local"},
      {"http://loop.test/", "loopback"},
      {"https://allowed.test:8443/", "403"},
      {"http://x.blocked.test/", "defaults.egress.deny: *.blocked.test matches x.blocked.test:80"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    int code = curl(sb1, refused[i].args, &c);
    if (code == 0 && strstr(refused[i].args, "https") == NULL) {
      /* Plain HTTP: curl exits 0 on a 403 answer; the body says why. */
      if (strstr(c.out, refused[i].want) == NULL) fail_msg("%s: got '%s'", refused[i].args, c.out);
    } else if (code == 0) {
      fail_msg("%s went through: '%s'", refused[i].args, c.out);
    } else if (strstr(c.out, refused[i].want) == NULL) {
      fail_msg("%s: exit %d, '%s' lacks '%s'", refused[i].args, code, c.out, refused[i].want);
    }
  }
  char lit[200];
  snprintf(lit, sizeof lit, "http://%s/", denied_ip);
  assert_int_equal(curl(sb1, lit, &c), 0);
  assert_non_null(strstr(c.out, "defaults.egress.allow does not include"));

  /* A Host header that disagrees with the request target. */
  assert_int_equal(sh(sb1,
                      "printf 'GET http://allowed.test/ HTTP/1.1\\r\\nHost: denied.test\\r\\n\\r\\n' | "
                      "nc 127.0.0.1 3128 2>&1 | head -n 1",
                      &c),
                   0);
  assert_non_null(strstr(c.out, "400"));

  /* Ignoring the proxy gets nowhere: no route, no outside DNS. */
  char raw[400];
  snprintf(raw, sizeof raw,
           "python3 -c \"import socket; s = socket.socket(); s.settimeout(5); s.connect(('%s', 443)); print('connected')\" 2>&1",
           allowed_ip);
  assert_int_not_equal(sh(sb1, raw, &c), 0);
  assert_null(strstr(c.out, "connected"));
  assert_int_not_equal(sh(sb1, "unset HTTP_PROXY http_proxy; curl -sS --max-time 5 --noproxy '*' http://allowed.test/ 2>&1", &c), 0);
  assert_int_not_equal(sh(sb1, "nslookup allowed.test 2>&1", &c), 0);
  /* No network device but loopback: the relay shares it, nothing else. */
  assert_int_equal(sh(sb1, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", &c), 0);
  assert_string_equal(c.out, "lo\n");

  /* The proxy listens on no network: a container beside it on its outbound
   * network (the allowed server) finds nothing on its port. */
  char proxy_ip[64], probe[400];
  assert_int_equal(ew_ip_on(&W, NET.proxy_id, W.network, proxy_ip, sizeof proxy_ip), 0);
  snprintf(probe, sizeof probe,
           "python3 -c \"import socket; s = socket.socket(); s.settimeout(5); s.connect(('%s', 3128)); print('connected')\" 2>&1",
           proxy_ip);
  assert_int_not_equal(sh(allowed_id, probe, &c), 0);
  assert_non_null(strstr(c.out, "refused"));

  /* A container with a network of its own never gets a relay: it would
   * share more than a loopback with it. */
  sm_error err = SM_ERROR_INIT;
  const char *any[] = {"*"};
  sm_egress_level lv[1] = {{"defaults", any, 1, NULL, 0}};
  sm_egress_policy open_p = {"server", "x", "egress-test", NULL, NULL, lv, 1};
  assert_int_equal(sm_egress_set_policy(E, &PO, &NET, allowed_id, &open_p, &err), SM_EUNSAFE);
  assert_non_null(strstr(err.message, "no egress relay"));

  /* The second sandbox has its own allowlist. */
  assert_int_equal(curl(sb2, "https://denied.test/", &c), 0);
  assert_string_equal(c.out, "hello from denied.test via denied.test\n");
  assert_int_not_equal(curl(sb2, "https://allowed.test/", &c), 0);
}

static void test_live_policy(void **state) {
  (void)state;
  capture c;
  allowed_policy_sb1();
  assert_int_equal(curl(sb1, "https://allowed.test/", &c), 0);
  /* The running sandbox gets a new allowlist: the next connection obeys it. */
  char ip32[80];
  snprintf(ip32, sizeof ip32, "%s/32", denied_ip);
  const char *allow[] = {"denied.test:443", ip32};
  set_policy(sb1, sb1_name, "coder", allow, 2, NULL, 0);
  assert_int_equal(curl(sb1, "https://denied.test/", &c), 0);
  assert_string_equal(c.out, "hello from denied.test via denied.test\n");
  assert_int_not_equal(curl(sb1, "https://allowed.test/", &c), 0);
  assert_non_null(strstr(c.out, "403"));
  /* Revoked: the relay is gone, and with it the only way out. */
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_egress_revoke(E, sb1_name, &err), 0);
  assert_int_not_equal(curl(sb1, "https://denied.test/", &c), 0);
  assert_non_null(strstr(c.out, "port 3128")); /* the relay is not there to connect to */
  assert_int_equal(sm_egress_revoke(E, sb1_name, &err), 0); /* again: nothing to do */
  allowed_policy_sb1();
  assert_int_equal(curl(sb1, "https://allowed.test/", &c), 0);

  /* A sandbox restarted has a new network namespace: its relay, started
   * before, is in the old one until its policy is written again, which
   * makes the relay anew. */
  assert_int_equal(sm_engine_container_stop(E, sb2, 0, &err), 0);
  assert_int_equal(sm_engine_container_start(E, sb2, &err), 0);
  assert_int_not_equal(curl(sb2, "https://denied.test/", &c), 0);
  snprintf(ip32, sizeof ip32, "%s/32", denied_ip);
  const char *allow2[] = {"denied.test:443", ip32};
  set_policy(sb2, sb2_name, "other", allow2, 2, NULL, 0);
  assert_int_equal(curl(sb2, "https://denied.test/", &c), 0);
  assert_string_equal(c.out, "hello from denied.test via denied.test\n");
}

/* gVisor: the runtime registered as runsc-net (scripts/setup.sh) runs the
 * sandbox on its own network namespace, so the topology holds there too. */
static void test_gvisor(void **state) {
  (void)state;
  json_object *info = NULL, *rts = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_engine_info(E, &info, &err), 0);
  int have = json_object_object_get_ex(info, "Runtimes", &rts) && json_object_object_get_ex(rts, "runsc-net", NULL);
  json_object_put(info);
  if (!have) {
    if (itest_in_ci()) fail_msg("the engine does not list runtime runsc-net (scripts/setup.sh registers it)");
    print_message("runsc-net not registered: skipped\n");
    skip();
  }
  char sb3[SM_ENGINE_ID_MAX], sb3_name[128];
  start_sandbox_rt("sb3", "runsc-net", sb3, sb3_name, sizeof sb3_name);
  char ip32[80];
  snprintf(ip32, sizeof ip32, "%s/32", allowed_ip);
  const char *allow[] = {"allowed.test:443", ip32};
  set_policy(sb3, sb3_name, "gvisor", allow, 2, NULL, 0);
  capture c;
  assert_int_equal(sh(sb3, "dmesg 2>/dev/null | head -n 1", &c), 0);
  assert_non_null(strstr(c.out, "gVisor"));
  assert_int_equal(curl(sb3, "https://allowed.test/", &c), 0);
  assert_string_equal(c.out, "hello from allowed.test via allowed.test\n");
  assert_int_not_equal(curl(sb3, "https://denied.test/", &c), 0);
  assert_non_null(strstr(c.out, "403"));
  char raw[400];
  snprintf(raw, sizeof raw,
           "python3 -c \"import socket; s = socket.socket(); s.settimeout(5); s.connect(('%s', 443)); print('connected')\" 2>&1",
           allowed_ip);
  assert_int_not_equal(sh(sb3, raw, &c), 0);
  assert_null(strstr(c.out, "connected"));
}

/* ---- the audit trail ---- */

typedef struct seen {
  json_object *events[256];
  size_t n;
} seen;

static int keep(void *ud, json_object *ev) {
  seen *s = ud;
  if (s->n < 256) s->events[s->n++] = json_object_get(ev);
  return 0;
}

static const char *um(json_object *ev, const char *key) {
  json_object *u = NULL, *v = NULL;
  if (!json_object_object_get_ex(ev, "unmapped", &u) || !json_object_object_get_ex(u, key, &v)) return "";
  return json_object_get_string(v);
}

static const char *dst(json_object *ev) {
  json_object *d = NULL, *h = NULL;
  if (!json_object_object_get_ex(ev, "dst_endpoint", &d) || !json_object_object_get_ex(d, "hostname", &h)) return "";
  return json_object_get_string(h);
}

/* The event for (sandbox, event name, host, rule fragment), or NULL. */
static json_object *find(seen *s, const char *sandbox, const char *event, const char *host, const char *rule_has) {
  for (size_t i = 0; i < s->n; i++) {
    json_object *ev = s->events[i];
    if (strcmp(um(ev, "sandbox"), sandbox) || strcmp(um(ev, "event"), event) || strcmp(dst(ev), host)) continue;
    const char *rule = um(ev, "rule");
    json_object *msg = NULL;
    const char *m = json_object_object_get_ex(ev, "message", &msg) ? json_object_get_string(msg) : "";
    if (rule_has == NULL || strstr(rule, rule_has) || strstr(m, rule_has)) return ev;
  }
  return NULL;
}

static void test_audit_trail(void **state) {
  (void)state;
  char file[400];
  snprintf(file, sizeof file, "%s/audit.jsonl", W.workdir);
  sm_audit_options ao = SM_AUDIT_OPTIONS_INIT;
  ao.file = file;
  sm_audit *a = NULL;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_audit_open(&a, &ao, &err), 0);
  size_t n = 0;
  if (sm_egress_collect(E, &PO, a, &n, &err) != 0) fail_msg("collect: %s", err.message);
  if (n < 20) fail_msg("only %zu events collected", n);
  /* Collected once: a second collection finds nothing new. */
  size_t again = 9;
  assert_int_equal(sm_egress_collect(E, &PO, a, &again, &err), 0);
  assert_int_equal(again, 0);
  sm_audit_close(a);

  seen s = {0};
  size_t skipped = 0;
  assert_int_equal(sm_audit_read(file, 0, NULL, keep, &s, &skipped, &err), 0);
  assert_int_equal(skipped, 0);
  assert_int_equal(s.n, n);
  json_object *ev = find(&s, sb1_name, "egress.allowed", "allowed.test",
                         "defaults.egress.allow: allowed.test:443 matches allowed.test:443");
  assert_non_null(ev);
  assert_string_equal(um(ev, "agent"), "coder");
  json_object *t = NULL, *bi = NULL;
  assert_true(json_object_object_get_ex(ev, "traffic", &t) && json_object_object_get_ex(t, "bytes_in", &bi));
  assert_true(json_object_get_int64(bi) > 0);
  assert_true(json_object_object_get_ex(ev, "duration", NULL));
  assert_non_null(find(&s, sb1_name, "egress.denied", "denied.test", "defaults.egress.allow does not include denied.test:443"));
  assert_non_null(find(&s, sb1_name, "egress.denied", "169.254.169.254", "does not include 169.254.169.254:80"));
  assert_non_null(find(&s, sb1_name, "egress.denied", "metadata.test", "link-local"));
  assert_non_null(find(&s, sb1_name, "egress.denied", "loop.test", "loopback"));
  assert_non_null(find(&s, sb1_name, "egress.denied", "allowed.test", "does not include allowed.test:8443"));
  assert_non_null(find(&s, sb1_name, "egress.denied", "x.blocked.test", "defaults.egress.deny: *.blocked.test"));
  assert_non_null(find(&s, sb1_name, "egress.denied", denied_ip, "does not include"));
  assert_non_null(find(&s, sb1_name, "egress.denied", "allowed.test", "disagrees with the request target"));
  assert_non_null(find(&s, sb2_name, "egress.allowed", "denied.test", "defaults.egress.allow: denied.test:443"));
  assert_non_null(find(&s, sb2_name, "egress.denied", "allowed.test", "does not include allowed.test:443"));
  char sb3_name[160];
  snprintf(sb3_name, sizeof sb3_name, "%s-sb3", W.instance);
  assert_non_null(find(&s, sb3_name, "egress.allowed", "allowed.test", "defaults.egress.allow: allowed.test:443"));
  /* The policy change: sb1 reached denied.test after it. */
  assert_non_null(find(&s, sb1_name, "egress.allowed", "denied.test", "defaults.egress.allow: denied.test:443"));
  for (size_t i = 0; i < s.n; i++) json_object_put(s.events[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_allowed_and_refused),
      cmocka_unit_test(test_live_policy),
      cmocka_unit_test(test_gvisor),
      cmocka_unit_test(test_audit_trail),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
