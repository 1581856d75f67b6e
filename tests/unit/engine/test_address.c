/* Engine address resolution: precedence, schemes, TCP forms, TLS from the
 * environment as the docker CLI reads it, missing certificate files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/check.h"

#include "engine/address.h"
#include "support/files.h"

static engine_address addr;
static sm_error err;

static int resolve(const char *opt, int tls, const char *cert, const char *env_host,
                   const char *env_tls, const char *env_cert, const char *home) {
  engine_address_env env = {env_host, env_tls, env_cert, home, NULL, "/nonexistent-docker-config"};
  sm_error_clear(&err);
  return engine_address_resolve(opt, tls, cert, &env, &addr, &err);
}

static void test_default_unix(void **s) {
  (void)s;
  assert_int_equal(resolve(NULL, -1, NULL, NULL, NULL, NULL, "/root"), 0);
  assert_int_equal(addr.kind, ENGINE_ADDR_UNIX);
  assert_string_equal(addr.host, "unix:///var/run/docker.sock");
  assert_string_equal(addr.socket_path, "/var/run/docker.sock");
  assert_int_equal(addr.tls, 0);
  /* An empty DOCKER_HOST counts as unset, as in docker. */
  assert_int_equal(resolve(NULL, -1, NULL, "", NULL, NULL, "/root"), 0);
  assert_string_equal(addr.host, SM_ENGINE_DEFAULT_HOST);
}

static void test_precedence(void **s) {
  (void)s;
  assert_int_equal(resolve(NULL, -1, NULL, "unix:///run/env.sock", NULL, NULL, NULL), 0);
  assert_string_equal(addr.socket_path, "/run/env.sock");
  assert_int_equal(resolve("unix:///run/opt.sock", -1, NULL, "unix:///run/env.sock", NULL, NULL,
                           NULL), 0);
  assert_string_equal(addr.socket_path, "/run/opt.sock");
  assert_int_equal(resolve("tcp://10.0.0.1:2375", -1, NULL, "unix:///run/env.sock", NULL, NULL,
                           NULL), 0);
  assert_int_equal(addr.kind, ENGINE_ADDR_TCP);
}

static void test_tcp_forms(void **s) {
  (void)s;
  assert_int_equal(resolve("tcp://127.0.0.1:2375", -1, NULL, NULL, NULL, NULL, NULL), 0);
  assert_string_equal(addr.tcp_host, "127.0.0.1");
  assert_int_equal(addr.port, 2375);
  assert_string_equal(addr.host, "tcp://127.0.0.1:2375");
  assert_int_equal(resolve("tcp://docker.example:2375/", -1, NULL, NULL, NULL, NULL, NULL), 0);
  assert_string_equal(addr.tcp_host, "docker.example");
  assert_int_equal(resolve("tcp://[::1]:2376", 0, NULL, NULL, NULL, NULL, NULL), 0);
  assert_string_equal(addr.tcp_host, "::1");
  assert_int_equal(addr.port, 2376);
  assert_string_equal(addr.host, "tcp://[::1]:2376");
  /* Docker's default port without TLS. */
  assert_int_equal(resolve("tcp://enginehost", -1, NULL, NULL, NULL, NULL, NULL), 0);
  assert_int_equal(addr.port, 2375);
}

static void expect_inval(const char *host, const char *needle) {
  assert_int_equal(resolve(host, -1, NULL, NULL, NULL, NULL, NULL), SM_EINVAL);
  if (strstr(err.message, needle) == NULL)
    fail_msg("for '%s': [%s] not in [%s]", host, needle, err.message);
}

static void test_bad_addresses(void **s) {
  (void)s;
  expect_inval("ssh://user@host", "unsupported engine address scheme 'ssh://'");
  expect_inval("npipe:////./pipe/docker_engine", "unsupported engine address scheme");
  expect_inval("http//oops", "use unix:///path");
  expect_inval("/var/run/docker.sock", "use unix:///path");
  expect_inval("unix://", "absolute path");
  expect_inval("unix://relative.sock", "absolute path");
  expect_inval("tcp://", "expected tcp://HOST:PORT");
  expect_inval("tcp://host:0", "port");
  expect_inval("tcp://host:65536", "port");
  expect_inval("tcp://host:12ab", "port");
  expect_inval("tcp://host:2375/path", "expected tcp://HOST:PORT");
  expect_inval("tcp://user@host:2375", "expected tcp://HOST:PORT");
  expect_inval("tcp://::1:2375", "IPv6");
  expect_inval("tcp://[::1:2375", "unclosed");
  expect_inval("tcp://:2375", "no host");
  char longpath[300];
  memset(longpath, 'a', sizeof longpath);
  memcpy(longpath, "unix:///", 8);
  longpath[sizeof longpath - 1] = '\0';
  expect_inval(longpath, "longer than");
}

