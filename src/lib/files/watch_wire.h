/* The output of `sandman-agent watch` (agent/watch.h), parsed as it comes
 * against hard caps: a header line of at most WATCH_WIRE_LINE_MAX bytes,
 * paths of at most SM_FILES_PATH_MAX bytes each. Anything else stops the
 * parse (SM_EPROTOCOL): the sandbox's output is never trusted to be
 * well-formed. */
#ifndef SANDMAN_FILES_WATCH_WIRE_H
#define SANDMAN_FILES_WATCH_WIRE_H

#include <stddef.h>

#include <sandman/files.h>

#define WATCH_WIRE_LINE_MAX 512

typedef struct watch_wire {
  /* told: once the watches are in place, then each event (a non-zero
   * return stops the parse with that code) */
  int (*on_ready)(void *ud);
  int (*on_event)(void *ud, const sm_watch_event *ev);
  void *ud;
  char line[WATCH_WIRE_LINE_MAX + 1];
  size_t line_len;
  int in_body;           /* reading an event's PATH and TO */
  char kind;
  int dir;
  size_t path_len, to_len, body_len;
  char body[2 * SM_FILES_PATH_MAX + 2];
  int ready, ended, failed; /* "ok", "end", "err" seen */
  char errname[16];
  char message[WATCH_WIRE_LINE_MAX + 1];
} watch_wire;

void files_watch_wire_init(watch_wire *w, int (*on_ready)(void *),
                           int (*on_event)(void *, const sm_watch_event *), void *ud);
/* 0, or the error that stopped the parse (err says why). */
int files_watch_wire_feed(watch_wire *w, const char *data, size_t len, sm_error *err);

#endif
