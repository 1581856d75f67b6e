/* The sandbox's other processes stopped while `sandman-agent tar --stop`
 * reads /workspace (proc_stop.c), and continued after. */
#ifndef SANDMAN_AGENT_PROC_STOP_H
#define SANDMAN_AGENT_PROC_STOP_H

#include <stddef.h>
#include <sys/types.h>

typedef struct agent_proc_stop {
  pid_t *pids; /* the processes this stopped: the only ones continued */
  size_t n, cap;
} agent_proc_stop;

/* Stops (SIGSTOP) every other process this one may signal, waits (up to
 * 2 s) until each of them is stopped in all its threads, and checks that
 * no process is left running that the user's tools could have started:
 * one of another user is allowed only when it is root's and this is not
 * root (the engine's init and sandman's own helpers; a tool runs as the
 * sandbox's user with no-new-privileges and cannot start one). 0, or
 * AGENT_TAR_CANNOT with why on stderr (what it stopped is continued). */
int agent_proc_stop_all(agent_proc_stop *s);
/* Continues what agent_proc_stop_all stopped; frees the list. */
void agent_proc_continue_all(agent_proc_stop *s);

#endif