static char certdir[64];

static void test_tls_env(void **s) {
  (void)s;
  snprintf(certdir, sizeof certdir, "/tmp/sandman-ut-certs-XXXXXX");
  assert_non_null(mkdtemp(certdir));
  assert_int_equal(tf_write_at(certdir, "ca.pem", "x\n"), 0);
  assert_int_equal(tf_write_at(certdir, "cert.pem", "x\n"), 0);
  assert_int_equal(tf_write_at(certdir, "key.pem", "x\n"), 0);

  /* Any non-empty DOCKER_TLS_VERIFY turns TLS on, as in the docker CLI. */
  assert_int_equal(resolve(NULL, -1, NULL, "tcp://127.0.0.1:2376", "1", certdir, NULL), 0);
  assert_int_equal(addr.tls, 1);
  char want[256];
  snprintf(want, sizeof want, "%s/ca.pem", certdir);
  assert_string_equal(addr.ca, want);
  snprintf(want, sizeof want, "%s/key.pem", certdir);
  assert_string_equal(addr.key, want);
  assert_int_equal(resolve(NULL, -1, NULL, "tcp://127.0.0.1:2376", "0", certdir, NULL), 0);
  assert_int_equal(addr.tls, 1);
  assert_int_equal(resolve(NULL, -1, NULL, "tcp://127.0.0.1:2376", "", certdir, NULL), 0);
  assert_int_equal(addr.tls, 0);
  /* The option wins over the environment. */
  assert_int_equal(resolve(NULL, 0, NULL, "tcp://127.0.0.1:2376", "1", certdir, NULL), 0);
  assert_int_equal(addr.tls, 0);
  assert_int_equal(resolve(NULL, 1, certdir, "tcp://127.0.0.1", NULL, NULL, NULL), 0);
  assert_int_equal(addr.tls, 1);
  assert_int_equal(addr.port, 2376);
  /* Default directory: ~/.docker. */
  char home[128];
  snprintf(home, sizeof home, "%s/home", certdir);
  mkdir(home, 0700);
  char dotdocker[160];
  snprintf(dotdocker, sizeof dotdocker, "%s/.docker", home);
  mkdir(dotdocker, 0700);
  assert_int_equal(tf_write_at(dotdocker, "ca.pem", "x\n"), 0);
  assert_int_equal(tf_write_at(dotdocker, "cert.pem", "x\n"), 0);
  assert_int_equal(tf_write_at(dotdocker, "key.pem", "x\n"), 0);
  assert_int_equal(resolve(NULL, -1, NULL, "tcp://h:1", "yes", NULL, home), 0);
  snprintf(want, sizeof want, "%s/cert.pem", dotdocker);
  assert_string_equal(addr.cert, want);

  /* A unix socket ignores an exported DOCKER_TLS_VERIFY... */
  assert_int_equal(resolve(NULL, -1, NULL, "unix:///run/d.sock", "1", "/nonexistent", NULL), 0);
  assert_int_equal(addr.tls, 0);
  /* ...but asking for TLS on one explicitly is a mistake. */
  assert_int_equal(resolve("unix:///run/d.sock", 1, certdir, NULL, NULL, NULL, NULL), SM_EINVAL);
  assert_non_null(strstr(err.message, "unix socket"));
}

static void test_tls_missing_files(void **s) {
  (void)s;
  char p[256];
  snprintf(p, sizeof p, "%s/key.pem", certdir);
  unlink(p);
  assert_int_equal(resolve(NULL, -1, NULL, "tcp://127.0.0.1:2376", "1", certdir, NULL), SM_EINVAL);
  assert_non_null(strstr(err.message, p));
  assert_non_null(strstr(err.message, "DOCKER_TLS_VERIFY"));
  snprintf(p, sizeof p, "%s/ca.pem", certdir);
  unlink(p);
  assert_int_equal(resolve(NULL, -1, NULL, "tcp://127.0.0.1:2376", "1", certdir, NULL), SM_EINVAL);
  assert_non_null(strstr(err.message, p));
  assert_int_equal(resolve(NULL, -1, NULL, "tcp://127.0.0.1:2376", "1", "/no/such/dir", NULL),
                   SM_EINVAL);
  assert_non_null(strstr(err.message, "/no/such/dir/ca.pem"));
  /* No DOCKER_CERT_PATH and no HOME: nowhere to look. */
  assert_int_equal(resolve(NULL, -1, NULL, "tcp://127.0.0.1:2376", "1", NULL, NULL), SM_EINVAL);
  assert_non_null(strstr(err.message, "DOCKER_CERT_PATH"));

  char cmd[128];
  snprintf(cmd, sizeof cmd, "%s", certdir);
  /* Clean up the temporary tree. */
  const char *files[] = {"cert.pem", "home/.docker/ca.pem", "home/.docker/cert.pem",
                         "home/.docker/key.pem"};
  for (size_t i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s/%s", certdir, files[i]);
    unlink(p);
  }
  snprintf(p, sizeof p, "%s/home/.docker", certdir);
  rmdir(p);
  snprintf(p, sizeof p, "%s/home", certdir);
  rmdir(p);
  rmdir(cmd);
}

