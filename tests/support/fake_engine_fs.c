/* The fake engine's containers on disk (fake_engine.h): each container a
 * folder, its tmpfs mounts and volumes folders of their own; container
 * paths mapped to host paths; archives in (PUT) and out (GET, HEAD). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "support/fake_engine_internal.h"
#include "support/files.h"
#include "support/xalloc.h"

static int mkdir_p(const char *path, mode_t mode) {
  char tmp[FE_PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(tmp, mode) != 0 && errno != EEXIST) return -1;
  return 0;
}

static int add_mount(fe_container *c, const char *target, const char *host) {
  if (c->n_mounts == FE_MOUNTS_MAX || target[0] != '/') return 0;
  fe_mount *m = &c->mounts[c->n_mounts++];
  snprintf(m->target, sizeof m->target, "%s", target);
  size_t n = strlen(m->target);
  while (n > 1 && m->target[n - 1] == '/') m->target[--n] = '\0';
  snprintf(m->host, sizeof m->host, "%s", host);
  return mkdir_p(host, 0755);
}

/* A tmpfs: a folder under the container's, with the mode= its options say. */
static int add_tmpfs(fe_container *c, const char *target, const char *opts) {
  char host[FE_PATH_MAX];
  snprintf(host, sizeof host, "%s/tmpfs%s", c->root, target);
  if (add_mount(c, target, host) != 0) return -1;
  const char *m = opts ? strstr(opts, "mode=") : NULL;
  return m ? chmod(host, (mode_t)strtoul(m + 5, NULL, 8)) : 0;
}

static int add_mounts(fake_engine *fe, fe_container *c, json_object *hc) {
  json_object *tmpfs = NULL, *mounts = NULL, *binds = NULL;
  int rc = 0;
  if (json_object_object_get_ex(hc, "Tmpfs", &tmpfs)) {
    json_object_object_foreach(tmpfs, target, opts) {
      if (rc == 0) rc = add_tmpfs(c, target, json_object_get_string(opts));
    }
  }
  json_object_object_get_ex(hc, "Mounts", &mounts);
  for (size_t i = 0; rc == 0 && i < fe_len(mounts); i++) {
    json_object *m = json_object_array_get_idx(mounts, i), *t = NULL, *src = NULL, *dst = NULL;
    json_object_object_get_ex(m, "Type", &t);
    json_object_object_get_ex(m, "Source", &src);
    json_object_object_get_ex(m, "Target", &dst);
    if (!t || !dst) continue;
    char host[FE_PATH_MAX];
    const char *type = json_object_get_string(t);
    if (strcmp(type, "volume") == 0 && src)
      snprintf(host, sizeof host, "%s/volumes/%s", fe->dir, json_object_get_string(src));
    else if (strcmp(type, "bind") == 0 && src)
      snprintf(host, sizeof host, "%s", json_object_get_string(src));
    else if (strcmp(type, "tmpfs") == 0)
      snprintf(host, sizeof host, "%s/tmpfs%s", c->root, json_object_get_string(dst));
    else if (strcmp(type, "volume") == 0) /* anonymous: the container's own, gone with it */
      snprintf(host, sizeof host, "%s/anon%s", c->root, json_object_get_string(dst));
    else continue;
    rc = add_mount(c, json_object_get_string(dst), host);
  }
  json_object_object_get_ex(hc, "Binds", &binds);
  for (size_t i = 0; rc == 0 && i < fe_len(binds); i++) {
    char spec[FE_PATH_MAX];
    snprintf(spec, sizeof spec, "%s", json_object_get_string(json_object_array_get_idx(binds, i)));
    char *colon = strchr(spec, ':');
    if (colon == NULL) continue;
    *colon = '\0';
    char *opts = strchr(colon + 1, ':');
    if (opts) *opts = '\0';
    rc = add_mount(c, colon + 1, spec);
  }
  return rc;
}

static int longer_target(const void *a, const void *b) {
  return (int)strlen(((const fe_mount *)b)->target) - (int)strlen(((const fe_mount *)a)->target);
}

int fe_fs_create(fake_engine *fe, fe_container *c) {
  snprintf(c->root, sizeof c->root, "%s/containers/%s", fe->dir, c->id);
  char rootfs[FE_PATH_MAX];
  snprintf(rootfs, sizeof rootfs, "%s/rootfs", c->root);
  if (mkdir_p(rootfs, 0755) != 0) return -1;
  json_object *hc = NULL;
  if (json_object_object_get_ex(c->config, "HostConfig", &hc) && add_mounts(fe, c, hc) != 0)
    return -1;
  qsort(c->mounts, c->n_mounts, sizeof c->mounts[0], longer_target);
  json_object *wd = NULL;
  if (json_object_object_get_ex(c->config, "WorkingDir", &wd)) {
    char host[FE_PATH_MAX];
    fe_fs_host_path(c, json_object_get_string(wd), host, sizeof host);
    if (mkdir_p(host, 0755) != 0) return -1;
  }
  return 0;
}

