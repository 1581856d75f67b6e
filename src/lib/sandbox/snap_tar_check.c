/* The shape of an agent's /workspace tar (snap_tar_check.h). */
#include <string.h>
#include <sys/stat.h>

#include "sandbox/snap_tar_check.h"

#define SNAP_TAR_PATH_MAX 4096

/* "./a/b" (a trailing '/' taken off) -> "a/b" in out; "./" -> "". -1 when
 * not clean. */
static int snap_tar_check_clean(const char *raw, char *out, size_t len) {
  if (raw == NULL || strncmp(raw, "./", 2) != 0) return -1;
  size_t n = strlen(raw + 2);
  if (n >= len) return -1;
  memcpy(out, raw + 2, n + 1);
  if (n > 0 && out[n - 1] == '/') out[--n] = '\0';
  if (n == 0) return 0;
  for (const char *p = out;;) {
    const char *slash = strchr(p, '/');
    size_t part = slash ? (size_t)(slash - p) : strlen(p);
    if (part == 0 || (part == 1 && p[0] == '.') || (part == 2 && p[0] == '.' && p[1] == '.'))
      return -1;
    if (slash == NULL) return 0;
    p = slash + 1;
  }
}

int sandbox_snap_tar_check_entry(sandbox_snap_tar_check *c, struct archive_entry *ae, sm_error *err) {
  char path[SNAP_TAR_PATH_MAX];
  const char *raw = archive_entry_pathname(ae);
  if (snap_tar_check_clean(raw, path, sizeof path) != 0)
    return sm_error_set(err, SM_EPROTOCOL, "an entry named '%.200s'", raw ? raw : "");
  mode_t m = archive_entry_mode(ae);
  int dir = S_ISDIR(m);
  if (!dir && !S_ISREG(m) && !S_ISLNK(m))
    return sm_error_set(err, SM_EPROTOCOL, "'%.200s' is not a file, folder or link", path);
  if (archive_entry_hardlink(ae) != NULL)
    return sm_error_set(err, SM_EPROTOCOL, "'%.200s' is a hard link", path);
  if (c->entries++ == 0) {
    if (path[0] != '\0' || !dir) return sm_error_set(err, SM_EPROTOCOL, "the tar does not start with ./");
    c->seen = json_object_new_object();
    if (c->seen == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
    c->uid = archive_entry_uid(ae);
    c->gid = archive_entry_gid(ae);
    return 0;
  }
  if (path[0] == '\0') return sm_error_set(err, SM_EPROTOCOL, "./ comes twice");
  if (archive_entry_uid(ae) != c->uid || archive_entry_gid(ae) != c->gid)
    return sm_error_set(err, SM_EPROTOCOL, "'%.200s' has another owner than /workspace", path);
  if (json_object_object_get_ex(c->seen, path, NULL))
    return sm_error_set(err, SM_EPROTOCOL, "'%.200s' comes twice", path);
  char *slash = strrchr(path, '/');
  if (slash) {
    *slash = '\0';
    json_object *parent = NULL;
    int ok = json_object_object_get_ex(c->seen, path, &parent) && json_object_get_int(parent) == 1;
    *slash = '/';
    if (!ok) return sm_error_set(err, SM_EPROTOCOL, "'%.200s' is not inside a folder before it", path);
  }
  json_object *v = json_object_new_int(dir);
  if (v == NULL || json_object_object_add(c->seen, path, v) != 0) {
    json_object_put(v);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  return 0;
}

void sandbox_snap_tar_check_free(sandbox_snap_tar_check *c) {
  json_object_put(c->seen);
  c->seen = NULL;
}
