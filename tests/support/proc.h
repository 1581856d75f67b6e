/* Shared by the tests: a process as /proc says it is. */
#ifndef SANDMAN_TESTS_PROC_H
#define SANDMAN_TESTS_PROC_H

#include <sys/types.h>

/* The state letter (R, S, Z, ...) and parent of pid from /proc/PID/stat;
 * 0, or -1 when there is no such process. Either out may be NULL. */
int tp_stat(pid_t pid, char *state, pid_t *ppid);

#endif
