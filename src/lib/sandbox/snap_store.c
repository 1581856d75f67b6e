/* Where snapshots live (snap_store.h). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <sandman/state.h>

#include "common/cleanup.h"
#include "common/durable.h"
#include "common/io.h"
#include "common/rmtree.h"
#include "sandbox/sandbox_settings.h"
#include "sandbox/snap_store.h"

#define META_CAP (1 << 20)

int sandbox_snap_name_valid(const char *name) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n >= SM_SNAPSHOT_NAME_MAX || name[0] == '.' || name[0] == '-') return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != '.' && name[i] != '-') return 0;
  return 1;
}

void sandbox_snap_key(const char *instance, const char *owner, const char *name, char key[17]) {
  char buf[1024], hex[65];
  size_t a = strlen(instance), b = strlen(owner), c = strlen(name);
  if (a + b + c + 2 > sizeof buf) c = sizeof buf - a - b - 2;
  memcpy(buf, instance, a);
  buf[a] = '\0';
  memcpy(buf + a + 1, owner, b);
  buf[a + 1 + b] = '\0';
  memcpy(buf + a + b + 2, name, c);
  sandbox_sha256_hex(buf, a + b + 2 + c, hex);
  snprintf(key, 17, "%.16s", hex);
}

void sandbox_snap_image_ref(const char *instance, const char *key, char *out, size_t len) {
  char inst[80];
  size_t i = 0;
  for (; instance[i] && i < sizeof inst - 1; i++) {
    char ch = (char)tolower((unsigned char)instance[i]);
    inst[i] = (isalnum((unsigned char)ch) || ch == '.' || ch == '-') ? ch : '-';
  }
  inst[i] = '\0';
  /* A repository component starts with a letter or digit. */
  snprintf(out, len, "sandman-snapshot/%s%s:%s", isalnum((unsigned char)inst[0]) ? "" : "i", inst, key);
}

int sandbox_snap_root(const char *state_dir, char *out, size_t len, sm_error *err) {
  char base[PATH_MAX];
  int rc = 0;
  if (state_dir == NULL || *state_dir == '\0') rc = sm_state_default_dir(base, sizeof base, err);
  else if (snprintf(base, sizeof base, "%s", state_dir) >= (int)sizeof base)
    rc = sm_error_set(err, SM_EINVAL, "state directory path too long");
  if (rc) return rc;
  if (snprintf(out, len, "%s/snapshots", base) >= (int)len)
    return sm_error_set(err, SM_EINVAL, "state path too long");
  if (common_mkdirs(out) != 0) return sm_error_set_errno(err, SM_EIO, errno, "creating %s", out);
  return 0;
}

int sandbox_snap_dir(const char *state_dir, const char *key, char *out, size_t len, sm_error *err) {
  char root[PATH_MAX];
  int rc = sandbox_snap_root(state_dir, root, sizeof root, err);
  if (rc) return rc;
  if (snprintf(out, len, "%s/%s", root, key) >= (int)len)
    return sm_error_set(err, SM_EINVAL, "state path too long");
  return 0;
}

#define TMP_TRIES 3
#define TMP_FILE_AGE_S 3600

/* Holds folder path: 0 with *fd, -ENOENT when a sweep removed it before
 * the hold (it took the lock first), else -errno. */
static int snap_tmp_hold(const char *path, int *fd) {
  int f = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (f < 0) return -errno;
  struct stat st;
  int r = flock(f, LOCK_EX) != 0 ? -errno : fstat(f, &st) != 0 ? -errno : 0;
  if (r == 0 && st.st_nlink == 0) r = -ENOENT;
  if (r) close(f);
  else *fd = f;
  return r;
}

int sandbox_snap_tmp_dir(const char *state_dir, const char *key, char *out, size_t len,
                         int *lock_fd, sm_error *err) {
  char root[PATH_MAX];
  *lock_fd = -1;
  int rc = sandbox_snap_root(state_dir, root, sizeof root, err);
  if (rc) return rc;
  int r = -ENOENT;
  for (int i = 0; i < TMP_TRIES && r == -ENOENT; i++) {
    if (snprintf(out, len, "%s/.tmp-%s-XXXXXX", root, key) >= (int)len)
      return sm_error_set(err, SM_EINVAL, "state path too long");
    if (mkdtemp(out) == NULL) return sm_error_set_errno(err, SM_EIO, errno, "creating %s", out);
    r = snap_tmp_hold(out, lock_fd);
  }
  if (r) return sm_error_set_errno(err, SM_EIO, -r, "holding %s", out);
  return 0;
}

