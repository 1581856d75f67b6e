/* The host side of the code driver's answers (src/agent/code_driver.py):
 * JSON lines, parsed incrementally as the helper's stdout arrives. They
 * come from inside the sandbox, so they are untrusted: a line is at most
 * SM_CODE_LINE_MAX bytes and 64 levels deep, repeats no key, and every
 * event is checked field by field (a MIME bundle keeps only the types of
 * sandman/code.h, each a string but application/json's); anything else is
 * SM_EPROTOCOL. The output of a run is counted against its cap here, so
 * the cap holds whatever the driver says. Internal to src/lib/code; fuzzed by
 * tests/fuzz/fuzz_code_wire.c. */
#ifndef SANDMAN_CODE_WIRE_H
#define SANDMAN_CODE_WIRE_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/code.h>
#include <sandman/error.h>

#include "common/buf.h"

typedef enum {
  CODE_WIRE_RUN = 0, /* a run: events, then "end" (or "fail" before any) */
  CODE_WIRE_ONE,     /* another operation: one "context", "list", "ok" or "fail" line */
} code_wire_mode;

typedef struct code_wire {
  code_wire_mode mode;
  common_buf line;        /* the line being read */
  size_t max_output;      /* bytes of stdout, stderr, display and result text */
  size_t output;          /* counted so far */
  int truncated;          /* TRUNCATED delivered */
  int started;            /* START came */
  int done;               /* the last line came: nothing may follow */
  json_object *answer;    /* CODE_WIRE_ONE, and "fail": the last line (owned) */
  sm_code_run_end end;    /* CODE_WIRE_RUN: from "end" */
  sm_code_event_fn on_event;
  void *ud;
} code_wire;

void code_wire_init(code_wire *w, code_wire_mode mode, size_t max_output, sm_code_event_fn fn,
                    void *ud);
void code_wire_dispose(code_wire *w);
/* Feeds bytes of the answer: 0, SM_EPROTOCOL (err says what), or the
 * negative code a handler returned. */
int code_wire_feed(code_wire *w, const char *data, size_t len, sm_error *err);
/* At the end of the answer: 0 when its last line came, else SM_EPROTOCOL. */
int code_wire_finish(code_wire *w, sm_error *err);

/* A "fail" answer's code ("not_found", "no_server", ...), or NULL. */
const char *code_wire_fail_code(const code_wire *w);
/* The error a "fail" answer maps to, err filled with its message. */
int code_wire_fail_error(const code_wire *w, sm_error *err);

/* A "context" object into *out: 0, or SM_EPROTOCOL. */
int code_context_from_json(json_object *o, sm_code_context *out, sm_error *err);

#endif
