/* The packer: a tar stream (libarchive, pax restricted) of chosen workspace
 * entries, pulled through an sm_read_fn. Neither a temporary tar file nor
 * the whole archive ever exists. File content is hashed as it is read, which
 * fills the manifest for free.
 *
 * The first read starts a producer thread that walks, reads, hashes and packs
 * into a bounded ring of chunks (PIPE_SLOTS x PIPE_CHUNK) while the reader
 * (the upload) drains it, so our work overlaps the engine's unpacking. The
 * engine's extraction is what the upload waits for, and it shares the CPUs
 * with us, so the producer copies as little as it can: libarchive writes
 * unblocked, straight into the ring slot being filled, and file data is
 * read into that slot in place (the write callback sees its own bytes and
 * only counts them). A producer error reaches the reader as its SM_E* code
 * (the message stays in p->err); a reader that stops (abort, upload
 * failure, free) makes the producer stop, and it is joined before anything
 * it wrote is looked at. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <locale.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include <sandman/log.h>

#include "common/buf.h"
#include "common/thread.h"
#include "workspace/ws.h"

/* The ring between producer and reader: 8 x 256 KiB = 2 MiB at most. */
#define PIPE_CHUNK ((size_t)256 << 10)
#define PIPE_SLOTS 8
/* A file read that would get less room than this in the slot being filled
 * (and is not the file's end) starts the next slot instead: no tiny reads. */
#define READ_MIN ((size_t)16 << 10)

typedef struct pipe_slot {
  size_t len;
  char *data;
} pipe_slot;

/* Shared by the producer and the reader; every field under mu. */
typedef struct pack_pipe {
  pthread_mutex_t mu;
  pthread_cond_t cv;        /* a slot was filled or freed, or a side stopped */
  pthread_t thread;
  pipe_slot slot[PIPE_SLOTS];
  size_t head, count;       /* filled slots: head .. head+count-1 */
  size_t head_pos;          /* bytes of the head slot already read */
  int done;                 /* producer finished: rc 0 (end) or < 0 */
  int rc;
  int stop;                 /* reader asks the producer to stop */
  int running, joined;
  char request_id[64];
} pack_pipe;

struct ws_packer {
  int root_fd;
  ws_entry **items;
  size_t n, i;
  char *prefix;
  size_t cut;
  int uid, gid;
  struct archive *a;
  struct archive_entry *ae;
  ws_dircache dirs;
  /* The file being copied. */
  int fd;
  ws_entry *cur;
  int64_t remaining;
  int64_t cur_read;
  EVP_MD_CTX *md;
  int changed_under_us;
  int opened, finished, failed;
  sm_error err;
  int64_t produced, abort_after;
  int64_t bytes, entries;
  pack_pipe *pipe;        /* NULL until the first read (made at once when deferred) */
  pipe_slot *fill;        /* the producer's slot being filled, not yet published */
  /* Deferred: "./" first, then the items once supplied (under pipe->mu):
   * 0 waiting, 1 supplied, -1 abandoned with abandon_code. */
  int deferred, supplied, abandon_code;
  int halted;             /* the producer saw the reader's stop */
  int noatime;            /* O_NOATIME still worth trying */
  int read_failed;        /* the reader's side: stopped with p->err */
};

/* The producer's slot to write into, waiting for the reader to free one;
 * NULL once the reader asked the producer to stop. */
