/* Fuzzes the parser of sandman's in-sandbox helper output (src/lib/files/files_wire.c):
 * what a hostile sandbox could print. The first byte picks the mode, the
 * record cap and the read sizes; the records, matches and content seen must
 * be the same whatever the split (differential check), and every field
 * handed out must respect its cap. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/fs.h"
#include "files/files_wire.h"

typedef struct acc {
  uint64_t hash;
} acc;

static void mix(acc *a, const void *p, size_t len) {
  const unsigned char *b = p;
  for (size_t i = 0; i < len; i++) a->hash = (a->hash ^ b[i]) * 1099511628211ull;
}

static int on_ok(void *ud, const char *fields) {
  if (strlen(fields) >= SM_FS_LINE_MAX) abort();
  mix(ud, fields, strlen(fields));
  return 0;
}

static int on_record(void *ud, const sm_file_entry *e) {
  if (e->path == NULL || e->path[0] == '\0' || strlen(e->path) > SM_FS_PATH_MAX) abort();
  if (e->type != 'l' && e->link != NULL) abort();
  if (e->link && strlen(e->link) > SM_FS_PATH_MAX) abort();
  if (e->size < 0 || e->mode > 07777) abort();
  mix(ud, e->path, strlen(e->path));
  mix(ud, &e->type, 1);
  mix(ud, &e->size, sizeof e->size);
  return 0;
}

static int on_content(void *ud, const char *data, size_t len) {
  mix(ud, data, len);
  return 0;
}

static int on_match(void *ud, const char *path, int64_t line, const char *text, size_t len) {
  if (strlen(path) > SM_FS_PATH_MAX || len > SM_FS_TEXT_MAX) abort();
  mix(ud, path, strlen(path));
  mix(ud, &line, sizeof line);
  mix(ud, text, len);
  return 0;
}

/* Feeds data in pieces of `step` bytes (0: whole); returns the outcome. */
static int run(const uint8_t *data, size_t size, fs_wire_mode mode, int64_t cap, size_t step,
               acc *a) {
  fs_wire_handlers h = {on_ok, on_record, on_content, on_match, a};
  fs_wire w;
  files_wire_init(&w, mode, &h, cap);
  sm_error err = SM_ERROR_INIT;
  int rc = 0;
  for (size_t off = 0; rc == 0 && off < size;) {
    size_t n = step == 0 || size - off < step ? size - off : step;
    rc = files_wire_feed(&w, (const char *)data + off, n, &err);
    off += n;
  }
  if (rc == 0) rc = files_wire_finish(&w, &err);
  int result = rc ? rc : w.failed ? 1 : 0;
  mix(a, &result, sizeof result);
  files_wire_dispose(&w);
  return result;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t ctl = data[0];
  fs_wire_mode mode = (fs_wire_mode)(ctl & 3);
  int64_t cap = (ctl >> 2) & 7;
  size_t step = 1 + (ctl >> 5);
  acc whole = {14695981039346656037ull}, split = {14695981039346656037ull};
  int a = run(data + 1, size - 1, mode, cap, 0, &whole);
  int b = run(data + 1, size - 1, mode, cap, step, &split);
  if (a != b || whole.hash != split.hash) abort();
  return 0;
}
