/* The fake engine's routes (fake_engine.h): system, images, containers,
 * volumes and execs, answered from the state in struct fake_engine. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/fake_engine_internal.h"
#include "support/files.h"

#define SEGS_MAX 8
#define SEG_LEN 512

int fe_query(const fe_request *req, const char *key, char *out, size_t len) {
  size_t klen = strlen(key);
  for (const char *p = req->query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
    if (strncmp(p, key, klen) != 0 || p[klen] != '=') continue;
    const char *v = p + klen + 1;
    const char *end = strchr(v, '&');
    size_t n = end ? (size_t)(end - v) : strlen(v);
    char raw[FE_PATH_MAX];
    snprintf(raw, sizeof raw, "%.*s", (int)n, v);
    size_t o = 0;
    for (size_t i = 0; raw[i] && o + 1 < len; i++) {
      unsigned x;
      if (raw[i] == '%' && raw[i + 1] && raw[i + 2] && sscanf(raw + i + 1, "%2x", &x) == 1) {
        out[o++] = (char)x;
        i += 2;
      } else {
        out[o++] = raw[i] == '+' ? ' ' : raw[i];
      }
    }
    out[o] = '\0';
    return 0;
  }
  return -1;
}

static int query_flag(const fe_request *req, const char *key) {
  char v[16];
  return fe_query(req, key, v, sizeof v) == 0 && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
}

/* ---- lookups ---- */

fe_container *fe_container_find(fake_engine *fe, const char *ref) {
  size_t n = strlen(ref);
  for (fe_container *c = fe->containers; c; c = c->next)
    if (strcmp(c->id, ref) == 0 || strcmp(c->name, ref) == 0 ||
        (n >= 12 && strncmp(c->id, ref, n) == 0))
      return c;
  return NULL;
}

fe_exec *fe_exec_find(fake_engine *fe, const char *id) {
  for (fe_exec *x = fe->execs; x; x = x->next)
    if (strcmp(x->id, id) == 0) return x;
  return NULL;
}

static fe_image *image_find(fake_engine *fe, const char *ref) {
  for (fe_image *i = fe->images; i; i = i->next)
    if (strcmp(i->ref, ref) == 0 || strcmp(i->id, ref) == 0) return i;
  return NULL;
}

static fe_volume *volume_find(fake_engine *fe, const char *name) {
  for (fe_volume *v = fe->volumes; v; v = v->next)
    if (strcmp(v->name, name) == 0) return v;
  return NULL;
}

void fe_container_kill(fake_engine *fe, fe_container *c, int code) {
  for (fe_exec *x = fe->execs; x; x = x->next)
    if (x->pid > 0 && strcmp(x->container, c->id) == 0) kill(-x->pid, SIGKILL);
  if (c->running) c->exit_code = code;
  c->running = 0;
  c->paused = 0;
  pthread_cond_broadcast(&fe->cv);
}

static const char *json_str(json_object *o, const char *a, const char *b) {
  json_object *x = NULL, *y = NULL;
  if (!json_object_object_get_ex(o, a, &x)) return NULL;
  if (b && !json_object_object_get_ex(x, b, &y)) return NULL;
  return json_object_get_string(b ? y : x);
}

/* ---- system and images ---- */

static void system_version(fe_reply *r) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "Version", json_object_new_string("20.10.24-fake"));
  json_object_object_add(o, "ApiVersion", json_object_new_string(FE_API));
  json_object_object_add(o, "MinAPIVersion", json_object_new_string("1.12"));
  json_object_object_add(o, "Os", json_object_new_string("linux"));
  json_object_object_add(o, "Arch", json_object_new_string("amd64"));
  fe_reply_json(r, 200, o);
}

static void system_info(fe_reply *r) {
  json_object *o = json_object_new_object(), *rts = json_object_new_object();
  const char *names[][2] = {{"runc", "runc"}, {"runsc", "/usr/bin/runsc"}};
  for (size_t i = 0; i < 2; i++) {
    json_object *rt = json_object_new_object();
    json_object_object_add(rt, "path", json_object_new_string(names[i][1]));
    json_object_object_add(rts, names[i][0], rt);
  }
  json_object_object_add(o, "Runtimes", rts);
  json_object_object_add(o, "ServerVersion", json_object_new_string("20.10.24-fake"));
  json_object_object_add(o, "CgroupVersion", json_object_new_string("1"));
  json_object_object_add(o, "NCPU", json_object_new_int(2));
  json_object_object_add(o, "Name", json_object_new_string("fake-engine"));
  fe_reply_json(r, 200, o);
}