void fe_fs_remove(fe_container *c) {
  if (c->root[0]) tf_rm_rf(c->root);
}

/* The mount path stands at s (its whole length): which mount, or NULL. */
static const fe_mount *mount_at(const fe_container *c, const char *s) {
  for (size_t i = 0; i < c->n_mounts; i++) {
    size_t n = strlen(c->mounts[i].target);
    if (strncmp(s, c->mounts[i].target, n) == 0 &&
        (s[n] == '\0' || strchr("/ \t\n\"';)|&", s[n]) != NULL))
      return &c->mounts[i];
  }
  return NULL;
}

void fe_fs_host_path(const fe_container *c, const char *path, char *out, size_t len) {
  const fe_mount *m = mount_at(c, path);
  if (m) snprintf(out, len, "%s%s", m->host, path + strlen(m->target));
  else snprintf(out, len, "%s/rootfs%s", c->root, path[0] == '/' ? path : "/");
}

char *fe_fs_map(const fe_container *c, const char *s) {
  size_t cap = strlen(s) + 1, n = 0;
  char *out = xmalloc(cap);
  for (size_t i = 0; s[i]; i++) {
    int start = i == 0 || strchr(" \t\n=\"':;(|&", s[i - 1]) != NULL;
    const fe_mount *m = start && s[i] == '/' ? mount_at(c, s + i) : NULL;
    const char *add = m ? m->host : s + i;
    size_t alen = m ? strlen(m->host) : 1;
    if (n + alen + 1 > cap) {
      cap = (n + alen + 1) * 2;
      out = xrealloc(out, cap);
    }
    memcpy(out + n, add, alen);
    n += alen;
    if (m) i += strlen(m->target) - 1;
  }
  out[n] = '\0';
  return out;
}

/* ---- PUT: a tar extracted into a folder of the container ---- */

static int extract(const char *dir, const char *tar, size_t len, char *why, size_t wlen) {
  struct archive *in = archive_read_new(), *out = archive_write_disk_new();
  archive_read_support_format_tar(in);
  archive_write_disk_set_options(out, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
                                          ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                          ARCHIVE_EXTRACT_SECURE_NODOTDOT);
  int rc = archive_read_open_memory(in, tar, len) == ARCHIVE_OK ? 0 : -1;
  struct archive_entry *e = NULL;
  while (rc == 0) {
    int r = archive_read_next_header(in, &e);
    if (r == ARCHIVE_EOF) break;
    char path[FE_PATH_MAX];
    const char *name = archive_entry_pathname(e), *hard = archive_entry_hardlink(e);
    while (name && *name == '/') name++;
    snprintf(path, sizeof path, "%s/%s", dir, name ? name : "");
    archive_entry_copy_pathname(e, path);
    if (hard) {
      while (*hard == '/') hard++;
      snprintf(path, sizeof path, "%s/%s", dir, hard);
      archive_entry_copy_hardlink(e, path);
    }
    if (r != ARCHIVE_OK || archive_write_header(out, e) != ARCHIVE_OK) {
      rc = -1;
      break;
    }
    const void *buf;
    size_t n;
    la_int64_t off;
    while ((r = archive_read_data_block(in, &buf, &n, &off)) == ARCHIVE_OK)
      if (archive_write_data_block(out, buf, n, off) != ARCHIVE_OK) r = ARCHIVE_FATAL;
    if (r != ARCHIVE_EOF || archive_write_finish_entry(out) != ARCHIVE_OK) rc = -1;
  }
  if (rc)
    snprintf(why, wlen, "%s",
             archive_error_string(in)    ? archive_error_string(in)
             : archive_error_string(out) ? archive_error_string(out)
                                         : "bad archive");
  archive_read_free(in);
  archive_write_free(out);
  return rc;
}

/* The container path an archive request names, its host path and what is
 * there (lstat): 0, or -1 with r answered. */
static int archive_target(fake_engine *fe, const fe_request *req, const char *ref, char *path,
                          char *host, struct stat *st, fe_reply *r) {
  fe_container *c = fe_container_find(fe, ref);
  if (c == NULL) {
    fe_reply_error(r, 404, "No such container: %s", ref);
  } else if (fe_query(req, "path", path, FE_PATH_MAX) != 0) {
    fe_reply_error(r, 400, "no path");
  } else {
    fe_fs_host_path(c, path, host, FE_PATH_MAX);
    if (lstat(host, st) == 0) return 0;
    fe_reply_error(r, 404, "Could not find the file %s in container %s", path, c->name);
  }
  return -1;
}

void fe_archive_put(fake_engine *fe, const fe_request *req, const char *ref, fe_reply *r) {
  char path[FE_PATH_MAX], host[FE_PATH_MAX], why[512] = "";
  struct stat st;
  if (archive_target(fe, req, ref, path, host, &st, r) != 0) return;
  if (!S_ISDIR(st.st_mode)) return fe_reply_error(r, 400, "extraction point is not a directory");
  if (extract(host, req->body ? req->body : "", req->body_len, why, sizeof why) != 0)
    return fe_reply_error(r, 500, "extracting into %s: %s", path, why);
  r->status = 200;
}

