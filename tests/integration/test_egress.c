/* Egress by allowlist against a stand-in internet on this machine: two
 * servers (allowed.test, denied.test; HTTP on 80, HTTPS on 443 and 8443)
 * on an internal network of their own, which is also the proxy's outbound
 * network, so no packet leaves the machine. Two sandboxes with different
 * allowlists call them through sandman's egress proxy with curl and
 * Python's urllib; every refusal the issue lists is tried; a policy change
 * reaches a running sandbox; every decision lands in the audit trail once,
 * with the right sandbox and rule. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/itest.h"

extern char **environ;

static sm_engine *E;
static char instance[128], image[200], world[200], workdir[256];
static char allowed_id[SM_ENGINE_ID_MAX], denied_id[SM_ENGINE_ID_MAX];
static char allowed_ip[64], denied_ip[64];
static char sb1[SM_ENGINE_ID_MAX], sb2[SM_ENGINE_ID_MAX], sb1_name[128], sb2_name[128];
static char ca_pem[8192], cert_pem[8192], key_pem[8192];
static sm_egress_net NET;
static sm_egress_proxy_options PO = SM_EGRESS_PROXY_OPTIONS_INIT;
static const char *const pinned[] = {"metadata.test=169.254.169.254", "loop.test=127.0.0.1"};

/* ---- helpers ---- */

static int run_prog(char *const argv[]) {
  pid_t pid;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0) return -1;
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void read_file(const char *path, char *out, size_t cap) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(out, 1, cap - 1, f);
  out[n] = '\0';
  fclose(f);
}

typedef struct capture {
  char out[65536];
  size_t n;
} capture;

static int on_output(void *ud, int stream, const char *data, size_t len) {
  capture *c = ud;
  (void)stream;
  if (len > sizeof c->out - 1 - c->n) len = sizeof c->out - 1 - c->n;
  memcpy(c->out + c->n, data, len);
  c->n += len;
  c->out[c->n] = '\0';
  return 0;
}

/* Runs sh -c SCRIPT in the container as its user; stdout+stderr into c. */
static int sh(const char *cid, const char *script, capture *c) {
  memset(c, 0, sizeof *c);
  json_object *cfg = json_object_new_object(), *cmd = json_object_new_array(), *env = json_object_new_array();
  json_object_array_add(cmd, json_object_new_string("/bin/sh"));
  json_object_array_add(cmd, json_object_new_string("-c"));
  json_object_array_add(cmd, json_object_new_string(script));
  char ca[8300];
  snprintf(ca, sizeof ca, "CA_PEM=%s", ca_pem);
  json_object_array_add(env, json_object_new_string(ca));
  json_object_object_add(cfg, "Cmd", cmd);
  json_object_object_add(cfg, "Env", env);
  json_object_object_add(cfg, "AttachStdout", json_object_new_boolean(1));
  json_object_object_add(cfg, "AttachStderr", json_object_new_boolean(1));
  char exec_id[SM_ENGINE_ID_MAX];
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_exec_create(E, cid, cfg, exec_id, &err) != 0) fail_msg("exec create: %s", err.message);
  json_object_put(cfg);
  sm_exec_io io = SM_EXEC_IO_INIT;
  io.output = on_output;
  io.output_ud = c;
  io.timeout_s = 60;
  if (sm_engine_exec_start(E, exec_id, &io, &err) != 0) fail_msg("exec start: %s", err.message);
  int code = -1;
  assert_int_equal(sm_engine_exec_inspect(E, exec_id, NULL, &code, NULL, &err), 0);
  return code;
}

static void ip_on(const char *cid, const char *network, char *out, size_t len) {
  json_object *info = NULL, *ns, *nets, *net, *ip;
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_engine_container_inspect(E, cid, &info, &err), 0);
  assert_true(json_object_object_get_ex(info, "NetworkSettings", &ns) && json_object_object_get_ex(ns, "Networks", &nets) &&
              json_object_object_get_ex(nets, network, &net) && json_object_object_get_ex(net, "IPAddress", &ip));
  snprintf(out, len, "%s", json_object_get_string(ip));
  json_object_put(info);
}

static json_object *labels(void) {
  json_object *l = json_object_new_object();
  json_object_object_add(l, "io.sandman.instance", json_object_new_string(instance));
  return l;
}