static void image_inspect(fake_engine *fe, const char *ref, fe_reply *r) {
  fe_image *i = image_find(fe, ref);
  if (i == NULL) return fe_reply_error(r, 404, "No such image: %s", ref);
  json_object *o = json_object_new_object(), *cfg = json_object_new_object();
  json_object *tags = json_object_new_array();
  json_object_array_add(tags, json_object_new_string(i->ref));
  json_object_object_add(o, "Id", json_object_new_string(i->id));
  json_object_object_add(o, "RepoTags", tags);
  json_object_object_add(o, "RepoDigests", json_object_new_array());
  json_object_object_add(cfg, "User", json_object_new_string(i->user));
  json_object_object_add(o, "Config", cfg);
  json_object_object_add(o, "Os", json_object_new_string("linux"));
  fe_reply_json(r, 200, o);
}

void fake_engine_add_image(fake_engine *fe, const char *ref, const char *user) {
  fe_image *i = calloc(1, sizeof *i);
  if (i == NULL) return;
  pthread_mutex_lock(&fe->mu);
  snprintf(i->ref, sizeof i->ref, "%s", ref);
  char id[FE_ID_LEN + 1];
  fe_new_id(fe, id);
  snprintf(i->id, sizeof i->id, "sha256:%s", id);
  snprintf(i->user, sizeof i->user, "%s", user ? user : "");
  i->next = fe->images;
  fe->images = i;
  pthread_mutex_unlock(&fe->mu);
}

/* ---- containers ---- */

static json_object *container_json(const fe_container *c) {
  json_object *o = json_object_new_object(), *st = json_object_new_object();
  json_object *cfg = NULL, *hc = NULL;
  json_object_deep_copy(c->config, &cfg, NULL);
  if (json_object_object_get_ex(cfg, "HostConfig", &hc)) {
    json_object_get(hc);
    json_object_object_del(cfg, "HostConfig");
  }
  char name[260];
  snprintf(name, sizeof name, "/%s", c->name);
  json_object_object_add(o, "Id", json_object_new_string(c->id));
  json_object_object_add(o, "Name", json_object_new_string(name));
  json_object_object_add(o, "Image", json_object_new_string(c->image_id));
  json_object_object_add(st, "Status",
                         json_object_new_string(c->paused      ? "paused"
                                                : c->running ? "running"
                                                : c->started ? "exited"
                                                             : "created"));
  json_object_object_add(st, "Running", json_object_new_boolean(c->running));
  json_object_object_add(st, "Paused", json_object_new_boolean(c->paused));
  json_object_object_add(st, "OOMKilled", json_object_new_boolean(c->oom_killed));
  json_object_object_add(st, "ExitCode", json_object_new_int(c->exit_code));
  json_object_object_add(o, "State", st);
  json_object_object_add(o, "Config", cfg);
  json_object_object_add(o, "HostConfig", hc ? hc : json_object_new_object());
  return o;
}

static int labels_match(json_object *labels, json_object *filters) {
  json_object *want = NULL;
  if (filters == NULL || !json_object_object_get_ex(filters, "label", &want)) return 1;
  for (size_t i = 0; i < fe_len(want); i++) {
    char kv[1024];
    snprintf(kv, sizeof kv, "%s", json_object_get_string(json_object_array_get_idx(want, i)));
    char *eq = strchr(kv, '=');
    if (eq) *eq = '\0';
    json_object *v = NULL;
    if (!json_object_object_get_ex(labels, kv, &v)) return 0;
    if (eq && strcmp(json_object_get_string(v), eq + 1) != 0) return 0;
  }
  return 1;
}

