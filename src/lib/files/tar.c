/* Tar upload and download of the files API. The helper in the sandbox
 * speaks records (src/shared/agent/fs.h), not tar, so that it stays small and
 * never has to trust a tar parser inside the sandbox: an upload's tar is
 * read here (libarchive), checked entry by entry and sent as records; a
 * download's records are written here as a pax tar. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include <sandman/files.h>

#include "agent/fs.h"
#include "files/files_internal.h"

#define ROOT "/workspace"
#define IN_CHUNK (64u << 10)
#define DEFAULT_MAX_ENTRIES 100000

/* ---- upload: tar -> records ---- */

typedef struct uploader {
  fs_call *call;
  struct archive *a;
  sm_read_fn read;
  void *ud;
  char *in;              /* what libarchive reads from */
  int reader_rc;
  int64_t max_bytes, max_entries;
  int64_t bytes, entries, files;
  /* what to hand out next */
  char head[SM_FS_LINE_MAX + SM_FS_PATH_MAX + 8];
  size_t head_off, head_len;
  int64_t data_left;     /* content of the current file still to copy */
  int started, done;
} uploader;

static la_ssize_t up_read_cb(struct archive *a, void *ud, const void **buf) {
  uploader *u = ud;
  ssize_t n = u->read(u->ud, u->in, IN_CHUNK);
  if (n < 0) {
    u->reader_rc = (int)n;
    archive_set_error(a, EIO, "the upload's reader failed");
    return -1;
  }
  *buf = u->in;
  return n;
}

static int up_fail(uploader *u, int code, const char *fmt, const char *arg) {
  u->call->in_rc = code;
  sm_error_set(&u->call->in_err, code, fmt, arg);
  return code;
}

/* Reads the next tar entry and prepares its record. 1 at the tar's end. */
static int up_next(uploader *u) {
  struct archive_entry *e = NULL;
  for (;;) {
    int r = archive_read_next_header(u->a, &e);
    if (r == ARCHIVE_EOF) return 1;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      if (u->reader_rc) return up_fail(u, u->reader_rc, "reading the upload failed%s", "");
      return up_fail(u, SM_EINVAL, "the upload is not a valid tar stream: %s",
                     archive_error_string(u->a) ? archive_error_string(u->a) : "unknown error");
    }
    const char *name = archive_entry_pathname(e);
    if (name == NULL) return up_fail(u, SM_EINVAL, "a tar entry has no name%s", "");
    if (++u->entries > u->max_entries)
      return up_fail(u, SM_ETOOBIG, "the upload has more entries than the limit%s", "");
    mode_t type = archive_entry_filetype(e);
    if (archive_entry_hardlink(e) != NULL || (type != AE_IFREG && type != AE_IFDIR))
      return up_fail(u, SM_EUNSAFE,
                     "tar entry '%s' is not a file or a folder (links, devices and fifos are "
                     "refused)",
                     name);
    if (name[0] == '/')
      return up_fail(u, SM_EUNSAFE, "tar entry '%s' has an absolute name", name);
    char path[SM_FS_PATH_MAX + 1];
    sm_error perr = SM_ERROR_INIT;
    if (sm_files_path(name, path, sizeof path, &perr) != 0)
      return up_fail(u, perr.code, "tar entry '%s' has a name that is refused", name);
    if (strcmp(path, ".") == 0) continue; /* the folder itself ("./") */
    int64_t size = type == AE_IFREG ? archive_entry_size(e) : 0;
    if (size < 0) return up_fail(u, SM_EINVAL, "tar entry '%s' has no size", name);
    if (size > u->max_bytes - u->bytes)
      return up_fail(u, SM_ETOOBIG, "the upload's content is larger than the limit (at '%s')", name);
    u->bytes += size;
    unsigned mode = (unsigned)(archive_entry_perm(e) & 0777);
    if (type == AE_IFDIR) mode |= 0700; /* a folder the sandbox's user cannot enter is useless */
    int n = snprintf(u->head, sizeof u->head, "%c %o %" PRId64 " 0 0 %zu 0\n",
                     type == AE_IFREG ? 'f' : 'd', mode, size, strlen(path));
    memcpy(u->head + n, path, strlen(path));
    u->head_off = 0;
    u->head_len = (size_t)n + strlen(path);
    u->data_left = size;
    if (type == AE_IFREG) u->files++;
    return 0;
  }
}