/* The stand-in servers: "hello from NAME" on 80 (HTTP), 443 and 8443 (HTTPS). */
static const char server_py[] =
    "import http.server, os, ssl, threading\n"
    "name = os.environ['NAME']\n"
    "open('/tmp/c.pem', 'w').write(os.environ['CERT_PEM'])\n"
    "open('/tmp/k.pem', 'w').write(os.environ['KEY_PEM'])\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        b = ('hello from %s via %s\\n' % (name, self.headers.get('Host'))).encode()\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)\n"
    "    def do_POST(self):\n"
    "        n = int(self.headers.get('Content-Length', '0')); d = self.rfile.read(n)\n"
    "        b = ('%s got %d bytes\\n' % (name, len(d))).encode()\n"
    "        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)\n"
    "    def log_message(self, *a): pass\n"
    "def serve(port, tls):\n"
    "    s = http.server.ThreadingHTTPServer(('0.0.0.0', port), H)\n"
    "    if tls:\n"
    "        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain('/tmp/c.pem', '/tmp/k.pem')\n"
    "        s.socket = ctx.wrap_socket(s.socket, server_side=True)\n"
    "    s.serve_forever()\n"
    "for p, t in ((443, True), (8443, True)): threading.Thread(target=serve, args=(p, t), daemon=True).start()\n"
    "serve(80, False)\n";

static void start_server(const char *name, const char *alias, char id[SM_ENGINE_ID_MAX]) {
  json_object *c = json_object_new_object(), *hc = json_object_new_object(), *cmd = json_object_new_array();
  json_object *env = json_object_new_array();
  char buf[9000], cname[256];
  json_object_array_add(cmd, json_object_new_string("python3"));
  json_object_array_add(cmd, json_object_new_string("-c"));
  json_object_array_add(cmd, json_object_new_string(server_py));
  snprintf(buf, sizeof buf, "NAME=%s", alias);
  json_object_array_add(env, json_object_new_string(buf));
  snprintf(buf, sizeof buf, "CERT_PEM=%s", cert_pem);
  json_object_array_add(env, json_object_new_string(buf));
  snprintf(buf, sizeof buf, "KEY_PEM=%s", key_pem);
  json_object_array_add(env, json_object_new_string(buf));
  json_object_object_add(c, "Image", json_object_new_string(image));
  json_object_object_add(c, "User", json_object_new_string("0:0")); /* ports below 1024 */
  json_object_object_add(c, "Cmd", cmd);
  json_object_object_add(c, "Env", env);
  json_object_object_add(c, "Labels", labels());
  json_object_object_add(hc, "NetworkMode", json_object_new_string(world));
  json_object_object_add(c, "HostConfig", hc);
  json_object *nc = json_object_new_object(), *eps = json_object_new_object(), *ep = json_object_new_object();
  json_object *al = json_object_new_array();
  json_object_array_add(al, json_object_new_string(alias));
  json_object_object_add(ep, "Aliases", al);
  json_object_object_add(eps, world, ep);
  json_object_object_add(nc, "EndpointsConfig", eps);
  json_object_object_add(c, "NetworkingConfig", nc);
  snprintf(cname, sizeof cname, "%s-%s", instance, name);
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_container_create(E, cname, c, id, NULL, &err) != 0) fail_msg("create %s: %s", name, err.message);
  json_object_put(c);
  assert_int_equal(sm_engine_container_start(E, id, &err), 0);
}

/* A sandbox as network mode allowlist makes it: the internal network only,
 * no capabilities, the proxy variables. */
