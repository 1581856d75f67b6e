/* sandman-agent call TOKEN ARGS...: a helper call's own first line.
 *
 * Every call's first process prints the call's preamble before anything
 * else (docs/run.md; the host's side is src/lib/sandbox/preamble.c):
 *   sandman-call TOKEN PID START OOM
 * its pid, its start time in clock ticks since boot (/proc/self/stat field
 * 22) and the memory cgroup's oom_kill counter so far ("-" when the cgroup
 * does not say). A tool's call gets it from the shell wrapper
 * (sm_exec_wrapper_script), which then execs the tool; a helper call (one
 * of sandman-agent's own commands) prints it itself, the same line for the
 * same process, and runs the command in that process: no shell and no
 * second exec per call (about 1.3 ms of a code run or a files call). */
#ifndef SANDMAN_AGENT_CALL_PREAMBLE_H
#define SANDMAN_AGENT_CALL_PREAMBLE_H

#include <stddef.h>

/* The preamble line for this process into out (with its newline): its
 * length, or -1 when the token is not one word of at most 64 bytes or
 * /proc/self/stat cannot be read. */
int agent_call_preamble(const char *token, char *out, size_t cap);

/* Writes it on fd 1: 0, or -1 (nothing written: the call must not run). */
int agent_call_preamble_print(const char *token);

#endif
