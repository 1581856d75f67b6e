/* Internal to src/lib/sandbox: the engine's thaw of a frozen sandbox on a
 * thread of its own, beside the call it is for (thaw_job.c,
 * docs/state.md). The call's answer can go once the sandbox's agent has
 * answered it, before the engine answers the unpause; the thaw's record
 * and audit row are still written, after the engine's answer, and the
 * sandbox cannot be paused, snapshotted or stopped until they are: the
 * job holds its own hold on the sandbox's busy lock until it ends. */
#ifndef SANDMAN_SANDBOX_THAW_JOB_H
#define SANDMAN_SANDBOX_THAW_JOB_H

#include <json-c/json.h>

#include <sandman/engine.h>
#include <sandman/error.h>

#include "sandbox/context.h"

/* The runner's jobs: sandbox_thaws_free waits for every one to end. */
typedef struct sandbox_thaws sandbox_thaws;
sandbox_thaws *sandbox_thaws_new(void);
void sandbox_thaws_free(sandbox_thaws *thaws);
/* Waits until no job of sandbox name (NULL: of any) runs: a call into it
 * then finds the thaw's record written (NULL thaws: returns). */
void sandbox_thaws_wait(sandbox_thaws *thaws, const char *name);
/* 1 when a job of sandbox name runs that its call left once answered
 * (sandbox_thaw_job_leave): the agent ran that call, the sandbox runs. */
int sandbox_thaws_answered(sandbox_thaws *thaws, const char *name);

typedef struct sandbox_thaw_job sandbox_thaw_job;

/* Starts the thaw of sandbox name (container id, frozen by sandman:
 * sandbox_rest_thaw_finish) on a clone of e, who (taken) naming it in the
 * audit row. 0 with *out, or an error (no hold, no clone, no thread, no
 * ctx->thaws): nothing started, the caller thaws it itself. */
int sandbox_thaw_job_start(const sandbox_ctx *ctx, sm_engine *e, const char *name, const char *id,
                           json_object *who, sandbox_thaw_job **out, sm_error *err);
/* 1 once the engine has answered the thaw. */
int sandbox_thaw_job_done(sandbox_thaw_job *j);
/* Waits for the thaw and ends the job: the thaw's result (0, or the
 * engine's error in err), *thawed 1 when this thaw did it (0: it was not
 * paused any more). */
int sandbox_thaw_job_wait(sandbox_thaw_job *j, int *thawed, sm_error *err);
/* The caller does not wait: the job ends by itself when the thaw has
 * (its result is in the record, its audit row and the log). */
void sandbox_thaw_job_leave(sandbox_thaw_job *j);

#endif