/* A failure (recorded in the call) ends the stream without its "end": the
 * helper then drops the file it was writing instead of being killed
 * half-way. */
static ssize_t up_produce(void *ud, char *out, size_t len) {
  uploader *u = ud;
  if (u->call->in_rc) return 0;
  for (;;) {
    if (u->head_off < u->head_len) {
      size_t n = u->head_len - u->head_off < len ? u->head_len - u->head_off : len;
      memcpy(out, u->head + u->head_off, n);
      u->head_off += n;
      return (ssize_t)n;
    }
    if (u->data_left > 0) {
      size_t want = (int64_t)len < u->data_left ? len : (size_t)u->data_left;
      la_ssize_t n = archive_read_data(u->a, out, want);
      if (n < 0) {
        up_fail(u, u->reader_rc ? u->reader_rc : SM_EINVAL, "reading the upload failed: %s",
                archive_error_string(u->a) ? archive_error_string(u->a) : "");
        return 0;
      }
      if (n == 0) {
        up_fail(u, SM_EINVAL, "the upload ended inside a file%s", "");
        return 0;
      }
      u->data_left -= n;
      return (ssize_t)n;
    }
    if (u->done) return 0;
    int r = up_next(u);
    if (r < 0) return 0;
    if (r == 1) {
      memcpy(u->head, "end\n", 4);
      u->head_off = 0;
      u->head_len = 4;
      u->done = 1;
    }
  }
}

int sm_files_upload_tar(sm_runner *runner, const sm_run_request *base, const char *path,
                        sm_read_fn read, void *ud, int64_t max_bytes, int64_t max_entries,
                        sm_files_tar_stats *stats, sm_run_result *call, sm_error *err) {
  char p[SM_FILES_PATH_MAX + 1];
  int rc = sm_files_path(path, p, sizeof p, err);
  if (rc) return rc;
  if (read == NULL) return sm_error_set(err, SM_EINVAL, "no tar stream to upload");
  fs_call c;
  files_call_init(&c, FS_WIRE_STATUS, NULL, 0);
  uploader u = {.call = &c, .read = read, .ud = ud,
                .max_bytes = max_bytes > 0 ? max_bytes : SM_FILES_DEFAULT_MAX_BYTES,
                .max_entries = max_entries > 0 ? max_entries : DEFAULT_MAX_ENTRIES};
  u.in = malloc(IN_CHUNK);
  u.a = archive_read_new();
  if (u.in == NULL || u.a == NULL) {
    rc = sm_error_set(err, SM_ENOMEM, NULL);
    goto out;
  }
  archive_read_support_format_tar(u.a);
  archive_read_support_filter_gzip(u.a);
  archive_read_support_filter_none(u.a);
  if (archive_read_open(u.a, &u, NULL, up_read_cb, NULL) != ARCHIVE_OK) {
    rc = sm_error_set(err, u.reader_rc ? u.reader_rc : SM_EINVAL,
                      "the upload is not a valid tar stream: %s",
                      archive_error_string(u.a) ? archive_error_string(u.a) : "unknown error");
    goto out;
  }
  /* Refuse at once what is refused at the first entry, before a sandbox
   * call is made for nothing. */
  rc = up_next(&u);
  if (rc < 0) {
    if (err) *err = c.in_err;
    goto out;
  }
  if (rc == 1) {
    memcpy(u.head, "end\n", 4);
    u.head_off = 0;
    u.head_len = 4;
    u.done = 1;
  }
  {
    const char *argv[] = {"fs", "put", ROOT, p};
    rc = files_call_run(&c, runner, base, argv, 4, up_produce, &u, call, err);
  }
  if (rc == 0 && stats) {
    stats->files = u.files;
    stats->bytes = u.bytes;
  }
out:
  if (u.a) archive_read_free(u.a);
  free(u.in);
  files_call_dispose(&c);
  return rc;
}

/* ---- download: records -> tar ---- */

typedef struct downloader {
  struct archive *a;
  struct archive_entry *entry;
  sm_write_fn write;
  void *ud;
  int write_rc;
  int64_t files, bytes;
  int64_t left; /* content of the current file still to come */
} downloader;

static la_ssize_t down_write_cb(struct archive *a, void *ud, const void *buf, size_t len) {
  downloader *d = ud;
  int rc = d->write(d->ud, buf, len);
  if (rc) {
    d->write_rc = rc;
    archive_set_error(a, EIO, "the download's writer stopped");
    return -1;
  }
  return (la_ssize_t)len;
}

