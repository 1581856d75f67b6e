/* The build context as a pull stream: the engine client asks for bytes, and
 * only then does libarchive walk the next entry or read the next chunk of a
 * file. libarchive pushes its output through a write callback, so each step
 * lands in a small capped buffer that the reader drains before the next
 * step: memory stays at one chunk plus one tar block, whatever the size of
 * the root file system. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <archive.h>
#include <archive_entry.h>

#include <sandman/image.h>
#include <sandman/log.h>

#include "common/buf.h"
#include "common/cleanup.h"

#define CTX_MAX_DIRS 8
#define CTX_CHUNK (64 * 1024)
/* One step writes at most a chunk, a header (pax records included) and the
 * block padding; anything beyond this cap is a bug, not a big file. */
#define CTX_OUT_MAX (8 * 1024 * 1024)
#define CTX_PATH_MAX 4096

enum ctx_state { CTX_NEXT, CTX_DATA, CTX_DONE, CTX_FAILED };

struct ctx_dir {
  char *path;   /* without trailing slash (except "/") */
  char *prefix; /* "" or "rootfs" */
};

struct sm_image_context {
  struct archive *writer;
  struct archive *disk; /* the directory being walked, or NULL */
  struct archive_entry_linkresolver *links;
  struct ctx_dir dirs[CTX_MAX_DIRS];
  size_t n_dirs;
  size_t dir_index;
  enum ctx_state state;
  common_buf out;
  size_t out_pos;
  char *chunk;
  uint64_t entries;
  uint64_t bytes;
  sm_error err;
};

static la_ssize_t on_write(struct archive *a, void *ud, const void *data, size_t len) {
  sm_image_context *ctx = ud;
  if (common_buf_append(&ctx->out, data, len) != 0) {
    archive_set_error(a, ENOMEM, "build context buffer over %d bytes", CTX_OUT_MAX);
    return -1;
  }
  return (la_ssize_t)len;
}

int sm_image_context_new(sm_image_context **out, sm_error *err) {
  *out = NULL;
  sm_image_context *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL) return sm_error_set(err, SM_ENOMEM, "allocating a build context");
  common_buf_init(&ctx->out, CTX_OUT_MAX);
  ctx->chunk = malloc(CTX_CHUNK);
  ctx->writer = archive_write_new();
  ctx->links = archive_entry_linkresolver_new();
  if (ctx->chunk == NULL || ctx->writer == NULL || ctx->links == NULL) {
    sm_image_context_free(ctx);
    return sm_error_set(err, SM_ENOMEM, "allocating a build context");
  }
  /* pax_restricted: plain ustar headers unless a name or number needs pax. */
  if (archive_write_set_format_pax_restricted(ctx->writer) != ARCHIVE_OK ||
      archive_write_open2(ctx->writer, ctx, NULL, on_write, NULL, NULL) != ARCHIVE_OK) {
    sm_error_set(err, SM_EIO, "starting the build context tar stream: %s",
                 archive_error_string(ctx->writer));
    sm_image_context_free(ctx);
    return SM_EIO;
  }
  archive_entry_linkresolver_set_strategy(ctx->links, archive_format(ctx->writer));
  *out = ctx;
  return 0;
}

int sm_image_context_add_dir(sm_image_context *ctx, const char *dir, const char *prefix,
                             sm_error *err) {
  if (ctx->n_dirs == CTX_MAX_DIRS)
    return sm_error_set(err, SM_EINVAL, "a build context takes at most %d directories",
                        CTX_MAX_DIRS);
  if (ctx->state != CTX_NEXT || ctx->dir_index != 0 || ctx->disk != NULL)
    return sm_error_set(err, SM_EINVAL, "the build context stream has already started");
  if (dir == NULL || dir[0] == '\0')
    return sm_error_set(err, SM_EINVAL, "empty build context directory");
  if (prefix == NULL) prefix = "";
  if (prefix[0] == '/' || strstr(prefix, "..") != NULL)
    return sm_error_set(err, SM_EINVAL, "build context prefix '%s' must be relative", prefix);
  struct stat st;
  if (stat(dir, &st) != 0)
    return sm_error_set_errno(err, SM_EINVAL, errno, "build context directory %s", dir);
  if (!S_ISDIR(st.st_mode))
    return sm_error_set(err, SM_EINVAL, "build context %s is not a directory", dir);

  struct ctx_dir *d = &ctx->dirs[ctx->n_dirs];
  d->path = strdup(dir);
  d->prefix = strdup(prefix);
  if (d->path == NULL || d->prefix == NULL) {
    free(d->path);
    free(d->prefix);
    d->path = d->prefix = NULL;
    return sm_error_set(err, SM_ENOMEM, "adding %s to the build context", dir);
  }
  size_t n = strlen(d->path);
  while (n > 1 && d->path[n - 1] == '/') d->path[--n] = '\0';
  n = strlen(d->prefix);
  while (n > 0 && d->prefix[n - 1] == '/') d->prefix[--n] = '\0';
  ctx->n_dirs++;
  return 0;
}

