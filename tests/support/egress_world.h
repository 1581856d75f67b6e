/* The stand-in internet of the egress tests and benchmark: the image
 * (tests/fixtures/egress-world, built offline under the caller's tag), a
 * test certificate authority and a server certificate for allowed.test and
 * denied.test, HTTP/HTTPS servers on a network of the caller's, client
 * containers, and commands run in them. Returns 0 or -1 (errors printed):
 * usable from cmocka tests and from plain programs alike. */
#ifndef SANDMAN_TESTS_EGRESS_WORLD_H
#define SANDMAN_TESTS_EGRESS_WORLD_H

#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <sandman/sandman.h>

extern char **environ;

#define EW_PEM_MAX 8192

typedef struct ew_world {
  sm_engine *engine;
  char instance[128];
  char image[200];
  char network[200];
  char workdir[256];
  char ca_pem[EW_PEM_MAX], cert_pem[EW_PEM_MAX], key_pem[EW_PEM_MAX];
  char server_py[EW_PEM_MAX]; /* tests/fixtures/egress-world/server.py */
} ew_world;

/* Runs argv (stdout to /dev/null); its exit status, or -1. (posix_spawnp
 * takes char *const[] but only reads it.) */
static inline int ew_run(const char *const argv[]) {
  pid_t pid;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)(uintptr_t)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static inline int ew_read_file(const char *path, char *out, size_t cap) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  size_t n = fread(out, 1, cap - 1, f);
  out[n] = '\0';
  fclose(f);
  return 0;
}

static inline json_object *ew_labels(const ew_world *w) {
  json_object *l = json_object_new_object();
  json_object_object_add(l, "io.sandman.instance", json_object_new_string(w->instance));
  return l;
}

/* The image under "sandman-test/egress-world:<instance>" and the network
 * (internal: no packet leaves the machine), the CA and certificates. */
