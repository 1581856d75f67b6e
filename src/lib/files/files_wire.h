/* The host side of `sandman-agent fs` (src/shared/agent/fs.h): an incremental
 * parser of what the helper prints, fed as the call's stdout arrives. The
 * helper runs inside the sandbox, so its output is untrusted: every line,
 * path, link and text has a hard cap, counts are checked, and anything
 * malformed is SM_EPROTOCOL. Internal to src/lib/files; fuzzed by
 * tests/fuzz/fuzz_files_wire.c. */
#ifndef SANDMAN_FILES_WIRE_H
#define SANDMAN_FILES_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <sandman/error.h>
#include <sandman/files.h>

#include "common/buf.h"

typedef enum {
  FS_WIRE_STATUS = 0, /* a status line and nothing after it */
  FS_WIRE_RAW,        /* read: a status line, then content bytes */
  FS_WIRE_RECORDS,    /* list, glob, grep: "ok", records or matches, "end" */
  FS_WIRE_CONTENT,    /* get: like RECORDS, file records followed by content */
} fs_wire_mode;

typedef struct fs_wire_handlers {
  /* After "ok": the rest of the line (fields, may be ""). */
  int (*ok)(void *ud, const char *fields);
  /* A record; e->path and e->link are borrowed for the call. */
  int (*record)(void *ud, const sm_file_entry *e);
  /* Content: of a read (RAW), or of the last file record (CONTENT). */
  int (*content)(void *ud, const char *data, size_t len);
  int (*match)(void *ud, const char *path, int64_t line, const char *text, size_t len);
  void *ud;
} fs_wire_handlers;

typedef struct fs_wire {
  fs_wire_mode mode;
  fs_wire_handlers h;
  int state;
  common_buf line;      /* the line being read */
  common_buf name;      /* path (and link) of the record being read */
  sm_file_entry entry;  /* the record being read */
  size_t need_path, need_link, need_text;
  int64_t match_line;
  int64_t left;         /* content bytes still to come for the current file */
  int64_t records;      /* records and matches seen */
  int64_t max_records;  /* a helper that sends more is lying */
  /* results */
  int ok;               /* "ok" seen */
  int failed;           /* "err" seen: errname and message below */
  char errname[32];
  char message[512];
  int ended;            /* "end" seen */
  int64_t end_count;
  int truncated;
} fs_wire;

void files_wire_init(fs_wire *w, fs_wire_mode mode, const fs_wire_handlers *h, int64_t max_records);
void files_wire_dispose(fs_wire *w);
/* 0, SM_EPROTOCOL for malformed output, or what a handler returned. */
int files_wire_feed(fs_wire *w, const char *data, size_t len, sm_error *err);
/* After the helper's output ended: SM_EPROTOCOL when it stopped short. An
 * "err" answer is not checked here (see w->failed). */
int files_wire_finish(fs_wire *w, sm_error *err);
/* The sandman code for a helper's errno name ("ENOENT" -> SM_ENOTFOUND). */
int files_wire_error_code(const char *errname);
/* The errno that errname spells (ENOENT...), or 0 for one not known here. */
int files_wire_errno(const char *errname);

#endif