/* ---- GET and HEAD: a folder or file of the container as a tar ---- */

typedef struct tar_buf {
  char *data;
  size_t len, cap;
} tar_buf;

static la_ssize_t tar_write(struct archive *a, void *ud, const void *p, size_t n) {
  (void)a;
  tar_buf *t = ud;
  if (t->len + n > t->cap) {
    size_t cap = (t->len + n) * 2;
    char *bigger = realloc(t->data, cap);
    if (bigger == NULL) return -1;
    t->data = bigger;
    t->cap = cap;
  }
  memcpy(t->data + t->len, p, n);
  t->len += n;
  return (la_ssize_t)n;
}

static int add_entry(struct archive *a, const char *host, const char *name) {
  struct stat st;
  if (lstat(host, &st) != 0) return -1;
  struct archive_entry *e = archive_entry_new();
  archive_entry_copy_stat(e, &st);
  archive_entry_copy_pathname(e, name);
  char target[FE_PATH_MAX];
  ssize_t tl = S_ISLNK(st.st_mode) ? readlink(host, target, sizeof target - 1) : -1;
  if (tl >= 0) {
    target[tl] = '\0';
    archive_entry_copy_symlink(e, target);
  }
  int rc = archive_write_header(a, e) == ARCHIVE_OK ? 0 : -1;
  archive_entry_free(e);
  if (rc == 0 && S_ISREG(st.st_mode)) {
    size_t len = 0;
    char *data = tf_read(host, &len);
    if (data == NULL || archive_write_data(a, data, len) != (la_ssize_t)len) rc = -1;
    free(data);
  }
  if (rc == 0 && S_ISDIR(st.st_mode)) {
    DIR *d = opendir(host);
    struct dirent *de;
    while (rc == 0 && d && (de = readdir(d)) != NULL) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
      char h[FE_PATH_MAX], n[FE_PATH_MAX];
      snprintf(h, sizeof h, "%s/%s", host, de->d_name);
      snprintf(n, sizeof n, "%s/%s", name, de->d_name);
      rc = add_entry(a, h, n);
    }
    if (d) closedir(d);
  }
  return rc;
}

/* X-Docker-Container-Path-Stat: base64 of the path's stat as JSON, its mode
 * in Go's os.FileMode bits. */
static void stat_header(const char *name, const struct stat *st, fe_reply *r) {
  unsigned go = (unsigned)st->st_mode & 0777;
  if (S_ISDIR(st->st_mode)) go |= 1u << 31;
  if (S_ISLNK(st->st_mode)) go |= 1u << 27;
  if (st->st_mode & S_ISUID) go |= 1u << 23;
  if (st->st_mode & S_ISGID) go |= 1u << 22;
  if (st->st_mode & S_ISVTX) go |= 1u << 20;
  /* The mtime as Go writes it: RFC 3339, nanoseconds, trailing zeros cut. */
  char when[40], frac[16] = "";
  struct tm tm;
  time_t sec = st->st_mtim.tv_sec;
  gmtime_r(&sec, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  if (st->st_mtim.tv_nsec) {
    snprintf(frac, sizeof frac, ".%09ld", (long)st->st_mtim.tv_nsec);
    for (size_t k = strlen(frac); k > 1 && frac[k - 1] == '0'; k--) frac[k - 1] = '\0';
  }
  char json[1024];
  int n = snprintf(json, sizeof json,
                   "{\"name\":\"%s\",\"size\":%lld,\"mode\":%u,\"mtime\":\"%s%sZ\","
                   "\"linkTarget\":\"\"}",
                   name, (long long)st->st_size, go, when, frac);
  unsigned char b64[1500];
  EVP_EncodeBlock(b64, (const unsigned char *)json, n);
  snprintf(r->headers, sizeof r->headers, "X-Docker-Container-Path-Stat: %s\r\n", (char *)b64);
}

void fe_archive_get(fake_engine *fe, const fe_request *req, const char *ref, int head,
                    fe_reply *r) {
  char path[FE_PATH_MAX], host[FE_PATH_MAX];
  struct stat st;
  if (archive_target(fe, req, ref, path, host, &st, r) != 0) return;
  size_t plen = strlen(path);
  while (plen > 1 && path[plen - 1] == '/') path[--plen] = '\0';
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  stat_header(base, &st, r);
  r->status = 200;
  if (head) return;
  tar_buf t = {0};
  struct archive *a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_set_bytes_in_last_block(a, 1);
  int rc = archive_write_open(a, &t, NULL, tar_write, NULL) == ARCHIVE_OK ? 0 : -1;
  if (rc == 0) rc = add_entry(a, host, base[0] ? base : ".");
  if (archive_write_close(a) != ARCHIVE_OK) rc = -1;
  archive_write_free(a);
  if (rc != 0) {
    free(t.data);
    r->headers[0] = '\0';
    return fe_reply_error(r, 500, "packing %s failed", path);
  }
  r->type = "application/x-tar";
  r->body = t.data;
  r->len = t.len;
}