/* 1 when entry `name` of root is something a snapshot cut short left. */
static int snap_tmp_abandoned(int dfd, const char *name, double now, int *held) {
  *held = -1;
  int f = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (f >= 0) {
    if (flock(f, LOCK_EX | LOCK_NB) == 0) {
      *held = f; /* kept while it goes: a maker that opened it meanwhile sees it removed */
      return 1;
    }
    close(f);
    return 0;
  }
  struct stat st;
  return errno == ENOTDIR && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         now - (double)st.st_mtime > TMP_FILE_AGE_S;
}

int sandbox_snap_tmp_sweep(const char *root, double now) {
  cleanup_dir DIR *d = opendir(root);
  if (d == NULL) return 0;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    int held = -1;
    if (strncmp(de->d_name, ".tmp-", 5) != 0 || !snap_tmp_abandoned(dirfd(d), de->d_name, now, &held))
      continue;
    char path[PATH_MAX];
    sm_error ignore = SM_ERROR_INIT;
    if (snprintf(path, sizeof path, "%s/%s", root, de->d_name) < (int)sizeof path &&
        sandbox_snap_remove_dir(path, &ignore) == 0)
      n++;
    if (held >= 0) close(held);
  }
  return n;
}

static void put_str(json_object *o, const char *k, const char *v) {
  json_object_object_add(o, k, json_object_new_string(v ? v : ""));
}

int sandbox_snap_meta_write(const char *dir, const char *instance, const sm_snapshot *s,
                            json_object *config, sm_error *err) {
  cleanup_json json_object *o = json_object_new_object();
  if (o == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  put_str(o, "instance", instance);
  put_str(o, "name", s->name);
  put_str(o, "key", s->key);
  put_str(o, "owner", s->owner);
  put_str(o, "source", s->source);
  put_str(o, "source_id", s->source_id);
  put_str(o, "mode", s->mode);
  put_str(o, "project", s->project);
  put_str(o, "run_id", s->run_id);
  put_str(o, "worker_id", s->worker_id);
  put_str(o, "image", s->image);
  put_str(o, "image_id", s->image_id);
  json_object_object_add(o, "created_at", json_object_new_double(s->created_at));
  json_object_object_add(o, "workspace_bytes", json_object_new_int64(s->workspace_bytes));
  json_object_object_add(o, "layer_bytes", json_object_new_int64(s->layer_bytes));
  json_object_object_add(o, "files", json_object_new_int64(s->files));
  json_object_object_add(o, "duration_ms", json_object_new_double(s->duration_ms));
  json_object_object_add(o, "memory", json_object_new_boolean(s->memory));
  json_object_object_add(o, "checkpoint_bytes", json_object_new_int64(s->checkpoint_bytes));
  if (config) json_object_object_add(o, "config", json_object_get(config));
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/meta.json", dir);
  const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
  return common_file_replace(path, text, strlen(text), err);
}

static void get_str(json_object *o, const char *k, char *out, size_t len) {
  json_object *v = NULL;
  out[0] = '\0';
  if (json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string))
    snprintf(out, len, "%s", json_object_get_string(v));
}

static double get_num(json_object *o, const char *k) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, k, &v) ? json_object_get_double(v) : 0;
}

int sandbox_snap_meta_read(const char *dir, char *instance, size_t ilen, sm_snapshot *out,
                           json_object **config, sm_error *err) {
  memset(out, 0, sizeof *out);
  if (config) *config = NULL;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/meta.json", dir);
  cleanup_free char *text = NULL;
  int rc = common_file_read_small(path, META_CAP, &text, NULL, err);
  if (rc == SM_ENOTFOUND) return sm_error_set(err, rc, "%s has no meta.json", dir);
  if (rc) return rc;
  cleanup_json json_object *o = json_tokener_parse(text);
  if (o == NULL || !json_object_is_type(o, json_type_object))
    return sm_error_set(err, SM_EPROTOCOL, "%s is not a snapshot's meta.json", path);
  get_str(o, "instance", instance, ilen);
  get_str(o, "name", out->name, sizeof out->name);
  get_str(o, "key", out->key, sizeof out->key);
  get_str(o, "owner", out->owner, sizeof out->owner);
  get_str(o, "source", out->source, sizeof out->source);
  get_str(o, "source_id", out->source_id, sizeof out->source_id);
  get_str(o, "mode", out->mode, sizeof out->mode);
  get_str(o, "project", out->project, sizeof out->project);
  get_str(o, "run_id", out->run_id, sizeof out->run_id);
  get_str(o, "worker_id", out->worker_id, sizeof out->worker_id);
  get_str(o, "image", out->image, sizeof out->image);
  get_str(o, "image_id", out->image_id, sizeof out->image_id);
  out->created_at = get_num(o, "created_at");
  out->workspace_bytes = (int64_t)get_num(o, "workspace_bytes");
  out->layer_bytes = (int64_t)get_num(o, "layer_bytes");
  out->files = (int64_t)get_num(o, "files");
  out->duration_ms = get_num(o, "duration_ms");
  out->checkpoint_bytes = (int64_t)get_num(o, "checkpoint_bytes");
  json_object *mem = NULL;
  out->memory = json_object_object_get_ex(o, "memory", &mem) && json_object_get_boolean(mem);
  json_object *c = NULL;
  if (config && json_object_object_get_ex(o, "config", &c)) *config = json_object_get(c);
  if (!sandbox_snap_name_valid(out->name) || strlen(out->key) != 16)
    return sm_error_set(err, SM_EPROTOCOL, "%s is not a snapshot's meta.json", path);
  return 0;
}