static int down_record(void *ud, const sm_file_entry *e) {
  downloader *d = ud;
  if (e->type != 'f' && e->type != 'd' && e->type != 'l') return 0;
  struct archive_entry *ae = d->entry;
  archive_entry_clear(ae);
  archive_entry_set_pathname(ae, e->path);
  archive_entry_set_perm(ae, e->mode & 07777);
  archive_entry_set_mtime(ae, (time_t)e->mtime_s, e->mtime_ns);
  if (e->type == 'f') {
    archive_entry_set_filetype(ae, AE_IFREG);
    archive_entry_set_size(ae, e->size);
    d->files++;
    d->bytes += e->size;
  } else if (e->type == 'd') {
    archive_entry_set_filetype(ae, AE_IFDIR);
  } else {
    archive_entry_set_filetype(ae, AE_IFLNK);
    archive_entry_set_symlink(ae, e->link ? e->link : "");
  }
  if (archive_write_header(d->a, ae) != ARCHIVE_OK) return d->write_rc ? d->write_rc : SM_EIO;
  return 0;
}

static int down_content(void *ud, const char *data, size_t len) {
  downloader *d = ud;
  if (archive_write_data(d->a, data, len) < 0) return d->write_rc ? d->write_rc : SM_EIO;
  return 0;
}

int sm_files_download_tar(sm_runner *runner, const sm_run_request *base,
                          const char *const *paths, size_t n_paths, int64_t max_bytes,
                          sm_write_fn write, void *ud, sm_files_tar_stats *stats,
                          sm_run_result *call, sm_error *err) {
  if (n_paths == 0 || paths == NULL) return sm_error_set(err, SM_EINVAL, "no path to download");
  if (n_paths > 1024) return sm_error_set(err, SM_EINVAL, "at most 1024 paths per download");
  if (write == NULL) return sm_error_set(err, SM_EINVAL, "nowhere to write the download");
  size_t argc = 4 + n_paths;
  const char **argv = calloc(argc, sizeof *argv);
  char (*canon)[SM_FS_PATH_MAX + 1] = calloc(n_paths, sizeof *canon);
  downloader d = {.write = write, .ud = ud};
  fs_call c;
  fs_wire_handlers h = {.record = down_record, .content = down_content, .ud = &d};
  files_call_init(&c, FS_WIRE_CONTENT, &h, INT64_MAX);
  int rc = 0;
  if (argv == NULL || canon == NULL) {
    rc = sm_error_set(err, SM_ENOMEM, NULL);
    goto out;
  }
  char max[32];
  snprintf(max, sizeof max, "%" PRId64, max_bytes > 0 ? max_bytes : SM_FILES_DEFAULT_MAX_BYTES);
  argv[0] = "fs";
  argv[1] = "get";
  argv[2] = ROOT;
  argv[3] = max;
  for (size_t i = 0; i < n_paths; i++) {
    rc = sm_files_path(paths[i], canon[i], sizeof canon[i], err);
    if (rc) goto out;
    argv[4 + i] = canon[i];
  }
  d.a = archive_write_new();
  d.entry = archive_entry_new();
  if (d.a == NULL || d.entry == NULL) {
    rc = sm_error_set(err, SM_ENOMEM, NULL);
    goto out;
  }
  if (archive_write_set_format_pax_restricted(d.a) != ARCHIVE_OK ||
      archive_write_set_bytes_in_last_block(d.a, 1) != ARCHIVE_OK ||
      archive_write_open(d.a, &d, NULL, down_write_cb, NULL) != ARCHIVE_OK) {
    rc = sm_error_set(err, SM_EIO, "starting the tar stream: %s",
                      archive_error_string(d.a) ? archive_error_string(d.a) : "");
    goto out;
  }
  rc = files_call_run(&c, runner, base, argv, argc, NULL, NULL, call, err);
  if (rc == 0 && archive_write_close(d.a) != ARCHIVE_OK)
    rc = sm_error_set(err, d.write_rc ? d.write_rc : SM_EIO, "ending the tar stream: %s",
                      archive_error_string(d.a) ? archive_error_string(d.a) : "");
  if (rc == 0 && stats) {
    stats->files = d.files;
    stats->bytes = d.bytes;
  }
out:
  if (d.a) archive_write_free(d.a);
  if (d.entry) archive_entry_free(d.entry);
  files_call_dispose(&c);
  free(argv);
  free(canon);
  return rc;
}
