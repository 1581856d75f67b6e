/* Manifests of /workspace tars and their differences (snap_manifest.h). */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "common/cleanup.h"
#include "sandbox/snap_manifest.h"

#define BLOCK (64 * 1024)
#define MAX_ENTRIES 1000000

/* "workspace/a/b" -> "a/b"; the folder itself -> NULL. */
static const char *relative(const char *path) {
  if (path == NULL) return NULL;
  if (strncmp(path, "./", 2) == 0) path += 2;
  if (strncmp(path, "workspace", 9) == 0 && (path[9] == '/' || path[9] == '\0')) path += 9;
  while (*path == '/') path++;
  return *path ? path : NULL;
}

static const char *type_of(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "link";
  return "other";
}

/* The SHA-256 of the entry's data, in hex. */
static int hash_data(struct archive *a, char out[65], sm_error *err) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(md);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  char buf[BLOCK];
  la_ssize_t n;
  while ((n = archive_read_data(a, buf, sizeof buf)) > 0) EVP_DigestUpdate(md, buf, (size_t)n);
  unsigned char d[32];
  unsigned len = 0;
  EVP_DigestFinal_ex(md, d, &len);
  EVP_MD_CTX_free(md);
  if (n < 0) return sm_error_set(err, SM_EIO, "reading the workspace tar: %s", archive_error_string(a));
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
  return 0;
}

static int by_path(const void *a, const void *b) {
  json_object *x = *(json_object *const *)a, *y = *(json_object *const *)b, *px = NULL, *py = NULL;
  json_object_object_get_ex(x, "path", &px);
  json_object_object_get_ex(y, "path", &py);
  return strcmp(json_object_get_string(px), json_object_get_string(py));
}

/* A hard link's type: its mode's when that has one (the engine's archive
 * writes 0100644), else (a tar that keeps only the permissions there, as
 * libarchive writes them: snap_direct.c) the type of the entry it names,
 * a file unless odd (path -> type of each entry neither file nor folder)
 * says otherwise. */
static mode_t link_type(struct archive_entry *ae, json_object *odd) {
  mode_t m = archive_entry_mode(ae);
  const char *to = relative(archive_entry_hardlink(ae));
  if ((m & S_IFMT) != 0 || to == NULL) return m;
  json_object *t = NULL;
  if (odd && json_object_object_get_ex(odd, to, &t))
    return (m & 07777) | (mode_t)json_object_get_int(t);
  return (m & 07777) | S_IFREG;
}

static json_object *entry_of(struct archive *a, struct archive_entry *ae, const char *path,
                             json_object *odd, sm_error *err) {
  mode_t m = archive_entry_hardlink(ae) ? link_type(ae, odd) : archive_entry_mode(ae);
  json_object *o = json_object_new_object();
  if (o == NULL) return NULL;
  /* A folder's entry may end with '/' ("d/"): its path is "d" either way. */
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') n--;
  json_object_object_add(o, "path", json_object_new_string_len(path, (int)n));
  json_object_object_add(o, "type", json_object_new_string(type_of(m)));
  json_object_object_add(o, "size", json_object_new_int64(S_ISREG(m) ? archive_entry_size(ae) : 0));
  char mode[8];
  snprintf(mode, sizeof mode, "%04o", (unsigned)(m & 07777));
  json_object_object_add(o, "mode", json_object_new_string(mode));
  if (S_ISREG(m)) {
    char h[65];
    if (hash_data(a, h, err) != 0) {
      json_object_put(o);
      return NULL;
    }
    json_object_object_add(o, "sha256", json_object_new_string(h));
  } else if (S_ISLNK(m) && archive_entry_symlink(ae)) {
    json_object_object_add(o, "target", json_object_new_string(archive_entry_symlink(ae)));
  }
  if (odd && !S_ISREG(m) && !S_ISDIR(m))
    json_object_object_add(odd, json_object_get_string(json_object_object_get(o, "path")),
                           json_object_new_int((int)(m & S_IFMT)));
  return o;
}

