/* Internal to src/lib/sandbox: the labels a sandbox carries about itself beyond
 * its keys (meta.c): io.sandman.cpu, .memory, .pids, .disk, .network,
 * .idle-timeout on every sandbox; io.sandman.resource, .template,
 * .timeout and .label.<key> on one made as a resource (sm_sandbox_meta). */
#ifndef SANDMAN_SANDBOX_META_H
#define SANDMAN_SANDBOX_META_H

#include <json-c/json.h>

#include <sandman/error.h>
#include <sandman/sandbox.h>
#include <sandman/run.h>

/* 0 when m (may be NULL) can be written as labels; SM_EINVAL why not. */
int sandbox_meta_check(const sm_sandbox_meta *m, sm_error *err);
/* Adds req's resource labels (and its meta's, if any) to labels. */
void sandbox_meta_labels(json_object *labels, const sm_run_request *req);

#endif
