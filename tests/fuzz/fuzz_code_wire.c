/* Fuzzes the parser of the code driver's answers (src/lib/code/code_wire.c): what a
 * hostile sandbox could send. The first byte picks the mode, the output cap
 * and the piece size; the events seen must be the same whatever the split
 * (differential check), and every event must respect the caps: output past
 * the cap never delivered, bundles only of known types and strings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "code/code_wire.h"

typedef struct acc {
  uint64_t hash;
  size_t output, max;
  int truncated;
} acc;

static void mix(acc *a, const void *p, size_t len) {
  const unsigned char *b = p;
  for (size_t i = 0; i < len; i++) a->hash = (a->hash ^ b[i]) * 1099511628211ull;
}

static int on_event(void *ud, const sm_code_event *ev) {
  acc *a = ud;
  mix(a, &ev->type, sizeof ev->type);
  if (ev->type == SM_CODE_EV_STDOUT || ev->type == SM_CODE_EV_STDERR) {
    if (ev->text == NULL || a->truncated) abort();
    a->output += ev->text_len;
    mix(a, ev->text, ev->text_len);
  }
  if (ev->type == SM_CODE_EV_DISPLAY || ev->type == SM_CODE_EV_RESULT) {
    if (ev->data == NULL || a->truncated) abort();
    json_object_object_foreach(ev->data, key, val) {
      if (strcmp(key, "application/json") != 0 && !json_object_is_type(val, json_type_string))
        abort();
      mix(a, key, strlen(key));
      if (json_object_is_type(val, json_type_string))
        a->output += (size_t)json_object_get_string_len(val);
    }
  }
  if (ev->type == SM_CODE_EV_TRUNCATED) a->truncated = 1;
  if (ev->type == SM_CODE_EV_ERROR && (ev->name == NULL || ev->value == NULL)) abort();
  if (ev->type == SM_CODE_EV_END) {
    if (ev->status == NULL || ev->duration_ms < 0) abort();
    mix(a, ev->status, strlen(ev->status));
  }
  if (a->output > a->max) abort();
  return 0;
}

static int run(const uint8_t *data, size_t size, code_wire_mode mode, size_t max, size_t step,
               acc *a) {
  code_wire w;
  a->max = max;
  code_wire_init(&w, mode, max, on_event, a);
  sm_error err = SM_ERROR_INIT;
  int rc = 0;
  for (size_t off = 0; rc == 0 && off < size;) {
    size_t n = step == 0 || size - off < step ? size - off : step;
    rc = code_wire_feed(&w, (const char *)data + off, n, &err);
    off += n;
  }
  if (rc == 0) rc = code_wire_finish(&w, &err);
  if (rc == 0 && w.answer) {
    const char *code = code_wire_fail_code(&w);
    if (code) mix(a, code, strlen(code));
    sm_code_context c;
    if (code_context_from_json(w.answer, &c, &err) == 0 && !sm_code_name_valid(c.name)) abort();
  }
  mix(a, &rc, sizeof rc);
  code_wire_dispose(&w);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t ctl = data[0];
  code_wire_mode mode = (ctl & 1) ? CODE_WIRE_ONE : CODE_WIRE_RUN;
  size_t max = 1 + ((ctl >> 1) & 7) * 16;
  size_t step = 1 + (ctl >> 4);
  acc whole = {14695981039346656037ull, 0, 0, 0}, split = {14695981039346656037ull, 0, 0, 0};
  int a = run(data + 1, size - 1, mode, max, 0, &whole);
  int b = run(data + 1, size - 1, mode, max, step, &split);
  if (a != b || whole.hash != split.hash) abort();
  return 0;
}