static inline int ew_setup(ew_world *w, sm_engine *engine, const char *instance, int internal) {
  memset(w, 0, sizeof *w);
  w->engine = engine;
  snprintf(w->instance, sizeof w->instance, "%s", instance);
  snprintf(w->image, sizeof w->image, "sandman-test/egress-world:%s", instance);
  snprintf(w->network, sizeof w->network, "%s-world", instance);
  const char *bin = getenv("SANDMAN_BIN"), *src = getenv("SANDMAN_SOURCE_DIR");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/fixtures/egress-world", src ? src : ".");
  const char *build[] = {bin ? bin : "sandman", "image", "build", dir, "--tag", w->image, NULL};
  if (ew_run(build) != 0) {
    fprintf(stderr, "egress world: building %s failed\n", w->image);
    return -1;
  }
  snprintf(dir, sizeof dir, "%s/tests/fixtures/egress-world/server.py", src ? src : ".");
  if (ew_read_file(dir, w->server_py, sizeof w->server_py) != 0) {
    fprintf(stderr, "egress world: reading %s failed\n", dir);
    return -1;
  }
  snprintf(w->workdir, sizeof w->workdir, "/tmp/sandman-egress-world-XXXXXX");
  if (mkdtemp(w->workdir) == NULL) return -1;
  char ca_key[300], ca_crt[300], key[300], csr[300], crt[300], ext[300];
  snprintf(ca_key, sizeof ca_key, "%s/ca.key", w->workdir);
  snprintf(ca_crt, sizeof ca_crt, "%s/ca.pem", w->workdir);
  snprintf(key, sizeof key, "%s/srv.key", w->workdir);
  snprintf(csr, sizeof csr, "%s/srv.csr", w->workdir);
  snprintf(crt, sizeof crt, "%s/srv.pem", w->workdir);
  snprintf(ext, sizeof ext, "%s/ext.cnf", w->workdir);
  FILE *f = fopen(ext, "w");
  if (f == NULL) return -1;
  fputs("subjectAltName=DNS:allowed.test,DNS:denied.test\n", f);
  fclose(f);
  const char *g1[] = {"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                "/CN=sandman test CA", "-keyout", ca_key, "-out", ca_crt, NULL};
  const char *g2[] = {"openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=allowed.test",
                "-keyout", key, "-out", csr, NULL};
  const char *g3[] = {"openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial",
                "-days", "2", "-extfile", ext, "-out", crt, NULL};
  if (ew_run(g1) != 0 || ew_run(g2) != 0 || ew_run(g3) != 0 ||
      ew_read_file(ca_crt, w->ca_pem, sizeof w->ca_pem) != 0 ||
      ew_read_file(crt, w->cert_pem, sizeof w->cert_pem) != 0 ||
      ew_read_file(key, w->key_pem, sizeof w->key_pem) != 0) {
    fprintf(stderr, "egress world: making the certificates failed\n");
    return -1;
  }
  sm_error err = SM_ERROR_INIT;
  json_object *l = ew_labels(w);
  int rc = sm_engine_network_create(engine, w->network, NULL, internal, l, NULL, &err);
  json_object_put(l);
  if (rc != 0) fprintf(stderr, "egress world: network %s: %s\n", w->network, err.message);
  return rc == 0 ? 0 : -1;
}

/* Removes the instance's containers and volumes, the network, the image and
 * the certificates. */
static inline void ew_teardown(ew_world *w) {
  sm_error err = SM_ERROR_INIT;
  char l1[200];
  snprintf(l1, sizeof l1, "io.sandman.instance=%s", w->instance);
  const char *labels[] = {l1};
  json_object *list = NULL;
  if (sm_engine_container_list(w->engine, 1, labels, 1, &list, &err) == 0) {
    for (size_t i = 0; i < json_object_array_length(list); i++) {
      json_object *id = NULL;
      json_object_object_get_ex(json_object_array_get_idx(list, i), "Id", &id);
      sm_engine_container_remove(w->engine, json_object_get_string(id), 1, 1, &err);
    }
    json_object_put(list);
  }
  sm_engine_network_remove(w->engine, w->network, &err);
  sm_engine_image_remove(w->engine, w->image, 1, &err);
  if (w->workdir[0]) {
    const char *rm[] = {"rm", "-rf", w->workdir, NULL};
    ew_run(rm);
  }
}

typedef struct ew_capture {
  char out[65536];
  size_t n;
} ew_capture;

static inline int ew_on_output(void *ud, int stream, const char *data, size_t len) {
  ew_capture *c = ud;
  (void)stream;
  if (len > sizeof c->out - 1 - c->n) len = sizeof c->out - 1 - c->n;
  memcpy(c->out + c->n, data, len);
  c->n += len;
  c->out[c->n] = '\0';
  return 0;
}

/* sh -c SCRIPT in the container as its user, with $CA_PEM set; stdout and
 * stderr into c. Returns the exit code, or -1 (message in c). */
static inline int ew_sh(const ew_world *w, const char *cid, const char *script, ew_capture *c) {
  memset(c, 0, sizeof *c);
  json_object *cfg = json_object_new_object(), *cmd = json_object_new_array(), *env = json_object_new_array();
  json_object_array_add(cmd, json_object_new_string("/bin/sh"));
  json_object_array_add(cmd, json_object_new_string("-c"));
  json_object_array_add(cmd, json_object_new_string(script));
  char ca[EW_PEM_MAX + 16];
  snprintf(ca, sizeof ca, "CA_PEM=%s", w->ca_pem);
  json_object_array_add(env, json_object_new_string(ca));
  json_object_object_add(cfg, "Cmd", cmd);
  json_object_object_add(cfg, "Env", env);
  json_object_object_add(cfg, "AttachStdout", json_object_new_boolean(1));
  json_object_object_add(cfg, "AttachStderr", json_object_new_boolean(1));
  char exec_id[SM_ENGINE_ID_MAX];
  sm_error err = SM_ERROR_INIT;
  int rc = sm_engine_exec_create(w->engine, cid, cfg, exec_id, &err);
  json_object_put(cfg);
  sm_exec_io io = SM_EXEC_IO_INIT;
  io.output = ew_on_output;
  io.output_ud = c;
  io.timeout_s = 600;
  int code = -1;
  if (rc == 0) rc = sm_engine_exec_start(w->engine, exec_id, &io, &err);
  if (rc == 0) rc = sm_engine_exec_inspect(w->engine, exec_id, NULL, &code, NULL, &err);
  if (rc != 0) {
    snprintf(c->out, sizeof c->out, "exec: %s", err.message);
    return -1;
  }
  return code;
}

static inline int ew_ip_on(const ew_world *w, const char *cid, const char *network, char *out, size_t len) {
  json_object *info = NULL, *ns, *nets, *net, *ip;
  sm_error err = SM_ERROR_INIT;
  if (sm_engine_container_inspect(w->engine, cid, &info, &err) != 0) return -1;
  int ok = json_object_object_get_ex(info, "NetworkSettings", &ns) && json_object_object_get_ex(ns, "Networks", &nets) &&
           json_object_object_get_ex(nets, network, &net) && json_object_object_get_ex(net, "IPAddress", &ip);
  if (ok) snprintf(out, len, "%s", json_object_get_string(ip));
  json_object_put(info);
  return ok ? 0 : -1;
}



static inline json_object *ew_container(const ew_world *w, const char *network, const char *const *env,
                                        size_t n_env, const char *alias) {
  json_object *c = json_object_new_object(), *hc = json_object_new_object(), *e = json_object_new_array();
  for (size_t i = 0; i < n_env; i++) json_object_array_add(e, json_object_new_string(env[i]));
  json_object_object_add(c, "Image", json_object_new_string(w->image));
  json_object_object_add(c, "Env", e);
  json_object_object_add(c, "Labels", ew_labels(w));
  json_object_object_add(hc, "NetworkMode", json_object_new_string(network));
  json_object_object_add(c, "HostConfig", hc);
  if (alias) {
    json_object *nc = json_object_new_object(), *eps = json_object_new_object(), *ep = json_object_new_object();
    json_object *al = json_object_new_array();
    json_object_array_add(al, json_object_new_string(alias));
    json_object_object_add(ep, "Aliases", al);
    json_object_object_add(eps, network, ep);
    json_object_object_add(nc, "EndpointsConfig", eps);
    json_object_object_add(c, "NetworkingConfig", nc);
  }
  return c;
}

static inline int ew_create_start(const ew_world *w, const char *name, json_object *c, char id[SM_ENGINE_ID_MAX]) {
  char cname[300];
  snprintf(cname, sizeof cname, "%s-%s", w->instance, name);
  sm_error err = SM_ERROR_INIT;
  int rc = sm_engine_container_create(w->engine, cname, c, id, NULL, &err);
  json_object_put(c);
  if (rc == 0) rc = sm_engine_container_start(w->engine, id, &err);
  if (rc != 0) fprintf(stderr, "egress world: %s: %s\n", name, err.message);
  return rc == 0 ? 0 : -1;
}

/* A server answering as alias (a name on the world network). */
static inline int ew_start_server(const ew_world *w, const char *name, const char *alias, char id[SM_ENGINE_ID_MAX]) {
  char n[300], cert[EW_PEM_MAX + 16], key[EW_PEM_MAX + 16];
  snprintf(n, sizeof n, "NAME=%s", alias);
  snprintf(cert, sizeof cert, "CERT_PEM=%s", w->cert_pem);
  snprintf(key, sizeof key, "KEY_PEM=%s", w->key_pem);
  const char *env[] = {n, cert, key};
  json_object *c = ew_container(w, w->network, env, 3, alias);
  json_object *cmd = json_object_new_array();
  json_object_array_add(cmd, json_object_new_string("python3"));
  json_object_array_add(cmd, json_object_new_string("-c"));
  json_object_array_add(cmd, json_object_new_string(w->server_py));
  json_object_object_add(c, "Cmd", cmd);
  json_object_object_add(c, "User", json_object_new_string("0:0")); /* ports below 1024 */
  return ew_create_start(w, name, c, id);
}

/* A client on network (runtime may be NULL) that sleeps until removed, with
 * no capabilities, as network mode allowlist makes a sandbox. */
static inline int ew_start_client(const ew_world *w, const char *name, const char *network, const char *const *env,
                                  size_t n_env, const char *runtime, char id[SM_ENGINE_ID_MAX]) {
  json_object *c = ew_container(w, network, env, n_env, NULL);
  json_object *cmd = json_object_new_array(), *hc = NULL, *caps = json_object_new_array();
  json_object_array_add(cmd, json_object_new_string("sleep"));
  json_object_array_add(cmd, json_object_new_string("3600"));
  json_object_object_add(c, "Cmd", cmd);
  json_object_object_get_ex(c, "HostConfig", &hc);
  json_object_array_add(caps, json_object_new_string("ALL"));
  json_object_object_add(hc, "CapDrop", caps);
  if (runtime) json_object_object_add(hc, "Runtime", json_object_new_string(runtime));
  return ew_create_start(w, name, c, id);
}

#endif