static int newest_first(const void *a, const void *b) {
  const sm_snapshot *x = a, *y = b;
  return x->created_at < y->created_at ? 1 : x->created_at > y->created_at ? -1 : strcmp(x->name, y->name);
}

int sandbox_snap_list(const char *state_dir, const char *instance, const char *owner,
                      sm_snapshot_list *out, sm_error *err) {
  out->n = 0;
  out->items = NULL;
  char root[PATH_MAX];
  int rc = sandbox_snap_root(state_dir, root, sizeof root, err);
  if (rc) return rc;
  cleanup_dir DIR *d = opendir(root);
  if (d == NULL) return sm_error_set_errno(err, SM_EIO, errno, "reading %s", root);
  size_t cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.' || strlen(de->d_name) != 16) continue;
    char dir[PATH_MAX], inst[80];
    sm_snapshot s;
    sm_error e = SM_ERROR_INIT;
    snprintf(dir, sizeof dir, "%s/%s", root, de->d_name);
    if (sandbox_snap_meta_read(dir, inst, sizeof inst, &s, NULL, &e) != 0 ||
        strcmp(inst, instance) != 0 || strcmp(s.key, de->d_name) != 0 ||
        (owner && strcmp(s.owner, owner) != 0))
      continue;
    if (out->n == cap) {
      size_t nc = cap ? cap * 2 : 16;
      sm_snapshot *ni = realloc(out->items, nc * sizeof *ni);
      if (ni == NULL) {
        sm_snapshot_list_dispose(out);
        return sm_error_set(err, SM_ENOMEM, NULL);
      }
      out->items = ni;
      cap = nc;
    }
    out->items[out->n++] = s;
  }
  if (out->n > 1) qsort(out->items, out->n, sizeof *out->items, newest_first);
  return 0;
}

void sm_snapshot_list_dispose(sm_snapshot_list *l) {
  if (l == NULL) return;
  free(l->items);
  l->items = NULL;
  l->n = 0;
}

int sandbox_snap_find(const char *state_dir, const char *instance, const char *ref,
                      const char *owner, sm_snapshot *out, sm_error *err) {
  memset(out, 0, sizeof *out);
  sm_snapshot_list l;
  int rc = sandbox_snap_list(state_dir, instance, owner, &l, err);
  if (rc) return rc;
  size_t hits = 0;
  char owners[512] = "";
  for (size_t i = 0; i < l.n; i++) {
    if (strcmp(l.items[i].name, ref) != 0 && strcmp(l.items[i].key, ref) != 0) continue;
    if (hits++ == 0) *out = l.items[i];
    size_t u = strlen(owners);
    snprintf(owners + u, sizeof owners - u, "%s%s", u ? ", " : "", l.items[i].owner);
  }
  sm_snapshot_list_dispose(&l);
  if (hits == 1) return 0;
  memset(out, 0, sizeof *out);
  if (hits == 0) return sm_error_set(err, SM_ENOTFOUND, "no such snapshot: %s", ref);
  return sm_error_set(err, SM_ECONFLICT,
                      "several owners have a snapshot named %s (%s): name it by its key", ref, owners);
}

int sandbox_snap_remove_dir(const char *dir, sm_error *err) {
  int r = common_rmtree_at(AT_FDCWD, dir);
  if (r != 0) return sm_error_set_errno(err, SM_EIO, -r, "removing %s", dir);
  common_sync_dir_of(dir);
  return 0;
}