int sandbox_snap_manifest_of_tar(int fd, json_object **out, int64_t *files, sm_error *err) {
  *out = NULL;
  cleanup_archive struct archive *a = archive_read_new();
  if (a == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  archive_read_support_format_tar(a);
  if (archive_read_open_fd(a, fd, BLOCK) != ARCHIVE_OK)
    return sm_error_set(err, SM_EIO, "reading the workspace tar: %s", archive_error_string(a));
  cleanup_json json_object *list = json_object_new_array();
  cleanup_json json_object *odd = json_object_new_object();
  if (list == NULL || odd == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  struct archive_entry *ae = NULL;
  int r;
  while ((r = archive_read_next_header(a, &ae)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
    const char *path = relative(archive_entry_pathname(ae));
    if (path == NULL) continue;
    if (json_object_array_length(list) >= MAX_ENTRIES)
      return sm_error_set(err, SM_ETOOBIG, "the workspace holds more than %d entries", MAX_ENTRIES);
    json_object *o = entry_of(a, ae, path, odd, err);
    if (o == NULL) return err->code ? err->code : sm_error_set(err, SM_ENOMEM, NULL);
    json_object_array_add(list, o);
  }
  if (r != ARCHIVE_EOF)
    return sm_error_set(err, SM_EIO, "reading the workspace tar: %s", archive_error_string(a));
  json_object_array_sort(list, by_path);
  if (files) *files = (int64_t)json_object_array_length(list);
  json_object *m = json_object_new_object();
  if (m == NULL) return sm_error_set(err, SM_ENOMEM, NULL);
  json_object_object_add(m, "files", steal_pointer(&list));
  *out = m;
  return 0;
}

/* ---- differences ---- */

static json_object *files_of(json_object *manifest) {
  json_object *f = NULL;
  if (manifest && json_object_object_get_ex(manifest, "files", &f) && json_object_is_type(f, json_type_array))
    return f;
  return NULL;
}

static const char *field(json_object *o, const char *k) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, k, &v) && v ? json_object_get_string(v) : "";
}

static int64_t size_of(json_object *o) {
  json_object *v = NULL;
  return json_object_object_get_ex(o, "size", &v) ? json_object_get_int64(v) : 0;
}

static int same(json_object *a, json_object *b) {
  static const char *const keys[] = {"type", "mode", "sha256", "target"};
  for (size_t i = 0; i < 4; i++)
    if (strcmp(field(a, keys[i]), field(b, keys[i])) != 0) return 0;
  return size_of(a) == size_of(b);
}

static void add_change(json_object *list, json_object *e, json_object *before) {
  json_object *c = json_object_new_object();
  json_object_object_add(c, "path", json_object_new_string(field(e, "path")));
  json_object_object_add(c, "type", json_object_new_string(field(e, "type")));
  json_object_object_add(c, "size", json_object_new_int64(size_of(e)));
  if (before) json_object_object_add(c, "size_before", json_object_new_int64(size_of(before)));
  json_object_array_add(list, c);
}

/* Both lists are sorted by path: one merge walk. */
json_object *sandbox_snap_manifest_diff(json_object *before, json_object *after) {
  json_object *b = files_of(before), *a = files_of(after);
  json_object *out = json_object_new_object();
  json_object *added = json_object_new_array(), *modified = json_object_new_array(),
              *deleted = json_object_new_array();
  size_t nb = b ? json_object_array_length(b) : 0, na = a ? json_object_array_length(a) : 0;
  size_t i = 0, j = 0;
  while (i < nb || j < na) {
    json_object *x = i < nb ? json_object_array_get_idx(b, i) : NULL;
    json_object *y = j < na ? json_object_array_get_idx(a, j) : NULL;
    int c = x == NULL ? 1 : y == NULL ? -1 : strcmp(field(x, "path"), field(y, "path"));
    if (c < 0) {
      add_change(deleted, x, NULL);
      i++;
    } else if (c > 0) {
      add_change(added, y, NULL);
      j++;
    } else {
      if (!same(x, y)) add_change(modified, y, x);
      i++;
      j++;
    }
  }
  json_object_object_add(out, "added", added);
  json_object_object_add(out, "modified", modified);
  json_object_object_add(out, "deleted", deleted);
  return out;
}
