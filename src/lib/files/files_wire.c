/* Parser of `sandman-agent fs` output (see files_wire.h and src/shared/agent/fs.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/fs.h"
#include "common/unconst.h"
#include "files/files_wire.h"

enum { S_STATUS, S_HEAD, S_PATH, S_LINK, S_CONTENT, S_MATCH_PATH, S_MATCH_TEXT, S_RAW, S_DONE };

void files_wire_init(fs_wire *w, fs_wire_mode mode, const fs_wire_handlers *h,
                     int64_t max_records) {
  memset(w, 0, sizeof *w);
  w->mode = mode;
  if (h) w->h = *h;
  w->state = S_STATUS;
  w->max_records = max_records;
  common_buf_init(&w->line, SM_FS_LINE_MAX);
  common_buf_init(&w->name, 2 * SM_FS_PATH_MAX + SM_FS_TEXT_MAX + 2);
}

void files_wire_dispose(fs_wire *w) {
  common_buf_dispose(&w->line);
  common_buf_dispose(&w->name);
}

static int bad(sm_error *err, const char *what) {
  return sm_error_set(err, SM_EPROTOCOL, "sandman's helper in the sandbox answered badly: %s",
                      what);
}

/* Parses n space-separated non-negative decimal numbers (the first in base
 * `first_base`) that make up the whole of s. */
static int numbers(const char *s, int n, int first_base, int64_t *v) {
  const char *p = s;
  for (int i = 0; i < n; i++) {
    if (*p < '0' || *p > '9') return -1;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(p, &end, i == 0 ? first_base : 10);
    if (errno || end == p || x < 0) return -1;
    v[i] = x;
    if (i < n - 1) {
      if (*end != ' ') return -1;
      p = end + 1;
    } else if (*end != '\0') {
      return -1;
    }
  }
  return 0;
}

static void take_error(fs_wire *w, const char *rest) {
  const char *sp = strchr(rest, ' ');
  size_t n = sp ? (size_t)(sp - rest) : strlen(rest);
  if (n >= sizeof w->errname) n = sizeof w->errname - 1;
  memcpy(w->errname, rest, n);
  w->errname[n] = '\0';
  snprintf(w->message, sizeof w->message, "%s", sp ? sp + 1 : "");
  w->failed = 1;
  w->state = S_DONE;
}

static int on_status(fs_wire *w, const char *line, sm_error *err) {
  if (strncmp(line, "err ", 4) == 0) {
    take_error(w, line + 4);
    return 0;
  }
  if (strcmp(line, "ok") != 0 && strncmp(line, "ok ", 3) != 0) return bad(err, "no status line");
  w->ok = 1;
  if (w->h.ok) {
    int rc = w->h.ok(w->h.ud, line[2] ? line + 3 : "");
    if (rc) return rc;
  }
  w->state = w->mode == FS_WIRE_STATUS ? S_DONE : w->mode == FS_WIRE_RAW ? S_RAW : S_HEAD;
  return 0;
}

static int on_head(fs_wire *w, const char *line, sm_error *err) {
  int64_t v[6];
  if (strncmp(line, "err ", 4) == 0) {
    take_error(w, line + 4);
    return 0;
  }
  if (strncmp(line, "end ", 4) == 0) {
    if (numbers(line + 4, 2, 10, v) != 0 || v[1] > 1) return bad(err, "a malformed end line");
    w->ended = 1;
    w->end_count = v[0];
    w->truncated = (int)v[1];
    w->state = S_DONE;
    return 0;
  }
  if (++w->records > w->max_records) return bad(err, "more entries than asked for");
  common_buf_reset(&w->name);
  if (strncmp(line, "m ", 2) == 0) {
    if (numbers(line + 2, 3, 10, v) != 0 || v[1] == 0 || v[1] > SM_FS_PATH_MAX ||
        v[2] > SM_FS_TEXT_MAX)
      return bad(err, "a malformed match line");
    w->match_line = v[0];
    w->need_path = (size_t)v[1];
    w->need_text = (size_t)v[2];
    w->state = S_MATCH_PATH;
    return 0;
  }
  char t = line[0];
  if ((t != 'f' && t != 'd' && t != 'l' && t != 'o') || line[1] != ' ' ||
      numbers(line + 2, 6, 8, v) != 0 || v[0] > 07777 || v[3] > 999999999 ||
      v[4] > SM_FS_PATH_MAX || v[5] > SM_FS_PATH_MAX || (t != 'l' && v[5] != 0) ||
      (t != 'f' && v[1] != 0))
    return bad(err, "a malformed entry line");
  memset(&w->entry, 0, sizeof w->entry);
  w->entry.type = t;
  w->entry.mode = (uint32_t)v[0];
  w->entry.size = v[1];
  w->entry.mtime_s = v[2];
  w->entry.mtime_ns = (int32_t)v[3];
  w->need_path = (size_t)v[4];
  w->need_link = (size_t)v[5];
  w->state = S_PATH;
  return 0;
}