static void container_list(fake_engine *fe, const fe_request *req, fe_reply *r) {
  char f[FE_PATH_MAX] = "";
  json_object *filters = fe_query(req, "filters", f, sizeof f) == 0 ? json_tokener_parse(f) : NULL;
  int all = query_flag(req, "all");
  json_object *list = json_object_new_array();
  for (fe_container *c = fe->containers; c; c = c->next) {
    json_object *labels = NULL, *cfg = NULL;
    json_object_object_get_ex(c->config, "Labels", &labels);
    if ((!all && !c->running) || !labels_match(labels, filters)) continue;
    json_object *o = json_object_new_object(), *names = json_object_new_array();
    char name[260];
    snprintf(name, sizeof name, "/%s", c->name);
    json_object_array_add(names, json_object_new_string(name));
    json_object_object_add(o, "Id", json_object_new_string(c->id));
    json_object_object_add(o, "Names", names);
    json_object_object_add(o, "State", json_object_new_string(c->running ? "running" : "exited"));
    json_object_deep_copy(labels, &cfg, NULL);
    json_object_object_add(o, "Labels", cfg ? cfg : json_object_new_object());
    json_object_array_add(list, o);
  }
  json_object_put(filters);
  fe_reply_json(r, 200, list);
}

/* The named volumes a config mounts are made with the container, as the
 * engine makes them. */
static void volumes_of(fake_engine *fe, json_object *config) {
  json_object *hc = NULL, *mounts = NULL;
  if (!json_object_object_get_ex(config, "HostConfig", &hc) ||
      !json_object_object_get_ex(hc, "Mounts", &mounts))
    return;
  for (size_t i = 0; i < fe_len(mounts); i++) {
    json_object *m = json_object_array_get_idx(mounts, i);
    const char *type = json_str(m, "Type", NULL), *src = json_str(m, "Source", NULL);
    if (!type || strcmp(type, "volume") != 0 || !src || volume_find(fe, src)) continue;
    fe_volume *v = calloc(1, sizeof *v);
    if (v == NULL) continue;
    snprintf(v->name, sizeof v->name, "%s", src);
    v->next = fe->volumes;
    fe->volumes = v;
  }
}

static void container_create(fake_engine *fe, const fe_request *req, fe_reply *r) {
  char name[256] = "";
  fe_query(req, "name", name, sizeof name);
  json_object *config = req->body ? json_tokener_parse(req->body) : NULL;
  const char *image = config ? json_str(config, "Image", NULL) : NULL;
  fe_image *img = image ? image_find(fe, image) : NULL;
  fe_container *taken = name[0] ? fe_container_find(fe, name) : NULL;
  if (config == NULL || img == NULL || taken) {
    if (taken)
      fe_reply_error(r, 409,
                     "Conflict. The container name \"/%s\" is already in use by "
                     "container \"%s\"",
                     name, taken->id);
    else /* image is config's: put after the answer is written */
      fe_reply_error(r, config ? 404 : 400, "No such image: %s", image ? image : "(none)");
    json_object_put(config);
    return;
  }
  fe_container *c = calloc(1, sizeof *c);
  if (c == NULL) {
    json_object_put(config);
    return fe_reply_error(r, 500, "out of memory");
  }
  fe_new_id(fe, c->id);
  snprintf(c->name, sizeof c->name, "%s", name[0] ? name : c->id);
  snprintf(c->image_id, sizeof c->image_id, "%s", img->id);
  c->config = config;
  volumes_of(fe, config);
  if (fe_fs_create(fe, c) != 0) {
    int saved = errno;
    json_object_put(config);
    free(c);
    return fe_reply_error(r, 500, "making the container's folders: %s", strerror(saved));
  }
  c->next = fe->containers;
  fe->containers = c;
  json_object *o = json_object_new_object();
  json_object_object_add(o, "Id", json_object_new_string(c->id));
  json_object_object_add(o, "Warnings", json_object_new_array());
  fe_reply_json(r, 201, o);
}

