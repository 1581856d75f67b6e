/* Shared inside src/lib/ops (format.c): reports, labels and copies. */
#ifndef SANDMAN_OPS_FORMAT_H
#define SANDMAN_OPS_FORMAT_H

#include <sandman/ops.h>

/* Hard cap on the sandboxes and volumes one call handles: the engine's
 * answer is capped by the client too, this bounds what we allocate. */
#define OPS_MAX_ITEMS 100000

/* Appends an item to report->removed (removed != 0) or report->spared.
 * SM_ENOMEM or SM_ETOOBIG on failure. */
int ops_report_add(sm_ops_report *report, int removed, sm_ops_item_kind kind, const char *id,
                   const char *name, int failed, sm_error *err, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));

/* Appends a lifecycle move (the sandbox went to state) to report->moved. */
int ops_report_move(sm_ops_report *report, const char *id, const char *name, const char *state,
                    const char *reason, sm_error *err);

/* Removes one sandbox for the lifecycle (reap.c): under the removal locks,
 * deciding again there as a reap with older_than_s and remove_after_s set
 * to remove_after_s would (a call may have used it since); the outcome,
 * with reason why, lands in report as a reap's would. */
int ops_remove_idle(const sm_ops_scope *scope, const sm_ops_sandbox *sb, double remove_after_s,
                    const char *why, sm_ops_report *report, sm_error *err);

/* A label's value from an engine Labels object, or NULL. */
const char *ops_label(json_object *labels, const char *key);

/* The sandbox's mode, project, run, worker, agent and owner from labels. */
void ops_sandbox_labels(json_object *labels, sm_ops_sandbox *out);

/* What the labels say beyond the keys: principal, resource, template,
 * resources, life, the owner's labels. */
void ops_sandbox_describe(json_object *labels, sm_ops_sandbox *out);
/* Those fields into the sandbox's JSON object o. */
void ops_sandbox_describe_json(json_object *o, const sm_ops_sandbox *sb);

/* Copies src into dst (always NUL-terminated; NULL copies ""). */
void ops_copy(char *dst, size_t len, const char *src);

#endif