/* The record is whole: hand it on, then its content if any. */
static int record_done(fs_wire *w, sm_error *err) {
  char *base = w->name.data ? w->name.data : SM_UNCONST("");
  size_t plen = w->name.len - w->need_link;
  char *path = malloc(plen + 1);
  char *link = w->need_link ? malloc(w->need_link + 1) : NULL;
  if (path == NULL || (w->need_link && link == NULL)) {
    free(path);
    free(link);
    return sm_error_set(err, SM_ENOMEM, NULL);
  }
  memcpy(path, base, plen);
  path[plen] = '\0';
  if (link) {
    memcpy(link, base + plen, w->need_link);
    link[w->need_link] = '\0';
  }
  int rc = 0;
  if (memchr(path, '\0', plen) || (link && memchr(link, '\0', w->need_link)))
    rc = bad(err, "a NUL in a name");
  w->entry.path = path;
  w->entry.link = link;
  if (rc == 0 && w->h.record) rc = w->h.record(w->h.ud, &w->entry);
  free(path);
  free(link);
  w->entry.path = w->entry.link = NULL;
  if (rc) return rc;
  if (w->mode == FS_WIRE_CONTENT && w->entry.type == 'f' && w->entry.size > 0) {
    w->left = w->entry.size;
    w->state = S_CONTENT;
  } else {
    w->state = S_HEAD;
  }
  return 0;
}

static int match_done(fs_wire *w, sm_error *err) {
  const char *base = w->name.data ? w->name.data : "";
  char path[SM_FS_PATH_MAX + 1];
  memcpy(path, base, w->need_path);
  path[w->need_path] = '\0';
  if (memchr(path, '\0', w->need_path)) return bad(err, "a NUL in a name");
  int rc = 0;
  if (w->h.match)
    rc = w->h.match(w->h.ud, path, w->match_line, base + w->need_path, w->need_text);
  w->state = S_HEAD;
  return rc;
}

/* Moves up to `want` bytes of data into w->name; returns how many. */
static size_t collect(fs_wire *w, const char *data, size_t len, size_t want) {
  size_t n = len < want ? len : want;
  common_buf_append(&w->name, data, n); /* fits: the caps were checked */
  return n;
}

