/* The record of a keyed sandbox at rest (rest_record.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include <sandman/state.h>

#include "common/cleanup.h"
#include "common/durable.h"
#include "common/io.h"
#include "sandbox/rest_record.h"

#define RECORD_CAP 8192

static int rest_path(const char *state_dir, const char *name, const char *suffix, char *out,
                     size_t len, sm_error *err) {
  char base[PATH_MAX];
  int rc = 0;
  if (state_dir == NULL || *state_dir == '\0')
    rc = sm_state_default_dir(base, sizeof base, err);
  else if (snprintf(base, sizeof base, "%s", state_dir) >= (int)sizeof base)
    rc = sm_error_set(err, SM_EINVAL, "state directory path too long");
  if (rc) return rc;
  if (name == NULL || *name == '\0' || strchr(name, '/') || name[0] == '.')
    return sm_error_set(err, SM_EINVAL, "bad sandbox name for the state directory");
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s/rest", base) >= (int)sizeof dir ||
      snprintf(out, len, "%s/%s%s", dir, name, suffix) >= (int)len)
    return sm_error_set(err, SM_EINVAL, "state path too long");
  if (common_mkdirs(dir) != 0) return sm_error_set_errno(err, SM_EIO, errno, "creating %s", dir);
  return 0;
}

int sandbox_rest_ws_path(const char *state_dir, const char *name, char *out, size_t len,
                         sm_error *err) {
  return rest_path(state_dir, name, ".ws.tar", out, len, err);
}

static void copy_str(json_object *o, const char *key, char *out, size_t len) {
  json_object *v = NULL;
  out[0] = '\0';
  if (json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string))
    snprintf(out, len, "%s", json_object_get_string(v));
}

static int64_t get_int(json_object *o, const char *key) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : 0;
}

int sandbox_rest_read(const char *state_dir, const char *name, sandbox_rest_record *out,
                      sm_error *err) {
  memset(out, 0, sizeof *out);
  char path[PATH_MAX];
  sm_error e = SM_ERROR_INIT;
  if (rest_path(state_dir, name, ".json", path, sizeof path, &e) != 0)
    return sm_error_set(err, e.code, "%s", e.message);
  cleanup_free char *text = NULL;
  int rc = common_file_read_small(path, RECORD_CAP, &text, NULL, &e);
  if (rc == SM_ENOTFOUND) return rc;
  if (rc) return sm_error_set(err, rc, "%s", e.message);
  cleanup_json json_object *o = json_tokener_parse(text);
  if (o == NULL || !json_object_is_type(o, json_type_object))
    return sm_error_set(err, SM_EPROTOCOL, "%s is not a sandman rest record", path);
  copy_str(o, "state", out->state, sizeof out->state);
  copy_str(o, "pending", out->pending, sizeof out->pending);
  copy_str(o, "prior", out->prior, sizeof out->prior);
  copy_str(o, "id", out->id, sizeof out->id);
  copy_str(o, "next_id", out->next_id, sizeof out->next_id);
  copy_str(o, "origin", out->origin, sizeof out->origin);
  json_object *v = NULL;
  if (json_object_object_get_ex(o, "since", &v)) out->since = json_object_get_double(v);
  out->workspace_bytes = get_int(o, "workspace_bytes");
  out->generation = (unsigned)get_int(o, "generation");
  out->ws_saved = get_int(o, "ws_saved") != 0;
  /* A change's record may name only where it goes (written so before
   * this was fixed): it was in its prior state. */
  if (out->state[0] == '\0' && out->pending[0])
    snprintf(out->state, sizeof out->state, "%s", out->prior[0] ? out->prior : "running");
  if (out->state[0] == '\0')
    return sm_error_set(err, SM_EPROTOCOL, "%s says no state", path);
  return 0;
}

static void add_str(json_object *o, const char *key, const char *v) {
  if (v && *v) json_object_object_add(o, key, json_object_new_string(v));
}

static int record_write(const char *state_dir, const char *name, const sandbox_rest_record *r,
                        int flush, sm_error *err) {
  char path[PATH_MAX];
  int rc = rest_path(state_dir, name, ".json", path, sizeof path, err);
  if (rc) return rc;
  cleanup_json json_object *o = json_object_new_object();
  if (o == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  /* Never without a state: a sandbox's first change starts from none. */
  add_str(o, "state", r->state[0] ? r->state : r->prior[0] ? r->prior : "running");
  add_str(o, "pending", r->pending);
  add_str(o, "prior", r->prior);
  json_object_object_add(o, "since", json_object_new_double(r->since));
  add_str(o, "id", r->id);
  add_str(o, "next_id", r->next_id);
  add_str(o, "origin", r->origin);
  json_object_object_add(o, "workspace_bytes", json_object_new_int64(r->workspace_bytes));
  json_object_object_add(o, "generation", json_object_new_int64(r->generation));
  json_object_object_add(o, "ws_saved", json_object_new_int(r->ws_saved));
  const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
  return flush ? common_file_replace(path, text, strlen(text), err)
               : common_file_replace_quick(path, text, strlen(text), err);
}

int sandbox_rest_write(const char *state_dir, const char *name, const sandbox_rest_record *r,
                       sm_error *err) {
  return record_write(state_dir, name, r, 1, err);
}

int sandbox_rest_write_quick(const char *state_dir, const char *name, const sandbox_rest_record *r,
                             sm_error *err) {
  return record_write(state_dir, name, r, 0, err);
}

void sandbox_rest_drop(const char *state_dir, const char *name) {
  char path[PATH_MAX];
  sm_error ignore = SM_ERROR_INIT;
  sandbox_rest_sweep(state_dir, name);
  if (rest_path(state_dir, name, ".ws.tar", path, sizeof path, &ignore) == 0) unlink(path);
  if (rest_path(state_dir, name, ".json", path, sizeof path, &ignore) == 0) unlink(path);
}

void sandbox_rest_sweep(const char *state_dir, const char *name) {
  char path[PATH_MAX], prefix[PATH_MAX];
  sm_error ignore = SM_ERROR_INIT;
  if (rest_path(state_dir, name, "", path, sizeof path, &ignore) != 0) return;
  char *slash = strrchr(path, '/');
  if (slash == NULL) return;
  *slash = '\0';
  /* ws_save.c writes <name>.ws.tar.tmp-XXXXXX, renamed once whole. */
  if (snprintf(prefix, sizeof prefix, "%s.ws.tar.tmp-", slash + 1) >= (int)sizeof prefix) return;
  cleanup_dir DIR *d = opendir(path);
  if (d == NULL) return;
  size_t plen = strlen(prefix);
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (strncmp(de->d_name, prefix, plen) == 0) unlinkat(dirfd(d), de->d_name, 0);
}