/* Records the error that ends the stream; later reads return its code. */
static int fail(sm_image_context *ctx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(sm_image_context *ctx, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sm_error_setv(&ctx->err, code, fmt, ap);
  va_end(ap);
  ctx->state = CTX_FAILED;
  return code;
}

static int open_dir(sm_image_context *ctx) {
  struct ctx_dir *d = &ctx->dirs[ctx->dir_index];
  ctx->disk = archive_read_disk_new();
  if (ctx->disk == NULL) return fail(ctx, SM_ENOMEM, "reading %s: out of memory", d->path);
  /* Physical walk, no xattrs/ACLs/flags (the engine's builder ignores them
   * and they differ between hosts), numbers rather than host user names. */
  archive_read_disk_set_symlink_physical(ctx->disk);
  archive_read_disk_set_behavior(ctx->disk, ARCHIVE_READDISK_NO_XATTR |
                                                ARCHIVE_READDISK_NO_ACL |
                                                ARCHIVE_READDISK_NO_FFLAGS |
                                                ARCHIVE_READDISK_NO_SPARSE |
                                                ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS);
  if (archive_read_disk_open(ctx->disk, d->path) != ARCHIVE_OK)
    return fail(ctx, SM_EIO, "reading build context %s: %s", d->path,
                     archive_error_string(ctx->disk));
  return 0;
}

static void close_dir(sm_image_context *ctx) {
  if (ctx->disk) {
    archive_read_close(ctx->disk);
    archive_read_free(ctx->disk);
    ctx->disk = NULL;
  }
}

/* The name inside the tar: the path below the walked directory, under the
 * directory's prefix. Returns 0 and "" for the walked directory itself. */
/* True when path is inside d and its name in the tar fits in out. */
static bool tar_name_fits(const struct ctx_dir *d, const char *path, char *out, size_t len) {
  size_t n = strlen(d->path);
  const char *rel;
  if (strcmp(d->path, "/") == 0) rel = path + 1;
  else if (strncmp(path, d->path, n) == 0 && (path[n] == '\0' || path[n] == '/'))
    rel = path[n] == '/' ? path + n + 1 : path + n;
  else
    return false;
  int w;
  if (d->prefix[0] == '\0') w = snprintf(out, len, "%s", rel);
  else if (rel[0] == '\0') w = snprintf(out, len, "%s", d->prefix);
  else w = snprintf(out, len, "%s/%s", d->prefix, rel);
  return w >= 0 && (size_t)w < len;
}

/* Writes the next entry's header (or moves to the next directory, or ends
 * the archive). */
static int step_next(sm_image_context *ctx) {
  for (;;) {
    if (ctx->disk == NULL) {
      if (ctx->dir_index == ctx->n_dirs) {
        if (archive_write_close(ctx->writer) != ARCHIVE_OK)
          return fail(ctx, SM_EIO, "finishing the build context: %s",
                           archive_error_string(ctx->writer));
        ctx->state = CTX_DONE;
        return 0;
      }
      int rc = open_dir(ctx);
      if (rc != 0) return rc;
    }
    struct ctx_dir *d = &ctx->dirs[ctx->dir_index];
    struct archive_entry *entry = NULL;
    int r = archive_read_next_header(ctx->disk, &entry);
    if (r == ARCHIVE_EOF) {
      close_dir(ctx);
      ctx->dir_index++;
      continue;
    }
    if (r == ARCHIVE_WARN) {
      sm_log(SM_LOG_WARN, "build context %s: %s", d->path, archive_error_string(ctx->disk));
    } else if (r != ARCHIVE_OK) {
      return fail(ctx, SM_EIO, "reading build context %s: %s", d->path,
                       archive_error_string(ctx->disk));
    }
    if (archive_read_disk_can_descend(ctx->disk)) archive_read_disk_descend(ctx->disk);

    char name[CTX_PATH_MAX];
    const char *path = archive_entry_sourcepath(entry);
    if (path == NULL) path = archive_entry_pathname(entry);
    if (path == NULL || !tar_name_fits(d, path, name, sizeof name))
      return fail(ctx, SM_EIO, "build context entry %s is outside %s",
                       path ? path : "(no name)", d->path);
    if (name[0] == '\0') continue; /* the top of an unprefixed directory */
    if (archive_entry_filetype(entry) == AE_IFSOCK) {
      sm_log(SM_LOG_DEBUG, "build context: socket %s skipped", name);
      continue;
    }

    /* The disk reader keeps using its own entry to read the data; the tar
     * gets a copy renamed into the context. */
    struct archive_entry *copy = archive_entry_clone(entry);
    if (copy == NULL) return fail(ctx, SM_ENOMEM, "build context %s: out of memory", name);
    archive_entry_set_pathname(copy, name);
    archive_entry_set_uname(copy, NULL);
    archive_entry_set_gname(copy, NULL);
    archive_entry_copy_sourcepath(copy, NULL);
    struct archive_entry *spare = NULL;
    /* A second name of a hard-linked file becomes a link entry (size 0). */
    archive_entry_linkify(ctx->links, &copy, &spare);
    int is_data = copy != NULL && archive_entry_filetype(copy) == AE_IFREG &&
                  archive_entry_hardlink(copy) == NULL && archive_entry_size(copy) > 0;
    int w = copy ? archive_write_header(ctx->writer, copy) : ARCHIVE_OK;
    if (spare) archive_entry_free(spare);
    if (copy) archive_entry_free(copy);
    if (w == ARCHIVE_WARN) {
      sm_log(SM_LOG_WARN, "build context %s: %s", name, archive_error_string(ctx->writer));
    } else if (w != ARCHIVE_OK) {
      return fail(ctx, SM_EIO, "adding %s to the build context: %s", name,
                       archive_error_string(ctx->writer));
    }
    ctx->entries++;
    ctx->state = is_data ? CTX_DATA : CTX_NEXT;
    return 0;
  }
}

/* Copies the next chunk of the current file. */
static int step_data(sm_image_context *ctx) {
  la_ssize_t n = archive_read_data(ctx->disk, ctx->chunk, CTX_CHUNK);
  if (n < 0)
    return fail(ctx, SM_EIO, "reading %s for the build context: %s",
                     ctx->dirs[ctx->dir_index].path, archive_error_string(ctx->disk));
  if (n == 0) {
    /* A file that shrank while read is padded by libarchive to its size. */
    if (archive_write_finish_entry(ctx->writer) != ARCHIVE_OK)
      return fail(ctx, SM_EIO, "writing the build context: %s",
                       archive_error_string(ctx->writer));
    ctx->state = CTX_NEXT;
    return 0;
  }
  la_ssize_t w = archive_write_data(ctx->writer, ctx->chunk, (size_t)n);
  if (w < 0)
    return fail(ctx, SM_EIO, "writing the build context: %s",
                archive_error_string(ctx->writer));
  ctx->bytes += (uint64_t)n;
  return 0;
}

ssize_t sm_image_context_read(void *ud, char *buf, size_t len) {
  sm_image_context *ctx = ud;
  while (ctx->out_pos == ctx->out.len) {
    common_buf_reset(&ctx->out);
    ctx->out_pos = 0;
    int rc = 0;
    switch (ctx->state) {
      case CTX_FAILED: return ctx->err.code ? ctx->err.code : SM_EIO;
      case CTX_DONE: return 0;
      case CTX_NEXT: rc = step_next(ctx); break;
      case CTX_DATA: rc = step_data(ctx); break;
    }
    if (rc < 0) return rc;
  }
  size_t avail = ctx->out.len - ctx->out_pos;
  size_t n = avail < len ? avail : len;
  memcpy(buf, ctx->out.data + ctx->out_pos, n);
  ctx->out_pos += n;
  return (ssize_t)n;
}

int sm_image_context_error(const sm_image_context *ctx, sm_error *err) {
  if (ctx == NULL || ctx->state != CTX_FAILED) return 0;
  if (err) *err = ctx->err;
  return ctx->err.code;
}

void sm_image_context_stats(const sm_image_context *ctx, uint64_t *out_entries,
                            uint64_t *out_bytes) {
  if (out_entries) *out_entries = ctx->entries;
  if (out_bytes) *out_bytes = ctx->bytes;
}

void sm_image_context_free(sm_image_context *ctx) {
  if (ctx == NULL) return;
  close_dir(ctx);
  if (ctx->writer) archive_write_free(ctx->writer); /* closes if still open */
  if (ctx->links) archive_entry_linkresolver_free(ctx->links);
  for (size_t i = 0; i < ctx->n_dirs; i++) {
    free(ctx->dirs[i].path);
    free(ctx->dirs[i].prefix);
  }
  free(ctx->chunk);
  common_buf_dispose(&ctx->out);
  free(ctx);
}