static void start_sandbox_rt(const char *name, const char *runtime, char id[SM_ENGINE_ID_MAX], char *out_name,
                             size_t name_len) {
  json_object *c = json_object_new_object(), *hc = json_object_new_object(), *cmd = json_object_new_array();
  json_object *env = json_object_new_array();
  char vars[SM_EGRESS_ENV_COUNT][128];
  size_t n = sm_egress_env(&NET, vars, SM_EGRESS_ENV_COUNT);
  assert_int_equal(n, SM_EGRESS_ENV_COUNT);
  for (size_t i = 0; i < n; i++) json_object_array_add(env, json_object_new_string(vars[i]));
  json_object_array_add(cmd, json_object_new_string("sleep"));
  json_object_array_add(cmd, json_object_new_string("3600"));
  json_object_object_add(c, "Image", json_object_new_string(image));
  json_object_object_add(c, "Cmd", cmd);
  json_object_object_add(c, "Env", env);
  json_object_object_add(c, "Labels", labels());
  json_object_object_add(hc, "NetworkMode", json_object_new_string(NET.network));
  json_object *caps = json_object_new_array();
  json_object_array_add(caps, json_object_new_string("ALL"));
  json_object_object_add(hc, "CapDrop", caps);
  if (runtime) json_object_object_add(hc, "Runtime", json_object_new_string(runtime));
  json_object_object_add(c, "HostConfig", hc);
  snprintf(out_name, name_len, "%s-%s", instance, name);
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_container_create(E, out_name, c, id, NULL, &err) != 0) fail_msg("create %s: %s", name, err.message);
  json_object_put(c);
  assert_int_equal(sm_engine_container_start(E, id, &err), 0);
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
  const char *inst = getenv("SANDMAN_INSTANCE");
  snprintf(instance, sizeof instance, "%s", inst && *inst ? inst : "it-egress");
  snprintf(image, sizeof image, "sandman-test/egress-world:%s", instance);
  snprintf(world, sizeof world, "%s-world", instance);
  for (char *p = image + strlen("sandman-test/egress-world:"); *p; p++)
    if (*p == '/' || *p == ':') *p = '-';
  PO.instance = instance;
  PO.network = world;
  PO.hosts = pinned;
  PO.n_hosts = 2;

  /* The image, offline, under this test's own tag. */
  const char *bin = getenv("SANDMAN_BIN"), *src = getenv("SANDMAN_SOURCE_DIR");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/fixtures/egress-world", src ? src : ".");
  char *build[] = {(char *)(bin ? bin : "sandman"), "image", "build", dir, "--tag", image, NULL};
  if (run_prog(build) != 0) fail_msg("building %s failed", image);

  /* A certificate authority and a server certificate for both names. */
  snprintf(workdir, sizeof workdir, "/tmp/sandman-egress-test-XXXXXX");
  assert_non_null(mkdtemp(workdir));
  char ca_key[300], ca_crt[300], key[300], csr[300], crt[300], ext[300];
  snprintf(ca_key, sizeof ca_key, "%s/ca.key", workdir);
  snprintf(ca_crt, sizeof ca_crt, "%s/ca.pem", workdir);
  snprintf(key, sizeof key, "%s/srv.key", workdir);
  snprintf(csr, sizeof csr, "%s/srv.csr", workdir);
  snprintf(crt, sizeof crt, "%s/srv.pem", workdir);
  snprintf(ext, sizeof ext, "%s/ext.cnf", workdir);
  FILE *f = fopen(ext, "w");
  fputs("subjectAltName=DNS:allowed.test,DNS:denied.test\n", f);
  fclose(f);
  char *g1[] = {"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=sandman test CA",
                "-keyout", ca_key, "-out", ca_crt, NULL};
  char *g2[] = {"openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=allowed.test", "-keyout", key, "-out", csr, NULL};
  char *g3[] = {"openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-days", "2",
                "-extfile", ext, "-out", crt, NULL};
  assert_int_equal(run_prog(g1), 0);
  assert_int_equal(run_prog(g2), 0);
  assert_int_equal(run_prog(g3), 0);
  read_file(ca_crt, ca_pem, sizeof ca_pem);
  read_file(crt, cert_pem, sizeof cert_pem);
  read_file(key, key_pem, sizeof key_pem);

  /* The stand-in internet: internal, so nothing leaves the machine. */
  sm_error err = SM_ERROR_INIT;
  json_object *l = labels();
  if (sm_engine_network_create(E, world, NULL, 1, l, NULL, &err) != 0) fail_msg("world network: %s", err.message);
  json_object_put(l);
  start_server("allowed", "allowed.test", allowed_id);
  start_server("denied", "denied.test", denied_id);
  ip_on(allowed_id, world, allowed_ip, sizeof allowed_ip);
  ip_on(denied_id, world, denied_ip, sizeof denied_ip);

  if (sm_egress_prepare(E, &PO, "egress-test", &NET, &err) != 0) fail_msg("prepare: %s", err.message);
  start_sandbox("sb1", sb1, sb1_name, sizeof sb1_name);
  start_sandbox("sb2", sb2, sb2_name, sizeof sb2_name);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  sm_error err = SM_ERROR_INIT;
  itest_remove_instance(E, instance);
  sm_engine_network_remove(E, world, &err);
  if (sm_egress_teardown(E, &PO, &err) != 0) print_message("teardown: %s\n", err.message);
  sm_engine_image_remove(E, image, 1, &err);
  char *rm[] = {"rm", "-rf", workdir, NULL};
  run_prog(rm);
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
                      "nc sandman-egress 3128 2>&1 | head -n 1",
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
  /* Revoked: nothing. */
  sm_error err = SM_ERROR_INIT;
  assert_int_equal(sm_egress_revoke(E, &PO, &NET, sb1, &err), 0);
  assert_int_not_equal(curl(sb1, "https://denied.test/", &c), 0);
  allowed_policy_sb1();
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
  snprintf(file, sizeof file, "%s/audit.jsonl", workdir);
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
  snprintf(sb3_name, sizeof sb3_name, "%s-sb3", instance);
  assert_non_null(find(&s, sb3_name, "egress.allowed", "allowed.test", "defaults.egress.allow: allowed.test:443"));
  /* The policy change: sb1 reached denied.test after it. */
  assert_non_null(find(&s, sb1_name, "egress.allowed", "denied.test", "defaults.egress.allow: denied.test:443"));
  /* The revoked address has no sandbox any more. */
  assert_non_null(find(&s, "", "egress.denied", "denied.test", "no egress.allow list"));
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