/* Kills what runs in c, removes its files and frees it (fe->mu held). */
static void container_drop(fake_engine *fe, fe_container *c) {
  fe_container_kill(fe, c, 137);
  fe_fs_remove(c);
  for (fe_container **pp = &fe->containers; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  json_object_put(c->config);
  free(c);
  pthread_cond_broadcast(&fe->cv);
}

static int auto_remove(const fe_container *c) {
  json_object *hc = NULL, *v = NULL;
  return json_object_object_get_ex(c->config, "HostConfig", &hc) &&
         json_object_object_get_ex(hc, "AutoRemove", &v) && json_object_get_boolean(v);
}

/* The container stops (its main process ended): what runs in it is killed;
 * made with AutoRemove, it goes (fe->mu held; c is gone then). */
static void container_stopped(fake_engine *fe, fe_container *c, int code) {
  fe_container_kill(fe, c, code);
  if (auto_remove(c)) container_drop(fe, c);
}

void fe_container_end(fake_engine *fe, const char *cid) {
  pthread_mutex_lock(&fe->mu);
  fe_container *c = fe_container_find(fe, cid);
  if (c && c->running) container_stopped(fe, c, 137);
  pthread_mutex_unlock(&fe->mu);
}

static void container_remove(fake_engine *fe, const fe_request *req, fe_container *c, fe_reply *r) {
  if (c->running && !query_flag(req, "force"))
    return fe_reply_error(r, 409,
                          "You cannot remove a running container %s. Stop the "
                          "container before attempting removal or force remove",
                          c->id);
  container_drop(fe, c);
  r->status = 204;
}

static void container_wait(fake_engine *fe, const fe_request *req, fe_container *c,
                           fe_reply *r) {
  char id[FE_ID_LEN + 1], cond[32] = "";
  snprintf(id, sizeof id, "%s", c->id);
  fe_query(req, "condition", cond, sizeof cond);
  int removed = strcmp(cond, "removed") == 0;
  /* The container may go while we wait: look it up again each time. */
  while ((c = fe_container_find(fe, id)) != NULL && (removed || c->running) && !fe->stopping)
    pthread_cond_wait(&fe->cv, &fe->mu);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "StatusCode", json_object_new_int(c ? c->exit_code : 0));
  fe_reply_json(r, 200, o);
}

static void container_rename(fake_engine *fe, const fe_request *req, fe_container *c,
                             fe_reply *r) {
  char name[256] = "";
  fe_query(req, "name", name, sizeof name);
  fe_container *taken = name[0] ? fe_container_find(fe, name) : NULL;
  if (name[0] == '\0') return fe_reply_error(r, 400, "a new name is needed");
  if (taken && taken != c)
    return fe_reply_error(r, 409, "Conflict. The container name \"/%s\" is already in use by container \"%s\"",
                          name, taken->id);
  snprintf(c->name, sizeof c->name, "%s", name);
  r->status = 204;
}

/* POST /commit: an image of the container (its user kept; no files: the
 * fake's containers run on the host's). */
static void image_commit(fake_engine *fe, const fe_request *req, fe_reply *r) {
  char cid[256] = "", repo[200] = "", tag[64] = "";
  fe_query(req, "container", cid, sizeof cid);
  fe_query(req, "repo", repo, sizeof repo);
  fe_query(req, "tag", tag, sizeof tag);
  fe_container *c = fe_container_find(fe, cid);
  if (c == NULL) return fe_reply_error(r, 404, "No such container: %s", cid);
  fe_image *from = image_find(fe, c->image_id), *i = calloc(1, sizeof *i);
  if (i == NULL) return fe_reply_error(r, 500, "out of memory");
  snprintf(i->ref, sizeof i->ref, "%s:%s", repo, tag[0] ? tag : "latest");
  char id[FE_ID_LEN + 1];
  fe_new_id(fe, id);
  snprintf(i->id, sizeof i->id, "sha256:%s", id);
  snprintf(i->user, sizeof i->user, "%s", from ? from->user : "");
  i->next = fe->images;
  fe->images = i;
  json_object *o = json_object_new_object();
  json_object_object_add(o, "Id", json_object_new_string(i->id));
  fe_reply_json(r, 201, o);
}