static void test_engine_new(void **s) {
  (void)s;
  sm_engine_options o = SM_ENGINE_OPTIONS_INIT;
  o.host = "tcp://127.0.0.1:2375";
  o.tls_verify = 0;
  o.api_version = "1.41";
  sm_engine *e = NULL;
  sm_error er = SM_ERROR_INIT;
  assert_int_equal(sm_engine_new(&e, &o, &er), 0);
  assert_string_equal(sm_engine_host(e), "tcp://127.0.0.1:2375");
  assert_string_equal(sm_engine_api_version(e), "1.41");
  assert_int_equal(sm_engine_uses_tls(e), 0);
  sm_engine *c = NULL;
  assert_int_equal(sm_engine_clone(&c, e, &er), 0);
  assert_string_equal(sm_engine_host(c), "tcp://127.0.0.1:2375");
  assert_string_equal(sm_engine_api_version(c), "1.41");
  sm_engine_free(c);
  sm_engine_free(e);

  o.api_version = "1.40";
  assert_int_equal(sm_engine_new(&e, &o, &er), SM_EINVAL);
  assert_null(e);
  o.api_version = "v1.41";
  assert_int_equal(sm_engine_new(&e, &o, &er), SM_EINVAL);
  o.api_version = NULL;
  o.host = "ftp://x";
  assert_int_equal(sm_engine_new(&e, &o, &er), SM_EINVAL);
  assert_null(e);
  sm_engine_free(NULL);
}


/* ---- docker contexts: DOCKER_CONTEXT and config.json's currentContext ---- */

static char ctx_root[] = "/tmp/sandman-ctx-test-XXXXXX";

/* DOCKER_CONFIG/contexts/meta/<sha256(name)>/meta.json as `docker context
 * create` writes it; sha256 hex given by the caller. */
static void mkdirs(const char *sha) {
  const char *parts[] = {"contexts", "contexts/meta", "contexts/tls", NULL};
  char p[600];
  for (int i = 0; parts[i]; i++) {
    snprintf(p, sizeof p, "%s/%s", ctx_root, parts[i]);
    mkdir(p, 0700);
  }
  snprintf(p, sizeof p, "%s/contexts/meta/%s", ctx_root, sha);
  assert_int_equal(mkdir(p, 0700), 0);
  snprintf(p, sizeof p, "%s/contexts/tls/%s", ctx_root, sha);
  assert_int_equal(mkdir(p, 0700), 0);
  snprintf(p, sizeof p, "%s/contexts/tls/%s/docker", ctx_root, sha);
  assert_int_equal(mkdir(p, 0700), 0);
}

static void make_context(const char *sha, const char *name, const char *host, int skip_tls,
                         int tls_files) {
  char file[600], meta[1024];
  mkdirs(sha);
  snprintf(file, sizeof file, "%s/contexts/meta/%s/meta.json", ctx_root, sha);
  snprintf(meta, sizeof meta,
           "{\"Name\":\"%s\",\"Metadata\":{},\"Endpoints\":{\"docker\":{\"Host\":\"%s\","
           "\"SkipTLSVerify\":%s}}}",
           name, host, skip_tls ? "true" : "false");
  assert_int_equal(tf_write_str(file, meta), 0);
  if (tls_files) {
    const char *names[] = {"ca.pem", "cert.pem", "key.pem"};
    for (int i = 0; i < 3; i++) {
      snprintf(file, sizeof file, "%s/contexts/tls/%s/docker/%s", ctx_root, sha, names[i]);
      assert_int_equal(tf_write_str(file, "x"), 0);
    }
  }
}

static int resolve_ctx(const char *env_host, const char *context) {
  engine_address_env env = {env_host, NULL, NULL, "/nonexistent-home", context, ctx_root};
  sm_error_clear(&err);
  return engine_address_resolve(NULL, -1, NULL, &env, &addr, &err);
}