static pipe_slot *fill_slot(ws_packer *p) {
  if (p->fill) return p->fill;
  pack_pipe *q = p->pipe;
  pthread_mutex_lock(&q->mu);
  while (q->count == PIPE_SLOTS && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
  int stop = q->stop;
  size_t idx = (q->head + q->count) % PIPE_SLOTS;
  pthread_mutex_unlock(&q->mu);
  if (stop) {
    p->halted = 1;
    return NULL;
  }
  /* A free slot is the producer's alone until it is published. */
  p->fill = &q->slot[idx];
  p->fill->len = 0;
  return p->fill;
}

/* Hands the slot being filled to the reader; done: nothing more follows
 * (rc 0 the end, or the error). */
static void publish(ws_packer *p, int done, int rc) {
  pack_pipe *q = p->pipe;
  pthread_mutex_lock(&q->mu);
  if (p->fill && p->fill->len > 0) q->count++;
  p->fill = NULL;
  if (done) {
    q->done = 1;
    q->rc = rc;
  }
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

/* libarchive's output (unblocked: headers, padding, and file data that was
 * read into the slot already, which is only counted). Runs in the producer. */
static la_ssize_t pack_write_cb(struct archive *a, void *ud, const void *buf, size_t len) {
  ws_packer *p = ud;
  /* No ring (never read), or its producer is gone: libarchive_write_free
   * closing an unfinished archive writes its end here, for nobody. */
  if (p->pipe == NULL || p->halted) {
    archive_set_error(a, ECANCELED, "the upload stopped");
    return -1;
  }
  const char *src = buf;
  size_t left = len;
  while (left > 0) {
    pipe_slot *sl = fill_slot(p);
    if (sl == NULL) {
      archive_set_error(a, ECANCELED, "the upload stopped");
      return -1;
    }
    size_t room = PIPE_CHUNK - sl->len;
    size_t n = left < room ? left : room;
    if (src != sl->data + sl->len) memcpy(sl->data + sl->len, src, n);
    sl->len += n;
    src += n;
    left -= n;
    if (sl->len == PIPE_CHUNK) publish(p, 0, 0);
  }
  return (la_ssize_t)len;
}

int workspace_packer_new(ws_packer **out, int root_fd, ws_entry **items, size_t n,
                         const char *prefix, int uid, int gid, sm_error *err) {
  *out = NULL;
  ws_packer *p = calloc(1, sizeof *p);
  if (p == NULL) return sm_error_set(err, SM_ENOMEM, "out of memory");
  p->root_fd = root_fd;
  p->items = items;
  p->n = n;
  p->prefix = strdup(prefix ? prefix : "");
  p->uid = uid < 0 ? 0 : uid;
  p->gid = gid < 0 ? 0 : gid;
  p->fd = -1;
  p->abort_after = -1;
  p->noatime = 1;
  workspace_dircache_init(&p->dirs, root_fd);
  p->a = archive_write_new();
  p->ae = archive_entry_new();
  if (p->prefix == NULL || p->a == NULL || p->ae == NULL) {
    workspace_packer_free(p);
    return sm_error_set(err, SM_ENOMEM, "out of memory");
  }
  /* pax restricted: a plain ustar header for the usual entry, a pax one only
   * where ustar falls short (long names and link targets, large sizes and
   * ids, names that are not ASCII). A pax header on every entry (as
   * hdrcharset=BINARY would write) costs the engine's extraction a tenth
   * more bytes and a parse per entry. Names stay raw bytes all the same:
   * the producer thread runs in the C locale, where libarchive cannot
   * convert a non-ASCII name and so writes it as it is, marked
   * hdrcharset=BINARY (an ARCHIVE_WARN, not an error). Unblocked
   * (bytes_per_block 0): libarchive hands each write on as it is, no
   * 10 KiB block copies; the stream has no padding past its end blocks. */
  if (archive_write_set_format_pax_restricted(p->a) != ARCHIVE_OK ||
      archive_write_add_filter_none(p->a) != ARCHIVE_OK ||
      archive_write_set_bytes_per_block(p->a, 0) != ARCHIVE_OK ||
      archive_write_set_bytes_in_last_block(p->a, 1) != ARCHIVE_OK ||
      archive_write_open2(p->a, p, NULL, pack_write_cb, NULL, NULL) != ARCHIVE_OK) {
    sm_error_set(err, SM_EIO, "starting the workspace tar stream: %s", archive_error_string(p->a));
    workspace_packer_free(p);
    return err ? err->code : SM_EIO;
  }
  *out = p;
  return 0;
}

static int pipe_alloc(ws_packer *p);

int workspace_packer_new_deferred(ws_packer **out, int root_fd, int uid, int gid, sm_error *err) {
  int rc = workspace_packer_new(out, root_fd, NULL, 0, "", uid, gid, err);
  if (rc) return rc;
  ws_packer *p = *out;
  p->deferred = 1;
  if (pipe_alloc(p) != 0) {
    if (err) *err = p->err;
    workspace_packer_free(p);
    *out = NULL;
    return err ? err->code : SM_ENOMEM;
  }
  return 0;
}

static void supply(ws_packer *p, ws_entry **items, size_t n, int code) {
  pack_pipe *q = p->pipe;
  if (!p->deferred || q == NULL) return;
  pthread_mutex_lock(&q->mu);
  if (p->supplied == 0) {
    p->items = items;
    p->n = n;
    p->abandon_code = code;
    p->supplied = code ? -1 : 1;
  }
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
}

void workspace_packer_supply(ws_packer *p, ws_entry **items, size_t n) { supply(p, items, n, 0); }

void workspace_packer_abandon(ws_packer *p, int code) {
  supply(p, NULL, 0, code < 0 ? code : SM_EIO);
}

void workspace_packer_abort_after(ws_packer *p, int64_t bytes) { p->abort_after = bytes; }

void workspace_packer_set_cut(ws_packer *p, size_t cut) { p->cut = cut; }

int64_t workspace_packer_produced(const ws_packer *p) { return p->produced; }

static void pipe_stop(ws_packer *p);

static void free_pipe(ws_packer *p) {
  pack_pipe *q = p->pipe;
  if (q == NULL) return;
  for (size_t i = 0; i < PIPE_SLOTS; i++) free(q->slot[i].data);
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  free(q);
  p->pipe = NULL;
}

const sm_error *workspace_packer_error(ws_packer *p) {
  pipe_stop(p);
  return &p->err;
}

void workspace_packer_reason(ws_packer *p, sm_error *err) {
  const sm_error *pe = workspace_packer_error(p);
  if (pe->code && pe->code != SM_ECANCELLED) *err = *pe;
}

void workspace_packer_stats(ws_packer *p, int64_t *bytes, int64_t *entries) {
  pipe_stop(p);
  if (bytes) *bytes = p->bytes;
  if (entries) *entries = p->entries;
}

static void close_file(ws_packer *p) {
  if (p->fd >= 0) close(p->fd);
  p->fd = -1;
  if (p->md) EVP_MD_CTX_free(p->md);
  p->md = NULL;
  p->cur = NULL;
}

void workspace_packer_free(ws_packer *p) {
  if (p == NULL) return;
  pipe_stop(p);
  free_pipe(p);
  close_file(p);
  if (p->a) archive_write_free(p->a);
  if (p->ae) archive_entry_free(p->ae);
  workspace_dircache_dispose(&p->dirs);
  free(p->prefix);
  free(p);
}

static int fail(ws_packer *p, int code, const char *fmt, const char *path, const char *why) {
  p->failed = 1;
  /* Stopped by the reader: whatever failed since is not the story. */
  if (p->halted) return SM_ECANCELLED;
  return sm_error_set(&p->err, code, fmt, path, why);
}

/* Opens the next file to send; a file that turned into something else
 * since the scan is sent as what it is now, or dropped if it is gone. */
static int open_item(ws_packer *p, ws_entry *e, struct stat *st) {
  const char *name;
  int dfd = workspace_dircache_parent(&p->dirs, e->path, &name, 0);
  if (dfd < 0) return dfd;
  if (e->type == 'f') {
    /* O_NOATIME: reading a workspace should not write every inode back
     * (relatime still does once a day); only the owner (or root) may ask. */
    int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    int fd = -1;
    if (p->noatime) {
      fd = openat(dfd, name, flags | O_NOATIME);
      if (fd < 0 && errno == EPERM) p->noatime = 0;
    }
    if (fd < 0 && !p->noatime) fd = openat(dfd, name, flags);
    if (fd < 0) return -errno;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
      close(fd);
      return -ENOENT;
    }
    p->fd = fd;
    return 0;
  }
  if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  return 0;
}

static int write_header(ws_packer *p, ws_entry *e) {
  struct stat st;
  int r = open_item(p, e, &st);
  if (r == -ENOENT || r == -ELOOP || r == -ENOTDIR) {
    /* Vanished or changed type since the scan: the next sync picks it up. */
    sm_log(SM_LOG_DEBUG, "workspace: %s changed while copying; skipped this time", e->path);
    e->host_mtime_ns = WS_UNKNOWN_MTIME;
    e->has_hash = 0;
    return 0;
  }
  if (r < 0) return fail(p, SM_EIO, "reading %s: %s", e->path, strerror(-r));
  archive_entry_clear(p->ae);
  const char *rel = strlen(e->path) > p->cut ? e->path + p->cut : e->path;
  size_t plen = strlen(p->prefix) + strlen(rel) + 2;
  char *name = malloc(plen);
  if (name == NULL) return fail(p, SM_ENOMEM, "%s%s", "out of memory", "");
  if (p->prefix[0])
    snprintf(name, plen, "%s/%s", p->prefix, rel);
  else
    snprintf(name, plen, "%s", rel);
  archive_entry_copy_pathname(p->ae, name);
  free(name);
  archive_entry_set_uid(p->ae, p->uid);
  archive_entry_set_gid(p->ae, p->gid);
  archive_entry_set_mtime(p->ae, e->host_mtime_ns / 1000000000, e->host_mtime_ns % 1000000000);
  unsigned mode = e->mode & 0777;
  switch (e->type) {
  case 'f':
    /* The size right now, so the header and the data agree. */
    e->size = st.st_size;
    archive_entry_set_filetype(p->ae, AE_IFREG);
    archive_entry_set_size(p->ae, st.st_size);
    break;
  case 'd':
    archive_entry_set_filetype(p->ae, AE_IFDIR);
    break;
  case 'l':
    archive_entry_set_filetype(p->ae, AE_IFLNK);
    archive_entry_copy_symlink(p->ae, e->link);
    mode = 0777;
    break;
  case 'p':
    archive_entry_set_filetype(p->ae, AE_IFIFO);
    break;
  case 'c':
  case 'b':
    archive_entry_set_filetype(p->ae, e->type == 'c' ? AE_IFCHR : AE_IFBLK);
    archive_entry_set_rdev(p->ae, st.st_rdev);
    break;
  default:
    return 0;
  }
  archive_entry_set_perm(p->ae, mode);
  if (archive_write_header(p->a, p->ae) < ARCHIVE_WARN)
    return fail(p, SM_EIO, "writing the tar header of %s: %s", e->path, archive_error_string(p->a));
  p->entries++;
  if (e->type == 'f') {
    p->cur = e;
    p->remaining = st.st_size;
    p->cur_read = 0;
    p->changed_under_us = 0;
    p->md = EVP_MD_CTX_new();
    if (p->md == NULL || EVP_DigestInit_ex(p->md, EVP_sha256(), NULL) != 1)
      return fail(p, SM_ENOMEM, "%s%s", "out of memory", "");
    e->host_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    e->box_mtime = st.st_mtim.tv_sec;
  } else {
    e->box_mtime = e->host_mtime_ns / 1000000000;
  }
  return 0;
}

static int finish_file(ws_packer *p) {
  ws_entry *e = p->cur;
  unsigned int n = 0;
  EVP_DigestFinal_ex(p->md, e->hash, &n);
  e->has_hash = 1;
  struct stat st;
  /* Changed while read: what was sent is not what the host has. */
  if (p->changed_under_us || fstat(p->fd, &st) != 0 || st.st_size != e->size ||
      (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec != e->host_mtime_ns) {
    e->has_hash = 0;
    e->host_mtime_ns = WS_UNKNOWN_MTIME;
  }
  close_file(p);
  if (archive_write_finish_entry(p->a) < ARCHIVE_WARN)
    return fail(p, SM_EIO, "writing the tar stream of %s: %s", e->path, archive_error_string(p->a));
  return 0;
}

/* One step of the writer: a header, or one read of the current file. */
static int step(ws_packer *p) {
  if (p->cur) {
    pipe_slot *sl = fill_slot(p);
    if (sl == NULL) return fail(p, SM_ECANCELLED, "%s%s", "stopped", "");
    size_t want = p->remaining < (int64_t)PIPE_CHUNK ? (size_t)p->remaining : PIPE_CHUNK;
    size_t room = PIPE_CHUNK - sl->len;
    if (room < want && room < READ_MIN) {
      publish(p, 0, 0);
      sl = fill_slot(p);
      if (sl == NULL) return fail(p, SM_ECANCELLED, "%s%s", "stopped", "");
      room = PIPE_CHUNK;
    }
    if (want > room) want = room;
    /* Read in place: the slot's free room is where libarchive would copy
     * these bytes to anyway. */
    char *at = sl->data + sl->len;
    ssize_t r = 0;
    if (want > 0) {
      do r = read(p->fd, at, want);
      while (r < 0 && errno == EINTR);
      if (r < 0) return fail(p, SM_EIO, "reading %s: %s", p->cur->path, strerror(errno));
    }
    if (r == 0 && p->remaining > 0) {
      /* Shrunk while read: libarchive pads the entry with zeros. */
      p->changed_under_us = 1;
      p->remaining = 0;
    }
    if (r > 0) {
      EVP_DigestUpdate(p->md, at, (size_t)r);
      if (archive_write_data(p->a, at, (size_t)r) < 0)
        return fail(p, SM_EIO, "writing the tar stream of %s: %s", p->cur->path,
                    archive_error_string(p->a));
      p->remaining -= r;
      p->cur_read += r;
      p->bytes += r;
    }
    if (p->remaining == 0) return finish_file(p);
    return 0;
  }
  if (p->i < p->n) return write_header(p, p->items[p->i++]);
  if (archive_write_close(p->a) != ARCHIVE_OK)
    return fail(p, SM_EIO, "finishing the tar stream: %s%s", archive_error_string(p->a), "");
  p->finished = 1;
  return 0;
}

/* A deferred stream's first entry, "./": the engine skips it (it names the
 * destination, which exists), so the upload can begin, and the engine start
 * its extraction, before the entries are known. Then waits for them. */
static int lead(ws_packer *p) {
  struct stat st;
  if (fstat(p->root_fd, &st) != 0) return fail(p, SM_EIO, "reading %s: %s", ".", strerror(errno));
  archive_entry_clear(p->ae);
  archive_entry_copy_pathname(p->ae, "./");
  archive_entry_set_filetype(p->ae, AE_IFDIR);
  archive_entry_set_perm(p->ae, st.st_mode & 0777);
  archive_entry_set_uid(p->ae, p->uid);
  archive_entry_set_gid(p->ae, p->gid);
  archive_entry_set_mtime(p->ae, st.st_mtim.tv_sec, 0);
  if (archive_write_header(p->a, p->ae) < ARCHIVE_WARN)
    return fail(p, SM_EIO, "writing the tar header of %s: %s", ".", archive_error_string(p->a));
  publish(p, 0, 0);
  pack_pipe *q = p->pipe;
  pthread_mutex_lock(&q->mu);
  while (p->supplied == 0 && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
  int supplied = q->stop ? 0 : p->supplied;
  pthread_mutex_unlock(&q->mu);
  if (supplied == 0) {
    p->halted = 1;
    return fail(p, SM_ECANCELLED, "%s%s", "stopped", "");
  }
  if (supplied < 0) return fail(p, p->abandon_code, "%s%s", "the copy was abandoned before it began", "");
  return 0;
}

static void *producer_main(void *ud) {
  ws_packer *p = ud;
  pack_pipe *q = p->pipe;
  if (q->request_id[0]) sm_log_set_request_id(q->request_id);
  /* Names are bytes: in the C locale libarchive never converts them (see
   * workspace_packer_new), whatever locale the caller's process runs in. */
  locale_t c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
  if (c_locale != (locale_t)0) uselocale(c_locale);
  int rc = p->deferred ? lead(p) : 0;
  while (rc == 0 && !p->finished) {
    rc = step(p);
    if (rc != 0) break;
  }
  /* What was packed goes to the reader first, then the end or the error
   * (a stopped reader reads nothing more either way). */
  publish(p, 1, rc == 0 ? 0 : p->err.code ? p->err.code : SM_EIO);
  /* Files stay open until the packer is freed: close the current one here,
   * in the thread that owns it. */
  close_file(p);
  if (c_locale != (locale_t)0) {
    uselocale(LC_GLOBAL_LOCALE);
    freelocale(c_locale);
  }
  return NULL;
}

/* The ring and its lock, no thread yet. */
static int pipe_alloc(ws_packer *p) {
  pack_pipe *q = calloc(1, sizeof *q);
  if (q == NULL) return sm_error_set(&p->err, SM_ENOMEM, "out of memory");
  for (size_t i = 0; i < PIPE_SLOTS; i++) {
    q->slot[i].data = malloc(PIPE_CHUNK);
    if (q->slot[i].data == NULL) {
      for (size_t j = 0; j < i; j++) free(q->slot[j].data);
      free(q);
      return sm_error_set(&p->err, SM_ENOMEM, "out of memory");
    }
  }
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  p->pipe = q;
  return 0;
}

static int pipe_start(ws_packer *p) {
  if (p->pipe == NULL && pipe_alloc(p) != 0) return p->err.code;
  pack_pipe *q = p->pipe;
  const char *rid = sm_log_request_id();
  if (rid) snprintf(q->request_id, sizeof q->request_id, "%s", rid);
  int r = common_thread_start(&q->thread, NULL, producer_main, p);
  if (r != 0) return sm_error_set(&p->err, SM_EIO, "starting the workspace packer thread: %s", strerror(r));
  q->running = 1;
  return 0;
}

/* Tells the producer to stop and joins it (idempotent). After it, every
 * field the producer wrote (entries, stats, err) is safe to read. */
static void pipe_stop(ws_packer *p) {
  pack_pipe *q = p->pipe;
  if (q == NULL || !q->running || q->joined) return;
  pthread_mutex_lock(&q->mu);
  q->stop = 1;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
  pthread_join(q->thread, NULL);
  q->joined = 1;
  p->halted = 1;
}

/* The reader's side: the next bytes from the ring, 0 at the end, or the
 * producer's error code. */
static ssize_t pipe_read(ws_packer *p, char *buf, size_t len) {
  pack_pipe *q = p->pipe;
  if (p->read_failed || (q->joined && !q->done)) return p->err.code ? p->err.code : SM_EIO;
  pthread_mutex_lock(&q->mu);
  while (q->count == 0 && !q->done) pthread_cond_wait(&q->cv, &q->mu);
  if (q->count == 0) {
    int rc = q->rc;
    pthread_mutex_unlock(&q->mu);
    pipe_stop(p);
    return rc;
  }
  pipe_slot *sl = &q->slot[q->head];
  size_t avail = sl->len - q->head_pos;
  size_t n = avail < len ? avail : len;
  if (p->abort_after >= 0 && p->produced + (int64_t)n > p->abort_after) {
    pthread_mutex_unlock(&q->mu);
    pipe_stop(p);
    p->read_failed = 1;
    return sm_error_set(&p->err, SM_ECANCELLED, "copy aborted after %" PRId64 " bytes (test hook)",
                        p->abort_after);
  }
  pthread_mutex_unlock(&q->mu);
  /* A filled slot is the reader's alone until it is released. */
  memcpy(buf, sl->data + q->head_pos, n);
  pthread_mutex_lock(&q->mu);
  q->head_pos += n;
  if (q->head_pos == sl->len) {
    q->head = (q->head + 1) % PIPE_SLOTS;
    q->count--;
    q->head_pos = 0;
    pthread_cond_broadcast(&q->cv);
  }
  pthread_mutex_unlock(&q->mu);
  p->produced += (int64_t)n;
  return (ssize_t)n;
}

ssize_t workspace_packer_read(void *ud, char *buf, size_t len) {
  ws_packer *p = ud;
  if (len == 0) return 0;
  if (p->read_failed) return p->err.code ? p->err.code : SM_EIO;
  if ((p->pipe == NULL || !p->pipe->running) && pipe_start(p) != 0) {
    p->read_failed = 1;
    return p->err.code;
  }
  return pipe_read(p, buf, len);
}
