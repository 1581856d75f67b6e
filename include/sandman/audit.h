/* sandman: the audit trail.
 *
 * Every decision sandman makes (a call allowed or refused, a sandbox made or
 * removed, a lease made, used or refused, a token refused, an egress
 * connection allowed or denied) is one JSON line with OCSF field names
 * (class_uid, activity_id, actor, resources, disposition, time, ...), see
 * docs/audit.md. Destinations: a file with size-based rotation and a
 * retention count, and/or stderr.
 *
 * Several threads and several processes may append to one file: each line
 * is written with one write(2) under an flock(2) on a lock file beside it,
 * which also serialises rotation. A process that dies mid-line leaves at
 * most a partial line, which the next writer ends before its own and
 * readers skip.
 *
 * Values never include a secret: callers pass names, ids and rules, never a
 * credential, a token or an environment value. */
#ifndef SANDMAN_AUDIT_H
#define SANDMAN_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sm_audit sm_audit;

#define SM_AUDIT_DEFAULT_MAX_BYTES (10LL * 1024 * 1024)
#define SM_AUDIT_DEFAULT_KEEP 5
#define SM_AUDIT_MAX_KEEP 100
#define SM_AUDIT_MAX_LINE (64u * 1024) /* a longer line is cut down (fields shortened) */

typedef struct sm_audit_options {
  const char *file;  /* NULL or "": no file */
  int64_t max_bytes; /* rotate before the file passes this; 0: the default */
  int keep;          /* rotated files kept (FILE.1 .. FILE.keep); -1: the default, 0: none */
  int to_stderr;     /* also write each line to stderr */
} sm_audit_options;

#define SM_AUDIT_OPTIONS_INIT {NULL, 0, -1, 0}

/* Opens the trail (the file's folder is made 0700 if missing; the file is
 * created 0600 on the first event). Thread-safe once open. */
SM_API int sm_audit_open(sm_audit **out, const sm_audit_options *opts, sm_error *err);
SM_API void sm_audit_close(sm_audit *audit);
/* The default trail: <state dir>/audit/audit.jsonl (sm_state_default_dir). */
SM_API int sm_audit_default_file(char *buf, size_t len, sm_error *err);
/* The file, or NULL. Borrowed. */
SM_API const char *sm_audit_file(const sm_audit *audit);

/* One event. Strings are borrowed for the call; NULL (or -1 for numbers)
 * leaves a field out. */
typedef struct sm_audit_event {
  const char *name;       /* the event table's row: "call.allowed", see sm_audit_event_names */
  double time;            /* epoch seconds; 0: now */
  const char *message;    /* one human sentence: why */
  const char *rule;       /* the rule that decided ("agents.bot.tools.deny: web_* matches web_fetch") */
  const char *request_id; /* correlates the events of one API request */
  /* who */
  const char *agent, *user, *project, *run_id, *worker, *tool;
  const char *src_ip;     /* the client's address (token refused, egress) */
  /* what */
  const char *sandbox;    /* container name */
  const char *mode;       /* per_tool, per_run, ... */
  const char *lease_id;
  /* egress */
  const char *dst_host, *dst_ip;
  int dst_port;           /* 0: none */
  int64_t bytes_in, bytes_out; /* -1: none */
  double duration_ms;     /* < 0: none */
  /* more fields for the event's "unmapped" object (borrowed; NULL: none) */
  json_object *detail;
} sm_audit_event;

#define SM_AUDIT_EVENT_INIT                                                                     \
  {NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
   NULL, 0, -1, -1, -1.0, NULL}

/* Appends one event. An unknown name is SM_EINVAL (nothing written). A
 * failed write is SM_EIO; the caller decides whether that stops it (the
 * library logs and carries on). audit NULL: nothing, 0. */
SM_API int sm_audit_record(sm_audit *audit, const sm_audit_event *ev, sm_error *err);

/* The event as its JSON object (caller owns it): what sm_audit_record
 * writes, for tests and for callers that send events elsewhere. */
SM_API int sm_audit_event_to_json(const sm_audit_event *ev, json_object **out, sm_error *err);
/* NULL-terminated list of the known event names. */
SM_API const char *const *sm_audit_event_names(void);

/* ---- reading ---- */

typedef struct sm_audit_filter {
  double since;       /* epoch seconds; 0: from the start */
  const char *agent;  /* NULL: any */
  const char *run_id; /* NULL: any */
  int denied_only;    /* only events with disposition Blocked */
} sm_audit_filter;

#define SM_AUDIT_FILTER_INIT {0, NULL, NULL, 0}

/* 1 if the parsed event passes the filter. */
SM_API int sm_audit_filter_match(const sm_audit_filter *f, json_object *event);

/* Called for each matching event, oldest first (event borrowed for the
 * call). Return 0 to go on, anything else to stop (returned by the reader). */
typedef int (*sm_audit_event_fn)(void *ud, json_object *event);

/* Reads FILE.keep .. FILE.1 then FILE (keep: how many rotated files to look
 * at; -1: the default). Lines that are not JSON objects (a cut line) are
 * skipped and counted in *out_skipped (may be NULL). A missing file is an
 * empty trail. */
SM_API int sm_audit_read(const char *file, int keep, const sm_audit_filter *filter,
                  sm_audit_event_fn fn, void *ud, size_t *out_skipped, sm_error *err);
/* sm_audit_read, then waits for new lines (following rotation) until
 * *stop becomes non-zero, polling every poll_ms (0: 250 ms). */
SM_API int sm_audit_follow(const char *file, int keep, const sm_audit_filter *filter,
                    sm_audit_event_fn fn, void *ud, volatile int *stop, int poll_ms,
                    sm_error *err);

#ifdef __cplusplus
}
#endif
#endif