int files_wire_feed(fs_wire *w, const char *data, size_t len, sm_error *err) {
  size_t i = 0;
  while (i < len) {
    int rc = 0;
    switch (w->state) {
    case S_STATUS:
    case S_HEAD: {
      const char *nl = memchr(data + i, '\n', len - i);
      size_t n = nl ? (size_t)(nl - (data + i)) : len - i;
      if (common_buf_append(&w->line, data + i, n) != 0) return bad(err, "a line too long");
      i += n;
      if (!nl) return 0;
      i++;
      const char *line = w->line.data ? w->line.data : "";
      if (memchr(line, '\0', w->line.len)) return bad(err, "a NUL in a line");
      rc = w->state == S_STATUS ? on_status(w, line, err) : on_head(w, line, err);
      common_buf_reset(&w->line);
      if (rc) return rc;
      if (w->state == S_PATH && w->need_path == 0) return bad(err, "an entry without a name");
      break;
    }
    case S_PATH: {
      size_t have = w->name.len;
      i += collect(w, data + i, len - i, w->need_path - have);
      if (w->name.len == w->need_path) {
        if (w->need_link) w->state = S_LINK;
        else if ((rc = record_done(w, err)) != 0) return rc;
      }
      break;
    }
    case S_LINK: {
      size_t have = w->name.len - w->need_path;
      i += collect(w, data + i, len - i, w->need_link - have);
      if (w->name.len == w->need_path + w->need_link && (rc = record_done(w, err)) != 0)
        return rc;
      break;
    }
    case S_CONTENT: {
      size_t n = (int64_t)(len - i) < w->left ? len - i : (size_t)w->left;
      if (w->h.content && (rc = w->h.content(w->h.ud, data + i, n)) != 0) return rc;
      i += n;
      w->left -= (int64_t)n;
      if (w->left == 0) w->state = S_HEAD;
      break;
    }
    case S_MATCH_PATH: {
      i += collect(w, data + i, len - i, w->need_path - w->name.len);
      if (w->name.len == w->need_path) {
        if (w->need_text) w->state = S_MATCH_TEXT;
        else if ((rc = match_done(w, err)) != 0) return rc;
      }
      break;
    }
    case S_MATCH_TEXT: {
      i += collect(w, data + i, len - i, w->need_path + w->need_text - w->name.len);
      if (w->name.len == w->need_path + w->need_text && (rc = match_done(w, err)) != 0) return rc;
      break;
    }
    case S_RAW:
      if (w->h.content && (rc = w->h.content(w->h.ud, data + i, len - i)) != 0) return rc;
      i = len;
      break;
    default: /* S_DONE */
      if (w->failed) return 0; /* what follows an error does not matter */
      return bad(err, "output after the end");
    }
  }
  return 0;
}

int files_wire_finish(fs_wire *w, sm_error *err) {
  if (w->failed) return 0;
  if (!w->ok) return bad(err, "no answer");
  if (w->mode == FS_WIRE_RECORDS || w->mode == FS_WIRE_CONTENT) {
    if (!w->ended) return bad(err, "the listing stopped short");
    if (w->end_count != w->records && w->mode == FS_WIRE_RECORDS)
      return bad(err, "the count does not match the entries");
  }
  if (w->state != S_DONE && w->state != S_RAW) return bad(err, "the answer stopped short");
  return 0;
}

int files_wire_error_code(const char *name) {
  static const struct {
    const char *name;
    int code;
  } map[] = {
      {"ENOENT", SM_ENOTFOUND}, {"EEXIST", SM_ECONFLICT},  {"ELOOP", SM_EUNSAFE},
      {"EXDEV", SM_EUNSAFE},    {"EISDIR", SM_EINVAL},     {"ENOTDIR", SM_EINVAL},
      {"EINVAL", SM_EINVAL},    {"ENOTEMPTY", SM_EINVAL},  {"ENAMETOOLONG", SM_EINVAL},
      {"EACCES", SM_EPOLICY},   {"EPERM", SM_EPOLICY},     {"EROFS", SM_EPOLICY},
      {"ENOSPC", SM_ETOOBIG},   {"EFBIG", SM_ETOOBIG},     {"EPIPE", SM_EIO},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(map[i].name, name) == 0) return map[i].code;
  return SM_EIO;
}

int files_wire_errno(const char *name) {
  static const struct {
    const char *name;
    int value;
  } map[] = {
      {"ENOENT", ENOENT}, {"EEXIST", EEXIST},       {"ELOOP", ELOOP},   {"EXDEV", EXDEV},
      {"EISDIR", EISDIR}, {"ENOTDIR", ENOTDIR},     {"EINVAL", EINVAL}, {"ENOTEMPTY", ENOTEMPTY},
      {"EACCES", EACCES}, {"ENAMETOOLONG", ENAMETOOLONG}, {"EPERM", EPERM}, {"EROFS", EROFS},
      {"ENOSPC", ENOSPC}, {"EFBIG", EFBIG},         {"EPIPE", EPIPE},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(map[i].name, name) == 0) return map[i].value;
  return 0;
}
