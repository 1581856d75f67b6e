/* Internal to src/lib/mcp: what the streamable HTTP transport needs of a
 * session beyond the public API (session.c). */
#ifndef SANDMAN_MCP_SESSION_H
#define SANDMAN_MCP_SESSION_H

#include <stddef.h>

#include <sandman/mcp.h>

/* sm_mcp_session_handle_for, and *status: the HTTP status the answer goes
 * with (0: 200; 400 or 404 for the 2026-07-28 revision's refusals). */
int mcp_session_answer(sm_mcp_session *s, void *request, const char *msg, size_t len,
                       volatile int *cancel, char **answer, size_t *answer_len, int *status,
                       sm_error *err);
/* 1 while the session has tasks running or results kept (it must not end
 * for being idle). */
int mcp_session_busy(sm_mcp_session *s);

#endif
