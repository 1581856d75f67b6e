/* Internal to src/lib/sandbox: a new or restarted container's /workspace
 * filled from a saved tar (ws_fill.c): a fork's, a rollback's new
 * container's, a stopped sandbox's on its resume. */
#ifndef SANDMAN_SANDBOX_WS_FILL_H
#define SANDMAN_SANDBOX_WS_FILL_H

#include <sandman/engine.h>
#include <sandman/error.h>

#include "sandbox/agent.h"

/* What the agent's unpacker can take of a tar, in *verdict: WS_FILL_AGENT when every
 * entry is one it extracts as the tar says (a regular file, directory,
 * symbolic link, or hard link to a regular file earlier in the tar; no
 * mode bits past 0777, no pax record but names, sizes and times) and every
 * entry is owned by uid:gid; else WS_FILL_ENGINE, with the first reason in
 * why. The tar is read from fd (pread: its offset stays); past max_entries (0:
 * 4,000,000) the engine. 0, or an error (out of memory). */
enum { WS_FILL_ENGINE = 0, WS_FILL_AGENT = 1 };
int sandbox_ws_fill_scan(int fd, long uid, long gid, long max_entries, int *verdict, char *why,
                         size_t why_len, sm_error *err);

/* Fills container id's /workspace (running, its volume empty or as its
 * image made it) from the tar at path. When the scan says the agent can
 * (and user is "UID:GID", not root), sandman's unpacker does it as that
 * user (the agent installed first, noted in agents, which may be NULL):
 * with session (SM_AGENT_OPEN or SM_AGENT_OPEN_INSTALLED, sessions on in
 * agents) over an agent session opened that way and parked afterwards for
 * the sandbox's next call, else (0) over an engine exec; when
 * the scan says no, or the agent cannot be installed, the engine's archive
 * upload (sandbox_ws_restore), owners as saved. *how (may be NULL) gets
 * "agent" or "engine". */
int sandbox_ws_fill(sandbox_agents *agents, int session, sm_engine *e, const char *id,
                    const char *user, const char *path, const char **how, sm_error *err);

#endif
