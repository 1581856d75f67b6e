/* Inside the fake engine (fake_engine.h): what its files share.
 *   fake_engine.c       the server: socket, connections, HTTP, the log
 *   fake_engine_api.c   the routes: system, images, containers, volumes, execs
 *   fake_engine_fs.c    the containers' folders, path mapping, archives
 *   fake_engine_exec.c  exec processes and the hijacked stream
 *   fake_engine_helpers.c  sandman's kill and watch helpers, done by the fake; what
 *                          it never runs on the host */
#ifndef SANDMAN_TESTS_FAKE_ENGINE_INTERNAL_H
#define SANDMAN_TESTS_FAKE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "support/fake_engine.h"

#define FE_API "1.41"
#define FE_ID_LEN 64
#define FE_PATH_MAX 4096
#define FE_MOUNTS_MAX 16
#define FE_BODY_MAX ((size_t)256 << 20)

typedef struct fe_conn {
  fake_engine *fe;
  int fd; /* -1 once closed */
  pthread_t thread;
  char buf[65536]; /* bytes read past the current request */
  size_t len, off;
  struct fe_conn *next;
} fe_conn;

typedef struct fe_request {
  char method[16];
  char path[FE_PATH_MAX];  /* percent-decoded, without the version prefix */
  char query[FE_PATH_MAX]; /* raw, after '?' */
  char *body;
  size_t body_len;
} fe_request;

typedef struct fe_reply {
  int status;
  char *body; /* owned; NULL: none */
  size_t len;
  const char *type;   /* Content-Type; NULL: application/json */
  char headers[2048]; /* extra header lines, each ending in \r\n */
  int hijacked;       /* the route answered on the socket itself */
} fe_reply;

typedef struct fe_mount {
  char target[256]; /* the path in the container */
  char host[FE_PATH_MAX];
} fe_mount;

typedef struct fe_image {
  char ref[256];
  char id[FE_ID_LEN + 8]; /* "sha256:..." */
  char user[64];
  struct fe_image *next;
} fe_image;

typedef struct fe_container {
  char id[FE_ID_LEN + 1];
  char name[256];
  char image_id[FE_ID_LEN + 8];
  json_object *config; /* as created (HostConfig included) */
  int running, oom_killed, exit_code, started;
  int paused; /* frozen by POST /pause: no exec is made in it until unpaused */
  char root[FE_PATH_MAX]; /* its own files (what no mount covers) */
  fe_mount mounts[FE_MOUNTS_MAX];
  size_t n_mounts;
  struct fe_container *next;
} fe_container;

typedef struct fe_volume {
  char name[256];
  json_object *labels;
  struct fe_volume *next;
} fe_volume;

typedef struct fe_exec {
  char id[FE_ID_LEN + 1];
  char container[FE_ID_LEN + 1];
  json_object *config;
  pid_t pid; /* 0 before start and after the end */
  int running, exit_code, started;
  struct fe_exec *next;
} fe_exec;

typedef struct fe_fault {
  char method[16];
  char part[512];
  int status;
  char message[512];
  int skip; /* matching requests still answered as usual before the fault */
  int times;
  struct fe_fault *next;
} fe_fault;

struct fake_engine {
  char dir[FE_PATH_MAX];
  char sock[FE_PATH_MAX];
  char host[FE_PATH_MAX + 16];
  int lfd;
  int wake[2];
  pthread_t accept_thread;
  pthread_mutex_t mu; /* everything below */
  pthread_cond_t cv;  /* a container stopped */
  int stopping;
  unsigned long next_id;
  fe_conn *conns;
  fe_image *images;
  fe_container *containers;
  fe_volume *volumes;
  fe_exec *execs;
  fe_fault *faults;
  fe_fault *exec_faults; /* status: the exit code; part: in an argument */
  char **log;
  size_t n_log, cap_log;
};

/* The length of a JSON array; 0 for anything else (NULL included). */
static inline size_t fe_len(json_object *a) {
  return json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
}

/* ---- fake_engine.c ---- */
/* Answers with status and {"message": ...}. */
void fe_reply_error(fe_reply *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Answers with status and the JSON of obj (taken). */
void fe_reply_json(fe_reply *r, int status, json_object *obj);
/* A fresh 64-hex-digit id. */
void fe_new_id(fake_engine *fe, char out[FE_ID_LEN + 1]);
/* Routes one request; the caller holds no lock. */
void fe_route(fake_engine *fe, fe_conn *c, const fe_request *req, fe_reply *r);

/* ---- fake_engine_api.c (callers hold fe->mu) ---- */
fe_container *fe_container_find(fake_engine *fe, const char *ref);
fe_exec *fe_exec_find(fake_engine *fe, const char *id);
void fe_container_kill(fake_engine *fe, fe_container *c, int code);
/* The value of a query parameter (decoded) into out; 0 when present. */
int fe_query(const fe_request *req, const char *key, char *out, size_t len);
void fe_route_api(fake_engine *fe, fe_conn *c, const fe_request *req, fe_reply *r);

/* ---- fake_engine_fs.c ---- */
/* Makes the container's folders from its config's mounts (fe->mu held). */
int fe_fs_create(fake_engine *fe, fe_container *c);
void fe_fs_remove(fe_container *c);
/* The host path of a container path (absolute) into out. */
void fe_fs_host_path(const fe_container *c, const char *path, char *out, size_t len);
/* s with every mount path in it replaced by its host folder (malloc'd). */
char *fe_fs_map(const fe_container *c, const char *s);
void fe_archive_put(fake_engine *fe, const fe_request *req, const char *ref, fe_reply *r);
void fe_archive_get(fake_engine *fe, const fe_request *req, const char *ref, int head, fe_reply *r);

/* ---- fake_engine_helpers.c ---- */
enum { FE_HELPER_NONE, FE_HELPER_DONE, FE_HELPER_WATCH };
/* Whether the exec (of container cid, command cmd) is one of sandman's own
 * helpers that the fake does itself: FE_HELPER_DONE (done: exit code 0),
 * FE_HELPER_WATCH (a leased call's watcher: the caller stops the container
 * when the exec's stdin ends), or FE_HELPER_NONE. */
int fe_helper_emulate(fake_engine *fe, const char *cid, json_object *cmd);
/* The argument of cmd that would signal every process on the host (kill
 * -1, kill 1, killall, pkill), or NULL: such a command is never run. */
const char *fe_refused(json_object *cmd);
/* Stops container cid as its keeper's end would (fe->mu not held): its
 * execs killed, and removed when it was made with AutoRemove. */
void fe_container_end(fake_engine *fe, const char *cid);

/* ---- fake_engine_exec.c ---- */
/* POST /exec/{id}/start: the 101 and the stream, on c's socket. */
void fe_exec_start(fake_engine *fe, fe_conn *c, const char *id, fe_reply *r);

#endif
