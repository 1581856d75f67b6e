/* POST /v1/sandboxes: the policy of what a new sandbox may be, and its
 * making (create_policy.c). */
#ifndef SANDMAN_SERVER_CREATE_POLICY_H
#define SANDMAN_SERVER_CREATE_POLICY_H

#include "server/server_core.h"

/* Checks the token (a worker token against the body's worker_key first),
 * the body and the configuration's bounds, makes the sandbox and answers
 * its description (201); 409 when the sandbox of that run exists. */
void server_sandbox_create(sm_server *srv, const char *body, size_t len, int control,
                           const char *token, server_answer *a);

#endif
