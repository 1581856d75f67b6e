/* The parser of `sandman-agent watch`'s output (watch_wire.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files/watch_wire.h"

void files_watch_wire_init(watch_wire *w, int (*on_ready)(void *),
                           int (*on_event)(void *, const sm_watch_event *), void *ud) {
  memset(w, 0, sizeof *w);
  w->on_ready = on_ready;
  w->on_event = on_event;
  w->ud = ud;
}

static int bad(sm_error *err, const char *what) {
  return sm_error_set(err, SM_EPROTOCOL, "the watch's output is malformed (%s)", what);
}

/* A decimal length of at most SM_FILES_PATH_MAX. */
static int length(const char *s, size_t *out) {
  if (*s == '\0' || strlen(s) > 4) return -1;
  size_t v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    v = v * 10 + (size_t)(*s - '0');
  }
  if (v > SM_FILES_PATH_MAX) return -1;
  *out = v;
  return 0;
}

/* "e K D PATHLEN TOLEN": the event's header. */
static int event_head(watch_wire *w, char *fields, sm_error *err) {
  char *f[4];
  int n = 0;
  f[n++] = fields;
  for (char *p = fields; *p; p++) {
    if (*p != ' ') continue;
    if (n == 4) return bad(err, "an event's header");
    *p = '\0';
    f[n++] = p + 1;
  }
  if (n != 4 || strlen(f[0]) != 1 || strchr("cmdvo", f[0][0]) == NULL ||
      (strcmp(f[1], "0") != 0 && strcmp(f[1], "1") != 0) || length(f[2], &w->path_len) != 0 ||
      length(f[3], &w->to_len) != 0)
    return bad(err, "an event's header");
  w->kind = f[0][0];
  w->dir = f[1][0] == '1';
  /* A move names both ends; an overflow names nothing; the rest one path. */
  int to_ok = w->kind == 'v' ? w->to_len > 0 : w->to_len == 0;
  int path_ok = w->kind == 'o' ? w->path_len == 0 : w->path_len > 0;
  if (!to_ok || !path_ok) return bad(err, "an event's lengths");
  w->in_body = 1;
  w->body_len = 0;
  return 0;
}

static int line_done(watch_wire *w, sm_error *err) {
  char *l = w->line;
  if (w->ready && strncmp(l, "e ", 2) == 0) return event_head(w, l + 2, err);
  if (!w->ready && strcmp(l, "ok") == 0) {
    w->ready = 1;
    return w->on_ready ? w->on_ready(w->ud) : 0;
  }
  if (w->ready && strcmp(l, "end 0 0") == 0) {
    w->ended = 1;
    return 0;
  }
  if (strncmp(l, "err ", 4) == 0) {
    char *sp = strchr(l + 4, ' ');
    size_t nl = sp ? (size_t)(sp - (l + 4)) : strlen(l + 4);
    if (nl == 0 || nl >= sizeof w->errname) return bad(err, "an error line");
    memcpy(w->errname, l + 4, nl);
    w->errname[nl] = '\0';
    snprintf(w->message, sizeof w->message, "%s", sp ? sp + 1 : "");
    w->failed = 1;
    return 0;
  }
  return bad(err, "an unknown line");
}

/* A path must be text without NUL: the client gets it in JSON. */
static int body_done(watch_wire *w, sm_error *err) {
  if (memchr(w->body, '\0', w->body_len) != NULL) return bad(err, "a NUL in a path");
  char path[SM_FILES_PATH_MAX + 1], to[SM_FILES_PATH_MAX + 1];
  memcpy(path, w->body, w->path_len);
  path[w->path_len] = '\0';
  memcpy(to, w->body + w->path_len, w->to_len);
  to[w->to_len] = '\0';
  w->in_body = 0;
  sm_watch_event ev = {(sm_watch_kind)w->kind, w->dir, path, w->kind == 'v' ? to : NULL};
  return w->on_event ? w->on_event(w->ud, &ev) : 0;
}

int files_watch_wire_feed(watch_wire *w, const char *data, size_t len, sm_error *err) {
  size_t i = 0;
  while (i < len) {
    if (w->ended || w->failed) return bad(err, "output after its end");
    if (w->in_body) {
      size_t want = w->path_len + w->to_len - w->body_len;
      size_t n = len - i < want ? len - i : want;
      memcpy(w->body + w->body_len, data + i, n);
      w->body_len += n;
      i += n;
      if (w->body_len == w->path_len + w->to_len) {
        int rc = body_done(w, err);
        if (rc) return rc;
      }
      continue;
    }
    const char *nl = memchr(data + i, '\n', len - i);
    size_t n = nl ? (size_t)(nl - (data + i)) : len - i;
    if (w->line_len + n > WATCH_WIRE_LINE_MAX) return bad(err, "a line too long");
    memcpy(w->line + w->line_len, data + i, n);
    w->line_len += n;
    i += n;
    if (nl == NULL) break;
    i++; /* the newline */
    size_t ll = w->line_len;
    w->line[ll] = '\0';
    w->line_len = 0;
    if (memchr(w->line, '\0', ll) != NULL) return bad(err, "a NUL in a line");
    int rc = line_done(w, err);
    if (rc) return rc;
    /* An event with no bytes to read (an overflow) is complete now. */
    if (w->in_body && w->path_len + w->to_len == 0) {
      rc = body_done(w, err);
      if (rc) return rc;
    }
  }
  return 0;
}