static void test_contexts(void **s) {
  (void)s;
  assert_non_null(mkdtemp(ctx_root));
  /* The directory names are the SHA-256 of the context names, as docker's
   * (computed here by sha256sum, not by the code under test). */
  /* sha256 of "colima", "remote", "insecure" (from sha256sum). */
  static const char *const shas[] = {
      "f24fd3749c1368328e2b149bec149cb6795619f244c5b584e844961215dadd16",
      "b71199ebd070b36beab7317920c2c2f1d777df8d05e5527d8458fda57cb17a7a",
      "1d92dae504a70fbcae6d3721a55d7eacaf94d3133ea5f0394b7d203d64841110"};
  make_context(shas[0], "colima", "unix:///home/u/.colima/docker.sock", 0, 0);
  make_context(shas[1], "remote", "tcp://build.example:2376", 0, 1);
  make_context(shas[2], "insecure", "tcp://10.0.0.9:2376", 1, 0);

  /* DOCKER_CONTEXT names one. */
  assert_int_equal(resolve_ctx(NULL, "colima"), 0);
  assert_string_equal(addr.host, "unix:///home/u/.colima/docker.sock");
  assert_string_equal(addr.source, "docker context colima (DOCKER_CONTEXT)");
  /* DOCKER_HOST wins over it, as in docker. */
  assert_int_equal(resolve_ctx("unix:///run/env.sock", "colima"), 0);
  assert_string_equal(addr.host, "unix:///run/env.sock");
  assert_string_equal(addr.source, "DOCKER_HOST");
  /* A context with TLS files speaks TLS with them. */
  assert_int_equal(resolve_ctx(NULL, "remote"), 0);
  assert_string_equal(addr.host, "tcp://build.example:2376");
  assert_int_equal(addr.tls, 1);
  assert_non_null(strstr(addr.ca, "/contexts/tls/"));
  /* "default" is no context at all. */
  assert_int_equal(resolve_ctx(NULL, "default"), 0);
  assert_string_equal(addr.host, SM_ENGINE_DEFAULT_HOST);
  assert_string_equal(addr.source, "the default socket");
  /* A context that does not exist, or one that skips TLS verification: refused. */
  assert_int_equal(resolve_ctx(NULL, "gone"), SM_EINVAL);
  assert_non_null(strstr(err.message, "docker context 'gone' (DOCKER_CONTEXT) does not exist"));
  assert_int_equal(resolve_ctx(NULL, "insecure"), SM_EINVAL);
  assert_non_null(strstr(err.message, "skips TLS verification"));
  /* The docker CLI's current context, from config.json. */
  char cfg[600];
  snprintf(cfg, sizeof cfg, "%s/config.json", ctx_root);
  assert_int_equal(tf_write_str(cfg, "{\"auths\":{},\"currentContext\":\"colima\"}"), 0);
  assert_int_equal(resolve_ctx(NULL, NULL), 0);
  assert_string_equal(addr.host, "unix:///home/u/.colima/docker.sock");
  assert_string_equal(addr.source, "docker context colima (the docker CLI's current context)");
  /* DOCKER_CONTEXT beats it. */
  assert_int_equal(resolve_ctx(NULL, "remote"), 0);
  assert_string_equal(addr.host, "tcp://build.example:2376");
  assert_int_equal(tf_write_str(cfg, "{\"currentContext\":\"default\"}"), 0);
  assert_int_equal(resolve_ctx(NULL, NULL), 0);
  assert_string_equal(addr.host, SM_ENGINE_DEFAULT_HOST);
  assert_int_equal(tf_write_str(cfg, "not json"), 0);
  assert_int_equal(resolve_ctx(NULL, NULL), SM_EINVAL);
  /* Leave nothing behind (files first, then the folders, deepest first). */
  const char *sub[] = {"meta", "tls"};
  char p[700];
  unlink(cfg);
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s/contexts/meta/%s/meta.json", ctx_root, shas[i]);
    unlink(p);
    const char *pem[] = {"ca.pem", "cert.pem", "key.pem"};
    for (int k = 0; k < 3; k++) {
      snprintf(p, sizeof p, "%s/contexts/tls/%s/docker/%s", ctx_root, shas[i], pem[k]);
      unlink(p);
    }
    snprintf(p, sizeof p, "%s/contexts/tls/%s/docker", ctx_root, shas[i]);
    rmdir(p);
    for (int k = 0; k < 2; k++) {
      snprintf(p, sizeof p, "%s/contexts/%s/%s", ctx_root, sub[k], shas[i]);
      rmdir(p);
    }
  }
  for (int k = 0; k < 2; k++) {
    snprintf(p, sizeof p, "%s/contexts/%s", ctx_root, sub[k]);
    rmdir(p);
  }
  snprintf(p, sizeof p, "%s/contexts", ctx_root);
  rmdir(p);
  assert_int_equal(rmdir(ctx_root), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_unix),  cmocka_unit_test(test_precedence),
      cmocka_unit_test(test_tcp_forms),     cmocka_unit_test(test_bad_addresses),
      cmocka_unit_test(test_tls_env),       cmocka_unit_test(test_tls_missing_files),
      cmocka_unit_test(test_engine_new),    cmocka_unit_test(test_contexts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