/* /containers/{ref}/{what} */
static void container_route(fake_engine *fe, const fe_request *req, const char *ref,
                            const char *what, fe_reply *r) {
  fe_container *c = fe_container_find(fe, ref);
  const char *m = req->method;
  if (c == NULL) return fe_reply_error(r, 404, "No such container: %s", ref);
  if (what == NULL && strcmp(m, "DELETE") == 0) return container_remove(fe, req, c, r);
  if (what == NULL) return fe_reply_error(r, 404, "page not found");
  if (strcmp(what, "json") == 0 && strcmp(m, "GET") == 0)
    return fe_reply_json(r, 200, container_json(c));
  if (strcmp(what, "start") == 0 && strcmp(m, "POST") == 0) {
    r->status = c->running ? 304 : 204;
    c->running = c->started = 1;
    return;
  }
  if ((strcmp(what, "kill") == 0 || strcmp(what, "stop") == 0) && strcmp(m, "POST") == 0) {
    if (!c->running && what[0] == 'k')
      return fe_reply_error(r, 409, "Container %s is not running", c->id);
    r->status = c->running ? 204 : 304;
    container_stopped(fe, c, what[0] == 'k' ? 137 : 143);
    return;
  }
  if (strcmp(what, "wait") == 0 && strcmp(m, "POST") == 0) return container_wait(fe, req, c, r);
  if (strcmp(what, "rename") == 0 && strcmp(m, "POST") == 0) return container_rename(fe, req, c, r);
  if ((strcmp(what, "pause") == 0 || strcmp(what, "unpause") == 0) && strcmp(m, "POST") == 0) {
    int pause = what[0] == 'p';
    if (!c->running) return fe_reply_error(r, 409, "Container %s is not running", c->id);
    if (c->paused == pause)
      return fe_reply_error(r, 409, "Container %s is %s", c->id, pause ? "already paused" : "not paused");
    c->paused = pause;
    r->status = 204;
    return;
  }
  fe_reply_error(r, 404, "page not found");
}

/* ---- volumes ---- */

static int volume_in_use(fake_engine *fe, const char *name) {
  for (fe_container *c = fe->containers; c; c = c->next)
    for (size_t i = 0; i < c->n_mounts; i++)
      if (strstr(c->mounts[i].host, "/volumes/") &&
          strcmp(strrchr(c->mounts[i].host, '/') + 1, name) == 0)
        return 1;
  return 0;
}

