/* Internal to src/lib/sandbox: engine execs of sandman's own in a sandbox (not
 * the tool's call): chmod of /tmp, installing the agent, opening an agent
 * session, the swarm backend's node checks. */
#ifndef SANDMAN_SANDBOX_HELPER_H
#define SANDMAN_SANDBOX_HELPER_H

#include <stddef.h>

#include <json-c/json.h>

#include <sandman/engine.h>
#include <sandman/error.h>

#include "common/buf.h"

/* The ExecConfig of a helper: argv, user (NULL: the container's), working
 * directory "/", output attached, stdin when attach_stdin. */
json_object *sandbox_exec_config(const char *const *argv, size_t argc, const char *user,
                                 int attach_stdin);
/* Runs argv in container cid through an engine exec: stdin from in (NULL:
 * none), stdout kept in out (capped; NULL: dropped), the exit code in
 * *exit_code (NULL: not waited for). */
int sandbox_exec_helper(sm_engine *e, const char *cid, const char *const *argv, size_t argc,
                        const char *user, sm_read_fn in, void *in_ud, double timeout_s,
                        common_buf *out, int *exit_code, sm_error *err);

#endif