static void volume_route(fake_engine *fe, const fe_request *req, const char *name, fe_reply *r) {
  const char *m = req->method;
  if (name == NULL && strcmp(m, "GET") == 0) {
    json_object *o = json_object_new_object(), *list = json_object_new_array();
    for (fe_volume *v = fe->volumes; v; v = v->next) {
      json_object *e = json_object_new_object(), *labels = NULL;
      json_object_object_add(e, "Name", json_object_new_string(v->name));
      json_object_deep_copy(v->labels, &labels, NULL);
      json_object_object_add(e, "Labels", labels ? labels : json_object_new_object());
      json_object_array_add(list, e);
    }
    json_object_object_add(o, "Volumes", list);
    return fe_reply_json(r, 200, o);
  }
  if (name && strcmp(name, "create") == 0 && strcmp(m, "POST") == 0) {
    json_object *body = req->body ? json_tokener_parse(req->body) : NULL, *labels = NULL;
    const char *n = body ? json_str(body, "Name", NULL) : NULL;
    if (n == NULL) {
      json_object_put(body);
      return fe_reply_error(r, 400, "volume create: no name");
    }
    fe_volume *v = volume_find(fe, n);
    if (v == NULL && (v = calloc(1, sizeof *v)) != NULL) {
      snprintf(v->name, sizeof v->name, "%s", n);
      if (json_object_object_get_ex(body, "Labels", &labels)) v->labels = json_object_get(labels);
      v->next = fe->volumes;
      fe->volumes = v;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "Name", json_object_new_string(n));
    json_object_put(body);
    return fe_reply_json(r, 201, o);
  }
  if (name && strcmp(m, "DELETE") == 0) {
    fe_volume **pp = &fe->volumes;
    while (*pp && strcmp((*pp)->name, name) != 0) pp = &(*pp)->next;
    if (*pp == NULL) return fe_reply_error(r, 404, "get %s: no such volume", name);
    if (volume_in_use(fe, name)) return fe_reply_error(r, 409, "remove %s: volume is in use", name);
    fe_volume *v = *pp;
    *pp = v->next;
    char dir[FE_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/volumes/%s", fe->dir, v->name);
    tf_rm_rf(dir); /* its files go with it */
    json_object_put(v->labels);
    free(v);
    r->status = 204;
    return;
  }
  fe_reply_error(r, 404, "page not found");
}

/* ---- execs ---- */

static void exec_create(fake_engine *fe, const fe_request *req, const char *ref, fe_reply *r) {
  fe_container *c = fe_container_find(fe, ref);
  if (c == NULL) return fe_reply_error(r, 404, "No such container: %s", ref);
  if (!c->running) return fe_reply_error(r, 409, "Container %s is not running", c->id);
  if (c->paused)
    return fe_reply_error(r, 409, "Container %s is paused, unpause the container before exec",
                          c->id);
  json_object *config = req->body ? json_tokener_parse(req->body) : NULL, *cmd = NULL;
  if (config == NULL || !json_object_object_get_ex(config, "Cmd", &cmd) || fe_len(cmd) == 0) {
    json_object_put(config);
    return fe_reply_error(r, 400, "No exec command specified");
  }
  fe_exec *x = calloc(1, sizeof *x);
  if (x == NULL) {
    json_object_put(config);
    return fe_reply_error(r, 500, "out of memory");
  }
  fe_new_id(fe, x->id);
  snprintf(x->container, sizeof x->container, "%s", c->id);
  x->config = config;
  x->exit_code = -1;
  x->next = fe->execs;
  fe->execs = x;
  json_object *o = json_object_new_object();
  json_object_object_add(o, "Id", json_object_new_string(x->id));
  fe_reply_json(r, 201, o);
}

static void exec_inspect(fake_engine *fe, const char *id, fe_reply *r) {
  fe_exec *x = fe_exec_find(fe, id);
  if (x == NULL) return fe_reply_error(r, 404, "No such exec instance: %s", id);
  json_object *o = json_object_new_object();
  json_object_object_add(o, "ID", json_object_new_string(x->id));
  json_object_object_add(o, "ContainerID", json_object_new_string(x->container));
  json_object_object_add(o, "Running", json_object_new_boolean(x->running));
  json_object_object_add(o, "ExitCode",
                         x->started && !x->running ? json_object_new_int(x->exit_code) : NULL);
  json_object_object_add(o, "Pid", json_object_new_int(x->pid));
  fe_reply_json(r, 200, o);
}

/* ---- the table ---- */

/* Splits "/a/b/c" into at most SEGS_MAX segments; their count. */
static size_t split(const char *path, char segs[SEGS_MAX][SEG_LEN]) {
  size_t n = 0;
  const char *p = path;
  while (*p == '/') p++;
  while (*p && n < SEGS_MAX) {
    const char *end = strchr(p, '/');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    snprintf(segs[n++], SEG_LEN, "%.*s", (int)len, p);
    p += len;
    while (*p == '/') p++;
  }
  return *p ? SEGS_MAX + 1 : n;
}

static void route_locked(fake_engine *fe, fe_conn *conn, const fe_request *req, fe_reply *r) {
  const char *m = req->method, *path = req->path;
  size_t plen = strlen(path);
  if (strcmp(path, "/version") == 0) return system_version(r);
  if (strcmp(path, "/info") == 0) return system_info(r);
  if (strncmp(path, "/images/", 8) == 0 && plen > 13 && strcmp(path + plen - 5, "/json") == 0) {
    char ref[512];
    snprintf(ref, sizeof ref, "%.*s", (int)(plen - 13), path + 8);
    return image_inspect(fe, ref, r);
  }
  char s[SEGS_MAX][SEG_LEN];
  size_t n = split(path, s);
  if (n == 2 && strcmp(s[0], "containers") == 0 && strcmp(s[1], "create") == 0 &&
      strcmp(m, "POST") == 0)
    return container_create(fe, req, r);
  if (n == 2 && strcmp(s[0], "containers") == 0 && strcmp(s[1], "json") == 0)
    return container_list(fe, req, r);
  if (n == 1 && strcmp(s[0], "commit") == 0 && strcmp(m, "POST") == 0) return image_commit(fe, req, r);
  if (n == 3 && strcmp(s[0], "containers") == 0 && strcmp(s[2], "exec") == 0)
    return exec_create(fe, req, s[1], r);
  if (n == 3 && strcmp(s[0], "containers") == 0 && strcmp(s[2], "archive") == 0) {
    if (strcmp(m, "PUT") == 0) return fe_archive_put(fe, req, s[1], r);
    return fe_archive_get(fe, req, s[1], strcmp(m, "HEAD") == 0, r);
  }
  if ((n == 2 || n == 3) && strcmp(s[0], "containers") == 0)
    return container_route(fe, req, s[1], n == 3 ? s[2] : NULL, r);
  if (n == 3 && strcmp(s[0], "exec") == 0 && strcmp(s[2], "json") == 0)
    return exec_inspect(fe, s[1], r);
  if ((n == 1 || n == 2) && strcmp(s[0], "volumes") == 0)
    return volume_route(fe, req, n == 2 ? s[1] : NULL, r);
  (void)conn;
  fe_reply_error(r, 404, "page not found");
}

void fe_route_api(fake_engine *fe, fe_conn *c, const fe_request *req, fe_reply *r) {
  char s[SEGS_MAX][SEG_LEN];
  if (strcmp(req->method, "POST") == 0 && split(req->path, s) == 3 && strcmp(s[0], "exec") == 0 &&
      strcmp(s[2], "start") == 0)
    return fe_exec_start(fe, c, s[1], r); /* streams without the lock */
  pthread_mutex_lock(&fe->mu);
  route_locked(fe, c, req, r);
  pthread_mutex_unlock(&fe->mu);
}

/* ---- what tests ask ---- */

size_t fake_engine_containers(fake_engine *fe) {
  size_t n = 0;
  pthread_mutex_lock(&fe->mu);
  for (fe_container *c = fe->containers; c; c = c->next) n++;
  pthread_mutex_unlock(&fe->mu);
  return n;
}

size_t fake_engine_volumes(fake_engine *fe) {
  size_t n = 0;
  pthread_mutex_lock(&fe->mu);
  for (fe_volume *v = fe->volumes; v; v = v->next) n++;
  pthread_mutex_unlock(&fe->mu);
  return n;
}

int fake_engine_path(fake_engine *fe, const char *ref, const char *path, char *out, size_t len) {
  pthread_mutex_lock(&fe->mu);
  fe_container *c = fe_container_find(fe, ref);
  if (c) fe_fs_host_path(c, path, out, len);
  pthread_mutex_unlock(&fe->mu);
  return c ? 0 : -1;
}

int fake_engine_name_of(fake_engine *fe, const char *ref, char *out, size_t len) {
  pthread_mutex_lock(&fe->mu);
  fe_container *c = fe_container_find(fe, ref);
  if (c) snprintf(out, len, "%s", c->name);
  pthread_mutex_unlock(&fe->mu);
  return c ? 0 : -1;
}

int fake_engine_stop_container(fake_engine *fe, const char *ref, int oom) {
  pthread_mutex_lock(&fe->mu);
  fe_container *c = fe_container_find(fe, ref);
  int found = c != NULL;
  if (c) {
    c->oom_killed = oom;
    container_stopped(fe, c, 137);
  }
  pthread_mutex_unlock(&fe->mu);
  return found ? 0 : -1;
}

int fake_engine_exec_user(fake_engine *fe, const char *part, char *out, size_t len) {
  int found = -1;
  out[0] = '\0';
  pthread_mutex_lock(&fe->mu);
  /* Newest first: the list is kept in that order. */
  for (fe_exec *x = fe->execs; x && found; x = x->next) {
    json_object *cmd = NULL;
    json_object_object_get_ex(x->config, "Cmd", &cmd);
    const char *user = json_str(x->config, "User", NULL);
    for (size_t i = 0; i < fe_len(cmd) && found; i++) {
      const char *arg = json_object_get_string(json_object_array_get_idx(cmd, i));
      if (arg && strstr(arg, part)) {
        snprintf(out, len, "%s", user ? user : "");
        found = 0;
      }
    }
  }
  pthread_mutex_unlock(&fe->mu);
  return found;
}
